package agent_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aether/aether/backend/agent"
	"github.com/aether/aether/backend/cli"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = cli.Main(append([]string{"agent"}, args...), cli.Env{Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

func TestAgentVerb(t *testing.T) {
	t.Parallel()
	pub, decide := agent.StartNodeForCLITest(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	owner := make(chan error, 1)
	go func() { owner <- decide(ctx, true) }()
	// Flags may follow the message words.
	code, out, errOut := runCLI("--card", pub, "--brand", "review", "--issuer-dir", dir, "--subject", "alice", "Review", "main.go", "--stream")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if err := <-owner; err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Card: Code review (brand review)", "AUTH_REQUIRED (reason: missing)", "Ask the node owner to approve code ",
		"Waiting for the owner", "[working]", "Answer:\nReviewed (read_only): looks good.", "signature verified with the node JWKS"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}

	// Same folder, same agent: the saved token is used, nobody is asked.
	code, out, errOut = runCLI("--card", pub+"/a2a/review/.well-known/agent-card.json", "--issuer-dir", dir, "--subject", "alice", "Again")
	if code != 0 || strings.Contains(out, "Ask the node owner") || !strings.Contains(out, "saved from an earlier run") {
		t.Fatalf("second run: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	t.Run("peer checkpoint", func(t *testing.T) {
		st, err := agent.LoadLogs(dir)
		var held string
		if err == nil && len(st.Logs) == 1 {
			held = st.Logs[0].Checkpoint
		}
		if err != nil || !strings.Contains(out, "in the node's log") || held == "" {
			t.Fatalf("held %q (%v), stdout:\n%s", held, err, out)
		}
		file := filepath.Join(t.TempDir(), "peer.checkpoint")
		os.WriteFile(file, []byte(held), 0o600)
		// The agent's own checkpoint is one a peer of the same node could hold: consistent.
		code, out, errOut := runCLI("--card", pub, "--brand", "review", "--issuer-dir", dir, "--subject", "alice", "--peer-checkpoint", file, "Once more")
		if code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		if code, _, _ := runCLI("--card", pub, "--brand", "review", "--issuer-dir", dir, "--peer-checkpoint", filepath.Join(t.TempDir(), "none"), "hi"); code != 2 {
			t.Fatalf("a missing peer checkpoint file: exit %d, want 2", code)
		}
	})
	t.Run("witness", func(t *testing.T) {
		// --witness cosigns the checkpoint verified; the next run sends the cosignature, which
		// the node takes (a refused one would fail the run).
		for _, msg := range []string{"Witness", "Witness again"} {
			code, out, errOut := runCLI("--card", pub, "--brand", "review", "--issuer-dir", dir, "--subject", "alice", "--witness", msg)
			if code != 0 || !strings.Contains(out, "cosigned that checkpoint as witness ") {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "witness-key.pem")); err != nil {
			t.Fatalf("the witness key: %v", err)
		}
	})
	t.Run("D7 denied", func(t *testing.T) {
		go func() { owner <- decide(ctx, false) }()
		code, _, errOut := runCLI("--card", pub, "--brand", "review", "--issuer-dir", t.TempDir(), "Review it")
		<-owner
		if code != 1 || !strings.Contains(errOut, "denied") {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
	})
	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{
			{"--card", pub}, // no message
			{"just words"},  // no card
			{"--card", pub, "--binding", "grpc", "hi"},
			{"--no-such-flag", "--card", pub, "hi"},
		} {
			if code, _, _ := runCLI(args...); code != 2 {
				t.Errorf("%q: exit %d, want 2", args, code)
			}
		}
	})
	t.Run("wrong brand", func(t *testing.T) {
		code, _, errOut := runCLI("--card", pub, "--brand", "deploy", "--issuer-dir", t.TempDir(), "hi")
		if code != 1 || !strings.Contains(errOut, "404") {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
	})
}
