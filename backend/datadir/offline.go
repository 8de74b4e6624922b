package datadir

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aether/aether/backend/admin"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/receipts"
	"github.com/aether/aether/backend/store"
)

// RotateKey replaces the node's signing key (the node must be stopped: it
// takes the data dir's lock). Receipts signed before keep verifying: the old
// key stays in the JWKS, and it signed a statement naming its successor and the
// last receipt it signed, so that nothing it signs later verifies (T13).
func RotateKey(dataDir string) (oldKID, newKID string, lastSeq int64, err error) {
	l, err := lock(filepath.Join(dataDir, LockFile))
	if err != nil {
		return "", "", 0, err
	}
	defer l.Close()
	if lastSeq, err = chainHead(dataDir); err != nil {
		return "", "", 0, fmt.Errorf("the last receipt the old key signed: %w", err)
	}
	oldKID, newKID, err = keys.Rotate(dataDir, time.Now(), lastSeq)
	return oldKID, newKID, lastSeq, err
}

// chainHead is the seq of the last receipt in dataDir's pact.sqlite, 0 without one.
func chainHead(dataDir string) (int64, error) {
	path := filepath.Join(dataDir, DBFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	db, err := store.Open(path)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	head, err := db.ReceiptHead(context.Background())
	return head.Seq, err
}

// NewAdminToken replaces the admin token of the node on dataDir while none runs: it takes the
// data dir's lock, and answers ErrLocked when a running node holds it (then ask that node, POST
// /v1/admin/token, which also ends its sessions). Sessions live in a node's memory only, so a
// stopped node has none to end.
func NewAdminToken(dataDir string) error {
	l, err := lock(filepath.Join(dataDir, LockFile))
	if err != nil {
		return err
	}
	defer l.Close()
	if _, err = admin.NewToken(filepath.Join(dataDir, TokenFile)); err != nil {
		return err
	}
	// Paired phones end with the token, as a running node's rotation ends them (A6).
	if err := os.Remove(filepath.Join(dataDir, DevicesFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("the admin token is new, but the paired phones were not removed: %w", err)
	}
	return nil
}

// LocalAPI is what a local tool needs to call the node running on dataDir: the node API's
// address (from node.json) and the admin token.
func LocalAPI(dataDir string) (addr, token string, err error) {
	raw, err := os.ReadFile(filepath.Join(dataDir, AddressesFile))
	if err != nil {
		return "", "", fmt.Errorf("no running node found for %s (start one with `aether node serve`): %w", dataDir, err)
	}
	var a Addresses
	if err := json.Unmarshal(raw, &a); err != nil || a.API == "" {
		return "", "", fmt.Errorf("%s/%s is unreadable", dataDir, AddressesFile)
	}
	tok, err := os.ReadFile(filepath.Join(dataDir, TokenFile))
	if err != nil {
		return "", "", fmt.Errorf("read the admin token: %w", err)
	}
	return a.API, strings.TrimSpace(string(tok)), nil
}

// VerifyingKeys is dataDir's key ring (the signing key and the keys it replaced) as receipts
// verify with it: each retired key bounded by its rotation statement, checked on the way (T13).
func VerifyingKeys(dataDir string) (keys.History, error) {
	if !keys.HasRing(dataDir) {
		return keys.History{}, fmt.Errorf("no node key in %s: pass --data-dir or --jwks", dataDir)
	}
	ring, err := keys.LoadRing(dataDir)
	if err != nil {
		return keys.History{}, err
	}
	h, err := ring.VerifyRotations(dataDir)
	if err != nil {
		return keys.History{}, fmt.Errorf("key rotations: %w", err)
	}
	return h, nil
}

// Receipts is a data dir's receipt store, opened without the node for the offline verbs
// (`aether receipts verify|export`).
type Receipts struct {
	db  *store.DB
	dir string
}

// OpenReceipts opens dataDir's pact.sqlite; close it when done.
func OpenReceipts(dataDir string) (*Receipts, error) {
	db, err := store.Open(filepath.Join(dataDir, DBFile))
	if err != nil {
		return nil, err
	}
	return &Receipts{db: db, dir: dataDir}, nil
}

// Head is the chain's head as the node last recorded it outside pact.sqlite (receipts.head),
// so that verify can tell a cut tail from a short chain (T4); ok is false without the file.
func (r *Receipts) Head() (head store.Checkpoint, path string, ok bool, err error) {
	f := receipts.HeadFile{Path: filepath.Join(r.dir, HeadFile)}
	head, ok, err = f.Read()
	return head, f.Path, ok, err
}

// Close closes the store.
func (r *Receipts) Close() error { return r.db.Close() }

// Verify checks every signature and the whole chain with set and, when expectSeq > 0, against
// a high-water mark kept elsewhere (T4, T6).
func (r *Receipts) Verify(ctx context.Context, h keys.History, expectSeq int64, expectHash string) (*receipts.Report, error) {
	return receipts.VerifyDB(ctx, r.db, h, expect(expectSeq, expectHash))
}

// Export writes every receipt as JSON Lines, oldest first.
func (r *Receipts) Export(ctx context.Context, w io.Writer) error {
	return receipts.ExportDB(ctx, r.db, r.db.AllReceipts(ctx), w)
}

// VerifyExport is Verify for an exported JSON Lines file.
func VerifyExport(ctx context.Context, in io.Reader, h keys.History, expectSeq int64, expectHash string) (*receipts.Report, error) {
	return receipts.Verify(ctx, receipts.ReadJSONL(in), h, expect(expectSeq, expectHash))
}

func expect(seq int64, hash string) receipts.VerifyOptions {
	if seq <= 0 {
		return receipts.VerifyOptions{}
	}
	return receipts.VerifyOptions{Expect: &store.Checkpoint{Seq: seq, Hash: hash}}
}

// VerifyReceived checks again every receipt the owner's agents received from other nodes
// (receipts.CheckReceived, with the JWKS and tlog-proof kept beside it): how many there are,
// and what fails, one line per receipt.
func (r *Receipts) VerifyReceived(ctx context.Context) (n int, problems []string, err error) {
	rs, err := r.db.ReceivedReceipts(ctx, 0)
	if err != nil {
		return 0, nil, err
	}
	for _, rec := range rs {
		if _, _, err := receipts.CheckReceived(rec.JWS, rec.Proof, []byte(rec.JWKS), domain.Agent{Issuer: rec.AgentIssuer, Subject: rec.Agent}); err != nil {
			problems = append(problems, fmt.Sprintf("received receipt %s from %s (agent %s): %v", rec.RID, rec.Node, rec.Agent, err))
		}
	}
	return len(rs), problems, nil
}
