package identity

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
)

const (
	discoveryOIDC  = "/.well-known/openid-configuration"
	discoveryOAuth = "/.well-known/oauth-authorization-server"
	minRSABits     = 2048
)

// statusError is a non-200 answer; a 404 (or other status) from the OpenID document sends
// discovery on to the OAuth metadata document.
type statusError struct{ code int }

func (e *statusError) Error() string { return fmt.Sprintf("HTTP status %d", e.code) }

// fetchKeys runs discovery and loads the JWKS of one issuer, all under ctx (the whole-fetch
// deadline, J15).
func (v *Verifier) fetchKeys(ctx context.Context, is *issuer) (*keySet, *Error) {
	client := v.clients[is.scope]
	jwksURI, ferr := v.discover(ctx, client, is.name)
	if ferr != nil {
		return nil, ferr
	}
	u, err := url.Parse(jwksURI)
	if err != nil || u.Opaque != "" {
		return nil, newErr(CodeJWKSURIInvalid, "the issuer's jwks_uri is not allowed", err)
	}
	if err := checkFetchURL(u, is.scope); err != nil {
		return nil, newErr(CodeJWKSURIInvalid, "the issuer's jwks_uri is not allowed", err)
	}
	body, err := v.get(ctx, client, u.String())
	if err != nil {
		return nil, fetchErr(ctx, "fetch JWKS", err)
	}
	return v.parseJWKS(ctx, body)
}

func (v *Verifier) discover(ctx context.Context, client *http.Client, iss string) (string, *Error) {
	base := strings.TrimSuffix(iss, "/")
	body, err := v.get(ctx, client, base+discoveryOIDC)
	if _, ok := errors.AsType[*statusError](err); ok {
		body, err = v.get(ctx, client, base+discoveryOAuth)
	}
	if err != nil {
		return "", fetchErr(ctx, "fetch discovery document", err)
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", newErr(CodeIssuerUnavailable, "the issuer's discovery document is invalid", err)
	}
	// Exact match (J12): no trailing-slash or case normalisation.
	if doc.Issuer != iss {
		return "", newErr(CodeIssuerMismatch, "the issuer's discovery document names another issuer", nil)
	}
	if doc.JWKSURI == "" {
		return "", newErr(CodeJWKSURIInvalid, "the issuer's discovery document has no jwks_uri", nil)
	}
	return doc.JWKSURI, nil
}

// get fetches one document with the body cap (J14).
func (v *Verifier) get(ctx context.Context, client *http.Client, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, &statusError{code: resp.StatusCode}
	}
	if resp.ContentLength > v.cfg.MaxBodyBytes {
		return nil, errBodyTooLarge
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, v.cfg.MaxBodyBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > v.cfg.MaxBodyBytes {
		return nil, errBodyTooLarge
	}
	return body, nil
}

var errBodyTooLarge = errors.New("response body exceeds the size cap")

func isBlocked(err error) bool {
	_, ok := errors.AsType[*blockedError](err)
	return ok
}

func isOwnListener(err error) bool {
	_, ok := errors.AsType[*ownListenerError](err)
	return ok
}

// fetchErr turns a transport failure into its reason code.
func fetchErr(ctx context.Context, what string, err error) *Error {
	switch {
	case isOwnListener(err):
		return newErr(CodeIssuerIsNode, "the issuer's address is one of this node's own listeners", fmt.Errorf("%s: %w", what, err))
	case isBlocked(err):
		return newErr(CodeIssuerBlocked, "the issuer's address is not allowed", fmt.Errorf("%s: %w", what, err))
	case errors.Is(err, errBodyTooLarge):
		return newErr(CodeJWKSTooLarge, "the issuer's documents are too large", fmt.Errorf("%s: %w", what, err))
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		return newErr(CodeFetchTimeout, "the issuer did not answer in time", fmt.Errorf("%s: %w", what, err))
	default:
		return newErr(CodeIssuerUnavailable, "the issuer's keys could not be fetched", fmt.Errorf("%s: %w", what, err))
	}
}

// keyKind is the key type an alg needs. Keys are stored per kind, so keyfunc's kid lookup only
// sees keys the token's alg can use.
type keyKind uint8

const (
	kindEd25519 keyKind = iota + 1
	kindP256
	kindP384
	kindP521
	kindRSA
)

// sigUses is keyfunc's key-use whitelist: signing keys, or keys that do not say (RFC 7517 §4.2).
var sigUses = []jwkset.USE{jwkset.UseSig, ""}

// keySet is immutable once built; a refresh swaps the whole set. Each key kind has its own
// keyfunc over a jwkset memory storage: keyfunc does the kid lookup and the JWK alg and use
// checks, and a kid shared by keys of different types (RFC 7517 §4.5) still finds the right one.
// If one kid names two keys of the same kind, the first in the JWKS is used (jwkset's rule).
type keySet struct {
	byKind    [kindRSA + 1]keyfunc.Keyfunc // nil: the issuer has no key of that kind
	kids      map[string]struct{}          // every signing key's kid: tells an unknown kid from a mismatched one
	n         int                          // signing keys, for J4
	fetchedAt time.Time
}

// parseJWKS loads a JWK Set. Anything suspicious fails the whole set, so a refresh that meets
// it keeps the previous keys (J16): more than MaxKeys keys, a malformed key, a symmetric key
// (J3) or an RSA key under 2048 bits (J17). Encryption keys and key types we do not know are
// skipped, as RFC 7517 §5 asks.
func (v *Verifier) parseJWKS(ctx context.Context, body []byte) (*keySet, *Error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, newErr(CodeJWKSInvalid, "the issuer's JWKS is invalid", err)
	}
	if len(set.Keys) > v.cfg.MaxKeys {
		return nil, newErr(CodeJWKSInvalid, "the issuer's JWKS has too many keys", fmt.Errorf("%d keys", len(set.Keys)))
	}
	ks := &keySet{kids: make(map[string]struct{}, len(set.Keys)), fetchedAt: v.cfg.Now()}
	var byKind [kindRSA + 1][]jwkset.JWK
	for i, raw := range set.Keys {
		var m jwkset.JWKMarshal
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, newErr(CodeJWKSInvalid, "the issuer's JWKS has a malformed key", fmt.Errorf("key %d: %w", i, err))
		}
		switch m.KTY {
		case jwkset.KtyOct:
			return nil, newErr(CodeKeySymmetric, "the issuer's JWKS contains a symmetric key", fmt.Errorf("key %d", i))
		case jwkset.KtyEC, jwkset.KtyOKP, jwkset.KtyRSA:
		default:
			continue
		}
		if m.USE == jwkset.UseEnc || len(m.KEYOPS) > 0 && !slices.Contains(m.KEYOPS, jwkset.KeyOpsVerify) ||
			m.KTY == jwkset.KtyOKP && m.CRV != jwkset.CrvEd25519 {
			continue
		}
		if len(m.KID) > v.cfg.MaxKIDBytes {
			continue // no token could name it (J6)
		}
		// Public parts only: private members are ignored, and x5u is never fetched (no GetX5U).
		jwk, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		if err != nil {
			return nil, newErr(CodeJWKSInvalid, "the issuer's JWKS has a malformed key", fmt.Errorf("key %d: %w", i, err))
		}
		var kind keyKind
		switch pub := jwk.Key().(type) {
		case ed25519.PublicKey:
			kind = kindEd25519
		case *ecdsa.PublicKey:
			switch pub.Curve {
			case elliptic.P256():
				kind = kindP256
			case elliptic.P384():
				kind = kindP384
			case elliptic.P521():
				kind = kindP521
			}
		case *rsa.PublicKey:
			if pub.N.BitLen() < minRSABits {
				return nil, newErr(CodeKeyTooWeak, "the issuer's JWKS has an RSA key under 2048 bits", fmt.Errorf("key %d: %d bits", i, pub.N.BitLen()))
			}
			kind = kindRSA
		}
		if kind == 0 {
			return nil, newErr(CodeJWKSInvalid, "the issuer's JWKS has an unsupported key", fmt.Errorf("key %d: %T", i, jwk.Key()))
		}
		byKind[kind] = append(byKind[kind], jwk)
		ks.kids[m.KID] = struct{}{}
		ks.n++
	}
	for kind, jwks := range byKind {
		if len(jwks) == 0 {
			continue
		}
		store := jwkset.NewMemoryStorage()
		if err := store.KeyReplaceAll(ctx, jwks); err != nil {
			return nil, newErr(CodeJWKSInvalid, "the issuer's JWKS could not be stored", err)
		}
		kf, err := keyfunc.New(keyfunc.Options{Storage: store, UseWhitelist: sigUses})
		if err != nil {
			return nil, newErr(CodeJWKSInvalid, "the issuer's JWKS could not be stored", err)
		}
		ks.byKind[kind] = kf
	}
	return ks, nil
}

// kindFor is the key kind each allowed alg needs.
var kindFor = map[string]keyKind{
	"EdDSA": kindEd25519,
	"ES256": kindP256, "ES384": kindP384, "ES512": kindP521,
	"RS256": kindRSA, "RS384": kindRSA, "RS512": kindRSA,
	"PS256": kindRSA, "PS384": kindRSA, "PS512": kindRSA,
}
