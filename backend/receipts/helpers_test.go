package receipts

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/a2atask"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/store"
	_ "github.com/glebarez/go-sqlite" // raw access to the file, as someone tampering with it would have
)

const testIssuer = "https://node.example"

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testKey is a fixed node key (a crash helper process must sign with the same one).
func testKey(seed byte) *keys.Key {
	s := make([]byte, ed25519.SeedSize)
	for i := range s {
		s[i] = seed
	}
	return keys.FromPrivate(ed25519.NewKeyFromSeed(s))
}

func testTurn(i int) Turn {
	return Turn{ID: fmt.Sprintf("turn-%05d", i), TaskID: fmt.Sprintf("task-%05d", i), ContextID: fmt.Sprintf("ctx-%d", i%7),
		Brand: "acme", BrandScope: "acme.read", GrantID: "g1",
		Agent:      domain.Agent{Issuer: "https://agent.example", Subject: fmt.Sprintf("user-%d", i%3)},
		PolicyHash: "policy-1", RequestHash: HashBytes([]byte(fmt.Sprint("request", i))),
		AnswerHash: HashBytes([]byte(fmt.Sprint("answer", i))), Status: domain.TurnCompleted,
		StartedAt: t0.Add(time.Duration(i) * time.Second), EndedAt: t0.Add(time.Duration(i)*time.Second + 1500*time.Millisecond),
		Usage: domain.Usage{InputTokens: 100, CachedInputTokens: 20, OutputTokens: 7}}
}

// rawDB opens the file with plain database/sql: no triggers dropped, no
// foreign keys enforced.
func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	raw.SetMaxOpenConns(1)
	return raw
}

// rawExec runs statements on the file directly (the store must be closed or
// able to wait).
func rawExec(t testing.TB, path string, stmts ...string) {
	t.Helper()
	raw := rawDB(t, path)
	defer raw.Close()
	for _, s := range stmts {
		if _, err := raw.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// untrigger is what someone editing the file does first.
var untrigger = []string{`DROP TRIGGER IF EXISTS receipts_no_update`, `DROP TRIGGER IF EXISTS receipts_no_delete`,
	`DROP TRIGGER IF EXISTS log_hashes_no_update`, `DROP TRIGGER IF EXISTS log_hashes_no_delete`,
	`DROP TRIGGER IF EXISTS log_checkpoints_no_update`, `DROP TRIGGER IF EXISTS log_checkpoints_no_delete`}

type env struct {
	t    testing.TB
	path string
	db   *store.DB
	key  *keys.Key
	l    *Ledger
}

// newEnv makes pact.sqlite in a temp dir with grant g1 and a ledger over it.
func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{t: t, path: filepath.Join(t.TempDir(), "pact.sqlite"), key: testKey(1)}
	e.open()
	raw := rawDB(t, e.path)
	defer raw.Close()
	if _, err := raw.Exec(`INSERT INTO grants (id, agent_iss, agent_sub, brand, capability, workspace, access_mode,
		scope, issued_at, jws) VALUES ('g1', 'https://agent.example', 'alice', 'acme', 'code', '/w', 'read_only', 'acme.read', 0, 'x')`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	return e
}

func (e *env) open() {
	e.t.Helper()
	db, err := store.Open(e.path)
	if err != nil {
		e.t.Fatal(err)
	}
	e.db, e.l = db, NewLedger(db, e.key, testIssuer, nil)
}

func (e *env) close() {
	if e.l != nil {
		e.l.Close()
		e.db.Close()
		e.l, e.db = nil, nil
	}
}

func (e *env) reopen() {
	e.t.Helper()
	e.close()
	e.open()
}

// run starts and ends turns from..to-1 with workers goroutines and returns the
// receipts by turn index.
func (e *env) run(from, to, workers int) map[int]*Receipt {
	e.t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	out := map[int]*Receipt{}
	next := make(chan int)
	var wg sync.WaitGroup
	var firstErr error
	for range workers {
		wg.Go(func() {
			for i := range next {
				tr := testTurn(i)
				err := e.l.Start(ctx, tr)
				var r *Receipt
				if err == nil {
					r, err = e.l.Append(ctx, tr)
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				out[i] = r
				mu.Unlock()
			}
		})
	}
	for i := from; i < to; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		e.t.Fatal(firstErr)
	}
	return out
}

func (e *env) verify(opts VerifyOptions) *Report {
	e.t.Helper()
	rep, err := VerifyDB(context.Background(), e.db, only(e.key.Set()), opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

func (e *env) rows() []store.Receipt {
	e.t.Helper()
	var out []store.Receipt
	for r, err := range e.db.AllReceipts(context.Background()) {
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

func wantOK(t testing.TB, rep *Report, count int) {
	t.Helper()
	if !rep.OK || rep.Problem != nil || rep.Count != count || rep.LastSeq != int64(count) {
		t.Fatalf("report = %+v (problem %v), want %d good receipts", rep, rep.Problem, count)
	}
}

func wantProblem(t testing.TB, rep *Report, seq int64, id string, reason string) {
	t.Helper()
	if rep.OK || rep.Problem == nil {
		t.Fatalf("report OK (%d receipts), want a problem at seq %d", rep.Count, seq)
	}
	p := rep.Problem
	if p.Seq != seq || (id != "" && p.ID != id) || !containsFold(p.Reason, reason) {
		t.Fatalf("problem = %v, want seq %d id %q reason ~ %q", p, seq, id, reason)
	}
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// only is the history of keys that no rotation retired.
func only(s keys.Set) keys.History { return keys.History{Set: s} }

// taskRow is task's row, as the gateway builds a plain send's.
func taskRow(task *a2a.Task) (TaskRow, error) { return a2atask.Encode(task) }
