package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aether/aether/backend/identity/identitytest"
	"github.com/aether/aether/backend/node"
)

// countingListener counts the connections a node's listener accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// TestNodeFetchesNotItself: with allowInsecureLocalIssuers (the example policy sets it), a
// caller names an issuer, or a jwks_uri, at the node's own admin UI, node API or gateway. The
// node refuses it before any connection: its listeners accept none, the caller gets 401, and
// the log gives the reason (J31).
func TestNodeFetchesNotItself(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	accepted := map[string]*atomic.Int64{}
	var log lockedBuffer
	e := newEnv(t, withLog(&log), withNode(func(o *node.Options) {
		o.Listen = func(network, address string) (net.Listener, error) {
			ln, err := net.Listen(network, address)
			if err != nil {
				return nil, err
			}
			n := &atomic.Int64{}
			mu.Lock()
			accepted[ln.Addr().String()] = n
			mu.Unlock()
			return countingListener{ln, n}, nil
		}
	}))
	addrs := e.n.Addresses()
	count := func(addr string) int64 {
		mu.Lock()
		defer mu.Unlock()
		return accepted[addr].Load()
	}
	_, adminPort, _ := net.SplitHostPort(addrs.Admin)
	_, apiPort, _ := net.SplitHostPort(addrs.API)
	_, gwPort, _ := net.SplitHostPort(addrs.Gateway)
	// Another loopback service names the node API as its jwks_uri.
	relay := identitytest.NewIssuer(t)
	relay.Handle(identitytest.DiscoveryPath, func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"issuer": relay.URL, "jwks_uri": "http://" + addrs.API + "/v1/status"})
	})
	tokenAt := func(is *identitytest.Issuer, iss string) string {
		c := is.Claims("mallory", e.publicURL)
		c["iss"] = iss
		return is.Sign(c)
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, tc := range []struct{ name, token string }{
		{"the issuer is the admin UI", tokenAt(e.issuer, "http://"+addrs.Admin)},
		{"the issuer is the admin UI over https", tokenAt(e.issuer, "https://"+addrs.Admin)},
		{"the issuer is the admin UI written [::1]", tokenAt(e.issuer, "http://[::1]:"+adminPort)},
		{"the issuer is the node API written localhost", tokenAt(e.issuer, "http://localhost:"+apiPort)},
		{"the issuer is the gateway written localhost", tokenAt(e.issuer, "http://localhost:"+gwPort)},
		{"the jwks_uri is the node API", relay.Token("mallory", e.publicURL)},
	} {
		t.Run("J31 "+tc.name, func(t *testing.T) {
			admin, api, gw := count(addrs.Admin), count(addrs.API), count(addrs.Gateway)
			req, _ := http.NewRequest("POST", e.publicURL+"/pact/device_authorization", strings.NewReader(url.Values{"brand": {"review"}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Authorization", "Bearer "+tc.token)
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("the caller got %d, want 401", resp.StatusCode)
			}
			if d := count(addrs.Admin) - admin; d != 0 {
				t.Errorf("the admin listener accepted %d connections", d)
			}
			if d := count(addrs.API) - api; d != 0 {
				t.Errorf("the node API listener accepted %d connections", d)
			}
			if d := count(addrs.Gateway) - gw; d != 1 {
				t.Errorf("the gateway accepted %d connections, want the caller's one", d)
			}
		})
	}
	if n := strings.Count(log.String(), `msg="identity rejected" reason=issuer_is_this_node`); n != 6 {
		t.Errorf("the log gives reason issuer_is_this_node %d times, want 6:\n%s", n, log.String())
	}
	if relay.Hits(identitytest.DiscoveryPath) != 1 {
		t.Errorf("the relay's discovery was fetched %d times, want once", relay.Hits(identitytest.DiscoveryPath))
	}
}
