package receipts

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/keys"
)

// LogStatus shows the newest checkpoint, checked against the stored tree, and its witnesses:
// the agents whose cosignature of a checkpoint the node signed it stored.
func TestLogStatusAndWitnesses(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	h := keys.History{Set: e.key.Set()}
	if _, ok, err := e.l.LogStatus(ctx, h); ok || err != nil {
		t.Fatalf("before the first receipt: ok %v, %v", ok, err)
	}
	recs := e.run(0, 5, 1)
	st, ok, err := e.l.LogStatus(ctx, h)
	if !ok || err != nil || st.Problem != "" || st.Checkpoint.Size != 5 || st.Checkpoint.Origin != "node.example/log/v2" {
		t.Fatalf("status %+v, ok %v, %v", st, ok, err)
	}
	if last := recs[4]; !st.Time.Equal(last.Claims.IssuedAt.Time) || st.Witnesses != 0 || len(st.Agents) != 3 {
		t.Fatalf("time %v (receipt 5 signed at %v), %d witnesses, agents %+v", st.Time, last.Claims.IssuedAt.Time, st.Witnesses, st.Agents)
	}
	_, priv, _ := ed25519.GenerateKey(nil)
	w := keys.NewCosigner("agent.example#user-0", priv, time.Now)
	_, signed, _, _ := e.db.LatestCheckpoint(ctx)
	cosigned, err := Cosign(signed, w)
	if err != nil {
		t.Fatal(err)
	}
	witness := domain.Agent{Issuer: "https://agent.example", Subject: "user-0"}
	if err := e.l.Witness(ctx, witness, cosigned, w.VerifierKey()); err != nil {
		t.Fatal(err)
	}
	// A checkpoint of a size the node never signed proves nothing.
	text := fmt.Sprintf("node.example/log\n9\n%s\n", st.Checkpoint.Root)
	if err := e.l.Witness(ctx, witness, []byte(text+"\n— x AAAA\n"), w.VerifierKey()); !errors.Is(err, ErrCosignature) || !strings.Contains(err.Error(), "never signed") {
		t.Fatalf("a cosignature of a checkpoint of 9 receipts: %v", err)
	}
	if st, _, _ = e.l.LogStatus(ctx, h); st.Witnesses != 1 {
		t.Fatalf("%d witnesses", st.Witnesses)
	}
	for _, a := range st.Agents {
		if a.WitnessedBy != 1 {
			t.Fatalf("agent %v: history to %d witnessed by %d", a.Agent, a.LastSeq, a.WitnessedBy)
		}
	}
}

// A stored tree whose hashes were changed no longer has the root the newest checkpoint signs:
// the Receipts page says the checkpoint does not verify (docs/threats.md L5).
func TestLogStatusTamperedTree(t *testing.T) {
	e := newEnv(t)
	e.run(0, 5, 1)
	e.close()
	rawExec(t, e.path, append(untrigger, fmt.Sprintf(`UPDATE log_hashes SET hash = zeroblob(32) WHERE idx = %d`, tlog.StoredHashIndex(0, 4)))...)
	e.open()
	st, ok, err := e.l.LogStatus(context.Background(), keys.History{Set: e.key.Set()})
	if !ok || err != nil || !strings.Contains(st.Problem, "does not sign the stored tree's root") || st.Checkpoint.Size != 5 {
		t.Fatalf("status %+v, ok %v, %v", st, ok, err)
	}
}
