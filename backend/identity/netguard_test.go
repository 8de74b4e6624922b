package identity

import (
	"net/netip"
	"net/url"
	"testing"
)

func mustParseURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestScopeAllowed(t *testing.T) {
	for _, tc := range []struct {
		addr             string
		public, loopback bool
	}{
		{"93.184.216.34", true, false},
		{"2606:2800:220:1:248:1893:25c8:1946", true, false},
		{"127.0.0.1", false, true},
		{"127.8.9.10", false, true},
		{"::1", false, true},
		{"::ffff:127.0.0.1", false, true},
		{"::ffff:10.0.0.1", false, false},
		{"10.1.2.3", false, false},
		{"172.16.0.1", false, false},
		{"192.168.1.1", false, false},
		{"169.254.169.254", false, false},
		{"100.64.0.1", false, false},
		{"0.0.0.0", false, false},
		{"255.255.255.255", false, false},
		{"224.0.0.1", false, false},
		{"fc00::1", false, false},
		{"fd12::1", false, false},
		{"fe80::1", false, false},
		{"ff02::1", false, false},
		{"::", false, false},
		{"64:ff9b::a00:1", false, false},
		{"2002:a00:1::", false, false},
		{"2001:db8::1", false, false},
	} {
		a := netip.MustParseAddr(tc.addr)
		if got := scopePublic.allowed(a); got != tc.public {
			t.Errorf("public.allowed(%s) = %v, want %v", tc.addr, got, tc.public)
		}
		if got := scopeLoopback.allowed(a); got != tc.loopback {
			t.Errorf("loopback.allowed(%s) = %v, want %v", tc.addr, got, tc.loopback)
		}
	}
}

func TestIssuerScope(t *testing.T) {
	for _, tc := range []struct {
		iss      string
		insecure bool
		scope    scope
		code     string
	}{
		{"https://agent.example", false, scopePublic, ""},
		{"https://agent.example/tenant/x", false, scopePublic, ""},
		{"https://agent.example:8443", false, scopePublic, ""},
		{"https://93.184.216.34", false, scopePublic, ""},
		{"http://agent.example", true, 0, CodeIssuerInvalid},
		{"https://agent.example?x=1", false, 0, CodeIssuerInvalid},
		{"https://agent.example#f", false, 0, CodeIssuerInvalid},
		{"https://user@agent.example", false, 0, CodeIssuerInvalid},
		{"https://agent.example:0", false, 0, CodeIssuerInvalid},
		{"https://agent.example:99999", false, 0, CodeIssuerInvalid},
		{"https://agent.example.", false, 0, CodeIssuerInvalid},
		{"https://agent_x.example", false, 0, CodeIssuerInvalid},
		{"https://", false, 0, CodeIssuerInvalid},
		{"https://[fe80::1%25eth0]", true, 0, CodeIssuerInvalid},
		{"http://localhost:8080", true, scopeLoopback, ""},
		{"http://LOCALHOST", true, scopeLoopback, ""},
		{"http://127.0.0.1:1", true, scopeLoopback, ""},
		{"https://127.0.0.1", true, scopeLoopback, ""},
		{"http://[::1]:9", true, scopeLoopback, ""},
		{"http://localhost:8080", false, 0, CodeIssuerBlocked},
		{"http://localhost.agent.example", true, 0, CodeIssuerInvalid},
		{"http://192.168.1.2", true, 0, CodeIssuerBlocked},
	} {
		sc, err := issuerScope(tc.iss, tc.insecure)
		code := ""
		if err != nil {
			code = err.Code
		}
		if code != tc.code || err == nil && sc != tc.scope {
			t.Errorf("issuerScope(%q, %v) = %v, %v; want %v, %q", tc.iss, tc.insecure, sc, err, tc.scope, tc.code)
		}
	}
}
