package agent

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/receipts"
	"github.com/aether/aether/backend/store"
	"github.com/aether/aether/backend/turn"
)

// witnessRun is one turn from agentDir that cosigns the checkpoint it verified.
func witnessRun(t *testing.T, n *testNode, agentDir string) (Result, error) {
	t.Helper()
	o := n.options(t, agentDir, io.Discard)
	o.Witness = true
	return Run(context.Background(), o)
}

func witnesses(t *testing.T, db *store.DB) (int, map[int64]int) {
	t.Helper()
	n, per, err := db.Witnesses(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	by := map[int64]int{} // last seq → witnessed by
	for _, w := range per {
		by[w.LastSeq] = w.WitnessedBy
	}
	return n, by
}

// An agent run with Witness cosigns the checkpoint it verified and sends the cosignature with
// its next call; the node checks it against the checkpoint it signed and stores it per agent.
func TestWitnessCosignsTheCheckpoint(t *testing.T) {
	t.Parallel()
	nodeDir := t.TempDir()
	r := newRestartable(t, nodeDir)
	n := r.n
	other, witness := t.TempDir(), t.TempDir()
	if _, err := Run(context.Background(), n.options(t, other, io.Discard)); err != nil { // seq 1
		t.Fatal(err)
	}
	for range 2 { // seq 2, cosigned; seq 3, the cosignature of checkpoint 2 sent
		if _, err := witnessRun(t, n, witness); err != nil {
			t.Fatal(err)
		}
	}
	count, by := witnesses(t, n.db)
	if count != 1 || by[1] != 1 || by[3] != 0 {
		t.Fatalf("%d witnesses, witnessed by %v: want 1, and the other agent's receipt 1 witnessed by it, not receipt 3", count, by)
	}
	// What the node stored is a C2SP cosignature of the checkpoint it signed.
	var line, vkey string
	raw, err := sql.Open("sqlite", "file:"+filepath.Join(nodeDir, "pact.sqlite")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := raw.QueryRow(`SELECT line, witness FROM log_cosignatures WHERE size = 2`).Scan(&line, &vkey); err != nil {
		t.Fatal(err)
	}
	signed, _, err := n.db.CheckpointAt(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	v, err := keys.ParseCosigVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open(append(signed, line...), note.VerifierList(v)); err != nil {
		t.Fatalf("the stored cosignature does not verify: %v", err)
	}
}

// editCosigned rewrites the cosignature agentDir keeps for its next call.
func editCosigned(t *testing.T, agentDir string, edit func(nl *HeldLog)) {
	t.Helper()
	path := filepath.Join(agentDir, logsFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st LogState
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	for _, nl := range st.Logs {
		edit(nl)
	}
	if data, err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A hostile agent's cosignature is refused with INVALID_PARAMS before its turn runs, and
// nothing is stored (docs/threats.md L6).
func TestWitnessCosignatureRefused(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	agentDir := t.TempDir()
	if _, err := witnessRun(t, n, agentDir); err != nil {
		t.Fatal(err)
	}
	k, err := keys.LoadOrCreate(filepath.Join(agentDir, witnessKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		edit func(*HeldLog)
		why  string
	}{
		"L6 a cosignature of a checkpoint the node never signed": {func(nl *HeldLog) {
			lines := strings.Split(nl.Cosigned, "\n")
			lines[2] = base64.StdEncoding.EncodeToString(make([]byte, tlog.HashSize)) // another root, same size
			name, _, _ := strings.Cut(nl.Witness, "+")
			forged, err := note.Sign(&note.Note{Text: strings.Join(lines[:3], "\n") + "\n"}, k.Cosigner(name, time.Now))
			if err != nil {
				t.Fatal(err)
			}
			nl.Cosigned = string(forged)
		}, "this node never signed that checkpoint of 1 receipts"},
		"L6 a cosignature that does not verify": {func(nl *HeldLog) {
			i := strings.LastIndex(nl.Cosigned, " ") + 1
			sig, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(nl.Cosigned[i:]))
			sig[len(sig)-1] ^= 1
			nl.Cosigned = nl.Cosigned[:i] + base64.StdEncoding.EncodeToString(sig) + "\n"
		}, "does not verify"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			copyFile(t, filepath.Join(agentDir, logsFile), filepath.Join(dir, logsFile))
			editCosigned(t, dir, c.edit)
			before := n.runner.count()
			_, err := Run(context.Background(), n.options(t, dir, io.Discard))
			if !errors.Is(err, a2a.ErrInvalidParams) || !strings.Contains(err.Error(), c.why) {
				t.Fatalf("got %v, want INVALID_PARAMS saying %q", err, c.why)
			}
			if count, _ := witnesses(t, n.db); count != 0 || n.runner.count() != before {
				t.Fatalf("%d witnesses stored, %d turns ran", count, n.runner.count()-before)
			}
		})
	}
}

// Cosignatures cannot fill the node's disk: a witness key name over keys.MaxCosignerName is
// refused before anything is stored, and an agent has one cosignature stored, its newest
// (docs/threats.md L11).
func TestCosignaturesBounded(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	agentDir := t.TempDir()
	for range 3 {
		if _, err := witnessRun(t, n, agentDir); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("L11 an agent's cosignatures of three checkpoints: one kept, the newest", func(t *testing.T) {
		var rows, size int64
		raw := rawStore(t, n)
		if err := raw.QueryRow(`SELECT COUNT(*), MAX(size) FROM log_cosignatures`).Scan(&rows, &size); err != nil || rows != 1 || size != 2 {
			t.Fatalf("%d cosignatures stored, the largest of size %d (%v); want 1, of 2", rows, size, err)
		}
	})
	t.Run("L11 a witness key name of 1 MB is refused, nothing stored", func(t *testing.T) {
		k, err := keys.LoadOrCreate(filepath.Join(agentDir, witnessKeyFile))
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		copyFile(t, filepath.Join(agentDir, logsFile), filepath.Join(dir, logsFile))
		editCosigned(t, dir, func(nl *HeldLog) {
			c := k.Cosigner(strings.Repeat("w", 1<<20), time.Now)
			cosigned, err := receipts.Cosign([]byte(nl.Checkpoint), c)
			if err != nil {
				t.Fatal(err)
			}
			nl.Cosigned, nl.Witness = string(cosigned), c.VerifierKey()
		})
		before := n.runner.count()
		_, err = Run(context.Background(), n.options(t, dir, io.Discard))
		if !errors.Is(err, a2a.ErrInvalidParams) || n.runner.count() != before {
			t.Fatalf("got %v, %d turns ran; want INVALID_PARAMS before the turn", err, n.runner.count()-before)
		}
		var longest int
		if err := rawStore(t, n).QueryRow(`SELECT MAX(length(witness) + length(line)) FROM log_cosignatures`).Scan(&longest); err != nil || longest > 1024 {
			t.Fatalf("a stored cosignature of %d bytes (%v)", longest, err)
		}
	})
	t.Run("L11 an agent's own long identity makes a name the node takes", func(t *testing.T) {
		name := witnessName(Who{Issuer: "https://issuer.example", Subject: strings.Repeat("é", 200)})
		if len(name) > keys.MaxCosignerName || !utf8.ValidString(name) {
			t.Fatalf("witness name of %d bytes: %q", len(name), name)
		}
	})
}

// rawStore opens the node's pact.sqlite read-only, as whoever holds its data dir.
func rawStore(t *testing.T, n *testNode) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+filepath.Join(n.dir, "pact.sqlite")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

// A turn refused before any work (here: its grant already runs turn.MaxPerGrant turns) leaves
// a task that keeps a preview and the hash of the agent's message, not the message: refused
// turns cannot fill the node's disk (docs/threats.md L11).
func TestRefusedTurnKeepsNoMessage(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	agentDir := t.TempDir()
	if _, err := Run(context.Background(), n.options(t, agentDir, io.Discard)); err != nil {
		t.Fatal(err)
	}
	hold, started := make(chan struct{}), make(chan struct{}, turn.MaxPerGrant)
	n.runner.mu.Lock()
	n.runner.hold, n.runner.started = hold, started
	n.runner.mu.Unlock()
	var wg sync.WaitGroup
	for range turn.MaxPerGrant {
		wg.Go(func() { Run(context.Background(), n.options(t, agentDir, io.Discard)) })
	}
	for range turn.MaxPerGrant {
		<-started
	}
	t.Run("L11 a refused turn's 1 MB message is not kept", func(t *testing.T) {
		o := n.options(t, agentDir, io.Discard)
		o.Message = strings.Repeat("Nightingale acquisition ", 1<<20/24)
		res, err := Run(context.Background(), o)
		var te *TurnError
		if !errors.As(err, &te) || !strings.Contains(te.Reason, "too many turns of this grant") {
			t.Fatalf("got %v, want the turn refused", err)
		}
		var data string
		if err := rawStore(t, n).QueryRow(`SELECT data FROM tasks WHERE id = ?`, string(res.Task.ID)).Scan(&data); err != nil {
			t.Fatal(err)
		}
		if len(data) > 4096 || strings.Count(data, "Nightingale") > 20 || !strings.Contains(data, "aether.withheld") {
			t.Fatalf("the refused task is stored in %d bytes: %.300s", len(data), data)
		}
	})
	close(hold)
	wg.Wait()
}
