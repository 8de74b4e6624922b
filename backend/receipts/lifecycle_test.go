package receipts

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/store"
)

func TestDurableBeforeReturn(t *testing.T) {
	e := newEnv(t)
	got := e.run(0, 5, 5)
	t.Run("T8 receipt committed before Append returns", func(t *testing.T) {
		// A second, independent handle on the file sees every receipt Append returned.
		other, err := store.Open(e.path)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		for _, r := range got {
			if _, err := other.GetReceipt(context.Background(), r.ID); err != nil {
				t.Errorf("receipt %s not in the file: %v", r.ID, err)
			}
		}
	})
}

func TestRecover(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.run(0, 3, 1)
	for i := 3; i < 6; i++ {
		if err := e.l.Start(ctx, testTurn(i)); err != nil {
			t.Fatal(err)
		}
	}
	e.reopen()
	n, err := e.l.Recover(ctx)
	if err != nil || n != 3 {
		t.Fatalf("Recover = %d, %v", n, err)
	}
	if open, _ := e.db.OpenTurns(ctx); len(open) != 0 {
		t.Errorf("%d turns still running", len(open))
	}
	for i := 3; i < 6; i++ {
		tr, _ := e.db.GetTurn(ctx, testTurn(i).ID)
		if tr.Status != domain.TurnFailed || tr.Reason != ReasonNodeStopped {
			t.Errorf("turn %d = %+v", i, tr)
		}
	}
	page, _, _ := e.l.List(ctx, store.ReceiptFilter{Status: domain.TurnFailed})
	if len(page) != 3 || page[0].Claims.Reason != ReasonNodeStopped || page[0].Claims.Exit != -1 {
		t.Errorf("failed receipts = %+v", page)
	}
	wantOK(t, e.verify(VerifyOptions{}), 6)
	if n, err := e.l.Recover(ctx); n != 0 || err != nil {
		t.Errorf("second Recover = %d, %v", n, err)
	}
}

const crashEnv = "AETHER_RECEIPTS_CRASH_DIR"

// TestCrashHelper is the process TestKilledMidTurn kills: it runs turns from 8
// workers forever and prints "done <turn>" after each Append returns.
func TestCrashHelper(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("helper process of TestKilledMidTurn")
	}
	db, err := store.Open(filepath.Join(dir, "pact.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	l := NewLedger(db, testKey(1), testIssuer, nil)
	ctx := context.Background()
	// A turn that never ends, so at least one is running whenever the kill comes.
	if err := l.Start(ctx, testTurn(0)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	for w := range 8 {
		go func() {
			for i := 1 + w; ; i += 8 {
				tr := testTurn(i)
				if err := l.Start(ctx, tr); err != nil {
					panic(err)
				}
				time.Sleep(time.Millisecond) // the turn's work
				if _, err := l.Append(ctx, tr); err != nil {
					panic(err)
				}
				mu.Lock()
				fmt.Println("done", tr.ID)
				mu.Unlock()
			}
		}()
	}
	select {}
}

func TestKilledMidTurn(t *testing.T) {
	e := newEnv(t)
	e.close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), crashEnv+"="+filepath.Dir(e.path))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := map[string]bool{}
	sc := bufio.NewScanner(out)
	for len(done) < 150 && sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "done "); ok {
			done[id] = true
		}
	}
	cmd.Process.Kill() // SIGKILL: no deferred code, no Close, mid-commit
	cmd.Wait()
	if len(done) < 150 {
		t.Fatalf("helper stopped after %d turns: %s", len(done), stderr.String())
	}
	t.Run("T8 crash between turn and receipt: kill -9", func(t *testing.T) {
		e.open()
		ctx := context.Background()
		n, err := e.l.Recover(ctx)
		if err != nil || n < 1 {
			t.Fatalf("Recover = %d, %v", n, err)
		}
		if open, _ := e.db.OpenTurns(ctx); len(open) != 0 {
			t.Errorf("%d turns still running", len(open))
		}
		ids := make([]string, 0, len(done))
		for id := range done {
			ids = append(ids, id)
		}
		have, err := e.db.ReceiptsForTurns(ctx, ids)
		if err != nil || len(have) != len(done) {
			t.Errorf("%d of %d acknowledged receipts survived the kill (%v)", len(have), len(done), err)
		}
		// No turn ended without its receipt: both are written in one transaction.
		raw := rawDB(t, e.path)
		defer raw.Close()
		var orphans int
		if err := raw.QueryRow(`SELECT count(*) FROM turns t LEFT JOIN receipts r ON r.turn_id = t.id
			WHERE t.status != 'running' AND r.seq IS NULL`).Scan(&orphans); err != nil || orphans != 0 {
			t.Errorf("%d ended turns without a receipt (%v)", orphans, err)
		}
		// A crash, not a commit that failed: the failed receipts say the node stopped.
		failed, _, err := e.l.List(ctx, store.ReceiptFilter{Status: domain.TurnFailed, Limit: store.MaxReceiptPage})
		if err != nil || len(failed) != n {
			t.Errorf("%d failed receipts (%v), want the %d Recover signed", len(failed), err, n)
		}
		for _, r := range failed {
			if r.Claims.Reason != ReasonNodeStopped {
				t.Errorf("the failed receipt of %s says %q, want %q", r.Claims.Turn, r.Claims.Reason, ReasonNodeStopped)
			}
		}
		rep := e.verify(VerifyOptions{Issuer: testIssuer})
		if !rep.OK || rep.Count < len(done)+1 {
			t.Errorf("after recovery: %+v %v", rep, rep.Problem)
		}
		t.Logf("%d acknowledged, %d receipts after recovery, %d turns ended by Recover", len(done), rep.Count, n)
	})
}

func TestDuplicateAppend(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	first := e.run(0, 3, 1)[1]
	t.Run("T9 duplicate receipt for the same turn (retry)", func(t *testing.T) {
		again, err := e.l.Append(ctx, testTurn(1))
		if err != nil || again.ID != first.ID || again.Seq != first.Seq || again.JWS != first.JWS {
			t.Fatalf("retry got %+v, %v; want the first receipt %s", again, err, first.ID)
		}
		// With its proof, against the newest checkpoint.
		if cp, err := VerifyProof(again.Proof(), again.JWS, again.Seq, e.key.Set()); err != nil || cp.Size != 3 {
			t.Fatalf("the retry's proof: %+v %v", cp, err)
		}
	})
	t.Run("T9 concurrent duplicates", func(t *testing.T) {
		if err := e.l.Start(ctx, testTurn(7)); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		got := make([]*Receipt, 16)
		for i := range got {
			wg.Go(func() {
				r, err := e.l.Append(ctx, testTurn(7))
				if err != nil {
					t.Error(err)
				}
				got[i] = r
			})
		}
		wg.Wait()
		for _, r := range got {
			if r == nil || r.ID != got[0].ID {
				t.Fatalf("duplicates got different receipts: %+v vs %+v", r, got[0])
			}
		}
	})
	wantOK(t, e.verify(VerifyOptions{}), 4)
}

func TestKeyRotation(t *testing.T) {
	e := newEnv(t)
	e.run(0, 5, 1)
	old := e.key
	// The rotation: datadir.RotateKey reads the chain's head (seq 5) for the statement, whose iat
	// is in whole seconds.
	rotatedAt := time.Now().Truncate(time.Second)
	e.close()
	e.key = testKey(2)
	e.open()
	got := e.run(5, 10, 1)
	rows := e.rows()
	both := keys.Set{}
	for kid, pub := range old.Set() {
		both[kid] = pub
	}
	for kid, pub := range e.key.Set() {
		both[kid] = pub
	}
	ctx := context.Background()
	verify := func(h keys.History) *Report {
		rep, err := VerifyDB(ctx, e.db, h, VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	retired := func(hasSeq bool) keys.History {
		return keys.History{Set: both, Retired: map[string]keys.Rotation{
			old.ID(): {Old: old.ID(), New: e.key.ID(), LastSeq: 5, HasSeq: hasSeq, At: rotatedAt}}}
	}
	t.Run("T10 key rotated", func(t *testing.T) {
		if got[5].Claims.Prev != rows[4].Hash || got[5].Claims.Kid != e.key.ID() {
			t.Errorf("the new key's first receipt does not continue the chain: %+v", got[5].Claims)
		}
		// Old receipts verify with the archived key kept in the set, bounded or not.
		wantOK(t, verify(only(both)), 10)
		wantOK(t, verify(retired(true)), 10)
		wantProblem(t, verify(only(e.key.Set())), 1, rows[0].ID, "unknown key id")
		wantProblem(t, verify(only(old.Set())), 6, rows[5].ID, "unknown key id")
	})
	// Whoever kept the old node.key signs with it after the rotation.
	forger := func(now time.Time) *Ledger { return NewLedger(e.db, old, testIssuer, func() time.Time { return now }) }
	t.Run("T13 a receipt of the retired key dated after its rotation", func(t *testing.T) {
		_, recs, err := forger(rotatedAt.Add(time.Hour)).sign([]Turn{testTurn(900)}, store.Checkpoint{Seq: 2, Hash: rows[1].Hash},
			func(domain.GrantID) (bool, error) { return false, nil })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := VerifyOne(recs[0].JWS, retired(true)); err == nil || !strings.Contains(err.Error(), "which a rotation retired at") {
			t.Fatalf("a receipt the retired key signed an hour after its rotation: %v", err)
		}
		if _, err := VerifyOne(recs[0].JWS, only(both)); err != nil {
			t.Fatalf("without its rotation the forged receipt is well signed: %v", err)
		}
	})
	t.Run("T13 the retired key appends a chain after the rotation", func(t *testing.T) {
		// Dated no later than the rotation, numbered after it: a whole chain of three.
		f := forger(rotatedAt)
		for i := 10; i < 13; i++ {
			tr := testTurn(i)
			if err := f.Start(ctx, tr); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Append(ctx, tr); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
		forged := e.rows()[10]
		wantOK(t, verify(only(both)), 13) // what verify said before rotations bounded keys
		wantProblem(t, verify(retired(true)), 11, forged.ID, "seq 11 is after the rotation that retired its key")
		// A version 1 statement has no last seq, and these receipts are dated before it: the
		// chain still shows the new key signed first.
		wantProblem(t, verify(retired(false)), 11, forged.ID, "after its successor "+e.key.ID()+" signed receipt 6")
	})
}

// The ledger reads the grant in the receipt's own commit: a revocation committed while
// the turn ran is in its signed receipt, whatever the turn was told when it began.
func TestReceiptSaysGrantRevoked(t *testing.T) {
	t.Run("V2 grant revoked while the turn ran: its receipt says so", func(t *testing.T) {
		e := newEnv(t)
		ctx := context.Background()
		before, during := testTurn(1), testTurn(2)
		for _, tr := range []Turn{before, during} {
			if err := e.l.Start(ctx, tr); err != nil {
				t.Fatal(err)
			}
		}
		revokedIn := func(tr Turn) bool {
			t.Helper()
			r, err := e.l.Append(ctx, tr)
			if err != nil {
				t.Fatal(err)
			}
			c, err := VerifyOne(r.JWS, only(e.key.Set()))
			if err != nil {
				t.Fatal(err)
			}
			return c.GrantRevoked
		}
		if revokedIn(before) {
			t.Fatal("a receipt under a live grant says it was revoked")
		}
		if _, _, _, err := e.db.RevokeGrant(ctx, "g1", t0); err != nil {
			t.Fatal(err)
		}
		if !revokedIn(during) {
			t.Fatal("the receipt of a turn whose grant was revoked before its commit does not say so")
		}
	})
}

// A plain send's receipt and its task, in one commit: the turn and the answer's writer both
// wait for it through durable, at once. Each sees the commit, and the append is counted out
// once (a second count would take Close's WaitGroup below zero, which panics).
func TestAppendCreatingTaskDurable(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tr := testTurn(1)
	if err := e.l.Start(ctx, tr); err != nil {
		t.Fatal(err)
	}
	rec, durable, err := e.l.AppendCreatingTask(ctx, tr, "acme", "owner-1", func(r *Receipt) (TaskRow, error) {
		return taskRow(&a2a.Task{ID: a2a.TaskID(tr.TaskID), ContextID: tr.ContextID, Status: a2a.TaskStatus{State: a2a.TaskStateCompleted},
			Artifacts: []*a2a.Artifact{{ID: "receipt", Parts: a2a.ContentParts{a2a.NewTextPart(r.JWS)}}}})
	})
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = durable.Durable() })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("durable, caller %d: %v", i, err)
		}
	}
	if err := durable.Durable(); err != nil {
		t.Errorf("durable, once more: %v", err)
	}
	if _, err := e.db.GetReceipt(ctx, rec.ID); err != nil {
		t.Errorf("receipt %s: %v", rec.ID, err)
	}
	if owner, brand, state, err := e.db.TaskOwner(ctx, a2a.TaskID(tr.TaskID)); err != nil || owner != "owner-1" || brand != "acme" || state != a2a.TaskStateCompleted {
		t.Errorf("task = %q %q %s (%v), want owner-1's on acme, completed", owner, brand, state, err)
	}
	e.close() // returns: the append was counted out
}

// TestUnstartedTurn: a turn none of whose work started is recorded in its receipt's own
// commit (durable.go, step 1): both are written, or neither, and a retry gets the receipt.
func TestUnstartedTurn(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.run(0, 2, 1)
	tr := testTurn(2)
	tr.Unstarted = true
	t.Run("T8 a failed receipt write leaves no record behind", func(t *testing.T) {
		_, _, err := e.l.AppendCreatingTask(ctx, tr, "acme", "owner-1", func(*Receipt) (TaskRow, error) {
			return TaskRow{}, fmt.Errorf("no task")
		})
		if err == nil {
			t.Fatal("the append succeeded without its task")
		}
		if got, err := e.db.GetTurn(ctx, tr.ID); err == nil {
			t.Fatalf("the turn is recorded without its receipt: %+v", got)
		}
		if n, err := e.l.Recover(ctx); n != 0 || err != nil {
			t.Fatalf("Recover = %d, %v; nothing ran, nothing to end", n, err)
		}
	})
	rec, err := e.l.Append(ctx, tr)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := e.db.GetTurn(ctx, tr.ID); err != nil || got.Status != domain.TurnCompleted || got.PolicyHash != tr.PolicyHash {
		t.Fatalf("turn = %+v, %v; want it recorded and ended", got, err)
	}
	if open, _ := e.db.OpenTurns(ctx); len(open) != 0 {
		t.Errorf("%d turns still running", len(open))
	}
	t.Run("T9 a retry gets the receipt", func(t *testing.T) {
		again, err := e.l.Append(ctx, tr)
		if err != nil || again.ID != rec.ID || again.JWS != rec.JWS {
			t.Fatalf("retry got %+v, %v; want %s", again, err, rec.ID)
		}
	})
	// The receipt is the one a started turn gets.
	started := newEnv(t)
	started.run(0, 2, 1)
	tr.Unstarted = false
	if err := started.l.Start(ctx, tr); err != nil {
		t.Fatal(err)
	}
	other, err := started.l.Append(ctx, tr)
	if err != nil {
		t.Fatal(err)
	}
	if other.Seq != rec.Seq || other.Claims.Turn != rec.Claims.Turn || other.Claims.Status != rec.Claims.Status {
		t.Errorf("unstarted %+v, started %+v", rec.Claims, other.Claims)
	}
	wantOK(t, e.verify(VerifyOptions{}), 3)
}
