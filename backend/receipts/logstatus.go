package receipts

import (
	"context"
	"fmt"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/store"
)

// LogStatus is the receipts log as its owner reads it: its newest checkpoint, whether that
// checkpoint holds, and its witnesses (docs/wire.md, "The receipts log").
type LogStatus struct {
	Checkpoint Checkpoint
	// Time is when the checkpoint was signed: in the write of its last receipt, so that
	// receipt's signing time.
	Time time.Time
	// Problem is why the checkpoint does not hold ("" when it does): it must verify with the
	// node's keys (a retired one within its rotation's bound, T13) and sign the root of the
	// tree the node stores at its size.
	Problem   string
	Witnesses int
	Agents    []store.Witnessed
}

// LogStatus reads the newest checkpoint and checks it against the stored tree: O(log size)
// hashes read, not the rebuild `receipts verify` makes (VerifyDB). ok is false before the
// log's first checkpoint.
func (l *Ledger) LogStatus(ctx context.Context, h keys.History) (st LogStatus, ok bool, err error) {
	size, signed, ok, err := l.db.LatestCheckpoint(ctx)
	if err != nil || !ok {
		return st, ok, err
	}
	if st.Witnesses, st.Agents, err = l.db.Witnesses(ctx); err != nil {
		return st, true, err
	}
	last, err := l.db.ReceiptAt(ctx, size)
	if err != nil {
		return st, true, fmt.Errorf("the log checkpoint's last receipt %d: %w", size, err)
	}
	if r, err := fromRow(*last); err == nil && r.Claims.IssuedAt != nil {
		st.Time = r.Claims.IssuedAt.Time
	}
	if st.Checkpoint, err = OpenCheckpointOf(signed, h, ""); err != nil {
		st.Problem = err.Error()
		text, _, _ := strings.Cut(string(signed), "\n\n")
		st.Checkpoint, _ = ParseCheckpoint(text + "\n") // shown as it claims to be
		return st, true, nil
	}
	root, err := tlog.TreeHash(size, l.db.LogHashes(ctx))
	switch {
	case err != nil:
		st.Problem = fmt.Sprintf("the stored tree of %d receipts cannot be read: %v", size, err)
	case st.Checkpoint.Size != size || root != st.Checkpoint.Root:
		st.Problem = fmt.Sprintf("the checkpoint of %d receipts does not sign the stored tree's root", size)
	}
	return st, true, nil
}
