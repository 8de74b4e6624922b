package identitytest

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Paths the issuer serves.
const (
	DiscoveryPath     = "/.well-known/openid-configuration"
	OAuthMetadataPath = "/.well-known/oauth-authorization-server"
	JWKSPath          = "/jwks.json"
)

// Option configures NewIssuer.
type Option func(*options)

type options struct {
	tls    bool
	public bool
	keys   []*Key
	now    func() time.Time
	addr   string
}

// WithTLS serves https (a certificate for 127.0.0.1 trusted by RootCAs) instead of plain http.
func WithTLS() Option { return func(o *options) { o.tls = true } }

// WithPublicName serves https under PublicName instead of 127.0.0.1 (URL is
// https://example.com:<port>): an issuer a node that refuses loopback issuers accepts, when its
// verifier resolves with LookupPublic, connects with DialPublic and trusts RootCAs.
func WithPublicName() Option { return func(o *options) { o.tls, o.public = true, true } }

// PublicName is the host of a WithPublicName issuer, one the test certificate carries.
const PublicName = "example.com"

// publicAddr is the public address LookupPublic gives PublicName; DialPublic leads it to
// loopback, so nothing leaves the machine.
var publicAddr = netip.MustParseAddr("93.184.215.14")

// LookupPublic resolves PublicName to a public address, and nothing else.
func LookupPublic(_ context.Context, host string) ([]net.IP, error) {
	if host != PublicName {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return []net.IP{publicAddr.AsSlice()}, nil
}

// DialPublic connects to the address LookupPublic gave on loopback, with the same port, and
// to every other address as it is.
func DialPublic(ctx context.Context, network, addr string) (net.Conn, error) {
	if ap, err := netip.ParseAddrPort(addr); err == nil && ap.Addr() == publicAddr {
		addr = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), ap.Port()).String()
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// WithAddr serves on addr, e.g. "127.0.0.2:0": an issuer on another loopback address is
// another issuer site (its registrable domain is the address). Default 127.0.0.1:0.
func WithAddr(addr string) Option { return func(o *options) { o.addr = addr } }

// WithKeys sets the published keys; the first one signs by default. Default: one EdDSA key
// with kid "ed-1".
func WithKeys(keys ...*Key) Option { return func(o *options) { o.keys = keys } }

// WithNow sets the clock used for iat and exp in Claims. Default time.Now.
func WithNow(now func() time.Time) Option { return func(o *options) { o.now = now } }

// Issuer is a running test issuer on loopback. Verifiers reach it with
// AllowInsecureLocalIssuers (and RootCAs for WithTLS), or as WithPublicName says.
type Issuer struct {
	// URL is the issuer identifier (the iss claim), e.g. "http://127.0.0.1:40123".
	URL string

	srv *httptest.Server
	now func() time.Time

	mu        sync.Mutex
	keys      []*Key
	jwks      []byte
	overrides map[string]http.HandlerFunc
	hits      map[string]int
}

// NewIssuer starts an issuer that serves DiscoveryPath, OAuthMetadataPath (same document) and
// JWKSPath. It stops when the test ends.
func NewIssuer(t testing.TB, opts ...Option) *Issuer {
	t.Helper()
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	if len(o.keys) == 0 {
		o.keys = []*Key{NewEdDSAKey("ed-1")}
	}
	is := &Issuer{now: o.now, keys: o.keys, overrides: map[string]http.HandlerFunc{}, hits: map[string]int{}}
	is.srv = httptest.NewUnstartedServer(is)
	if o.addr != "" {
		ln, err := net.Listen("tcp", o.addr)
		if err != nil {
			t.Fatalf("identitytest: listen on %s: %v", o.addr, err)
		}
		is.srv.Listener.Close()
		is.srv.Listener = ln
	}
	if o.tls {
		is.srv.StartTLS()
	} else {
		is.srv.Start()
	}
	is.URL = is.srv.URL
	if o.public {
		is.URL = "https://" + net.JoinHostPort(PublicName, strconv.Itoa(is.srv.Listener.Addr().(*net.TCPAddr).Port))
	}
	t.Cleanup(is.Close)
	return is
}

// Close stops the server; later fetches fail as they would against an unreachable issuer.
func (is *Issuer) Close() {
	is.srv.CloseClientConnections()
	is.srv.Close()
}

// RootCAs trusts the issuer's certificate (nil for a plain http issuer).
func (is *Issuer) RootCAs() *x509.CertPool {
	if is.srv.TLS == nil {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AddCert(is.srv.Certificate())
	return pool
}

// Keys returns the published keys.
func (is *Issuer) Keys() []*Key {
	is.mu.Lock()
	defer is.mu.Unlock()
	return append([]*Key(nil), is.keys...)
}

// SetKeys replaces the published keys (key rotation).
func (is *Issuer) SetKeys(keys ...*Key) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys = keys
}

// SetJWKS serves body verbatim at JWKSPath instead of the keys; nil goes back to the keys.
func (is *Issuer) SetJWKS(body []byte) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.jwks = body
}

// Handle serves path with h instead of the default (nil restores it). Hits are still counted.
func (is *Issuer) Handle(path string, h http.HandlerFunc) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if h == nil {
		delete(is.overrides, path)
	} else {
		is.overrides[path] = h
	}
}

// Hits counts requests received for path.
func (is *Issuer) Hits(path string) int {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.hits[path]
}

// Claims returns identity claims for sub and aud: iss, sub, aud, iat = now, exp = now + 5 min.
func (is *Issuer) Claims(sub, aud string) map[string]any {
	now := is.now()
	return map[string]any{
		"iss": is.URL, "sub": sub, "aud": aud,
		"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
	}
}

// Token returns Claims(sub, aud) signed by the first key.
func (is *Issuer) Token(sub, aud string) string {
	return is.Sign(is.Claims(sub, aud))
}

// Sign signs claims with the first key and its kid.
func (is *Issuer) Sign(claims map[string]any) string {
	return is.Keys()[0].Sign(nil, claims)
}

// ServeHTTP counts the request, then serves a Handle override if one is set, else the discovery
// documents (issuer = URL, jwks_uri = URL+JWKSPath) and the JWKS.
func (is *Issuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	is.mu.Lock()
	is.hits[r.URL.Path]++
	h := is.overrides[r.URL.Path]
	jwks := is.jwks
	keys := is.keys
	is.mu.Unlock()
	if h != nil {
		h(w, r)
		return
	}
	switch r.URL.Path {
	case DiscoveryPath, OAuthMetadataPath:
		writeJSON(w, map[string]any{"issuer": is.URL, "jwks_uri": is.URL + JWKSPath})
	case JWKSPath:
		if jwks != nil {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(jwks)
			return
		}
		set := make([]map[string]any, 0, len(keys))
		for _, k := range keys {
			set = append(set, k.JWK())
		}
		writeJSON(w, map[string]any{"keys": set})
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
