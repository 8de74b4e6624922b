package store

import (
	"context"
	"path/filepath"
	"testing"

	"gorm.io/gorm"

	"github.com/aether/aether/backend/domain"
)

// TestAgentColumnsUnchanged: records carry a domain.Agent, yet pact.sqlite keeps the agent in
// the agent_iss and agent_sub columns it always had. Rows written by raw SQL, as an older node
// left them, read back with their Agent; records written now land in those same columns.
func TestAgentColumnsUnchanged(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "pact.sqlite")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	old := domain.Agent{Issuer: "https://old.example", Subject: "ann"}
	flowMust(t, db.write(ctx, func(tx *gorm.DB) error {
		if err := tx.Exec(`INSERT INTO grants (id, agent_iss, agent_sub, brand, capability, workspace, access_mode, scope, issued_at, jws)
			VALUES ('g_old', ?, ?, 'review', 'review', '/ws', 'read_only', 'review:read_only', ?, 'jws')`, old.Issuer, old.Subject, ms(flowT0)).Error; err != nil {
			return err
		}
		return tx.Exec(`INSERT INTO device_flows (id, device_code_hash, user_code, agent_iss, agent_sub, brand, scope, status, interval_s, created_at, expires_at)
			VALUES ('df_old', 'hash-old', 'OLDCODEX', ?, ?, 'review', 'review:read_only', 'pending', 5, ?, ?)`,
			old.Issuer, old.Subject, ms(flowT0), ms(flowT0)+600_000).Error
	}))
	flowMust(t, db.Close())
	if db, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	g, err := db.GrantByID(ctx, "g_old")
	if err != nil || g.Agent != old || g.AccessMode != domain.ReadOnly {
		t.Fatalf("old grant = %+v, %v", g, err)
	}
	f, err := db.FlowByUserCode(ctx, "OLDCODEX")
	if err != nil || f.Agent != old {
		t.Fatalf("old flow = %+v, %v", f, err)
	}

	fresh := domain.Agent{Issuer: "https://new.example", Subject: "bea"}
	turn := Turn{ID: "t_new", TaskID: "task-1", ContextID: "ctx-1", Brand: "review", BrandScope: "review:read_only",
		GrantID: "g_old", Agent: fresh, PolicyHash: "p1", StartedAt: flowT0}
	flowMust(t, db.StartTurn(ctx, turn))
	var cols struct{ AgentIss, AgentSub string }
	if err := db.read(ctx).Raw(`SELECT agent_iss, agent_sub FROM turns WHERE id = 't_new'`).Scan(&cols).Error; err != nil {
		t.Fatal(err)
	}
	if cols.AgentIss != fresh.Issuer || cols.AgentSub != fresh.Subject {
		t.Fatalf("turn's columns = %+v, want %+v", cols, fresh)
	}
}
