package reach

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// A request that did not come through a Funnel connection carries no reported source: it is
// refused, never served under the ingress node's address. One that did is served under the
// source the ingress reported, without the forwarding headers an agent wrote itself (N2).
func TestFromFunnel(t *testing.T) {
	var seen *http.Request
	h := fromFunnel(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r }))

	r := httptest.NewRequest("GET", "/healthz", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusForbidden || seen != nil {
		t.Fatalf("no reported source: %d, served %v", w.Code, seen != nil)
	}

	src := netip.MustParseAddrPort("203.0.113.5:4711")
	r = httptest.NewRequest("GET", "/healthz", nil).WithContext(context.WithValue(context.Background(), srcKey{}, src))
	r.Header.Set("X-Forwarded-For", "192.0.2.1")
	r.Header.Set("Forwarded", "for=192.0.2.1")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if seen == nil || seen.RemoteAddr != "203.0.113.5:4711" || seen.Header.Get("X-Forwarded-For") != "" || seen.Header.Get("Forwarded") != "" {
		t.Fatalf("served %+v", seen)
	}
}

// ListenFunnel's refusals become what the owner can act on.
func TestFunnelRefusal(t *testing.T) {
	for _, tc := range []struct{ err, reason, fix string }{
		{"Funnel not available; HTTPS must be enabled. See https://tailscale.com/s/https.", "no HTTPS certificates", "HTTPS Certificates"},
		{`Funnel not available; "funnel" node attribute not set. See https://tailscale.com/s/no-funnel.`, `"funnel" node attribute`, "nodeAttrs"},
		{"port 443 is not allowed for funnel; allowed ports are: 8443", "port 443", "allow port 443"},
		{"something else", "something else", "off and on again"},
	} {
		reason, fix := funnelRefusal(errors.New(tc.err))
		if !strings.Contains(reason, tc.reason) || !strings.Contains(fix, tc.fix) {
			t.Errorf("%q → %q / %q", tc.err, reason, fix)
		}
	}
}
