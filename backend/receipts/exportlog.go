package receipts

import (
	"context"
	"fmt"
	"io"
	"sync"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/store"
)

// ExportDB is Export of src, receipts of db, with each receipt's proof in the receipts log
// against the newest checkpoint when the export began (receipts appended after it get none).
// The tree is read into memory once (64 bytes a receipt), so a proof costs no query.
func ExportDB(ctx context.Context, db *store.DB, src Source, w io.Writer) error {
	size, note, ok, err := db.LatestCheckpoint(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return Export(ctx, src, w)
	}
	tree := &memTree{}
	want := tlog.StoredHashCount(size)
	for h, err := range db.AllLogHashes(ctx) {
		if err != nil {
			return fmt.Errorf("export receipts: %w", err)
		}
		if int64(len(tree.hashes)) == want {
			break
		}
		tree.hashes = append(tree.hashes, h)
	}
	if int64(len(tree.hashes)) != want {
		return fmt.Errorf("export receipts: %w: the checkpoint at size %d needs %d stored hashes, the log holds %d", store.ErrLog, size, want, len(tree.hashes))
	}
	return export(ctx, src, w, func(r store.Receipt) (string, error) {
		if r.Seq > size {
			return "", nil
		}
		p, err := tlog.ProveRecord(size, r.Seq-1, tree)
		if err != nil {
			return "", err
		}
		return FormatProof(&LogProof{Index: r.Seq - 1, Hashes: p, Checkpoint: note}), nil
	})
}

// Export writes the receipts matching f as JSON Lines with their log proofs (ExportDB).
func (l *Ledger) Export(ctx context.Context, f store.ReceiptFilter, w io.Writer) error {
	return ExportDB(ctx, l.db, l.Source(ctx, f), w)
}

// checkpoints remembers the checkpoints a verification has opened: an export's lines carry the
// same one, and its signature is checked once.
type checkpoints struct {
	set keys.Set
	mu  sync.Mutex
	got map[string]checkpointResult
}

type checkpointResult struct {
	cp  Checkpoint
	err error
}

func (c *checkpoints) open(note []byte) (Checkpoint, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.got[string(note)]; ok {
		return r.cp, r.err
	}
	cp, err := OpenCheckpoint(note, c.set, "")
	if c.got == nil {
		c.got = map[string]checkpointResult{}
	}
	c.got[string(note)] = checkpointResult{cp, err}
	return cp, err
}

// proven returns why r's log proof does not put it in a checkpoint the node signed, or "" (L4).
func (c *checkpoints) proven(r store.Receipt) string {
	p, err := ParseProof(r.Proof)
	if err != nil {
		return "its log proof " + err.Error()
	}
	if p.Index != r.Seq-1 {
		return fmt.Sprintf("its log proof is for leaf %d, not %d", p.Index, r.Seq-1)
	}
	cp, err := c.open(p.Checkpoint)
	if err != nil {
		return "its log proof's " + err.Error()
	}
	if err := checkInclusion(p, cp, r.JWS); err != nil {
		return fmt.Sprintf("its log proof does not put it in the checkpoint of size %d: %v", cp.Size, err)
	}
	return ""
}
