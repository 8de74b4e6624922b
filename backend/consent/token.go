package consent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/policy"
	"github.com/aether/aether/backend/store"
	"github.com/golang-jwt/jwt/v5"
)

// JWS typ headers of the node's own objects; each verifier accepts only its own.
const (
	DelegationTokenType = "pact-delegation+jwt"
	GrantType           = "pact-grant+jwt"
)

// delegationClaims are the claims of a delegation token (docs/wire.md).
type delegationClaims struct {
	jwt.RegisteredClaims
	AgentIss string `json:"agent_iss"`
	Scope    string `json:"scope"`
	Grant    string `json:"grant"`
}

// Delegation is what a verified delegation token authorizes.
type Delegation struct {
	GrantID   domain.GrantID
	Scope     string
	Brand     domain.BrandID
	Agent     domain.Agent
	ExpiresAt time.Time // the token's expiry
}

// mint signs a delegation token for grant g: the grant's scope, for the
// grant's agent and brand, expiring after TokenTTL or with the grant, whichever
// comes first.
func (s *Service) mint(g *store.Grant, now time.Time) (*Token, error) {
	exp := now.Add(s.cfg.TokenTTL)
	if g.ExpiresAt != nil && g.ExpiresAt.Before(exp) {
		exp = *g.ExpiresAt
	}
	claims := delegationClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    s.PublicURL(),
			Subject:   g.Agent.Subject,
			Audience:  jwt.ClaimStrings{s.Audience(g.Brand)},
			ID:        randomToken(16),
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(exp), // truncated to the second: never after the grant
		},
		AgentIss: g.Agent.Issuer,
		Scope:    g.Scope,
		Grant:    string(g.ID),
	}
	jws, err := s.key.Sign(DelegationTokenType, claims)
	if err != nil {
		return nil, fmt.Errorf("mint delegation token: %w", err)
	}
	return &Token{AccessToken: jws, TokenType: "Bearer", ExpiresIn: claims.ExpiresAt.Unix() - now.Unix(), Scope: g.Scope}, nil
}

// CheckDelegation decides whether token authorizes a turn of agent (the
// caller's verified identity) on brandID as p, the policy the caller serves, offers
// it. It verifies the token with the node
// key (EdDSA only, its typ, iss, aud, exp/iat with a small leeway), binds it to
// the caller (sub and agent_iss must be the caller: a stolen token is useless,
// G8), then re-reads its grant on every call, so a revocation stops every token
// at its next use (G7, V1), and counts the use. Tokens are reusable until they
// expire (no single-use jti; G11).
//
// A refusal is a *DelegationError whose Reason the gateway reports; any other
// error is the store failing, not the token.
func (s *Service) CheckDelegation(ctx context.Context, token string, agent domain.Agent, brandID domain.BrandID, p *policy.Policy) (*Delegation, error) {
	d, err := s.checkDelegation(ctx, token, agent, brandID, p)
	if de := (*DelegationError)(nil); errors.As(err, &de) {
		s.log.Info("delegation refused", "reason", de.Reason, "detail", de.Detail, "agent_iss", agent.Issuer, "agent_sub", agent.Subject, "brand", brandID)
	}
	return d, err
}

func refuse(reason, detail string) *DelegationError {
	return &DelegationError{Reason: reason, Detail: detail}
}

func (s *Service) checkDelegation(ctx context.Context, token string, agent domain.Agent, brandID domain.BrandID, p *policy.Policy) (*Delegation, error) {
	if token == "" {
		return nil, refuse(ReasonMissing, "no PACT-Delegation token")
	}
	if len(token) > maxTokenLen {
		return nil, refuse(ReasonInvalid, "token too long")
	}
	c, err := s.verifyToken(token)
	if errors.Is(err, jwt.ErrTokenExpired) {
		return nil, refuse(ReasonExpired, "the delegation token expired; get a new one")
	}
	if err != nil {
		return nil, refuse(ReasonInvalid, "the delegation token does not verify: "+err.Error())
	}
	if c.Subject != agent.Subject || c.AgentIss != agent.Issuer {
		return nil, refuse(ReasonWrongAgent, "the delegation token belongs to another agent")
	}
	if !slices.Contains(c.Audience, s.Audience(brandID)) {
		for _, a := range c.Audience {
			if strings.HasPrefix(a, s.PublicURL()+"/a2a/") {
				return nil, refuse(ReasonWrongBrand, "the delegation token is for another brand")
			}
		}
		return nil, refuse(ReasonInvalid, "the delegation token is not for this node")
	}
	b, ok := p.Brand(brandID)
	if !ok {
		return nil, refuse(ReasonWrongBrand, "unknown brand")
	}
	now := s.now()
	g, err := s.db.GrantByID(ctx, domain.GrantID(c.Grant))
	if errors.Is(err, store.ErrGrantNotFound) {
		return nil, refuse(ReasonInvalid, "the delegation token names an unknown grant")
	}
	if err != nil {
		return nil, fmt.Errorf("check delegation: %w", err)
	}
	if g.Agent != agent || g.Brand != brandID {
		return nil, refuse(ReasonInvalid, "the delegation token does not match its grant")
	}
	if refusal := grantRefusal(g, now); refusal != nil {
		return nil, refusal
	}
	if !scopeSubset(c.Scope, g.Scope) { // G5
		return nil, refuse(ReasonInvalid, "the delegation token's scope exceeds its grant")
	}
	if !covers(g, b) {
		return nil, refuse(ReasonRevoked, "the brand's terms changed since the grant; ask the owner again")
	}
	// Count the use without making the turn wait for it (the grant is as the
	// store has it now; a revocation racing this call stops the next one).
	s.db.RecordUseSoon(g.ID, now)
	return &Delegation{GrantID: g.ID, Scope: c.Scope, Brand: brandID, Agent: agent, ExpiresAt: c.ExpiresAt.Time.UTC()}, nil
}

// verifyToken checks the token's signature, typ, iss, exp and iat. A token that passed before
// is not checked again until its exp (with leeway) has passed: the same bytes under the same
// key verify the same (the service's key never changes; a rotation makes a new service). The
// rules after this one run on every call.
func (s *Service) verifyToken(token string) (delegationClaims, error) {
	if c, ok := s.seen.Get(token, s.now()); ok {
		return c, nil
	}
	var c delegationClaims
	err := s.key.Set().Verify(token, DelegationTokenType, &c,
		jwt.WithIssuer(s.PublicURL()), jwt.WithExpirationRequired(), jwt.WithIssuedAt(),
		jwt.WithLeeway(leeway), jwt.WithTimeFunc(s.now))
	if err != nil {
		return delegationClaims{}, err
	}
	s.seen.Put(token, c, c.ExpiresAt.Add(leeway-time.Nanosecond)) // valid while now < exp + leeway
	return c, nil
}

// GrantStands re-checks a grant that a turn got past the gate with: it must still be live,
// unrevoked and cover its brand as p, the policy the node serves now, offers it. A turn that waited for its
// workspace asks right before Codex starts (W13); a *DelegationError says why not.
func (s *Service) GrantStands(ctx context.Context, grantID domain.GrantID, brandID domain.BrandID, p *policy.Policy) error {
	g, err := s.db.GrantByID(ctx, grantID)
	if errors.Is(err, store.ErrGrantNotFound) {
		return refuse(ReasonInvalid, "the grant no longer exists")
	}
	if err != nil {
		return fmt.Errorf("check grant: %w", err)
	}
	if refusal := grantRefusal(g, s.now()); refusal != nil {
		return refusal
	}
	b, ok := p.Brand(brandID)
	if !ok {
		return refuse(ReasonWrongBrand, "the brand is no longer offered")
	}
	if !covers(g, b) {
		return refuse(ReasonRevoked, "the brand's terms changed since the grant; ask the owner again")
	}
	return nil
}

func grantRefusal(g *store.Grant, now time.Time) *DelegationError {
	if g.RevokedAt != nil {
		return refuse(ReasonRevoked, "the owner revoked the grant")
	}
	if !g.Live(now) {
		return refuse(ReasonExpired, "the grant expired; ask the owner again")
	}
	return nil
}

// scopeSubset reports whether every scope token of child is in parent.
func scopeSubset(child, parent string) bool {
	have := strings.Fields(parent)
	want := strings.Fields(child)
	if len(want) == 0 {
		return false
	}
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// covers reports whether grant g still covers brand b as the policy now has
// it: a grant for read-only review of one folder must not silently become
// read-write, or another folder, when policy.json changes.
func covers(g *store.Grant, b policy.Brand) bool {
	return g.Brand == b.ID && scopeSubset(b.Scope.ID, g.Scope) &&
		g.AccessMode == b.AccessMode && g.Workspace == b.WorkspaceDir && g.Capability == b.Capability
}
