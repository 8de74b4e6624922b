// Package identitytest runs identity issuers for tests: a loopback server that serves OpenID
// discovery and a JWKS, and keys that sign identity JWTs for it. Helpers panic (keys) or fail
// the test (issuer) instead of returning errors.
package identitytest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
)

// Key is a signing key with its key id and JWS algorithm.
type Key struct {
	KID    string
	Alg    string // "EdDSA", "ES256" or "RS256"
	signer crypto.Signer
}

// NewEdDSAKey returns a fresh Ed25519 key.
func NewEdDSAKey(kid string) *Key {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(fmt.Sprintf("identitytest: generate Ed25519 key: %v", err))
	}
	return &Key{KID: kid, Alg: "EdDSA", signer: priv}
}

// NewES256Key returns a fresh P-256 key.
func NewES256Key(kid string) *Key {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(fmt.Sprintf("identitytest: generate P-256 key: %v", err))
	}
	return &Key{KID: kid, Alg: "ES256", signer: priv}
}

// NewRSAKey returns a fresh RS256 key of the given size (1024 bits makes a key the verifier
// must refuse).
func NewRSAKey(kid string, bits int) *Key {
	priv, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		panic(fmt.Sprintf("identitytest: generate RSA key: %v", err))
	}
	return &Key{KID: kid, Alg: "RS256", signer: priv}
}

// Public returns the public key.
func (k *Key) Public() crypto.PublicKey { return k.signer.Public() }

// JWK returns the public JWK (kty, crv/x/y or n/e, kid, alg, use=sig); kid is left out when
// empty.
func (k *Key) JWK() map[string]any {
	b64 := base64.RawURLEncoding.EncodeToString
	m := map[string]any{"alg": k.Alg, "use": "sig"}
	if k.KID != "" {
		m["kid"] = k.KID
	}
	switch pub := k.signer.Public().(type) {
	case ed25519.PublicKey:
		m["kty"], m["crv"], m["x"] = "OKP", "Ed25519", b64(pub)
	case *ecdsa.PublicKey:
		raw, err := pub.Bytes() // 0x04 || X || Y
		if err != nil {
			panic(fmt.Sprintf("identitytest: encode P-256 key: %v", err))
		}
		m["kty"], m["crv"], m["x"], m["y"] = "EC", "P-256", b64(raw[1:33]), b64(raw[33:])
	case *rsa.PublicKey:
		m["kty"], m["n"], m["e"] = "RSA", b64(pub.N.Bytes()), b64(big.NewInt(int64(pub.E)).Bytes())
	}
	return m
}

// Sign returns a compact JWS over claims. The header gets alg, typ "JWT" and the key's kid;
// entries of header override them, and a nil value removes one (e.g. "kid": nil).
func (k *Key) Sign(header map[string]any, claims any) string {
	h := map[string]any{"alg": k.Alg, "typ": "JWT"}
	if k.KID != "" {
		h["kid"] = k.KID
	}
	for name, val := range header {
		if val == nil {
			delete(h, name)
		} else {
			h[name] = val
		}
	}
	hb, err := json.Marshal(h)
	if err != nil {
		panic(fmt.Sprintf("identitytest: encode header: %v", err))
	}
	cb, err := json.Marshal(claims)
	if err != nil {
		panic(fmt.Sprintf("identitytest: encode claims: %v", err))
	}
	return k.SignRaw(hb, cb)
}

// SignRaw signs header and payload bytes exactly as given, so tests can craft hostile JSON
// (duplicate members, odd escapes) that a map could not express.
func (k *Key) SignRaw(header, payload []byte) string {
	b64 := base64.RawURLEncoding.EncodeToString
	input := b64(header) + "." + b64(payload)
	return input + "." + b64(k.signature([]byte(input)))
}

func (k *Key) signature(input []byte) []byte {
	switch priv := k.signer.(type) {
	case ed25519.PrivateKey:
		return ed25519.Sign(priv, input)
	case *ecdsa.PrivateKey:
		sum := sha256.Sum256(input)
		r, s, err := ecdsa.Sign(rand.Reader, priv, sum[:])
		if err != nil {
			panic(fmt.Sprintf("identitytest: ES256 sign: %v", err))
		}
		sig := make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
		return sig
	case *rsa.PrivateKey:
		sum := sha256.Sum256(input)
		sig, err := rsa.SignPKCS1v15(rand.Reader, priv, crypto.SHA256, sum[:])
		if err != nil {
			panic(fmt.Sprintf("identitytest: RS256 sign: %v", err))
		}
		return sig
	}
	panic(fmt.Sprintf("identitytest: unsupported key %T", k.signer))
}
