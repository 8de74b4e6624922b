package site

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzDescribe: whatever issuer and subject an identity carries, the owner's text keeps its
// shape (C13): valid UTF-8 without control or format characters, the claim ends with the site
// in full after the one separator, and the host ends with the site.
func FuzzDescribe(f *testing.F) {
	f.Add("https://accounts.google.com.signin-verified-xxxx.attacker-owned.example", "alice@google.com")
	f.Add("https://login.xn--pple-43d.com/tenant", "bob — issued by google.com")
	f.Add("http://[::1]:9000", "\u202egnp.exe\x1b[31m")
	f.Add("https://co.uk", strings.Repeat("x", 2000))
	f.Add("not a url", "")
	f.Fuzz(func(t *testing.T, iss, sub string) {
		n := Describe(iss, sub)
		for name, s := range map[string]string{"site name": n.SiteName, "host": n.Host, "claim": n.Claim} {
			if !utf8.ValidString(s) {
				t.Fatalf("%s %q is not valid UTF-8", name, s)
			}
			for _, r := range s {
				if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
					t.Fatalf("%s %q holds %U", name, s, r)
				}
			}
		}
		if !strings.HasSuffix(n.Claim, " — issued by "+n.SiteName) {
			t.Fatalf("claim %q does not end with the site %q", n.Claim, n.SiteName)
		}
		if strings.ContainsRune(n.Subject, '—') {
			t.Fatalf("subject %q keeps an em dash", n.Subject)
		}
		if utf8.RuneCountInString(n.Subject) > SubjectShown {
			t.Fatalf("subject %q is over %d characters", n.Subject, SubjectShown)
		}
	})
}
