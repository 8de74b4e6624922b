//go:build linux

package receipts

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/store"
)

// TestFullDisk puts pact.sqlite on a small tmpfs (mounting one needs root) and fills the disk
// while a turn runs: its receipt's commit finds no room.
func TestFullDisk(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		t.Skipf("no tmpfs to fill (mounting one needs root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	e := &env{t: t, path: filepath.Join(dir, "pact.sqlite"), key: testKey(1)}
	e.open()
	t.Cleanup(e.close)
	rawExec(t, e.path, `INSERT INTO grants (id, agent_iss, agent_sub, brand, capability, workspace, access_mode,
		scope, issued_at, jws) VALUES ('g1', 'https://agent.example', 'alice', 'acme', 'code', '/w', 'read_only', 'acme.read', 0, 'x')`)
	ctx := context.Background()
	e.run(0, 2, 1)
	alone, withTask := testTurn(2), testTurn(3)
	for _, tr := range []Turn{alone, withTask} {
		if err := e.l.Start(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	fill(t, filepath.Join(dir, "filler"), 16<<10) // room for a page or two, not for a receipt

	t.Run("T8 disk full: the failed receipt at start says so, not that the node stopped", func(t *testing.T) {
		if _, err := e.l.Append(ctx, alone); err == nil {
			t.Fatal("a receipt was committed on a full disk")
		} else {
			t.Logf("the append said: %v", err)
		}
		// A plain send's receipt and task, written ahead of their commit (its answer waits on durable).
		_, durable, err := e.l.AppendCreatingTask(ctx, withTask, "acme", "owner-1", func(*Receipt) (TaskRow, error) {
			return taskRow(&a2a.Task{ID: a2a.TaskID(withTask.TaskID), ContextID: withTask.ContextID, Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}})
		})
		if err == nil {
			err = durable.Durable()
		}
		if err == nil {
			t.Fatal("a receipt and its task were committed on a full disk")
		}
		os.Remove(filepath.Join(dir, "filler")) // the owner makes room and starts the node again
		e.reopen()
		if n, err := e.l.Recover(ctx); n != 2 || err != nil {
			t.Fatalf("Recover = %d, %v", n, err)
		}
		page, _, err := e.l.List(ctx, store.ReceiptFilter{Status: domain.TurnFailed})
		if err != nil || len(page) != 2 {
			t.Fatalf("failed receipts: %+v, %v", page, err)
		}
		for _, r := range page {
			if want := ReasonUnrecorded + "the disk was full (SQLITE_FULL)"; r.Claims.Reason != want {
				t.Errorf("the failed receipt of %s says %q, want %q", r.Claims.Turn, r.Claims.Reason, want)
			}
		}
		wantOK(t, e.verify(VerifyOptions{}), 4)
	})
}

// fill writes path until the disk is full, then frees room bytes of it.
func fill(t *testing.T, path string, room int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 4096)
	var n int64
	for {
		w, err := f.Write(block)
		n += int64(w)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(max(0, n-room)); err != nil {
		t.Fatal(err)
	}
}
