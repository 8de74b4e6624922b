package receipts

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// TestHeadMark checks the order docs/threats.md T14 rests on (durable.go): whoever appends a
// receipt hears back only once receipts.head holds it.
func TestHeadMark(t *testing.T) {
	ctx := context.Background()
	started := func(e *env, from, to int) []Turn {
		var out []Turn
		for i := from; i < to; i++ {
			tr := testTurn(i)
			if err := e.l.Start(ctx, tr); err != nil {
				t.Fatal(err)
			}
			out = append(out, tr)
		}
		return out
	}
	keep := func(e *env) *HeadFile {
		h := &HeadFile{Path: filepath.Join(t.TempDir(), "receipts.head")}
		e.l.KeepHead(h)
		t.Cleanup(func() { h.Close() })
		return h
	}
	held := func(h *HeadFile) Head {
		head, _, err := h.read()
		if err != nil {
			t.Error(err)
		}
		return head
	}

	t.Run("T14 no append returns before the mark holds its receipt", func(t *testing.T) {
		e := newEnv(t)
		h := keep(e)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var newest *Receipt
		for _, tr := range started(e, 1, 49) {
			wg.Go(func() {
				r, err := e.l.Append(ctx, tr)
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				if got := held(h); got.Seq < r.Seq {
					t.Errorf("receipt %d was answered while the mark said seq %d", r.Seq, got.Seq)
				}
				mu.Lock()
				defer mu.Unlock()
				if newest == nil || r.Seq > newest.Seq {
					newest = r
				}
			})
		}
		wg.Wait()
		if got, want := held(h), headOf(newest); got != want {
			t.Errorf("the mark is %+v, want %+v", got, want)
		}
	})

	t.Run("T14 a mark serves every append durable when it is made", func(t *testing.T) {
		e := newEnv(t)
		keep(e)
		m := e.l.mark.Load()
		m.mu.Lock() // a mark under way: the appends of the commits meanwhile wait for the next one
		var wg sync.WaitGroup
		for _, tr := range started(e, 1, 9) {
			wg.Go(func() {
				if _, err := e.l.Append(ctx, tr); err != nil {
					t.Errorf("append: %v", err)
				}
			})
		}
		for { // each append registers its durable head before it waits to mark
			m.newestMu.Lock()
			n := m.newest.Seq
			m.newestMu.Unlock()
			if n == 8 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		m.mu.Unlock()
		wg.Wait()
		if m.marked != 8 {
			t.Errorf("marked seq %d, want 8", m.marked)
		}
	})

	t.Run("T14 durable waits for the mark", func(t *testing.T) {
		e := newEnv(t)
		h := keep(e)
		tr := started(e, 1, 2)[0]
		m := e.l.mark.Load()
		m.mu.Lock()
		rec, durable, err := e.l.AppendCreatingTask(ctx, tr, "acme", "owner-1", func(*Receipt) (TaskRow, error) {
			return taskRow(&a2a.Task{ID: a2a.TaskID(tr.TaskID), Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}})
		})
		if err != nil {
			t.Fatal(err)
		}
		returned := make(chan error, 1)
		go func() { returned <- durable.Durable() }()
		select {
		case err := <-returned:
			t.Fatalf("durable returned (%v) before the mark", err)
		case <-time.After(20 * time.Millisecond): // time enough for a durable that does not wait to return
		}
		m.mu.Unlock()
		if err := <-returned; err != nil {
			t.Fatalf("durable: %v", err)
		}
		if got := held(h); got != headOf(rec) {
			t.Errorf("the mark is %+v, want %+v", got, headOf(rec))
		}
	})

	t.Run("T14 a mark that fails withholds the receipts, not the other writes", func(t *testing.T) {
		e := newEnv(t)
		e.l.KeepHead(&HeadFile{Path: filepath.Join(t.TempDir(), "gone", "receipts.head")})
		tr := started(e, 1, 2)[0]
		if _, err := e.l.Append(ctx, tr); !errors.Is(err, ErrHeadMark) {
			t.Errorf("append = %v, want ErrHeadMark", err)
		}
		if err := e.db.SetMeta(ctx, "k", "v"); err != nil {
			t.Errorf("a write beside it: %v", err)
		}
	})
}
