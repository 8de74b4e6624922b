package app

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/site"
)

// clean makes text that came from an agent or a policy safe to show in a menu or a
// notification (site.Clean: no control, bidi or invisible format characters).
func clean(s string) string { return site.Clean(s) }

// shorten cuts s to at most n characters, marking the cut.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// escapeMarkup escapes the few characters the notification spec's body markup reads.
func escapeMarkup(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;").Replace(s)
}

// notificationText is a consent request as a desktop notification: the issuer's registrable
// domain first and in full, then the subject as what it is, the issuer's claim, then the host
// (cut from the left only), brand, scope and the user code the agent's user sees, so the owner
// can match the two before pressing Allow. The agent lines are owner.Agent's, the same the
// pages and the tray show (C13–C15).
func notificationText(r owner.ConsentRequest, markup bool) (summary, body string) {
	brand := clean(r.Brand.Name)
	summary = "Allow an agent to use " + shorten(brand, 60) + "?"
	esc, bold := markupOf(markup)
	scope := clean(r.Scope.ID)
	if d := clean(r.Scope.Description); d != "" {
		scope = d + " [" + scope + "]"
	}
	lines := []string{
		"Issuer: " + bold(esc(r.Agent.SiteName)),
		"Agent " + esc(r.Agent.Claim),
		"Host: " + esc(r.Agent.Host),
		"Brand: " + esc(shorten(brand, 60)+" ["+shorten(clean(string(r.Brand.ID)), 40)+"]"),
		"Scope: " + esc(shorten(scope, 120)),
		"Code: " + bold(esc(r.UserCode)),
	}
	if !r.ExpiresAt.IsZero() {
		lines = append(lines, fmt.Sprintf("Expires at %s", r.ExpiresAt.Local().Format(time.Kitchen)))
	}
	return summary, strings.Join(lines, "\n")
}

// burstText is the one notification of several requests from one issuer (C18): the first of
// them, and how many more there are, by the issuer's registrable domain.
func burstText(reqs []owner.ConsentRequest, markup bool) (summary, body string) {
	first := reqs[0].Agent
	esc, bold := markupOf(markup)
	summary = fmt.Sprintf("%d agents from %s ask to use your brands", len(reqs), shorten(first.SiteName, 80))
	lines := []string{
		"Issuer: " + bold(esc(first.SiteName)),
		"Agent " + esc(first.Claim),
		bold(esc(moreText(len(reqs)-1, first.SiteName))),
		"Open Aether to see each request, or deny them all.",
	}
	return summary, strings.Join(lines, "\n")
}

// moreText is "and 12 more from evil.example".
func moreText(n int, siteName string) string {
	return fmt.Sprintf("and %d more from %s", n, siteName)
}

// overflowText is the one notification of the requests from issuers beyond the few that
// have their own (C18).
func overflowText(n, issuers int) (summary, body string) {
	return fmt.Sprintf("%d more requests from %d other issuers", n, issuers), "Open Aether to see them."
}

func markupOf(markup bool) (esc, bold func(string) string) {
	if !markup {
		id := func(s string) string { return s }
		return id, id
	}
	return escapeMarkup, func(s string) string { return "<b>" + s + "</b>" }
}
