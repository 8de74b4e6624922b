package node

import (
	"context"
	"time"
)

// every runs fn now and then every d until ctx ends (a background job of the node).
func (n *Node) every(ctx context.Context, d time.Duration, fn func(context.Context)) {
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		fn(ctx)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fn(ctx)
			}
		}
	}()
}

// sweep expires device flows past their time (consent emits the events).
func (n *Node) sweep(ctx context.Context) {
	if err := n.consent.Sweep(ctx); err != nil && ctx.Err() == nil {
		n.log.Warn("consent sweep failed", "err", err)
	}
}

// pruneTasks deletes what no one may keep: tasks that never ran a turn once their device flow
// is over (K4), and finished tasks older than the policy's taskRetentionDays (K5). Receipts
// stay.
func (n *Node) pruneTasks(ctx context.Context) {
	now := time.Now()
	if _, err := n.db.ExpireWaiting(ctx, now); err != nil && ctx.Err() == nil {
		n.log.Warn("could not expire waiting tasks", "err", err)
	}
	p := n.policy.Current().Policy
	if p == nil || p.Pact == nil {
		return // no policy served, no retention known: keep everything
	}
	if k, err := n.db.PruneFinished(ctx, now.Add(-p.Pact.TaskRetention())); err != nil && ctx.Err() == nil {
		n.log.Warn("could not prune finished tasks", "err", err)
	} else if k > 0 {
		n.log.Info("finished tasks past their retention deleted", "tasks", k, "retentionDays", int(p.Pact.TaskRetention()/(24*time.Hour)))
	}
}
