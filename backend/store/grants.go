package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/aether/aether/backend/domain"
)

// ErrGrantNotFound: no grant with that id (or no live one for that agent and brand).
var ErrGrantNotFound = errors.New("grant not found")

// Grant is what the owner allowed one agent on one brand, with its signed form.
type Grant struct {
	ID           domain.GrantID
	Agent        domain.Agent
	Brand        domain.BrandID
	Capability   string
	Workspace    string
	AccessMode   domain.AccessMode
	Scope        string
	IssuedAt     time.Time
	ExpiresAt    *time.Time // nil: until revoked
	RevokedAt    *time.Time
	JWS          string
	DeviceFlowID string
	LastUsedAt   *time.Time
	Uses         int64
	// TokensPerDay is the model budget the owner set at approval; nil = the brand's, 0 = no
	// limit (docs/model-gateway.md).
	TokensPerDay *int64
}

// Live reports whether the grant is neither revoked nor expired at now.
func (g *Grant) Live(now time.Time) bool {
	return g.RevokedAt == nil && (g.ExpiresAt == nil || now.Before(*g.ExpiresAt))
}

type grantRow struct {
	ID           string  `gorm:"column:id"`
	AgentIss     string  `gorm:"column:agent_iss"`
	AgentSub     string  `gorm:"column:agent_sub"`
	Brand        string  `gorm:"column:brand"`
	Capability   string  `gorm:"column:capability"`
	Workspace    string  `gorm:"column:workspace"`
	AccessMode   string  `gorm:"column:access_mode"`
	Scope        string  `gorm:"column:scope"`
	IssuedAt     int64   `gorm:"column:issued_at"`
	ExpiresAt    *int64  `gorm:"column:expires_at"`
	RevokedAt    *int64  `gorm:"column:revoked_at"`
	JWS          string  `gorm:"column:jws"`
	DeviceFlowID *string `gorm:"column:device_flow_id"`
	LastUsedAt   *int64  `gorm:"column:last_used_at"`
	Uses         int64   `gorm:"column:uses"`
	TokensPerDay *int64  `gorm:"column:tokens_per_day"`
}

func (r *grantRow) record() Grant {
	g := Grant{
		ID: domain.GrantID(r.ID), Agent: domain.Agent{Issuer: r.AgentIss, Subject: r.AgentSub}, Brand: domain.BrandID(r.Brand),
		Capability: r.Capability, Workspace: r.Workspace, AccessMode: domain.AccessMode(r.AccessMode), Scope: r.Scope,
		IssuedAt: fromMS(r.IssuedAt), ExpiresAt: fromMSPtr(r.ExpiresAt), RevokedAt: fromMSPtr(r.RevokedAt),
		JWS: r.JWS, LastUsedAt: fromMSPtr(r.LastUsedAt), Uses: r.Uses, TokensPerDay: r.TokensPerDay,
	}
	if r.DeviceFlowID != nil {
		g.DeviceFlowID = *r.DeviceFlowID
	}
	return g
}

const grantColumns = `id, agent_iss, agent_sub, brand, capability, workspace, access_mode, scope,
	issued_at, expires_at, revoked_at, jws, device_flow_id, last_used_at, uses, tokens_per_day`

func insertGrant(tx *gorm.DB, g *Grant) error {
	var flowID *string
	if g.DeviceFlowID != "" {
		flowID = &g.DeviceFlowID
	}
	err := tx.Exec(`INSERT INTO grants (`+grantColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, NULL, 0, ?)`,
		g.ID, g.Agent.Issuer, g.Agent.Subject, g.Brand, g.Capability, g.Workspace, g.AccessMode, g.Scope,
		ms(g.IssuedAt), msPtr(g.ExpiresAt), g.JWS, flowID, g.TokensPerDay).Error
	if err != nil {
		return fmt.Errorf("insert grant %s: %w", g.ID, err)
	}
	return nil
}

// grantByID reads one grant.
func grantByID(tx *gorm.DB, id domain.GrantID) (*Grant, error) {
	r, err := grantRowByID(tx, id)
	if err != nil {
		return nil, err
	}
	g := r.record()
	return &g, nil
}

// grantRowByID scans the grant's row by hand: gorm's reflection cost a third of the read.
func grantRowByID(tx *gorm.DB, id domain.GrantID) (grantRow, error) {
	var r grantRow
	err := tx.Raw(`SELECT `+grantColumns+` FROM grants WHERE id = ?`, id).Row().Scan(&r.ID, &r.AgentIss, &r.AgentSub, &r.Brand,
		&r.Capability, &r.Workspace, &r.AccessMode, &r.Scope, &r.IssuedAt, &r.ExpiresAt, &r.RevokedAt, &r.JWS, &r.DeviceFlowID,
		&r.LastUsedAt, &r.Uses, &r.TokensPerDay)
	if errors.Is(err, sql.ErrNoRows) {
		return grantRow{}, ErrGrantNotFound
	}
	return r, err
}

// GrantByID reads one grant as the store has it now: every call's delegation check asks for
// its grant, so the grant is remembered (grantMemory) until the next write that may change
// grants has committed.
func (db *DB) GrantByID(ctx context.Context, id domain.GrantID) (*Grant, error) {
	r, gen, ok := db.grants.recall(id)
	if !ok {
		var err error
		// A point read takes microseconds: not worth the goroutines that database/sql and
		// the driver start to watch a cancellable context, one each per query.
		r, err = grantRowByID(db.read(context.WithoutCancel(ctx)), id)
		if errors.Is(err, ErrGrantNotFound) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("read grant %s: %w", id, err)
		}
		db.grants.keep(gen, r)
	}
	g := r.record()
	return &g, nil
}

// grantMemory is the grants GrantByID has read, so that the grant check of every call
// (docs/wire.md, "The delegation token") reads nothing from the file. While the node runs,
// only its store writes pact.sqlite (the data dir's lock), and a transaction that wrote any
// row but a turn's own records (countGrantWrites) forgets the whole memory as it ends, before
// its callers hear back (commit): a call after a revoke has returned never sees the grant as
// it was, and one racing the revoke sees it as before or after, as a read of the file would
// (docs/threats.md G13).
type grantMemory struct {
	mu   sync.Mutex
	gen  uint64 // times forgotten: a row read before a forget is not kept after it
	rows map[domain.GrantID]grantRow
}

// maxGrantMemory bounds the memory; only grants that exist are kept, so this is the owner's
// grants, not what callers make up.
const maxGrantMemory = 4096

// recall returns the remembered row of id, or the generation a row read now is kept under.
func (m *grantMemory) recall(id domain.GrantID) (r grantRow, gen uint64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok = m.rows[id]
	return r, m.gen, ok
}

// keep remembers r, read under gen, unless the memory was forgotten since.
func (m *grantMemory) keep(gen uint64, r grantRow) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if gen != m.gen {
		return
	}
	if m.rows == nil || len(m.rows) >= maxGrantMemory {
		m.rows = map[domain.GrantID]grantRow{}
	}
	m.rows[domain.GrantID(r.ID)] = r
}

// forget drops every remembered grant.
func (m *grantMemory) forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	m.rows = nil
}

// turnTables are a turn's own records: its turn, its task, its receipts with their log leaves
// and checkpoint, and its grant's model use (and, in meta, the chain's mark). A write of nothing
// else leaves what GrantByID remembers alone: before the log's tables were here, every receipt
// forgot it, and every call read its grant from the file again.
var turnTables = []string{"turns", "tasks", "receipts", "log_hashes", "log_checkpoints", "model_use"}

// countGrantWrites makes the writer's connection count, in temp.grant_writes, every row
// written outside a turn's own records, by temporary triggers on every other table: the
// committer compares the count as a transaction ends with the count the one before it left
// (commit), so what a write writes decides whether the memory is forgotten, whoever wrote it
// and however.
func (db *DB) countGrantWrites() error {
	var tables []string
	if err := db.w.Raw(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`).Scan(&tables).Error; err != nil {
		return fmt.Errorf("list tables: %w", err)
	}
	stmts := []string{`CREATE TEMP TABLE grant_writes (n INTEGER NOT NULL)`, `INSERT INTO temp.grant_writes VALUES (0)`}
	for _, t := range tables {
		if slices.Contains(turnTables, t) {
			continue
		}
		for _, op := range []struct{ name, when string }{
			{"INSERT", "NEW.key <> ?"}, {"UPDATE", "NEW.key <> ? OR OLD.key <> ?"}, {"DELETE", "OLD.key <> ?"},
		} {
			when := ""
			if t == "meta" { // the chain's mark moves with a turn's receipts
				when = " WHEN " + strings.ReplaceAll(op.when, "?", "'"+metaHighWater+"'")
			}
			stmts = append(stmts, fmt.Sprintf(`CREATE TEMP TRIGGER %s_%s_counted AFTER %s ON main.%s FOR EACH ROW%s
				BEGIN UPDATE grant_writes SET n = n + 1; END`, t, strings.ToLower(op.name), op.name, t, when))
		}
	}
	for _, q := range stmts {
		if err := db.w.Exec(q).Error; err != nil {
			return fmt.Errorf("count grant writes: %w", err)
		}
	}
	return nil
}

// grantWrites is temp.grant_writes in tx: an error leaves the caller to forget (fail closed).
func grantWrites(tx *gorm.DB) (n int64, err error) {
	err = queryRow(tx, `SELECT n FROM temp.grant_writes`).Scan(&n)
	return n, err
}

// GrantRevoked reports whether the grant has been revoked, as of this transaction (for a
// receipt signed in it, docs/threats.md V2); a grant that is gone no longer stands either.
func (t *Tx) GrantRevoked(id domain.GrantID) (bool, error) { return grantRevoked(t.tx, id) }

func grantRevoked(tx *gorm.DB, id domain.GrantID) (bool, error) {
	var revoked bool
	switch err := queryRow(tx, "SELECT revoked_at IS NOT NULL FROM grants WHERE id = ?", id).Scan(&revoked); {
	case errors.Is(err, sql.ErrNoRows):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("read grant %s: %w", id, err)
	}
	return revoked, nil
}

// ListGrants lists every grant, newest first.
func (db *DB) ListGrants(ctx context.Context) ([]Grant, error) {
	var rows []grantRow
	if err := db.read(ctx).Raw(`SELECT ` + grantColumns + ` FROM grants ORDER BY issued_at DESC, id DESC`).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	out := make([]Grant, len(rows))
	for i := range rows {
		out[i] = rows[i].record()
	}
	return out, nil
}

// WithLiveGrant runs fn on the newest grant for (agent, brand) that is neither
// revoked nor expired at now, inside a write transaction: a revocation commits
// either before (ErrGrantNotFound) or after fn has run, never in between (V4).
// fn must not use the DB and should be quick; signing is fine.
func (db *DB) WithLiveGrant(ctx context.Context, agentIss, agentSub string, brand domain.BrandID, now time.Time, fn func(g *Grant) error) error {
	err := db.write(ctx, func(tx *gorm.DB) error {
		var row grantRow
		res := tx.Raw(`SELECT `+grantColumns+` FROM grants
			WHERE agent_iss = ? AND agent_sub = ? AND brand = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)
			ORDER BY issued_at DESC, id DESC LIMIT 1`, agentIss, agentSub, brand, ms(now)).Scan(&row)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return ErrGrantNotFound
		}
		g := row.record()
		return fn(&g)
	})
	if err != nil && !errors.Is(err, ErrGrantNotFound) {
		return fmt.Errorf("use live grant: %w", err)
	}
	return err
}

// RecordUseSoon counts one use of a live grant (uses+1, last_used_at = now) without a
// write of its own: usage counts are statistics, and neither a turn nor the writer should
// pay a statement for each. The counts, summed per grant, are written by one write useDelay
// after the first, or sooner by Flush or Close; a crash can lose the last second of counts.
func (db *DB) RecordUseSoon(id domain.GrantID, now time.Time) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return
	}
	if db.uses == nil {
		db.uses = map[domain.GrantID]grantUse{}
		time.AfterFunc(useDelay, func() {
			db.mu.Lock()
			defer db.mu.Unlock()
			if !db.closed && db.queueUses() {
				db.signal()
			}
		})
	}
	u := db.uses[id]
	if u.n == 0 {
		u.first = now
	}
	u.n++
	if now.After(u.last) {
		u.last = now
	}
	db.uses[id] = u
}

// useDelay is how long a use count waits to be written with the others.
const useDelay = time.Second

// queueUses queues the write of the counted uses unless there are none or it is queued
// already; db.mu must be held.
func (db *DB) queueUses() bool {
	if db.uses == nil || db.usesQueued {
		return false
	}
	db.usesQueued = true
	db.queue = append(db.queue, &writeReq{fn: db.writeUses, done: make(chan struct{})})
	return true
}

// grantUse is the uses of one grant since the last commit.
type grantUse struct {
	n           int64
	first, last time.Time
}

// writeUses is the write RecordUseSoon queues: one UPDATE per grant used since the last.
// A grant revoked or expired before its first use here is not counted.
func (db *DB) writeUses(t *Tx) error {
	tx := t.tx
	db.mu.Lock()
	uses := db.uses
	db.uses, db.usesQueued = nil, false
	db.mu.Unlock()
	for id, u := range uses {
		if err := tx.Exec(`UPDATE grants SET uses = uses + ?, last_used_at = max(coalesce(last_used_at, 0), ?)
			WHERE id = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`, u.n, ms(u.last), id, ms(u.first)).Error; err != nil {
			return err
		}
	}
	return nil
}

// RevokeGrant revokes a grant at now and, in the same transaction, denies the
// pending flows of the same agent for the same brand. It is idempotent:
// revoked is false (and nothing else changes) when the grant was already revoked.
// Token issuance checks the grant in its own write transaction, so no token
// is minted from a grant after its revocation commits (V4).
func (db *DB) RevokeGrant(ctx context.Context, id domain.GrantID, now time.Time) (g *Grant, revoked bool, denied []DeviceFlow, err error) {
	err = db.write(ctx, func(tx *gorm.DB) error {
		res := tx.Exec(`UPDATE grants SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, ms(now), id)
		if res.Error != nil {
			return res.Error
		}
		revoked = res.RowsAffected == 1
		var err error
		if g, err = grantByID(tx, id); err != nil {
			return err
		}
		if !revoked {
			return nil
		}
		var rows []flowRow
		if err := tx.Raw(`SELECT `+flowColumns+` FROM device_flows WHERE agent_iss = ? AND agent_sub = ? AND brand = ? AND status = 'pending'
			ORDER BY created_at, id`, g.Agent.Issuer, g.Agent.Subject, g.Brand).Scan(&rows).Error; err != nil {
			return err
		}
		for i := range rows {
			rows[i].Status = domain.FlowDenied
			at := ms(now)
			rows[i].DecidedAt = &at
			if err := tx.Exec(`UPDATE device_flows SET status = 'denied', decided_at = ? WHERE id = ? AND status = 'pending'`,
				at, rows[i].ID).Error; err != nil {
				return err
			}
		}
		denied = flowRecords(rows)
		return nil
	})
	if errors.Is(err, ErrGrantNotFound) {
		return nil, false, nil, err
	}
	if err != nil {
		return nil, false, nil, fmt.Errorf("revoke grant %s: %w", id, err)
	}
	return g, revoked, denied, nil
}
