package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"gorm.io/gorm"

	"github.com/aether/aether/backend/domain"
)

// rcReceipt is the receipt row ending turn tr at seq, chained on prev. The
// store does not look inside hashes or the JWS, so fakes do.
func rcReceipt(tr Turn, seq int64, prev string) Receipt {
	return Receipt{Seq: seq, ID: fmt.Sprintf("r_%d", seq), TurnID: tr.ID, PrevHash: prev, Hash: fmt.Sprintf("h%d", seq),
		TaskID: tr.TaskID, ContextID: tr.ContextID, Brand: tr.Brand, Scope: tr.BrandScope, GrantID: tr.GrantID,
		Agent: domain.Agent{Issuer: tr.Agent.Issuer, Subject: tr.Agent.Subject}, Status: domain.TurnCompleted, ExitCode: 0,
		StartedAt: tr.StartedAt, EndedAt: tr.StartedAt.Add(time.Second), JWS: "jws"}
}

// signed is a signer that ignores the tail and returns rows as they are.
func signed(rows []Receipt) Signer {
	return func(Checkpoint, func(domain.GrantID) (bool, error)) ([]Receipt, error) { return rows, nil }
}

func rcPrev(seq int64) string {
	if seq == 1 {
		return "genesis"
	}
	return fmt.Sprintf("h%d", seq-1)
}

// rcSeed starts turns and appends their receipts, batch rows at a time, with
// the turn rows inserted in one transaction (fast seeding).
func rcSeed(t *testing.T, db *DB, turns []Turn, batch int) {
	t.Helper()
	ctx := context.Background()
	err := db.write(ctx, func(tx *gorm.DB) error {
		for _, tr := range turns {
			if err := tx.Exec(`INSERT INTO turns (id, task_id, context_id, brand, scope, brand_scope, grant_id,
				agent_iss, agent_sub, policy_hash, status, started_at) VALUES (?, ?, ?, ?, 'pact', ?, ?, ?, ?, ?, 'running', ?)`,
				tr.ID, tr.TaskID, tr.ContextID, tr.Brand, tr.BrandScope, tr.GrantID, tr.Agent.Issuer, tr.Agent.Subject,
				tr.PolicyHash, ms(tr.StartedAt)).Error; err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	head, err := db.ReceiptHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for start := 0; start < len(turns); start += batch {
		var rows []Receipt
		for _, tr := range turns[start:min(start+batch, len(turns))] {
			seq := head.Seq + 1
			r := rcReceipt(tr, seq, rcPrev(seq))
			r.Status, r.Reason = tr.Status, tr.Reason
			if tr.EndedAt != nil {
				r.EndedAt = *tr.EndedAt
			}
			rows = append(rows, r)
			head = Checkpoint{Seq: seq, Hash: r.Hash}
		}
		if err := db.AppendReceipts(ctx, signed(rows)); err != nil {
			t.Fatal(err)
		}
	}
}

func rcStarted(t *testing.T, db *DB, n int) []Turn {
	t.Helper()
	rcGrant(t, db, "g1")
	var turns []Turn
	for i := 1; i <= n; i++ {
		tr := rcTurn(i)
		if err := db.StartTurn(context.Background(), tr); err != nil {
			t.Fatal(err)
		}
		turns = append(turns, tr)
	}
	return turns
}

func TestAppendReceiptsChain(t *testing.T) {
	db, path := openTemp(t)
	ctx := context.Background()
	turns := rcStarted(t, db, 5)
	if h, err := db.ReceiptHead(ctx); err != nil || h != (Checkpoint{}) {
		t.Fatalf("empty head = %+v, %v", h, err)
	}
	var all []Receipt
	for _, part := range [][]int{{0, 1}, {2, 3, 4}} {
		var rows []Receipt
		for _, i := range part {
			seq := int64(i + 1)
			r := rcReceipt(turns[i], seq, rcPrev(seq))
			r.Status, r.Reason, r.ExitCode = domain.TurnFailed, "exit 3", 3
			rows = append(rows, r)
		}
		if err := db.AppendReceipts(ctx, signed(rows)); err != nil {
			t.Fatal(err)
		}
		all = append(all, rows...)
	}
	head, err := db.ReceiptHead(ctx)
	if err != nil || head != (Checkpoint{Seq: 5, Hash: "h5"}) {
		t.Fatalf("head = %+v, %v", head, err)
	}
	if hw, ok, err := db.ReceiptHighWater(ctx); !ok || err != nil || hw != head {
		t.Fatalf("high-water = %+v %v %v", hw, ok, err)
	}
	open, _ := db.OpenTurns(ctx)
	if len(open) != 0 {
		t.Errorf("%d turns still open", len(open))
	}
	tr, err := db.GetTurn(ctx, "turn-4")
	if err != nil || tr.Status != domain.TurnFailed || tr.Reason != "exit 3" || tr.EndedAt == nil || !tr.EndedAt.Equal(all[3].EndedAt) {
		t.Errorf("ended turn = %+v, %v", tr, err)
	}
	db.Close()

	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.GetReceipt(ctx, "r_3")
	if err != nil || *got != all[2] {
		t.Errorf("GetReceipt = %+v, %v; want %+v", got, err, all[2])
	}
	if got, err := db.ReceiptAt(ctx, 5); err != nil || got.ID != "r_5" {
		t.Errorf("ReceiptAt(5) = %+v, %v", got, err)
	}
	if _, err := db.GetReceipt(ctx, "r_9"); !errors.Is(err, ErrReceiptNotFound) {
		t.Errorf("GetReceipt(missing) = %v", err)
	}
	byTurn, err := db.ReceiptsForTurns(ctx, []string{"turn-2", "turn-5", "turn-9"})
	if err != nil || len(byTurn) != 2 || byTurn["turn-5"].Seq != 5 {
		t.Errorf("ReceiptsForTurns = %+v, %v", byTurn, err)
	}
}

func TestAppendReceiptsRefusesWholeBatch(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	turns := rcStarted(t, db, 6)
	first := []Receipt{rcReceipt(turns[0], 1, "genesis"), rcReceipt(turns[1], 2, "h1")}
	if err := db.AppendReceipts(ctx, signed(first)); err != nil {
		t.Fatal(err)
	}
	// Every case would also have appended turn 3 at seq 3 first: none may stick.
	good := rcReceipt(turns[2], 3, "h2")
	cases := []struct {
		name  string
		batch []Receipt
		want  error
		turn  string
	}{
		{"stale head", []Receipt{rcReceipt(turns[2], 2, "h1")}, ErrChainHead, ""},
		{"gap", []Receipt{rcReceipt(turns[2], 4, "h3")}, ErrChainHead, ""},
		{"T11 fork on an existing prev", []Receipt{rcReceipt(turns[2], 3, "h1")}, ErrChainHead, ""},
		{"batch not chained", []Receipt{good, rcReceipt(turns[3], 4, "h2")}, ErrChainHead, ""},
		{"T9 turn already has its receipt", []Receipt{good, rcReceipt(turns[0], 4, "h3")}, ErrTurnNotRunning, "turn-1"},
		{"unknown turn", []Receipt{good, rcReceipt(rcTurn(99), 4, "h3")}, ErrTurnNotFound, "turn-99"},
		{"T9 same turn twice in a batch", []Receipt{good, rcReceipt(turns[2], 4, "h3")}, ErrTurnNotRunning, "turn-3"},
		{"receipt describes another turn", []Receipt{good, func() Receipt {
			r := rcReceipt(turns[3], 4, "h3")
			r.Brand = "other"
			return r
		}()}, ErrTurnMismatch, "turn-4"},
		{"duplicate hash", []Receipt{good, func() Receipt {
			r := rcReceipt(turns[3], 4, "h3")
			r.Hash = "h1"
			return r
		}()}, ErrReceiptConflict, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := db.AppendReceipts(ctx, signed(c.batch))
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			var te *TurnError
			if c.turn != "" && (!errors.As(err, &te) || te.TurnID != c.turn) {
				t.Errorf("err = %v, want a TurnError for %s", err, c.turn)
			}
			if h, _ := db.ReceiptHead(ctx); h.Seq != 2 {
				t.Errorf("head moved to %d", h.Seq)
			}
			if tr, _ := db.GetTurn(ctx, "turn-3"); tr.Status != domain.TurnRunning {
				t.Errorf("turn-3 ended by a refused batch")
			}
		})
	}
	if err := db.AppendReceipts(ctx, signed([]Receipt{good})); err != nil {
		t.Fatalf("good batch after refusals: %v", err)
	}
	t.Run("T11 UNIQUE(prev_hash) and UNIQUE(seq) refuse a fork written directly", func(t *testing.T) {
		fork := rcReceipt(turns[4], 4, "h2") // same prev as seq 3
		err := db.write(ctx, func(tx *gorm.DB) error { return insertReceipts(tx, []Receipt{fork}) })
		if !errors.Is(err, ErrReceiptConflict) || !strings.Contains(err.Error(), "prev_hash") {
			t.Errorf("fork on prev: %v", err)
		}
		dup := rcReceipt(turns[4], 3, "h3")
		dup.ID, dup.Hash = "r_x", "hx"
		err = db.write(ctx, func(tx *gorm.DB) error { return insertReceipts(tx, []Receipt{dup}) })
		if !errors.Is(err, ErrReceiptConflict) || !strings.Contains(err.Error(), "seq") {
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
			errs[i] = db.AppendReceipts(ctx, func(tail Checkpoint, _ func(domain.GrantID) (bool, error)) ([]Receipt, error) {
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
				return []Receipt{rcReceipt(tr, seq, rcPrev(seq))}, nil
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
		case i >= len(turns) && i%2 == 1 && !errors.Is(err, ErrTurnNotFound):
			t.Errorf("append %d: %v, want ErrTurnNotFound", i, err)
		}
	}
	n := int64(0)
	for r, err := range db.AllReceipts(ctx) {
		if n++; err != nil || r.Seq != n || r.PrevHash != rcPrev(n) {
			t.Fatalf("receipt %d: %+v, %v", n, r, err)
		}
	}
	want := Checkpoint{Seq: int64(len(turns)), Hash: rcPrev(int64(len(turns)) + 1)}
	if n != want.Seq {
		t.Errorf("%d receipts, want %d", n, want.Seq)
	}
	if hw, ok, err := db.ReceiptHighWater(ctx); !ok || err != nil || hw != want {
		t.Errorf("high-water = %+v %v %v, want %+v", hw, ok, err, want)
	}
}

func TestReceiptsAppendOnly(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	turns := rcStarted(t, db, 1)
	if err := db.AppendReceipts(ctx, signed([]Receipt{rcReceipt(turns[0], 1, "genesis")})); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`UPDATE receipts SET brand = 'x'`, `DELETE FROM receipts`} {
		if err := db.w.Exec(q).Error; err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: %v", q, err)
		}
	}
}

func TestReceiptHighWater(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	turns := rcStarted(t, db, 8)
	rows := make([]Receipt, 5)
	for i := range rows {
		seq := int64(i + 1)
		rows[i] = rcReceipt(turns[i], seq, rcPrev(seq))
	}
	if err := db.AppendReceipts(ctx, signed(rows)); err != nil {
		t.Fatal(err)
	}
	// The next receipt, signed on whatever tail the store hands over, as the ledger does,
	// for the next turn still running.
	running := 5
	next := func(tail Checkpoint, _ func(domain.GrantID) (bool, error)) ([]Receipt, error) {
		return []Receipt{rcReceipt(turns[running], tail.Seq+1, tail.Hash)}, nil
	}
	t.Run("T4 mark rewritten while the store is open", func(t *testing.T) {
		if err := db.w.Exec(`UPDATE meta SET value = '{"seq":5,"hash":"forged"}' WHERE key = ?`, metaHighWater).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.AppendReceipts(ctx, next); !errors.Is(err, ErrHighWater) {
			t.Errorf("append under a rewritten mark = %v, want ErrHighWater", err)
		}
		if err := db.w.Exec(`UPDATE meta SET value = ? WHERE key = ?`, `{"seq":5,"hash":"h5"}`, metaHighWater).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.AppendReceipts(ctx, next); err != nil { // and the store knows its tail again
			t.Fatalf("append once the mark is back: %v", err)
		}
		running++
	})
	t.Run("T4 tail deleted under an untouched mark", func(t *testing.T) {
		// What someone holding the file can do, even while the node runs: drop the guard, cut the tail.
		for _, q := range []string{`DROP TRIGGER receipts_no_delete`, `DELETE FROM receipts WHERE seq > 3`} {
			if err := db.w.Exec(q).Error; err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.ReceiptHead(ctx); !errors.Is(err, ErrHighWater) {
			t.Errorf("ReceiptHead = %v, want ErrHighWater", err)
		}
		// Refused on the tail the store remembers, then on the tail it reads again after that.
		for range 2 {
			if err := db.AppendReceipts(ctx, next); !errors.Is(err, ErrHighWater) {
				t.Errorf("append on a cut chain = %v, want ErrHighWater", err)
			}
		}
		if hw, _, _ := db.ReceiptHighWater(ctx); hw.Seq != 6 {
			t.Errorf("mark = %+v", hw)
		}
	})
	t.Run("mark removed", func(t *testing.T) {
		db.w.Exec(`DELETE FROM meta`)
		if _, err := db.ReceiptHead(ctx); !errors.Is(err, ErrHighWater) {
			t.Errorf("ReceiptHead = %v, want ErrHighWater", err)
		}
	})
}

// rcListFixture: 600 receipts over 40 agents, 3 brands, 3 statuses, one a minute.
func rcListFixture(t *testing.T) (*DB, []Receipt) {
	db, _ := openTemp(t)
	rcGrant(t, db, "g1")
	var turns []Turn
	for i := 1; i <= 600; i++ {
		tr := rcTurn(i)
		tr.Agent.Issuer = fmt.Sprintf("https://Agent-%d.example", i%40)
		tr.Agent.Subject = []string{"alice", "bob", "carol"}[i%3]
		if i%40 == 7 {
			tr.Agent.Subject = "Zed"
		}
		tr.Brand = []domain.BrandID{"acme", "globex", "initech"}[i%5%3]
		tr.Status = []domain.TurnStatus{domain.TurnCompleted, domain.TurnFailed, domain.TurnCanceled}[i%7%3]
		tr.StartedAt = rcT0.Add(time.Duration(i) * time.Minute)
		end := tr.StartedAt.Add(30 * time.Second)
		tr.EndedAt = &end
		turns = append(turns, tr)
	}
	rcSeed(t, db, turns, 200)
	var all []Receipt
	for r, err := range db.AllReceipts(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, r)
	}
	if len(all) != 600 {
		t.Fatalf("%d receipts", len(all))
	}
	return db, all
}

func TestListReceipts(t *testing.T) {
	db, all := rcListFixture(t)
	ctx := context.Background()
	match := func(f ReceiptFilter, r Receipt) bool {
		needle := strings.ToLower(f.Agent)
		return (f.Agent == "" || strings.Contains(strings.ToLower(r.Agent.Issuer), needle) || strings.Contains(strings.ToLower(r.Agent.Subject), needle)) &&
			(f.Brand == "" || r.Brand == f.Brand) && (f.Status == "" || r.Status == f.Status) &&
			(f.From.IsZero() || !r.EndedAt.Before(f.From)) && (f.To.IsZero() || r.EndedAt.Before(f.To))
	}
	from, to := rcT0.Add(100*time.Minute), rcT0.Add(400*time.Minute+30*time.Second)
	filters := map[string]ReceiptFilter{
		"all":                     {},
		"agent one subject":       {Agent: "zed"},
		"agent few pairs":         {Agent: "agent-5."},
		"agent few pairs, status": {Agent: "AGENT-3.", Status: domain.TurnFailed, From: rcT0.Add(200 * time.Minute)},
		"agent many pairs":        {Agent: "agent-1"},
		"agent everyone (scan)":   {Agent: "AGENT"},
		"agent nobody":            {Agent: "mallory"},
		"agent like metachars":    {Agent: "%"},
		"brand":                   {Brand: "globex"},
		"status":                  {Status: domain.TurnFailed},
		"time range":              {From: from, To: to},
		"agent brand status time": {Agent: "alice", Brand: "acme", Status: domain.TurnCompleted, From: from, To: to},
		"agent many pairs, brand": {Agent: "agent-2", Brand: "initech"},
	}
	for name, f := range filters {
		for _, oldest := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s oldest=%v", name, oldest), func(t *testing.T) {
				var want []int64
				for _, r := range all {
					if match(f, r) {
						want = append(want, r.Seq)
					}
				}
				if !oldest {
					slices.Reverse(want)
				}
				f := f
				f.Oldest, f.Limit = oldest, 37
				var got []int64
				for pages := 0; ; pages++ {
					page, next, err := db.ListReceipts(ctx, f)
					if err != nil {
						t.Fatal(err)
					}
					if len(page) > 37 || pages > 100 {
						t.Fatalf("page of %d after %d pages", len(page), pages)
					}
					for _, r := range page {
						got = append(got, r.Seq)
					}
					if next == 0 {
						break
					}
					f.Cursor = next
				}
				if !slices.Equal(got, want) {
					t.Errorf("got %d receipts %v…, want %d %v…", len(got), got[:min(5, len(got))], len(want), want[:min(5, len(want))])
				}
			})
		}
	}
	t.Run("limit capped", func(t *testing.T) {
		page, next, err := db.ListReceipts(ctx, ReceiptFilter{Limit: 1000})
		if err != nil || len(page) != MaxReceiptPage || page[0].Seq != 600 || next != 501 {
			t.Errorf("%d rows, first %d, next %d, %v", len(page), page[0].Seq, next, err)
		}
		page, _, _ = db.ListReceipts(ctx, ReceiptFilter{})
		if len(page) != DefaultReceiptPage {
			t.Errorf("default page %d rows", len(page))
		}
	})
	t.Run("matching stream", func(t *testing.T) {
		var n int
		last := int64(0)
		for r, err := range db.ReceiptsMatching(ctx, ReceiptFilter{Brand: "acme", Cursor: 50, Limit: 3}) {
			if err != nil || r.Brand != "acme" || r.Seq <= last {
				t.Fatalf("%+v %v", r, err)
			}
			last = r.Seq
			n++
		}
		want := 0
		for _, r := range all {
			if r.Brand == "acme" {
				want++
			}
		}
		if n != want {
			t.Errorf("%d receipts, want %d", n, want)
		}
	})
}

func TestAllReceiptsStreamsInOrder(t *testing.T) {
	db, all := rcListFixture(t) // 600 > one read batch
	for i, r := range all {
		if r.Seq != int64(i+1) || r.PrevHash != rcPrev(r.Seq) {
			t.Fatalf("receipt %d: %+v", i, r)
		}
	}
	n := 0
	for range db.AllReceipts(context.Background()) {
		if n++; n == 10 {
			break
		}
	}
	if n != 10 {
		t.Errorf("stopped after %d", n)
	}
}

// A receipt and the task that carries it are one write: both or neither, whatever the other
// writes of the same group commit do, and the chain goes on from the receipts that landed.
func TestAppendReceiptsCreatingTask(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	turns := rcStarted(t, db, 48)
	tasks := db.TaskStore("review", ownerOf)
	taken := &a2a.Task{ID: "taken", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	mustCreateTask(t, as(t, "alice"), tasks, taken)
	errs := make([]error, len(turns))
	var wg sync.WaitGroup
	for i, tr := range turns {
		wg.Go(func() {
			id := a2a.TaskID(fmt.Sprintf("task-%d", i))
			if i%3 == 0 {
				id = taken.ID // a task id that is stored already: the receipt must not land either
			}
			durable, err := db.AppendReceiptsCreatingTask(ctx, func(tail Checkpoint, _ func(domain.GrantID) (bool, error)) ([]Receipt, error) {
				seq := tail.Seq + 1
				return []Receipt{rcReceipt(tr, seq, rcPrev(seq))}, nil
			}, "review", "alice", func() (*a2a.Task, error) {
				return &a2a.Task{ID: id, Status: a2a.TaskStatus{State: a2a.TaskStateCompleted},
					Artifacts: []*a2a.Artifact{{ID: "receipt", Parts: a2a.ContentParts{a2a.NewTextPart("jws")}}}}, nil
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

// AppendReceiptsCreatingTask returns once its write has run in the group commit's transaction,
// before the commit: until durable returns, nobody reads the receipt or the task, and when the
// commit fails durable says so and neither lands (T8: the answer waits for durable).
func TestAppendReceiptsCreatingTaskAhead(t *testing.T) {
	ctx := context.Background()
	// appendAhead holds the committer in a write of its own, queues the receipt of turn tr
	// (seq) with its task, then a write that runs then, beside it, in the same transaction:
	// beside holds the transaction open until release.
	appendAhead := func(t *testing.T, db *DB, tr Turn, seq int64, beside func(tx *gorm.DB) error) (durable *Pending, release func()) {
		t.Helper()
		first, gate := make(chan struct{}), make(chan struct{})
		go db.write(ctx, func(*gorm.DB) error { close(first); <-gate; return nil })
		<-first
		type appended struct {
			durable *Pending
			err     error
		}
		got := make(chan appended, 1)
		go func() {
			d, err := db.AppendReceiptsCreatingTask(ctx, signed([]Receipt{rcReceipt(tr, seq, rcPrev(seq))}), "review", "alice",
				func() (*a2a.Task, error) {
					return &a2a.Task{ID: a2a.TaskID(tr.TaskID), Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}, nil
				})
			got <- appended{d, err}
		}()
		queued := func(n int) {
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
		queued(1)
		inside, hold := make(chan struct{}), make(chan struct{})
		go db.write(ctx, func(tx *gorm.DB) error {
			close(inside)
			<-hold
			return beside(tx)
		})
		queued(2)
		close(gate) // the committer takes the receipt's write and the one beside it as one batch
		a := <-got
		if a.err != nil {
			t.Fatalf("AppendReceiptsCreatingTask: %v", a.err)
		}
		<-inside
		return a.durable, func() { close(hold) }
	}
	unseen := func(t *testing.T, db *DB, tr Turn) {
		t.Helper()
		if rs, err := db.ReceiptsForTurns(ctx, []string{tr.ID}); err != nil || len(rs) != 0 {
			t.Errorf("the receipt of turn %s: %+v, %v; want none", tr.ID, rs, err)
		}
		if _, err := db.TaskStore("review", ownerOf).Get(as(t, "alice"), a2a.TaskID(tr.TaskID)); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Errorf("the task of turn %s is readable (%v)", tr.ID, err)
		}
	}

	t.Run("T8 nothing is readable, and durable waits, until the commit", func(t *testing.T) {
		db, _ := openTemp(t)
		tr := rcStarted(t, db, 1)[0]
		durable, release := appendAhead(t, db, tr, 1, func(*gorm.DB) error { return nil })
		returned := make(chan error, 1)
		go func() { returned <- durable.Durable() }()
		unseen(t, db, tr)
		select {
		case err := <-returned:
			t.Fatalf("durable returned (%v) while its transaction was still open", err)
		case <-time.After(20 * time.Millisecond): // time enough for a durable that does not wait to return
		}
		release()
		if err := <-returned; err != nil {
			t.Fatalf("durable: %v", err)
		}
		if rs, err := db.ReceiptsForTurns(ctx, []string{tr.ID}); err != nil || len(rs) != 1 {
			t.Errorf("receipt after the commit: %v, %v", rs, err)
		}
		if _, err := db.TaskStore("review", ownerOf).Get(as(t, "alice"), a2a.TaskID(tr.TaskID)); err != nil {
			t.Errorf("task after the commit: %v", err)
		}
	})

	t.Run("T8 a commit that fails is durable's error, and nothing lands", func(t *testing.T) {
		db, _ := openTemp(t)
		turns := rcStarted(t, db, 2)
		if err := db.AppendReceipts(ctx, signed([]Receipt{rcReceipt(turns[0], 1, rcPrev(1))})); err != nil {
			t.Fatal(err)
		}
		// The write beside it moves the high-water mark: the transaction's own move of the mark
		// then fails, and the whole commit with it.
		durable, release := appendAhead(t, db, turns[1], 2, func(tx *gorm.DB) error {
			return tx.Exec(`UPDATE meta SET value = '{"seq":9}' WHERE key = ?`, metaHighWater).Error
		})
		release()
		if err := durable.Durable(); !errors.Is(err, ErrHighWater) {
			t.Fatalf("durable = %v, want ErrHighWater", err)
		}
		unseen(t, db, turns[1])
		if open, err := db.GetTurn(ctx, turns[1].ID); err != nil || open.Status != domain.TurnRunning {
			t.Errorf("turn after the failed commit: %+v, %v", open, err)
		}
	})
}
