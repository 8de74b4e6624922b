package codexsetup

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aether/aether/backend/codex"
	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/codexget"
	"github.com/aether/aether/backend/model"
	"github.com/aether/aether/backend/owner"
)

// TestSettings: the runner runs the Codex the owner named, and health follows it; what is not
// an executable file, or a key given and removed at once, is the owner's ErrInvalid and
// changes nothing.
func TestSettings(t *testing.T) {
	t.Setenv("PATH", "/usr/bin:/bin") // no codex on it
	dir := t.TempDir()
	r := &codex.Runner{Home: codextest.Home(t), StateDir: filepath.Join(dir, "codex")}
	s := New(Config{Runner: r, Models: &model.Store{Dir: dir}, Getter: &codexget.Getter{Dir: filepath.Join(dir, "codex-bin")},
		ProbeDir: filepath.Join(dir, "codex"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer s.Close()
	if r.Find() != "" {
		t.Fatalf("with nothing set or got, the runner looks for %q", r.Find())
	}

	notExec := filepath.Join(dir, "codex.txt")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.UseCodex(notExec); !errors.Is(err, owner.ErrInvalid) {
		t.Fatalf("a file that is not executable: %v", err)
	}
	if r.Find() != "" {
		t.Fatal("a refused Codex was kept")
	}

	fake := codextest.BuildFake(t)
	if err := s.UseCodex(fake); err != nil {
		t.Fatal(err)
	}
	if r.Find() != fake {
		t.Fatalf("the runner looks for %q, want the one the owner named", r.Find())
	}
	if st, _ := s.Health(); !st.Found || st.Path != fake {
		t.Fatalf("health after naming a Codex: %+v", st)
	}

	key := "sk-both-1234"
	if _, err := s.SetModel(owner.ModelRequest{Key: &key, RemoveKey: true}); !errors.Is(err, owner.ErrInvalid) {
		t.Fatalf("a key given and removed at once: %v", err)
	}
	if m, _ := s.Model(); m.KeySet {
		t.Fatal("a refused request set the key")
	}
	up, err := r.Upstream()
	if err != nil || up.Key != "" {
		t.Fatalf("the runner's upstream: %+v, %v", up, err)
	}
}

// TestPinNote: the Status page names the pinned Codex, and says when the codex in use is an
// older or newer release than it, with what may differ; nothing for the pin itself, and
// nothing where the version is not supported (the error says that).
func TestPinNote(t *testing.T) {
	pin := codexget.Version
	if codex.TestedVersion != pin {
		t.Fatalf("tested %s, pinned %s", codex.TestedVersion, pin)
	}
	for _, tc := range []struct {
		version   string
		supported bool
		want      string
	}{
		{pin, true, ""},
		{"", false, ""},
		{"0.150.0", false, ""},
		{codex.MinVersion, true, "Codex " + codex.MinVersion + " is older than " + pin + ", the release this Aether pins"},
		{"9.0.0", true, "Codex 9.0.0 is newer than " + pin + ", the release this Aether pins"},
	} {
		got := pinNote(tc.version, tc.supported)
		if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want %q…", tc.version, got, tc.want)
		}
		if got != "" && !strings.Contains(got, "To run "+pin+", empty the codex path and use Get Codex.") {
			t.Errorf("%s: %q does not say how to run the pinned release", tc.version, got)
		}
	}
}
