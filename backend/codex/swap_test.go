package codex

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/aether/aether/backend/codex/mockmodel"
	"github.com/aether/aether/backend/domain"
)

// TestWorkspaceSwappedWhileQueued: whoever can rename the workspace's folder swaps it while a
// turn waits for the workspace (the caller's re-check, P7, has passed by then), hoping the
// turn's view binds what the path names later (W25). The real codex runs against a model that
// reads the secret the swap would put in the workspace.
func TestWorkspaceSwappedWhileQueued(t *testing.T) {
	for _, tc := range []struct {
		name, why string
		swap      func(h *host) error
	}{
		{"W25 the workspace swapped for a symlink to a secret folder while the turn waits", "a symlink is on its path now",
			func(h *host) error { return os.Symlink(h.sibling, h.ws) }},
		{"W25 the workspace swapped for another folder while the turn waits", "it was replaced while the turn waited",
			func(h *host) error { return os.Rename(h.sibling, h.ws) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHost(t)
			model := mockmodel.New(mockmodel.Shell("cat secret.txt a.txt; ls -la"), mockmodel.Message("done"))
			t.Cleanup(model.Close)
			r := h.runner(t, model)
			queued := make(chan string, 1)
			r.onQueue = func(kind, _ string) { queued <- kind }
			// The lock a turn running on this workspace holds.
			release, err := r.acquire(context.Background(), h.ws)
			if err != nil {
				t.Fatal(err)
			}
			type ran struct {
				res Result
				err error
			}
			done := make(chan ran, 1)
			go func() {
				res, err := r.Run(context.Background(), Request{Workspace: h.ws, AccessMode: domain.ReadOnly, Prompt: "review", Conversation: "agent\x00brand"}, nil)
				done <- ran{res, err}
			}()
			if kind := <-queued; kind != "workspace" {
				t.Fatalf("the turn queued for %q", kind)
			}
			if err := os.Rename(h.ws, h.ws+".old"); err != nil {
				t.Fatal(err)
			}
			if err := tc.swap(h); err != nil {
				t.Fatal(err)
			}
			release()
			got := <-done
			if got.err == nil || got.res.Status != StatusFailed || !strings.Contains(got.res.Reason, tc.why) {
				t.Errorf("the turn ended %s (%q), error %v; want failed: %s", got.res.Status, got.res.Reason, got.err, tc.why)
			}
			if got.res.Answer != "" || got.res.Work != nil {
				t.Errorf("the turn answered %q with work %+v; want nothing", got.res.Answer, got.res.Work)
			}
			if reqs := model.Requests(); len(reqs) != 0 {
				t.Errorf("codex ran and asked its model %d times", len(reqs))
				for _, q := range reqs {
					h.noSecrets(t, strings.Join(q.ToolOutput, "\n"))
				}
			}
			h.noSecrets(t, fmt.Sprintf("%+v", got.res))
		})
	}
}
