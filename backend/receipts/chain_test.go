package receipts

// The chain's tests on fake receipts (chain.go without a signer: leaves, no checkpoint),
// moved here from the store with the chain.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/store"
)

const metaHighWater = "receipts.high_water"

// openTemp is a store with grant g1, and no ledger.
func openTemp(t *testing.T) (*store.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pact.sqlite")
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rawExec(t, path, `INSERT INTO grants (id, agent_iss, agent_sub, brand, capability, workspace, access_mode,
		scope, issued_at, jws) VALUES ('g1', 'https://agent.example', 'alice', 'acme', 'code', '/w', 'read_only', 'acme.read', 0, 'x')`)
	return db, path
}

// rawExecErr runs one statement on the file directly and returns its error.
func rawExecErr(t *testing.T, path string, q string, args ...any) error {
	raw := rawDB(t, path)
	defer raw.Close()
	_, err := raw.Exec(q, args...)
	return err
}

var rcT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func rcTurn(i int) store.Turn {
	return store.Turn{ID: fmt.Sprintf("turn-%d", i), TaskID: fmt.Sprintf("task-%d", i), ContextID: "ctx-1", Brand: "acme",
		BrandScope: "acme.read", GrantID: "g1", Agent: domain.Agent{Issuer: "https://agent.example", Subject: "alice"},
		PolicyHash: "p1", StartedAt: rcT0.Add(time.Duration(i) * time.Second)}
}

func rcStarted(t *testing.T, db *store.DB, n int) []store.Turn {
	t.Helper()
	var turns []store.Turn
	for i := 1; i <= n; i++ {
		tr := rcTurn(i)
		if err := db.StartTurn(context.Background(), tr); err != nil {
			t.Fatal(err)
		}
		turns = append(turns, tr)
	}
	return turns
}

// rcReceipt is the receipt row ending turn tr at seq, chained on prev. The chain does not
// look inside hashes or the JWS, so fakes do.
func rcReceipt(tr store.Turn, seq int64, prev string) store.Receipt {
	return store.Receipt{Seq: seq, ID: fmt.Sprintf("r_%d", seq), TurnID: tr.ID, PrevHash: prev, Hash: fmt.Sprintf("h%d", seq),
		TaskID: tr.TaskID, ContextID: tr.ContextID, Brand: tr.Brand, Scope: tr.BrandScope, GrantID: tr.GrantID,
		Agent: domain.Agent{Issuer: tr.Agent.Issuer, Subject: tr.Agent.Subject}, Status: domain.TurnCompleted, ExitCode: 0,
		StartedAt: tr.StartedAt, EndedAt: tr.StartedAt.Add(time.Second), JWS: "jws"}
}

func rcPrev(seq int64) string {
	if seq == 1 {
		return "genesis"
	}
	return fmt.Sprintf("h%d", seq-1)
}

// signed is a signer that ignores the tail and returns rows as they are.
func signed(rows []store.Receipt) signFunc {
	return func(store.Checkpoint, func(domain.GrantID) (bool, error)) ([]store.Receipt, error) { return rows, nil }
}

// appendSigned appends what sign makes, with no checkpoint signer.
func appendSigned(ctx context.Context, db *store.DB, sign signFunc) error {
	_, _, err := (&chain{db: db}).appendDurable(ctx, nil, sign)
	return err
}

// appendCreatingTask is appendSigned and the task task makes, in the same write.
func appendCreatingTask(ctx context.Context, db *store.DB, sign signFunc, brand domain.BrandID, owner string, task func() (TaskRow, error)) (*store.Pending, error) {
	return (&chain{db: db}).appendAhead(ctx, nil, sign, brand, owner, func([]*LogProof) (TaskRow, error) { return task() })
}

type ownerKey struct{}

func as(t *testing.T, name string) context.Context {
	return context.WithValue(t.Context(), ownerKey{}, name)
}

func ownerOf(ctx context.Context) (string, error) {
	name, _ := ctx.Value(ownerKey{}).(string)
	return name, nil
}

func TestAppendReceiptsRefusesWholeBatch(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	turns := rcStarted(t, db, 6)
	first := []store.Receipt{rcReceipt(turns[0], 1, "genesis"), rcReceipt(turns[1], 2, "h1")}
	if err := appendSigned(ctx, db, signed(first)); err != nil {
		t.Fatal(err)
	}
	// Every case would also have appended turn 3 at seq 3 first: none may stick.
	good := rcReceipt(turns[2], 3, "h2")
	cases := []struct {
		name  string
		batch []store.Receipt
		want  error
		turn  string
	}{
		{"stale head", []store.Receipt{rcReceipt(turns[2], 2, "h1")}, ErrChainHead, ""},
		{"gap", []store.Receipt{rcReceipt(turns[2], 4, "h3")}, ErrChainHead, ""},
		{"T11 fork on an existing prev", []store.Receipt{rcReceipt(turns[2], 3, "h1")}, ErrChainHead, ""},
		{"batch not chained", []store.Receipt{good, rcReceipt(turns[3], 4, "h2")}, ErrChainHead, ""},
		{"T9 turn already has its receipt", []store.Receipt{good, rcReceipt(turns[0], 4, "h3")}, store.ErrTurnNotRunning, "turn-1"},
		{"unknown turn", []store.Receipt{good, rcReceipt(rcTurn(99), 4, "h3")}, store.ErrTurnNotFound, "turn-99"},
		{"T9 same turn twice in a batch", []store.Receipt{good, rcReceipt(turns[2], 4, "h3")}, store.ErrTurnNotRunning, "turn-3"},
		{"receipt describes another turn", []store.Receipt{good, func() store.Receipt {
			r := rcReceipt(turns[3], 4, "h3")
			r.Brand = "other"
			return r
		}()}, store.ErrTurnMismatch, "turn-4"},
		{"duplicate hash", []store.Receipt{good, func() store.Receipt {
			r := rcReceipt(turns[3], 4, "h3")
			r.Hash = "h1"
			return r
		}()}, store.ErrReceiptConflict, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := appendSigned(ctx, db, signed(c.batch))
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			var te *store.TurnError
			if c.turn != "" && (!errors.As(err, &te) || te.TurnID != c.turn) {
				t.Errorf("err = %v, want a store.TurnError for %s", err, c.turn)
			}
			if h, _ := db.ReceiptHead(ctx); h.Seq != 2 {
				t.Errorf("head moved to %d", h.Seq)
			}
			if tr, _ := db.GetTurn(ctx, "turn-3"); tr.Status != domain.TurnRunning {
				t.Errorf("turn-3 ended by a refused batch")
			}
		})
	}
	if err := appendSigned(ctx, db, signed([]store.Receipt{good})); err != nil {
		t.Fatalf("good batch after refusals: %v", err)
	}
	t.Run("T11 UNIQUE(prev_hash) and UNIQUE(seq) refuse a fork written directly", func(t *testing.T) {
		fork := rcReceipt(turns[4], 4, "h2") // same prev as seq 3
		err := db.Commit(ctx, func(tx *store.Tx) error { return tx.InsertReceipts([]store.Receipt{fork}) })
		if !errors.Is(err, store.ErrReceiptConflict) || !strings.Contains(err.Error(), "prev_hash") {
			t.Errorf("fork on prev: %v", err)
		}
		dup := rcReceipt(turns[4], 3, "h3")
		dup.ID, dup.Hash = "r_x", "hx"
		err = db.Commit(ctx, func(tx *store.Tx) error { return tx.InsertReceipts([]store.Receipt{dup}) })
		if !errors.Is(err, store.ErrReceiptConflict) || !strings.Contains(err.Error(), "seq") {
			t.Errorf("second seq 3: %v", err)
		}
	})
}

// The signer is handed the tail inside the write: concurrent appends chain
// without a gap, and one refused (its turn, or its signer) leaves the tail and
// the mark where the others put them.
func TestAppendReceiptsSignsOnTail(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	turns := rcStarted(t, db, 64)
	boom := errors.New("signer failed")
	errs := make([]error, 96)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			errs[i] = appendSigned(ctx, db, func(tail store.Checkpoint, _ func(domain.GrantID) (bool, error)) ([]store.Receipt, error) {
				tr := rcTurn(1000 + i) // never started
				switch {
				case i < len(turns):
					tr = turns[i]
				case i%2 == 0:
					return nil, boom
				}
				seq := tail.Seq + 1
				if seq > 1 && tail.Hash != rcPrev(seq) {
					return nil, fmt.Errorf("tail %+v", tail)
				}
				return []store.Receipt{rcReceipt(tr, seq, rcPrev(seq))}, nil
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		switch {
		case i < len(turns) && err != nil:
			t.Errorf("append %d: %v", i, err)
		case i >= len(turns) && i%2 == 0 && !errors.Is(err, boom):
			t.Errorf("append %d: %v, want the signer's error", i, err)
		case i >= len(turns) && i%2 == 1 && !errors.Is(err, store.ErrTurnNotFound):
			t.Errorf("append %d: %v, want store.ErrTurnNotFound", i, err)
		}
	}
	n := int64(0)
	for r, err := range db.AllReceipts(ctx) {
		if n++; err != nil || r.Seq != n || r.PrevHash != rcPrev(n) {
			t.Fatalf("receipt %d: %+v, %v", n, r, err)
		}
	}
	want := store.Checkpoint{Seq: int64(len(turns)), Hash: rcPrev(int64(len(turns)) + 1)}
	if n != want.Seq {
		t.Errorf("%d receipts, want %d", n, want.Seq)
	}
	if hw, ok, err := db.ReceiptHighWater(ctx); !ok || err != nil || hw != want {
		t.Errorf("high-water = %+v %v %v, want %+v", hw, ok, err, want)
	}
}

func TestReceiptHighWater(t *testing.T) {
	db, path := openTemp(t)
	ctx := context.Background()
	turns := rcStarted(t, db, 8)
	rows := make([]store.Receipt, 5)
	for i := range rows {
		seq := int64(i + 1)
		rows[i] = rcReceipt(turns[i], seq, rcPrev(seq))
	}
	if err := appendSigned(ctx, db, signed(rows)); err != nil {
		t.Fatal(err)
	}
	// The next receipt, signed on whatever tail the store hands over, as the ledger does,
	// for the next turn still running.
	running := 5
	next := func(tail store.Checkpoint, _ func(domain.GrantID) (bool, error)) ([]store.Receipt, error) {
		return []store.Receipt{rcReceipt(turns[running], tail.Seq+1, tail.Hash)}, nil
	}
	t.Run("T4 mark rewritten while the store is open", func(t *testing.T) {
		if err := rawExecErr(t, path, `UPDATE meta SET value = '{"seq":5,"hash":"forged"}' WHERE key = ?`, metaHighWater); err != nil {
			t.Fatal(err)
		}
		if err := appendSigned(ctx, db, next); !errors.Is(err, store.ErrHighWater) {
			t.Errorf("append under a rewritten mark = %v, want store.ErrHighWater", err)
		}
		if err := rawExecErr(t, path, `UPDATE meta SET value = ? WHERE key = ?`, `{"seq":5,"hash":"h5"}`, metaHighWater); err != nil {
			t.Fatal(err)
		}
		if err := appendSigned(ctx, db, next); err != nil { // and the store knows its tail again
			t.Fatalf("append once the mark is back: %v", err)
		}
		running++
	})
	t.Run("T4 tail deleted under an untouched mark", func(t *testing.T) {
		// What someone holding the file can do, even while the node runs: drop the guard, cut the tail.
		for _, q := range []string{`DROP TRIGGER receipts_no_delete`, `DELETE FROM receipts WHERE seq > 3`} {
			if err := rawExecErr(t, path, q); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.ReceiptHead(ctx); !errors.Is(err, store.ErrHighWater) {
			t.Errorf("ReceiptHead = %v, want store.ErrHighWater", err)
		}
		// Refused on the tail the store remembers, then on the tail it reads again after that.
		for range 2 {
			if err := appendSigned(ctx, db, next); !errors.Is(err, store.ErrHighWater) {
				t.Errorf("append on a cut chain = %v, want store.ErrHighWater", err)
			}
		}
		if hw, _, _ := db.ReceiptHighWater(ctx); hw.Seq != 6 {
			t.Errorf("mark = %+v", hw)
		}
	})
	t.Run("mark removed", func(t *testing.T) {
		rawExecErr(t, path, `DELETE FROM meta`)
		if _, err := db.ReceiptHead(ctx); !errors.Is(err, store.ErrHighWater) {
			t.Errorf("ReceiptHead = %v, want store.ErrHighWater", err)
		}
	})
}

func TestAppendReceiptsCreatingTask(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	turns := rcStarted(t, db, 48)
	tasks := db.TaskStore("review", ownerOf)
	taken := &a2a.Task{ID: "taken", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	if _, err := tasks.Create(as(t, "alice"), taken); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, len(turns))
	var wg sync.WaitGroup
	for i, tr := range turns {
		wg.Go(func() {
			id := a2a.TaskID(fmt.Sprintf("task-%d", i))
			if i%3 == 0 {
				id = taken.ID // a task id that is stored already: the receipt must not land either
			}
			durable, err := appendCreatingTask(ctx, db, func(tail store.Checkpoint, _ func(domain.GrantID) (bool, error)) ([]store.Receipt, error) {
				seq := tail.Seq + 1
				return []store.Receipt{rcReceipt(tr, seq, rcPrev(seq))}, nil
			}, "review", "alice", func() (TaskRow, error) {
				return taskRow(&a2a.Task{ID: id, Status: a2a.TaskStatus{State: a2a.TaskStateCompleted},
					Artifacts: []*a2a.Artifact{{ID: "receipt", Parts: a2a.ContentParts{a2a.NewTextPart("jws")}}}})
			})
			if err == nil {
				err = durable.Durable()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	landed := 0
	for i, err := range errs {
		st, gerr := tasks.Get(as(t, "alice"), a2a.TaskID(fmt.Sprintf("task-%d", i)))
		open, terr := db.GetTurn(ctx, turns[i].ID)
		if terr != nil {
			t.Fatal(terr)
		}
		switch {
		case i%3 == 0:
			if !errors.Is(err, taskstore.ErrTaskAlreadyExists) || open.Status != domain.TurnRunning {
				t.Errorf("%d: %v, turn %s; want ErrTaskAlreadyExists and no receipt", i, err, open.Status)
			}
		case err != nil || gerr != nil || st.Version != 1 || open.Status != domain.TurnCompleted:
			t.Errorf("%d: %v; task %+v %v; turn %s", i, err, st, gerr, open.Status)
		default:
			landed++
		}
	}
	n := int64(0)
	for r, err := range db.AllReceipts(ctx) {
		if n++; err != nil || r.Seq != n || r.PrevHash != rcPrev(n) {
			t.Fatalf("receipt %d: %+v, %v", n, r, err)
		}
	}
	if n != int64(landed) || landed != 32 {
		t.Errorf("%d receipts for %d tasks, want 32 of each", n, landed)
	}
}
