package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"

	"gorm.io/gorm"

	"github.com/aether/aether/backend/domain"
)

// PactScope is the scope every turn runs in (turns.scope).
const PactScope = "pact"

var (
	// ErrTurnNotFound: no turn with that id.
	ErrTurnNotFound = errors.New("turn not found")
	// ErrTurnExists: a turn with that id was already started.
	ErrTurnExists = errors.New("turn already started")
	// ErrTurnNotRunning: the turn already ended (it has its receipt).
	ErrTurnNotRunning = errors.New("turn is not running")
	// ErrTurnMismatch: a receipt describes a turn other than the one started
	// under its id (task, brand, grant, agent, policy or start time differ).
	ErrTurnMismatch = errors.New("receipt does not match the started turn")
)

// Turn is the node's own record of one delegated turn: written when the turn
// starts (status running) so that a crash leaves a trace, ended by its receipt.
type Turn struct {
	ID         string
	TaskID     string
	ContextID  string
	Brand      domain.BrandID
	BrandScope string // the brand's scope; the turn itself always runs in PactScope
	GrantID    domain.GrantID
	Agent      domain.Agent
	PolicyHash string
	Status     domain.TurnStatus
	Reason     string
	StartedAt  time.Time
	EndedAt    *time.Time
}

type turnRow struct {
	ID         string
	TaskID     string
	ContextID  string
	Brand      string
	BrandScope string
	GrantID    string
	AgentIss   string
	AgentSub   string
	PolicyHash string
	Status     string
	Reason     string
	StartedAt  int64
	EndedAt    *int64
}

func (r turnRow) record() Turn {
	return Turn{ID: r.ID, TaskID: r.TaskID, ContextID: r.ContextID, Brand: domain.BrandID(r.Brand), BrandScope: r.BrandScope,
		GrantID: domain.GrantID(r.GrantID), Agent: domain.Agent{Issuer: r.AgentIss, Subject: r.AgentSub}, PolicyHash: r.PolicyHash,
		Status: domain.TurnStatus(r.Status), Reason: r.Reason, StartedAt: fromMS(r.StartedAt), EndedAt: fromMSPtr(r.EndedAt)}
}

const turnColumns = `id, task_id, context_id, brand, brand_scope, grant_id, agent_iss, agent_sub, policy_hash,
	status, reason, started_at, ended_at`

// StartTurn records a turn as running. Call it before any work of the turn
// runs; the grant must exist. A second start of the same id gets ErrTurnExists.
func (db *DB) StartTurn(ctx context.Context, t Turn) error {
	return db.Commit(ctx, func(tx *Tx) error { return tx.StartTurn(t) })
}

// StartTurn is DB.StartTurn inside a write: a turn whose work never started is recorded in
// its receipt's own write.
func (t *Tx) StartTurn(turn Turn) error {
	_, err := exec(t.tx, `INSERT INTO turns (id, task_id, context_id, brand, scope, brand_scope,
		grant_id, agent_iss, agent_sub, policy_hash, status, reason, started_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?)`,
		turn.ID, turn.TaskID, turn.ContextID, turn.Brand, PactScope, turn.BrandScope,
		turn.GrantID, turn.Agent.Issuer, turn.Agent.Subject, turn.PolicyHash, domain.TurnRunning, ms(turn.StartedAt))
	switch {
	case err == nil:
		return nil
	case strings.Contains(err.Error(), "UNIQUE constraint failed: turns.id"):
		return fmt.Errorf("start turn %s: %w", turn.ID, ErrTurnExists)
	case strings.Contains(err.Error(), "FOREIGN KEY constraint failed"):
		return fmt.Errorf("start turn %s: grant %s not found", turn.ID, turn.GrantID)
	}
	return fmt.Errorf("start turn %s: %w", turn.ID, err)
}

// OpenTurns lists the turns still running, oldest first. At start-up these are
// the turns the node was running when it stopped.
func (db *DB) OpenTurns(ctx context.Context) ([]Turn, error) {
	var rows []turnRow
	if err := db.read(ctx).Raw(`SELECT `+turnColumns+` FROM turns WHERE status = ? ORDER BY started_at, id`,
		domain.TurnRunning).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("list open turns: %w", err)
	}
	out := make([]Turn, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, nil
}

// GetTurn reads one turn.
func (db *DB) GetTurn(ctx context.Context, id string) (*Turn, error) {
	var rows []turnRow
	if err := db.read(ctx).Raw(`SELECT `+turnColumns+` FROM turns WHERE id = ?`, id).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("read turn %s: %w", id, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("read turn %s: %w", id, ErrTurnNotFound)
	}
	t := rows[0].record()
	return &t, nil
}

// NoteUnrecorded keeps on a turn still running why its receipt could not be committed (why,
// one line): the turn's reason, which its receipt overwrites. The failed receipt the next
// start gives the turn says it, not that the node stopped (receipts.Ledger.Recover). The
// update rewrites a row already in the file: it fits where the failed commit found no room
// for a new one, as when the disk filled up.
func (db *DB) NoteUnrecorded(ctx context.Context, turnID, why string) error {
	err := db.write(ctx, func(tx *gorm.DB) error {
		_, err := exec(tx, `UPDATE turns SET reason = ? WHERE id = ? AND status = ?`, why, turnID, domain.TurnRunning)
		return err
	})
	if err != nil {
		return fmt.Errorf("note why the receipt of turn %s was not committed: %w", turnID, err)
	}
	return nil
}

// sqliteProblems name SQLite's primary result codes that say what went wrong with the file
// or the disk under it, for a person.
var sqliteProblems = map[int]string{
	5:  "pact.sqlite was locked by another process (SQLITE_BUSY)",
	8:  "pact.sqlite could not be written (SQLITE_READONLY)",
	10: "the disk failed a read or a write (SQLITE_IOERR)",
	11: "pact.sqlite is damaged (SQLITE_CORRUPT)",
	13: "the disk was full (SQLITE_FULL)",
	14: "pact.sqlite could not be opened (SQLITE_CANTOPEN)",
}

// absPath is an absolute path in an error's text: where the owner keeps files is none of a
// receipt's readers' business.
var absPath = regexp.MustCompile(`(^|[\s"'(])/[^\s"'):]+`)

// Why says in one line why a write failed: what SQLite's result code means when the error
// carries one ("the disk was full (SQLITE_FULL)"), else the error's text, with absolute paths
// and control characters taken out, cut at 200 characters.
func Why(err error) string {
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		if why, ok := sqliteProblems[coded.Code()&0xff]; ok {
			return why
		}
	}
	text := absPath.ReplaceAllString(strings.Join(strings.Fields(err.Error()), " "), "${1}[path]")
	var b strings.Builder
	n := 0
	for _, r := range text {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			continue
		}
		if n == 200 {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}
