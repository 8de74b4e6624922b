package receipts

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/store"
)

// Every receipt is a leaf of the log in its own commit, with a proof against a checkpoint the
// node key signed; verify rebuilds the tree and checks every checkpoint.
func TestLogProofs(t *testing.T) {
	e := newEnv(t)
	recs := e.run(0, 40, 6)
	set := e.key.Set()
	for i, r := range recs {
		proof := r.Proof()
		if !strings.HasPrefix(proof, ProofHeader+"\nindex ") {
			t.Fatalf("receipt of turn %d: proof %q", i, proof)
		}
		cp, err := VerifyProof(proof, r.JWS, r.Seq, set)
		if err != nil {
			t.Fatalf("receipt %d: %v", r.Seq, err)
		}
		if cp.Origin != "node.example/log/v2" || cp.Size < r.Seq {
			t.Fatalf("receipt %d: checkpoint %+v", r.Seq, cp)
		}
		if _, err := VerifyProof(proof, r.JWS+"x", r.Seq, set); err == nil {
			t.Fatalf("receipt %d: a proof verifies another receipt", r.Seq)
		}
	}
	rep := e.verify(VerifyOptions{})
	wantOK(t, rep, 40)
	if rep.LogSize != 40 || rep.Checkpoints < 1 || rep.Origin != "node.example/log/v2" {
		t.Fatalf("log: %+v", rep)
	}
	size, note, ok, err := e.db.LatestCheckpoint(context.Background())
	if err != nil || !ok || size != 40 {
		t.Fatalf("latest checkpoint %d %v %v", size, ok, err)
	}
	cp, err := OpenCheckpoint(note, set, "node.example/log/v2")
	if err != nil {
		t.Fatal(err)
	}
	root, err := tlog.TreeHash(40, e.db.LogHashes(context.Background()))
	if err != nil || root != cp.Root {
		t.Fatalf("root %v, checkpoint %v (%v)", root, cp.Root, err)
	}
}

// An export carries each receipt's proof; verify --in checks them (L4).
func TestExportProofs(t *testing.T) {
	e := newEnv(t)
	e.run(0, 12, 3)
	ctx := context.Background()
	var buf bytes.Buffer
	if err := e.l.Export(ctx, store.ReceiptFilter{}, &buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	for i, l := range lines {
		if !strings.Contains(l, `"proof":"c2sp.org/tlog-proof@v1\nindex `+strconv.Itoa(i)+`\n`) {
			t.Fatalf("line %d has no proof: %s", i+1, l)
		}
	}
	wantOK(t, verifyLines(t, lines, VerifyOptions{}), 12)
	edited := func(i int, line string) []string {
		out := append([]string{}, lines...)
		out[i] = line
		return out
	}
	proofOf := func(line string) string {
		var l exportLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		return l.Proof
	}
	withProof := func(line, proof string) string {
		var l exportLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		l.Proof = proof
		var b bytes.Buffer
		if err := lineEncoder(&b).Encode(l); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSuffix(b.String(), "\n")
	}
	t.Run("L4 proof of another receipt", func(t *testing.T) {
		rep := verifyLines(t, edited(4, withProof(lines[4], proofOf(lines[5]))), VerifyOptions{})
		wantProblem(t, rep, 5, "", "its log proof is for leaf 5, not 4")
	})
	t.Run("L4 proof hash changed", func(t *testing.T) {
		p := proofOf(lines[4])
		head, cp, _ := strings.Cut(p, "\n\n")
		hl := strings.Split(head, "\n")
		hl[2] = base64.StdEncoding.EncodeToString(make([]byte, 32))
		rep := verifyLines(t, edited(4, withProof(lines[4], strings.Join(hl, "\n")+"\n\n"+cp)), VerifyOptions{})
		wantProblem(t, rep, 5, "", "does not put it in the checkpoint of size 12")
	})
	t.Run("L4 checkpoint signed by another key", func(t *testing.T) {
		p := proofOf(lines[4])
		head, cp, _ := strings.Cut(p, "\n\n")
		text, _, _ := strings.Cut(cp, "\n\n")
		forged, err := note.Sign(&note.Note{Text: text + "\n"}, testKey(9).NoteSigner("node.example/log/v2"))
		if err != nil {
			t.Fatal(err)
		}
		rep := verifyLines(t, edited(4, withProof(lines[4], head+"\n\n"+string(forged))), VerifyOptions{})
		wantProblem(t, rep, 5, "", "not signed by the node key")
	})
}

// verify rebuilds the log from the receipts and refuses a stored log the node would serve
// proofs from that is not theirs (L5).
func TestTamperedLogDetected(t *testing.T) {
	base, _ := chainFile(t, 20)
	set := only(testKey(1).Set())
	wantOK(t, verifyDB(t, tampered(t, base), set, VerifyOptions{}), 20)
	root := func(size int64, origin string, key *keys.Key) string {
		var h tlog.Hash
		h[0] = 1
		n, err := note.Sign(&note.Note{Text: CheckpointText(origin, size, h)}, key.NoteSigner(origin))
		if err != nil {
			t.Fatal(err)
		}
		return sqlQuote(string(n))
	}
	t.Run("L5 a stored hash changed", func(t *testing.T) {
		db := tampered(t, base, `UPDATE log_hashes SET hash = zeroblob(32) WHERE idx = 7`)
		wantProblem(t, verifyDB(t, db, set, VerifyOptions{}), 5, "", "stored hashes were changed")
	})
	t.Run("L5 a checkpoint signing another root, with the node key", func(t *testing.T) {
		db := tampered(t, base, `DELETE FROM log_checkpoints WHERE size = 20`,
			`INSERT INTO log_checkpoints (size, note) VALUES (20, `+root(20, "node.example/log/v2", testKey(1))+`)`)
		wantProblem(t, verifyDB(t, db, set, VerifyOptions{}), 20, "", "signs a root the receipts do not make")
	})
	t.Run("L5 a checkpoint signed by another key", func(t *testing.T) {
		db := tampered(t, base, `INSERT INTO log_checkpoints (size, note) VALUES (21, `+root(21, "node.example/log/v2", testKey(9))+`)`)
		wantProblem(t, verifyDB(t, db, set, VerifyOptions{}), 21, "", "not signed by the node key")
	})
	t.Run("L5 a checkpoint of another log", func(t *testing.T) {
		db := tampered(t, base, `INSERT INTO log_checkpoints (size, note) VALUES (21, `+root(21, "elsewhere.example/log/v2", testKey(1))+`)`)
		wantProblem(t, verifyDB(t, db, set, VerifyOptions{}), 21, "", `not "node.example/log/v2"`)
	})
}

// A store whose log was made of the receipts' JWS (before migration 7) serves nothing of it
// once upgraded, keeps that log's newest checkpoint, and rebuilds the log from commitments
// under the origin with "/v2" at its next receipt (docs/threats.md L7).
func TestLogMovesToCommitments(t *testing.T) {
	e := newEnv(t)
	e.run(0, 5, 1)
	rows := e.rows()
	e.close()
	// The log as the code before migration 7 left it (and without migration 8's table).
	old := &memTree{}
	for i, r := range rows {
		if _, err := old.add(int64(i), []byte(r.JWS)); err != nil {
			t.Fatal(err)
		}
	}
	root, err := tlog.TreeHash(5, old)
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := note.Sign(&note.Note{Text: CheckpointText("node.example/log", 5, root)}, e.key.NoteSigner("node.example/log"))
	if err != nil {
		t.Fatal(err)
	}
	stmts := append([]string{}, untrigger...)
	stmts = append(stmts, `DELETE FROM log_hashes`, `DELETE FROM log_checkpoints`, `DROP TABLE received_receipts`, `PRAGMA user_version = 6`,
		`UPDATE meta SET value = 'node.example/log' WHERE key = 'log.origin'`,
		`INSERT INTO log_checkpoints (size, note) VALUES (5, `+sqlQuote(string(legacy))+`)`)
	for i, h := range old.hashes {
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO log_hashes (idx, hash) VALUES (%d, X'%x')`, i, h[:]))
	}
	rawExec(t, e.path, stmts...)

	t.Run("L7 an upgraded node serves nothing of the log made of the receipts", func(t *testing.T) {
		e.open()
		ctx := context.Background()
		if _, ok, err := e.l.LatestCheckpoint(ctx); ok || err != nil {
			t.Fatalf("a checkpoint is served before the log is rebuilt (%v)", err)
		}
		if _, err := e.l.Tile(ctx, tlog.Tile{H: TileHeight, L: -1, N: 0, W: 5}); !errors.Is(err, ErrNoTile) {
			t.Fatalf("entry bundle: %v", err)
		}
		moved, _, err := e.db.GetMeta(ctx, "log.moved_from")
		if err != nil || moved != string(legacy) {
			t.Fatalf("the old log's checkpoint kept: %q (%v)", moved, err)
		}
	})
	t.Run("L7 the next receipt rebuilds it from commitments under the origin with /v2", func(t *testing.T) {
		recs := e.run(5, 6, 1)
		cp, err := VerifyProof(recs[5].Proof(), recs[5].JWS, 6, e.key.Set())
		if err != nil || cp.Origin != "node.example/log/v2" || cp.Size != 6 {
			t.Fatalf("checkpoint %+v (%v)", cp, err)
		}
		rep := e.verify(VerifyOptions{})
		wantOK(t, rep, 6)
		if rep.LogSize != 6 || rep.Origin != "node.example/log/v2" {
			t.Fatalf("log: %+v", rep)
		}
	})
	t.Run("L7 receipts verify checks the move kept the old log's receipts", func(t *testing.T) {
		var other tlog.Hash
		other[0] = 1
		forged, err := note.Sign(&note.Note{Text: CheckpointText("node.example/log", 5, other)}, e.key.NoteSigner("node.example/log"))
		if err != nil {
			t.Fatal(err)
		}
		e.close()
		rawExec(t, e.path, `UPDATE meta SET value = `+sqlQuote(string(forged))+` WHERE key = 'log.moved_from'`)
		e.open()
		wantProblem(t, e.verify(VerifyOptions{}), 5, "", "receipts before the move were rewritten")
	})
}

// golang.org/x/mod/sumdb/tlog never ends on a tree of 2^62 leaves: no checkpoint or proof that
// large is read, so `verify --in` and the witness path end (docs/threats.md L9).
func TestLogSizesBounded(t *testing.T) {
	root := base64.StdEncoding.EncodeToString(make([]byte, 32))
	t.Run("L9 a checkpoint or a proof index of 2^62", func(t *testing.T) {
		if _, err := ParseCheckpoint("node.example/log/v2\n4611686018427387904\n" + root + "\n"); err == nil || !strings.Contains(err.Error(), "no log is that large") {
			t.Errorf("checkpoint: %v", err)
		}
		if _, err := ParseProof(ProofHeader + "\nindex 4611686018427387904\n\nx"); err == nil || !strings.Contains(err.Error(), "no log is that large") {
			t.Errorf("proof: %v", err)
		}
		if _, err := ParseCheckpoint("node.example/log/v2\n99999999999999999999\n" + root + "\n"); err == nil {
			t.Error("a size over int64 read")
		}
	})
}

// recordingHashes serves the stored hashes of a tree kept in memory and counts the reads of
// those outside allowed.
type recordingHashes struct {
	stored  []tlog.Hash
	allowed map[int64]tlog.Hash
	outside []int64
}

func (r *recordingHashes) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if _, ok := r.allowed[x]; !ok {
			r.outside = append(r.outside, x)
		}
		out[i] = r.stored[x]
	}
	return out, nil
}

// TestRightEdge: the next leaf's stored hashes, the next root and the next leaf's proof read
// only the right edge the chain keeps and what that leaf adds, at every size up to 300.
func TestRightEdge(t *testing.T) {
	r := &recordingHashes{}
	for size := int64(0); size < 300; size++ {
		all := map[int64]tlog.Hash{}
		for i, h := range r.stored {
			all[int64(i)] = h
		}
		r.allowed = rightEdge(size, all)
		if len(r.allowed) != bits.OnesCount64(uint64(size)) {
			t.Fatalf("size %d: a right edge of %d hashes, want one a set bit", size, len(r.allowed))
		}
		added, err := tlog.StoredHashes(size, []byte(fmt.Sprint(size)), r)
		if err != nil {
			t.Fatal(err)
		}
		for k, h := range added {
			r.allowed[int64(len(r.stored)+k)] = h
		}
		r.stored = append(r.stored, added...)
		if _, err := tlog.TreeHash(size+1, r); err != nil {
			t.Fatal(err)
		}
		if _, err := tlog.ProveRecord(size+1, size, r); err != nil {
			t.Fatal(err)
		}
		if len(r.outside) > 0 {
			t.Fatalf("appending leaf %d read stored hashes %v, outside the right edge", size, r.outside)
		}
	}
}
