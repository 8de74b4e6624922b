package receipts

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
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
		n, err := note.Sign(&note.Note{Text: store.CheckpointText(origin, size, h)}, key.NoteSigner(origin))
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
