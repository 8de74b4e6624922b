package codexget_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether/aether/backend/codex"
	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/codexget"
	"github.com/aether/aether/backend/domain"
)

// TestSwappedCodex: whoever can write the data dir's codex-bin replaces the Codex Get Codex
// checked with a program of their own, hoping the node runs it for every turn (X11). The node
// refuses it with the reason, at start and at the turn, and Get Codex puts the pinned one back.
func TestSwappedCodex(t *testing.T) {
	for _, tc := range []struct {
		name string
		swap func(t *testing.T, bin, evil string)
	}{
		{"X11 bin/codex overwritten in place, its size and modification time kept", func(t *testing.T, bin, evil string) {
			st, err := os.Stat(bin)
			if err != nil {
				t.Fatal(err)
			}
			body := []byte(evil + strings.Repeat("#", int(st.Size())-len(evil)))
			if err := os.WriteFile(bin, body, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(bin, time.Time{}, st.ModTime()); err != nil {
				t.Fatal(err)
			}
		}},
		{"X11 bin/codex replaced by another file", func(t *testing.T, bin, evil string) {
			tmp := bin + ".new"
			if err := os.WriteFile(tmp, []byte(evil), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, bin); err != nil {
				t.Fatal(err)
			}
		}},
		{"X11 bin/codex replaced and its record removed", func(t *testing.T, bin, evil string) {
			if err := os.WriteFile(bin, []byte(evil), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(filepath.Dir(filepath.Dir(bin)), codexget.ManifestName)); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := codexget.GoodPackage(t)
			g := &codexget.Getter{Dir: filepath.Join(t.TempDir(), "codex-bin"), Registry: codexget.Registry(t, codexget.ServeBytes(data)), Platform: codexget.PinFor(data)}
			bin, err := g.Get(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := g.Binary(); got != bin || err != nil { // the node's start
				t.Fatalf("the checked Codex: %q, %v", got, err)
			}
			ran := filepath.Join(t.TempDir(), "ran")
			tc.swap(t, bin, "#!/bin/sh\necho codex-cli "+codexget.Version+"\ntouch "+ran+"\n")

			got, err := g.Binary()
			if got != "" || err == nil || !strings.Contains(err.Error(), "it does not run") {
				t.Fatalf("the swapped Codex: %q, %v; want it refused", got, err)
			}
			r := &codex.Runner{Find: g.Binary, Home: codextest.Home(t), StateDir: filepath.Join(t.TempDir(), "codex")}
			res, err := r.Run(context.Background(), codex.Request{Workspace: t.TempDir(), AccessMode: domain.ReadOnly, Prompt: "hi"}, nil)
			if err == nil || res.Status != codex.StatusFailed || !strings.Contains(res.Reason, "it does not run") {
				t.Errorf("a turn with the swapped Codex: %s %q, %v; want failed, saying why", res.Status, res.Reason, err)
			}
			if _, err := os.Stat(ran); err == nil {
				t.Error("the swapped Codex ran")
			}

			if again, err := g.Get(context.Background(), nil); again != bin || err != nil {
				t.Fatalf("Get Codex again: %q, %v", again, err)
			}
			if got, err := g.Binary(); got != bin || err != nil {
				t.Fatalf("after Get Codex again: %q, %v", got, err)
			}
		})
	}
}
