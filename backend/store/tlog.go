package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

// The rows of the receipts log (docs/wire.md, "The receipts log"): its stored hashes
// (tlog.StoredHashes, by index) in log_hashes and its signed checkpoints in log_checkpoints.
// The ledger (backend/receipts) decides what goes in them, in the receipts' own write.

// MetaLogMovedFrom is the meta key of the newest checkpoint of the log made of the receipts'
// JWS, kept by migration 7 when it moved the log to commitments.
const MetaLogMovedFrom = "log.moved_from"

// ErrLog: the receipts log and the receipts table disagree (hashes missing or beyond the
// receipts): the node must not extend either.
var ErrLog = errors.New("the receipts log does not match the receipts")

// LogHashCount is how many hashes log_hashes holds.
func (t *Tx) LogHashCount() (int64, error) {
	var count int64
	if err := queryRow(t.tx, `SELECT count(*) FROM log_hashes`).Scan(&count); err != nil {
		return 0, fmt.Errorf("count log hashes: %w", err)
	}
	return count, nil
}

// ReadLogHashes reads the stored hashes at indexes, in their order, this transaction's own
// included (a tlog.HashReader).
func (t *Tx) ReadLogHashes(indexes []int64) ([]tlog.Hash, error) {
	return readHashes(func(q string, args ...any) (*sql.Rows, error) {
		return t.tx.Statement.ConnPool.QueryContext(t.tx.Statement.Context, q, args...)
	}, indexes)
}

// InsertLogHashes stores hashes at the indexes from first on, with one statement.
func (t *Tx) InsertLogHashes(first int64, hashes []tlog.Hash) error {
	if len(hashes) == 0 {
		return nil
	}
	args := make([]any, 0, 2*len(hashes))
	for k, h := range hashes {
		args = append(args, first+int64(k), h[:])
	}
	q := `INSERT INTO log_hashes (idx, hash) VALUES (?, ?)` + strings.Repeat(", (?, ?)", len(hashes)-1)
	_, err := exec(t.tx, q, args...)
	return err
}

// ReceiptsJWS reads the JWS of the receipts after seq after, up to seq upto and at most 512 of
// them, in seq order.
func (t *Tx) ReceiptsJWS(after, upto int64) ([]string, error) {
	var jws []string
	if err := t.tx.Raw(`SELECT jws FROM receipts WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT 512`, after, upto).Scan(&jws).Error; err != nil {
		return nil, fmt.Errorf("read receipts for the log: %w", err)
	}
	return jws, nil
}

// InsertCheckpoint stores the signed checkpoint note of the log of size leaves.
func (t *Tx) InsertCheckpoint(size int64, note []byte) error {
	if _, err := exec(t.tx, `INSERT INTO log_checkpoints (size, note) VALUES (?, ?)`, size, string(note)); err != nil {
		return fmt.Errorf("store the log checkpoint at %d: %w", size, err)
	}
	return nil
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
