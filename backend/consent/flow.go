package consent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/policy"
	"github.com/aether/aether/backend/site"
	"github.com/aether/aether/backend/store"
)

// FlowStart is the device authorization response (RFC 8628 §3.2).
type FlowStart struct {
	DeviceCode              string `json:"device_code"`
	UserCode                string `json:"user_code"` // XXXX-XXXX
	VerificationURI         string `json:"verification_uri"`
	VerificationURIComplete string `json:"verification_uri_complete"`
	ExpiresIn               int    `json:"expires_in"` // seconds
	Interval                int    `json:"interval"`   // seconds
}

// Token is the token response: the delegation token and what it covers.
type Token struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"` // "Bearer"
	ExpiresIn   int64  `json:"expires_in"` // seconds
	Scope       string `json:"scope"`
}

// StartFlow opens a device authorization request of agent for one brand scope
// (RFC 8628 §3.1–3.2). scope must be exactly one brand's scope id; brand, when
// given, must be the brand that scope belongs to (an empty scope then means
// that brand's). p is the policy the caller serves: its brands are the ones on offer.
// Only the SHA-256 of the device code is stored.
//
// The agents of one issuer site (its registrable domain) share a budget of new
// requests and of pending ones, a tenth of the node's by default, so a flood
// of made-up subjects from one issuer never takes the others' room (F1, F2).
func (s *Service) StartFlow(ctx context.Context, agent domain.Agent, scope string, brand domain.BrandID, p *policy.Policy) (*FlowStart, error) {
	if err := s.checkAgent(agent); err != nil {
		return nil, err
	}
	b, oerr := resolveScope(scope, brand, p)
	if oerr != nil {
		return nil, oerr
	}
	now := s.now()
	siteName := site.OfIssuer(agent.Issuer)
	if ok, wait := s.flows.Take(siteName, now); !ok {
		return nil, tooMany(fmt.Sprintf("the agents of issuer site %s asked for more than %d requests in a burst (one more every %d s)",
			siteName, s.cfg.NewFlowBurst, int(s.cfg.NewFlowEvery/time.Second)), wait)
	}
	deviceCode := randomToken(16)
	f := store.DeviceFlow{
		ID: "df_" + randomToken(12), DeviceCodeHash: hashDeviceCode(deviceCode),
		Agent: agent, Brand: b.ID, Scope: b.Scope.ID,
		Interval: s.cfg.Interval, CreatedAt: now, ExpiresAt: now.Add(s.cfg.FlowTTL),
	}
	lim := store.FlowLimits{PerAgent: s.cfg.MaxPendingPerAgent, PerSite: s.cfg.MaxPendingPerSite, Total: s.cfg.MaxPendingTotal, Site: site.OfIssuer}
	var err error
	for range userCodeAttempts {
		f.UserCode = s.newUserCode()
		if err = s.db.CreateFlow(ctx, f, lim); !errors.Is(err, store.ErrUserCodeTaken) {
			break
		}
	}
	if capErr := (*store.FlowCapError)(nil); errors.As(err, &capErr) {
		s.flows.Give(siteName, now) // nothing was opened
		wait := capErr.Until.Sub(now)
		switch capErr.Cap {
		case store.ErrAgentFlowCap:
			return nil, tooMany(fmt.Sprintf("this agent has %d pending requests, the most one agent may have; wait for the owner or for one to expire", capErr.Limit), wait)
		case store.ErrSiteFlowCap:
			return nil, tooMany(fmt.Sprintf("the agents of issuer site %s have %d pending requests, the most one site may have; wait for the owner or for one to expire", siteName, capErr.Limit), wait)
		default:
			return nil, tooMany(fmt.Sprintf("the node has %d pending requests, its limit", capErr.Limit), wait)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("start device flow: %w", err)
	}
	s.log.Info("device flow started", "flow", f.ID, "agent_iss", agent.Issuer, "agent_sub", agent.Subject, "brand", b.ID)
	req := s.request(f)
	s.emit(Event{Kind: EventRequestAdded, Request: &req, Agent: agent, Brand: b.ID})
	code := FormatUserCode(f.UserCode)
	return &FlowStart{
		DeviceCode:              deviceCode,
		UserCode:                code,
		VerificationURI:         s.cfg.ConsentURL,
		VerificationURIComplete: s.cfg.ConsentURL + "?user_code=" + code,
		ExpiresIn:               int(s.cfg.FlowTTL / time.Second),
		Interval:                int(s.cfg.Interval / time.Second),
	}, nil
}

// errForeignCode marks a device code bound to another agent; it is answered
// exactly like an unknown code, so it is no oracle (D10).
var errForeignCode = errors.New("device code of another agent")

// Poll is one token request with grant_type
// urn:ietf:params:oauth:grant-type:device_code (RFC 8628 §3.4–3.5). The flow is
// read, checked and changed in one write transaction, and the token is minted
// inside it: a revocation commits either before (access_denied) or after the
// token exists (which then fails its next check), never in between (V4).
//
// Unknown codes are counted per agent identity, never per address: behind a
// proxy every agent shares one, and one agent's guesses must not refuse
// another's own code (D11, F4).
func (s *Service) Poll(ctx context.Context, agent domain.Agent, deviceCode string) (*Token, error) {
	if err := s.checkAgent(agent); err != nil {
		return nil, err
	}
	if deviceCode == "" {
		return nil, oauthError(CodeInvalidRequest, "device_code is required")
	}
	now := s.now()
	who := agent.Key()
	// Guessing codes (D11): past the agent's budget, nothing is looked up at all.
	if wait := s.unknown.Wait(who, now); wait > 0 {
		return nil, tooMany(fmt.Sprintf("this agent sent more than %d unknown device codes (one more every %d s)",
			s.cfg.MaxUnknownCodes, int(unknownCodeRefill/time.Second)), wait)
	}
	if !validDeviceCode(deviceCode) {
		s.unknown.Take(who, now)
		return nil, oauthError(CodeInvalidGrant, "unknown device code")
	}
	var (
		tok        *Token
		expiredNow bool
	)
	f, err := s.db.UpdateFlowByDeviceCode(ctx, hashDeviceCode(deviceCode), func(f *store.DeviceFlow, g *store.Grant) (*store.Grant, error) {
		var err error
		tok, expiredNow, err = s.redeem(agent, f, g, now)
		return nil, err
	})
	if errors.Is(err, store.ErrFlowNotFound) || errors.Is(err, errForeignCode) {
		s.unknown.Take(who, now)
		return nil, oauthError(CodeInvalidGrant, "unknown device code")
	}
	if expiredNow {
		s.emitExpired(*f, OutcomeExpired)
	}
	if err != nil {
		return nil, err
	}
	s.log.Info("delegation token issued", "flow", f.ID, "grant", f.GrantID, "agent_iss", agent.Issuer, "agent_sub", agent.Subject, "brand", f.Brand)
	return tok, nil
}

// redeem is Poll's step inside the flow's write transaction: it checks the flow f against
// the polling agent and its status, and mints the token of an approved one whose grant g
// is live. expiredNow: this poll found the pending flow past its expiry and closed it.
func (s *Service) redeem(agent domain.Agent, f *store.DeviceFlow, g *store.Grant, now time.Time) (tok *Token, expiredNow bool, err error) {
	if f.Agent != agent {
		return nil, false, errForeignCode
	}
	if !now.Before(f.ExpiresAt) {
		switch f.Status {
		case domain.FlowPending:
			f.Status = domain.FlowExpired
			return nil, true, oauthError(CodeExpiredToken, "the request expired; start a new one")
		case domain.FlowApproved:
			// The grant stands; only this code is spent.
			return nil, false, oauthError(CodeExpiredToken, "the device code expired before it was redeemed; the owner's grant stands: ask for a token with it")
		}
	}
	switch f.Status {
	case domain.FlowPending:
		last := f.LastPollAt
		f.LastPollAt = &now
		if last != nil && now.Sub(*last) < f.Interval-pollSlack(f.Interval) {
			f.Interval += slowDownStep // sticky: every later poll is held to it (D5)
			return nil, false, oauthError(CodeSlowDown, fmt.Sprintf("poll at most every %d seconds", int(f.Interval/time.Second)))
		}
		return nil, false, oauthError(CodeAuthorizationPending, "waiting for the owner")
	case domain.FlowDenied:
		return nil, false, oauthError(CodeAccessDenied, "the owner denied the request")
	case domain.FlowExpired:
		return nil, false, oauthError(CodeExpiredToken, "the request expired; start a new one")
	case domain.FlowLocked:
		return nil, false, oauthError(CodeExpiredToken, "the request was locked after too many wrong user codes; start a new one")
	case domain.FlowRedeemed:
		return nil, false, oauthError(CodeInvalidGrant, "this device code was already redeemed")
	case domain.FlowApproved:
		f.LastPollAt = &now
		if g == nil || !g.Live(now) {
			return nil, false, oauthError(CodeAccessDenied, "the grant was revoked") // D13
		}
		t, err := s.mint(g, now)
		if err != nil {
			return nil, false, err
		}
		f.Status = domain.FlowRedeemed
		return t, false, nil
	}
	return nil, false, fmt.Errorf("device flow %s in unknown status %q", f.ID, f.Status)
}

// Refresh mints a fresh delegation token for an agent that holds a live grant
// for brand, so an agent whose short token expired need not ask the owner
// again. It is a token request like Poll (the gateway answers it on the token
// endpoint with grant_type urn:aether:params:oauth:grant-type:pact-grant and a
// brand parameter) and needs the agent's identity, never a token: a token
// cannot be turned into another token, nor into more than its grant — the new
// token carries the grant's scope and expires no later than the grant (G6).
// Errors: invalid_grant when there is no live grant for the agent and brand,
// or the brand's terms changed since it was granted (run the device flow);
// invalid_request when p, the policy the caller serves, does not offer brand.
func (s *Service) Refresh(ctx context.Context, agent domain.Agent, brand domain.BrandID, p *policy.Policy) (*Token, error) {
	if err := s.checkAgent(agent); err != nil {
		return nil, err
	}
	b, ok := p.Brand(brand)
	if !ok {
		return nil, oauthError(CodeInvalidRequest, "unknown brand")
	}
	now := s.now()
	var tok *Token
	err := s.db.WithLiveGrant(ctx, agent.Issuer, agent.Subject, brand, now, func(g *store.Grant) error {
		if !covers(g, b) {
			return oauthError(CodeInvalidGrant, "the brand changed since it was granted; run the device flow again")
		}
		var err error
		tok, err = s.mint(g, now)
		return err
	})
	if errors.Is(err, store.ErrGrantNotFound) {
		return nil, oauthError(CodeInvalidGrant, "no live grant for this agent and brand; run the device flow")
	}
	if oerr := (*OAuthError)(nil); errors.As(err, &oerr) {
		return nil, oerr
	}
	if err != nil {
		return nil, fmt.Errorf("refresh delegation: %w", err)
	}
	return tok, nil
}

// pollSlack forgives a poll that arrives a little early: clients poll on a
// timer, and network jitter must not earn them a sticky slow_down.
func pollSlack(interval time.Duration) time.Duration {
	return min(time.Second, interval/5)
}
