package e2e

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/golang-jwt/jwt/v5"

	agentpkg "github.com/aether/aether/backend/agent"
	"github.com/aether/aether/backend/cli"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/receipts"
	"github.com/aether/aether/backend/store"
)

func verifyCLI(t *testing.T, dataDir string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main([]string{"receipts", "verify", "--data-dir", dataDir}, cli.Env{Stdout: &out, Stderr: &errb})
	return code, out.String() + errb.String()
}

// TestReceiptsVerifyCLI: `aether receipts verify` passes on a data dir after
// 1,000 turns and fails, naming the receipt, after one field of one receipt is
// edited, two are swapped, or one is deleted in the middle.
func TestReceiptsVerifyCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.stop()
	e.opts.Runner = instant{}
	e.start()
	const clients, perClient = 8, 125
	var wg sync.WaitGroup
	for i := range clients {
		a := e.agent(fmt.Sprintf("agent-%d", i))
		a.setDelegation(e.delegate(t, a, "review"))
		c := a.client("review", a2a.TransportProtocolJSONRPC)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perClient {
				res, err := c.SendMessage(t.Context(), textMessage("turn"))
				if err != nil {
					t.Error(err)
					return
				}
				if task := res.(*a2a.Task); task.Status.State != a2a.TaskStateCompleted {
					t.Errorf("turn ended %s", task.Status.State)
					return
				}
			}
		}()
	}
	wg.Wait()
	e.stop()

	if code, out := verifyCLI(t, e.dataDir); code != 0 || !strings.Contains(out, "OK: 1000 receipt(s)") ||
		!strings.Contains(out, "receipts.head: seq 1000") || !strings.Contains(out, "holds 1000 leaves; all 1000 checkpoint(s) the node signed verify") {
		t.Fatalf("verify after 1,000 turns: exit %d\n%s", code, out)
	}
	path := filepath.Join(e.dataDir, "pact.sqlite")
	saved := copyFile(t, path)
	tamper := func(t *testing.T, stmts ...string) {
		t.Helper()
		restoreFile(t, saved, path)
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		// The store's own guard against edits is a trigger; whoever holds the file can drop it.
		for _, s := range append([]string{"PRAGMA foreign_keys=OFF"}, stmts...) {
			if _, err := db.Exec(s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
	dropGuards := func() []string {
		db, _ := sql.Open("sqlite", saved)
		defer db.Close()
		rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'receipts'`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var n string
			rows.Scan(&n)
			out = append(out, "DROP TRIGGER "+n)
		}
		return out
	}()
	cases := []struct {
		name  string
		stmts []string
		want  string
	}{
		{"T1 one field of one receipt edited", []string{"UPDATE receipts SET brand = 'other' WHERE seq = 500"}, "receipt 500"},
		{"T1 the status of the last receipt edited", []string{"UPDATE receipts SET status = 'failed' WHERE seq = 1000"}, "receipt 1000"},
		{"T2 two receipts swapped", []string{
			"UPDATE receipts SET seq = 100000 WHERE seq = 300", "UPDATE receipts SET seq = 300 WHERE seq = 301", "UPDATE receipts SET seq = 301 WHERE seq = 100000"}, "receipt 300"},
		{"T3 a receipt deleted in the middle", []string{"DELETE FROM receipts WHERE seq = 700"}, "701"},
		// The store's own mark goes with the tail; receipts.head, outside the file, still names 1000.
		{"T4 the last two receipts cut and the store's mark removed", []string{
			"DELETE FROM receipts WHERE seq > 998", "DELETE FROM meta WHERE key = 'receipts.high_water'"}, "1000"},
	}
	t.Run("T4 without receipts.head verify says what it cannot see", func(t *testing.T) {
		restoreFile(t, saved, path)
		head := filepath.Join(e.dataDir, "receipts.head")
		kept := copyFile(t, head)
		os.Remove(head)
		defer restoreFile(t, kept, head)
		code, out := verifyCLI(t, e.dataDir)
		if code != 0 || !strings.Contains(out, "No "+head+": the newest receipts could have been cut without a trace") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tamper(t, append(dropGuards, c.stmts...)...)
			code, out := verifyCLI(t, e.dataDir)
			if code == 0 || !strings.Contains(out, "FAILED") || !strings.Contains(out, c.want) {
				t.Fatalf("exit %d, want a failure naming %q:\n%s", code, c.want, out)
			}
		})
	}
}

// TestKeyRotation: after `aether keys rotate` the node signs with the new key,
// its JWKS still holds the old one, and `aether receipts verify` checks the
// receipts of both keys and the rotation statement (T10).
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.agent("alice")
	alice.setDelegation(e.delegate(t, alice, "review"))
	c := alice.client("review", a2a.TransportProtocolJSONRPC)
	_, before := artifacts(t, alice.send(c, "", "before the rotation"))
	e.stop()
	// The usual reason to rotate: someone else holds a copy of node.key.
	stolen := copyFile(t, filepath.Join(e.dataDir, "node.key"))

	var out, errb bytes.Buffer
	if code := cli.Main([]string{"keys", "rotate", "--data-dir", e.dataDir}, cli.Env{Stdout: &out, Stderr: &errb}); code != 0 {
		t.Fatalf("keys rotate: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "bounded to the receipts up to seq 1") {
		t.Errorf("keys rotate says:\n%s", out.String())
	}
	e.start()
	set := nodeJWKS(t, e)
	if len(set.Set) != 2 || len(set.Retired) != 1 {
		t.Fatalf("the JWKS after a rotation has %d keys and %d rotations, want the old and the new key and one", len(set.Set), len(set.Retired))
	}
	// Tokens minted by the old key are refused; the agent refreshes from its grant.
	if task := alice.send(c, "", "after the rotation"); task.Status.State != a2a.TaskStateAuthRequired {
		t.Fatalf("an old-key delegation token gave %s", task.Status.State)
	}
	code, tok := alice.oauthForm(e.publicURL+"/pact/token", map[string][]string{
		"grant_type": {"urn:aether:params:oauth:grant-type:pact-grant"}, "brand": {"review"}})
	if code != 200 {
		t.Fatalf("refresh after rotation: %d %v", code, tok)
	}
	alice.setDelegation(tok["access_token"].(string))
	_, after := artifacts(t, alice.send(c, "", "after the rotation"))
	for name, jws := range map[string]string{"before": before, "after": after} {
		if _, err := receipts.VerifyOne(jws, set); err != nil {
			t.Errorf("receipt from %s the rotation: %v", name, err)
		}
	}
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	os.WriteFile(jwks, httpGetBody(t, e.publicURL+"/.well-known/jwks.json"), 0o600)
	e.stop()
	if code, out := verifyCLI(t, e.dataDir); code != 0 || !strings.Contains(out, "OK: 2 receipt(s)") || !strings.Contains(out, "1 rotation") {
		t.Fatalf("verify after a rotation: exit %d\n%s", code, out)
	}
	retiredKeyForgeries(t, e, stolen, jwks, set, before)
}

// retiredKeyForgeries signs receipts with the key a rotation retired, as whoever kept a copy of
// node.key would, and checks that no verifier takes them (T13).
func retiredKeyForgeries(t *testing.T, e *env, stolen, jwks string, set keys.History, genuine string) {
	old, err := keys.LoadOrCreate(stolen)
	if err != nil {
		t.Fatal(err)
	}
	rot := set.Retired[old.ID()]
	if !rot.HasSeq || rot.LastSeq != 1 {
		t.Fatalf("the rotation statement says %+v, want the old key's last receipt, seq 1", rot)
	}
	first, err := receipts.VerifyOne(genuine, set)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("T13 the agent refuses a receipt the retired key dated after its rotation", func(t *testing.T) {
		c := *first
		c.IssuedAt = jwt.NewNumericDate(rot.At.Add(time.Minute))
		jws, err := old.Sign(receipts.Typ, c)
		if err != nil {
			t.Fatal(err)
		}
		want := agentpkg.ReceiptExpect{Issuer: e.publicURL, TaskID: c.Task, Brand: "review", Agent: c.Agent}
		if _, err := agentpkg.VerifyReceipt(jws, set, want); err == nil || !strings.Contains(err.Error(), "which a rotation retired at") {
			t.Fatalf("got %v", err)
		}
	})
	// A whole chain appended to pact.sqlite with the stolen key, through the node's own ledger,
	// dated before the rotation: only its numbering gives it away.
	db, err := store.Open(filepath.Join(e.dataDir, "pact.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	l := receipts.NewLedger(db, old, e.publicURL, func() time.Time { return rot.At.Add(-time.Minute) })
	for i := range 3 {
		tr := receipts.Turn{ID: fmt.Sprintf("t_forged_%d", i), TaskID: first.Task, ContextID: first.Ctx, Brand: domain.BrandID(first.Brand),
			BrandScope: first.Scope, GrantID: domain.GrantID(first.Grant), Agent: first.Agent, Status: domain.TurnCompleted,
			StartedAt: rot.At.Add(-2 * time.Minute)}
		if err := l.Start(t.Context(), tr); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(t.Context(), tr); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	db.Close()
	const why = "receipt 3 (r_"
	t.Run("T13 the retired key appends a chain: receipts verify refuses it", func(t *testing.T) {
		code, out := verifyCLI(t, e.dataDir)
		if code != 1 || !strings.Contains(out, why) || !strings.Contains(out, "seq 3 is after the rotation that retired its key") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
	t.Run("T13 the retired key appends a chain: verify of its export with the node JWKS refuses it", func(t *testing.T) {
		export := filepath.Join(t.TempDir(), "receipts.jsonl")
		var out, errb bytes.Buffer
		if code := cli.Main([]string{"receipts", "export", "--data-dir", e.dataDir, "--out", export}, cli.Env{Stdout: &out, Stderr: &errb}); code != 0 {
			t.Fatalf("export: exit %d: %s", code, errb.String())
		}
		out.Reset()
		code := cli.Main([]string{"receipts", "verify", "--in", export, "--jwks", jwks}, cli.Env{Stdout: &out, Stderr: &errb})
		if code != 1 || !strings.Contains(out.String(), why) || !strings.Contains(out.String(), "a retired key signs nothing after its rotation") {
			t.Fatalf("exit %d:\n%s%s", code, out.String(), errb.String())
		}
	})
}

// TestVerifyForgedExportCLI: `aether receipts verify --in` refuses an export whose lines show
// what Go's decoding would not read (T12), and names the line.
func TestVerifyForgedExportCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.agent("alice")
	alice.setDelegation(e.delegate(t, alice, "review"))
	c := alice.client("review", a2a.TransportProtocolJSONRPC)
	for range 3 {
		alice.send(c, "", "turn")
	}
	e.stop()
	export := filepath.Join(t.TempDir(), "receipts.jsonl")
	var out, errb bytes.Buffer
	if code := cli.Main([]string{"receipts", "export", "--data-dir", e.dataDir, "--out", export}, cli.Env{Stdout: &out, Stderr: &errb}); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errb.String())
	}
	data, err := os.ReadFile(export)
	if err != nil {
		t.Fatal(err)
	}
	verifyIn := func(t *testing.T, content string) (int, string) {
		path := filepath.Join(t.TempDir(), "edited.jsonl")
		os.WriteFile(path, []byte(content), 0o600)
		var out, errb bytes.Buffer
		code := cli.Main([]string{"receipts", "verify", "--in", path, "--data-dir", e.dataDir}, cli.Env{Stdout: &out, Stderr: &errb})
		return code, out.String() + errb.String()
	}
	if code, out := verifyIn(t, string(data)); code != 0 || !strings.Contains(out, "OK: 3 receipt(s)") {
		t.Fatalf("the export as written: exit %d\n%s", code, out)
	}
	lines := strings.SplitAfter(string(data), "\n")
	for _, tc := range []struct{ name, old, new, why string }{
		{"T12 the status shown failed, then STATUS completed", `"status":"completed",`, `"status":"failed","STATUS":"completed",`, `member "STATUS"`},
		{"T12 a case variant Go reads as the name", `"status":"completed",`, `"status":"failed","ſtatus":"completed",`, `member "ſtatus"`},
		{"T12 an unknown member in the claims", `"status":"completed",`, `"status":"completed","refunded":true,`, `member "refunded"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(lines[1], tc.old) {
				t.Fatalf("line 2 has no %s: %s", tc.old, lines[1])
			}
			edited := append([]string{}, lines...)
			edited[1] = strings.Replace(lines[1], tc.old, tc.new, 1)
			code, out := verifyIn(t, strings.Join(edited, ""))
			if code != 1 || !strings.Contains(out, "FAILED after 1 good receipt(s): receipt 2 (r_") ||
				!strings.Contains(out, "line 2: the claims shown differ from the signed claims") || !strings.Contains(out, tc.why) {
				t.Fatalf("exit %d:\n%s", code, out)
			}
		})
	}
}
