package store

import (
	"context"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"gorm.io/gorm"

	"github.com/aether/aether/backend/domain"
)

// What an agent keeps on the node before the owner approved it: tasks that never ran a turn
// (AUTH_REQUIRED, and what a denial, an expiry or a cancel left of one). They are capped per
// agent and per issuer site, and live WaitingTTL after their last change unless the agent has a
// device flow pending for their brand (docs/threats.md, K2–K5).
const (
	MaxWaitingPerAgent = 10
	MaxWaitingPerSite  = 100
	// WaitingTTL is the longest a device flow lives (docs/wire.md): a task kept for one expires
	// with it.
	WaitingTTL = 10 * time.Minute
)

// WaitingCapError refuses a new waiting task over one of the caps.
type WaitingCapError struct {
	Scope string // "agent" or "issuer"
	Limit int
	Retry time.Duration // until the oldest counted task expires
}

func (e *WaitingCapError) Error() string {
	return fmt.Sprintf("this %s already has %d tasks waiting for the owner's consent", e.Scope, e.Limit)
}

// RetryAfter is how long until a slot frees, at least a second.
func (e *WaitingCapError) RetryAfter() time.Duration { return max(e.Retry, time.Second) }

// SaveWaiting stores a task that waits for consent for owner on brand: a new one when prev is
// taskstore.TaskVersionMissing, within the caps (a *WaitingCapError over them), else over the
// stored version prev of the owner's own task. site is the issuer's registrable domain.
func (db *DB) SaveWaiting(ctx context.Context, brand, owner, site string, task *a2a.Task, prev taskstore.TaskVersion) (taskstore.TaskVersion, error) {
	if owner == "" || task == nil || task.ID == "" {
		return taskstore.TaskVersionMissing, fmt.Errorf("save waiting task: no owner or task id: %w", a2a.ErrInvalidParams)
	}
	data, err := encodeTask(task)
	if err != nil {
		return taskstore.TaskVersionMissing, err
	}
	version := int64(1)
	err = db.write(ctx, func(tx *gorm.DB) error {
		now := db.Now()
		if prev != taskstore.TaskVersionMissing {
			res := tx.Exec(`UPDATE tasks SET state = ?, status_ns = ?, version = version + 1, data = ?, updated_at = ?
				WHERE id = ? AND owner = ? AND brand = ? AND version = ?`,
				string(task.Status.State), statusNS(task.Status.Timestamp), data, ms(now), task.ID, owner, brand, int64(prev))
			if res.Error == nil && res.RowsAffected == 0 {
				return taskstore.ErrConcurrentModification
			}
			version = int64(prev) + 1
			return res.Error
		}
		for _, c := range []struct {
			scope, where string
			arg          string
			limit        int
		}{{"agent", "owner = ?", owner, MaxWaitingPerAgent}, {"issuer", "issuer_site = ?", site, MaxWaitingPerSite}} {
			var got struct {
				N      int64
				Oldest *int64
			}
			if err := tx.Raw("SELECT count(*) AS n, min(updated_at) AS oldest FROM tasks WHERE ran = 0 AND "+c.where, c.arg).Scan(&got).Error; err != nil {
				return err
			}
			if got.N >= int64(c.limit) {
				retry := WaitingTTL
				if got.Oldest != nil {
					retry = fromMS(*got.Oldest).Add(WaitingTTL).Sub(now)
				}
				return &WaitingCapError{Scope: c.scope, Limit: c.limit, Retry: retry}
			}
		}
		var n int64
		if err := tx.Raw("SELECT count(*) FROM tasks WHERE id = ?", task.ID).Scan(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return taskstore.ErrTaskAlreadyExists
		}
		return tx.Exec(`INSERT INTO tasks (id, owner, brand, context_id, state, status_ns, version, data, created_at, updated_at, issuer_site, ran)
			VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, 0)`,
			task.ID, owner, brand, task.ContextID, string(task.Status.State), statusNS(task.Status.Timestamp), data, ms(now), ms(now), site).Error
	})
	if err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("save waiting task %s: %w", task.ID, err)
	}
	return taskstore.TaskVersion(version), nil
}

// ExpireWaiting deletes the tasks that never ran a turn and have not changed for WaitingTTL,
// except those whose agent has a device flow pending for their brand: those expire with it.
// It returns how many it deleted.
func (db *DB) ExpireWaiting(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	err := db.write(ctx, func(tx *gorm.DB) error {
		var flows []flowRow
		if err := tx.Raw(`SELECT agent_iss, agent_sub, brand FROM device_flows WHERE status = 'pending' AND expires_at > ?`, ms(now)).
			Scan(&flows).Error; err != nil {
			return err
		}
		pending := make(map[[2]string]bool, len(flows))
		for _, f := range flows {
			pending[[2]string{domain.Agent{Issuer: f.AgentIss, Subject: f.AgentSub}.Key(), f.Brand}] = true
		}
		var rows []taskRow
		if err := tx.Raw(`SELECT id, owner, brand FROM tasks WHERE ran = 0 AND updated_at < ? AND state <> ? AND state <> ?`,
			ms(now.Add(-WaitingTTL)), string(a2a.TaskStateSubmitted), string(a2a.TaskStateWorking)).Scan(&rows).Error; err != nil {
			return err
		}
		var ids []string
		for _, r := range rows {
			if !pending[[2]string{r.Owner, r.Brand}] {
				ids = append(ids, r.ID)
			}
		}
		for len(ids) > 0 {
			batch := ids[:min(len(ids), 500)]
			ids = ids[len(batch):]
			res := tx.Exec("DELETE FROM tasks WHERE id IN ?", batch)
			if res.Error != nil {
				return res.Error
			}
			n += res.RowsAffected
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("expire waiting tasks: %w", err)
	}
	return n, nil
}

// PruneFinished deletes the tasks that ran a turn, are in a terminal state and have not changed
// since before: the task retention of policy.json. Turns and receipts are kept (receipts are
// append-only). It deletes in writes of pruneBatch tasks, so other writers wait for one batch
// at most, and returns how many it deleted.
func (db *DB) PruneFinished(ctx context.Context, before time.Time) (int64, error) {
	var total int64
	for {
		var n int64
		err := db.write(ctx, func(tx *gorm.DB) error {
			res := tx.Exec(`DELETE FROM tasks WHERE id IN (SELECT id FROM tasks WHERE ran = 1 AND updated_at < ? AND state IN ? LIMIT ?)`,
				ms(before), terminalStates, pruneBatch)
			n = res.RowsAffected
			return res.Error
		})
		if err != nil {
			return total, fmt.Errorf("prune finished tasks: %w", err)
		}
		total += n
		if n < pruneBatch {
			return total, nil
		}
	}
}

const pruneBatch = 1000

var terminalStates = []string{
	string(a2a.TaskStateCompleted), string(a2a.TaskStateFailed), string(a2a.TaskStateCanceled), string(a2a.TaskStateRejected),
}
