package store

import (
	"context"
	"testing"
	"time"

	"github.com/aether/aether/backend/domain"
)

// TestDenyFlows: "Deny all from this issuer" (docs/threats.md C19) is one transaction over
// the pending, unexpired flows that match, and leaves every other flow as it was.
func TestDenyFlows(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	evil := func(id, code, sub string) DeviceFlow {
		f := testFlow(id, code, sub)
		f.Agent.Issuer = "https://id.evil.example"
		return f
	}
	flowMust(t, db.CreateFlow(ctx, evil("f1", "BBBBBBBB", "alice"), testFlowLimits))
	flowMust(t, db.CreateFlow(ctx, evil("f2", "CCCCCCCC", "bob"), testFlowLimits))
	flowMust(t, db.CreateFlow(ctx, testFlow("f3", "DDDDDDDD", "carol"), testFlowLimits))
	fromEvil := func(f DeviceFlow) bool { return f.Agent.Issuer == "https://id.evil.example" }

	// Past their expiry nothing is denied: expired flows are the sweep's.
	if got, err := db.DenyFlows(ctx, flowT0.Add(11*time.Minute), fromEvil); err != nil || len(got) != 0 {
		t.Fatalf("DenyFlows after expiry = %v, %v; want none", got, err)
	}
	now := flowT0.Add(time.Minute)
	got, err := db.DenyFlows(ctx, now, fromEvil)
	if err != nil || len(got) != 2 || got[0].ID != "f1" || got[1].ID != "f2" {
		t.Fatalf("DenyFlows = %+v, %v; want f1 and f2", got, err)
	}
	for _, f := range got {
		if f.Status != domain.FlowDenied || f.DecidedAt == nil || !f.DecidedAt.Equal(now) {
			t.Errorf("returned %s as %s decided %v", f.ID, f.Status, f.DecidedAt)
		}
	}
	pending, err := db.PendingFlows(ctx, now)
	if err != nil || len(pending) != 1 || pending[0].ID != "f3" {
		t.Fatalf("pending after DenyFlows: %+v, %v; want only f3", pending, err)
	}
	stored, err := db.FlowByUserCode(ctx, "BBBBBBBB")
	if err != nil || stored.Status != domain.FlowDenied || stored.DecidedAt == nil {
		t.Fatalf("f1 as stored: %+v, %v", stored, err)
	}
	if again, err := db.DenyFlows(ctx, now, fromEvil); err != nil || len(again) != 0 {
		t.Fatalf("a second DenyFlows = %v, %v; want none", again, err)
	}
}
