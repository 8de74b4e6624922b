package turn

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aether/aether/backend/codex"
	"github.com/aether/aether/backend/domain"
)

// TestOutcome: how a turn ended, from why its context ended and what Codex returned, is what
// its receipt and final status say.
func TestOutcome(t *testing.T) {
	canceled := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		return ctx
	}
	answered := codex.Result{Status: codex.StatusCompleted, Answer: "ok", ThreadID: "th"}
	for _, c := range []struct {
		name   string
		ctx    context.Context
		res    codex.Result
		status domain.TurnStatus
		reason string
	}{
		{"completed", context.Background(), answered, domain.TurnCompleted, ""},
		{"completed without an answer", context.Background(), codex.Result{Status: codex.StatusCompleted}, domain.TurnFailed, "codex finished without an answer"},
		{"the node stopped", canceled(errShutdown), answered, domain.TurnFailed, errShutdown.Error()},
		{"the agent canceled", canceled(errCanceledByAgent), answered, domain.TurnCanceled, errCanceledByAgent.Error()},
		{"the stream went away", canceled(errDisconnected), answered, domain.TurnCanceled, errDisconnected.Error()},
		{"W13 revoked while it waited", context.Background(), codex.Result{Status: codex.StatusFailed, Reason: ReasonRevoked}, domain.TurnFailed, ReasonRevoked},
		{"a violation", context.Background(), codex.Result{Status: codex.StatusViolation}, domain.TurnFailed, "the turn broke its brand's access mode"},
		{"a failure says why", context.Background(), codex.Result{Status: codex.StatusFailed, Reason: "exited with code 3"}, domain.TurnFailed, "exited with code 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := outcome(c.ctx, c.res)
			if out.Status != c.status || out.Reason != c.reason {
				t.Errorf("outcome = %s %q, want %s %q", out.Status, out.Reason, c.status, c.reason)
			}
			if out.Answer != c.res.Answer || out.ThreadID != c.res.ThreadID {
				t.Errorf("outcome dropped the answer or the thread: %+v", out)
			}
		})
	}
}

// unseen is a Watcher that must never be asked: the turn is refused before it starts.
type unseen struct{ t *testing.T }

func (u unseen) Started() bool       { u.t.Error("a refused turn started"); return false }
func (u unseen) Working(string) bool { u.t.Error("a refused turn worked"); return false }

// TestRefusedBeforeWork: a turn without a grant, over its grant's slots (W14), or on a task
// that already runs one is refused before any work, and gives its slot back.
func TestRefusedBeforeWork(t *testing.T) {
	s := New(Config{})
	ctx := context.Background()
	req := Request{TaskID: "task-1", Grant: "g1"}
	var refusal *Refusal
	if _, err := s.Run(ctx, Request{TaskID: "task-1"}, unseen{t}); !errors.As(err, &refusal) {
		t.Errorf("no grant: %v, want a Refusal", err)
	}
	for range MaxPerGrant {
		if !s.grants.Take("g1") {
			t.Fatal("a grant's slot was not free")
		}
	}
	if _, err := s.Run(ctx, req, unseen{t}); !errors.As(err, &refusal) || !strings.Contains(refusal.Text, "at most 4 at once") {
		t.Errorf("W14 over the grant's slots: %v, want a Refusal that says at most 4", err)
	}
	s.grants.Release("g1")
	if s.add(ctx, "task-1") == nil {
		t.Fatal("the task's turn was not registered")
	}
	if _, err := s.Run(ctx, req, unseen{t}); !errors.Is(err, ErrRunning) {
		t.Errorf("a second turn on the task: %v, want ErrRunning", err)
	}
	if !s.grants.Take("g1") {
		t.Error("the refused turn kept its grant's slot")
	}
}
