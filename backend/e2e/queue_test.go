package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/aether/aether/backend/codex/codextest"
)

// TestQueuedTurns: a turn waiting for its workspace is checked again when its turn comes
// (W13), and one grant cannot fill the queue (W14). Turns on one workspace run one at a
// time, so a gated turn holds the workspace while the others wait behind it.
func TestQueuedTurns(t *testing.T) {
	t.Parallel()
	gate := filepath.Join(t.TempDir(), "gate")
	e := newEnv(t, withCodexEnv("FAKE_CODEX_GATE="+gate))
	ctx := context.Background()
	openGate := func() {
		if err := os.WriteFile(gate, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// send starts a turn on a task whose id is known up front (its AUTH_REQUIRED step) and
	// returns when the node has it WORKING: past the gate, in codex's queue or running.
	type sent struct {
		id   a2a.TaskID
		done chan a2a.SendMessageResult
	}
	send := func(c *a2aclient.Client, task a2a.TaskID, text string) sent {
		s := sent{id: task, done: make(chan a2a.SendMessageResult, 1)}
		go func() {
			req := textMessage(text)
			req.Message.TaskID = task
			res, err := c.SendMessage(ctx, req)
			if err != nil {
				t.Errorf("turn %q: %v", text, err)
			}
			s.done <- res
		}()
		waitState(t, c, task, a2a.TaskStateWorking)
		return s
	}
	finished := func(s sent) *a2a.Task {
		select {
		case res := <-s.done:
			task, _ := res.(*a2a.Task)
			if task == nil {
				t.Fatalf("turn %s answered %v", s.id, res)
			}
			return task
		case <-time.After(waitLimit):
			t.Fatalf("turn %s did not finish within %s", s.id, waitLimit)
			return nil
		}
	}

	t.Run("W13 a turn revoked while queued never starts codex", func(t *testing.T) {
		grace, henry := e.agent("grace"), e.agent("henry")
		cg, ch := grace.client("review", a2a.TransportProtocolJSONRPC), henry.client("review", a2a.TransportProtocolJSONRPC)
		gTask, hTask := grace.send(cg, "", "placeholder").ID, henry.send(ch, "", "placeholder").ID
		grace.allow()
		hGrant := henry.allow()

		holder := send(cg, gTask, "hold the workspace [fake:gate]")
		e.codexStarted("hold the workspace")
		queued := send(ch, hTask, "queued behind grace [fake:ok]")
		if g := e.revoke(hGrant); g["status"] != "revoked" {
			t.Fatalf("revoke: %v", g)
		}
		openGate()
		if got := finished(holder); got.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("the running turn ended %s: %q", got.Status.State, statusText(got))
		}
		got := finished(queued)
		if got.Status.State != a2a.TaskStateFailed || !strings.Contains(statusText(got), "revoked") {
			t.Fatalf("the queued turn ended %s: %q; want FAILED, revoked", got.Status.State, statusText(got))
		}
		if claims := receiptClaims(t, e, got); claims.Status != "failed" || claims.Reason != "revoked" {
			t.Errorf("receipt status %q reason %q; want failed, revoked", claims.Status, claims.Reason)
		}
		for _, r := range codextest.ReadRecords(t, e.record) {
			if strings.Contains(r.Prompt, "queued behind grace") {
				t.Fatalf("codex started for the revoked turn: %+v", r)
			}
		}
		os.Remove(gate)
	})

	t.Run("W14 one grant's running and waiting turns are capped", func(t *testing.T) {
		ivy := e.agent("ivy")
		c := ivy.client("review", a2a.TransportProtocolJSONRPC)
		var tasks []a2a.TaskID
		for range 5 {
			tasks = append(tasks, ivy.send(c, "", "placeholder").ID)
		}
		ivy.allow()
		var running []sent
		for i := range 4 {
			running = append(running, send(c, tasks[i], "fill the queue [fake:gate]"))
		}
		req := textMessage("one too many [fake:ok]")
		req.Message.TaskID = tasks[4]
		res, err := c.SendMessage(ctx, req)
		over, _ := res.(*a2a.Task)
		if err != nil || over == nil || over.Status.State != a2a.TaskStateFailed || !strings.Contains(statusText(over), "at most 4 at once") {
			t.Fatalf("the fifth turn: %v %v; want FAILED saying at most 4 at once", res, err)
		}
		// A new task refused so, on a plain send, is stored as it was answered.
		fresh := ivy.send(c, "", "a new task, one too many [fake:ok]")
		if fresh.Status.State != a2a.TaskStateFailed || !strings.Contains(statusText(fresh), "at most 4 at once") {
			t.Fatalf("a new task over the cap ended %s: %q; want FAILED saying at most 4 at once", fresh.Status.State, statusText(fresh))
		}
		if got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: fresh.ID}); err != nil || got.Status.State != a2a.TaskStateFailed {
			t.Fatalf("GetTask of the refused new task: %v %v; want it stored FAILED", got, err)
		}
		openGate()
		for _, s := range running {
			if got := finished(s); got.Status.State != a2a.TaskStateCompleted {
				t.Errorf("turn %s ended %s: %q", s.id, got.Status.State, statusText(got))
			}
		}
		// The cap counts turns in flight, not turns ever: the grant works again.
		if again := ivy.send(c, "", "now there is room [fake:ok]"); again.Status.State != a2a.TaskStateCompleted {
			t.Errorf("a turn after the queue drained ended %s: %q", again.Status.State, statusText(again))
		}
	})
}
