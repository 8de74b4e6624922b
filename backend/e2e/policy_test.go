package e2e

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestPolicyHandEdits: a broken policy.json edited by hand stops the gateway
// (never a guessed policy) and shows its problems on the Brands page; fixing
// the file serves again, without a restart.
func TestPolicyHandEdits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	good, err := os.ReadFile(e.policy)
	if err != nil {
		t.Fatal(err)
	}
	status := func() int {
		resp, err := http.Get(e.publicURL + "/a2a/review/.well-known/agent-card.json")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(waitLimit); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if ok() {
				return
			}
		}
		t.Fatalf("timed out waiting until %s", what)
	}

	broken := strings.Replace(string(good), `"accessMode":"read_only"`, `"accessMode":"readonly"`, 1)
	if err := os.WriteFile(e.policy, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor("the gateway stops", func() bool { return status() == http.StatusServiceUnavailable })
	var view struct {
		Brands []any
		Error  *struct {
			Message  string
			Problems []struct{ Path, Message string }
		}
	}
	e.admin.do("GET", "/api/brands", nil, &view)
	if view.Error == nil || len(view.Error.Problems) != 1 || view.Error.Problems[0].Path != "pact.brands[0].accessMode" || len(view.Brands) != 0 {
		t.Fatalf("brands page after a broken edit: %+v", view)
	}
	var out map[string]any
	if code := e.admin.do("PUT", "/api/brands/review", map[string]any{"id": "review"}, &out); code == http.StatusOK {
		t.Fatal("the Brands page saved over a broken policy.json")
	}

	if err := os.WriteFile(e.policy, good, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor("the gateway serves again", func() bool { return status() == http.StatusOK })
}
