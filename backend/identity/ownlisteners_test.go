package identity

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/aether/aether/backend/identity/identitytest"
)

// TestOwnListeners: with AllowInsecureLocalIssuers any caller names a loopback issuer; the node
// must not fetch from its own listeners (its admin UI, its node API, its gateway) for them (J31).
func TestOwnListeners(t *testing.T) {
	clk := newClock()
	var hits atomic.Int64
	own := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer own.Close()
	ap := netip.MustParseAddrPort(own.Listener.Addr().String())
	port := ap.Port()
	lookup := &lookupCounter{table: map[string][]net.IP{"localhost": {net.ParseIP("127.0.0.1"), net.ParseIP("::1")}}}
	withOwn := func(listeners ...netip.AddrPort) func(*Config) {
		return func(c *Config) { c.OwnListeners, c.LookupIP = listeners, lookup.LookupIP }
	}
	key := identitytest.NewEdDSAKey("ed-1")
	at := func(iss string) string { return key.Sign(nil, claimsFor(clk, iss)) }
	for _, tc := range []struct{ name, iss string }{
		{"127.0.0.1", "http://127.0.0.1:" + strconv.Itoa(int(port))},
		{"localhost", "http://localhost:" + strconv.Itoa(int(port))},
		{"[::1]", "http://[::1]:" + strconv.Itoa(int(port))},
		{"another loopback address", "http://127.0.0.2:" + strconv.Itoa(int(port))},
	} {
		t.Run("J31 the issuer is the node's own listener, written "+tc.name, func(t *testing.T) {
			wantReject(t, newVerifier(t, clk, withOwn(ap)), at(tc.iss), CodeIssuerIsNode)
		})
	}
	t.Run("J31 a listener bound to every address covers its port on loopback", func(t *testing.T) {
		wild := netip.AddrPortFrom(netip.IPv4Unspecified(), port)
		wantReject(t, newVerifier(t, clk, withOwn(wild)), at("http://localhost:"+strconv.Itoa(int(port))), CodeIssuerIsNode)
	})
	t.Run("J31 the jwks_uri or a redirect points at the node's own listener", func(t *testing.T) {
		for _, path := range []string{"jwks_uri", "redirect"} {
			is := newIssuer(t, clk)
			is.Handle(identitytest.DiscoveryPath, func(w http.ResponseWriter, r *http.Request) {
				if path == "redirect" {
					http.Redirect(w, r, own.URL+"/v1/status", http.StatusFound)
					return
				}
				_ = json.NewEncoder(w).Encode(map[string]string{"issuer": is.URL, "jwks_uri": own.URL + "/v1/status"})
			})
			wantReject(t, newVerifier(t, clk, withOwn(ap)), is.Token("alice", testAud), CodeIssuerIsNode)
			if is.Hits(identitytest.DiscoveryPath) != 1 {
				t.Errorf("%s: the issuer's discovery was fetched %d times", path, is.Hits(identitytest.DiscoveryPath))
			}
		}
	})
	if n := hits.Load(); n != 0 {
		t.Fatalf("the node's own listener received %d requests", n)
	}
	t.Run("J31 other loopback services stay reachable", func(t *testing.T) {
		is := newIssuer(t, clk)
		wantOK(t, newVerifier(t, clk, withOwn(ap)), is.Token("alice", testAud))
	})
}
