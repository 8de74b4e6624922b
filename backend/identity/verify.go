// Package identity verifies personal-agent identity JWTs (docs/wire.md, "The identity JWT"): any
// issuer may call, so keys are discovered from the token's own iss through an SSRF-safe client,
// cached per exact issuer, and refreshed under rate limits (docs/threats.md, J1–J30).
package identity

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/limit"
	"github.com/aether/aether/backend/verified"
)

// allowedAlgs are the asymmetric algorithms accepted (J1, J2): none and HMAC never reach a key.
var allowedAlgs = []string{"EdDSA", "ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}

// Limits on claim sizes: they end up in logs, keys and the store.
const (
	maxIssuerBytes  = 1024
	maxSubjectBytes = 1024
)

// Identity is a verified personal agent. The agent is the pair (Issuer, Subject), never the
// subject alone.
type Identity struct {
	domain.Agent
	ExpiresAt time.Time
}

// Verifier checks identity JWTs. It is safe for concurrent use.
type Verifier struct {
	cfg        Config
	parser     *jwt.Parser
	clients    [2]*http.Client // by scope
	newIssuers *limit.Buckets  // issuers not yet cached, per client (J18, F5)
	fetchSlots chan struct{}   // global fetch semaphore (J18)
	clientSlot *limit.Slots    // fetches in flight, per client (F6)
	fetches    sync.WaitGroup

	mu      sync.RWMutex
	issuers map[string]*issuer

	seen *verified.Cache[seenToken] // tokens accepted before (remembered)
}

// seenTokens bounds the tokens remembered: an hour of a few thousand agents.
const seenTokens = 4096

// New returns a Verifier. It panics when cfg.Audience is empty: a verifier without an audience
// would have nothing to bind tokens to this node.
func New(cfg Config) *Verifier {
	if cfg.Audience == "" {
		panic("identity.New: Config.Audience is required")
	}
	cfg = cfg.withDefaults()
	v := &Verifier{
		cfg: cfg,
		parser: jwt.NewParser(
			jwt.WithValidMethods(allowedAlgs),
			jwt.WithStrictDecoding(),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(cfg.Leeway),
			jwt.WithAudience(cfg.Audience),
			jwt.WithTimeFunc(cfg.Now),
		),
		newIssuers: limit.NewBuckets(cfg.NewIssuerBurst, cfg.NewIssuerEvery),
		fetchSlots: make(chan struct{}, cfg.MaxConcurrentFetches),
		clientSlot: limit.NewSlots(max(1, cfg.MaxConcurrentFetches/4)),
		issuers:    make(map[string]*issuer),
		seen:       verified.New[seenToken](seenTokens),
	}
	v.clients[scopePublic] = newClient(&v.cfg, scopePublic)
	v.clients[scopeLoopback] = newClient(&v.cfg, scopeLoopback)
	return v
}

// Verify checks raw (the bearer token, without "Bearer ") and returns the identity it proves.
// clientIP is the caller's address (an IP, or host:port as in http.Request.RemoteAddr), used to
// rate-limit fetches for new issuers. Every failure
// is an *Error; errors.Is(err, ErrRateLimited) marks the ones to answer with 429.
func (v *Verifier) Verify(ctx context.Context, raw string, clientIP string) (Identity, error) {
	if len(raw) > v.cfg.MaxTokenBytes {
		return Identity{}, errTooLarge // J26: before any parsing
	}
	if id, ok := v.remembered(raw); ok {
		return id, nil
	}
	if err := prepass(raw); err != nil {
		return Identity{}, err
	}
	claims := &jwt.RegisteredClaims{}
	var with checkedWith
	tok, err := v.parser.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		return v.keyFor(ctx, t, claims, clientIP, &with)
	})
	if err != nil {
		return Identity{}, classify(tok, err)
	}
	id := Identity{Agent: domain.Agent{Issuer: claims.Issuer, Subject: claims.Subject}, ExpiresAt: claims.ExpiresAt.Time}
	// Valid until exp with leeway, as checkClaims counts it (now < exp + leeway).
	v.seen.Put(raw, seenToken{id: id, with: with}, id.ExpiresAt.Add(v.cfg.Leeway-time.Nanosecond))
	return id, nil
}

// checkedWith is the issuer and the key set a token's signature was checked with.
type checkedWith struct {
	is *issuer
	ks *keySet
}

// seenToken is a token Verify accepted: what it proved, and with which keys.
type seenToken struct {
	id   Identity
	with checkedWith
}

// remembered is an identity Verify proved from these exact bytes before, as long as the keys
// that checked it are still the issuer's, cached and not due for a refresh (else the full
// check runs, and refreshes them). Everything else the check decided is fixed by the bytes.
func (v *Verifier) remembered(raw string) (Identity, bool) {
	now := v.cfg.Now()
	s, ok := v.seen.Get(raw, now)
	if !ok || s.with.is.keys.Load() != s.with.ks || now.Sub(s.with.ks.fetchedAt) > v.cfg.RefreshInterval {
		return Identity{}, false
	}
	v.mu.RLock()
	cached := v.issuers[s.id.Issuer] == s.with.is
	v.mu.RUnlock()
	if !cached {
		return Identity{}, false
	}
	s.with.is.lastUsed.Store(now.UnixNano())
	return s.id, true
}

// classify maps a golang-jwt failure to an *Error. Failures raised in keyFor pass through.
func classify(tok *jwt.Token, err error) *Error {
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return errMalformed
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return errAlg // alg missing or unknown to golang-jwt
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		if tok == nil || tok.Method == nil || kindFor[tok.Method.Alg()] == 0 {
			return errAlg
		}
		return errSignature
	case errors.Is(err, jwt.ErrTokenExpired):
		return errExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return errNotYetValid
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return errIatFuture
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return errAudience
	default:
		return newErr(CodeClaimsInvalid, "the token's claims are invalid", err)
	}
}

// keyFor runs after golang-jwt has decoded the token and checked alg against the allow list,
// before the signature. It applies the header and claim rules first, so a token that cannot
// pass never causes a fetch, then finds the key under the token's own issuer only (J19).
// jku, x5u and jwk headers are never read (J7).
func (v *Verifier) keyFor(ctx context.Context, t *jwt.Token, c *jwt.RegisteredClaims, clientIP string, with *checkedWith) (any, error) {
	if _, ok := t.Header["crit"]; ok {
		return nil, errCrit // no extension is understood, so any crit must fail (RFC 7515 §4.1.11)
	}
	if typ, ok := t.Header["typ"]; ok {
		s, isStr := typ.(string)
		if !isStr {
			return nil, errMalformed
		}
		if strings.EqualFold(strings.TrimPrefix(strings.ToLower(s), "application/"), v.cfg.DelegationType) {
			return nil, errDelegation // J25
		}
	}
	kid, hasKID := "", false
	if k, ok := t.Header["kid"]; ok {
		s, isStr := k.(string)
		if !isStr || s == "" || len(s) > v.cfg.MaxKIDBytes {
			return nil, errKIDInvalid // J6
		}
		kid, hasKID = s, true
	}
	now := v.cfg.Now()
	if err := v.checkClaims(c, now); err != nil {
		return nil, err
	}
	client := clientKey(clientIP)
	is, err := v.issuerFor(c.Issuer, client, now)
	if err != nil {
		return nil, err
	}
	key, ks, kerr := v.keyFromIssuer(ctx, is, t, kid, hasKID, client, now)
	*with = checkedWith{is: is, ks: ks}
	return key, kerr
}

// checkClaims applies the claim rules before any key is looked up (J20–J25). golang-jwt checks
// exp, nbf, iat and aud again after the signature.
func (v *Verifier) checkClaims(c *jwt.RegisteredClaims, now time.Time) *Error {
	if c.Issuer == "" || len(c.Issuer) > maxIssuerBytes {
		return errIssuerInvalid
	}
	if v.cfg.NodeIssuer != "" && strings.TrimSuffix(c.Issuer, "/") == strings.TrimSuffix(v.cfg.NodeIssuer, "/") {
		return errDelegation // our own tokens are never identities (J25, G9)
	}
	if c.Subject == "" || len(c.Subject) > maxSubjectBytes {
		return errSubject
	}
	if c.ExpiresAt == nil {
		return errExpMissing
	}
	if c.IssuedAt == nil {
		return errIatMissing
	}
	if !now.Before(c.ExpiresAt.Add(v.cfg.Leeway)) {
		return errExpired
	}
	if c.IssuedAt.After(now.Add(v.cfg.Leeway)) {
		return errIatFuture
	}
	if c.NotBefore != nil && c.NotBefore.After(now.Add(v.cfg.Leeway)) {
		return errNotYetValid
	}
	if c.ExpiresAt.Sub(c.IssuedAt.Time) > v.cfg.MaxLifetime {
		return errLifetime
	}
	for _, a := range c.Audience {
		if a == v.cfg.Audience {
			return nil
		}
	}
	return errAudience
}

// keyFromIssuer serves the key from the issuer's cached set, fetching or refreshing it under
// the cache policy: keys are used up to MaxStaleness (refreshed in the background after
// RefreshInterval), an unknown kid refreshes at most once per UnknownKIDInterval and waits at
// most UnknownKIDWait (J5), and a first fetch is shared by every waiter (J15).
func (v *Verifier) keyFromIssuer(ctx context.Context, is *issuer, t *jwt.Token, kid string, hasKID bool, client string, now time.Time) (any, *keySet, error) {
	ks := is.keys.Load()
	if ks == nil || now.Sub(ks.fetchedAt) > v.cfg.MaxStaleness {
		fl, err := v.startFetch(is, client, now)
		if err != nil {
			return nil, nil, err
		}
		if err := wait(ctx, fl, 0); err != nil {
			return nil, nil, err
		}
		if ks = is.keys.Load(); ks == nil || now.Sub(ks.fetchedAt) > v.cfg.MaxStaleness {
			return nil, nil, errIssuerStale
		}
		key, kerr := ks.key(ctx, t, kid, hasKID)
		return key, ks, kerr
	}
	if now.Sub(ks.fetchedAt) > v.cfg.RefreshInterval {
		_, _ = v.startFetch(is, client, now) // background; failures are negative-cached and logged
	}
	key, err := ks.key(ctx, t, kid, hasKID)
	if err != errKIDUnknown {
		return key, ks, err
	}
	return v.refreshForKID(ctx, is, ks, t, kid, client, now)
}

var errIssuerStale = newErr(CodeIssuerUnavailable, "the issuer's keys could not be refreshed", nil)

// refreshForKID handles a kid missing from the cached set. An attacker can mint endless random
// kids, so the refresh is allowed once per window per issuer; everyone else gets a fast 401.
func (v *Verifier) refreshForKID(ctx context.Context, is *issuer, ks *keySet, t *jwt.Token, kid, client string, now time.Time) (any, *keySet, error) {
	is.mu.Lock()
	last := ks.fetchedAt
	if is.lastAttempt.After(last) {
		last = is.lastAttempt
	}
	due := now.Sub(last) >= v.cfg.UnknownKIDInterval || is.flight != nil
	is.mu.Unlock()
	if !due {
		return nil, nil, errKIDUnknown
	}
	fl, err := v.startFetch(is, client, now)
	if err != nil {
		return nil, nil, errKIDUnknown
	}
	if err := wait(ctx, fl, v.cfg.UnknownKIDWait); err != nil {
		return nil, nil, errKIDUnknown
	}
	ks = is.keys.Load()
	key, kerr := ks.key(ctx, t, kid, true)
	return key, ks, kerr
}

// key selects the token's key: keyfunc looks the kid up among the keys of the kind the token's
// alg needs and checks the JWK's alg and use. Without a kid, only an issuer with exactly one
// signing key can be used (J4); keyfunc would otherwise offer every key.
func (ks *keySet) key(ctx context.Context, t *jwt.Token, kid string, hasKID bool) (any, error) {
	if hasKID {
		if _, ok := ks.kids[kid]; !ok {
			return nil, errKIDUnknown
		}
	} else if ks.n != 1 {
		return nil, errKIDRequired
	}
	kf := ks.byKind[kindFor[t.Method.Alg()]]
	if kf == nil {
		return nil, errKeyAlg
	}
	// keyfunc's errors (the kid belongs to a key of another kind, or the JWK's alg or use does
	// not fit) quote the kid, so they are not passed on.
	key, err := kf.KeyfuncCtx(ctx)(t)
	if err != nil {
		return nil, errKeyAlg
	}
	if set, ok := key.(jwt.VerificationKeySet); ok {
		// No kid: keyfunc returns the kind's keys that fit alg, here at most the issuer's one.
		if len(set.Keys) != 1 {
			return nil, errKeyAlg
		}
		return set.Keys[0], nil
	}
	return key, nil
}
