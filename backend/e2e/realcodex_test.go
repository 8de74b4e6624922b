package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/codex/mockmodel"
	"github.com/aether/aether/backend/receipts"
)

// TestPactRealCodex runs a whole PACT turn through the real `codex exec`
// against a local mock of the OpenAI Responses API: the answer the mock
// scripts comes back through the gateway with a receipt, under the read-only
// sandbox. It keeps the fake Codex honest. CI installs the real CLI
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
	e.opts.CodexArgs = model.ProviderArgs()
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
	// The receipt signs what the turn did (docs/wire.md, "What the turn did"): the one
	// command, and no change to the read-only workspace.
	w := claims.Work
	if claims.V != receipts.Version || w == nil || w.Commands.Count != 1 || w.Sandbox != "read-only" || w.Files.Count != 0 || w.Before != w.After {
		t.Fatalf("receipt v %d, work %+v", claims.V, w)
	}
	if line := w.Commands.Items[0].Line; line != "/bin/bash -c 'echo pwned > pwned.txt; cat main.go'" {
		t.Fatalf("command %q", line)
	}
	reqs := model.Requests()
	if len(reqs) == 0 || reqs[0].TurnMetadata()["sandbox_mode"] != "read-only" {
		t.Fatalf("codex did not run read-only: %d requests", len(reqs))
	}
	if _, err := os.Stat(filepath.Join(e.workspace, "pwned.txt")); !os.IsNotExist(err) {
		t.Fatal("the read-only sandbox let a write into the workspace")
	}
}
