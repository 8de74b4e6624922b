package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/domain"
)

// approveFlow stores a flow approved with grant g.
func approveFlow(t *testing.T, db *DB, f DeviceFlow, g *Grant) {
	t.Helper()
	ctx := context.Background()
	flowMust(t, db.CreateFlow(ctx, f, testFlowLimits))
	_, err := db.UpdateFlow(ctx, f.ID, func(f *DeviceFlow, _ *Grant) (*Grant, error) {
		f.Status = domain.FlowApproved
		return g, nil
	})
	flowMust(t, err)
}

func TestRecordUseCountsLiveGrantsOnly(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	exp := flowT0.Add(time.Hour)
	g := testGrant("g1", "alice")
	g.ExpiresAt = &exp
	approveFlow(t, db, testFlow("f1", "BBBBBBBB", "alice"), g)

	use := func(id domain.GrantID, at time.Time) *Grant {
		t.Helper()
		db.RecordUseSoon(id, at)
		flowMust(t, db.Flush(ctx))
		got, err := db.GrantByID(ctx, "g1")
		flowMust(t, err)
		return got
	}
	for i := range 2 {
		got := use("g1", flowT0.Add(time.Duration(i+1)*time.Minute))
		if got.Uses != int64(i+1) || !got.LastUsedAt.Equal(flowT0.Add(time.Duration(i+1)*time.Minute)) {
			t.Fatalf("use %d: %+v", i+1, got)
		}
	}
	// Past its expiry the grant is not counted.
	if got := use("g1", exp); got.Uses != 2 || got.Live(exp) {
		t.Errorf("expired grant: uses %d live %v", got.Uses, got.Live(exp))
	}
	// An unknown grant counts nothing and breaks nothing.
	if got := use("nope", flowT0); got.Uses != 2 {
		t.Errorf("unknown grant changed g1: %+v", got)
	}
}

// Uses are summed per grant and written together, by Flush or within useDelay.
func TestRecordUseWrittenTogether(t *testing.T) {
	db, path := openTemp(t)
	ctx := context.Background()
	approveFlow(t, db, testFlow("f1", "BBBBBBBB", "alice"), testGrant("g1", "alice"))
	uses := func() int64 {
		t.Helper()
		g, err := db.GrantByID(ctx, "g1")
		flowMust(t, err)
		return g.Uses
	}
	for i := range 3 {
		db.RecordUseSoon("g1", flowT0.Add(time.Duration(i)*time.Second))
	}
	flowMust(t, db.Flush(ctx))
	g, err := db.GrantByID(ctx, "g1")
	flowMust(t, err)
	if g.Uses != 3 || !g.LastUsedAt.Equal(flowT0.Add(2*time.Second)) {
		t.Fatalf("after three uses and a flush: uses %d, last used %v", g.Uses, g.LastUsedAt)
	}
	db.RecordUseSoon("g1", flowT0.Add(time.Minute))
	for deadline := time.Now().Add(10 * time.Second); uses() != 4; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a use with no flush after it was never committed")
		}
	}
	// Close writes what is still counted.
	db.RecordUseSoon("g1", flowT0.Add(2*time.Minute))
	db.Close()
	db, err = Open(path)
	flowMust(t, err)
	defer db.Close()
	if n := uses(); n != 5 {
		t.Fatalf("after close and reopen: %d uses, want 5", n)
	}
}

func TestRevokeGrant(t *testing.T) {
	db, path := openTemp(t)
	ctx := context.Background()
	approveFlow(t, db, testFlow("f1", "BBBBBBBB", "alice"), testGrant("g1", "alice"))
	flowMust(t, db.CreateFlow(ctx, testFlow("f2", "CCCCCCCC", "alice"), testFlowLimits)) // same agent and brand: denied
	flowMust(t, db.CreateFlow(ctx, testFlow("f3", "DDDDDDDD", "bob"), testFlowLimits))   // another agent: untouched

	at := flowT0.Add(time.Minute)
	g, revoked, denied, err := db.RevokeGrant(ctx, "g1", at)
	flowMust(t, err)
	if !revoked || g.RevokedAt == nil || !g.RevokedAt.Equal(at) || g.Live(at) {
		t.Fatalf("revoke: revoked=%v grant=%+v", revoked, g)
	}
	if len(denied) != 1 || denied[0].ID != "f2" || denied[0].Status != domain.FlowDenied {
		t.Fatalf("denied = %+v", denied)
	}
	// Idempotent: the second call changes nothing, not even the time.
	g, revoked, denied, err = db.RevokeGrant(ctx, "g1", at.Add(time.Hour))
	flowMust(t, err)
	if revoked || len(denied) != 0 || !g.RevokedAt.Equal(at) {
		t.Fatalf("second revoke: revoked=%v denied=%v at=%v", revoked, denied, g.RevokedAt)
	}
	if _, _, _, err := db.RevokeGrant(ctx, "nope", at); !errors.Is(err, ErrGrantNotFound) {
		t.Errorf("unknown grant: %v", err)
	}
	// A revoked grant is neither counted nor found live, and stays so across a reopen.
	db.RecordUseSoon("g1", at)
	flowMust(t, db.Flush(ctx))
	got, err := db.GrantByID(ctx, "g1")
	flowMust(t, err)
	if got.Uses != 0 {
		t.Errorf("revoked grant counted a use")
	}
	db.Close()
	db, err = Open(path)
	flowMust(t, err)
	defer db.Close()
	err = db.WithLiveGrant(ctx, "https://id.example", "alice", "review", at, func(*Grant) error { return nil })
	if !errors.Is(err, ErrGrantNotFound) {
		t.Errorf("live grant after revoke and reopen: %v", err)
	}
	f, err := db.FlowByUserCode(ctx, "DDDDDDDD")
	flowMust(t, err)
	if f.Status != domain.FlowPending {
		t.Errorf("other agent's flow is %s", f.Status)
	}
}

func TestWithLiveGrantPicksNewest(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	approveFlow(t, db, testFlow("f1", "BBBBBBBB", "alice"), testGrant("g1", "alice"))
	g2 := testGrant("g2", "alice")
	g2.IssuedAt = flowT0.Add(time.Minute)
	approveFlow(t, db, testFlow("f2", "CCCCCCCC", "alice"), g2)

	var got domain.GrantID
	flowMust(t, db.WithLiveGrant(ctx, "https://id.example", "alice", "review", flowT0.Add(time.Hour), func(g *Grant) error {
		got = g.ID
		return nil
	}))
	if got != "g2" {
		t.Errorf("live grant = %s, want the newest g2", got)
	}
	boom := errors.New("boom")
	if err := db.WithLiveGrant(ctx, "https://id.example", "alice", "review", flowT0, func(*Grant) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("fn error = %v", err)
	}
	if err := db.WithLiveGrant(ctx, "https://other.example", "alice", "review", flowT0, func(*Grant) error { return nil }); !errors.Is(err, ErrGrantNotFound) {
		t.Errorf("same sub, other issuer: %v", err)
	}
	list, err := db.ListGrants(ctx)
	flowMust(t, err)
	if len(list) != 2 || list[0].ID != "g2" || list[1].ID != "g1" {
		t.Errorf("ListGrants order: %v", list)
	}
}

// A receipt's signer reads each grant as the receipt's own write sees it (V2).
func TestSignerSeesRevocation(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	approveFlow(t, db, testFlow("f1", "BBBBBBBB", "alice"), testGrant("g1", "alice"))
	seen := func() (g1, gone bool) {
		t.Helper()
		var read error
		stop := errors.New("read, nothing to append")
		err := db.Commit(ctx, func(tx *Tx) error {
			var err1, err2 error
			g1, err1 = tx.GrantRevoked("g1")
			gone, err2 = tx.GrantRevoked("nope")
			read = errors.Join(err1, err2)
			return stop
		})
		if !errors.Is(err, stop) || read != nil {
			t.Fatalf("append: %v; reading the grants: %v", err, read)
		}
		return g1, gone
	}
	if g1, gone := seen(); g1 || !gone {
		t.Fatalf("live grant: revoked=%v; a grant that does not exist: revoked=%v", g1, gone)
	}
	if _, _, _, err := db.RevokeGrant(ctx, "g1", flowT0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if g1, _ := seen(); !g1 {
		t.Fatal("revoked grant read as live")
	}
}

// remembered is a store with grant g1, and a read of its uses through GrantByID, done once: g1
// is remembered.
// remembered is a store that remembers grant g1, and how many uses it remembers for it.
func remembered(t *testing.T) (*DB, func() int64) {
	db, _ := openTemp(t)
	approveFlow(t, db, testFlow("f1", "BBBBBBBB", "alice"), testGrant("g1", "alice"))
	uses := func() int64 {
		t.Helper()
		g, err := db.GrantByID(context.Background(), "g1")
		if err != nil {
			t.Fatal(err)
		}
		return g.Uses
	}
	uses()
	return db, uses
}

// g1Turn is turn n of alice on grant g1.
func g1Turn(n int64) Turn {
	return Turn{ID: fmt.Sprint("t", n), TaskID: fmt.Sprint("task-", n), ContextID: "ctx-1", Brand: "review",
		BrandScope: "review:read_only", GrantID: "g1", Agent: domain.Agent{Issuer: "https://id.example", Subject: "alice"},
		PolicyHash: "p1", StartedAt: flowT0}
}

// setUsesBehind sets g1's uses behind the store's back, on a connection of its own (no
// other process writes the file while the node runs: the data dir's lock), so that what the
// store remembers shows.
func setUsesBehind(t *testing.T, db *DB, uses int) {
	t.Helper()
	var path string
	if err := db.r.Raw("SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&path).Error; err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Exec(`UPDATE grants SET uses = ? WHERE id = 'g1'`, uses); err != nil {
		t.Fatal(err)
	}
}

// G13: the grants GrantByID remembers (grantMemory) never outlive a write that may change
// them, so the delegation check of every call sees the grant as the store has it.
func TestGrantMemory(t *testing.T) {
	ctx := context.Background()
	t.Run("G13 the call after a revoke sees it, and a new grant is found", func(t *testing.T) {
		db, _ := openTemp(t)
		approveFlow(t, db, testFlow("f1", "BBBBBBBB", "alice"), testGrant("g1", "alice"))
		if _, err := db.GrantByID(ctx, "g2"); !errors.Is(err, ErrGrantNotFound) {
			t.Fatalf("unknown grant: %v", err)
		}
		if g, err := db.GrantByID(ctx, "g1"); err != nil || g.RevokedAt != nil {
			t.Fatalf("before the revoke: %+v, %v", g, err)
		}
		if _, _, _, err := db.RevokeGrant(ctx, "g1", flowT0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if g, err := db.GrantByID(ctx, "g1"); err != nil || g.RevokedAt == nil {
			t.Fatalf("the read after the revoke returned: %+v, %v", g, err)
		}
		approveFlow(t, db, testFlow("f2", "CCCCCCCC", "alice"), testGrant("g2", "alice"))
		if _, err := db.GrantByID(ctx, "g2"); err != nil {
			t.Fatalf("the grant approved after a miss: %v", err)
		}
	})

	t.Run("G13 reads racing a revoke: none begun after it returned sees the grant live", func(t *testing.T) {
		db, _ := openTemp(t)
		for i := range 30 {
			id := domain.GrantID(fmt.Sprintf("g%d", i))
			approveFlow(t, db, testFlow(fmt.Sprintf("f%d", i), "BBBBBBBB", "alice"), testGrant(string(id), "alice"))
			var returned, stop atomic.Bool
			var stale atomic.Int64
			var readers sync.WaitGroup
			for range 4 {
				readers.Go(func() {
					for !stop.Load() {
						after := returned.Load()
						g, err := db.GrantByID(ctx, id)
						if err != nil {
							t.Error(err)
							return
						}
						if after && g.RevokedAt == nil {
							stale.Add(1)
						}
					}
				})
			}
			time.Sleep(time.Millisecond)
			if _, _, _, err := db.RevokeGrant(ctx, id, flowT0.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			returned.Store(true)
			time.Sleep(2 * time.Millisecond)
			stop.Store(true)
			readers.Wait()
			if n := stale.Load(); n > 0 {
				t.Fatalf("grant %s: %d reads begun after the revoke returned saw it live", id, n)
			}
		}
	})

	t.Run("G13 every write but a turn's own records forgets what it remembers", func(t *testing.T) {
		db, uses := remembered(t)
		setUsesBehind(t, db, 7)
		if n := uses(); n != 0 {
			t.Fatalf("uses = %d: the grant was read again, not remembered", n)
		}
		turn := g1Turn(1)
		if err := db.StartTurn(ctx, turn); err != nil {
			t.Fatal(err)
		}
		if n := uses(); n != 0 {
			t.Fatalf("uses = %d after a turn's record: it need not forget", n)
		}
		// A write the store does not know to leave grants alone (here a meta key) forgets.
		if err := db.SetMeta(ctx, "k", "v"); err != nil {
			t.Fatal(err)
		}
		if n := uses(); n != 7 {
			t.Fatalf("uses = %d after another write: the grant was not read again", n)
		}
	})

	t.Run("G13 a receipt's append, its log leaf and signed checkpoint with it, leaves the memory alone", func(t *testing.T) {
		db, uses := remembered(t)
		for seq := int64(1); seq <= 2; seq++ {
			turn := g1Turn(seq)
			if err := db.StartTurn(ctx, turn); err != nil {
				t.Fatal(err)
			}
			if seq == 2 {
				uses() // remembered again
				setUsesBehind(t, db, 7)
			}
			if err := appendRows(ctx, db, []Receipt{rcReceipt(turn, seq, rcPrev(seq))}); err != nil {
				t.Fatal(err)
			}
		}
		if size, _, _, err := db.LatestCheckpoint(ctx); size != 2 || err != nil {
			t.Fatalf("checkpoint of %d leaves (%v): the appends did not reach the log", size, err)
		}
		if n := uses(); n != 0 {
			t.Fatalf("uses = %d after a receipt's append: the grant was read again", n)
		}
	})

	t.Run("G13 what a write writes decides, not how it was queued", func(t *testing.T) {
		db, uses := remembered(t)
		// Queued as a turn's plain-send write is (ahead of its commit, beside the chain), but
		// it changes the grant: the next read must see the change.
		p, err := db.CommitAhead(ctx, func(tx *Tx) error {
			_, err := exec(tx.tx, `UPDATE grants SET uses = 9 WHERE id = 'g1'`)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Durable(); err != nil {
			t.Fatal(err)
		}
		if n := uses(); n != 9 {
			t.Fatalf("uses = %d after a write that changed the grant: the memory outlived it", n)
		}
		// A plain write of a task alone leaves the memory alone.
		setUsesBehind(t, db, 11)
		if _, err := db.TaskStore("review", ownerOf).Create(as(t, "alice"), &a2a.Task{ID: "task-g13", ContextID: "c",
			Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}); err != nil {
			t.Fatal(err)
		}
		if n := uses(); n != 9 {
			t.Fatalf("uses = %d after a task's write: it need not forget", n)
		}
	})

	t.Run("G13 a write on the store's own connection between its commits forgets at the next", func(t *testing.T) {
		db, uses := remembered(t)
		if err := db.w.Exec(`UPDATE grants SET uses = 5 WHERE id = 'g1'`).Error; err != nil {
			t.Fatal(err)
		}
		// The next commit writes a turn's record alone, which by itself need not forget.
		turn := g1Turn(1)
		if err := db.StartTurn(ctx, turn); err != nil {
			t.Fatal(err)
		}
		if n := uses(); n != 5 {
			t.Fatalf("uses = %d: the count the write left behind was not seen", n)
		}
	})
}
