// Package consent is the delegation side of the node: the RFC 8628 device flow
// an agent runs to ask for a brand, the owner's decision on it, the signed grant
// an approval writes, the short delegation tokens minted from a live grant and
// their check on every turn, revocation, and the events the UI and desktop
// notifications follow. Every state lives in pact.sqlite, so a restart loses
// nothing (D18).
//
// Tokens are only ever minted from a grant for a verified agent identity, never
// from another token: the chain is always owner → grant → token, depth one (G6).
package consent

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/fanout"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/limit"
	"github.com/aether/aether/backend/policy"
	"github.com/aether/aether/backend/store"
	"github.com/aether/aether/backend/verified"
)

// Config tunes the service. Zero values take the defaults noted.
type Config struct {
	PublicURL          string           // iss of every token and grant; card URLs (aud) hang below it
	ConsentURL         string           // https://127.0.0.1:<admin-port>/pact/consent, the verification_uri
	Now                func() time.Time // default time.Now
	FlowTTL            time.Duration    // device flow lifetime: default 10m, clamped to 5m–10m
	Interval           time.Duration    // minimum poll interval: default 5s
	MaxPendingPerAgent int              // default 5
	MaxPendingPerSite  int              // pending requests of all agents of one issuer site: default a tenth of MaxPendingTotal (F1)
	MaxPendingTotal    int              // default 1000
	NewFlowBurst       int              // new requests per issuer site in a burst: default 20 (F2)
	NewFlowEvery       time.Duration    // then one more per site every: default 3s
	MaxGuesses         int              // wrong user codes tolerated per request: default 5 (the next locks it)
	MaxUnknownCodes    int              // unknown device codes per agent identity in a burst, then one every 6s: default 10 (D11, F4)
	TokenTTL           time.Duration    // delegation token lifetime: default 1h
	Logger             *slog.Logger     // default slog.Default()
}

const (
	leeway            = 30 * time.Second // clock skew tolerated on token times
	maxScopeLen       = 256              // longer scope strings are refused unread (D4)
	maxTokenLen       = 8 << 10          // a delegation token is well under 1 KiB
	seenTokens        = 4096             // delegation tokens remembered as verified: an hour of a few thousand agents
	slowDownStep      = 5 * time.Second  // RFC 8628 §3.5
	flowRetention     = 24 * time.Hour   // finished flows are deleted this long after expiry
	unknownCodeRefill = 6 * time.Second  // one more unknown device code per agent every
	userCodeAttempts  = 8
)

// Service runs device flows, grants and delegation tokens over one store and
// the node key. It is safe for concurrent use.
type Service struct {
	db      *store.DB
	key     *keys.Key
	cfg     Config
	log     *slog.Logger
	unknown *limit.Buckets // unknown device codes, per agent identity (D11, F4)
	flows   *limit.Buckets // new device flows, per issuer site (F2)
	// newUserCode is swapped in tests to force collisions (D17).
	newUserCode func() string
	seen        *verified.Cache[delegationClaims] // delegation tokens that verified (verifyToken)
	// publicURL is cfg.PublicURL, and then what SetPublicURL made it.
	publicURL atomic.Pointer[string]

	events *fanout.Hub[Event]
}

// New builds the service.
func New(db *store.DB, key *keys.Key, cfg Config) *Service {
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.FlowTTL == 0 {
		cfg.FlowTTL = 10 * time.Minute
	}
	// RFC 8628 leaves the lifetime open; the node keeps it within 5–10 minutes (docs/wire.md).
	cfg.FlowTTL = min(max(cfg.FlowTTL, 5*time.Minute), 10*time.Minute)
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	cfg.Interval = cfg.Interval.Truncate(time.Second) // stored and announced in whole seconds
	if cfg.MaxPendingPerAgent <= 0 {
		cfg.MaxPendingPerAgent = 5
	}
	if cfg.MaxPendingTotal <= 0 {
		cfg.MaxPendingTotal = 1000
	}
	if cfg.MaxPendingPerSite <= 0 {
		// It takes ten sites to fill the node: one issuer never takes the others' room.
		cfg.MaxPendingPerSite = max(1, cfg.MaxPendingTotal/10)
	}
	if cfg.NewFlowBurst <= 0 {
		cfg.NewFlowBurst = 20
	}
	if cfg.NewFlowEvery <= 0 {
		cfg.NewFlowEvery = 3 * time.Second
	}
	if cfg.MaxGuesses <= 0 {
		cfg.MaxGuesses = 5
	}
	if cfg.MaxUnknownCodes <= 0 {
		cfg.MaxUnknownCodes = 10
	}
	if cfg.TokenTTL <= 0 {
		cfg.TokenTTL = time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Service{
		db: db, key: key, cfg: cfg, log: cfg.Logger,
		unknown:     limit.NewBuckets(cfg.MaxUnknownCodes, unknownCodeRefill),
		flows:       limit.NewBuckets(cfg.NewFlowBurst, cfg.NewFlowEvery),
		newUserCode: newUserCode,
		events:      fanout.New[Event](subscriberBuffer),
		seen:        verified.New[delegationClaims](seenTokens),
	}
	s.SetPublicURL(cfg.PublicURL)
	return s
}

// SetPublicURL changes the node's publicUrl: the iss of the tokens and grants made from now
// on and the root of their audiences. Tokens made under the old one no longer verify, so
// their agents are asked again (docs/deploy.md, "Switching publicUrl").
func (s *Service) SetPublicURL(u string) {
	u = strings.TrimRight(u, "/")
	s.publicURL.Store(&u)
}

// PublicURL is the node's publicUrl as consent uses it.
func (s *Service) PublicURL() string { return *s.publicURL.Load() }

// now is the injected clock at the store's precision (Unix ms), so values read
// back equal values written.
func (s *Service) now() time.Time { return s.cfg.Now().UTC().Truncate(time.Millisecond) }

// Audience is the aud of a brand's delegation tokens: its card URL.
func (s *Service) Audience(brand domain.BrandID) string {
	return s.PublicURL() + "/a2a/" + string(brand) + "/.well-known/agent-card.json"
}

// brandsOf is the brands of p, the policy the caller serves (docs/architecture.md, "Consent"):
// none before the node has loaded one.
func brandsOf(p *policy.Policy) []policy.Brand {
	if p == nil || p.Pact == nil {
		return nil
	}
	return p.Pact.Brands
}

// OAuth error codes (RFC 6749 §5.2, RFC 8628 §3.5).
const (
	CodeInvalidRequest       = "invalid_request"
	CodeInvalidClient        = "invalid_client"
	CodeInvalidGrant         = "invalid_grant"
	CodeInvalidScope         = "invalid_scope"
	CodeUnsupportedGrantType = "unsupported_grant_type"
	CodeAuthorizationPending = "authorization_pending"
	CodeSlowDown             = "slow_down"
	CodeAccessDenied         = "access_denied"
	CodeExpiredToken         = "expired_token"
)

// OAuthError is an error answer of the device authorization or token endpoint:
// the body is {"error": Code, "error_description": Description}, sent with the
// HTTP Status (400; 401 for invalid_client; 429 for the caps) and, for a cap,
// Retry-After. Status is a plain int so that consent stays free of net/http.
type OAuthError struct {
	Code        string        `json:"error"`
	Description string        `json:"error_description,omitempty"`
	Status      int           `json:"-"`
	RetryAfter  time.Duration `json:"-"`
}

func (e *OAuthError) Error() string { return e.Code + ": " + e.Description }

func oauthError(code, desc string) *OAuthError {
	status := 400
	if code == CodeInvalidClient {
		status = 401
	}
	return &OAuthError{Code: code, Description: desc, Status: status}
}

// tooMany is the 429 answer of the caps (D2, D11, F1–F4): slow_down, as RFC 8628 names
// backing off, with when to retry, which the description says too.
func tooMany(desc string, wait time.Duration) *OAuthError {
	return &OAuthError{Code: CodeSlowDown, Description: fmt.Sprintf("%s; retry in %d s", desc, limit.RetryAfter(wait)),
		Status: 429, RetryAfter: wait}
}

// Reasons a delegation is refused; the gateway puts them in the AUTH_REQUIRED data part.
const (
	ReasonMissing    = "missing"
	ReasonExpired    = "expired"
	ReasonRevoked    = "revoked"
	ReasonWrongBrand = "wrong_brand"
	ReasonWrongAgent = "wrong_agent"
	ReasonInvalid    = "invalid"
)

// DelegationError says why a delegation token does not authorize a turn.
type DelegationError struct {
	Reason string
	Detail string
}

func (e *DelegationError) Error() string { return fmt.Sprintf("delegation %s: %s", e.Reason, e.Detail) }

// Owner-side errors.
var (
	ErrNotFound       = errors.New("no such request or grant")
	ErrAlreadyDecided = errors.New("this request was already decided")
	ErrExpired        = errors.New("this request has expired; the agent must ask again")
	ErrLocked         = errors.New("too many wrong user codes: this request is locked; the agent must ask again")
	ErrWrongCode      = errors.New("the user code does not match this request")
	ErrBadUserCode    = errors.New("a user code is 8 letters from BCDFGHJKLMNPQRSTVWXZ, shown as XXXX-XXXX")
	ErrBadDuration    = errors.New("unknown grant duration")
	ErrBadBudget      = errors.New("a grant's model tokens a day must be 0 (no limit) or more")
	ErrBrandChanged   = errors.New("the brand changed since the agent asked; the request is closed and the agent must ask again")
)

// checkAgent refuses a missing identity, and the node's own issuer: the node's
// tokens are never agent identities, so no token is minted from a token (G6).
func (s *Service) checkAgent(a domain.Agent) *OAuthError {
	if a.Issuer == "" || a.Subject == "" {
		return oauthError(CodeInvalidClient, "a verified agent identity (Bearer identity JWT) is required")
	}
	if strings.TrimRight(a.Issuer, "/") == s.PublicURL() {
		return oauthError(CodeInvalidClient, "the node's own tokens are not agent identities")
	}
	return nil
}
