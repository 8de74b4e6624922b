package receipts

import (
	"golang.org/x/mod/sumdb/tlog"

	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/store"
)

// chainFile makes a closed pact.sqlite holding n receipts and returns its
// path and rows.
func chainFile(t *testing.T, n int) (string, []store.Receipt) {
	t.Helper()
	e := newEnv(t)
	e.run(0, n, 8)
	rows := e.rows()
	e.close()
	return e.path, rows
}

// tampered copies base, edits the copy with SQL as someone holding the file
// would, and opens it.
func tampered(t *testing.T, base string, stmts ...string) *store.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pact.sqlite")
	copyFile(t, base, path)
	rawExec(t, path, append(append([]string{}, untrigger...), stmts...)...)
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func verifyDB(t *testing.T, db *store.DB, set keys.History, opts VerifyOptions) *Report {
	t.Helper()
	rep, err := VerifyDB(context.Background(), db, set, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func sqlQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func TestTamperedStoreDetected(t *testing.T) {
	base, rows := chainFile(t, 20)
	set := only(testKey(1).Set())
	r10 := rows[9]
	wantOK(t, verifyDB(t, tampered(t, base), set, VerifyOptions{Issuer: testIssuer}), 20)

	// T1: every column of receipt 10, one at a time.
	edits := map[string]string{
		"id":         "'r_forged'",
		"turn_id":    "'turn-forged'",
		"prev_hash":  sqlQuote(strings.Repeat("0", 64)),
		"hash":       sqlQuote(strings.Repeat("1", 64)),
		"task_id":    "'task-forged'",
		"context_id": "'ctx-forged'",
		"brand":      "'globex'",
		"scope":      "'globex.write'",
		"grant_id":   "'g2'",
		"agent_iss":  "'https://evil.example'",
		"agent_sub":  "'mallory'",
		"status":     "'failed'",
		"reason":     "'nothing to see'",
		"exit_code":  "exit_code + 1",
		"started_at": "started_at - 1000",
		"ended_at":   "ended_at + 1",
	}
	for col, val := range edits {
		t.Run("T1 edited column "+col, func(t *testing.T) {
			db := tampered(t, base, fmt.Sprintf(`UPDATE receipts SET %s = %s WHERE seq = 10`, col, val))
			id := r10.ID
			if col == "id" {
				id = "r_forged"
			}
			reason := col
			if col == "hash" {
				reason = "stored hash"
			}
			wantProblem(t, verifyDB(t, db, set, VerifyOptions{}), 10, id, reason)
		})
	}
	t.Run("T1 edited column seq", func(t *testing.T) {
		db := tampered(t, base, `UPDATE receipts SET seq = 1010 WHERE seq = 10`)
		wantProblem(t, verifyDB(t, db, set, VerifyOptions{}), 11, rows[10].ID, "receipt 10 is missing")
	})
	t.Run("T1 edited JWS claims", func(t *testing.T) {
		parts := strings.Split(r10.JWS, ".")
		payload, _ := jwsPart(r10.JWS, 1)
		forged := strings.Replace(string(payload), `"brand":"acme"`, `"brand":"globex"`, 1)
		jws := parts[0] + "." + b64(forged) + "." + parts[2]
		// The forger also fixes the column and the hash: the signature still fails.
		db := tampered(t, base, fmt.Sprintf(`UPDATE receipts SET jws = %s, hash = %s, brand = 'globex' WHERE seq = 10`,
			sqlQuote(jws), sqlQuote(HashBytes([]byte(jws)))))
		wantProblem(t, verifyDB(t, db, set, VerifyOptions{}), 10, r10.ID, "does not verify")
	})
	t.Run("T1 edited JWS signature", func(t *testing.T) {
		jws := r10.JWS[:len(r10.JWS)-4] + "AAAA"
		db := tampered(t, base, fmt.Sprintf(`UPDATE receipts SET jws = %s WHERE seq = 10`, sqlQuote(jws)))
		wantProblem(t, verifyDB(t, db, set, VerifyOptions{}), 10, r10.ID, "does not verify")
	})
	t.Run("T2 two receipts swapped", func(t *testing.T) {
		db := tampered(t, base, `UPDATE receipts SET seq = 1000 WHERE seq = 10`,
			`UPDATE receipts SET seq = 10 WHERE seq = 11`, `UPDATE receipts SET seq = 11 WHERE seq = 1000`)
		wantProblem(t, verifyDB(t, db, set, VerifyOptions{}), 10, rows[10].ID, "column seq is \"10\" but the signed receipt says \"11\"")
	})
	t.Run("T3 middle receipt deleted", func(t *testing.T) {
		db := tampered(t, base, `DELETE FROM receipts WHERE seq = 10`)
		wantProblem(t, verifyDB(t, db, set, VerifyOptions{}), 11, rows[10].ID, "receipt 10 is missing")
	})
	t.Run("T3 middle receipt deleted and the rest renumbered", func(t *testing.T) {
		db := tampered(t, base, `DELETE FROM receipts WHERE seq = 10`, `UPDATE receipts SET seq = seq - 1 WHERE seq > 10`)
		wantProblem(t, verifyDB(t, db, set, VerifyOptions{}), 10, rows[10].ID, "column seq")
	})
	t.Run("T4 tail truncated, mark left alone", func(t *testing.T) {
		db := tampered(t, base, `DELETE FROM receipts WHERE seq > 17`)
		wantProblem(t, verifyDB(t, db, set, VerifyOptions{}), 20, "", "the store's own high-water mark says receipt 20 exists, but the chain ends at seq 17")
		// The node refuses to extend it.
		l := NewLedger(db, testKey(1), testIssuer, nil)
		defer l.Close()
		if _, err := l.Append(context.Background(), testTurn(17)); !errors.Is(err, store.ErrHighWater) {
			t.Errorf("append on a cut chain: %v", err)
		}
	})
	t.Run("L5 tail truncated, mark rewritten, log left alone", func(t *testing.T) {
		db := tampered(t, base, `DELETE FROM receipts WHERE seq > 17`,
			fmt.Sprintf(`UPDATE meta SET value = '{"seq":17,"hash":"%s"}' WHERE key = 'receipts.high_water'`, rows[16].Hash))
		wantProblem(t, verifyDB(t, db, set, VerifyOptions{}), 0, "", "the receipts log holds more than the 17 receipts' leaves")
	})
	t.Run("T4 tail truncated, mark rewritten and log cut: only an outside mark sees it", func(t *testing.T) {
		db := tampered(t, base, `DELETE FROM receipts WHERE seq > 17`,
			fmt.Sprintf(`UPDATE meta SET value = '{"seq":17,"hash":"%s"}' WHERE key = 'receipts.high_water'`, rows[16].Hash),
			fmt.Sprintf(`DELETE FROM log_hashes WHERE idx >= %d`, tlog.StoredHashCount(17)), `DELETE FROM log_checkpoints WHERE size > 17`)
		// A valid shorter chain: undetectable from the file alone (documented).
		wantOK(t, verifyDB(t, db, set, VerifyOptions{}), 17)
		hw := store.Checkpoint{Seq: 20, Hash: rows[19].Hash}
		wantProblem(t, verifyDB(t, db, set, VerifyOptions{Expect: &hw}), 20, "", "the expected high-water mark says receipt 20 exists")
		l := NewLedger(db, testKey(1), testIssuer, nil)
		defer l.Close()
		if err := l.Confirm(context.Background(), hw); err == nil {
			t.Error("Confirm accepted a cut chain")
		}
	})
	t.Run("T4 mark removed", func(t *testing.T) {
		db := tampered(t, base, `DELETE FROM meta`)
		wantProblem(t, verifyDB(t, db, set, VerifyOptions{}), 0, "", "no high-water mark")
	})
	t.Run("T7 receipt from another node", func(t *testing.T) {
		c, _ := decodeClaims(r10.JWS)
		jws := signedBy(t, testKey(9), *c)
		db := tampered(t, base, fmt.Sprintf(`UPDATE receipts SET jws = %s, hash = %s WHERE seq = 10`,
			sqlQuote(jws), sqlQuote(HashBytes([]byte(jws)))))
		wantProblem(t, verifyDB(t, db, set, VerifyOptions{}), 10, r10.ID, "unknown key id")
	})
	t.Run("T7 verified against another node's keys", func(t *testing.T) {
		wantProblem(t, verifyDB(t, tampered(t, base), only(testKey(9).Set()), VerifyOptions{}), 1, rows[0].ID, "unknown key id")
	})
	t.Run("T7 issued for another node", func(t *testing.T) {
		wantProblem(t, verifyDB(t, tampered(t, base), set, VerifyOptions{Issuer: "https://other.example"}), 1, rows[0].ID, "issued by")
	})
	t.Run("T11 fork refused by UNIQUE(prev_hash)", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "pact.sqlite")
		copyFile(t, base, path)
		raw := rawDB(t, path)
		defer raw.Close()
		_, err := raw.Exec(`INSERT INTO receipts SELECT 21, 'r_fork', 'turn-fork', prev_hash, 'h', task_id, context_id,
			brand, scope, grant_id, agent_iss, agent_sub, status, reason, exit_code, started_at, ended_at, jws
			FROM receipts WHERE seq = 10`)
		if err == nil || !strings.Contains(err.Error(), "UNIQUE constraint failed: receipts.prev_hash") {
			t.Errorf("fork insert: %v", err)
		}
	})
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestFileTruncated(t *testing.T) {
	base, _ := chainFile(t, 200)
	t.Run("T5 DB file truncated", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "pact.sqlite")
		copyFile(t, base, path)
		st, _ := os.Stat(path)
		if err := os.Truncate(path, st.Size()/2); err != nil {
			t.Fatal(err)
		}
		// The node must not start serving turns on it.
		db, err := store.Open(path)
		if err != nil {
			t.Logf("refused at open: %v", err)
			return
		}
		rep, err := VerifyDB(context.Background(), db, only(testKey(1).Set()), VerifyOptions{})
		db.Close()
		if err == nil && rep.OK {
			t.Fatal("a truncated pact.sqlite opened and verified")
		}
		t.Logf("refused by verify: %v %v", err, rep)
	})
}

func TestRolledBackStore(t *testing.T) {
	e := newEnv(t)
	e.run(0, 10, 4)
	e.close()
	backup := e.path + ".bak"
	copyFile(t, e.path, backup)
	e.open()
	e.run(10, 20, 4)
	hw, err := e.l.Head(context.Background())
	if err != nil || hw.Seq != 20 {
		t.Fatalf("head = %+v, %v", hw, err)
	}
	e.close()
	restore := func() {
		copyFile(t, backup, e.path)
		os.Remove(e.path + "-wal")
		os.Remove(e.path + "-shm")
	}
	restore()
	e.open()
	t.Run("T6 DB replaced by an older backup", func(t *testing.T) {
		// The backup is a consistent older store: only the outside mark sees it.
		wantOK(t, e.verify(VerifyOptions{}), 10)
		wantProblem(t, e.verify(VerifyOptions{Expect: &hw}), 20, "", "the chain ends at seq 10")
		if err := e.l.Confirm(context.Background(), hw); err == nil {
			t.Error("Confirm accepted a rolled-back store")
		}
	})
	t.Run("T6 older backup grown again to a different history", func(t *testing.T) {
		e.run(100, 110, 4)
		rep := e.verify(VerifyOptions{Expect: &hw})
		wantProblem(t, rep, 20, "", "differs from the expected high-water mark")
		if err := e.l.Confirm(context.Background(), hw); err == nil {
			t.Error("Confirm accepted a rewritten store")
		}
	})
}
