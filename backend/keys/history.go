package keys

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Rotation is one rotation statement, checked: the key it retired may have signed receipts up
// to LastSeq and until At, nothing after (docs/wire.md, "Key rotation"; docs/threats.md T13).
type Rotation struct {
	Old, New string
	// LastSeq is the seq of the last receipt Old signed (0: none). HasSeq is false for a
	// version 1 statement, made before statements carried it: it bounds Old by time only.
	LastSeq int64
	HasSeq  bool
	At      time.Time // the statement's iat: when Old stopped signing, to the second
	JWS     string    // the statement, as rotations.jsonl and the JWKS carry it
}

// History is what the node's receipts verify with: every key it signed with and, for each key
// a rotation retired, that rotation (T10, T13).
type History struct {
	Set     Set
	Retired map[string]Rotation // by the retired key's id
}

// CheckSigned says why a receipt numbered seq and signed at signed (its iat) cannot be kid's,
// or returns nil: a retired key signs nothing numbered or dated after its rotation (T13).
func (h History) CheckSigned(kid string, seq int64, signed time.Time) error {
	r, ok := h.Retired[kid]
	switch {
	case !ok:
		return nil
	case r.HasSeq && seq > r.LastSeq:
		return fmt.Errorf("seq %d is after the rotation that retired its key %s at seq %d (%s): a retired key signs nothing after its rotation",
			seq, kid, r.LastSeq, r.At.UTC().Format(time.RFC3339))
	case signed.IsZero():
		return fmt.Errorf("signed by the retired key %s without a signing time (iat), so it cannot be placed before that key's rotation", kid)
	case signed.After(r.At):
		return fmt.Errorf("signed at %s by key %s, which a rotation retired at %s: a retired key signs nothing after its rotation",
			signed.UTC().Format(time.RFC3339), kid, r.At.UTC().Format(time.RFC3339))
	}
	return nil
}

// Successors are the keys that followed kid, nearest first.
func (h History) Successors(kid string) []string {
	var out []string
	for r, ok := h.Retired[kid]; ok && len(out) < len(h.Retired); r, ok = h.Retired[r.New] {
		out = append(out, r.New)
	}
	return out
}

// JWKS renders the history for /.well-known/jwks.json: each retired key carries the statement
// that retired it as "pact_rotation", so an agent holding only the JWKS bounds it too.
func (h History) JWKS() JWKS {
	doc := h.Set.JWKS()
	for i, k := range doc.Keys {
		doc.Keys[i].Rotation = h.Retired[k.Kid].JWS
	}
	return doc
}

// ParseHistory reads a node JWKS with the rotation statements of its retired keys. A key without
// one is not bounded (a JWKS of a node before statements were published); a statement that does
// not verify, or retires another key, refuses the whole set.
func ParseHistory(data []byte) (History, error) {
	set, err := ParseJWKS(data)
	if err != nil {
		return History{}, err
	}
	var doc JWKS
	if err := json.Unmarshal(data, &doc); err != nil {
		return History{}, fmt.Errorf("parse jwks: %w", err)
	}
	h := History{Set: set, Retired: map[string]Rotation{}}
	for i, k := range doc.Keys {
		if k.Rotation == "" {
			continue
		}
		r, err := readStatement(set, k.Rotation)
		if err != nil {
			return History{}, fmt.Errorf("parse jwks: keys[%d].pact_rotation: %w", i, err)
		}
		if r.Old != k.Kid {
			return History{}, fmt.Errorf("parse jwks: keys[%d].pact_rotation retires %s, not this key", i, r.Old)
		}
		if _, ok := set[r.New]; !ok {
			return History{}, fmt.Errorf("parse jwks: keys[%d].pact_rotation hands over to %s, which the JWKS does not hold", i, r.New)
		}
		h.Retired[r.Old] = r
	}
	return h, nil
}

// readStatement checks one rotation statement against set: signed by the key it retires, dated,
// naming a successor whose key matches its id, in a version this node knows.
func readStatement(set Set, jws string) (Rotation, error) {
	var c rotationClaims
	if err := set.Verify(jws, RotationType, &c, jwt.WithIssuedAt()); err != nil {
		return Rotation{}, fmt.Errorf("does not verify: %w", err)
	}
	if kid := headerKID(jws); kid != c.Old {
		return Rotation{}, fmt.Errorf("signed by %s, not by the key it retires (%s)", kid, c.Old)
	}
	x, err := base64.RawURLEncoding.DecodeString(c.NewJWK.X)
	if err != nil || Thumbprint(ed25519.PublicKey(x)) != c.New {
		return Rotation{}, errors.New("the new key does not match its id")
	}
	if c.IssuedAt == nil {
		return Rotation{}, errors.New("no iat: the statement does not say when the key was retired")
	}
	r := Rotation{Old: c.Old, New: c.New, At: c.IssuedAt.Time, JWS: jws}
	switch {
	case c.V == 0 && c.LastSeq == nil: // version 1: bounded by time only
	case c.V == rotationVersion && c.LastSeq != nil && *c.LastSeq >= 0:
		r.LastSeq, r.HasSeq = *c.LastSeq, true
	default:
		return Rotation{}, fmt.Errorf("version %d (last_seq given: %t) is not a statement this node knows", c.V, c.LastSeq != nil)
	}
	return r, nil
}

func headerKID(token string) string {
	var h struct {
		Kid string `json:"kid"`
	}
	if i := strings.IndexByte(token, '.'); i > 0 {
		if b, err := base64.RawURLEncoding.DecodeString(token[:i]); err == nil {
			json.Unmarshal(b, &h)
		}
	}
	return h.Kid
}
