package e2e

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/codex/codextest"
)

// revoke revokes a grant on the admin API, as the owner does on the sharing page.
func (e *env) revoke(grant string) map[string]any {
	e.t.Helper()
	var out struct{ Grant map[string]any }
	if code := e.admin.do("POST", "/api/grants/"+grant+"/revoke", nil, &out); code != 200 {
		e.t.Fatalf("revoke %s: %d", grant, code)
	}
	return out.Grant
}

// grant is one grant as the sharing page lists it (nil if absent).
func (e *env) grant(id string) map[string]any {
	e.t.Helper()
	var out struct{ Grants []map[string]any }
	if code := e.admin.do("GET", "/api/grants", nil, &out); code != 200 {
		e.t.Fatalf("grants: %d", code)
	}
	for _, g := range out.Grants {
		if g["id"] == id {
			return g
		}
	}
	return nil
}

// receiptFor is the receipt of a task as the receipts page lists it (nil if none).
func (e *env) receiptFor(task a2a.TaskID) map[string]any {
	e.t.Helper()
	var out struct{ Receipts []map[string]any }
	if code := e.admin.do("GET", "/api/receipts?limit=100", nil, &out); code != 200 {
		e.t.Fatalf("receipts: %d", code)
	}
	for _, r := range out.Receipts {
		if r["taskId"] == string(task) {
			return r
		}
	}
	return nil
}

// TestConsent follows the owner's decisions to the agent's turns: deny ends
// the waiting task REJECTED; revoke stops the next turn (V1) but lets a
// running one finish with the revocation in its receipt (V2).
func TestConsent(t *testing.T) {
	t.Parallel()
	gate := filepath.Join(t.TempDir(), "gate")
	e := newEnv(t, withCodexEnv("FAKE_CODEX_GATE="+gate))
	ctx := context.Background()

	t.Run("D7 owner denies: access_denied and the waiting task ends REJECTED", func(t *testing.T) {
		dora := e.agent("dora")
		c := dora.client("review", a2a.TransportProtocolJSONRPC)
		waiting := dora.send(c, "", "Review main.go please")
		authData(t, waiting)
		code, start := dora.oauthForm(e.publicURL+"/pact/device_authorization", url.Values{"scope": {"review:read_only"}})
		if code != 200 {
			t.Fatalf("device authorization: %d %v", code, start)
		}
		code, out := e.admin.decide(start["user_code"].(string), "deny")
		if code != 200 || out["status"] != "denied" {
			t.Fatalf("deny: %d %v", code, out)
		}
		code, tok := dora.oauthForm(e.publicURL+"/pact/token", url.Values{
			"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {start["device_code"].(string)}})
		if code != 400 || tok["error"] != "access_denied" || tok["access_token"] != nil {
			t.Errorf("token after deny: %d %v; want 400 access_denied", code, tok)
		}
		got := waitState(t, c, waiting.ID, a2a.TaskStateRejected)
		if !strings.Contains(statusText(got), "denied") {
			t.Errorf("REJECTED reason %q does not say the owner denied", statusText(got))
		}
		req := textMessage("please?")
		req.Message.TaskID = waiting.ID
		if _, err := c.SendMessage(ctx, req); !errors.Is(err, a2a.ErrUnsupportedOperation) {
			t.Errorf("a message to the rejected task: %v; want UnsupportedOperation", err)
		}
	})

	t.Run("V1 revoke: the next turn with the old token is AUTH_REQUIRED revoked", func(t *testing.T) {
		erin := e.agent("erin")
		grant := erin.allow()
		c := erin.client("review", a2a.TransportProtocolJSONRPC)
		if first := erin.send(c, "", "Review main.go please"); first.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("turn before revoke ended %s: %q", first.Status.State, statusText(first))
		}
		if g := e.revoke(grant); g["status"] != "revoked" {
			t.Fatalf("revoked grant: %v", g)
		}
		runs := e.codexRuns()
		got := erin.send(c, "", "Review main.go again")
		if r := authData(t, got)["reason"]; r != "revoked" {
			t.Errorf("reason %v, want revoked", r)
		}
		// Resuming that task, or streaming, with the old token is refused the same way.
		if again := erin.send(c, got.ID, "Review main.go again"); authData(t, again)["reason"] != "revoked" {
			t.Errorf("resume reason %v, want revoked", authData(t, again)["reason"])
		}
		evs, err := collectStream(t, streamSend(erin.client("review", a2a.TransportProtocolHTTPJSON), "", "Review main.go again"))
		if err != nil || len(evs) != 1 || authData(t, evs[0].(*a2a.Task))["reason"] != "revoked" {
			t.Errorf("streaming after revoke: %s %v; want one AUTH_REQUIRED (revoked)", describeAll(evs), err)
		}
		if n := e.codexRuns(); n != runs {
			t.Errorf("codex ran %d times on a revoked grant", n-runs)
		}
	})

	t.Run("V2 revoke during an in-flight turn: it finishes, its receipt says so, no new turn", func(t *testing.T) {
		frank := e.agent("frank")
		grant := frank.allow()
		c := frank.client("review", a2a.TransportProtocolJSONRPC)
		marker := "wait for the gate [fake:gate]"
		type result struct {
			res a2a.SendMessageResult
			err error
		}
		done := make(chan result, 1)
		go func() {
			res, err := c.SendMessage(ctx, textMessage(marker))
			done <- result{res, err}
		}()
		e.codexStarted(marker)
		e.revoke(grant)
		if err := os.WriteFile(gate, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		var r result
		select {
		case r = <-done:
		case <-time.After(waitLimit):
			t.Fatalf("the in-flight turn did not finish within %s", waitLimit)
		}
		task, ok := r.res.(*a2a.Task)
		if r.err != nil || !ok {
			t.Fatalf("in-flight turn: %v %v", r.res, r.err)
		}
		if task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("in-flight turn ended %s: %q", task.Status.State, statusText(task))
		}
		if answer, _ := artifacts(t, task); answer != codextest.DefaultAnswer {
			t.Errorf("answer %q", answer)
		}
		if claims := receiptClaims(t, e, task); claims.Status != "completed" || !claims.GrantRevoked {
			t.Errorf("receipt: status %q grant_revoked %v; want completed and true", claims.Status, claims.GrantRevoked)
		}
		runs := e.codexRuns()
		if next := frank.send(c, "", "Review main.go again"); authData(t, next)["reason"] != "revoked" {
			t.Errorf("next turn reason %v, want revoked", authData(t, next)["reason"])
		}
		if n := e.codexRuns(); n != runs {
			t.Error("codex ran after the revoke")
		}
	})
}
