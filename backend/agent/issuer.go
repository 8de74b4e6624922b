package agent

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/aether/aether/backend/fsutil"
	"github.com/aether/aether/backend/keys"
)

// IdentityTTL is the lifetime of an identity JWT the local issuer mints.
const IdentityTTL = 5 * time.Minute

// Files the agent keeps in its folder.
const (
	issuerKeyFile   = "issuer-key.pem" // Ed25519, PKCS#8 PEM, 0600
	issuerStateFile = "issuer.json"    // the listen address, so iss stays the same across runs
	tokensFile      = "tokens.json"    // delegation tokens per node, brand and identity
)

// Paths the local issuer serves.
const (
	discoveryPath = "/.well-known/openid-configuration"
	metadataPath  = "/.well-known/oauth-authorization-server"
	jwksPath      = "/.well-known/jwks.json"
)

// DefaultDir is the agent's folder: <user config dir>/aether/agent
// ($XDG_CONFIG_HOME/aether/agent on Linux).
func DefaultDir() (string, error) {
	d, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the agent folder: %w", err)
	}
	return filepath.Join(d, "aether", "agent"), nil
}

// IdentitySource gives the identity JWT for the next request. It is asked
// again for every request, so a source may renew short-lived tokens.
type IdentitySource interface {
	IdentityToken(ctx context.Context) (string, error)
}

// StaticIdentity is an identity JWT issued elsewhere (--identity-token or
// PACT_IDENTITY_TOKEN), sent as it is.
type StaticIdentity string

// IdentityToken returns the token.
func (s StaticIdentity) IdentityToken(context.Context) (string, error) {
	if s == "" {
		return "", errors.New("no identity token")
	}
	return string(s), nil
}

// Who is what an identity JWT says about its holder.
type Who struct {
	Issuer    string
	Subject   string
	Audience  []string
	ExpiresAt time.Time
}

// PeekIdentity reads the claims of an identity JWT without checking its
// signature: the agent only needs to know who it claims to be (for its token
// store and the receipt check); the node does the checking.
func PeekIdentity(token string) (Who, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Who{}, errors.New("the identity token is not a compact JWS (three dot-separated parts)")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return Who{}, fmt.Errorf("the identity token's payload is not base64url: %w", err)
	}
	var c jwt.RegisteredClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return Who{}, fmt.Errorf("the identity token's claims: %w", err)
	}
	if c.Issuer == "" || c.Subject == "" {
		return Who{}, errors.New("the identity token has no iss or no sub")
	}
	w := Who{Issuer: c.Issuer, Subject: c.Subject, Audience: c.Audience}
	if c.ExpiresAt != nil {
		w.ExpiresAt = c.ExpiresAt.Time
	}
	return w, nil
}

// IssuerOptions tune OpenLocalIssuer.
type IssuerOptions struct {
	// Addr is the loopback address to listen on. Default: the address used
	// last time (kept in the folder), else a free port on 127.0.0.1. The
	// address is part of the issuer URL, so changing it makes a new identity.
	Addr string
	// Now is the clock for iat and exp. Default time.Now.
	Now func() time.Time
}

// LocalIssuer is a minimal identity issuer for trying a node on the same
// machine: it serves OpenID discovery and a JWKS over plain http on loopback
// (nodes accept it when their policy sets allowInsecureLocalIssuers) and mints
// short identity JWTs with an Ed25519 key kept in the agent's folder.
type LocalIssuer struct {
	url    string
	key    *keys.Key
	now    func() time.Time
	srv    *http.Server // nil when another agent process already serves this issuer
	served chan struct{}
}

// OpenLocalIssuer loads (or creates) the issuer key in dir and starts serving
// discovery and the JWKS. When the address is taken by another agent serving
// the same key, the issuer mints tokens and leaves the serving to it.
func OpenLocalIssuer(dir string, o IssuerOptions) (*LocalIssuer, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("agent folder: %w", err)
	}
	key, err := keys.LoadOrCreate(filepath.Join(dir, issuerKeyFile))
	if err != nil {
		return nil, fmt.Errorf("issuer key: %w", err)
	}
	statePath := filepath.Join(dir, issuerStateFile)
	saved := readIssuerAddr(statePath)
	addr := o.Addr
	if addr == "" {
		addr = saved
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if err := checkLoopbackAddr(addr); err != nil {
		return nil, err
	}
	li := &LocalIssuer{key: key, now: o.Now}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if servesKey("http://"+addr, key.ID()) {
			li.url = "http://" + addr
			return li, nil
		}
		return nil, fmt.Errorf("local issuer: listen on %s: %w (another program uses it? pass another address; a new address is a new agent identity, so the node owner will be asked again)", addr, err)
	}
	bound := ln.Addr().String()
	li.url = "http://" + bound
	if bound != saved {
		if err := writeIssuerAddr(statePath, bound); err != nil {
			ln.Close()
			return nil, err
		}
	}
	li.srv = &http.Server{Handler: li.handler(), ReadHeaderTimeout: 5 * time.Second, MaxHeaderBytes: 16 << 10}
	li.served = make(chan struct{})
	go func() {
		defer close(li.served)
		li.srv.Serve(ln) // returns http.ErrServerClosed after Close
	}()
	return li, nil
}

// URL is the issuer identifier, the iss of every token it mints.
func (li *LocalIssuer) URL() string { return li.url }

// KeyID is the RFC 7638 thumbprint of the signing key (the kid header).
func (li *LocalIssuer) KeyID() string { return li.key.ID() }

// Serving reports whether this process serves the issuer's documents (false
// when another agent process on the same folder already does).
func (li *LocalIssuer) Serving() bool { return li.srv != nil }

// Close stops serving.
func (li *LocalIssuer) Close() error {
	if li.srv == nil {
		return nil
	}
	err := li.srv.Close()
	<-li.served
	return err
}

// Mint returns a fresh identity JWT for subject, bound to audience (the node's
// audience, usually its publicUrl), valid for IdentityTTL.
func (li *LocalIssuer) Mint(subject, audience string) (string, error) {
	if subject == "" || audience == "" {
		return "", errors.New("an identity token needs a subject and an audience")
	}
	now := li.now()
	var jti [12]byte
	rand.Read(jti[:])
	return li.key.Sign("JWT", jwt.RegisteredClaims{
		Issuer:    li.url,
		Subject:   subject,
		Audience:  jwt.ClaimStrings{audience},
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(IdentityTTL)),
		ID:        hex.EncodeToString(jti[:]),
	})
}

// Source is an IdentitySource that reuses a minted token until a minute
// before it expires, then mints another.
func (li *LocalIssuer) Source(subject, audience string) IdentitySource {
	return &mintingSource{li: li, subject: subject, audience: audience}
}

type mintingSource struct {
	li                *LocalIssuer
	subject, audience string

	mu    sync.Mutex
	token string
	exp   time.Time
}

func (s *mintingSource) IdentityToken(context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.li.now()
	if s.token != "" && now.Before(s.exp.Add(-time.Minute)) {
		return s.token, nil
	}
	tok, err := s.li.Mint(s.subject, s.audience)
	if err != nil {
		return "", err
	}
	s.token, s.exp = tok, now.Add(IdentityTTL)
	return tok, nil
}

func (li *LocalIssuer) handler() http.Handler {
	discovery, _ := json.Marshal(map[string]any{
		"issuer":                                li.url,
		"jwks_uri":                              li.url + jwksPath,
		"id_token_signing_alg_values_supported": []string{"EdDSA"},
		"subject_types_supported":               []string{"public"},
		"response_types_supported":              []string{"id_token"},
	})
	jwks, _ := json.Marshal(li.key.Set().JWKS())
	serve := func(body []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "public, max-age=300")
			w.Write(body)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+discoveryPath, serve(discovery))
	mux.Handle("GET "+metadataPath, serve(discovery))
	mux.Handle("GET "+jwksPath, serve(jwks))
	return mux
}

// servesKey reports whether base already serves an issuer whose JWKS holds kid
// (another `aether agent` run on the same folder).
func servesKey(base, kid string) bool {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(base + jwksPath)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil || resp.StatusCode != http.StatusOK {
		return false
	}
	set, err := keys.ParseJWKS(body)
	if err != nil {
		return false
	}
	_, ok := set[kid]
	return ok
}

func checkLoopbackAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("local issuer address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("local issuer address %q: must be on loopback (127.0.0.1, ::1): nodes accept plain-http issuers only there", addr)
	}
	return nil
}

type issuerState struct {
	Addr string `json:"addr"`
}

func readIssuerAddr(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var st issuerState
	if json.Unmarshal(data, &st) != nil || checkLoopbackAddr(st.Addr) != nil {
		return ""
	}
	return st.Addr
}

func writeIssuerAddr(path, addr string) error {
	data, _ := json.MarshalIndent(issuerState{Addr: addr}, "", "  ")
	if err := fsutil.WriteFileAtomic(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("save the local issuer address: %w", err)
	}
	return nil
}
