package consent

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/policy"
	"github.com/aether/aether/backend/site"
	"github.com/aether/aether/backend/store"
)

// Duration is how long an approval lasts.
type Duration string

const (
	Day     Duration = "day"
	Month   Duration = "month" // 30 days
	Forever Duration = "forever"
	// DefaultDuration applies when the owner picks none.
	DefaultDuration = Month
)

// expiry is the grant expiry for an approval at now; nil is until revoked.
func (d Duration) expiry(now time.Time) (*time.Time, error) {
	var t time.Time
	switch d {
	case Day:
		t = now.Add(24 * time.Hour)
	case Month:
		t = now.Add(30 * 24 * time.Hour)
	case Forever:
		return nil, nil
	default:
		return nil, fmt.Errorf("%w %q: use day, month or forever", ErrBadDuration, string(d))
	}
	return &t, nil
}

// Request is a pending (or looked-up) device authorization request as the
// owner sees it. Display data comes from server state only (C10): this, and the
// brand's name and scope text in the policy the owner's side serves.
type Request struct {
	ID        string         `json:"id"`
	UserCode  string         `json:"userCode"` // XXXX-XXXX
	Agent     domain.Agent   `json:"agent"`
	Brand     domain.BrandID `json:"brand"`
	Scope     string         `json:"scope"`
	CreatedAt time.Time      `json:"createdAt"`
	ExpiresAt time.Time      `json:"expiresAt"`
}

func (s *Service) request(f store.DeviceFlow) Request {
	return Request{
		ID: f.ID, UserCode: FormatUserCode(f.UserCode), Agent: f.Agent,
		Brand: f.Brand, Scope: f.Scope, CreatedAt: f.CreatedAt, ExpiresAt: f.ExpiresAt,
	}
}

// Pending lists the requests awaiting the owner, oldest first.
func (s *Service) Pending(ctx context.Context) ([]Request, error) {
	flows, err := s.db.PendingFlows(ctx, s.now())
	if err != nil {
		return nil, err
	}
	out := make([]Request, len(flows))
	for i, f := range flows {
		out[i] = s.request(f)
	}
	return out, nil
}

// Lookup finds the request of a user code as typed or linked (?user_code=):
// case, spaces and dashes do not matter (D14); any other character or another
// length is ErrBadUserCode without a lookup (D15). A pending request past its
// expiry reports domain.FlowExpired.
func (s *Service) Lookup(ctx context.Context, userCode string) (*Request, domain.FlowStatus, error) {
	code, ok := normalizeUserCode(userCode)
	if !ok {
		return nil, "", ErrBadUserCode
	}
	f, err := s.db.FlowByUserCode(ctx, code)
	if errors.Is(err, store.ErrFlowNotFound) {
		return nil, "", ErrNotFound
	}
	if err != nil {
		return nil, "", err
	}
	status := f.Status
	if status == domain.FlowPending && !s.now().Before(f.ExpiresAt) {
		status = domain.FlowExpired
	}
	r := s.request(*f)
	return &r, status, nil
}

// Decision is the result of the owner's decision.
type Decision struct {
	Request Request    `json:"request"`
	Outcome string     `json:"outcome"` // OutcomeAllowed or OutcomeDenied
	Grant   *GrantView `json:"grant,omitempty"`
}

// Decide records the owner's decision on request requestID, which must come
// with that request's own user code (C8): a mismatch, or a malformed code
// (D15), is a wrong guess, and the guess after MaxGuesses wrong ones locks the
// request (D16, ErrLocked). The decision is one conditional update: of two
// racing decisions exactly one wins, the other gets ErrAlreadyDecided (C6,
// C12). A request past its expiry is ErrExpired and gets no grant (C7). Allow
// writes a grant signed by the node key lasting d (zero: DefaultDuration), for the brand
// as p, the policy the caller serves, offers it now.
func (s *Service) Decide(ctx context.Context, requestID, userCode string, allow bool, d Duration, p *policy.Policy) (*Decision, error) {
	return s.DecideTerms(ctx, requestID, userCode, allow, Terms{Duration: d}, p)
}

// Terms are what an approval sets beyond the brand's: how long it lasts, and the grant's
// own model budget.
type Terms struct {
	Duration Duration // zero: DefaultDuration
	// TokensPerDay is the grant's model tokens a UTC day; nil = the brand's, 0 = no limit
	// (docs/model-gateway.md).
	TokensPerDay *int64
}

// DecideTerms is Decide with the grant's terms.
func (s *Service) DecideTerms(ctx context.Context, requestID, userCode string, allow bool, t Terms, p *policy.Policy) (*Decision, error) {
	if t.Duration == "" {
		t.Duration = DefaultDuration
	}
	now := s.now()
	if _, err := t.Duration.expiry(now); err != nil {
		return nil, err
	}
	if t.TokensPerDay != nil && *t.TokensPerDay < 0 {
		return nil, fmt.Errorf("%w: %d", ErrBadBudget, *t.TokensPerDay)
	}
	dc := &decision{now: now, allow: allow, t: t, p: p}
	dc.code, dc.codeOK = normalizeUserCode(userCode)
	f, err := s.db.UpdateFlow(ctx, requestID, func(f *store.DeviceFlow, _ *store.Grant) (*store.Grant, error) {
		return s.decide(dc, f)
	})
	if errors.Is(err, store.ErrFlowNotFound) {
		return nil, ErrNotFound
	}
	agent := domain.Agent{}
	if f != nil {
		agent = f.Agent
	}
	switch {
	case dc.expiredNow:
		s.emitExpired(*f, OutcomeExpired)
	case dc.locked:
		s.log.Warn("device flow locked after wrong user codes", "flow", f.ID, "agent_iss", agent.Issuer, "agent_sub", agent.Subject)
		s.emitExpired(*f, OutcomeLocked)
	case dc.brandGone:
		req := s.request(*f)
		s.emit(Event{Kind: EventRequestDecided, Request: &req, Agent: agent, Brand: f.Brand, Outcome: OutcomeDenied})
	}
	if err != nil {
		return nil, err
	}
	dec := &Decision{Request: s.request(*f), Outcome: OutcomeDenied}
	if dc.grant != nil {
		dec.Outcome = OutcomeAllowed
		v := s.grantView(dc.grant, now)
		dec.Grant = &v
	}
	s.log.Info("device flow decided", "flow", f.ID, "outcome", dec.Outcome, "grant", f.GrantID, "agent_iss", agent.Issuer, "agent_sub", agent.Subject, "brand", f.Brand)
	s.emit(Event{Kind: EventRequestDecided, Request: &dec.Request, Grant: dec.Grant, Agent: agent, Brand: f.Brand, Outcome: dec.Outcome})
	return dec, nil
}

// decision is one Decide: the owner's answer, and what deciding the flow found.
type decision struct {
	now    time.Time
	code   string // the user code the owner gave, normalized
	codeOK bool   // it is well formed (D15)
	allow  bool
	t      Terms
	p      *policy.Policy // the policy the caller serves

	grant                         *store.Grant // the grant an allow wrote
	expiredNow, locked, brandGone bool
}

// decide is Decide's step inside the flow's write transaction: it checks f's status,
// expiry and user code, and records the decision on f, with the grant to write for an allow.
func (s *Service) decide(dc *decision, f *store.DeviceFlow) (*store.Grant, error) {
	switch f.Status {
	case domain.FlowPending:
	case domain.FlowExpired:
		return nil, ErrExpired
	case domain.FlowLocked:
		return nil, ErrLocked
	default:
		return nil, ErrAlreadyDecided
	}
	if !dc.now.Before(f.ExpiresAt) {
		f.Status = domain.FlowExpired
		dc.expiredNow = true
		return nil, ErrExpired
	}
	if !dc.codeOK || subtle.ConstantTimeCompare([]byte(dc.code), []byte(f.UserCode)) != 1 {
		f.FailedGuesses++
		if f.FailedGuesses > s.cfg.MaxGuesses {
			f.Status = domain.FlowLocked
			f.DecidedAt = &dc.now
			dc.locked = true
			return nil, ErrLocked
		}
		return nil, ErrWrongCode
	}
	if !dc.allow {
		f.Status = domain.FlowDenied
		f.DecidedAt = &dc.now
		return nil, nil
	}
	b, ok := dc.p.Brand(f.Brand)
	if !ok || b.Scope.ID != f.Scope {
		// The owner saw a request for terms that no longer exist: close it.
		f.Status = domain.FlowDenied
		f.DecidedAt = &dc.now
		dc.brandGone = true
		return nil, ErrBrandChanged
	}
	g, err := s.newGrant(f, b, dc.t, dc.now)
	if err != nil {
		return nil, err
	}
	f.Status = domain.FlowApproved
	f.Duration = string(dc.t.Duration)
	f.DecidedAt = &dc.now
	dc.grant = g
	return g, nil
}

// DenySite denies every pending request whose issuer's registrable domain is siteName (as
// site.Of gives it), in one store transaction, and returns them: the owner's answer to a flood
// from one issuer (C19). Other issuers' requests stay pending. Each denial is an ordinary
// decided event, so waiting tasks end REJECTED and polls get access_denied.
func (s *Service) DenySite(ctx context.Context, siteName string) ([]Request, error) {
	now := s.now()
	flows, err := s.db.DenyFlows(ctx, now, func(f store.DeviceFlow) bool {
		return site.OfIssuer(f.Agent.Issuer) == siteName
	})
	if err != nil {
		return nil, err
	}
	out := make([]Request, len(flows))
	ended := map[[2]string]bool{}
	for i, f := range flows {
		out[i] = s.request(f)
		agent := f.Agent
		// A flood's events overrun the subscribers' buffers, so the waiting tasks are ended
		// here rather than left to EndWaitingTasks.
		if k := [2]string{agent.Key(), string(f.Brand)}; !ended[k] {
			ended[k] = true
			if _, err := s.db.RejectAuthRequired(ctx, agent.Key(), f.Brand, deniedReason); err != nil {
				s.log.Warn("could not end waiting tasks", "brand", f.Brand, "err", err)
			}
		}
		s.emit(Event{Kind: EventRequestDecided, Request: &out[i], Agent: agent, Brand: f.Brand, Outcome: OutcomeDenied})
	}
	if len(flows) > 0 {
		s.log.Info("denied every pending request of an issuer", "site", siteName, "requests", len(flows))
	}
	return out, nil
}
