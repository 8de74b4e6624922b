package gateway

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// clientAddr is the agent's address. The TCP peer is the client unless it is one of the
// trusted proxies (pact.trustedProxies); then the forwarding headers the proxies appended are
// read from the right, each hop vouching for the one before it, and the first address that is
// not a trusted proxy is the client. Forwarded (RFC 7239) is read when present, else
// X-Forwarded-For. A value that cannot be parsed stops the walk at the hop that added it: an
// agent can write anything there, so it never chooses the address it is counted under.
func clientAddr(r *http.Request, trusted []netip.Prefix) string {
	peer := hostOf(r.RemoteAddr)
	addr, err := netip.ParseAddr(peer)
	if err != nil || !isTrusted(addr, trusted) {
		return peer
	}
	hops := forwardedFor(r.Header)
	for i := len(hops) - 1; i >= 0; i-- {
		next, err := netip.ParseAddr(hops[i])
		if err != nil {
			break
		}
		addr = next.Unmap()
		if !isTrusted(addr, trusted) {
			break
		}
	}
	return addr.String()
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	a = a.Unmap()
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// forwardedFor lists the addresses of the forwarding headers, nearest the client first.
func forwardedFor(h http.Header) []string {
	var out []string
	if fwd := h.Values("Forwarded"); len(fwd) > 0 {
		for _, v := range fwd {
			for _, elem := range strings.Split(v, ",") {
				for _, pair := range strings.Split(elem, ";") {
					k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
					if ok && strings.EqualFold(k, "for") {
						out = append(out, forwardedNode(val))
					}
				}
			}
		}
		return out
	}
	for _, v := range h.Values("X-Forwarded-For") {
		for _, a := range strings.Split(v, ",") {
			out = append(out, strings.TrimSpace(a))
		}
	}
	return out
}

// forwardedNode unquotes an RFC 7239 node: "192.0.2.1:4711" or "[2001:db8::1]:4711".
func forwardedNode(v string) string {
	v = strings.Trim(strings.TrimSpace(v), `"`)
	if strings.HasPrefix(v, "[") {
		if end := strings.IndexByte(v, ']'); end > 0 {
			return v[1:end]
		}
	}
	return hostOf(v)
}

// hostOf strips a port: "192.0.2.1:4711" → "192.0.2.1"; a bare address stays as it is.
func hostOf(hostport string) string {
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		return host
	}
	return hostport
}
