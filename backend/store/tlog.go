package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
	"gorm.io/gorm"
)

// The receipts log (docs/wire.md, "The receipts log"): every receipt is also a leaf of an
// append-only Merkle tree (RFC 6962 hashing, golang.org/x/mod/sumdb/tlog), leaf n being the
// receipt with seq n+1 and its data a commitment to the receipt, LeafData: the log tells no
// one what a receipt says, and whoever holds the receipt can prove it is in. The tree's stored hashes
// (tlog.StoredHashes) go into log_hashes and a signed checkpoint of the tree into
// log_checkpoints in the receipts' own write, so the durable-before-answer rule holds for both.

// metaLogOrigin is the meta key of the log's origin, fixed by its first checkpoint.
const metaLogOrigin = "log.origin"

// MetaLogMovedFrom is the meta key of the newest checkpoint of the log made of the receipts'
// JWS, kept by migration 7 when it moved the log to commitments.
const MetaLogMovedFrom = "log.moved_from"

// MaxReceipt is the largest receipt (compact JWS) the node stores: the ledger makes what a
// turn did fit it (docs/wire.md, "What the turn did"), so that every reader can bound a receipt.
const MaxReceipt = 1<<16 - 1

// LeafData is the log entry of the receipt jws: the SHA-256 of its compact JWS (its chain
// hash, as bytes). It hides the claims: the JWS holds the node's signature, which no one can
// guess.
func LeafData(jws string) []byte {
	sum := sha256.Sum256([]byte(jws))
	return sum[:]
}

// ErrLog: the receipts log and the receipts table disagree (hashes missing or beyond the
// receipts): the node must not extend either.
var ErrLog = errors.New("the receipts log does not match the receipts")

// CheckpointSigner signs the log's checkpoints (SetCheckpointSigner).
type CheckpointSigner interface {
	// Origin is the origin a log takes at its first checkpoint; the store keeps it, and every
	// later checkpoint names the stored one.
	Origin() string
	// Sign signs a checkpoint's text as a note (C2SP signed-note) and returns the note.
	Sign(text []byte) ([]byte, error)
}

// LogProof places one receipt in the log: its leaf index (seq-1), the RFC 6962 inclusion
// proof of that leaf in the tree of Checkpoint, and that checkpoint, signed.
type LogProof struct {
	Index      int64
	Hashes     tlog.RecordProof
	Checkpoint []byte
}

// SetCheckpointSigner makes every write that appends receipts sign a checkpoint of the log as
// it leaves it, store it, and give each receipt its LogProof. Without one, leaves are added and
// no checkpoint is signed.
func (db *DB) SetCheckpointSigner(s CheckpointSigner) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.signer = s
}

func (db *DB) checkpointSigner() CheckpointSigner {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.signer
}

// txHashes reads stored hashes inside a transaction (its own writes included).
type txHashes struct{ tx *gorm.DB }

func (r txHashes) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	return readHashes(func(q string, args ...any) (*sql.Rows, error) {
		return r.tx.Statement.ConnPool.QueryContext(r.tx.Statement.Context, q, args...)
	}, indexes)
}

// memoHashes is txHashes remembering what it read and what the write added: the leaves'
// stored hashes, the checkpoint's root and the proofs of one write read the same few hashes.
type memoHashes struct {
	r    txHashes
	seen map[int64]tlog.Hash
}

func (m *memoHashes) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	var missing []int64
	for _, x := range indexes {
		if _, ok := m.seen[x]; !ok {
			missing = append(missing, x)
		}
	}
	got, err := m.r.ReadHashes(missing)
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

// readHashes reads the stored hashes at indexes, in their order, with one query.
func readHashes(query func(string, ...any) (*sql.Rows, error), indexes []int64) ([]tlog.Hash, error) {
	if len(indexes) == 0 {
		return nil, nil
	}
	args := make([]any, len(indexes))
	for i, x := range indexes {
		args[i] = x
	}
	rows, err := query(`SELECT idx, hash FROM log_hashes WHERE idx IN (?`+strings.Repeat(", ?", len(indexes)-1)+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("read log hashes: %w", err)
	}
	defer rows.Close()
	got := make(map[int64]tlog.Hash, len(indexes))
	for rows.Next() {
		var idx int64
		var b []byte
		if err := rows.Scan(&idx, &b); err != nil {
			return nil, fmt.Errorf("read log hashes: %w", err)
		}
		if len(b) != tlog.HashSize {
			return nil, fmt.Errorf("%w: log hash %d is %d bytes", ErrLog, idx, len(b))
		}
		got[idx] = tlog.Hash(b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read log hashes: %w", err)
	}
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		h, ok := got[x]
		if !ok {
			return nil, fmt.Errorf("%w: log hash %d is missing", ErrLog, x)
		}
		out[i] = h
	}
	return out, nil
}

// logLeaves is how many leaves the stored hashes hold, or ErrLog when their count is not
// that of a whole tree.
func logLeaves(tx *gorm.DB) (int64, error) {
	var count int64
	if err := queryRow(tx, `SELECT count(*) FROM log_hashes`).Scan(&count); err != nil {
		return 0, fmt.Errorf("count log hashes: %w", err)
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
		return 0, fmt.Errorf("%w: %d stored hashes are no whole tree", ErrLog, count)
	}
	return lo, nil
}

// addLeaves appends the receipts of batch (seqs from leaves+1 on) to the tree.
func addLeaves(tx *gorm.DB, r *memoHashes, leaves int64, jws []string) error {
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
		args := make([]any, 0, 2*len(hashes))
		for k, h := range hashes {
			args = append(args, base+int64(k), h[:])
			r.seen[base+int64(k)] = h
		}
		q := `INSERT INTO log_hashes (idx, hash) VALUES (?, ?)` + strings.Repeat(", (?, ?)", len(hashes)-1)
		if _, err := exec(tx, q, args...); err != nil {
			return fmt.Errorf("log leaf %d: %w", n, err)
		}
	}
	return nil
}

// catchUpLog brings the tree to the chain's tail (seq) before a write appends to it: a store
// made before the log (schema 4), or whose log migration 7 moved to commitments, gets every
// earlier receipt as a leaf once, in the write that appends its next receipt. More leaves
// than receipts is ErrLog.
func catchUpLog(tx *gorm.DB, ch *chain, seq int64) error {
	if ch.noLog {
		return nil
	}
	leaves, err := logLeaves(tx)
	if err != nil {
		return err
	}
	switch {
	case leaves == seq:
		return nil
	case leaves > seq:
		return fmt.Errorf("%w: %d leaves but the chain ends at seq %d", ErrLog, leaves, seq)
	}
	for leaves < seq {
		var jws []string
		if err := tx.Raw(`SELECT jws FROM receipts WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT 512`, leaves, seq).Scan(&jws).Error; err != nil {
			return fmt.Errorf("read receipts for the log: %w", err)
		}
		if len(jws) == 0 {
			return fmt.Errorf("%w: receipt %d is missing", ErrLog, leaves+1)
		}
		if err := addLeaves(tx, &memoHashes{r: txHashes{tx}, seen: map[int64]tlog.Hash{}}, leaves, jws); err != nil {
			return err
		}
		leaves += int64(len(jws))
	}
	return nil
}

// logReceipts adds batch's receipts to the tree and, with a signer, signs the checkpoint of the
// tree they leave and sets each receipt's Proof against it.
func logReceipts(tx *gorm.DB, ch *chain, batch []Receipt) error {
	if len(batch) == 0 || ch.noLog {
		return nil
	}
	signer := ch.signer
	leaves := batch[0].Seq - 1
	jws := make([]string, len(batch))
	for i, r := range batch {
		jws[i] = r.JWS
	}
	r := &memoHashes{r: txHashes{tx}, seen: map[int64]tlog.Hash{}}
	if err := addLeaves(tx, r, leaves, jws); err != nil {
		return err
	}
	if signer == nil {
		return nil
	}
	size := leaves + int64(len(batch))
	note, err := signCheckpoint(tx, ch, r, size)
	if err != nil {
		return err
	}
	for i := range batch {
		p, err := tlog.ProveRecord(size, batch[i].Seq-1, r)
		if err != nil {
			return fmt.Errorf("prove receipt %d in the log: %w", batch[i].Seq, err)
		}
		batch[i].Proof = &LogProof{Index: batch[i].Seq - 1, Hashes: p, Checkpoint: note}
	}
	return nil
}

// signCheckpoint signs and stores the checkpoint of the tree of size leaves.
func signCheckpoint(tx *gorm.DB, ch *chain, r tlog.HashReader, size int64) ([]byte, error) {
	root, err := tlog.TreeHash(size, r)
	if err != nil {
		return nil, fmt.Errorf("log root at %d: %w", size, err)
	}
	origin := ch.origin
	if origin == "" {
		var stored bool
		if origin, stored, err = logOrigin(tx, ch.signer); err != nil {
			return nil, err
		}
		if stored { // one set by this write is kept only once the write is (a savepoint may undo it)
			ch.origin = origin
		}
	}
	note, err := ch.signer.Sign([]byte(CheckpointText(origin, size, root)))
	if err != nil {
		return nil, fmt.Errorf("sign the log checkpoint at %d: %w", size, err)
	}
	if _, err := exec(tx, `INSERT INTO log_checkpoints (size, note) VALUES (?, ?)`, size, string(note)); err != nil {
		return nil, fmt.Errorf("store the log checkpoint at %d: %w", size, err)
	}
	return note, nil
}

// logOrigin is the stored origin (stored true), or the signer's, stored now, for a log's first
// checkpoint.
func logOrigin(tx *gorm.DB, signer CheckpointSigner) (origin string, stored bool, err error) {
	err = queryRow(tx, `SELECT value FROM meta WHERE key = ?`, metaLogOrigin).Scan(&origin)
	if err == nil {
		return origin, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", false, fmt.Errorf("read the log origin: %w", err)
	}
	origin = signer.Origin()
	if err := setMeta(tx, metaLogOrigin, origin); err != nil {
		return "", false, fmt.Errorf("store the log origin: %w", err)
	}
	return origin, false, nil
}

// CheckpointText is a C2SP tlog-checkpoint body: origin, tree size, base64 root hash.
func CheckpointText(origin string, size int64, root tlog.Hash) string {
	return origin + "\n" + strconv.FormatInt(size, 10) + "\n" + base64.StdEncoding.EncodeToString(root[:]) + "\n"
}

// LatestCheckpoint is the newest signed checkpoint (ok false before the first).
func (db *DB) LatestCheckpoint(ctx context.Context) (size int64, note []byte, ok bool, err error) {
	var s string
	err = db.read(ctx).Raw(`SELECT size, note FROM log_checkpoints ORDER BY size DESC LIMIT 1`).Row().Scan(&size, &s)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil, false, nil
	}
	if err != nil {
		return 0, nil, false, fmt.Errorf("read the latest log checkpoint: %w", err)
	}
	return size, []byte(s), true, nil
}

// StoredCheckpoint is one checkpoint the node signed.
type StoredCheckpoint struct {
	Size int64
	Note []byte
}

// Checkpoints iterates over every signed checkpoint, smallest tree first.
func (db *DB) Checkpoints(ctx context.Context) iter.Seq2[StoredCheckpoint, error] {
	return func(yield func(StoredCheckpoint, error) bool) {
		var after int64
		for {
			var rows []struct {
				Size int64
				Note string
			}
			if err := db.read(ctx).Raw(`SELECT size, note FROM log_checkpoints WHERE size > ? ORDER BY size LIMIT 512`, after).Scan(&rows).Error; err != nil {
				yield(StoredCheckpoint{}, fmt.Errorf("read log checkpoints after size %d: %w", after, err))
				return
			}
			for _, r := range rows {
				if !yield(StoredCheckpoint{Size: r.Size, Note: []byte(r.Note)}, nil) {
					return
				}
				after = r.Size
			}
			if len(rows) < 512 {
				return
			}
		}
	}
}

// AllLogHashes iterates over every stored hash of the committed log, by index.
func (db *DB) AllLogHashes(ctx context.Context) iter.Seq2[tlog.Hash, error] {
	return func(yield func(tlog.Hash, error) bool) {
		var after int64 = -1
		for {
			var rows []struct {
				Idx  int64
				Hash []byte
			}
			if err := db.read(ctx).Raw(`SELECT idx, hash FROM log_hashes WHERE idx > ? ORDER BY idx LIMIT 4096`, after).Scan(&rows).Error; err != nil {
				yield(tlog.Hash{}, fmt.Errorf("read log hashes after %d: %w", after, err))
				return
			}
			for _, r := range rows {
				if r.Idx != after+1 || len(r.Hash) != tlog.HashSize {
					yield(tlog.Hash{}, fmt.Errorf("%w: log hash %d is missing or not 32 bytes", ErrLog, after+1))
					return
				}
				if !yield(tlog.Hash(r.Hash), nil) {
					return
				}
				after = r.Idx
			}
			if len(rows) < 4096 {
				return
			}
		}
	}
}

// LogHashes reads stored hashes from the committed log (a tlog.HashReader).
func (db *DB) LogHashes(ctx context.Context) tlog.HashReader {
	return tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		return readHashes(func(q string, args ...any) (*sql.Rows, error) { return db.read(ctx).Raw(q, args...).Rows() }, indexes)
	})
}

// LogEntries reads the log entries from index start on, count of them: the receipts'
// LeafData in seq order, from their stored chain hashes.
func (db *DB) LogEntries(ctx context.Context, start, count int64) ([][]byte, error) {
	var hashes []string
	if err := db.read(ctx).Raw(`SELECT hash FROM receipts WHERE seq > ? ORDER BY seq LIMIT ?`, start, count).Scan(&hashes).Error; err != nil {
		return nil, fmt.Errorf("read log entries %d to %d: %w", start, start+count-1, err)
	}
	if int64(len(hashes)) != count {
		return nil, fmt.Errorf("read log entries %d to %d: %w: only %d", start, start+count-1, ErrLog, len(hashes))
	}
	out := make([][]byte, len(hashes))
	for i, h := range hashes {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("read log entry %d: %w: the receipt's hash %q is not a SHA-256", start+int64(i), ErrLog, h)
		}
		out[i] = b
	}
	return out, nil
}
