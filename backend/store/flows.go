package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/aether/aether/backend/domain"
)

var (
	// ErrFlowNotFound: no device flow with that id or device code.
	ErrFlowNotFound = errors.New("device flow not found")
	// ErrUserCodeTaken: another pending flow holds that user code; pick a new one.
	ErrUserCodeTaken = errors.New("user code held by another pending flow")
	// ErrAgentFlowCap: the agent already has as many pending flows as allowed.
	ErrAgentFlowCap = errors.New("too many pending device flows for this agent")
	// ErrSiteFlowCap: the agents of the flow's issuer site already have as many pending
	// flows as one site may have.
	ErrSiteFlowCap = errors.New("too many pending device flows for this issuer site")
	// ErrFlowCap: the node already has as many pending flows as allowed.
	ErrFlowCap = errors.New("too many pending device flows")
	// errFlowRaced would mean a flow changed status inside our own write
	// transaction; the single IMMEDIATE writer makes it impossible, the
	// conditional update makes it impossible to miss.
	errFlowRaced = errors.New("device flow changed status concurrently")
)

// DeviceFlow is one RFC 8628 device authorization request.
type DeviceFlow struct {
	ID             string
	DeviceCodeHash string // SHA-256 of the device code; the code itself is never stored
	UserCode       string // normalised: 8 letters, no dash
	Agent          domain.Agent
	Brand          domain.BrandID
	Scope          string
	Status         domain.FlowStatus
	Interval       time.Duration // whole seconds
	LastPollAt     *time.Time
	FailedGuesses  int
	Duration       string         // the lifetime the owner chose for the grant
	GrantID        domain.GrantID // set once approved
	CreatedAt      time.Time
	ExpiresAt      time.Time
	DecidedAt      *time.Time
}

// FlowLimits caps the pending (unexpired) flows per agent, per issuer site and in total.
type FlowLimits struct {
	PerAgent int
	PerSite  int
	Total    int
	// Site names an issuer's site (its registrable domain): the flow's agent shares PerSite
	// with every agent whose issuer has the same site. It must not use the DB.
	Site func(iss string) string
}

// FlowCapError is a cap CreateFlow hit. Cap is ErrAgentFlowCap, ErrSiteFlowCap or ErrFlowCap
// (errors.Is works on it), Limit the cap's value, and Until when the oldest flow it counted
// expires: a slot is free by then at the latest.
type FlowCapError struct {
	Cap   error
	Limit int
	Until time.Time
}

func (e *FlowCapError) Error() string { return e.Cap.Error() }
func (e *FlowCapError) Unwrap() error { return e.Cap }

// FlowUpdate decides one change to a flow inside its write transaction. g is the
// flow's grant (nil before approval). fn may change Status, Interval,
// LastPollAt, FailedGuesses, Duration and DecidedAt; other fields are ignored.
// A non-nil returned grant is inserted and linked to the flow. fn must not use
// the DB (its single writer is busy with this transaction) and should be quick;
// signing is fine.
//
// The change is committed even when fn returns an error: that error is the
// outcome to report (a counted wrong guess, a sticky slow_down), returned after
// the commit.
type FlowUpdate func(f *DeviceFlow, g *Grant) (*Grant, error)

type flowRow struct {
	ID             string            `gorm:"column:id"`
	DeviceCodeHash string            `gorm:"column:device_code_hash"`
	UserCode       string            `gorm:"column:user_code"`
	AgentIss       string            `gorm:"column:agent_iss"`
	AgentSub       string            `gorm:"column:agent_sub"`
	Brand          string            `gorm:"column:brand"`
	Scope          string            `gorm:"column:scope"`
	Status         domain.FlowStatus `gorm:"column:status"`
	IntervalS      int64             `gorm:"column:interval_s"`
	LastPollAt     *int64            `gorm:"column:last_poll_at"`
	FailedGuesses  int               `gorm:"column:failed_guesses"`
	Duration       string            `gorm:"column:duration"`
	GrantID        *string           `gorm:"column:grant_id"`
	CreatedAt      int64             `gorm:"column:created_at"`
	ExpiresAt      int64             `gorm:"column:expires_at"`
	DecidedAt      *int64            `gorm:"column:decided_at"`
}

func (r *flowRow) record() DeviceFlow {
	f := DeviceFlow{
		ID: r.ID, DeviceCodeHash: r.DeviceCodeHash, UserCode: r.UserCode,
		Agent: domain.Agent{Issuer: r.AgentIss, Subject: r.AgentSub}, Brand: domain.BrandID(r.Brand), Scope: r.Scope,
		Status: r.Status, Interval: time.Duration(r.IntervalS) * time.Second,
		LastPollAt: fromMSPtr(r.LastPollAt), FailedGuesses: r.FailedGuesses, Duration: r.Duration,
		CreatedAt: fromMS(r.CreatedAt), ExpiresAt: fromMS(r.ExpiresAt), DecidedAt: fromMSPtr(r.DecidedAt),
	}
	if r.GrantID != nil {
		f.GrantID = domain.GrantID(*r.GrantID)
	}
	return f
}

func flowRecords(rows []flowRow) []DeviceFlow {
	out := make([]DeviceFlow, len(rows))
	for i := range rows {
		out[i] = rows[i].record()
	}
	return out
}

const flowColumns = `id, device_code_hash, user_code, agent_iss, agent_sub, brand, scope, status, interval_s,
	last_poll_at, failed_guesses, duration, grant_id, created_at, expires_at, decided_at`

// CreateFlow inserts a new pending flow, refusing it with a *FlowCapError when the agent,
// its issuer site or the node already has lim pending unexpired flows (D2, F1), and with
// ErrUserCodeTaken when a pending flow holds the same user code (the partial unique index;
// D17).
func (db *DB) CreateFlow(ctx context.Context, f DeviceFlow, lim FlowLimits) error {
	err := db.write(ctx, func(tx *gorm.DB) error {
		now := ms(f.CreatedAt)
		var agent pendingCount
		if err := tx.Raw(`SELECT count(*) AS n, coalesce(min(expires_at), 0) AS first FROM device_flows
			WHERE agent_iss = ? AND agent_sub = ? AND status = 'pending' AND expires_at > ?`,
			f.Agent.Issuer, f.Agent.Subject, now).Scan(&agent).Error; err != nil {
			return err
		}
		if agent.N >= int64(lim.PerAgent) {
			return &FlowCapError{ErrAgentFlowCap, lim.PerAgent, fromMS(agent.First)}
		}
		// Pending flows are at most lim.Total, so reading them per issuer is cheap.
		var byIssuer []struct {
			Iss   string `gorm:"column:agent_iss"`
			N     int64  `gorm:"column:n"`
			First int64  `gorm:"column:first"`
		}
		if err := tx.Raw(`SELECT agent_iss, count(*) AS n, min(expires_at) AS first FROM device_flows
			WHERE status = 'pending' AND expires_at > ? GROUP BY agent_iss`, now).Scan(&byIssuer).Error; err != nil {
			return err
		}
		var siteN, total pendingCount
		mine := lim.Site(f.Agent.Issuer)
		for _, g := range byIssuer {
			c := pendingCount{g.N, g.First}
			total.add(c)
			if lim.Site(g.Iss) == mine {
				siteN.add(c)
			}
		}
		if siteN.N >= int64(lim.PerSite) {
			return &FlowCapError{ErrSiteFlowCap, lim.PerSite, fromMS(siteN.First)}
		}
		if total.N >= int64(lim.Total) {
			return &FlowCapError{ErrFlowCap, lim.Total, fromMS(total.First)}
		}
		err := tx.Exec(`INSERT INTO device_flows (`+flowColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, NULL, 0, '', NULL, ?, ?, NULL)`,
			f.ID, f.DeviceCodeHash, f.UserCode, f.Agent.Issuer, f.Agent.Subject, f.Brand, f.Scope,
			int64(f.Interval/time.Second), now, ms(f.ExpiresAt)).Error
		if err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed: device_flows.user_code") {
			return ErrUserCodeTaken
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("create device flow: %w", err)
	}
	return nil
}

// pendingCount is how many pending flows a cap counts, and when the first of them expires.
type pendingCount struct {
	N     int64 `gorm:"column:n"`
	First int64 `gorm:"column:first"`
}

func (c *pendingCount) add(o pendingCount) {
	if c.N == 0 || o.First < c.First {
		c.First = o.First
	}
	c.N += o.N
}

// UpdateFlow runs fn on the flow with the given id in one write transaction.
// It returns the flow as written and fn's outcome (see FlowUpdate).
func (db *DB) UpdateFlow(ctx context.Context, id string, fn FlowUpdate) (*DeviceFlow, error) {
	return db.updateFlow(ctx, "id = ?", id, fn)
}

// UpdateFlowByDeviceCode is UpdateFlow for the flow whose device code hashes to hash.
func (db *DB) UpdateFlowByDeviceCode(ctx context.Context, hash string, fn FlowUpdate) (*DeviceFlow, error) {
	return db.updateFlow(ctx, "device_code_hash = ?", hash, fn)
}

func (db *DB) updateFlow(ctx context.Context, where string, arg string, fn FlowUpdate) (*DeviceFlow, error) {
	var (
		out     DeviceFlow
		outcome error
	)
	err := db.write(ctx, func(tx *gorm.DB) error {
		var row flowRow
		res := tx.Raw(`SELECT `+flowColumns+` FROM device_flows WHERE `+where, arg).Scan(&row)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return ErrFlowNotFound
		}
		f := row.record()
		var g *Grant
		if f.GrantID != "" {
			var err error
			if g, err = grantByID(tx, f.GrantID); err != nil {
				return err
			}
		}
		was := f.Status
		ng, err := fn(&f, g)
		outcome = err
		if ng != nil {
			ng.DeviceFlowID = f.ID
			if err := insertGrant(tx, ng); err != nil {
				return err
			}
			f.GrantID = ng.ID
		}
		var grantID *string
		if f.GrantID != "" {
			s := string(f.GrantID)
			grantID = &s
		}
		// Conditional on the status read: exactly one decision or redemption (C6, D9).
		upd := tx.Exec(`UPDATE device_flows SET status = ?, interval_s = ?, last_poll_at = ?, failed_guesses = ?,
			duration = ?, grant_id = ?, decided_at = ? WHERE id = ? AND status = ?`,
			f.Status, int64(f.Interval/time.Second), msPtr(f.LastPollAt), f.FailedGuesses,
			f.Duration, grantID, msPtr(f.DecidedAt), f.ID, was)
		if upd.Error != nil {
			return upd.Error
		}
		if upd.RowsAffected != 1 {
			return errFlowRaced
		}
		out = f
		return nil
	})
	if errors.Is(err, ErrFlowNotFound) {
		return nil, ErrFlowNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("update device flow: %w", err)
	}
	return &out, outcome
}

// ExpireFlows marks every pending flow whose expiry has passed at now as
// expired and returns them.
func (db *DB) ExpireFlows(ctx context.Context, now time.Time) ([]DeviceFlow, error) {
	var rows []flowRow
	err := db.write(ctx, func(tx *gorm.DB) error {
		if err := tx.Raw(`SELECT `+flowColumns+` FROM device_flows WHERE status = 'pending' AND expires_at <= ? ORDER BY created_at, id`,
			ms(now)).Scan(&rows).Error; err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		ids := make([]string, len(rows))
		for i := range rows {
			ids[i] = rows[i].ID
			rows[i].Status = domain.FlowExpired
		}
		return tx.Exec(`UPDATE device_flows SET status = 'expired' WHERE status = 'pending' AND id IN ?`, ids).Error
	})
	if err != nil {
		return nil, fmt.Errorf("expire device flows: %w", err)
	}
	return flowRecords(rows), nil
}

// DenyFlows denies, in one write transaction, every flow pending and unexpired at now that
// match picks (match must not use the DB), and returns them as written, oldest first. A flow
// decided meanwhile is not among them: the update is conditional on the status read.
func (db *DB) DenyFlows(ctx context.Context, now time.Time, match func(DeviceFlow) bool) ([]DeviceFlow, error) {
	var out []DeviceFlow
	err := db.write(ctx, func(tx *gorm.DB) error {
		var rows []flowRow
		if err := tx.Raw(`SELECT `+flowColumns+` FROM device_flows WHERE status = 'pending' AND expires_at > ? ORDER BY created_at, id`,
			ms(now)).Scan(&rows).Error; err != nil {
			return err
		}
		out = out[:0]
		var ids []string
		for _, f := range flowRecords(rows) {
			if match(f) {
				f.Status, f.DecidedAt = domain.FlowDenied, &now
				out = append(out, f)
				ids = append(ids, f.ID)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		res := tx.Exec(`UPDATE device_flows SET status = 'denied', decided_at = ? WHERE status = 'pending' AND id IN ?`, ms(now), ids)
		if res.Error == nil && res.RowsAffected != int64(len(ids)) {
			return errFlowRaced
		}
		return res.Error
	})
	if err != nil {
		return nil, fmt.Errorf("deny device flows: %w", err)
	}
	return out, nil
}

// PruneFlows deletes finished flows that expired before the given time, so
// that device_flows does not grow without bound. Grants keep their own rows.
func (db *DB) PruneFlows(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := db.write(ctx, func(tx *gorm.DB) error {
		res := tx.Exec(`DELETE FROM device_flows WHERE status <> 'pending' AND expires_at < ?`, ms(before))
		n = res.RowsAffected
		return res.Error
	})
	if err != nil {
		return 0, fmt.Errorf("prune device flows: %w", err)
	}
	return n, nil
}

// PendingFlows lists the pending flows not yet expired at now, oldest first.
func (db *DB) PendingFlows(ctx context.Context, now time.Time) ([]DeviceFlow, error) {
	var rows []flowRow
	if err := db.read(ctx).Raw(`SELECT `+flowColumns+` FROM device_flows WHERE status = 'pending' AND expires_at > ? ORDER BY created_at, id`,
		ms(now)).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("list pending device flows: %w", err)
	}
	return flowRecords(rows), nil
}

// FlowByUserCode finds the flow holding a (normalised) user code: the pending
// one if any, else the newest finished one, so the consent page can say
// "already decided" or "expired".
func (db *DB) FlowByUserCode(ctx context.Context, userCode string) (*DeviceFlow, error) {
	var row flowRow
	res := db.read(ctx).Raw(`SELECT `+flowColumns+` FROM device_flows WHERE user_code = ?
		ORDER BY status = 'pending' DESC, created_at DESC, id DESC LIMIT 1`, userCode).Scan(&row)
	if res.Error != nil {
		return nil, fmt.Errorf("find device flow by user code: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return nil, ErrFlowNotFound
	}
	f := row.record()
	return &f, nil
}
