package receipts

import (
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
// replaced by an older backup, or with its tail cut together with its own mark, no longer holds
// the receipt named there (docs/threats.md T4, T6).
type HeadFile struct {
	Path string

	mu   sync.Mutex
	last store.Checkpoint // what the file holds, as this process last wrote it
}

// Read returns the head the file names; ok is false when there is no file.
func (h *HeadFile) Read() (c store.Checkpoint, ok bool, err error) {
	data, err := os.ReadFile(h.Path)
	if errors.Is(err, os.ErrNotExist) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("read %s: %w", h.Path, err)
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, false, fmt.Errorf("%s is unreadable (%v)", h.Path, err)
	}
	return c, true, nil
}

// Check refuses a ledger whose store lost receipts the file says were written.
func (h *HeadFile) Check(ctx context.Context, l *Ledger) error {
	c, ok, err := h.Read()
	if err != nil {
		return fmt.Errorf("%w: move it aside to start without the check", err)
	}
	if !ok || c.Seq == 0 {
		return nil
	}
	if err := l.Confirm(ctx, c); err != nil {
		return fmt.Errorf("pact.sqlite lost receipts this node wrote: %w. "+
			"Restore the newest pact.sqlite; to accept the loss and go on, move %s aside", err, h.Path)
	}
	return nil
}

// Save records the ledger's head, when it moved since the last Save.
func (h *HeadFile) Save(ctx context.Context, l *Ledger) error {
	c, err := l.Head(ctx)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if c == h.last {
		return nil
	}
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(h.Path, data, 0o600); err != nil {
		return err
	}
	h.last = c
	return nil
}
