package owner

import (
	"context"
	"errors"
	"fmt"

	"github.com/aether/aether/backend/consent"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/site"
)

// Pending lists the pending consent requests, oldest first.
func (s *Service) Pending(ctx context.Context) ([]ConsentRequest, error) {
	reqs, err := s.cfg.Consent.Pending(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]ConsentRequest, 0, len(reqs))
	for _, r := range reqs {
		out = append(out, s.requestDTO(r))
	}
	return out, nil
}

// LookupCode says what became of the request with that user code, so that a consent link to a
// request that is no longer pending can say why.
func (s *Service) LookupCode(ctx context.Context, code string) (CodeLookup, error) {
	r, status, err := s.cfg.Consent.Lookup(ctx, code)
	switch {
	case errors.Is(err, consent.ErrNotFound), errors.Is(err, consent.ErrBadUserCode):
		return CodeLookup{UserCode: code, Status: "unknown"}, nil
	case err != nil:
		return CodeLookup{}, err
	}
	out := CodeLookup{UserCode: r.UserCode, Status: string(status)}
	switch status {
	case domain.FlowApproved, domain.FlowRedeemed:
		out.Status = "allowed"
	case domain.FlowLocked:
		out.Status = "expired"
	}
	return out, nil
}

// Decide records the owner's decision for request id bound to req.UserCode (C8), from the
// Consent page or a desktop notification. Errors: ErrNotFound, ErrCodeMismatch,
// ErrAlreadyDecided (C6), ErrExpired (C7), ErrInvalid.
func (s *Service) Decide(ctx context.Context, id string, req DecisionRequest) (DecisionResult, error) {
	if err := req.Validate(); err != nil {
		return DecisionResult{}, err
	}
	dur, _ := durationOf(req.Duration)
	terms := consent.Terms{Duration: dur, TokensPerDay: req.TokensPerDay}
	d, err := s.cfg.Consent.DecideTerms(ctx, id, req.UserCode, req.Decision == DecisionAllow, terms, s.served())
	if err != nil {
		return DecisionResult{}, consentErr(err)
	}
	res := DecisionResult{Status: d.Outcome}
	if d.Grant != nil {
		g := s.grantDTO(*d.Grant)
		res.Grant = &g
	}
	return res, nil
}

// DenyIssuer denies every pending request from the issuer whose registrable domain is
// req.Site (an Agent's Site), in one store transaction, and says how many (C19). The other
// issuers' requests stay pending. ErrInvalid for a missing or malformed site.
func (s *Service) DenyIssuer(ctx context.Context, req DenyIssuerRequest) (DenyIssuerResult, error) {
	if req.Site == "" || len(req.Site) > site.MaxHostLen || site.Of(req.Site) != req.Site {
		return DenyIssuerResult{}, fmt.Errorf("%w: site must be an issuer's registrable domain, as the request's agent.site gives it", ErrInvalid)
	}
	denied, err := s.cfg.Consent.DenySite(ctx, req.Site)
	if err != nil {
		return DenyIssuerResult{}, err
	}
	return DenyIssuerResult{Site: req.Site, Denied: len(denied)}, nil
}

// durationOf maps the UI's choices onto grant lifetimes.
func durationOf(s string) (consent.Duration, error) {
	switch s {
	case "":
		return consent.DefaultDuration, nil
	case Duration1Day:
		return consent.Day, nil
	case Duration30Days:
		return consent.Month, nil
	case DurationForever:
		return consent.Forever, nil
	}
	return "", errDuration
}

var errDuration = fmt.Errorf(`%w: duration must be "1d", "30d" or "forever"`, ErrInvalid)

// consentErr classifies consent's errors by the service's kinds, keeping consent's own words
// for the owner.
func consentErr(err error) error {
	for _, m := range []struct{ from, to error }{
		{consent.ErrNotFound, ErrNotFound},
		{consent.ErrAlreadyDecided, ErrAlreadyDecided},
		{consent.ErrExpired, ErrExpired},
		{consent.ErrLocked, ErrExpired},
		{consent.ErrBrandChanged, ErrExpired},
		{consent.ErrWrongCode, ErrCodeMismatch},
		{consent.ErrBadUserCode, ErrCodeMismatch},
		{consent.ErrBadDuration, ErrInvalid},
	} {
		if errors.Is(err, m.from) {
			return kindError{err, m.to}
		}
	}
	return err
}

// kindError is err, classified as kind.
type kindError struct{ err, kind error }

func (e kindError) Error() string        { return e.err.Error() }
func (e kindError) Is(target error) bool { return target == e.kind }
func (e kindError) Unwrap() error        { return e.err }

// Grants lists the grants, newest first.
func (s *Service) Grants(ctx context.Context) ([]Grant, error) {
	gs, err := s.cfg.Consent.Grants(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Grant, 0, len(gs))
	for _, g := range gs {
		out = append(out, s.grantDTO(g))
	}
	return out, nil
}

// Revoke revokes grant id; revoking a revoked grant returns it unchanged. ErrNotFound.
func (s *Service) Revoke(ctx context.Context, id string) (Grant, error) {
	g, err := s.cfg.Consent.Revoke(ctx, domain.GrantID(id))
	if err != nil {
		return Grant{}, consentErr(err)
	}
	return s.grantDTO(*g), nil
}

// PlausibleUserCode keeps junk out of a consent link's user code before the window or the
// desktop hook shows it; the consent service does the real check when the owner decides.
func PlausibleUserCode(c string) bool {
	if c == "" || len(c) > 16 {
		return false
	}
	for _, r := range c {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == ' ') {
			return false
		}
	}
	return true
}
