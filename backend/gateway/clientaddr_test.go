package gateway

import (
	"net/http"
	"net/netip"
	"testing"
)

func TestClientAddr(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	for _, tc := range []struct {
		name, peer string
		header     http.Header
		trusted    []netip.Prefix
		want       string
	}{
		{"no trusted proxies: the peer, whatever it says", "127.0.0.1:5000", http.Header{"X-Forwarded-For": {"203.0.113.7"}}, nil, "127.0.0.1"},
		{"an untrusted peer's header is ignored", "198.51.100.2:5000", http.Header{"X-Forwarded-For": {"203.0.113.7"}}, proxies, "198.51.100.2"},
		{"trusted proxy: the address it forwards", "127.0.0.1:5000", http.Header{"X-Forwarded-For": {"203.0.113.7"}}, proxies, "203.0.113.7"},
		{"an agent's own X-Forwarded-For entry does not count", "127.0.0.1:5000", http.Header{"X-Forwarded-For": {"192.0.2.66, 203.0.113.7"}}, proxies, "203.0.113.7"},
		{"two trusted hops", "127.0.0.1:5000", http.Header{"X-Forwarded-For": {"203.0.113.7", "10.1.2.3"}}, proxies, "203.0.113.7"},
		{"garbage stops at the hop that wrote it", "127.0.0.1:5000", http.Header{"X-Forwarded-For": {"not-an-ip, 10.1.2.3"}}, proxies, "10.1.2.3"},
		{"only trusted hops: the farthest", "127.0.0.1:5000", http.Header{"X-Forwarded-For": {"10.9.9.9"}}, proxies, "10.9.9.9"},
		{"Forwarded wins over X-Forwarded-For", "[::1]:5000", http.Header{"Forwarded": {`for="[2001:db8::7]:4711";proto=https`}, "X-Forwarded-For": {"203.0.113.7"}}, proxies, "2001:db8::7"},
		{"Forwarded with several elements", "127.0.0.1:5000", http.Header{"Forwarded": {"for=192.0.2.66, for=198.51.100.9:1234"}}, proxies, "198.51.100.9"},
		{"Forwarded unknown stops the walk", "127.0.0.1:5000", http.Header{"Forwarded": {"for=unknown"}}, proxies, "127.0.0.1"},
		{"no header from a trusted proxy: the proxy", "127.0.0.1:5000", http.Header{}, proxies, "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &http.Request{RemoteAddr: tc.peer, Header: tc.header}
			if got := clientAddr(r, tc.trusted); got != tc.want {
				t.Fatalf("clientAddr = %q, want %q", got, tc.want)
			}
		})
	}
}
