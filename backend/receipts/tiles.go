package receipts

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/aether/aether/backend/store"
)

// TileHeight is the height of the log's tiles (C2SP tlog-tiles: 256 hashes a tile).
const TileHeight = 8

// ErrNoTile: the tile or entry bundle asked for is not in the tree of the newest checkpoint.
var ErrNoTile = errors.New("not in the log's newest checkpoint")

// LatestCheckpoint is the newest signed checkpoint of the log (ok false before the first).
func (l *Ledger) LatestCheckpoint(ctx context.Context) (note []byte, ok bool, err error) {
	_, note, ok, err = l.db.LatestCheckpoint(ctx)
	return note, ok, err
}

// Tile is the data of tile t (t.L ≥ 0: hashes; t.L == -1: an entry bundle) of the tree of the
// newest checkpoint, for C2SP tlog-tiles (docs/wire.md, "The receipts log").
func (l *Ledger) Tile(ctx context.Context, t tlog.Tile) ([]byte, error) {
	size, _, ok, err := l.db.LatestCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	if t.H != TileHeight || !ok || !tileIn(t, size) {
		return nil, ErrNoTile
	}
	if t.L >= 0 {
		return tlog.ReadTileData(t, l.db.LogHashes(ctx))
	}
	width := int64(t.W) // 256 for a full tile, as tlog.ParseTilePath reads it
	entries, err := l.db.LogEntries(ctx, t.N<<TileHeight, width)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(entries)*(2+len(entries[0])))
	for _, e := range entries { // each a 32-byte commitment (LeafData)
		out = binary.BigEndian.AppendUint16(out, uint16(len(e)))
		out = append(out, e...)
	}
	return out, nil
}

// tileIn reports whether the tree of size leaves holds every hash (or entry) of tile t.
func tileIn(t tlog.Tile, size int64) bool {
	level := max(t.L, 0)
	if t.N < 0 || level > 63/TileHeight {
		return false
	}
	have := size >> (uint(level) * TileHeight) // hashes at the tile's level
	// N·256 + W ≤ have, written so that no N overflows it (threats.md L8)
	return t.W > 0 && int64(t.W) <= have && t.N <= (have-int64(t.W))>>TileHeight
}

// withProof is a stored receipt with its proof against the newest checkpoint (none when the
// log has no checkpoint holding it yet).
func (l *Ledger) withProof(ctx context.Context, row store.Receipt) (*Receipt, error) {
	r, err := fromRow(row)
	if err != nil {
		return nil, err
	}
	size, note, ok, err := l.db.LatestCheckpoint(ctx)
	if err != nil || !ok || size < row.Seq {
		return r, err
	}
	p, err := tlog.ProveRecord(size, row.Seq-1, l.db.LogHashes(ctx))
	if err != nil {
		return nil, fmt.Errorf("prove receipt %d in the log: %w", row.Seq, err)
	}
	r.proof = &LogProof{Index: row.Seq - 1, Hashes: p, Checkpoint: note}
	return r, nil
}
