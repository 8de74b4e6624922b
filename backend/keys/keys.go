// Package keys holds the node's Ed25519 signing key, publishes it as a JWKS and
// signs and verifies the node's own JWS objects (grants, delegation tokens, receipts).
package keys

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/aether/aether/backend/fsutil"
	"github.com/golang-jwt/jwt/v5"
)

// Key is the node's signing key.
type Key struct {
	priv ed25519.PrivateKey
	kid  string
}

// LoadOrCreate reads the PKCS#8 PEM key at path, or creates one (mode 0600,
// written atomically) when the file does not exist.
func LoadOrCreate(path string) (*Key, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("generate node key: %w", err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(priv)
		if err != nil {
			return nil, fmt.Errorf("encode node key: %w", err)
		}
		pemBytes := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
		if err := fsutil.WriteFileAtomic(path, pemBytes, 0o600); err != nil {
			return nil, fmt.Errorf("save node key: %w", err)
		}
		return newKey(priv), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read node key: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("node key %s: not a PEM private key", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("node key %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("node key %s: not an Ed25519 key", path)
	}
	return newKey(priv), nil
}

// FromPrivate wraps an existing private key (tests, benchmarks).
func FromPrivate(priv ed25519.PrivateKey) *Key { return newKey(priv) }

func newKey(priv ed25519.PrivateKey) *Key {
	pub := priv.Public().(ed25519.PublicKey)
	return &Key{priv: priv, kid: Thumbprint(pub)}
}

// Thumbprint is the RFC 7638 JWK thumbprint of an Ed25519 public key; it is the key id.
func Thumbprint(pub ed25519.PublicKey) string {
	// Members in lexicographic order, no white space, as RFC 7638 requires.
	canon := `{"crv":"Ed25519","kty":"OKP","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}`
	sum := sha256.Sum256([]byte(canon))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// ID is the key id (kid) put in every JWS header.
func (k *Key) ID() string { return k.kid }

// Public is the public half.
func (k *Key) Public() ed25519.PublicKey { return k.priv.Public().(ed25519.PublicKey) }

// Set is the public key set that verifies this key's signatures.
func (k *Key) Set() Set { return Set{k.kid: k.Public()} }

// Sign makes a compact JWS (alg EdDSA) of claims with the given typ header. The claims are
// JSON without HTML escaping: `<`, `>` and `&` stay one byte each, so what a receipt says
// is no larger signed than written (docs/threats.md T15).
func (k *Key) Sign(typ string, claims jwt.Claims) (string, error) {
	header, err := json.Marshal(map[string]string{"alg": jwt.SigningMethodEdDSA.Alg(), "kid": k.kid, "typ": typ})
	if err != nil {
		return "", fmt.Errorf("sign %s: %w", typ, err)
	}
	var payload bytes.Buffer
	enc := json.NewEncoder(&payload)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(claims); err != nil {
		return "", fmt.Errorf("sign %s: %w", typ, err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	signing := b64(header) + "." + b64(bytes.TrimSuffix(payload.Bytes(), []byte("\n")))
	sig, err := jwt.SigningMethodEdDSA.Sign(signing, k.priv)
	if err != nil {
		return "", fmt.Errorf("sign %s: %w", typ, err)
	}
	return signing + "." + b64(sig), nil
}

// Set maps key ids to public keys.
type Set map[string]ed25519.PublicKey

// JWK is one public key as published in the node JWKS.
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	// Rotation is the statement that retired the key, in the node JWKS (History.JWKS).
	Rotation string `json:"pact_rotation,omitempty"`
}

// JWKS is the RFC 7517 key set document.
type JWKS struct {
	Keys []JWK `json:"keys"`
}

// JWKS renders the set for /.well-known/jwks.json.
func (s Set) JWKS() JWKS {
	out := JWKS{Keys: []JWK{}}
	for kid, pub := range s {
		out.Keys = append(out.Keys, JWK{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(pub), Kid: kid, Use: "sig", Alg: "EdDSA"})
	}
	return out
}

// ParseJWKS reads a node JWKS; only Ed25519 keys whose kid is their thumbprint are kept.
func ParseJWKS(data []byte) (Set, error) {
	var doc JWKS
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse jwks: %w", err)
	}
	set := Set{}
	for i, j := range doc.Keys {
		if j.Kty != "OKP" || j.Crv != "Ed25519" {
			continue
		}
		x, err := base64.RawURLEncoding.DecodeString(j.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("parse jwks: keys[%d]: bad x", i)
		}
		pub := ed25519.PublicKey(x)
		if Thumbprint(pub) != j.Kid {
			return nil, fmt.Errorf("parse jwks: keys[%d]: kid is not the key's thumbprint", i)
		}
		set[j.Kid] = pub
	}
	if len(set) == 0 {
		return nil, errors.New("parse jwks: no Ed25519 keys")
	}
	return set, nil
}

// Verify checks a compact JWS made by Sign: alg EdDSA only, the typ header, a
// known kid, then the claims through the parser options given.
func (s Set) Verify(token, typ string, claims jwt.Claims, opts ...jwt.ParserOption) error {
	opts = append([]jwt.ParserOption{jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithStrictDecoding()}, opts...)
	_, err := jwt.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		if got, _ := t.Header["typ"].(string); got != typ {
			return nil, fmt.Errorf("typ %q, want %q", got, typ)
		}
		kid, _ := t.Header["kid"].(string)
		pub, ok := s[kid]
		if !ok {
			return nil, errors.New("unknown key id")
		}
		return pub, nil
	}, opts...)
	return err
}
