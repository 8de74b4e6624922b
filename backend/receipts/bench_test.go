package receipts

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/store"
)

// startTurns records turns as running in one transaction (fast seeding; the
// receipts are still signed and appended for real).
func startTurns(tb testing.TB, e *env, turns []Turn) {
	tb.Helper()
	raw := rawDB(tb, e.path)
	defer raw.Close()
	tx, err := raw.Begin()
	if err != nil {
		tb.Fatal(err)
	}
	stmt, err := tx.Prepare(`INSERT INTO turns (id, task_id, context_id, brand, scope, brand_scope, grant_id,
		agent_iss, agent_sub, policy_hash, status, started_at) VALUES (?, ?, ?, ?, 'pact', ?, ?, ?, ?, ?, 'running', ?)`)
	if err != nil {
		tb.Fatal(err)
	}
	for _, t := range turns {
		if _, err := stmt.Exec(t.ID, t.TaskID, t.ContextID, t.Brand, t.BrandScope, t.GrantID, t.Agent.Issuer,
			t.Agent.Subject, t.PolicyHash, t.StartedAt.UnixMilli()); err != nil {
			tb.Fatal(err)
		}
	}
	stmt.Close()
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
}

func BenchmarkAppend(b *testing.B) {
	for _, mode := range []struct {
		name    string
		clients int
	}{{"sequential", 1}, {"concurrent32", 32}} {
		b.Run(mode.name, func(b *testing.B) {
			e := newEnv(b)
			turns := make([]Turn, b.N)
			for i := range turns {
				turns[i] = testTurn(i)
			}
			startTurns(b, e, turns)
			ctx := context.Background()
			var next atomic.Int64
			b.SetParallelism(max(1, mode.clients/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			if mode.clients == 1 {
				for i := range b.N {
					if _, err := e.l.Append(ctx, turns[i]); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := e.l.Append(ctx, turns[next.Add(1)-1]); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// seedScale appends n real, signed receipts over 10 issuers x 3 subjects,
// 1,000 per transaction.
func seedScale(tb testing.TB, e *env, n int) {
	tb.Helper()
	turns := make([]Turn, n)
	for i := range turns {
		turns[i] = testTurn(i)
		turns[i].Agent = domain.Agent{Issuer: fmt.Sprintf("https://agent-%d.example", i%10), Subject: fmt.Sprintf("user-%d", i%3)}
	}
	startTurns(tb, e, turns)
	ctx := context.Background()
	for start := 0; start < n; start += 1000 {
		part := turns[start:min(start+1000, n)]
		if _, err := e.l.append(ctx, part, false); err != nil {
			tb.Fatal(err)
		}
	}
}

// median of runs of f.
func timeIt(runs int, f func()) time.Duration {
	d := make([]time.Duration, runs)
	for i := range d {
		start := time.Now()
		f()
		d[i] = time.Since(start)
	}
	slices.Sort(d)
	return d[runs/2]
}

// TestPrintB4 measures benchmark B4: the first receipts page
// filtered by agent, and a full verify, at 1k / 10k / 100k receipts against the
// 1k time. It reports; it never fails on timing.
func TestPrintB4(t *testing.T) {
	if os.Getenv("AETHER_BENCH") != "1" {
		t.Skip("set AETHER_BENCH=1 to run B4")
	}
	ctx := context.Background()
	var basePage, baseVerify time.Duration
	for _, n := range []int{1000, 10000, 100000} {
		e := newEnv(t)
		start := time.Now()
		seedScale(t, e, n)
		e.reopen() // cold-ish: a fresh connection pool, as after a start
		t.Logf("seeded %d receipts in %v", n, time.Since(start).Round(time.Millisecond))
		filter := store.ReceiptFilter{Agent: "agent-3.", Limit: store.DefaultReceiptPage}
		page := timeIt(21, func() {
			rows, _, err := e.l.List(ctx, filter)
			if err != nil || len(rows) != store.DefaultReceiptPage {
				t.Fatalf("page: %d rows, %v", len(rows), err)
			}
		})
		verify := timeIt(map[bool]int{true: 3, false: 1}[n <= 10000], func() { wantOK(t, e.verify(VerifyOptions{}), n) })
		if n == 1000 {
			basePage, baseVerify = page, verify
		}
		fmt.Printf("B4-page rows=%d ours=%v baseline(1k)=%v ratio=%.2f\n", n, page, basePage, float64(page)/float64(basePage))
		fmt.Printf("B4-verify rows=%d ours=%v baseline(1k)=%v ratio=%.2f\n", n, verify.Round(time.Millisecond), baseVerify.Round(time.Millisecond), float64(verify)/float64(baseVerify))
		e.close()
	}
}

// TestPrintB9 measures benchmark B9: what the receipts log adds to a turn, the append of its
// receipt (leaves, checkpoint signed, proof) against the same append without the log, p50 of
// appends alternated one by one on two ledgers seeded with 1,000 receipts. It reports; it
// never fails on timing.
func TestPrintB9(t *testing.T) {
	if os.Getenv("AETHER_BENCH") != "1" {
		t.Skip("set AETHER_BENCH=1 to run B9")
	}
	const seed, runs = 1000, 400
	var envs [2]*env
	var turns [2][]Turn
	for i := range envs {
		envs[i] = newEnv(t)
		envs[i].l.chain.noLog = i == 0
		seedScale(t, envs[i], seed)
		for n := seed; n < seed+runs; n++ {
			turns[i] = append(turns[i], testTurn(n))
		}
		startTurns(t, envs[i], turns[i])
	}
	ctx := context.Background()
	var took [2][]time.Duration
	for k := range runs {
		for i, e := range envs {
			start := time.Now()
			if _, err := e.l.Append(ctx, turns[i][k]); err != nil {
				t.Fatal(err)
			}
			took[i] = append(took[i], time.Since(start))
		}
	}
	p50 := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	without, with := p50(took[0]), p50(took[1])
	fmt.Printf("B9 log-per-turn p50 without=%v with=%v added=%v\n", without.Round(time.Microsecond), with.Round(time.Microsecond), (with - without).Round(time.Microsecond))
}
