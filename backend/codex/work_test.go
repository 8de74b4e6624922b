package codex

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/aether/aether/backend/domain"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether/aether/backend/work"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// runWork plays cmds as one turn of the real codex in h's workspace and returns its work.
func (h *host) runWork(t *testing.T, access domain.AccessMode, cmds ...string) *work.Work {
	t.Helper()
	res, _, _, _ := h.run(t, access, cmds)
	if res.Work == nil {
		t.Fatal("no work in the result of a turn codex ran")
	}
	return res.Work
}

// wantCommands checks that w lists exactly cmds, in order, with their exit codes, the hash
// of each exact command line and of each output.
func wantCommands(t *testing.T, w *work.Work, cmds, outs []string, exits []int) {
	t.Helper()
	if w.Commands.Count != len(cmds) || len(w.Commands.Items) != len(cmds) {
		t.Fatalf("%d commands listed (count %d), want %d: %+v", len(w.Commands.Items), w.Commands.Count, len(cmds), w.Commands.Items)
	}
	for i, c := range w.Commands.Items {
		line := "/bin/bash -c '" + cmds[i] + "'"
		if c.Line != line || c.LineSHA256 != sha(line) || c.Exit == nil || *c.Exit != exits[i] || c.Ms == nil || *c.Ms < 0 {
			t.Errorf("command %d: %+v, want %q exiting %d", i, c, line, exits[i])
		}
		if outs[i] != "" && c.OutputSHA256 != sha(outs[i]) {
			t.Errorf("command %d: output hash %s, want the hash of %q", i, c.OutputSHA256, outs[i])
		}
	}
}

// TestRealCodexWork: the real codex, driven by the mock model, runs two commands; one writes
// a file in a read_write workspace. The work the receipt signs lists exactly those commands
// and that file, hashed by the node from the workspace; a read_only turn lists its commands
// and no change, with equal digests before and after.
func TestRealCodexWork(t *testing.T) {
	t.Run("read_write: two commands, one file written", func(t *testing.T) {
		h := newHost(t)
		cmds := []string{"cat a.txt", "printf made > out.txt; exit 3"}
		w := h.runWork(t, domain.ReadWrite, cmds...)
		wantCommands(t, w, cmds, []string{h.wsText + "\n", ""}, []int{0, 3})
		content, err := os.ReadFile(filepath.Join(h.ws, "out.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if w.Files.Count != 1 || len(w.Files.Items) != 1 {
			t.Fatalf("files: %+v, want out.txt alone", w.Files)
		}
		f := w.Files.Items[0]
		if f.Path != "out.txt" || f.Kind != work.Added || f.Type != "" || f.Size == nil || *f.Size != int64(len(content)) || f.SHA256 != sha(string(content)) {
			t.Fatalf("file: %+v, want out.txt added, %d bytes, sha256 %s", f, len(content), sha(string(content)))
		}
		if w.Before == "" || w.After == "" || w.Before == w.After || w.Patches.Count != 0 {
			t.Fatalf("digests %s → %s, patches %+v", w.Before, w.After, w.Patches)
		}
		wantMeta(t, w, "workspace-write")
	})
	t.Run("read_only: commands, no changes", func(t *testing.T) {
		h := newHost(t)
		cmds := []string{"cat a.txt", "ls a.txt"}
		w := h.runWork(t, domain.ReadOnly, cmds...)
		wantCommands(t, w, cmds, []string{h.wsText + "\n", "a.txt\n"}, []int{0, 0})
		if w.Files.Count != 0 || len(w.Files.Items) != 0 || w.Patches.Count != 0 || w.Before == "" || w.Before != w.After {
			t.Fatalf("files %+v, patches %+v, digests %s → %s", w.Files, w.Patches, w.Before, w.After)
		}
		wantMeta(t, w, "read-only")
	})
}

func wantMeta(t *testing.T, w *work.Work, sandbox string) {
	t.Helper()
	if w.Codex == "" || !strings.HasPrefix(w.Codex, "0.") || w.Sandbox != sandbox || !strings.HasPrefix(w.Confinement, "bubblewrap") {
		t.Fatalf("codex %q, sandbox %q, confinement %q", w.Codex, w.Sandbox, w.Confinement)
	}
}

// TestRealCodexWorkHostile (S13): a command line with a terminal escape and a huge argument,
// and a file whose name holds an escape and a bidi override, reach the receipt escaped and
// cut, with the exact command line's hash.
func TestRealCodexWorkHostile(t *testing.T) {
	t.Run("S13 an escape and a huge argument in a command, an escape and a bidi override in a file name", realCodexWorkHostile)
}

func realCodexWorkHostile(t *testing.T) {
	h := newHost(t)
	huge := strings.Repeat("x", 100_000)
	cmds := []string{"echo '\x1b[2J'; : " + huge, `touch "$(printf 'evil\033[2J\342\200\256txt.exe')"`}
	w := h.runWork(t, domain.ReadWrite, cmds...)
	if w.Commands.Count != 2 {
		t.Fatalf("commands: %+v", w.Commands)
	}
	first := w.Commands.Items[0]
	line := `/bin/bash -c "` + cmds[0] + `"` // as codex quotes a command holding single quotes
	if first.LineSHA256 != sha(line) || !strings.HasPrefix(first.Line, `/bin/bash -c "echo '\x1b[2J'; : xxx`) ||
		!strings.HasSuffix(first.Line, work.Cut) || len(first.Line) > work.MaxCommandBytes+len(work.Cut) {
		t.Fatalf("S13 command shown as %q (%d bytes), hash %s", first.Line[:min(80, len(first.Line))], len(first.Line), first.LineSHA256)
	}
	if w.Files.Count != 1 || w.Files.Items[0].Path != `evil\x1b[2J\u{202e}txt.exe` || w.Files.Items[0].SHA256 != sha("") {
		t.Fatalf("S13 file: %+v", w.Files.Items)
	}
	if err := w.Check(); err != nil {
		t.Fatalf("the work would not verify: %v", err)
	}
}

// TestWorkLog: the event stream's commands and file changes, past the bound: the first
// MaxEntries are kept, counted and digested; a command Codex never finished is listed as
// unfinished; a file change's absolute path is made relative to the workspace.
func TestWorkLog(t *testing.T) {
	now := time.Unix(0, 0)
	l := newWorkLog("/ws", func() time.Time { now = now.Add(time.Millisecond); return now })
	tr := transcript{work: l}
	for i := range work.MaxEntries + 3 {
		tr.handle(fmt.Appendf(nil, `{"type":"item.started","item":{"id":"c%d","type":"command_execution","command":"echo %d","status":"in_progress"}}`, i, i))
		tr.handle(fmt.Appendf(nil, `{"type":"item.completed","item":{"id":"c%d","type":"command_execution","command":"echo %d","aggregated_output":"%d\n","exit_code":0,"status":"completed"}}`, i, i, i))
	}
	tr.handle([]byte(`{"type":"item.started","item":{"id":"last","type":"command_execution","command":"sleep 100","status":"in_progress"}}`))
	tr.handle([]byte(`{"type":"item.completed","item":{"id":"p","type":"file_change","changes":[{"path":"/ws/src/a.go","kind":"update"},{"path":"/etc/x","kind":"add"}],"status":"completed"}}`))
	w := l.finish(work.Work{}, nil)
	if w.Commands.Count != work.MaxEntries+4 || len(w.Commands.Items) != work.MaxEntries || w.Commands.Digest == "" {
		t.Fatalf("commands: count %d, %d items, digest %q", w.Commands.Count, len(w.Commands.Items), w.Commands.Digest)
	}
	if c := w.Commands.Items[0]; c.Line != "echo 0" || *c.Ms != 1 || c.OutputSHA256 != sha("0\n") {
		t.Fatalf("first command: %+v", c)
	}
	var all work.List[work.Command]
	for _, c := range w.Commands.Items {
		all.Add(c)
	}
	if err := w.Check(); err != nil || all.Digest == w.Commands.Digest {
		t.Fatalf("check %v; the digest does not cover the entries past the bound", err)
	}
	p := w.Patches.Items
	if len(p) != 2 || p[0].Path != "src/a.go" || p[0].Kind != "update" || p[1].Path != "/etc/x" || w.Files.Count != 0 {
		t.Fatalf("patches: %+v", p)
	}
}
