package consent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/policy"
	"github.com/aether/aether/backend/store"
	"github.com/golang-jwt/jwt/v5"
)

// Grant statuses on the sharing page.
const (
	GrantActive  = "active"
	GrantRevoked = "revoked"
	GrantExpired = "expired"
)

// GrantClaims are the claims of a signed grant (JWS typ pact-grant+jwt): iss
// is the node's publicUrl, sub the agent's sub, jti the grant id, exp absent
// for a grant that lasts until revoked.
type GrantClaims struct {
	jwt.RegisteredClaims
	AgentIss   string            `json:"agent_iss"`
	Brand      string            `json:"brand"`
	Capability string            `json:"capability"`
	Workspace  string            `json:"workspace"`
	AccessMode domain.AccessMode `json:"access_mode"`
	Scope      string            `json:"scope"`
	// TokensPerDay is the model budget the owner set at approval; absent = the brand's, 0 =
	// no limit (docs/model-gateway.md).
	TokensPerDay *int64 `json:"tokens_per_day,omitempty"`
}

// GrantView is a grant as the sharing page lists it.
type GrantView struct {
	ID         domain.GrantID    `json:"id"`
	Agent      domain.Agent      `json:"agent"`
	Brand      domain.BrandID    `json:"brand"`
	Capability string            `json:"capability"`
	Workspace  string            `json:"workspace"`
	AccessMode domain.AccessMode `json:"accessMode"`
	Scope      string            `json:"scope"`
	IssuedAt   time.Time         `json:"issuedAt"`
	ExpiresAt  *time.Time        `json:"expiresAt"` // null: until revoked
	RevokedAt  *time.Time        `json:"revokedAt"`
	LastUsedAt *time.Time        `json:"lastUsedAt"`
	Uses       int64             `json:"uses"`
	Status     string            `json:"status"` // GrantActive, GrantRevoked or GrantExpired
	JWS        string            `json:"jws"`
	// TokensPerDay is the budget set at approval; nil = the brand's, 0 = no limit.
	TokensPerDay *int64 `json:"tokensPerDay,omitempty"`
}

func (s *Service) grantView(g *store.Grant, now time.Time) GrantView {
	v := GrantView{
		ID: g.ID, Agent: g.Agent, Brand: g.Brand, Capability: g.Capability,
		Workspace: g.Workspace, AccessMode: g.AccessMode, Scope: g.Scope, IssuedAt: g.IssuedAt,
		ExpiresAt: g.ExpiresAt, RevokedAt: g.RevokedAt, LastUsedAt: g.LastUsedAt, Uses: g.Uses,
		Status: GrantActive, JWS: g.JWS, TokensPerDay: g.TokensPerDay,
	}
	switch {
	case g.RevokedAt != nil:
		v.Status = GrantRevoked
	case !g.Live(now):
		v.Status = GrantExpired
	}
	return v
}

// newGrant builds and signs the grant an approval of flow f writes.
func (s *Service) newGrant(f *store.DeviceFlow, b policy.Brand, t Terms, now time.Time) (*store.Grant, error) {
	exp, err := t.Duration.expiry(now)
	if err != nil {
		return nil, err
	}
	g := &store.Grant{
		ID: domain.GrantID("g_" + randomToken(16)), Agent: f.Agent, Brand: b.ID,
		Capability: b.Capability, Workspace: b.WorkspaceDir, AccessMode: b.AccessMode, Scope: f.Scope,
		IssuedAt: now, ExpiresAt: exp, TokensPerDay: t.TokensPerDay,
	}
	claims := GrantClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: s.PublicURL(), Subject: g.Agent.Subject, ID: string(g.ID), IssuedAt: jwt.NewNumericDate(now),
		},
		AgentIss: g.Agent.Issuer, Brand: string(g.Brand), Capability: g.Capability, Workspace: g.Workspace,
		AccessMode: g.AccessMode, Scope: g.Scope, TokensPerDay: g.TokensPerDay,
	}
	if exp != nil {
		claims.ExpiresAt = jwt.NewNumericDate(*exp)
	}
	if g.JWS, err = s.key.Sign(GrantType, claims); err != nil {
		return nil, fmt.Errorf("sign grant: %w", err)
	}
	return g, nil
}

// VerifyGrant checks that jws is a grant signed by this node's key (EdDSA, typ
// pact-grant+jwt, iss publicUrl) and returns its claims. It says who granted
// what; whether the grant is still in force is its status in Grants.
func (s *Service) VerifyGrant(jws string) (*GrantClaims, error) {
	var c GrantClaims
	// Time claims are not validated: an expired grant still verifies as signed.
	if err := s.key.Set().Verify(jws, GrantType, &c, jwt.WithoutClaimsValidation()); err != nil {
		return nil, fmt.Errorf("verify grant: %w", err)
	}
	if c.Issuer != s.PublicURL() {
		return nil, fmt.Errorf("verify grant: issuer %q is not this node", c.Issuer)
	}
	return &c, nil
}

// Grants lists every grant, newest first.
func (s *Service) Grants(ctx context.Context) ([]GrantView, error) {
	if err := s.db.Flush(ctx); err != nil { // use counts queued by CheckDelegation
		return nil, err
	}
	gs, err := s.db.ListGrants(ctx)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]GrantView, len(gs))
	for i := range gs {
		out[i] = s.grantView(&gs[i], now)
	}
	return out, nil
}

// Revoke revokes grant id: every token minted from it fails its next check
// (V1), durably (V3). It is idempotent. The first revocation also denies the
// pending requests of the same agent for the same brand, and emits
// grant_revoked (and request_decided for each request it ended).
// Re-approving later writes a new grant with a new id; tokens of this one stay
// invalid (V5).
func (s *Service) Revoke(ctx context.Context, id domain.GrantID) (*GrantView, error) {
	now := s.now()
	g, revoked, denied, err := s.db.RevokeGrant(ctx, id, now)
	if errors.Is(err, store.ErrGrantNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	v := s.grantView(g, now)
	if revoked {
		agent := g.Agent
		s.log.Info("grant revoked", "grant", g.ID, "agent_iss", agent.Issuer, "agent_sub", agent.Subject, "brand", g.Brand, "denied_requests", len(denied))
		for _, f := range denied {
			req := s.request(f)
			s.emit(Event{Kind: EventRequestDecided, Request: &req, Agent: agent, Brand: f.Brand, Outcome: OutcomeDenied})
		}
		s.emit(Event{Kind: EventGrantRevoked, Grant: &v, Agent: agent, Brand: g.Brand, Outcome: OutcomeRevoked})
	}
	return &v, nil
}

// TokensPerDay is a grant's model budget: the one the owner set at approval, else b's, its
// brand as served now (docs/model-gateway.md); 0 = no limit.
func (s *Service) TokensPerDay(ctx context.Context, id domain.GrantID, b policy.Brand) (int64, error) {
	g, err := s.db.GrantByID(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("read grant %s's model budget: %w", id, err)
	}
	if g.TokensPerDay != nil {
		return *g.TokensPerDay, nil
	}
	return b.TokensPerDay, nil
}
