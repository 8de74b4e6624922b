package receipts

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"strconv"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/store"
)

// The chain and its log, written in one write of the store's group commit (durable.go says
// in what order, and why that keeps a receipt).

// ErrChainHead: a signer's receipts do not continue the chain as stored (the first seq/prev
// hash is not the tail's successor): a signer bug.
var ErrChainHead = errors.New("receipts do not continue the stored chain")

// MaxReceipt is the largest receipt (compact JWS) the node stores: the ledger makes what a
// turn did fit it (docs/wire.md, "What the turn did"), so that every reader can bound a receipt.
const MaxReceipt = 1<<16 - 1

// metaLogOrigin is the meta key of the log's origin, fixed by its first checkpoint.
const metaLogOrigin = "log.origin"

// signFunc makes the receipts that continue the chain from tail: seq tail.Seq+1 onwards,
// each chained on the one before, the first on tail.Hash (on the genesis value when tail.Seq
// is 0). revoked says whether the owner has revoked a grant, as of this very write: a
// revocation committed before the receipt is in it (V2).
type signFunc func(tail store.Checkpoint, revoked func(domain.GrantID) (bool, error)) ([]store.Receipt, error)

// noteSigner signs the log's checkpoints: the Ledger, with the node key (log.go).
type noteSigner interface {
	// Origin is the origin a log takes at its first checkpoint; later checkpoints name the stored one.
	Origin() string
	// Sign signs a checkpoint's text as a note (C2SP signed-note) and returns the note.
	Sign(text []byte) ([]byte, error)
}

// chain writes receipts: their rows, their turns' ends, the high-water mark, and the log's
// leaves and checkpoint.
type chain struct {
	db     *store.DB
	signer noteSigner // nil: leaves are added, no checkpoint is signed
	// noLog leaves the log out: only B9 sets it, to measure the log's cost (bench_test.go).
	noLog bool
}

// kept is what the chain keeps between its writes in the store's group commit (store.Tx.Keep,
// dropped when a transaction fails): the stored tail as its last write left it, so that a
// write reads one row to confirm it rather than the tail, the mark and the log's size; and
// the log's right edge, the only stored hashes the next write's leaves, root and proofs read.
type kept struct {
	tail      store.Checkpoint
	confirmed uint64 // the transaction (store.Tx.N) that read or confirmed tail
	origin    string // the log's origin, once read from the store
	edge      map[int64]tlog.Hash
}

type keptKey struct{}

// appendDurable appends the receipts sign makes in one write and returns them, with their
// log proofs (nil without a signer), once the write is durable (T8). sign is called once, by
// the store's committer: it must be quick and must not use the store (it would wait on itself).
//
// Nothing is written when it fails: ErrChainHead, store.ErrHighWater (the stored chain lost
// its tail, or its mark moved), a *store.TurnError naming the turn that is unknown, already
// ended (a retry: its receipt is already stored) or described differently,
// store.ErrReceiptConflict, store.ErrLog.
func (c *chain) appendDurable(ctx context.Context, record []store.Turn, sign signFunc) ([]store.Receipt, []*LogProof, error) {
	var rows []store.Receipt
	var proofs []*LogProof
	err := c.db.Commit(ctx, func(tx *store.Tx) error {
		var keep func()
		var err error
		if rows, proofs, keep, err = c.write(tx, record, sign); err != nil {
			return err
		}
		keep()
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("append receipts: %w", err)
	}
	return rows, proofs, nil
}

// appendAhead appends the receipts sign makes and, in the same write, creates the task whose
// row task makes once they are in the log (given their proofs), owner's on brand; it returns once
// the write has run in its commit, before the commit is durable (store.DB.CommitAhead).
func (c *chain) appendAhead(ctx context.Context, record []store.Turn, sign signFunc, brand domain.BrandID, owner string, task func(proofs []*LogProof) (TaskRow, error)) (*store.Pending, error) {
	p, err := c.db.CommitAhead(ctx, func(tx *store.Tx) error {
		_, proofs, keep, err := c.write(tx, record, sign)
		if err != nil {
			return err
		}
		row, err := task(proofs)
		if err != nil {
			return err
		}
		if err := tx.CreateTask(owner, brand, row); err != nil {
			return err
		}
		keep()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("append receipts: %w", err)
	}
	return p, nil
}

// write appends the receipts sign makes inside tx: it records the turns of record (turns that
// were never started: durable.go, step 1), confirms (or reads) the tail, signs on it, ends the
// receipts' turns, inserts them, adds them to the log and signs its checkpoint,
// and moves the high-water mark. keep remembers where they leave the chain: the write calls
// it as its last step, once nothing else of it can fail.
func (c *chain) write(tx *store.Tx, record []store.Turn, sign signFunc) (rows []store.Receipt, proofs []*LogProof, keep func(), err error) {
	for _, t := range record {
		if err := tx.StartTurn(t); err != nil {
			return nil, nil, nil, err
		}
	}
	st, err := c.tail(tx)
	if err != nil {
		return nil, nil, nil, err
	}
	if rows, err = sign(st.tail, tx.GrantRevoked); err != nil {
		return nil, nil, nil, err
	}
	prev := st.tail
	for i, r := range rows {
		if r.Seq != prev.Seq+1 || (prev.Seq > 0 && r.PrevHash != prev.Hash) {
			return nil, nil, nil, fmt.Errorf("%w: receipt %d of the batch has seq %d, the chain is at seq %d", ErrChainHead, i, r.Seq, prev.Seq)
		}
		if err := tx.EndTurn(r); err != nil {
			return nil, nil, nil, err
		}
		prev = store.Checkpoint{Seq: r.Seq, Hash: r.Hash}
	}
	if err := tx.InsertReceipts(rows); err != nil {
		return nil, nil, nil, err
	}
	if proofs, err = c.log(tx, &st, rows); err != nil {
		return nil, nil, nil, err
	}
	if prev != st.tail {
		if err := tx.MoveHighWater(st.tail, prev); err != nil {
			return nil, nil, nil, err
		}
	}
	return rows, proofs, func() {
		st.tail = prev
		tx.Keep(keptKey{}, st)
	}, nil
}

// tail is the chain's stored tail in tx: the one kept, confirmed once a transaction, or else
// read and checked against the high-water mark, with the log brought up to it.
func (c *chain) tail(tx *store.Tx) (kept, error) {
	st, _ := tx.Kept(keptKey{}).(kept)
	switch {
	case st.confirmed == tx.N():
		return st, nil
	case st.confirmed != 0:
		stored, err := tx.ReceiptTail()
		if err != nil {
			return kept{}, err
		}
		if stored != st.tail {
			tx.Keep(keptKey{}, nil) // the next write reads it again
			return kept{}, fmt.Errorf("%w: the chain ends at seq %d, where this node left it at seq %d", store.ErrHighWater, stored.Seq, st.tail.Seq)
		}
		st.confirmed = tx.N()
		tx.Keep(keptKey{}, st)
		return st, nil
	}
	tail, err := tx.ReceiptHead()
	if err != nil {
		return kept{}, err
	}
	added, err := c.catchUp(tx, tail.Seq)
	if err != nil {
		return kept{}, err
	}
	st = kept{tail: tail, confirmed: tx.N()}
	if !added { // leaves added here are kept only with the write (keep)
		tx.Keep(keptKey{}, st)
	}
	return st, nil
}

// LeafData is the log entry of the receipt jws: the SHA-256 of its compact JWS (its chain
// hash, as bytes). It hides the claims: the JWS holds the node's signature, which no one can
// guess.
func LeafData(jws string) []byte {
	sum := sha256.Sum256([]byte(jws))
	return sum[:]
}

// LogProof places one receipt in the log: its leaf index (seq-1), the RFC 6962 inclusion
// proof of that leaf in the tree of Checkpoint, and that checkpoint, signed.
type LogProof struct {
	Index      int64
	Hashes     tlog.RecordProof
	Checkpoint []byte
}

// CheckpointText is a C2SP tlog-checkpoint body: origin, tree size, base64 root hash.
func CheckpointText(origin string, size int64, root tlog.Hash) string {
	return origin + "\n" + strconv.FormatInt(size, 10) + "\n" + base64.StdEncoding.EncodeToString(root[:]) + "\n"
}

// txHashes reads the log's stored hashes in a write, remembering what it read and what the
// write added: the leaves' stored hashes, the checkpoint's root and the proofs of one write
// read the same few hashes.
type txHashes struct {
	tx   *store.Tx
	seen map[int64]tlog.Hash
}

func (m *txHashes) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	var missing []int64
	for _, x := range indexes {
		if _, ok := m.seen[x]; !ok {
			missing = append(missing, x)
		}
	}
	got, err := m.tx.ReadLogHashes(missing)
	if err != nil {
		return nil, err
	}
	for i, x := range missing {
		m.seen[x] = got[i]
	}
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		out[i] = m.seen[x]
	}
	return out, nil
}

// logLeaves is how many leaves the stored hashes hold, or store.ErrLog when their count is
// not that of a whole tree.
func logLeaves(tx *store.Tx) (int64, error) {
	count, err := tx.LogHashCount()
	if err != nil {
		return 0, err
	}
	// StoredHashCount grows with n: find the n it gives count for.
	lo, hi := int64(0), count
	for lo < hi {
		mid := lo + (hi-lo)/2
		if tlog.StoredHashCount(mid) < count {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if tlog.StoredHashCount(lo) != count {
		return 0, fmt.Errorf("%w: %d stored hashes are no whole tree", store.ErrLog, count)
	}
	return lo, nil
}

// addLeaves appends the receipts jws (seqs from leaves+1 on) to the tree.
func addLeaves(r *txHashes, leaves int64, jws []string) error {
	for i, j := range jws {
		n := leaves + int64(i)
		if len(j) > MaxReceipt {
			return fmt.Errorf("receipt %d is %d bytes, over the %d a receipt may be", n+1, len(j), MaxReceipt)
		}
		hashes, err := tlog.StoredHashes(n, LeafData(j), r)
		if err != nil {
			return fmt.Errorf("log leaf %d: %w", n, err)
		}
		base := tlog.StoredHashIndex(0, n)
		for k, h := range hashes {
			r.seen[base+int64(k)] = h
		}
		if err := r.tx.InsertLogHashes(base, hashes); err != nil {
			return fmt.Errorf("log leaf %d: %w", n, err)
		}
	}
	return nil
}

// catchUp brings the tree to the chain's tail (seq) before a write appends to it: a store
// made before the log (schema 4), or whose log migration 7 moved to commitments, gets every
// earlier receipt as a leaf once, in the write that appends its next receipt. More leaves
// than receipts is store.ErrLog. added says whether it added any.
func (c *chain) catchUp(tx *store.Tx, seq int64) (added bool, err error) {
	if c.noLog {
		return false, nil
	}
	leaves, err := logLeaves(tx)
	if err != nil {
		return false, err
	}
	if leaves > seq {
		return false, fmt.Errorf("%w: %d leaves but the chain ends at seq %d", store.ErrLog, leaves, seq)
	}
	for ; leaves < seq; added = true {
		jws, err := tx.ReceiptsJWS(leaves, seq)
		if err != nil {
			return added, err
		}
		if len(jws) == 0 {
			return added, fmt.Errorf("%w: receipt %d is missing", store.ErrLog, leaves+1)
		}
		if err := addLeaves(&txHashes{tx: tx, seen: map[int64]tlog.Hash{}}, leaves, jws); err != nil {
			return added, err
		}
		leaves += int64(len(jws))
	}
	return added, nil
}

// log adds rows to the tree and, with a signer, signs the checkpoint of the tree they leave
// and proves each of them against it.
func (c *chain) log(tx *store.Tx, st *kept, rows []store.Receipt) ([]*LogProof, error) {
	if len(rows) == 0 || c.noLog {
		return nil, nil
	}
	leaves := rows[0].Seq - 1
	jws := make([]string, len(rows))
	for i, r := range rows {
		jws[i] = r.JWS
	}
	r := &txHashes{tx: tx, seen: map[int64]tlog.Hash{}}
	maps.Copy(r.seen, st.edge) // a copy: this write may yet roll back
	if err := addLeaves(r, leaves, jws); err != nil {
		return nil, err
	}
	size := leaves + int64(len(rows))
	st.edge = rightEdge(size, r.seen)
	if c.signer == nil {
		return nil, nil
	}
	note, err := c.signCheckpoint(tx, st, r, size)
	if err != nil {
		return nil, err
	}
	proofs := make([]*LogProof, len(rows))
	for i, row := range rows {
		p, err := tlog.ProveRecord(size, row.Seq-1, r)
		if err != nil {
			return nil, fmt.Errorf("prove receipt %d in the log: %w", row.Seq, err)
		}
		proofs[i] = &LogProof{Index: row.Seq - 1, Hashes: p, Checkpoint: note}
	}
	return proofs, nil
}

// rightEdge is what seen holds of the roots of the complete subtrees that make a tree of size
// leaves: the stored hashes its next leaf, the next root and the next leaf's proof are made of
// (TestRightEdge).
func rightEdge(size int64, seen map[int64]tlog.Hash) map[int64]tlog.Hash {
	edge := make(map[int64]tlog.Hash, bits.OnesCount64(uint64(size)))
	var start int64
	for level := 62; level >= 0; level-- {
		if size&(1<<level) == 0 {
			continue
		}
		x := tlog.StoredHashIndex(level, start>>level)
		if h, ok := seen[x]; ok {
			edge[x] = h
		}
		start += 1 << level
	}
	return edge
}

// signCheckpoint signs and stores the checkpoint of the tree of size leaves, under the stored
// origin, or the signer's for the log's first checkpoint (stored now).
func (c *chain) signCheckpoint(tx *store.Tx, st *kept, r tlog.HashReader, size int64) ([]byte, error) {
	root, err := tlog.TreeHash(size, r)
	if err != nil {
		return nil, fmt.Errorf("log root at %d: %w", size, err)
	}
	if st.origin == "" {
		origin, ok, err := tx.Meta(metaLogOrigin)
		if err != nil {
			return nil, fmt.Errorf("read the log origin: %w", err)
		}
		if !ok {
			origin = c.signer.Origin()
			if err := tx.SetMeta(metaLogOrigin, origin); err != nil {
				return nil, fmt.Errorf("store the log origin: %w", err)
			}
		}
		st.origin = origin
	}
	note, err := c.signer.Sign([]byte(CheckpointText(st.origin, size, root)))
	if err != nil {
		return nil, fmt.Errorf("sign the log checkpoint at %d: %w", size, err)
	}
	if err := tx.InsertCheckpoint(size, note); err != nil {
		return nil, err
	}
	return note, nil
}
