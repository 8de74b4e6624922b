package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aether/aether/backend/domain"
)

// rcGrant inserts a grant row for turns to reference.
func rcGrant(t *testing.T, db *DB, id string) {
	t.Helper()
	if err := db.w.Exec(`INSERT INTO grants (id, agent_iss, agent_sub, brand, capability, workspace, access_mode,
		scope, issued_at, jws) VALUES (?, 'https://agent.example', 'alice', 'acme', 'code', '/w', 'read_only', 'acme.read', 0, 'x')`,
		id).Error; err != nil {
		t.Fatal(err)
	}
}

var rcT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func rcTurn(i int) Turn {
	return Turn{ID: fmt.Sprintf("turn-%d", i), TaskID: fmt.Sprintf("task-%d", i), ContextID: "ctx-1", Brand: "acme",
		BrandScope: "acme.read", GrantID: "g1", Agent: domain.Agent{Issuer: "https://agent.example", Subject: "alice"},
		PolicyHash: "p1", StartedAt: rcT0.Add(time.Duration(i) * time.Second)}
}

func TestStartTurn(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	rcGrant(t, db, "g1")
	for i := 1; i <= 3; i++ {
		if err := db.StartTurn(ctx, rcTurn(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.StartTurn(ctx, rcTurn(2)); !errors.Is(err, ErrTurnExists) {
		t.Errorf("second start: %v, want ErrTurnExists", err)
	}
	bad := rcTurn(9)
	bad.GrantID = "nope"
	if err := db.StartTurn(ctx, bad); err == nil {
		t.Error("started a turn under an unknown grant")
	}
	open, err := db.OpenTurns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != 3 || open[0].ID != "turn-1" || open[2].ID != "turn-3" {
		t.Fatalf("open turns = %+v", open)
	}
	got := open[1]
	want := rcTurn(2)
	want.Status = domain.TurnRunning
	if got.EndedAt != nil || !got.StartedAt.Equal(want.StartedAt) {
		t.Errorf("times: %+v", got)
	}
	got.StartedAt, want.StartedAt = time.Time{}, time.Time{}
	if got != want {
		t.Errorf("turn = %+v, want %+v", got, want)
	}
	var scope string
	db.w.Raw(`SELECT scope FROM turns WHERE id = 'turn-1'`).Scan(&scope)
	if scope != PactScope {
		t.Errorf("scope column = %q", scope)
	}
	if _, err := db.GetTurn(ctx, "missing"); !errors.Is(err, ErrTurnNotFound) {
		t.Errorf("GetTurn(missing) = %v", err)
	}
}
