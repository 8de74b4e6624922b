package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/aether/aether/backend/domain"
	"gorm.io/gorm"
)

// TestHeadMark checks the order docs/threats.md T14 rests on: whoever appends a receipt hears
// back only once the head mark kept outside pact.sqlite holds it.
func TestHeadMark(t *testing.T) {
	ctx := context.Background()
	// chained is a signer for turn tr that continues the chain from its tail; *seq is the seq
	// it signed.
	chained := func(tr Turn, seq *int64) Signer {
		return func(tail Checkpoint, _ func(domain.GrantID) (bool, error)) ([]Receipt, error) {
			*seq = tail.Seq + 1
			return []Receipt{rcReceipt(tr, *seq, rcPrev(*seq))}, nil
		}
	}

	t.Run("T14 no append returns before the mark holds its receipt", func(t *testing.T) {
		db, _ := openTemp(t)
		turns := rcStarted(t, db, 48)
		var mu sync.Mutex
		var marked Head
		db.SetHeadMark(func(h Head) error {
			mu.Lock()
			defer mu.Unlock()
			if h.Seq <= marked.Seq {
				t.Errorf("the mark went from seq %d to %d", marked.Seq, h.Seq)
			}
			marked = h
			return nil
		})
		var wg sync.WaitGroup
		for _, tr := range turns {
			wg.Go(func() {
				var seq int64
				if err := db.AppendReceipts(ctx, chained(tr, &seq)); err != nil {
					t.Errorf("append: %v", err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if marked.Seq < seq {
					t.Errorf("receipt %d was answered while the mark said seq %d", seq, marked.Seq)
				}
			})
		}
		wg.Wait()
		want := Head{Checkpoint: Checkpoint{Seq: 48, Hash: rcPrev(49)}, ID: "r_48"}
		if marked != want {
			t.Errorf("the mark is %+v, want %+v", marked, want)
		}
	})

	t.Run("T14 appends committed together share one mark", func(t *testing.T) {
		db, _ := openTemp(t)
		turns := rcStarted(t, db, 8)
		var calls []Head
		db.SetHeadMark(func(h Head) error { calls = append(calls, h); return nil })
		gate, held := make(chan struct{}), make(chan struct{})
		go db.write(ctx, func(*gorm.DB) error { close(held); <-gate; return nil })
		<-held
		var wg sync.WaitGroup
		for _, tr := range turns {
			wg.Go(func() {
				var seq int64
				if err := db.AppendReceipts(ctx, chained(tr, &seq)); err != nil {
					t.Errorf("append: %v", err)
				}
			})
		}
		waitQueued(db, len(turns))
		close(gate) // the committer takes the eight appends as one batch
		wg.Wait()
		if len(calls) != 1 || calls[0].Seq != 8 {
			t.Errorf("marks %+v, want one, of seq 8", calls)
		}
	})

	t.Run("T14 durable waits for the mark", func(t *testing.T) {
		db, _ := openTemp(t)
		tr := rcStarted(t, db, 1)[0]
		release := make(chan struct{})
		db.SetHeadMark(func(Head) error { <-release; return nil })
		durable, err := db.AppendReceiptsCreatingTask(ctx, signed([]Receipt{rcReceipt(tr, 1, rcPrev(1))}), "review", "alice",
			func() (*a2a.Task, error) {
				return &a2a.Task{ID: a2a.TaskID(tr.TaskID), Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}, nil
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
		close(release)
		if err := <-returned; err != nil {
			t.Fatalf("durable: %v", err)
		}
	})

	t.Run("T14 a mark that fails withholds the receipts, not the other writes", func(t *testing.T) {
		db, _ := openTemp(t)
		tr := rcStarted(t, db, 1)[0]
		boom := errors.New("disk gone")
		db.SetHeadMark(func(Head) error { return boom })
		gate, held := make(chan struct{}), make(chan struct{})
		go db.write(ctx, func(*gorm.DB) error { close(held); <-gate; return nil })
		<-held
		appended, other := make(chan error, 1), make(chan error, 1)
		var seq int64
		go func() { appended <- db.AppendReceipts(ctx, chained(tr, &seq)) }()
		waitQueued(db, 1)
		go func() { other <- db.SetMeta(ctx, "k", "v") }()
		waitQueued(db, 2)
		close(gate)
		if err := <-appended; !errors.Is(err, ErrHeadMark) || !errors.Is(err, boom) {
			t.Errorf("append = %v, want ErrHeadMark and why", err)
		}
		if err := <-other; err != nil {
			t.Errorf("the write beside it: %v", err)
		}
	})
}

// waitQueued waits until n writes wait in the committer's queue.
func waitQueued(db *DB, n int) {
	for {
		db.mu.Lock()
		l := len(db.queue)
		db.mu.Unlock()
		if l == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
