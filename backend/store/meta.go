package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"gorm.io/gorm"
)

// metaHighWater is the meta key of the receipt chain's high-water mark.
const metaHighWater = "receipts.high_water"

// Checkpoint names one point of the receipt chain: the receipt with this seq has this hash.
type Checkpoint struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

// GetMeta reads a meta value; ok is false when the key is not set.
func (db *DB) GetMeta(ctx context.Context, key string) (value string, ok bool, err error) {
	var vals []string
	if err := db.read(ctx).Raw(`SELECT value FROM meta WHERE key = ?`, key).Scan(&vals).Error; err != nil {
		return "", false, fmt.Errorf("read meta %s: %w", key, err)
	}
	if len(vals) == 0 {
		return "", false, nil
	}
	return vals[0], true, nil
}

// SetMeta writes a meta value.
func (db *DB) SetMeta(ctx context.Context, key, value string) error {
	err := db.write(ctx, func(tx *gorm.DB) error { return setMeta(tx, key, value) })
	if err != nil {
		return fmt.Errorf("write meta %s: %w", key, err)
	}
	return nil
}

// Meta reads a meta value in the transaction; ok is false when the key is not set.
func (t *Tx) Meta(key string) (value string, ok bool, err error) {
	switch err := queryRow(t.tx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&value); {
	case errors.Is(err, sql.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("read meta %s: %w", key, err)
	}
	return value, true, nil
}

// SetMeta writes a meta value in the transaction.
func (t *Tx) SetMeta(key, value string) error { return setMeta(t.tx, key, value) }

func setMeta(tx *gorm.DB, key, value string) error {
	return tx.Exec(`INSERT INTO meta (key, value) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value).Error
}

// ReceiptHighWater is the chain head recorded in meta by the last write of receipts,
// in the same transaction as the receipts. ok is false before the first receipt.
//
// What it can detect: receipts deleted from the tail, or the receipts table
// restored from elsewhere, while meta was left alone. What it cannot: the whole
// file replaced by an older copy (its meta is older too), or a tail cut by someone
// who also rewrites this row. Those need a high-water mark kept outside the file:
// one the owner wrote down (`aether receipts verify --expect-seq N --expect-hash H`),
// or a receipt a counterparty holds.
func (db *DB) ReceiptHighWater(ctx context.Context) (hw Checkpoint, ok bool, err error) {
	hw, ok, err = readHighWater(db.read(ctx))
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("read receipts high-water mark: %w", err)
	}
	return hw, ok, nil
}

// readHighWater reads the mark inside a transaction (or snapshot).
func readHighWater(tx *gorm.DB) (hw Checkpoint, ok bool, err error) {
	var vals []string
	if err := tx.Raw(`SELECT value FROM meta WHERE key = ?`, metaHighWater).Scan(&vals).Error; err != nil {
		return Checkpoint{}, false, err
	}
	if len(vals) == 0 {
		return Checkpoint{}, false, nil
	}
	if err := json.Unmarshal([]byte(vals[0]), &hw); err != nil {
		return Checkpoint{}, false, fmt.Errorf("decode %s: %w", metaHighWater, err)
	}
	return hw, true, nil
}

// MoveHighWater moves the high-water mark from where the chain's tail was, from (seq 0: no
// mark yet), to where receipts just appended leave it, to; a mark that is not at from was
// changed by someone else (ErrHighWater).
func (t *Tx) MoveHighWater(from, to Checkpoint) error { return moveHighWater(t.tx, from, to) }

func moveHighWater(tx *gorm.DB, from, to Checkpoint) error {
	v, err := json.Marshal(to)
	if err != nil {
		return err
	}
	if from.Seq == 0 {
		return setMeta(tx, metaHighWater, string(v))
	}
	old, err := json.Marshal(from)
	if err != nil {
		return err
	}
	n, err := exec(tx, `UPDATE meta SET value = ? WHERE key = ? AND value = ?`, string(v), metaHighWater, string(old))
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("%w: the mark is no longer at seq %d", ErrHighWater, from.Seq)
	}
	return nil
}

// ErrHighWater means the receipts table and the high-water mark in meta disagree:
// the tail of the chain was removed (or the mark edited). The node must not
// extend such a chain.
var ErrHighWater = errors.New("receipt chain does not reach its high-water mark")

// checkHighWater compares the chain's tail with the mark.
func checkHighWater(tail Checkpoint, hw Checkpoint, hwOK bool) error {
	switch {
	case !hwOK && tail.Seq == 0:
		return nil
	case !hwOK:
		return fmt.Errorf("%w: %d receipts but no mark", ErrHighWater, tail.Seq)
	case hw != tail:
		return fmt.Errorf("%w: chain ends at seq %d, the mark says seq %d (hash %.12s…)", ErrHighWater, tail.Seq, hw.Seq, hw.Hash)
	}
	return nil
}
