package owner

import (
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// The answers and bodies below complete the JSON shapes of docs/admin-api.md: each transport
// sends them as they are, and the node API's client (admin.Client) reads them back. Field
// order follows the keys' sorted order, the bytes the API sent before these types existed.

// ErrorBody is every error answer of the admin API and the node API.
type ErrorBody struct {
	Error  string       `json:"error"`
	Status string       `json:"status,omitempty"` // "already_decided" or "expired" for a decision
	Fields []FieldError `json:"fields,omitempty"`
}

// ConsentList is the answer of GET /api/consent; Lookup only when a user_code was asked about.
type ConsentList struct {
	Lookup   *CodeLookup      `json:"lookup,omitempty"`
	Requests []ConsentRequest `json:"requests"`
}

// GrantList is the answer of GET /api/grants.
type GrantList struct {
	Grants []Grant `json:"grants"`
}

// GrantAnswer is the answer of POST /api/grants/{id}/revoke.
type GrantAnswer struct {
	Grant Grant `json:"grant"`
}

// BrandList is the answer of PUT and DELETE /api/brands/{id}: every brand after the change.
type BrandList struct {
	Brands []Brand `json:"brands"`
}

// PauseAnswer is the answer of POST /v1/gateway/pause and /v1/gateway/resume.
type PauseAnswer struct {
	Paused bool `json:"paused"`
}

// TokenRotated is the answer of POST /v1/admin/token; it never carries the token (A6).
type TokenRotated struct {
	Rotated       bool `json:"rotated"`
	SessionsEnded bool `json:"sessionsEnded"`
}

// SignInLink is the answer of POST /v1/admin/sign-in-link: a one-time link, valid ExpiresIn
// seconds (A1).
type SignInLink struct {
	ExpiresIn int    `json:"expiresIn"`
	Link      string `json:"link"`
}

// CodexPathRequest is the body of PUT /api/codex/path ("" forgets the Codex named before).
type CodexPathRequest struct {
	Path string `json:"path"`
}

// FunnelRequest is the body of POST /api/reachability/funnel; On is required.
type FunnelRequest struct {
	On *bool `json:"on"`
}

// Validate is the one rule for a decision body, wherever the owner decides (C8).
func (r DecisionRequest) Validate() error {
	switch {
	case r.UserCode == "" || len(r.UserCode) > 32:
		return fmt.Errorf("%w: userCode is required (XXXX-XXXX)", ErrInvalid)
	case r.Decision != DecisionAllow && r.Decision != DecisionDeny:
		return fmt.Errorf(`%w: decision must be "allow" or "deny"`, ErrInvalid)
	case r.Decision == DecisionAllow && r.Duration == "":
		return errDuration // an Allow names how long it lasts; a Deny may leave it out
	case r.TokensPerDay != nil && *r.TokensPerDay < 0:
		return fmt.Errorf("%w: tokensPerDay must be 0 (no limit) or a number of tokens a day", ErrInvalid)
	}
	_, err := durationOf(r.Duration)
	return err
}

// Validate: On is required, so that a body without it turns nothing on or off; SetFunnel
// takes *On once it holds.
func (r FunnelRequest) Validate() error {
	if r.On == nil {
		return fmt.Errorf(`%w: "on" (true or false) is required`, ErrInvalid)
	}
	return nil
}

// CheckID is the rule of PUT /api/brands/{id}: the body is the brand in the address.
func (b Brand) CheckID(id string) error {
	if string(b.ID) != id {
		return &FieldErrors{Fields: []FieldError{{Field: "id", Message: fmt.Sprintf("must be %q, the brand in the address", id)}}}
	}
	return nil
}

// ParseReceiptQuery reads the query of GET /api/receipts and /api/receipts/export (agent,
// brand, status, from, to, cursor, limit); limit is used when the query gives none.
func ParseReceiptQuery(q url.Values, limit int) (ReceiptFilter, error) {
	f := ReceiptFilter{Agent: q.Get("agent"), Brand: q.Get("brand"), Status: q.Get("status"), Cursor: q.Get("cursor"), Limit: limit}
	for name, v := range map[string]string{"agent": f.Agent, "brand": f.Brand, "status": f.Status, "cursor": f.Cursor} {
		if len(v) > 512 {
			return f, fmt.Errorf("%s is too long: %w", name, ErrInvalid)
		}
	}
	for name, dst := range map[string]*time.Time{"from": &f.From, "to": &f.To} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return f, fmt.Errorf("%s must be an RFC 3339 time: %w", name, ErrInvalid)
			}
			*dst = t
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxReceiptLimit {
			return f, fmt.Errorf("limit must be 1 to %d: %w", MaxReceiptLimit, ErrInvalid)
		}
		f.Limit = n
	}
	return f, nil
}
