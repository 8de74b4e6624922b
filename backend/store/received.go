package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Received is a receipt one of the owner's agents received from another node, as kept in
// received_receipts (docs/assistants.md, "Receipts come home").
type Received struct {
	ID            int64
	Node          string
	RID           string
	AgentIssuer   string
	Agent         string
	Brand         string
	Task          string
	Status        string
	JWS           string
	Proof         string
	JWKS          string
	Verified      bool
	LogConsistent bool
	Problem       string
	ReceivedAt    time.Time
}

type receivedRow struct {
	ID            int64 `gorm:"primaryKey"`
	Node          string
	RID           string `gorm:"column:rid"`
	AgentIssuer   string
	Agent         string
	Brand         string
	Task          string
	Status        string
	JWS           string `gorm:"column:jws"`
	Proof         string
	JWKS          string `gorm:"column:jwks"`
	Verified      bool
	LogConsistent bool
	Problem       string
	ReceivedAt    int64
}

func (receivedRow) TableName() string { return "received_receipts" }

// KeepReceived stores r; the same receipt (node, rid) kept again keeps the first. It returns
// the row's id.
func (db *DB) KeepReceived(ctx context.Context, r Received) (int64, error) {
	row := receivedRow{Node: r.Node, RID: r.RID, AgentIssuer: r.AgentIssuer, Agent: r.Agent, Brand: r.Brand, Task: r.Task, Status: r.Status, JWS: r.JWS,
		Proof: r.Proof, JWKS: r.JWKS, Verified: r.Verified, LogConsistent: r.LogConsistent, Problem: r.Problem, ReceivedAt: r.ReceivedAt.Unix()}
	var id int64
	err := db.write(ctx, func(tx *gorm.DB) error {
		if err := tx.Exec(`INSERT INTO received_receipts (node, rid, agent_issuer, agent, brand, task, status, jws, proof, jwks, verified, log_consistent, problem, received_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (node, rid) DO NOTHING`,
			row.Node, row.RID, row.AgentIssuer, row.Agent, row.Brand, row.Task, row.Status, row.JWS, row.Proof, row.JWKS, row.Verified, row.LogConsistent, row.Problem, row.ReceivedAt).Error; err != nil {
			return err
		}
		return tx.Raw(`SELECT id FROM received_receipts WHERE node = ? AND rid = ?`, row.Node, row.RID).Scan(&id).Error
	})
	if err != nil {
		return 0, fmt.Errorf("keep the receipt %s from %s: %w", r.RID, r.Node, err)
	}
	return id, nil
}

// ReceivedReceipts lists the received receipts, newest first, at most limit (all when 0).
func (db *DB) ReceivedReceipts(ctx context.Context, limit int) ([]Received, error) {
	q := db.read(ctx).Order("id DESC")
	if limit > 0 {
		q = q.Limit(limit)
	}
	var rows []receivedRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read the received receipts: %w", err)
	}
	out := make([]Received, len(rows))
	for i, r := range rows {
		out[i] = Received{ID: r.ID, Node: r.Node, RID: r.RID, AgentIssuer: r.AgentIssuer, Agent: r.Agent, Brand: r.Brand, Task: r.Task, Status: r.Status, JWS: r.JWS,
			Proof: r.Proof, JWKS: r.JWKS, Verified: r.Verified, LogConsistent: r.LogConsistent, Problem: r.Problem, ReceivedAt: time.Unix(r.ReceivedAt, 0).UTC()}
	}
	return out, nil
}
