package store

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/aether/aether/backend/domain"
)

// ModelUse is the model tokens a grant's turns used on day (UTC, YYYY-MM-DD), as the node's
// model gateway counted them (docs/model-gateway.md).
func (db *DB) ModelUse(ctx context.Context, grant domain.GrantID, day string) (int64, error) {
	var tokens []int64
	err := db.read(ctx).Raw(`SELECT tokens FROM model_use WHERE grant_id = ? AND day = ?`, grant, day).Scan(&tokens).Error
	if err != nil {
		return 0, fmt.Errorf("read grant %s's model use on %s: %w", grant, day, err)
	}
	if len(tokens) == 0 {
		return 0, nil
	}
	return tokens[0], nil
}

// AddModelUse adds tokens to a grant's use on day, once the write is durable.
func (db *DB) AddModelUse(ctx context.Context, grant domain.GrantID, day string, tokens int64) error {
	if tokens < 0 {
		return fmt.Errorf("add grant %s's model use: %d tokens", grant, tokens)
	}
	err := db.write(ctx, func(tx *gorm.DB) error {
		return tx.Exec(`INSERT INTO model_use (grant_id, day, tokens) VALUES (?, ?, ?)
			ON CONFLICT (grant_id, day) DO UPDATE SET tokens = tokens + excluded.tokens`, grant, day, tokens).Error
	})
	if err != nil {
		return fmt.Errorf("add grant %s's model use on %s: %w", grant, day, err)
	}
	return nil
}
