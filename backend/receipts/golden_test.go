package receipts

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/cryptotest"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/store"
	"github.com/aether/aether/backend/work"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden-ledger.txt from this code")

// TestGoldenLedger holds the ledger's bytes to those the code wrote when it was recorded: the
// same keys, clock, randomness and sequence of turns (one at a time, failed and canceled ones,
// one whose work is cut to fit, turns a stop left open and Recover ended, a key rotation, a new
// publicUrl) give the same receipts, tlog-proofs, checkpoints and tiles, byte for byte. A
// change of the ledger's code that changes one byte of what it signs or serves fails here.
func TestGoldenLedger(t *testing.T) {
	cryptotest.SetGlobalRandom(t, 35) // receipt ids
	clock := t0.Add(time.Hour)
	now := func() time.Time { clock = clock.Add(250 * time.Millisecond); return clock }
	e := newEnv(t)
	e.close()
	e.key = testKey(7)
	reopen := func() {
		e.close()
		e.open()
		e.l.now = now
	}
	reopen()
	ctx := context.Background()
	var out bytes.Buffer
	record := func(what string, r *Receipt) {
		fmt.Fprintf(&out, "== %s seq %d\n%s\n%s", what, r.Seq, r.JWS, r.Proof())
		cp, ok, err := e.l.LatestCheckpoint(ctx)
		if err != nil || !ok {
			t.Fatalf("checkpoint after %s: %v %v", what, ok, err)
		}
		fmt.Fprintf(&out, "-- checkpoint\n%s", cp)
	}
	turn := func(i int, edit func(*Turn)) Turn {
		tr := testTurn(i)
		tr.EndedAt = time.Time{} // the ledger's clock
		if edit != nil {
			edit(&tr)
		}
		if err := e.l.Start(ctx, tr); err != nil {
			t.Fatal(err)
		}
		return tr
	}
	appendTurn := func(what string, i int, edit func(*Turn)) {
		r, err := e.l.Append(ctx, turn(i, edit))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		record(what, r)
	}

	appendTurn("completed", 1, nil)
	appendTurn("failed", 2, func(tr *Turn) {
		tr.Status, tr.Reason, tr.ExitCode, tr.AnswerHash = domain.TurnFailed, "codex exited 1", 1, ""
	})
	appendTurn("canceled", 3, func(tr *Turn) { tr.Status, tr.Reason, tr.ExitCode = domain.TurnCanceled, "canceled by the agent", -1 })
	appendTurn("violation", 4, func(tr *Turn) { tr.Violation, tr.Work = true, goldenWork(3) })
	appendTurn("work cut to fit", 5, func(tr *Turn) { tr.Work = goldenWork(work.MaxEntries) })
	for i := 6; i < 12; i++ {
		appendTurn("completed", i, func(tr *Turn) { tr.Work = goldenWork(1) })
	}

	// A stop with turns still running: the next start ends them in one write.
	for i := 12; i < 15; i++ {
		turn(i, nil)
	}
	reopen()
	if n, err := e.l.Recover(ctx); err != nil || n != 3 {
		t.Fatalf("recover: %d, %v", n, err)
	}
	for i := 12; i < 15; i++ { // each turn's receipt is the failed one Recover gave it (T9)
		tr := testTurn(i)
		r, err := e.l.Append(ctx, tr)
		if err != nil {
			t.Fatal(err)
		}
		record("recovered", r)
	}

	// A rotated key and a new publicUrl: the chain and the log go on, the origin stays.
	e.close()
	e.key = testKey(8)
	reopen()
	e.l.SetIssuer("https://moved.example")
	for i := 20; i < 24; i++ {
		appendTurn("after rotation", i, nil)
	}

	size := e.rows()[len(e.rows())-1].Seq
	for _, tile := range tlog.NewTiles(TileHeight, 0, size) {
		for _, tt := range []tlog.Tile{tile, {H: tile.H, L: -1, N: tile.N, W: tile.W}} {
			if tile.L != 0 && tt.L == -1 {
				continue
			}
			data, err := e.l.Tile(ctx, tt)
			if err != nil {
				t.Fatalf("tile %s: %v", tt.Path(), err)
			}
			fmt.Fprintf(&out, "== tile %s\n%x\n", tt.Path(), data)
		}
	}
	for _, r := range e.rows() {
		fmt.Fprintf(&out, "== row %d %s %s %s %s %s %d\n", r.Seq, r.ID, r.TurnID, r.Status, r.Reason, r.Hash, r.ExitCode)
	}

	path := filepath.Join("testdata", "golden-ledger.txt")
	if *updateGolden {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("line %d differs from %s:\n got %.200s\nwant %.200s", i+1, path, gl[i], wl[i])
			}
		}
		t.Fatalf("%d lines, %s has %d", len(gl), path, len(wl))
	}
}

// goldenWork is a turn's work with n commands, files and patches, each line long enough that
// work.MaxEntries of them do not fit a receipt.
func goldenWork(n int) *work.Work {
	w := &work.Work{Codex: "codex-cli 0.169.0", Model: "gpt-test", Upstream: "api.example", Sandbox: "read-only",
		Confinement: "bubblewrap 0.8.0", Before: "sha256:" + strings.Repeat("a", 64), After: "sha256:" + strings.Repeat("b", 64)}
	exit := 0
	for i := range n {
		long := fmt.Sprintf("%d-%s", i, strings.Repeat(`"`, 2000)) // each byte two in JSON
		w.Commands.Add(work.Command{Line: work.Text("cat "+long, work.MaxCommandBytes), LineSHA256: HashBytes([]byte(long)), Status: "completed", Exit: &exit})
		w.Files.Add(work.File{Path: work.Text("src/"+long, work.MaxPathBytes), Kind: work.Modified, SHA256: HashBytes([]byte("f" + long))})
		w.Patches.Add(work.Patch{Path: work.Text("src/"+long, work.MaxPathBytes), Kind: "update", Status: "completed"})
	}
	return w
}

var writeDataDir = flag.String("write-datadir", "", "write a small data dir made by this code to this folder (the fixture of cli's TestReceiptsVerifyOldDataDir)")

// TestWriteDataDir writes, with -write-datadir, a data dir as the node leaves it (its key
// ring with one rotation, pact.sqlite, receipts.head): a fixture that later code must still
// verify. Its keys are test keys, made from a fixed seed.
func TestWriteDataDir(t *testing.T) {
	dir := *writeDataDir
	if dir == "" {
		t.Skip("set -write-datadir")
	}
	cryptotest.SetGlobalRandom(t, 35)
	ctx := context.Background()
	path := filepath.Join(dir, "pact.sqlite")
	appendTurns := func(from, to int) {
		ring, err := keys.LoadRing(dir)
		if err != nil {
			t.Fatal(err)
		}
		db, err := store.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		l := NewLedger(db, ring.Current, testIssuer, nil)
		head := &HeadFile{Path: filepath.Join(dir, "receipts.head")}
		if err := head.Check(ctx, l); err != nil {
			t.Fatal(err)
		}
		l.KeepHead(head)
		for i := from; i < to; i++ {
			tr := testTurn(i)
			tr.EndedAt = time.Time{}
			if i%3 == 1 {
				tr.Status, tr.Reason, tr.ExitCode, tr.Work = domain.TurnFailed, "codex exited 1", 1, goldenWork(1)
			}
			if err := l.Start(ctx, tr); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Append(ctx, tr); err != nil {
				t.Fatal(err)
			}
		}
		if err := head.Close(); err != nil {
			t.Fatal(err)
		}
		l.Close()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := keys.LoadRing(dir); err != nil {
		t.Fatal(err)
	}
	rawDBCreate(t, path)
	appendTurns(0, 5)
	if _, _, err := keys.Rotate(dir, time.Now(), 5); err != nil {
		t.Fatal(err)
	}
	appendTurns(5, 8)
}

// rawDBCreate makes pact.sqlite at path with grant g1.
func rawDBCreate(t *testing.T, path string) {
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	rawExec(t, path, `INSERT INTO grants (id, agent_iss, agent_sub, brand, capability, workspace, access_mode,
		scope, issued_at, jws) VALUES ('g1', 'https://agent.example', 'alice', 'acme', 'code', '/w', 'read_only', 'acme.read', 0, 'x')`)
}
