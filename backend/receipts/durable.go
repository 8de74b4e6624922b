package receipts

import (
	"errors"
	"fmt"
	"sync"

	"github.com/aether/aether/backend/store"
)

// When a receipt is kept (docs/threats.md T8, T11, T14, V2), in the order of its write. This
// is the one place that says it; the code that does each step (chain.go, ledger.go, the
// store's group commit) points here.
//
//  1. Start records the turn as running, durably, before any of its work runs (T8): a turn
//     that never reaches Append is found by Recover at the next start and gets a failed receipt.
//     A turn that ends before any of its work started (Turn.Unstarted: refused before Codex
//     was let start) is recorded in its receipt's own write instead, both or neither: there
//     is nothing to recover for it, and it costs one commit, not two.
//  2. Append signs the receipt inside one write of the store's group commit (chain.write, run by
//     store.DB.Commit): the chain's tail is read there and checked against the store's
//     high-water mark (or, kept from the chain's last write, confirmed once a transaction), so
//     the committer, running one write after another, alone decides the chain's order and no
//     two receipts share a seq or a prev (T11, and UNIQUE columns behind it); whether the owner
//     revoked the turn's grant is read in that same write, so a revocation committed before the
//     receipt is in it (V2). The same write ends the turn, inserts the receipt, adds its
//     commitment to the log, signs the log's checkpoint (log.go) and moves the high-water mark.
//  3. The write's commit is durable (synchronous=FULL) before anyone of it is answered (T8). A
//     plain send's answer is made while that commit is made (store.DB.CommitAhead, the task's
//     row in the same write), and waits on Pending.Durable.
//  4. receipts.head holds the receipt (T14): once its commit is durable, the appender marks the
//     newest durable head it knows, one fdatasync serving every append whose commit is durable by
//     then, while the committer already runs the next commit. Only then does Append return, or
//     Pending.Durable, and the receipt may leave the node. A mark that fails withholds the
//     receipt (ErrHeadMark), not the other writes of its commit.

// ErrHeadMark: the receipts were committed, but receipts.head could not record them, so they
// must not be handed out (T14).
var ErrHeadMark = errors.New("the receipts were committed, but the head mark could not record them")

// Head is a point of the chain and the id of the receipt there (empty before the first
// receipt), as receipts.head names it.
type Head struct {
	store.Checkpoint
	ID string
}

// headOf is where r leaves the chain.
func headOf(r *Receipt) Head {
	return Head{Checkpoint: store.Checkpoint{Seq: r.Seq, Hash: r.Hash}, ID: r.ID}
}

// marker marks receipts.head after commits (KeepHead): one mark at a time, each of the newest
// durable head, so that appends whose commits became durable together share it.
type marker struct {
	file *HeadFile

	newestMu sync.Mutex
	newest   Head // the newest head whose commit is durable

	mu     sync.Mutex // held while marking
	marked int64      // the seq the file holds, as marked here
}

// hold returns once receipts.head holds h, whose commit is durable.
func (m *marker) hold(h Head) error {
	if m == nil {
		return nil
	}
	m.newestMu.Lock()
	if h.Seq > m.newest.Seq {
		m.newest = h
	}
	m.newestMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.marked >= h.Seq {
		return nil
	}
	m.newestMu.Lock()
	head := m.newest
	m.newestMu.Unlock()
	if err := m.file.Mark(head); err != nil {
		return fmt.Errorf("%w: %w", ErrHeadMark, err)
	}
	m.marked = head.Seq
	return nil
}

// KeepHead makes every append from now on return only once file holds its receipt (T14).
// Call it before serving turns, once file has been checked against the ledger (HeadFile.Check).
func (l *Ledger) KeepHead(file *HeadFile) {
	l.mark.Store(&marker{file: file})
}

// Pending is a receipt written in a commit under way (AppendCreatingTask).
type Pending struct {
	commit *store.Pending
	mark   *marker
	head   Head

	once sync.Once
	err  error
}

// Durable returns once the receipt's commit is durable and receipts.head holds it (nil), or
// why not; any number of goroutines may wait on it.
func (p *Pending) Durable() error {
	p.once.Do(func() {
		if p.err = p.commit.Durable(); p.err != nil {
			p.err = fmt.Errorf("append receipts: %w", p.err)
		} else {
			p.err = p.mark.hold(p.head)
		}
	})
	return p.err
}
