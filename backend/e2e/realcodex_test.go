package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/codex/mockmodel"
	aimodel "github.com/aether/aether/backend/model"
	"github.com/aether/aether/backend/receipts"
)

// TestPactRealCodex runs a whole PACT turn through the real `codex exec`, the
// node's model gateway and a local mock of the OpenAI Responses API set as the
// owner's server: the answer the mock scripts comes back through the gateway
// with a receipt, under the read-only sandbox, and the receipt's usage is what
// the mock reported. It keeps the fake Codex honest. CI installs the real CLI
// (scripts/install-codex.sh) and sets AETHER_REAL_CODEX.
func TestPactRealCodex(t *testing.T) {
	bin := os.Getenv("AETHER_REAL_CODEX")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("codex"); err != nil {
			t.Skip("no real codex: set AETHER_REAL_CODEX=$(scripts/install-codex.sh)")
		}
	}
	model := mockmodel.New(
		mockmodel.Shell("echo pwned > pwned.txt; cat main.go"),
		mockmodel.Message("main.go declares an empty main; nothing to fix."),
	)
	defer model.Close()
	home := codextest.Home(t) // not under /tmp: codex's Linux sandbox cannot start from there

	e := newEnv(t, withCodexPath(bin), withCodexEnv("CODEX_API_KEY=dummy"))
	e.stop()
	e.opts.CodexHome = home
	const ownerKey = "sk-e2e-owner-9c4d1f"
	store := &aimodel.Store{Dir: e.dataDir}
	if _, err := store.Update(func(s *aimodel.Settings) { s.BaseURL = model.BaseURL() }); err != nil {
		t.Fatal(err)
	}
	if err := store.SetKey(ownerKey); err != nil {
		t.Fatal(err)
	}
	e.start()

	alice := e.agent("alice")
	alice.setDelegation(e.delegate(t, alice, "review"))
	c := alice.client("review", a2a.TransportProtocolJSONRPC)
	task := alice.send(c, "", "Review main.go please")
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("turn ended %s: %s", task.Status.State, statusText(task))
	}
	answer, rec := artifacts(t, task)
	if answer != "main.go declares an empty main; nothing to fix." {
		t.Fatalf("answer %q", answer)
	}
	claims, err := receipts.VerifyOne(rec, nodeJWKS(t, e))
	if err != nil {
		t.Fatalf("receipt: %v", err)
	}
	reqs := model.Requests()
	for i, r := range reqs {
		if got := r.Header.Get("Authorization"); got != "Bearer "+ownerKey {
			t.Errorf("request %d reached the model with %q, not the owner's key", i, got)
		}
	}
	// The gateway's count: the mock reports 10 in and 5 out per request.
	if want := (receipts.Usage{InputTokens: 10 * int64(len(reqs)), OutputTokens: 5 * int64(len(reqs))}); claims.Usage != want {
		t.Errorf("receipt usage %+v, want %+v", claims.Usage, want)
	}
	if len(reqs) == 0 || reqs[0].TurnMetadata()["sandbox_mode"] != "read-only" {
		t.Fatalf("codex did not run read-only: %d requests", len(reqs))
	}
	if _, err := os.Stat(filepath.Join(e.workspace, "pwned.txt")); !os.IsNotExist(err) {
		t.Fatal("the read-only sandbox let a write into the workspace")
	}
}
