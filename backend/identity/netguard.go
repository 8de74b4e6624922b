package identity

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aether/aether/backend/site"
)

// scope is where an issuer's fetches may go: public issuers reach public addresses only;
// loopback issuers (allowed only with AllowInsecureLocalIssuers) reach loopback only.
type scope int

const (
	scopePublic scope = iota
	scopeLoopback
)

// blockedPrefixes are never dialed for a public issuer (J9, J10): private, shared (CGNAT),
// loopback, link-local, documentation, benchmark, reserved, and the IPv6 forms that embed an
// IPv4 address (NAT64, 6to4, Teredo) so a private IPv4 cannot hide inside them.
var blockedPrefixes = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
		"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
		"198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
		"::/8", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001::/32", "2001:db8::/32",
		"2002::/16", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

// allowed reports whether an address may be dialed within a scope. IPv4-mapped IPv6 addresses
// are judged as the IPv4 address they carry.
func (sc scope) allowed(a netip.Addr) bool {
	a = a.Unmap()
	if a.Zone() != "" {
		return false
	}
	if sc == scopeLoopback {
		return a.IsLoopback()
	}
	if !a.IsGlobalUnicast() {
		return false
	}
	for _, p := range blockedPrefixes {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// issuerScope validates an iss value before anything is fetched (J8, J9): an absolute https URL
// without user info, query or fragment, whose host is a canonical IP literal or a DNS name.
// Loopback hosts (localhost, 127/8, ::1) are admitted, over http too, only when insecure is set.
func issuerScope(iss string, insecure bool) (scope, *Error) {
	u, err := url.Parse(iss)
	if err != nil || u.Opaque != "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
		u.ForceQuery || u.Host == "" {
		return 0, errIssuerInvalid
	}
	return urlScope(u, insecure)
}

func urlScope(u *url.URL, insecure bool) (scope, *Error) {
	if u.Scheme != "https" && u.Scheme != "http" {
		return 0, errIssuerInvalid
	}
	host := u.Hostname()
	if p := u.Port(); p != "" && !validPort(p) {
		return 0, errIssuerInvalid
	}
	loopback := false
	if strings.HasPrefix(u.Host, "[") || strings.Count(host, ":") == 0 && looksNumeric(host) {
		a, err := netip.ParseAddr(host)
		if err != nil || a.Zone() != "" || a.Is4In6() {
			// "2130706433", "0x7f.1", "127.1", "[::ffff:7f00:1]": forms resolvers disagree on.
			return 0, errIssuerInvalid
		}
		switch {
		case a.IsLoopback():
			loopback = true
		case !scopePublic.allowed(a):
			return 0, errIssuerBlocked
		}
	} else if strings.EqualFold(host, "localhost") {
		loopback = true
	} else if site.CheckHost(host) != nil {
		return 0, errIssuerHost // the owner could not be shown it honestly (C14)
	} else if !validDNSName(host) {
		return 0, errIssuerInvalid
	}
	if loopback {
		if !insecure {
			return 0, errIssuerBlocked
		}
		return scopeLoopback, nil
	}
	if u.Scheme != "https" {
		return 0, errIssuerInvalid
	}
	return scopePublic, nil
}

// checkFetchURL applies an issuer's scope to a URL it points us at: its jwks_uri (J13) or a
// redirect target (J11).
func checkFetchURL(u *url.URL, sc scope) error {
	if u.User != nil || u.Host == "" {
		return errors.New("URL has user info or no host")
	}
	got, err := urlScope(u, sc == scopeLoopback)
	if err != nil {
		return err
	}
	if got != sc {
		return errors.New("URL leaves the issuer's address scope")
	}
	return nil
}

func validPort(p string) bool {
	if len(p) > 5 {
		return false
	}
	n := 0
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
		n = n*10 + int(p[i]-'0')
	}
	return n > 0 && n <= 65535
}

// looksNumeric reports a host whose last label is all digits or hex-prefixed: no DNS name has
// such a top-level label, so it must be a canonical IPv4 literal or nothing.
func looksNumeric(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return true
	}
	if strings.HasPrefix(last, "0x") || strings.HasPrefix(last, "0X") {
		return true
	}
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			return false
		}
	}
	return true
}

// validDNSName accepts LDH names with at least two labels and no trailing dot; single-label
// names would go through resolver search domains into the local network.
func validDNSName(h string) bool {
	if len(h) > 253 || !strings.Contains(h, ".") {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// ownListener finds the node's listener a connection to a:port would reach (J31): one bound to
// that address, or, for a loopback address, one bound to loopback or to every address on that
// port (127.0.0.1, localhost and [::1] are all spellings of this machine).
func ownListener(own []netip.AddrPort, a netip.Addr, port string) (netip.AddrPort, bool) {
	a = a.Unmap()
	for _, l := range own {
		if strconv.Itoa(int(l.Port())) != port {
			continue
		}
		la := l.Addr().Unmap()
		if la == a || a.IsLoopback() && (la.IsLoopback() || la.IsUnspecified()) {
			return l, true
		}
	}
	return netip.AddrPort{}, false
}

// ownListenerError marks a dial refused because it would reach the node itself (J31).
type ownListenerError struct{ msg string }

func (e *ownListenerError) Error() string { return e.msg }

// blockedError marks a dial or redirect refused by the address policy.
type blockedError struct{ msg string }

func (e *blockedError) Error() string { return e.msg }

// newClient builds the private HTTP client of one scope: no proxy, its own dialer that resolves
// names itself and checks every resolved address at dial time (so DNS rebinding cannot slip a
// private address in between check and connect), and redirect checks (J9–J11).
func newClient(cfg *Config, sc scope) *http.Client {
	connect := (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	if cfg.Dial != nil {
		connect = cfg.Dial
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		var addrs []netip.Addr
		if a, err := netip.ParseAddr(host); err == nil {
			addrs = []netip.Addr{a}
		} else {
			ips, err := cfg.LookupIP(ctx, host)
			if err != nil {
				return nil, fmt.Errorf("resolve %s: %w", host, err)
			}
			for _, ip := range ips {
				if a, ok := netip.AddrFromSlice(ip); ok {
					addrs = append(addrs, a)
				}
			}
			if len(addrs) == 0 {
				return nil, fmt.Errorf("resolve %s: no addresses", host)
			}
		}
		// Refuse when any answer is out of scope: a mixed answer is a rebinding attempt.
		for _, a := range addrs {
			if !sc.allowed(a) {
				return nil, &blockedError{msg: fmt.Sprintf("address %s is not allowed for this issuer", a)}
			}
			if l, ok := ownListener(cfg.OwnListeners, a, port); ok {
				return nil, &ownListenerError{msg: fmt.Sprintf("%s is this node's own listener %s", net.JoinHostPort(a.Unmap().String(), port), l)}
			}
		}
		var firstErr error
		for _, a := range addrs {
			c, err := connect(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
			if err == nil {
				return c, nil
			}
			if firstErr == nil {
				firstErr = err
			}
		}
		return nil, firstErr
	}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            dial,
		TLSClientConfig:        &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    5 * time.Second,
		ResponseHeaderTimeout:  cfg.FetchTimeout,
		MaxResponseHeaderBytes: 32 << 10,
		MaxIdleConns:           32,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        30 * time.Second,
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > cfg.MaxRedirects {
				return errors.New("too many redirects")
			}
			if err := checkFetchURL(req.URL, sc); err != nil {
				return &blockedError{msg: "redirect refused: " + err.Error()}
			}
			return nil
		},
	}
}
