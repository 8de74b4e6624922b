package agent

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/glebarez/go-sqlite" // raw access to the file, as whoever holds the data dir has
	"golang.org/x/mod/sumdb/note"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/internal/loopport"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/receipts"
)

// The agent holds the node to its receipts log (docs/threats.md, L1–L4): a node that rolls
// its store back, rewrites an old receipt, or shows two agents two logs is caught by the next
// answer (or the next peer checkpoint), with two signed checkpoints as evidence, and is not
// called again.

// restartable is a test node whose data dir outlives it: stopped, edited and served again on
// the same address, as its owner could.
type restartable struct {
	t    *testing.T
	dir  string
	addr string
	n    *testNode
	stop func()
}

func newRestartable(t *testing.T, dir string) *restartable {
	t.Helper()
	ln := listenRestartable(t)
	r := &restartable{t: t, dir: dir, addr: ln.Addr().String()}
	r.n, r.stop = startNodeIn(t, dir, ln)
	return r
}

// restartPorts are this package's ports a restart can bind again (loopport).
var restartPorts = loopport.New(16000, 4000)

// listenRestartable listens on a port a restart can bind again.
func listenRestartable(t *testing.T) net.Listener { return restartPorts.Listen(t) }

func (r *restartable) restart() { r.restartAs("http://" + r.addr) }

// restartAs starts the node again with the publicUrl pub, a spelling of its address.
func (r *restartable) restartAs(pub string) {
	r.t.Helper()
	r.stop()
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.n, r.stop = startNodeAt(r.t, r.dir, ln, pub)
}

// turn runs one agent turn from agentDir; it must verify.
func (r *restartable) turn(agentDir string) Result {
	r.t.Helper()
	res, err := Run(context.Background(), r.n.options(r.t, agentDir, io.Discard))
	if err != nil {
		r.t.Fatalf("turn: %v", err)
	}
	return res
}

// wantCaught checks err is a LogError whose two checkpoints are both signed by the node key
// and both of one origin, of sizes held and got.
func wantCaught(t *testing.T, err error, node string, key keys.Set, held, got int64, reason string) {
	t.Helper()
	var le *LogError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v, want the node caught with evidence", err)
	}
	if le.Node != node || !strings.Contains(le.Reason, reason) {
		t.Fatalf("caught %s for %q, want %s for %q", le.Node, le.Reason, node, reason)
	}
	a, errA := receipts.OpenCheckpoint([]byte(le.Held), key, "")
	b, errB := receipts.OpenCheckpoint([]byte(le.Got), key, a.Origin)
	if errA != nil || errB != nil || a.Size != held || b.Size != got {
		t.Fatalf("evidence: %+v (%v), %+v (%v); want signed checkpoints of %d and %d", a, errA, b, errB, held, got)
	}
}

// testLogCheck is the check of the node at publicURL with keys h from the agent folder dir.
func testLogCheck(t *testing.T, publicURL string, h keys.History, dir string) *LogCheck {
	t.Helper()
	lc, err := NewLogCheck(&Client{}, publicURL, h, dir)
	if err != nil {
		t.Fatal(err)
	}
	return lc
}

func loadKey(t *testing.T, dir string) keys.Set {
	k, err := keys.LoadOrCreate(filepath.Join(dir, "node-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return k.Set()
}

// wantRefused checks a distrusted node gets no more turns.
func wantRefused(t *testing.T, r *restartable, agentDir string) {
	t.Helper()
	before := r.n.runner.count()
	_, err := Run(context.Background(), r.n.options(t, agentDir, io.Discard))
	var le *LogError
	if !errors.As(err, &le) || r.n.runner.count() != before {
		t.Fatalf("the distrusted node was called again: err %v, %d turns ran", err, r.n.runner.count()-before)
	}
}

func TestAgentHoldsTheNodeToItsLog(t *testing.T) {
	t.Parallel()
	t.Run("L1 store rolled back three receipts: caught on the next turn", func(t *testing.T) {
		t.Parallel()
		r := newRestartable(t, t.TempDir())
		agentDir := t.TempDir()
		for range 2 {
			r.turn(agentDir)
		}
		r.stop()
		backup := filepath.Join(t.TempDir(), "pact.sqlite")
		copyFile(t, filepath.Join(r.dir, "pact.sqlite"), backup)
		r.restart()
		for range 3 {
			r.turn(agentDir)
		}
		r.stop()
		copyFile(t, backup, filepath.Join(r.dir, "pact.sqlite"))
		os.Remove(filepath.Join(r.dir, "pact.sqlite-wal"))
		os.Remove(filepath.Join(r.dir, "pact.sqlite-shm"))
		r.restart()
		_, err := Run(context.Background(), r.n.options(t, agentDir, io.Discard))
		wantCaught(t, err, r.n.publicURL, loadKey(t, r.dir), 5, 3, "shrank")
		wantRefused(t, r, agentDir)
	})
	t.Run("L3 old receipt rewritten and the chain and log re-signed: caught on the next turn", func(t *testing.T) {
		t.Parallel()
		r := newRestartable(t, t.TempDir())
		agentDir := t.TempDir()
		for range 4 {
			r.turn(agentDir)
		}
		r.stop()
		rewrite(t, r.dir, 2)
		r.restart()
		_, err := Run(context.Background(), r.n.options(t, agentDir, io.Discard))
		// The node's own verification finds nothing wrong: only a checkpoint held elsewhere can.
		rep, verr := receipts.VerifyDB(context.Background(), r.n.db, keys.History{Set: loadKey(t, r.dir)}, receipts.VerifyOptions{})
		if verr != nil || !rep.OK || rep.LogSize != 5 {
			t.Fatalf("verify of the rewritten store: %+v %v", rep, verr)
		}
		wantCaught(t, err, r.n.publicURL, loadKey(t, r.dir), 4, 5, "does not extend")
		wantRefused(t, r, agentDir)
	})
	t.Run("L2 two data dirs behind one key show two agents two logs: caught by the peer checkpoint", func(t *testing.T) {
		t.Parallel()
		a := newRestartable(t, t.TempDir())
		agentA, agentB := t.TempDir(), t.TempDir()
		a.turn(agentA)
		a.stop()
		dirB := t.TempDir()
		for _, f := range []string{"pact.sqlite", "node-key.pem"} {
			copyFile(t, filepath.Join(a.dir, f), filepath.Join(dirB, f))
		}
		a.restart()
		b := newRestartable(t, dirB)
		a.turn(agentA)
		b.turn(agentB)
		peer, err := HeldCheckpoint(agentB, b.n.publicURL, keys.History{Set: loadKey(t, dirB)})
		if err != nil || peer == "" {
			t.Fatalf("agent B holds %q (%v)", peer, err)
		}
		o := a.n.options(t, agentA, io.Discard)
		o.PeerCheckpoint = []byte(peer)
		before := a.n.runner.count()
		_, err = Run(context.Background(), o)
		wantCaught(t, err, a.n.publicURL, loadKey(t, a.dir), 2, 2, "two different logs of 2 receipts")
		if a.n.runner.count() != before {
			t.Fatal("the turn ran on a node caught forking")
		}
		wantRefused(t, a, agentA)
	})
}

// A node that rolls its log back cannot hide it behind another spelling of its publicUrl, nor
// behind another address: the agent holds a log by its key and origin (docs/threats.md L10).
func TestRenamedURLHidesNoRollback(t *testing.T) {
	t.Parallel()
	rollback := func(t *testing.T, first, then string) (*restartable, string) {
		r := newRestartable(t, t.TempDir())
		_, port, _ := net.SplitHostPort(r.addr)
		r.restartAs(first + port)
		agentDir := t.TempDir()
		for range 2 {
			r.turn(agentDir)
		}
		r.stop()
		backup := filepath.Join(t.TempDir(), "pact.sqlite")
		copyFile(t, filepath.Join(r.dir, "pact.sqlite"), backup)
		r.restartAs(first + port)
		for range 3 {
			r.turn(agentDir)
		}
		r.stop()
		copyFile(t, backup, filepath.Join(r.dir, "pact.sqlite"))
		os.Remove(filepath.Join(r.dir, "pact.sqlite-wal"))
		os.Remove(filepath.Join(r.dir, "pact.sqlite-shm"))
		r.restartAs(then + port)
		return r, agentDir
	}
	t.Run("L10 rolled back and served at localhost instead of 127.0.0.1: caught on the next turn", func(t *testing.T) {
		t.Parallel()
		r, agentDir := rollback(t, "http://127.0.0.1:", "http://localhost:")
		_, err := Run(context.Background(), r.n.options(t, agentDir, io.Discard))
		_, port, _ := net.SplitHostPort(r.addr)
		wantCaught(t, err, "http://localhost:"+port, loadKey(t, r.dir), 5, 3, "shrank")
		wantRefused(t, r, agentDir)
	})
}

// Another spelling of the node's URL (upper case, its default port, a trailing dot or slash)
// is the same node: a fork shown under it is caught, not taken as a first meeting (L10). A
// node key that signs two origins is a contradiction whatever the address.
func TestHeldLogSpellings(t *testing.T) {
	t.Parallel()
	_, priv, _ := ed25519.GenerateKey(nil)
	key := keys.FromPrivate(priv)
	h := keys.History{Set: key.Set()}
	checkpoint := func(origin string, size int64, root byte) []byte {
		text := fmt.Sprintf("%s\n%d\n%s\n", origin, size, base64.StdEncoding.EncodeToString(append(make([]byte, 31), root)))
		n, err := note.Sign(&note.Note{Text: text}, key.NoteSigner(origin))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, spelt := range []string{"HTTPS://Node.Example", "https://node.example:443", "https://node.example.", "https://NODE.EXAMPLE.:443/"} {
		t.Run("L10 a fork shown under "+spelt, func(t *testing.T) {
			dir := t.TempDir()
			if err := testLogCheck(t, "https://node.example", h, dir).Before(context.Background(), checkpoint("node.example/log/v2", 4, 1)); err != nil {
				t.Fatal(err)
			}
			err := testLogCheck(t, spelt, h, dir).Before(context.Background(), checkpoint("node.example/log/v2", 4, 2))
			var le *LogError
			if !errors.As(err, &le) || !strings.Contains(le.Reason, "two different logs of 4 receipts") {
				t.Fatalf("err = %v, want the fork caught", err)
			}
		})
	}
	t.Run("L10 one key signing a second log at another address", func(t *testing.T) {
		dir := t.TempDir()
		if err := testLogCheck(t, "https://node.example", h, dir).Before(context.Background(), checkpoint("node.example/log/v2", 4, 1)); err != nil {
			t.Fatal(err)
		}
		err := testLogCheck(t, "https://other.example", h, dir).Before(context.Background(), checkpoint("other.example/log/v2", 1, 1))
		var le *LogError
		if !errors.As(err, &le) || !strings.Contains(le.Reason, "two logs") {
			t.Fatalf("err = %v, want the key's second log caught", err)
		}
	})
	t.Run("L10 a fork shown at another address", func(t *testing.T) {
		dir := t.TempDir()
		if err := testLogCheck(t, "https://node.example", h, dir).Before(context.Background(), checkpoint("node.example/log/v2", 4, 1)); err != nil {
			t.Fatal(err)
		}
		err := testLogCheck(t, "https://moved.example", h, dir).Before(context.Background(), checkpoint("node.example/log/v2", 4, 2))
		var le *LogError
		if !errors.As(err, &le) || !strings.Contains(le.Reason, "two different logs of 4 receipts") {
			t.Fatalf("err = %v, want the fork caught", err)
		}
	})
	t.Run("L9 a checkpoint of 2^62 receipts ends the check instead of hanging it", func(t *testing.T) {
		dir := t.TempDir()
		lc := testLogCheck(t, "https://node.example", h, dir)
		if err := lc.Before(context.Background(), checkpoint("node.example/log/v2", 4, 1)); err != nil {
			t.Fatal(err)
		}
		huge := checkpoint("node.example/log/v2", 1<<62, 1)
		done := make(chan [2]error)
		go func() {
			_, err := lc.CheckAnswer(context.Background(), receipts.ProofHeader+"\nindex 3\n\n"+string(huge), "a.b.c", 4)
			done <- [2]error{lc.Before(context.Background(), huge), err}
		}()
		for i, err := range <-done {
			if err == nil || !strings.Contains(err.Error(), "no log is that large") {
				t.Errorf("check %d: %v, want the size refused", i, err)
			}
		}
	})
	t.Run("a new key at the address of a log held is not a fresh start", func(t *testing.T) {
		dir := t.TempDir()
		if err := testLogCheck(t, "https://node.example", h, dir).Before(context.Background(), checkpoint("node.example/log/v2", 4, 1)); err != nil {
			t.Fatal(err)
		}
		_, priv, _ := ed25519.GenerateKey(nil)
		other := keys.History{Set: keys.FromPrivate(priv).Set()}
		if err := testLogCheck(t, "https://node.example", other, dir).Before(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "no longer signs with the key") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("L7 the move to commitments: the log moved to holds every receipt of the one left", func(t *testing.T) {
		for _, c := range []struct {
			moved int64
			why   string
		}{{6, ""}, {4, "moved to commitments as one of 4: receipts were lost"}} {
			dir := t.TempDir()
			if err := testLogCheck(t, "https://node.example", h, dir).Before(context.Background(), checkpoint("node.example/log", 5, 1)); err != nil {
				t.Fatal(err)
			}
			err := testLogCheck(t, "https://node.example", h, dir).Before(context.Background(), checkpoint("node.example/log/v2", c.moved, 1))
			st, _ := LoadLogs(dir)
			switch {
			case c.why == "" && (err != nil || st.Logs[0].Origin != "node.example/log/v2"):
				t.Fatalf("moved to a log of %d: %v, holding %+v", c.moved, err, st.Logs[0])
			case c.why != "" && (err == nil || !strings.Contains(err.Error(), c.why)):
				t.Fatalf("moved to a log of %d: %v, want %q", c.moved, err, c.why)
			}
		}
	})
	t.Run("L12 a checkpoint with 99 extra signature lines is kept with the node's alone", func(t *testing.T) {
		dir := t.TempDir()
		signed := checkpoint("node.example/log/v2", 4, 1)
		for i := range 99 {
			signed = fmt.Appendf(signed, "— w%d.example %s\n", i, base64.StdEncoding.EncodeToString(make([]byte, 100)))
		}
		if err := testLogCheck(t, "https://node.example", h, dir).Before(context.Background(), signed); err != nil {
			t.Fatal(err)
		}
		st, err := LoadLogs(dir)
		if err != nil || len(st.Logs) != 1 || st.Logs[0].Checkpoint != string(checkpoint("node.example/log/v2", 4, 1)) {
			t.Fatalf("held %+v (%v), want the checkpoint with the node's signature only", st, err)
		}
		big := append(checkpoint("node.example/log/v2", 5, 1), strings.Repeat("— w.example "+base64.StdEncoding.EncodeToString(make([]byte, 100))+"\n", 70000)...)
		if err := testLogCheck(t, "https://node.example", h, dir).Before(context.Background(), big); err == nil || !strings.Contains(err.Error(), "over 16384") {
			t.Fatalf("a 10 MB checkpoint: %v, want it refused unread", err)
		}
		if fi, err := os.Stat(filepath.Join(dir, logsFile)); err != nil || fi.Size() > 2048 {
			t.Fatalf("logs.json: %v bytes (%v)", fi.Size(), err)
		}
	})
	for _, c := range []struct{ in, want string }{
		{"HTTPS://Node.Example.:443/", "https://node.example"}, {"http://127.0.0.1:80", "http://127.0.0.1"},
		{"http://[::1]:8080/a/", "http://[::1]:8080/a"}, {"https://node.example:8443", "https://node.example:8443"},
	} {
		if got, err := NodeURL(c.in); got != c.want || err != nil {
			t.Errorf("NodeURL(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// rewrite is whoever holds the data dir (and so the node key) changing receipt seq of a
// stopped node: the receipt says the turn failed, every later receipt is signed again on the
// new chain, and the log is dropped for the node to rebuild from the rewritten receipts. The
// store's own checks all pass on it.
func rewrite(t *testing.T, dir string, seq int64) {
	t.Helper()
	k, err := keys.LoadOrCreate(filepath.Join(dir, "node-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "pact.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	exec := func(q string, args ...any) {
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, tr := range []string{"receipts_no_update", "log_hashes_no_delete", "log_checkpoints_no_delete"} {
		exec("DROP TRIGGER " + tr)
	}
	var prev string
	if err := db.QueryRow(`SELECT hash FROM receipts WHERE seq = ?`, seq-1).Scan(&prev); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(`SELECT seq, jws FROM receipts WHERE seq >= ? ORDER BY seq`, seq)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		seq int64
		jws string
	}
	var all []row
	for rows.Next() {
		var r row
		rows.Scan(&r.seq, &r.jws)
		all = append(all, r)
	}
	rows.Close()
	for _, r := range all {
		payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(r.jws, ".")[1])
		var c receipts.Claims
		if err := json.Unmarshal(payload, &c); err != nil {
			t.Fatal(err)
		}
		c.Prev = prev
		if r.seq == seq {
			c.Status, c.Reason, c.Exit = "failed", "rewritten", 1
		}
		jws, err := k.Sign(receipts.Typ, &c)
		if err != nil {
			t.Fatal(err)
		}
		hash := receipts.HashBytes([]byte(jws))
		exec(`UPDATE receipts SET jws = ?, hash = ?, prev_hash = ?, status = ?, reason = ?, exit_code = ? WHERE seq = ?`,
			jws, hash, prev, c.Status, c.Reason, c.Exit, r.seq)
		prev = hash
	}
	// The mark as the store writes it (store.Checkpoint's JSON).
	exec(`UPDATE meta SET value = ? WHERE key = 'receipts.high_water'`, fmt.Sprintf(`{"seq":%d,"hash":"%s"}`, all[len(all)-1].seq, prev))
	exec(`DELETE FROM log_hashes`)
	exec(`DELETE FROM log_checkpoints`)
}

// A peer checkpoint not signed by the node's key is refused, and proves nothing against it.
func TestPeerCheckpointOfAnotherKey(t *testing.T) {
	t.Parallel()
	r := newRestartable(t, t.TempDir())
	agentDir := t.TempDir()
	r.turn(agentDir)
	held, _ := HeldCheckpoint(agentDir, r.n.publicURL, keys.History{Set: loadKey(t, r.dir)})
	text, _, _ := strings.Cut(held, "\n\n")
	_, priv, _ := ed25519.GenerateKey(nil)
	other := keys.FromPrivate(priv)
	forged, err := note.Sign(&note.Note{Text: text + "\n"}, other.NoteSigner(strings.Split(text, "\n")[0]))
	if err != nil {
		t.Fatal(err)
	}
	o := r.n.options(t, agentDir, io.Discard)
	o.PeerCheckpoint = forged
	_, err = Run(context.Background(), o)
	var le *LogError
	if err == nil || errors.As(err, &le) || !strings.Contains(err.Error(), "not signed by the node key") {
		t.Fatalf("err = %v, want the peer checkpoint refused without blaming the node", err)
	}
	r.turn(agentDir) // still trusted
}

// A proof that does not put the receipt in a checkpoint the node key signed is refused (L4).
func TestAnswerProofForged(t *testing.T) {
	t.Parallel()
	r := newRestartable(t, t.TempDir())
	agentDir := t.TempDir()
	first := r.turn(agentDir)
	second := r.turn(agentDir)
	out1, out2 := ReadOutcome(first.Task), ReadOutcome(second.Task)
	lc := testLogCheck(t, r.n.publicURL, keys.History{Set: loadKey(t, r.dir)}, agentDir)
	if _, err := lc.CheckAnswer(context.Background(), out2.ReceiptProof, out2.ReceiptJWS, second.Receipt.Seq); err != nil {
		t.Fatalf("the genuine proof: %v", err)
	}
	head, cp, _ := strings.Cut(out2.ReceiptProof, "\n\n")
	lines := strings.Split(head, "\n")
	zero := base64.StdEncoding.EncodeToString(make([]byte, 32))
	_, priv, _ := ed25519.GenerateKey(nil)
	text, _, _ := strings.Cut(cp, "\n\n")
	resigned, _ := note.Sign(&note.Note{Text: text + "\n"}, keys.FromPrivate(priv).NoteSigner(lines0(text)))
	for name, c := range map[string]struct{ proof, jws, want string }{
		"L4 a proof hash changed":                 {strings.Join(append(lines[:2:2], zero), "\n") + "\n\n" + cp, out2.ReceiptJWS, "is not in the log"},
		"L4 the proof of another receipt":         {out1.ReceiptProof, out2.ReceiptJWS, "is not that of receipt 2"},
		"L4 the checkpoint signed by another key": {head + "\n\n" + string(resigned), out2.ReceiptJWS, "not signed by the node key"},
		"L4 no proof":                             {"", out2.ReceiptJWS, "without its tlog-proof"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := lc.CheckAnswer(context.Background(), c.proof, c.jws, second.Receipt.Seq); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// The node serves its log read-only as C2SP tlog-tiles, cacheable; its entries are the
// receipts' commitments, and nothing it serves tells what a receipt says (L7).
func TestLogServedAsTiles(t *testing.T) {
	t.Parallel()
	r := newRestartable(t, t.TempDir())
	agentDir := t.TempDir()
	var jws []string
	var first Result
	for i := range 3 {
		res := r.turn(agentDir)
		if i == 0 {
			first = res
		}
		jws = append(jws, res.ReceiptJWS)
	}
	var served []byte
	get := func(path string) (int, http.Header, []byte) {
		resp, err := http.Get(r.n.publicURL + "/log/" + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		served = append(served, body...)
		return resp.StatusCode, resp.Header, body
	}
	code, h, body := get("checkpoint")
	cp, err := receipts.OpenCheckpoint(body, loadKey(t, r.dir), strings.TrimPrefix(r.n.publicURL, "http://")+"/log/v2")
	if code != 200 || err != nil || cp.Size != 3 || h.Get("Content-Type") != "text/plain; charset=utf-8" || h.Get("Cache-Control") != "public, max-age=5" {
		t.Fatalf("checkpoint: %d %v %+v %v", code, h, cp, err)
	}
	code, h, body = get("tile/0/000.p/3")
	if code != 200 || len(body) != 3*32 || h.Get("Cache-Control") != "public, max-age=60" || h.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("partial tile: %d %v %d bytes", code, h, len(body))
	}
	for i, j := range jws {
		if leaf := receipts.LeafHash(cp.Origin, j); string(body[i*32:(i+1)*32]) != string(leaf[:]) {
			t.Fatalf("tile hash %d is not receipt %d's leaf", i, i+1)
		}
	}
	t.Run("L7 the public log serves commitments, never what a receipt says", func(t *testing.T) {
		code, _, body := get("tile/entries/000.p/3")
		var entries []string
		for len(body) >= 2 && code == 200 {
			n := int(body[0])<<8 | int(body[1])
			entries, body = append(entries, string(body[2:2+n])), body[2+n:]
		}
		if code != 200 || len(entries) != 3 {
			t.Fatalf("entry bundle: %d, %d entries", code, len(entries))
		}
		for i, j := range jws {
			if sum := sha256.Sum256([]byte(j)); entries[i] != string(sum[:]) {
				t.Fatalf("entry %d is not the SHA-256 of receipt %d: %x", i, i+1, entries[i])
			}
		}
		claims, _ := json.Marshal(ReadOutcome(first.Task).ReceiptData)
		for _, secret := range []string{DefaultSubject, "review", strings.Split(jws[0], ".")[1][:40], string(claims[:40])} {
			if strings.Contains(string(served), secret) {
				t.Errorf("the public log serves %q", secret)
			}
		}
	})
	t.Run("L8 a tile whose N·256 overflows is not tile 0: 404", func(t *testing.T) {
		for _, p := range []string{"tile/0/x072/x057/x594/x037/x927/936.p/1", "tile/entries/x072/x057/x594/x037/x927/936.p/1"} {
			if code, _, body := get(p); code != http.StatusNotFound {
				t.Errorf("%s: %d (%d bytes), want 404", p, code, len(body))
			}
		}
	})
	for _, p := range []string{"tile/0/000", "tile/0/000.p/4", "tile/1/000.p/1", "tile/entries/000.p/4", "tile/8/0/000.p/3", "tile/data/000.p/3", "tile/0/0.p/3", "nothing"} {
		if code, _, _ := get(p); code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, code)
		}
	}
	if resp, err := http.Post(r.n.publicURL+"/log/checkpoint", "text/plain", nil); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST checkpoint: %v %v", resp.StatusCode, err)
	}
}

// A full tile never changes: it is served as immutable, and the agent's consistency proof
// reads it across a tile boundary.
func TestLogFullTiles(t *testing.T) {
	t.Parallel()
	r := newRestartable(t, t.TempDir())
	agentDir := t.TempDir()
	first := r.turn(agentDir)
	ctx := context.Background()
	for i := range 300 {
		tr := receipts.Turn{ID: fmt.Sprintf("t_bulk%d", i), TaskID: fmt.Sprintf("task-%d", i), ContextID: "ctx", Brand: "review",
			BrandScope: "review:read_only", GrantID: domain.GrantID(first.Receipt.Grant), Agent: first.Receipt.Agent, PolicyHash: "p",
			Status: "completed", StartedAt: time.Now()}
		if err := r.n.ledger.Start(ctx, tr); err != nil {
			t.Fatal(err)
		}
		if _, err := r.n.ledger.Append(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Get(r.n.publicURL + "/log/tile/0/000")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(body) != 256*32 || resp.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" {
		t.Fatalf("full tile: %d, %d bytes, %q", resp.StatusCode, len(body), resp.Header.Get("Cache-Control"))
	}
	// The agent held the checkpoint of 1 receipt; the next answer's is of 302.
	res := r.turn(agentDir)
	if res.Checkpoint == nil || res.Checkpoint.Size != 302 {
		t.Fatalf("checkpoint %+v", res.Checkpoint)
	}
}

// logs.json as agents wrote it before logs were known by key and origin is moved on its first
// run: the node it held keeps being held to its log.
func TestOldLogsFileMoved(t *testing.T) {
	t.Parallel()
	r := newRestartable(t, t.TempDir())
	agentDir := t.TempDir()
	r.turn(agentDir)
	st, err := LoadLogs(agentDir)
	if err != nil || len(st.Logs) != 1 {
		t.Fatalf("%+v %v", st, err)
	}
	old, _ := json.Marshal(map[string]any{"nodes": map[string]any{r.n.publicURL: map[string]string{"checkpoint": st.Logs[0].Checkpoint}}})
	if err := os.WriteFile(filepath.Join(agentDir, logsFile), old, 0o600); err != nil {
		t.Fatal(err)
	}
	res := r.turn(agentDir)
	st, err = LoadLogs(agentDir)
	if err != nil || len(st.Logs) != 1 || len(st.Logs[0].Keys) != 1 || res.Checkpoint.Size != 2 || lines0(st.Logs[0].Checkpoint) != res.Checkpoint.Origin {
		t.Fatalf("after the move: %+v (%v), checkpoint %+v", st.Logs, err, res.Checkpoint)
	}
	tok := &Token{AccessToken: "t", Scope: "s"}
	k := TokenKey{Node: r.n.publicURL, Brand: "review", Issuer: "https://issuer.example", Subject: "bob"}
	if err := SaveToken(agentDir, k, tok); err != nil {
		t.Fatal(err)
	}
	if got, err := LoadToken(agentDir, k); err != nil || got == nil || got.AccessToken != "t" {
		t.Fatalf("token kept: %+v (%v)", got, err)
	}
}
