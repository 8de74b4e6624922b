package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/aether/aether/backend/domain"
)

// Receipt page sizes.
const (
	DefaultReceiptPage = 50
	MaxReceiptPage     = 100
)

var (
	// ErrReceiptNotFound: no receipt with that id or seq.
	ErrReceiptNotFound = errors.New("receipt not found")
	// ErrReceiptConflict: a UNIQUE constraint (seq, id, turn, prev hash, hash)
	// refused a receipt: it would duplicate or fork the chain.
	ErrReceiptConflict = errors.New("receipt would duplicate or fork the chain")
)

// TurnError says which turn of a batch made Tx.EndTurn refuse it.
type TurnError struct {
	TurnID string
	Err    error
}

func (e *TurnError) Error() string { return fmt.Sprintf("turn %s: %v", e.TurnID, e.Err) }
func (e *TurnError) Unwrap() error { return e.Err }

// Receipt is one row of the append-only receipts table: the signed JWS and the
// columns the receipts page filters and shows. The columns repeat what the JWS
// says; the verifier checks that they still agree.
type Receipt struct {
	Seq       int64
	ID        string
	TurnID    string
	PrevHash  string
	Hash      string // SHA-256 of the JWS, lowercase hex
	TaskID    string
	ContextID string
	Brand     domain.BrandID
	Scope     string // the brand's scope
	GrantID   domain.GrantID
	Agent     domain.Agent
	Status    domain.TurnStatus
	Reason    string
	ExitCode  int
	StartedAt time.Time
	EndedAt   time.Time
	JWS       string
	// Proof is a log proof a reader carries with the receipt (an export line's C2SP
	// tlog-proof, backend/receipts); the store neither writes nor reads it.
	Proof string
}

const receiptColumns = `seq, id, turn_id, prev_hash, hash, task_id, context_id, brand, scope, grant_id,
	agent_iss, agent_sub, status, reason, exit_code, started_at, ended_at, jws`

func scanReceipts(rows *sql.Rows, out []Receipt) ([]Receipt, error) {
	defer rows.Close()
	for rows.Next() {
		var r Receipt
		var started, ended int64
		if err := rows.Scan(&r.Seq, &r.ID, &r.TurnID, &r.PrevHash, &r.Hash, &r.TaskID, &r.ContextID, &r.Brand,
			&r.Scope, &r.GrantID, &r.Agent.Issuer, &r.Agent.Subject, &r.Status, &r.Reason, &r.ExitCode,
			&started, &ended, &r.JWS); err != nil {
			return out, err
		}
		r.StartedAt, r.EndedAt = fromMS(started), fromMS(ended)
		out = append(out, r)
	}
	return out, rows.Err()
}

func (db *DB) queryReceipts(ctx context.Context, out []Receipt, q string, args ...any) ([]Receipt, error) {
	rows, err := db.read(ctx).Raw(q, args...).Rows()
	if err != nil {
		return out, err
	}
	return scanReceipts(rows, out)
}

// ReceiptTail is the last stored receipt's seq and hash (seq 0 when there is none).
func (t *Tx) ReceiptTail() (Checkpoint, error) { return chainTail(t.tx) }

func chainTail(tx *gorm.DB) (Checkpoint, error) {
	var tail Checkpoint
	err := queryRow(tx, `SELECT seq, hash FROM receipts ORDER BY seq DESC LIMIT 1`).Scan(&tail.Seq, &tail.Hash)
	if errors.Is(err, sql.ErrNoRows) {
		return Checkpoint{}, nil
	}
	return tail, err
}

// ReceiptHead is the last stored receipt, checked against the high-water mark (ErrHighWater
// when they disagree), as ReceiptHead reads it.
func (t *Tx) ReceiptHead() (Checkpoint, error) { return receiptHead(t.tx) }

func receiptHead(tx *gorm.DB) (Checkpoint, error) {
	tail, err := chainTail(tx)
	if err != nil {
		return Checkpoint{}, err
	}
	hw, ok, err := readHighWater(tx)
	if err != nil {
		return Checkpoint{}, err
	}
	return tail, checkHighWater(tail, hw, ok)
}

// ReceiptHead is the chain's committed tail (seq 0, empty hash before the
// first receipt), for a mark kept outside the file (docs/threats.md T4, T6).
// It fails with ErrHighWater when the tail and the high-water mark disagree.
func (db *DB) ReceiptHead(ctx context.Context) (Checkpoint, error) {
	var tail Checkpoint
	// One read transaction: the tail and the mark come from the same snapshot.
	err := db.read(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		tail, err = receiptHead(tx)
		return err
	})
	if err != nil {
		return Checkpoint{}, fmt.Errorf("read receipt chain head: %w", err)
	}
	return tail, nil
}

// EndTurn ends the running turn r is the receipt of, with r's status, reason and end: a
// *TurnError when the turn is unknown (ErrTurnNotFound), already ended (ErrTurnNotRunning)
// or described differently (ErrTurnMismatch).
func (t *Tx) EndTurn(r Receipt) error { return endTurn(t.tx, r) }

func endTurn(tx *gorm.DB, r Receipt) error {
	n, err := exec(tx, `UPDATE turns SET status = ?, reason = ?, ended_at = ?
		WHERE id = ? AND status = ? AND task_id = ? AND context_id = ? AND brand = ? AND brand_scope = ?
		AND grant_id = ? AND agent_iss = ? AND agent_sub = ? AND started_at = ?`,
		r.Status, r.Reason, ms(r.EndedAt), r.TurnID, domain.TurnRunning, r.TaskID, r.ContextID, r.Brand, r.Scope,
		r.GrantID, r.Agent.Issuer, r.Agent.Subject, ms(r.StartedAt))
	if err != nil {
		return fmt.Errorf("end turn %s: %w", r.TurnID, err)
	}
	if n == 1 {
		return nil
	}
	// Say why, so the caller can drop just this turn.
	var rows []turnRow
	if err := tx.Raw(`SELECT `+turnColumns+` FROM turns WHERE id = ?`, r.TurnID).Scan(&rows).Error; err != nil {
		return fmt.Errorf("end turn %s: %w", r.TurnID, err)
	}
	if len(rows) == 0 {
		return &TurnError{TurnID: r.TurnID, Err: ErrTurnNotFound}
	}
	t := rows[0]
	if domain.TurnStatus(t.Status) != domain.TurnRunning {
		return &TurnError{TurnID: r.TurnID, Err: fmt.Errorf("%w (status %s)", ErrTurnNotRunning, t.Status)}
	}
	var diff []string
	for _, c := range []struct{ name, got, want string }{
		{"task_id", r.TaskID, t.TaskID}, {"context_id", r.ContextID, t.ContextID}, {"brand", string(r.Brand), t.Brand},
		{"scope", r.Scope, t.BrandScope}, {"grant_id", string(r.GrantID), t.GrantID}, {"agent_iss", r.Agent.Issuer, t.AgentIss},
		{"agent_sub", r.Agent.Subject, t.AgentSub},
	} {
		if c.got != c.want {
			diff = append(diff, c.name)
		}
	}
	if ms(r.StartedAt) != t.StartedAt {
		diff = append(diff, "started_at")
	}
	return &TurnError{TurnID: r.TurnID, Err: fmt.Errorf("%w: %s", ErrTurnMismatch, strings.Join(diff, ", "))}
}

// insertRows bounds one multi-row INSERT (18 parameters a row, well under
// SQLite's limit of 32766).
const insertRows = 500

// InsertReceipts appends rows to the receipts table, with one statement per insertRows: a
// batch pays for one statement, not one per receipt. A UNIQUE column that refuses one is
// ErrReceiptConflict.
func (t *Tx) InsertReceipts(rows []Receipt) error { return insertReceipts(t.tx, rows) }

func insertReceipts(tx *gorm.DB, rows []Receipt) error {
	for len(rows) > 0 {
		n := min(len(rows), insertRows)
		args := make([]any, 0, n*18)
		for _, r := range rows[:n] {
			args = append(args, r.Seq, r.ID, r.TurnID, r.PrevHash, r.Hash, r.TaskID, r.ContextID, r.Brand, r.Scope,
				r.GrantID, r.Agent.Issuer, r.Agent.Subject, r.Status, r.Reason, r.ExitCode, ms(r.StartedAt), ms(r.EndedAt), r.JWS)
		}
		q := `INSERT INTO receipts (` + receiptColumns + `) VALUES ` +
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?), ", n), ", ")
		_, err := exec(tx, q, args...)
		if err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed") {
			return fmt.Errorf("receipts seq %d to %d: %w: %v", rows[0].Seq, rows[n-1].Seq, ErrReceiptConflict, err)
		}
		if err != nil {
			return fmt.Errorf("insert receipts seq %d to %d: %w", rows[0].Seq, rows[n-1].Seq, err)
		}
		rows = rows[n:]
	}
	return nil
}

// GetReceipt reads the receipt with that id.
func (db *DB) GetReceipt(ctx context.Context, id string) (*Receipt, error) {
	return db.oneReceipt(ctx, "id", id)
}

// ReceiptAt reads the receipt with that seq (to check a checkpoint cheaply).
func (db *DB) ReceiptAt(ctx context.Context, seq int64) (*Receipt, error) {
	return db.oneReceipt(ctx, "seq", seq)
}

func (db *DB) oneReceipt(ctx context.Context, col string, v any) (*Receipt, error) {
	out, err := db.queryReceipts(ctx, nil, `SELECT `+receiptColumns+` FROM receipts WHERE `+col+` = ?`, v)
	if err != nil {
		return nil, fmt.Errorf("read receipt %v: %w", v, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("read receipt %v: %w", v, ErrReceiptNotFound)
	}
	return &out[0], nil
}

// ReceiptsForTurns returns the stored receipts of those turns, by turn id
// (turns without a receipt are absent). A retried turn gets its first receipt back.
func (db *DB) ReceiptsForTurns(ctx context.Context, turnIDs []string) (map[string]Receipt, error) {
	out := map[string]Receipt{}
	if len(turnIDs) == 0 {
		return out, nil
	}
	rows, err := db.queryReceipts(ctx, nil, `SELECT `+receiptColumns+` FROM receipts WHERE turn_id IN ?`, turnIDs)
	if err != nil {
		return nil, fmt.Errorf("read receipts of %d turns: %w", len(turnIDs), err)
	}
	for _, r := range rows {
		out[r.TurnID] = r
	}
	return out, nil
}

// allReceiptsBatch is how many rows AllReceipts reads per query.
const allReceiptsBatch = 512

// AllReceipts iterates over every receipt in seq order, reading a batch at a
// time (never the whole table in memory). Receipts appended while it runs are
// included. It stops at the first error.
func (db *DB) AllReceipts(ctx context.Context) iter.Seq2[Receipt, error] {
	return func(yield func(Receipt, error) bool) {
		var after int64
		buf := make([]Receipt, 0, allReceiptsBatch)
		for {
			var err error
			buf, err = db.queryReceipts(ctx, buf[:0], `SELECT `+receiptColumns+` FROM receipts WHERE seq > ? ORDER BY seq LIMIT ?`,
				after, allReceiptsBatch)
			if err != nil {
				yield(Receipt{}, fmt.Errorf("read receipts after seq %d: %w", after, err))
				return
			}
			for _, r := range buf {
				if !yield(r, nil) {
					return
				}
			}
			if len(buf) < allReceiptsBatch {
				return
			}
			after = buf[len(buf)-1].Seq
		}
	}
}

// ReceiptFilter selects receipts for the receipts page and for exports.
type ReceiptFilter struct {
	Agent  string            // ASCII case-insensitive substring of the agent's issuer or subject
	Brand  domain.BrandID    // exact brand id
	Status domain.TurnStatus // exact status
	From   time.Time         // ended at or after (zero: unbounded)
	To     time.Time         // ended before (zero: unbounded)
	Cursor int64             // keyset paging: continue past this seq (0: from the newest, or oldest)
	Limit  int               // page size, 1..MaxReceiptPage (0: DefaultReceiptPage)
	Oldest bool              // oldest first (exports) instead of newest first (the page)
}

// agentFanout is how many matching agents ListReceipts reads one by one through
// receipts_agent; past it, so many agents match that matching rows are dense and
// a scan in seq order finds a page quickly.
const agentFanout = 32

// ListReceipts returns one page of receipts matching f, newest first unless
// f.Oldest, and the cursor of the next page (0 when this page is the last).
//
// Every shape stays fast on a large table: brand and status use their
// (column, seq) indexes in seq order; an agent substring is first resolved to
// the few distinct (issuer, subject) pairs it matches (a skip scan of
// receipts_agent, one seek per distinct agent), then each pair's newest rows are
// read through receipts_agent and merged, so a page costs O(agents × page), not
// O(receipts).
func (db *DB) ListReceipts(ctx context.Context, f ReceiptFilter) ([]Receipt, int64, error) {
	limit := f.Limit
	switch {
	case limit <= 0:
		limit = DefaultReceiptPage
	case limit > MaxReceiptPage:
		limit = MaxReceiptPage
	}
	dir, op := "DESC", "<"
	if f.Oldest {
		dir, op = "ASC", ">"
	}
	var conds []string
	var args []any
	add := func(cond string, v ...any) { conds = append(conds, cond); args = append(args, v...) }
	if f.Brand != "" {
		add("brand = ?", f.Brand)
	}
	if f.Status != "" {
		add("status = ?", f.Status)
	}
	if !f.From.IsZero() {
		add("ended_at >= ?", ms(f.From))
	}
	if !f.To.IsZero() {
		add("ended_at < ?", ms(f.To))
	}
	if f.Cursor > 0 {
		add("seq "+op+" ?", f.Cursor)
	}
	var q string
	var qargs []any
	if f.Agent == "" {
		q, qargs = selectPage("", conds, dir), append(args, limit)
	} else {
		agents, err := db.matchingAgents(ctx, f.Agent)
		if err != nil {
			return nil, 0, fmt.Errorf("list receipts: %w", err)
		}
		switch {
		case len(agents) == 0:
			return nil, 0, nil
		case len(agents) <= agentFanout:
			parts := make([]string, len(agents))
			for i, a := range agents {
				parts[i] = "SELECT * FROM (" + selectPage("INDEXED BY receipts_agent",
					append([]string{"agent_iss = ?", "agent_sub = ?"}, conds...), dir) + ")"
				qargs = append(append(append(qargs, a[0], a[1]), args...), limit)
			}
			q = strings.Join(parts, " UNION ALL ") + " ORDER BY seq " + dir + " LIMIT ?"
			qargs = append(qargs, limit)
		default:
			needle := asciiLower(f.Agent)
			add("(instr(lower(agent_iss), ?) > 0 OR instr(lower(agent_sub), ?) > 0)", needle, needle)
			q, qargs = selectPage("", conds, dir), append(args, limit)
		}
	}
	page, err := db.queryReceipts(ctx, make([]Receipt, 0, limit), q, qargs...)
	if err != nil {
		return nil, 0, fmt.Errorf("list receipts: %w", err)
	}
	var next int64
	if len(page) == limit {
		next = page[len(page)-1].Seq
	}
	return page, next, nil
}

func selectPage(indexed string, conds []string, dir string) string {
	q := `SELECT ` + receiptColumns + ` FROM receipts ` + indexed
	if len(conds) > 0 {
		q += " WHERE " + strings.Join(conds, " AND ")
	}
	return q + " ORDER BY seq " + dir + " LIMIT ?"
}

// matchingAgents lists the distinct (issuer, subject) pairs that have receipts
// and contain needle. It walks receipts_agent from one distinct pair to the
// next (a loose index scan: the next subject of the same issuer, else the next
// issuer; two plain seeks, as a row-value comparison would seek on the issuer
// only), so it costs a seek or two per agent, not one per receipt.
func (db *DB) matchingAgents(ctx context.Context, needle string) ([][2]string, error) {
	rows, err := db.read(ctx).Raw(`WITH RECURSIVE a(iss, sub) AS (
		SELECT * FROM (SELECT agent_iss, agent_sub FROM receipts INDEXED BY receipts_agent
			ORDER BY agent_iss, agent_sub LIMIT 1)
		UNION ALL
		SELECT r.agent_iss, r.agent_sub FROM a JOIN receipts r ON r.seq = coalesce(
			(SELECT seq FROM receipts INDEXED BY receipts_agent
				WHERE agent_iss = a.iss AND agent_sub > a.sub ORDER BY agent_sub LIMIT 1),
			(SELECT seq FROM receipts INDEXED BY receipts_agent
				WHERE agent_iss > a.iss ORDER BY agent_iss, agent_sub LIMIT 1))
	) SELECT iss, sub FROM a`).Rows()
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	defer rows.Close()
	needle = asciiLower(needle)
	var out [][2]string
	for rows.Next() {
		var iss, sub string
		if err := rows.Scan(&iss, &sub); err != nil {
			return nil, fmt.Errorf("list agents: %w", err)
		}
		if strings.Contains(asciiLower(iss), needle) || strings.Contains(asciiLower(sub), needle) {
			out = append(out, [2]string{iss, sub})
		}
	}
	return out, rows.Err()
}

// asciiLower folds ASCII letters only, as SQLite's lower() does, so both agent
// filter paths match the same rows.
func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}

// ReceiptsMatching iterates over every receipt matching f (its Cursor and Limit
// ignored) page by page, oldest first: the stream behind a filtered export.
func (db *DB) ReceiptsMatching(ctx context.Context, f ReceiptFilter) iter.Seq2[Receipt, error] {
	return func(yield func(Receipt, error) bool) {
		f.Oldest, f.Cursor, f.Limit = true, 0, MaxReceiptPage
		for {
			page, next, err := db.ListReceipts(ctx, f)
			if err != nil {
				yield(Receipt{}, err)
				return
			}
			for _, r := range page {
				if !yield(r, nil) {
					return
				}
			}
			if next == 0 {
				return
			}
			f.Cursor = next
		}
	}
}
