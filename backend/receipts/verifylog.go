package receipts

import (
	"context"
	"fmt"
	"iter"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/store"
)

// memTree is a log rebuilt from the receipts, every stored hash in memory (64 bytes a receipt).
type memTree struct{ hashes []tlog.Hash }

func (m *memTree) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(m.hashes)) {
			return nil, fmt.Errorf("log hash %d is not in the rebuilt tree", x)
		}
		out[i] = m.hashes[x]
	}
	return out, nil
}

// add appends leaf n, data, and returns its stored hashes.
func (m *memTree) add(n int64, data []byte) ([]tlog.Hash, error) {
	hs, err := tlog.StoredHashes(n, data, m)
	if err != nil {
		return nil, err
	}
	m.hashes = append(m.hashes, hs...)
	return hs, nil
}

// verifyLog rebuilds the receipts log from the receipts (T15, T16): the stored hashes must be
// the rebuilt ones, and every checkpoint the node signed must verify with its keys, name the
// log's origin and sign the rebuilt root at its size. It returns the problem, or nil.
func verifyLog(ctx context.Context, db *store.DB, set keys.Set, rep *Report) (*Problem, error) {
	tree := &memTree{}
	moved, p, err := openMovedFrom(ctx, db, set)
	if p != nil || err != nil {
		return p, err
	}
	next, stop := iter.Pull2(db.AllLogHashes(ctx))
	defer stop()
	var leaves, n int64
	for r, err := range db.AllReceipts(ctx) {
		if err != nil {
			return nil, err
		}
		hs, err := tree.add(n, LeafData(r.JWS))
		if err != nil {
			return nil, err
		}
		if moved != nil && n < moved.cp.Size {
			if _, err := moved.tree.add(n, []byte(r.JWS)); err != nil {
				return nil, err
			}
		}
		n++
		for k, want := range hs {
			got, err, ok := next()
			if !ok && k == 0 {
				break // the log lags the receipts: a store from before the log, caught up at the next append
			}
			if err != nil {
				return nil, err
			}
			if !ok || got != want {
				return &Problem{Seq: r.Seq, ID: r.ID, Reason: "the receipts log does not hold this receipt as its leaf: its stored hashes were changed"}, nil
			}
			if k == len(hs)-1 {
				leaves = n
			}
		}
	}
	if _, err, ok := next(); ok || err != nil {
		return &Problem{Reason: fmt.Sprintf("the receipts log holds more than the %d receipts' leaves", n)}, err
	}
	rep.LogSize = leaves
	if p, err := moved.check(n); p != nil || err != nil {
		return p, err
	}
	return checkCheckpoints(ctx, db, set, tree, leaves, rep)
}

// movedLog is the log made of the receipts' JWS that store migration 7 moved to commitments:
// its newest checkpoint, and its tree rebuilt from the receipts.
type movedLog struct {
	cp   Checkpoint
	tree *memTree
}

// openMovedFrom reads the checkpoint of the log moved from, if the store keeps one: it must
// verify with the node keys.
func openMovedFrom(ctx context.Context, db *store.DB, set keys.Set) (*movedLog, *Problem, error) {
	note, ok, err := db.GetMeta(ctx, store.MetaLogMovedFrom)
	if !ok || err != nil {
		return nil, nil, err
	}
	cp, err := OpenCheckpoint([]byte(note), set, "")
	if err != nil {
		return nil, &Problem{Reason: "the checkpoint of the log moved to commitments does not verify: " + err.Error()}, nil
	}
	return &movedLog{cp: cp, tree: &memTree{}}, nil, nil
}

// check says whether the first receipts, of n, make the root the checkpoint of the log moved
// from signs: the move kept every receipt that log held (wire.md, "The receipts log").
func (m *movedLog) check(n int64) (*Problem, error) {
	if m == nil {
		return nil, nil
	}
	if m.cp.Size > n {
		return &Problem{Reason: fmt.Sprintf("the log moved to commitments held %d receipts; the store has %d", m.cp.Size, n)}, nil
	}
	root, err := tlog.TreeHash(m.cp.Size, m.tree)
	if err != nil {
		return nil, err
	}
	if root != m.cp.Root {
		return &Problem{Seq: m.cp.Size, Reason: fmt.Sprintf("the log %s moved to commitments signs a root its %d receipts do not make: receipts before the move were rewritten", m.cp.Origin, m.cp.Size)}, nil
	}
	return nil, nil
}

// checkCheckpoints checks every stored checkpoint against the tree rebuilt to leaves.
func checkCheckpoints(ctx context.Context, db *store.DB, set keys.Set, tree *memTree, leaves int64, rep *Report) (*Problem, error) {
	origin := ""
	for c, err := range db.Checkpoints(ctx) {
		if err != nil {
			return nil, err
		}
		bad := func(why string) (*Problem, error) {
			return &Problem{Seq: c.Size, Reason: fmt.Sprintf("the log checkpoint at size %d %s", c.Size, why)}, nil
		}
		cp, err := OpenCheckpoint(c.Note, set, origin)
		if err != nil {
			return bad("does not verify: " + err.Error())
		}
		origin = cp.Origin
		if cp.Size != c.Size || cp.Size > leaves {
			return bad(fmt.Sprintf("signs a tree of %d leaves; the log holds %d", cp.Size, leaves))
		}
		root, err := tlog.TreeHash(cp.Size, tree)
		if err != nil {
			return nil, err
		}
		if root != cp.Root {
			return bad("signs a root the receipts do not make: the log was rewritten")
		}
		rep.Checkpoints++
		rep.Origin = origin
	}
	return nil, nil
}
