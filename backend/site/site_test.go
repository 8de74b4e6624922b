package site

import (
	"errors"
	"strings"
	"testing"
)

// longIssuer is the attack: a host that starts like Google's and ends in the
// attacker's own domain, long enough that a cut at the end leaves only the Google part.
func longIssuer() string {
	pad := strings.Repeat("x", 40)
	return "https://accounts.google.com.signin-verified-" + pad + "." + pad + "." + pad + ".attacker-owned.example"
}

func TestDescribe(t *testing.T) {
	t.Run("C13 long issuer host starting like google.com", func(t *testing.T) {
		n := Describe(longIssuer(), "alice@google.com")
		if n.Site != "attacker-owned.example" || n.SiteName != "attacker-owned.example" {
			t.Fatalf("site %q (%q), want attacker-owned.example", n.Site, n.SiteName)
		}
		if want := "says it is alice@google.com — issued by attacker-owned.example"; n.Claim != want {
			t.Fatalf("claim %q, want %q", n.Claim, want)
		}
		if !strings.HasPrefix(n.Host, "….") || !strings.HasSuffix(n.Host, ".attacker-owned.example") || strings.Contains(n.Host, "google") {
			t.Fatalf("host %q: want it cut from the left, ending in the site, without the google.com prefix", n.Host)
		}
		if len(n.Host) > HostShown+len("…")-1 {
			t.Fatalf("host %q is %d bytes, over %d characters", n.Host, len(n.Host), HostShown)
		}
	})
	t.Run("C13 a subject cannot fake the issued-by separator", func(t *testing.T) {
		n := Describe("https://evil.example", "alice@google.com — issued by google.com")
		if strings.Count(n.Claim, "—") != 1 || !strings.HasSuffix(n.Claim, "— issued by evil.example") {
			t.Fatalf("claim %q: want one em dash, before the real site", n.Claim)
		}
	})
	t.Run("C13 a 10 KB subject is cut, the site never", func(t *testing.T) {
		n := Describe("https://id.evil.example", strings.Repeat("A", 10_000)+"\u202e")
		if !strings.HasSuffix(n.Claim, " — issued by evil.example") || len([]rune(n.Subject)) != SubjectShown {
			t.Fatalf("claim %q (subject %d runes)", n.Claim, len([]rune(n.Subject)))
		}
	})
	t.Run("C15 IDN shows punycode beside Unicode", func(t *testing.T) {
		// "аpple.com" with a Cyrillic а, as the token carries it (identity admits ASCII hosts only).
		n := Describe("https://login.xn--pple-43d.com", "bob")
		if n.Site != "xn--pple-43d.com" || n.SiteName != "\u0430pple.com (xn--pple-43d.com)" {
			t.Fatalf("site %q name %q", n.Site, n.SiteName)
		}
		if n.Claim != "says it is bob — issued by \u0430pple.com (xn--pple-43d.com)" || n.Host != "login.xn--pple-43d.com" {
			t.Fatalf("claim %q host %q", n.Claim, n.Host)
		}
	})
	for _, c := range []struct{ iss, site, host string }{
		{"https://accounts.google.com", "google.com", "accounts.google.com"},
		{"https://a.b.example.co.uk/tenant", "example.co.uk", "a.b.example.co.uk"},
		{"https://alice.github.io", "alice.github.io", "alice.github.io"}, // a private suffix: each user is a site
		{"http://127.0.0.1:8443", "127.0.0.1", "127.0.0.1:8443"},
		{"http://[::1]:9000", "::1", "[::1]:9000"},
		{"http://localhost:9000", "localhost", "localhost:9000"},
		{"https://co.uk", "co.uk", "co.uk"},
	} {
		n := Describe(c.iss, "s")
		if n.Site != c.site || n.Host != c.host {
			t.Errorf("Describe(%q): site %q host %q, want %q %q", c.iss, n.Site, n.Host, c.site, c.host)
		}
	}
}

func TestCheckHost(t *testing.T) {
	t.Run("C14 host of 254 characters", func(t *testing.T) {
		h := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 54) + ".example"
		if len(h) != 254 {
			t.Fatalf("test host is %d characters", len(h))
		}
		if err := CheckHost(h); !errors.Is(err, ErrHostTooLong) {
			t.Fatalf("CheckHost(254 chars) = %v", err)
		}
		if err := CheckHost(h[1:]); err != nil {
			t.Fatalf("CheckHost(253 chars) = %v", err)
		}
	})
	t.Run("C14 host with too many labels", func(t *testing.T) {
		if err := CheckHost(strings.Repeat("a.", MaxLabels) + "example"); !errors.Is(err, ErrTooManyLabels) {
			t.Fatalf("CheckHost(%d labels) = %v", MaxLabels+1, err)
		}
		if err := CheckHost(strings.Repeat("a.", MaxLabels-1) + "example"); err != nil {
			t.Fatalf("CheckHost(%d labels) = %v", MaxLabels, err)
		}
	})
}
