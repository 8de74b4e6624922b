package e2e

import (
	"strings"
	"testing"
)

// TestConsentLinkLookup: a consent link to a request that is no longer pending
// says what became of it, from the node's own records.
func TestConsentLinkLookup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	lookup := func(code string) string {
		var out struct{ Lookup struct{ Status string } }
		e.admin.do("GET", "/api/consent?user_code="+code, nil, &out)
		return out.Lookup.Status
	}
	a := e.agent("alice")
	code, start := a.oauthForm(e.publicURL+"/pact/device_authorization", map[string][]string{"scope": {"review:read_only"}})
	if code != 200 {
		t.Fatalf("device authorization: %d %v", code, start)
	}
	userCode := start["user_code"].(string)
	if got := lookup(strings.ToLower(strings.ReplaceAll(userCode, "-", ""))); got != "pending" {
		t.Fatalf("pending request looked up as %q", got)
	}
	if c, out := e.admin.decide(userCode, "deny"); c != 200 {
		t.Fatalf("deny: %d %v", c, out)
	}
	if got := lookup(userCode); got != "denied" {
		t.Fatalf("denied request looked up as %q", got)
	}
	for _, bad := range []string{"BCDF-GHJK", "not-a-code"} {
		if got := lookup(bad); got != "unknown" {
			t.Errorf("%s looked up as %q", bad, got)
		}
	}
}
