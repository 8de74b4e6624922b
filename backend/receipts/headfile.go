package receipts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/aether/aether/backend/fsutil"
	"github.com/aether/aether/backend/store"
)

// HeadFile keeps the chain's head outside pact.sqlite (the data dir's receipts.head): a store
// replaced by an older backup, with its tail cut together with its own mark, or on storage that
// lost its last writes, no longer holds the receipt named there (docs/threats.md T4, T6, T14).
// Once the node has started, it is marked after every commit that appends receipts, before
// any of them is handed out (Ledger.KeepHead, durable.go).
type HeadFile struct {
	Path string

	mu   sync.Mutex
	f    *os.File // open for Mark, once it has written
	last Head     // what the file holds, as this process last wrote it
}

// headSize is the length of every record Mark writes, in place at offset 0: the JSON padded
// with spaces, so that a shorter record never leaves a longer one's end behind. It fits in one
// disk sector, which a power loss does not write half of.
const headSize = 256

// Read returns the head the file names; ok is false when there is no file.
func (h *HeadFile) Read() (c store.Checkpoint, ok bool, err error) {
	head, ok, err := h.read()
	return head.Checkpoint, ok, err
}

func (h *HeadFile) read() (head Head, ok bool, err error) {
	data, err := os.ReadFile(h.Path)
	if errors.Is(err, os.ErrNotExist) {
		return head, false, nil
	}
	if err != nil {
		return head, false, fmt.Errorf("read %s: %w", h.Path, err)
	}
	var rec struct {
		Seq  int64  `json:"seq"`
		Hash string `json:"hash"`
		ID   string `json:"id"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return head, false, fmt.Errorf("%s is unreadable (%v)", h.Path, err)
	}
	return Head{Checkpoint: store.Checkpoint{Seq: rec.Seq, Hash: rec.Hash}, ID: rec.ID}, true, nil
}

// Check refuses a ledger whose store lost receipts the file says were written: those receipts
// were handed out, and the node would sign other receipts at their seq (T6, T14).
func (h *HeadFile) Check(ctx context.Context, l *Ledger) error {
	head, ok, err := h.read()
	if err != nil {
		return fmt.Errorf("%w: move it aside to start without the check", err)
	}
	if !ok || head.Seq == 0 {
		return nil
	}
	if err := l.Confirm(ctx, head.Checkpoint); err != nil {
		return fmt.Errorf("pact.sqlite lost receipts this node wrote: %w. %s. "+
			"Restore the newest pact.sqlite; to accept the loss and go on, move %s aside: the node then "+
			"continues the chain from the receipt pact.sqlite ends with, and signs other receipts at the lost seqs",
			err, heldBy(head), h.Path)
	}
	return nil
}

// heldBy names the last receipt the node marked: an agent may hold it (it was marked just
// before it was handed out).
func heldBy(head Head) string {
	id := ""
	if head.ID != "" {
		id = " " + head.ID
	}
	return fmt.Sprintf("The last receipt this node gave out (or was about to) is receipt %d%s (hash %s): an agent may hold it", head.Seq, id, head.Hash)
}

// Save records the ledger's head, when it moved since this process last marked it (at start,
// before the first append).
func (h *HeadFile) Save(ctx context.Context, l *Ledger) error {
	c, err := l.Head(ctx)
	if err != nil {
		return err
	}
	head := Head{Checkpoint: c}
	if c.Seq > 0 {
		r, err := l.db.ReceiptAt(ctx, c.Seq)
		if err != nil {
			return err
		}
		head.ID = r.ID
	}
	return h.Mark(head)
}

// Mark records head, durably, before it returns: one write in place and one fdatasync, no
// rename (a rename costs two more syncs). A file not there yet is made whole, by rename: a
// kill while it is made leaves no file rather than an empty one.
func (h *HeadFile) Mark(head Head) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f != nil && head == h.last {
		return nil
	}
	rec, err := json.Marshal(struct {
		Seq  int64  `json:"seq"`
		Hash string `json:"hash"`
		ID   string `json:"id,omitempty"`
	}{head.Seq, head.Hash, head.ID})
	if err != nil {
		return err
	}
	if len(rec) >= headSize {
		return fmt.Errorf("mark %s: the head record is %d bytes, over %d", h.Path, len(rec), headSize-1)
	}
	rec = append(append(rec, bytes.Repeat([]byte(" "), headSize-1-len(rec))...), '\n')
	if err := h.write(rec); err != nil {
		return fmt.Errorf("mark %s: %w", h.Path, err)
	}
	h.last = head
	return nil
}

// write puts rec in the file, durably: in place once the file is open, else by creating it
// whole (when it is not there) and opening it.
func (h *HeadFile) write(rec []byte) error {
	if h.f != nil {
		if _, err := h.f.WriteAt(rec, 0); err != nil {
			return err
		}
		return fsutil.DataSync(h.f)
	}
	f, err := os.OpenFile(h.Path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		if err := fsutil.WriteFileAtomic(h.Path, rec, 0o600); err != nil {
			return err
		}
		h.f, err = os.OpenFile(h.Path, os.O_RDWR, 0)
		return err
	}
	if err != nil {
		return err
	}
	h.f = f
	return h.write(rec)
}

// Close closes the file; a later Mark opens it again.
func (h *HeadFile) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f == nil {
		return nil
	}
	err := h.f.Close()
	h.f = nil
	return err
}
