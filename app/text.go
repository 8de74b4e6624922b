package app

import (
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"github.com/aether/aether/backend/owner"
)

// clean makes text that came from an agent (issuer, subject) or a policy safe to show in a
// menu or a notification: no control characters (ANSI escapes lose their ESC and become
// harmless), no bidi overrides or invisible format characters that could make one agent
// look like another, no invalid UTF-8.
func clean(s string) string {
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

// shorten cuts s to at most n characters, marking the cut.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// agentName is the short form of an agent for menus: subject @ issuer host.
func agentName(a owner.Agent) string {
	host := a.Issuer
	if u, err := url.Parse(a.Issuer); err == nil && u.Host != "" {
		host = asciiHost(u)
	}
	return clean(a.Subject) + " @ " + clean(host)
}

// issuerText is the issuer with its host in punycode, so that a look-alike (a Cyrillic
// "а" for "a") does not pass for the real one.
func issuerText(iss string) string {
	u, err := url.Parse(iss)
	if err != nil || u.Host == "" {
		return clean(iss)
	}
	return clean(u.Scheme + "://" + asciiHost(u) + u.EscapedPath())
}

func asciiHost(u *url.URL) string {
	host := u.Hostname()
	if a, err := idna.Lookup.ToASCII(host); err == nil {
		host = a
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if p := u.Port(); p != "" {
		host += ":" + p
	}
	return host
}

// escapeMarkup escapes the few characters the notification spec's body markup reads.
func escapeMarkup(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;").Replace(s)
}

// notificationText is a consent request as a desktop notification: who asks (issuer and
// subject, in full), for which brand and scope, and the user code the agent's user sees,
// so the owner can match the two before pressing Allow.
func notificationText(r owner.ConsentRequest, markup bool) (summary, body string) {
	brand := clean(r.Brand.Name)
	summary = "Allow an agent to use " + shorten(brand, 60) + "?"
	esc := func(s string) string { return s }
	if markup {
		esc = escapeMarkup
	}
	bold := func(s string) string { return s }
	if markup {
		bold = func(s string) string { return "<b>" + s + "</b>" }
	}
	scope := clean(r.Scope.ID)
	if d := clean(r.Scope.Description); d != "" {
		scope = d + " [" + scope + "]"
	}
	lines := []string{
		"Agent: " + bold(esc(shorten(clean(r.Agent.Subject), 80))),
		"Issuer: " + esc(shorten(issuerText(r.Agent.Issuer), 120)),
		"Brand: " + esc(shorten(brand, 60)+" ["+shorten(clean(r.Brand.ID), 40)+"]"),
		"Scope: " + esc(shorten(scope, 120)),
		"Code: " + bold(esc(r.UserCode)),
	}
	if !r.ExpiresAt.IsZero() {
		lines = append(lines, fmt.Sprintf("Expires at %s", r.ExpiresAt.Local().Format(time.Kitchen)))
	}
	return summary, strings.Join(lines, "\n")
}
