package store

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/aether/aether/backend/domain"
)

func waitingTask(id string) *a2a.Task {
	now := taskStart
	return &a2a.Task{ID: a2a.TaskID(id), ContextID: "ctx-" + id,
		Status: a2a.TaskStatus{State: a2a.TaskStateAuthRequired, Timestamp: &now}}
}

func TestWaitingTasks(t *testing.T) {
	t.Run("K2 caps per agent and per issuer site, with the time until the oldest expires", func(t *testing.T) {
		db, _, clock := newTaskDB(t)
		clock.setStep(0)
		ctx := t.Context()
		for i := range MaxWaitingPerAgent {
			if _, err := db.SaveWaiting(ctx, "review", "alice", "evil.example", waitingTask(fmt.Sprintf("a%d", i)), taskstore.TaskVersionMissing); err != nil {
				t.Fatal(err)
			}
		}
		clock.t = clock.t.Add(3 * time.Minute)
		_, err := db.SaveWaiting(ctx, "other-brand", "alice", "evil.example", waitingTask("a-over"), taskstore.TaskVersionMissing)
		var ce *WaitingCapError
		if !errors.As(err, &ce) || ce.Scope != "agent" || ce.RetryAfter() != WaitingTTL-3*time.Minute {
			t.Fatalf("over the agent cap: %v (%+v)", err, ce)
		}
		// An update of a waiting task is no new task: it stays allowed.
		if v, err := db.SaveWaiting(ctx, "review", "alice", "evil.example", waitingTask("a0"), 1); err != nil || v != 2 {
			t.Fatalf("update at the cap: %v %v", v, err)
		}
		if _, err := db.SaveWaiting(ctx, "review", "alice", "evil.example", waitingTask("a0"), 1); !errors.Is(err, taskstore.ErrConcurrentModification) {
			t.Fatalf("update of a stale version: %v", err)
		}
		// Other agents of the site fill its cap; another site is not affected.
		for i := MaxWaitingPerAgent; i < MaxWaitingPerSite; i++ {
			owner := fmt.Sprintf("sub%d", i/MaxWaitingPerAgent)
			if _, err := db.SaveWaiting(ctx, "review", owner, "evil.example", waitingTask(fmt.Sprintf("s%d", i)), taskstore.TaskVersionMissing); err != nil {
				t.Fatal(err)
			}
		}
		_, err = db.SaveWaiting(ctx, "review", "newcomer", "evil.example", waitingTask("s-over"), taskstore.TaskVersionMissing)
		if !errors.As(err, &ce) || ce.Scope != "issuer" {
			t.Fatalf("over the site cap: %v", err)
		}
		if _, err := db.SaveWaiting(ctx, "review", "bob", "good.example", waitingTask("b0"), taskstore.TaskVersionMissing); err != nil {
			t.Fatalf("another site: %v", err)
		}
		// A task that started a turn no longer counts.
		s := db.TaskStore("review", ownerOf)
		st := mustGetTask(t, as(t, "alice"), s, "a1")
		st.Task.Status.State = a2a.TaskStateWorking
		mustUpdateTask(t, as(t, "alice"), s, st.Task, st.Version)
		if _, err := db.SaveWaiting(ctx, "review", "alice", "other.example", waitingTask("a-again"), taskstore.TaskVersionMissing); err != nil {
			t.Fatalf("after one task ran: %v", err)
		}
	})

	t.Run("K4 waiting tasks expire with the device flow", func(t *testing.T) {
		db, _, clock := newTaskDB(t)
		clock.setStep(0)
		ctx := t.Context()
		alice := domain.Agent{Issuer: "https://id.example", Subject: "alice"}
		for _, owner := range []string{alice.Key(), "bob"} {
			if _, err := db.SaveWaiting(ctx, "review", owner, "id.example", waitingTask(owner), taskstore.TaskVersionMissing); err != nil {
				t.Fatal(err)
			}
		}
		ran := waitingTask("ran")
		ran.Status.State = a2a.TaskStateWorking
		mustCreateTask(t, as(t, "bob"), db.TaskStore("review", ownerOf), ran)
		// A plain send's task is stored once, finished, with its receipt: it ran a turn too.
		sent := waitingTask("sent")
		sent.Status.State = a2a.TaskStateCompleted
		sent.Artifacts = []*a2a.Artifact{{ID: "receipt", Parts: a2a.ContentParts{a2a.NewTextPart("jws")}}}
		mustCreateTask(t, as(t, "bob"), db.TaskStore("review", ownerOf), sent)
		// Alice opens a device flow a little later; it outlives her task's own TTL.
		clock.t = clock.t.Add(5 * time.Minute)
		expires := clock.t.Add(WaitingTTL)
		if err := db.w.Exec(`INSERT INTO device_flows (id, device_code_hash, user_code, agent_iss, agent_sub, brand, scope, status, interval_s, created_at, expires_at)
			VALUES ('f1', 'h1', 'BCDFGHJK', ?, ?, 'review', 'review:read_only', 'pending', 5, ?, ?)`,
			alice.Issuer, alice.Subject, ms(clock.t), ms(expires)).Error; err != nil {
			t.Fatal(err)
		}
		if n, err := db.ExpireWaiting(ctx, clock.t.Add(WaitingTTL-5*time.Minute-time.Millisecond)); err != nil || n != 0 {
			t.Fatalf("before the TTL: %d %v", n, err)
		}
		n, err := db.ExpireWaiting(ctx, taskStart.Add(WaitingTTL+time.Millisecond))
		if err != nil || n != 1 {
			t.Fatalf("after the TTL: deleted %d, %v; want bob's only", n, err)
		}
		if _, err := db.TaskStore("review", ownerOf).Get(as(t, alice.Key()), a2a.TaskID(alice.Key())); err != nil {
			t.Fatalf("alice's task went while her flow is pending: %v", err)
		}
		if n, err := db.ExpireWaiting(ctx, expires.Add(time.Millisecond)); err != nil || n != 1 {
			t.Fatalf("after the flow expired: %d %v", n, err)
		}
		mustGetTask(t, as(t, "bob"), db.TaskStore("review", ownerOf), "ran")
		mustGetTask(t, as(t, "bob"), db.TaskStore("review", ownerOf), "sent")
	})

	t.Run("K5 retention deletes finished tasks, never receipts", func(t *testing.T) {
		db, _, clock := newTaskDB(t)
		clock.setStep(0)
		s := db.TaskStore("review", ownerOf)
		ctx := as(t, "bob")
		for _, id := range []string{"done", "running"} {
			task := waitingTask(id)
			task.Status.State = a2a.TaskStateWorking
			mustCreateTask(t, ctx, s, task)
		}
		st := mustGetTask(t, ctx, s, "done")
		st.Task.Status.State = a2a.TaskStateCompleted
		mustUpdateTask(t, ctx, s, st.Task, st.Version)
		if n, err := db.PruneFinished(t.Context(), clock.t); err != nil || n != 0 {
			t.Fatalf("at the cut-off: %d %v", n, err)
		}
		if n, err := db.PruneFinished(t.Context(), clock.t.Add(time.Millisecond)); err != nil || n != 1 {
			t.Fatalf("after it: %d %v", n, err)
		}
		mustGetTask(t, ctx, s, "running")
		if _, err := s.Get(ctx, "done"); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Fatalf("pruned task: %v", err)
		}
	})
}
