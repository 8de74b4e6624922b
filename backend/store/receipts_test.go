package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"golang.org/x/mod/sumdb/tlog"
	"gorm.io/gorm"

	"github.com/aether/aether/backend/a2atask"
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

// appendRows writes rows in one write as the ledger's chain does (backend/receipts), with no
// signing: their turns end, they go in, each with a log hash, the log gets a checkpoint, and
// the high-water mark moves.
func appendRows(ctx context.Context, db *DB, rows []Receipt) error {
	return db.Commit(ctx, func(tx *Tx) error { return writeRows(tx, rows) })
}

func writeRows(tx *Tx, rows []Receipt) error {
	{
		from, err := tx.ReceiptHead()
		if err != nil {
			return err
		}
		for _, r := range rows {
			if err := tx.EndTurn(r); err != nil {
				return err
			}
		}
		if err := tx.InsertReceipts(rows); err != nil {
			return err
		}
		n, err := tx.LogHashCount()
		if err != nil {
			return err
		}
		if err := tx.InsertLogHashes(n, make([]tlog.Hash, len(rows))); err != nil {
			return err
		}
		to := Checkpoint{Seq: rows[len(rows)-1].Seq, Hash: rows[len(rows)-1].Hash}
		if err := tx.InsertCheckpoint(to.Seq, []byte("note")); err != nil {
			return err
		}
		return tx.MoveHighWater(from, to)
	}
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
		if err := appendRows(ctx, db, rows); err != nil {
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
		if err := appendRows(ctx, db, rows); err != nil {
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

func TestReceiptsAppendOnly(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	turns := rcStarted(t, db, 1)
	if err := appendRows(ctx, db, []Receipt{rcReceipt(turns[0], 1, "genesis")}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`UPDATE receipts SET brand = 'x'`, `DELETE FROM receipts`} {
		if err := db.w.Exec(q).Error; err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: %v", q, err)
		}
	}
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
// CommitAhead returns once its write has run in the group commit's transaction, before the
// commit: until durable returns, nobody reads the receipt or the task it wrote, and when the
// commit fails durable says so and neither lands (T8: a plain send's answer waits for durable).
func TestCommitAhead(t *testing.T) {
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
			d, err := db.CommitAhead(ctx, func(tx *Tx) error {
				if err := writeRows(tx, []Receipt{rcReceipt(tr, seq, rcPrev(seq))}); err != nil {
					return err
				}
				row, err := a2atask.Encode(&a2a.Task{ID: a2a.TaskID(tr.TaskID), Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}})
				if err != nil {
					return err
				}
				return tx.CreateTask("alice", "review", row)
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
			t.Fatalf("CommitAhead: %v", a.err)
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
		if err := appendRows(ctx, db, []Receipt{rcReceipt(turns[0], 1, rcPrev(1))}); err != nil {
			t.Fatal(err)
		}
		// The write beside it leaves a foreign key broken, checked only at the commit: the
		// whole commit fails.
		durable, release := appendAhead(t, db, turns[1], 2, func(tx *gorm.DB) error {
			if err := tx.Exec(`PRAGMA defer_foreign_keys = ON`).Error; err != nil {
				return err
			}
			return tx.Exec(`INSERT INTO turns (id, task_id, context_id, brand, scope, brand_scope, grant_id, agent_iss,
				agent_sub, policy_hash, status, started_at) VALUES ('t-x', 'k', 'c', 'b', 'pact', 's', 'no-such-grant', 'i', 's', 'p', 'running', 0)`).Error
		})
		release()
		if err := durable.Durable(); err == nil || !strings.Contains(err.Error(), "FOREIGN KEY") {
			t.Fatalf("durable = %v, want the commit's FOREIGN KEY failure", err)
		}
		unseen(t, db, turns[1])
		if open, err := db.GetTurn(ctx, turns[1].ID); err != nil || open.Status != domain.TurnRunning {
			t.Errorf("turn after the failed commit: %+v, %v", open, err)
		}
	})
}
