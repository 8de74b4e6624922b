package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aether/aether/backend/domain"
)

var flowT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func testFlow(id, userCode, sub string) DeviceFlow {
	return DeviceFlow{
		ID: id, DeviceCodeHash: "hash-" + id, UserCode: userCode,
		Agent: domain.Agent{Issuer: "https://id.example", Subject: sub}, Brand: "review", Scope: "review:read_only",
		Interval: 5 * time.Second, CreatedAt: flowT0, ExpiresAt: flowT0.Add(10 * time.Minute),
	}
}

func testGrant(id, sub string) *Grant {
	return &Grant{
		ID: domain.GrantID(id), Agent: domain.Agent{Issuer: "https://id.example", Subject: sub}, Brand: "review", Capability: "review",
		Workspace: "/ws", AccessMode: "read_only", Scope: "review:read_only", IssuedAt: flowT0, JWS: "jws-" + id,
	}
}

var testFlowLimits = FlowLimits{PerAgent: 2, PerSite: 10, Total: 3, Site: func(iss string) string { return iss }}

func TestCreateFlowCaps(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	flowMust(t, db.CreateFlow(ctx, testFlow("f1", "BBBBBBBB", "alice"), testFlowLimits))
	flowMust(t, db.CreateFlow(ctx, testFlow("f2", "CCCCCCCC", "alice"), testFlowLimits))
	if err := db.CreateFlow(ctx, testFlow("f3", "DDDDDDDD", "alice"), testFlowLimits); !errors.Is(err, ErrAgentFlowCap) {
		t.Fatalf("third flow of one agent: %v, want ErrAgentFlowCap", err)
	}
	flowMust(t, db.CreateFlow(ctx, testFlow("f4", "FFFFFFFF", "bob"), testFlowLimits))
	if err := db.CreateFlow(ctx, testFlow("f5", "GGGGGGGG", "carol"), testFlowLimits); !errors.Is(err, ErrFlowCap) {
		t.Fatalf("fourth flow on the node: %v, want ErrFlowCap", err)
	}
	// Expired pending flows no longer count.
	late := testFlow("f6", "HHHHHHHH", "alice")
	late.CreatedAt, late.ExpiresAt = flowT0.Add(10*time.Minute), flowT0.Add(20*time.Minute)
	flowMust(t, db.CreateFlow(ctx, late, testFlowLimits))
}

// TestCreateFlowSiteCap: agents of one site share its cap whatever their issuer's exact URL,
// other sites keep theirs, and the refusal says when the site's oldest flow expires.
func TestCreateFlowSiteCap(t *testing.T) {
	t.Run("F1 the agents of one issuer site share its pending cap", func(t *testing.T) {
		db, _ := openTemp(t)
		ctx := context.Background()
		lim := FlowLimits{PerAgent: 2, PerSite: 3, Total: 10, Site: func(iss string) string {
			return iss[strings.Index(iss, ".")+1:] // https://a.evil.example → evil.example
		}}
		codes := []string{"BBBBBBBB", "CCCCCCCC", "DDDDDDDD", "FFFFFFFF", "GGGGGGGG"}
		for i, iss := range []string{"https://a.evil.example", "https://b.evil.example", "https://c.evil.example"} {
			f := testFlow(fmt.Sprint("e", i), codes[i], "sub")
			f.Agent.Issuer = iss
			f.CreatedAt, f.ExpiresAt = flowT0.Add(time.Duration(i)*time.Second), flowT0.Add(10*time.Minute+time.Duration(i)*time.Second)
			flowMust(t, db.CreateFlow(ctx, f, lim))
		}
		more := testFlow("e3", codes[3], "other")
		more.Agent.Issuer = "https://d.evil.example"
		more.CreatedAt = flowT0.Add(5 * time.Second)
		err := db.CreateFlow(ctx, more, lim)
		var capErr *FlowCapError
		if !errors.As(err, &capErr) || !errors.Is(err, ErrSiteFlowCap) || capErr.Limit != 3 || !capErr.Until.Equal(flowT0.Add(10*time.Minute)) {
			t.Fatalf("a fourth flow of evil.example: %v (%+v), want ErrSiteFlowCap until the first one expires", err, capErr)
		}
		flowMust(t, db.CreateFlow(ctx, testFlow("g1", codes[4], "alice"), lim)) // id.example has its own
	})
}

func TestCreateFlowUserCodeUnique(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	flowMust(t, db.CreateFlow(ctx, testFlow("f1", "BBBBBBBB", "alice"), testFlowLimits))
	if err := db.CreateFlow(ctx, testFlow("f2", "BBBBBBBB", "bob"), testFlowLimits); !errors.Is(err, ErrUserCodeTaken) {
		t.Fatalf("same user code: %v, want ErrUserCodeTaken", err)
	}
	// Once the first is no longer pending, its code may be reused.
	_, err := db.UpdateFlow(ctx, "f1", func(f *DeviceFlow, _ *Grant) (*Grant, error) {
		f.Status = domain.FlowDenied
		return nil, nil
	})
	flowMust(t, err)
	flowMust(t, db.CreateFlow(ctx, testFlow("f2", "BBBBBBBB", "bob"), testFlowLimits))
	got, err := db.FlowByUserCode(ctx, "BBBBBBBB")
	flowMust(t, err)
	if got.ID != "f2" {
		t.Errorf("FlowByUserCode = %s, want the pending f2", got.ID)
	}
}

func TestUpdateFlowCommitsOutcomeAndLinksGrant(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	flowMust(t, db.CreateFlow(ctx, testFlow("f1", "BBBBBBBB", "alice"), testFlowLimits))
	wrong := errors.New("wrong code")
	f, err := db.UpdateFlow(ctx, "f1", func(f *DeviceFlow, g *Grant) (*Grant, error) {
		f.FailedGuesses++
		return nil, wrong
	})
	if !errors.Is(err, wrong) || f == nil || f.FailedGuesses != 1 {
		t.Fatalf("outcome = %v, flow = %+v", err, f)
	}
	// The counted guess was committed although fn returned an error.
	f, err = db.UpdateFlowByDeviceCode(ctx, "hash-f1", func(f *DeviceFlow, g *Grant) (*Grant, error) {
		if f.FailedGuesses != 1 || g != nil {
			t.Errorf("second read: guesses %d, grant %v", f.FailedGuesses, g)
		}
		now := flowT0.Add(time.Minute)
		f.Status, f.DecidedAt, f.Duration = domain.FlowApproved, &now, "month"
		return testGrant("g1", "alice"), nil
	})
	flowMust(t, err)
	if f.GrantID != "g1" || f.Status != domain.FlowApproved {
		t.Fatalf("flow after approval: %+v", f)
	}
	g, err := db.GrantByID(ctx, "g1")
	flowMust(t, err)
	if g.DeviceFlowID != "f1" || !g.Live(flowT0) {
		t.Errorf("grant: %+v", g)
	}
	_, err = db.UpdateFlowByDeviceCode(ctx, "hash-f1", func(f *DeviceFlow, g *Grant) (*Grant, error) {
		if g == nil || g.ID != "g1" {
			t.Errorf("grant of approved flow = %v", g)
		}
		return nil, nil
	})
	flowMust(t, err)
	if _, err := db.UpdateFlow(ctx, "nope", func(*DeviceFlow, *Grant) (*Grant, error) { return nil, nil }); !errors.Is(err, ErrFlowNotFound) {
		t.Errorf("unknown flow: %v", err)
	}
}

// C6 at the store level: of many racing decisions, exactly one sees pending.
func TestUpdateFlowSingleDecision(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	flowMust(t, db.CreateFlow(ctx, testFlow("f1", "BBBBBBBB", "alice"), testFlowLimits))
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners int
	)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := db.UpdateFlow(ctx, "f1", func(f *DeviceFlow, _ *Grant) (*Grant, error) {
				if f.Status != domain.FlowPending {
					return nil, nil
				}
				mu.Lock()
				winners++
				mu.Unlock()
				f.Status = domain.FlowApproved
				return testGrant(fmt.Sprintf("g%d", i), "alice"), nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	gs, err := db.ListGrants(ctx)
	flowMust(t, err)
	if winners != 1 || len(gs) != 1 {
		t.Fatalf("winners = %d, grants = %d; want one each", winners, len(gs))
	}
}

func TestExpireAndPruneFlows(t *testing.T) {
	db, path := openTemp(t)
	ctx := context.Background()
	flowMust(t, db.CreateFlow(ctx, testFlow("f1", "BBBBBBBB", "alice"), testFlowLimits))
	later := testFlow("f2", "CCCCCCCC", "bob")
	later.ExpiresAt = flowT0.Add(20 * time.Minute)
	flowMust(t, db.CreateFlow(ctx, later, testFlowLimits))

	pending, err := db.PendingFlows(ctx, flowT0.Add(time.Minute))
	flowMust(t, err)
	if len(pending) != 2 || pending[0].ID != "f1" {
		t.Fatalf("pending = %+v", pending)
	}
	expired, err := db.ExpireFlows(ctx, flowT0.Add(10*time.Minute))
	flowMust(t, err)
	if len(expired) != 1 || expired[0].ID != "f1" || expired[0].Status != domain.FlowExpired {
		t.Fatalf("expired = %+v", expired)
	}
	db.Close()
	db, err = Open(path)
	flowMust(t, err)
	defer db.Close()
	f, err := db.FlowByUserCode(ctx, "BBBBBBBB")
	flowMust(t, err)
	if f.Status != domain.FlowExpired {
		t.Errorf("after reopen f1 is %s", f.Status)
	}
	n, err := db.PruneFlows(ctx, flowT0.Add(15*time.Minute))
	flowMust(t, err)
	if n != 1 {
		t.Errorf("pruned %d, want 1 (f2 is still pending)", n)
	}
	if _, err := db.FlowByUserCode(ctx, "BBBBBBBB"); !errors.Is(err, ErrFlowNotFound) {
		t.Errorf("pruned flow still found: %v", err)
	}
}

func flowMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
