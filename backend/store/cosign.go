package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/aether/aether/backend/domain"
)

// Cosignature is an agent's witness cosignature of the checkpoint of size Size (docs/wire.md,
// "Witnesses").
type Cosignature struct {
	Agent    domain.Agent
	Size     int64
	Witness  string // vkey
	SignedAt time.Time
	Line     string
}

// CheckpointAt is the checkpoint the node signed for a log of size receipts (ok false if none).
func (db *DB) CheckpointAt(ctx context.Context, size int64) (note []byte, ok bool, err error) {
	var s string
	err = db.read(ctx).Raw(`SELECT note FROM log_checkpoints WHERE size = ?`, size).Row().Scan(&s)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read the log checkpoint of size %d: %w", size, err)
	}
	return []byte(s), true, nil
}

// AddCosignature stores c as the agent's cosignature: one an agent, its newest (of the largest
// checkpoint, the latest for that one), so that cosignatures cannot fill the disk
// (docs/threats.md L11).
func (db *DB) AddCosignature(ctx context.Context, c Cosignature) error {
	return db.write(ctx, func(tx *gorm.DB) error {
		return tx.Exec(`INSERT INTO log_cosignatures (agent_issuer, agent_subject, size, witness, signed_at, line) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (agent_issuer, agent_subject) DO UPDATE SET size = excluded.size, witness = excluded.witness,
			signed_at = excluded.signed_at, line = excluded.line WHERE excluded.size >= log_cosignatures.size`,
			c.Agent.Issuer, c.Agent.Subject, c.Size, c.Witness, c.SignedAt.Unix(), c.Line).Error
	})
}

// Witnessed is, per agent with a receipt, its last receipt's seq and how many agents cosigned
// a checkpoint that holds it; and how many agents cosigned any checkpoint.
type Witnessed struct {
	Agent       domain.Agent
	LastSeq     int64
	WitnessedBy int
}

// Witnesses counts the agents that cosigned a checkpoint, and, per agent with receipts,
// those whose largest cosigned checkpoint holds that agent's last receipt.
func (db *DB) Witnesses(ctx context.Context) (witnesses int, per []Witnessed, err error) {
	q := `WITH w AS (SELECT agent_issuer, agent_subject, MAX(size) AS size FROM log_cosignatures GROUP BY agent_issuer, agent_subject),
	a AS (SELECT agent_iss, agent_sub, MAX(seq) AS last FROM receipts GROUP BY agent_iss, agent_sub)
	SELECT a.agent_iss, a.agent_sub, a.last, (SELECT COUNT(*) FROM w WHERE w.size >= a.last) FROM a ORDER BY a.last DESC`
	rows, err := db.read(ctx).Raw(q).Rows()
	if err != nil {
		return 0, nil, fmt.Errorf("count the log's witnesses: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var w Witnessed
		if err := rows.Scan(&w.Agent.Issuer, &w.Agent.Subject, &w.LastSeq, &w.WitnessedBy); err != nil {
			return 0, nil, fmt.Errorf("count the log's witnesses: %w", err)
		}
		per = append(per, w)
	}
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("count the log's witnesses: %w", err)
	}
	err = db.read(ctx).Raw(`SELECT COUNT(*) FROM (SELECT DISTINCT agent_issuer, agent_subject FROM log_cosignatures)`).Row().Scan(&witnesses)
	if err != nil {
		return 0, nil, fmt.Errorf("count the log's witnesses: %w", err)
	}
	return witnesses, per, nil
}
