package codex

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/codex/mockmodel"
	"github.com/aether/aether/backend/domain"
)

// realCodex finds the real codex: $AETHER_REAL_CODEX, else codex on PATH.
func realCodex(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("AETHER_REAL_CODEX"); p != "" {
		return p
	}
	p, err := exec.LookPath("codex")
	if err != nil {
		t.Skip("no real codex: set AETHER_REAL_CODEX=$(scripts/install-codex.sh) or put codex on PATH")
	}
	return p
}

// TestRealCodexContract runs the real `codex exec` through the Runner against a local mock of
// the Responses API: what the fake codex imitates must hold for the real one.
func TestRealCodexContract(t *testing.T) {
	bin := realCodex(t)
	model := mockmodel.New(
		mockmodel.Shell("echo pwned > pwned.txt; cat a.txt"),
		mockmodel.Message("The file says hi."),
	)
	defer model.Close()
	ws := t.TempDir()
	mustWrite(t, filepath.Join(ws, "a.txt"), "hi\n")
	home := codextest.Home(t)
	newRunner := func(m *mockmodel.Server) *Runner {
		r := &Runner{
			Path:      bin,
			Home:      home,
			Timeout:   2 * time.Minute,
			Env:       []string{"CODEX_API_KEY=dummy"},
			ExtraArgs: m.ProviderArgs(),
			Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		}
		t.Cleanup(r.Wait)
		return r
	}
	r := newRunner(model)
	ctx := context.Background()

	h := r.Check(ctx)
	if !h.Found || !h.VersionOK || !h.APIKey || h.LoggedIn || !h.Ready() {
		t.Fatalf("health %+v", h)
	}
	t.Logf("codex %s at %s", h.Version, h.Path)

	var progress []string
	res, err := r.Run(ctx, Request{
		Workspace:  ws,
		AccessMode: domain.ReadOnly,
		Prompt:     BuildPrompt("Answer the question.", []string{"--what does a.txt say?"}),
	}, func(p Progress) { progress = append(progress, p.Text) })
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusCompleted || res.Answer != "The file says hi." || res.ThreadID == "" || res.ExitCode != 0 {
		t.Fatalf("result %+v", res)
	}
	if res.WorkspaceChanged {
		t.Fatalf("read-only workspace changed: %q", res.ChangedPaths)
	}
	if _, err := os.Stat(filepath.Join(ws, "pwned.txt")); !os.IsNotExist(err) {
		t.Fatalf("the sandbox let a write through: %v", err)
	}
	if len(progress) == 0 || !strings.HasPrefix(progress[0], "running: echo pwned") {
		t.Fatalf("progress %q", progress)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	if mode := reqs[0].TurnMetadata()["sandbox_mode"]; mode != "read-only" {
		t.Fatalf("codex ran with sandbox_mode %v", mode)
	}
	if out := strings.Join(reqs[1].ToolOutput, "\n"); !strings.Contains(out, "Read-only file system") || !strings.Contains(out, `hi\\n`) {
		t.Fatalf("the sandboxed command did not read the file and fail to write: %s", out)
	}

	t.Run("resume", func(t *testing.T) {
		again, err := r.Run(ctx, Request{Workspace: ws, AccessMode: domain.ReadOnly, Prompt: "and again?", ThreadID: res.ThreadID}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if again.Status != StatusCompleted || again.ThreadID != res.ThreadID || again.Answer != "The file says hi." {
			t.Fatalf("result %+v", again)
		}
		reqs := model.Requests()
		if mode := reqs[len(reqs)-1].TurnMetadata()["sandbox_mode"]; mode != "read-only" {
			t.Fatalf("resumed turn ran with sandbox_mode %v", mode)
		}
	})

	t.Run("read_write writes inside the workspace only", func(t *testing.T) {
		outside := filepath.Join(home, "outside.txt") // not under /tmp, which workspace-write allows
		rw := mockmodel.New(mockmodel.Shell("echo made > made.txt; echo x > "+outside), mockmodel.Message("made it"))
		defer rw.Close()
		res, err := newRunner(rw).Run(ctx, Request{Workspace: ws, AccessMode: domain.ReadWrite, Prompt: "make a file"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != StatusCompleted || res.Answer != "made it" {
			t.Fatalf("result %+v", res)
		}
		if data, err := os.ReadFile(filepath.Join(ws, "made.txt")); err != nil || string(data) != "made\n" {
			t.Fatalf("workspace-write did not write in the workspace: %q %v", data, err)
		}
		if _, err := os.Stat(outside); !os.IsNotExist(err) {
			t.Fatalf("workspace-write wrote outside the workspace: %v", err)
		}
		if mode := rw.Requests()[0].TurnMetadata()["sandbox_mode"]; mode != "workspace-write" {
			t.Fatalf("codex ran with sandbox_mode %v", mode)
		}
	})

	t.Run("quota", func(t *testing.T) {
		quota := mockmodel.New(mockmodel.QuotaExceeded())
		defer quota.Close()
		res, err := newRunner(quota).Run(ctx, Request{Workspace: ws, AccessMode: domain.ReadOnly, Prompt: "hi"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != StatusFailed || res.Reason != "quota exceeded" || res.ExitCode != 1 {
			t.Fatalf("result %+v", res)
		}
	})

	t.Run("offline", func(t *testing.T) {
		down := mockmodel.New()
		down.Close() // nothing listens: codex retries "waiting for network" until stopped
		ro := newRunner(down)
		ro.Timeout, ro.Grace = 5*time.Second, 2*time.Second // the turn times out once codex says it is offline
		res, err := ro.Run(ctx, Request{Workspace: ws, AccessMode: domain.ReadOnly, Prompt: "hi"}, expireWhenOffline(ro))
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != StatusTimeout || res.Reason != "offline or timed out after 5s" {
			t.Fatalf("result %+v", res)
		}
	})
}
