package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/aether/aether/backend/fsutil"
	"github.com/aether/aether/backend/store"
)

// fileHead keeps the receipt chain's head outside pact.sqlite: a store
// replaced by an older backup, or with its tail cut together with its own
// mark, no longer holds the receipt named here (T4, T6).
const fileHead = "receipts.head"

// checkHead refuses a receipt store that lost receipts the node once wrote.
func (n *Node) checkHead(ctx context.Context) error {
	c, ok, err := readHead(n.path(fileHead))
	if err != nil {
		return fmt.Errorf("%w: move it aside to start without the check", err)
	}
	if !ok || c.Seq == 0 {
		return nil
	}
	if err := n.ledger.Confirm(ctx, c); err != nil {
		return fmt.Errorf("pact.sqlite lost receipts this node wrote: %w. "+
			"Restore the newest pact.sqlite; to accept the loss and go on, move %s aside", err, n.path(fileHead))
	}
	return nil
}

// readHead reads a receipts.head file; ok is false when there is none.
func readHead(path string) (c store.Checkpoint, ok bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, false, fmt.Errorf("%s is unreadable (%v)", path, err)
	}
	return c, true, nil
}

// saveHead records the chain's head (after start, every few seconds while
// receipts are written, and at stop).
func (n *Node) saveHead(ctx context.Context) error {
	c, err := n.ledger.Head(ctx)
	if err != nil {
		return err
	}
	n.headMu.Lock()
	defer n.headMu.Unlock()
	if c == n.head {
		return nil
	}
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(n.path(fileHead), data, 0o600); err != nil {
		return err
	}
	n.head = c
	return nil
}

func (n *Node) keepHead(ctx context.Context) {
	if err := n.saveHead(ctx); err != nil && ctx.Err() == nil {
		n.log.Warn("could not record the receipts head", "err", err)
	}
}
