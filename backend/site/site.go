// Package site names an agent's issuer the way the owner must read it: by its registrable
// domain (the public-suffix-aware "site", which only its owner can hold), never by a prefix an
// attacker can choose. Every front door shows the same strings (docs/threats.md, C13–C15): the
// consent and sharing pages get them from owner.Agent, the desktop notification and tray from
// the same Describe.
package site

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// Limits on an issuer host (C14). DNS allows 253 characters; no real issuer needs more than a
// handful of labels, and a long run of them only serves to push the registrable domain out of
// sight.
const (
	MaxHostLen = 253
	MaxLabels  = 16
)

// Display limits: the host is cut from the left to HostShown characters, always on a label
// boundary and never into the site; the subject, a claim the issuer makes, is cut at
// SubjectShown.
const (
	HostShown    = 64
	SubjectShown = 80
)

// Errors of CheckHost.
var (
	ErrHostTooLong   = fmt.Errorf("the issuer host is longer than %d characters", MaxHostLen)
	ErrTooManyLabels = fmt.Errorf("the issuer host has more than %d labels", MaxLabels)
)

// CheckHost refuses a host the owner could not be shown honestly (C14).
func CheckHost(host string) error {
	if len(host) > MaxHostLen {
		return ErrHostTooLong
	}
	if strings.Count(host, ".")+1 > MaxLabels {
		return ErrTooManyLabels
	}
	return nil
}

// Of is the registrable domain of host, lower case, in ASCII (punycode): "attacker.example" for
// "accounts.google.com.attacker.example". An IP literal, a single label (localhost) or a host
// that is itself a public suffix is its own site.
func Of(host string) string {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if a, err := idna.Lookup.ToASCII(host); err == nil {
		host = a
	}
	if net.ParseIP(strings.Trim(host, "[]")) != nil || !strings.Contains(host, ".") {
		return host
	}
	if d, err := publicsuffix.EffectiveTLDPlusOne(host); err == nil {
		return d
	}
	return host
}

// OfIssuer is the site of an issuer URL (Of of its host).
func OfIssuer(issuer string) string {
	host := issuer
	if u, err := url.Parse(issuer); err == nil && u.Host != "" {
		host = u.Hostname()
	}
	return Of(Clean(host))
}

// Name is an agent as the owner reads it.
type Name struct {
	// Site is the issuer's registrable domain in ASCII: the key requests are grouped and denied
	// by. SiteName is how it is shown, in full: for an IDN, the Unicode form with the punycode
	// beside it ("bücher.example (xn--bcher-kva.example)").
	Site, SiteName string
	// Host is the issuer host (and port), cut only from the left so that the site stays whole.
	Host string
	// Subject is the agent's sub, cleaned and cut: only what the issuer says.
	Subject string
	// Claim is the one line that puts the two together: "says it is alice@google.com — issued
	// by attacker.example".
	Claim string
}

// Describe names the agent (issuer URL, subject).
func Describe(issuer, subject string) Name {
	host, port := issuer, ""
	if u, err := url.Parse(issuer); err == nil && u.Host != "" {
		host, port = u.Hostname(), u.Port()
	}
	host = strings.TrimSuffix(strings.ToLower(Clean(host)), ".")
	if a, err := idna.Lookup.ToASCII(host); err == nil {
		host = a
	}
	s := Of(host)
	n := Name{Site: s, SiteName: withUnicode(s), Host: cutLeft(host, s, HostShown), Subject: subjectText(subject)}
	if strings.Contains(n.Host, ":") && !strings.HasPrefix(n.Host, "[") {
		n.Host = "[" + n.Host + "]"
	}
	if port != "" {
		n.Host += ":" + port
	}
	n.Claim = "says it is " + n.Subject + " — issued by " + n.SiteName
	return n
}

// withUnicode shows an IDN site as Unicode with its punycode beside it, so that a look-alike
// (a Cyrillic "а" for "a") reads as what it is.
func withUnicode(s string) string {
	if !strings.Contains(s, "xn--") {
		return s
	}
	u, err := idna.Lookup.ToUnicode(s)
	if err != nil || u == s {
		return s
	}
	return Clean(u) + " (" + s + ")"
}

// cutLeft keeps the site and as many labels to its left as fit in max characters, marking the
// cut with "…".
func cutLeft(host, site string, max int) string {
	if len(host) <= max || host == site || !strings.HasSuffix(host, "."+site) {
		return host
	}
	kept := site
	rest := strings.TrimSuffix(strings.TrimSuffix(host, site), ".")
	labels := strings.Split(rest, ".")
	for i := len(labels) - 1; i >= 0; i-- {
		next := labels[i] + "." + kept
		if len(next)+2 > max { // "…." before it
			break
		}
		kept = next
	}
	return "…." + kept
}

// subjectText is the subject as shown: cleaned, dashes that could fake the " — issued by"
// separator made plain hyphens, cut at SubjectShown characters.
func subjectText(sub string) string {
	sub = strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Pd, r) {
			return '-'
		}
		return r
	}, Clean(sub))
	if utf8.RuneCountInString(sub) > SubjectShown {
		sub = string([]rune(sub)[:SubjectShown-1]) + "…"
	}
	if sub == "" {
		return "(no subject)"
	}
	return sub
}

// Clean makes text that came from an agent or a policy safe to show: no control characters
// (ANSI escapes lose their ESC and become harmless), no bidi overrides or invisible format
// characters that could make one agent look like another, no invalid UTF-8; tabs and newlines
// become spaces.
func Clean(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			b.WriteRune('\uFFFD')
		case r == '\n' || r == '\t':
			b.WriteRune(' ')
		case unicode.IsControl(r), unicode.Is(unicode.Cf, r):
			// Cf holds the bidi embeddings, overrides and isolates and the zero-width characters.
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
