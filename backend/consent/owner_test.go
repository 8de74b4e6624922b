package consent

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aether/aether/backend/domain"
)

func TestConsentDecisions(t *testing.T) {
	const ip = "192.0.2.1"

	t.Run("C6 double submit and allow/deny race", func(t *testing.T) {
		f := newFixture(t)
		for round := range 5 {
			fs := f.start(alice, "review:read_only", "")
			id := f.request(fs).ID
			var (
				wg   sync.WaitGroup
				errs = make([]error, 4)
				decs = make([]*Decision, 4)
			)
			for i := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					decs[i], errs[i] = f.svc.Decide(ctx, id, fs.UserCode, i%2 == 0, "", f.pol())
				}()
			}
			wg.Wait()
			var won *Decision
			for i, err := range errs {
				switch {
				case err == nil && won == nil:
					won = decs[i]
				case errors.Is(err, ErrAlreadyDecided):
				default:
					t.Fatalf("round %d: decision %d: %v (already won: %v)", round, i, err, won != nil)
				}
			}
			if won == nil {
				t.Fatalf("round %d: nobody won", round)
			}
			_, err := f.svc.Poll(ctx, alice, fs.DeviceCode)
			if won.Outcome == OutcomeAllowed && err != nil {
				t.Errorf("round %d: allowed, but poll says %v", round, err)
			}
			if won.Outcome == OutcomeDenied {
				wantOAuth(t, err, CodeAccessDenied, 400)
			}
		}
		// One grant per allowed request, never two.
		gs, _ := f.svc.Grants(ctx)
		seen := map[domain.GrantID]bool{}
		for _, g := range gs {
			if seen[g.ID] {
				t.Errorf("grant %s twice", g.ID)
			}
			seen[g.ID] = true
		}
		if len(gs) > 5 {
			t.Errorf("%d grants for 5 requests", len(gs))
		}
	})

	t.Run("C7 approve after expiry", func(t *testing.T) {
		f := newFixture(t)
		events, stop := f.svc.Subscribe()
		defer stop()
		fs := f.start(alice, "review:read_only", "")
		next(t, events)
		req := f.request(fs) // the page was loaded before expiry …
		f.clock.Advance(10 * time.Minute)
		_, err := f.svc.Decide(ctx, req.ID, fs.UserCode, true, "", f.pol()) // … and submitted after
		wantErr(t, err, ErrExpired)
		if e := next(t, events); e.Kind != EventRequestExpired || e.Agent != alice {
			t.Errorf("event = %+v", e)
		}
		if gs, _ := f.svc.Grants(ctx); len(gs) != 0 {
			t.Errorf("expired approval wrote %d grants", len(gs))
		}
		_, err = f.svc.Decide(ctx, req.ID, fs.UserCode, true, "", f.pol())
		wantErr(t, err, ErrExpired)
		_, err = f.svc.Poll(ctx, alice, fs.DeviceCode)
		wantOAuth(t, err, CodeExpiredToken, 400)
	})

	t.Run("C8 request id of one, code of another", func(t *testing.T) {
		f := newFixture(t)
		a := f.start(alice, "review:read_only", "")
		b := f.start(bob, "review:read_only", "")
		ra, rb := f.request(a), f.request(b)
		_, err := f.svc.Decide(ctx, ra.ID, b.UserCode, true, "", f.pol())
		wantErr(t, err, ErrWrongCode)
		for _, fs := range []*FlowStart{a, b} {
			if _, status, _ := f.svc.Lookup(ctx, fs.UserCode); status != domain.FlowPending {
				t.Errorf("%s is %s", fs.UserCode, status)
			}
		}
		// The mismatch counted as a wrong guess on A: four more and the next locks it.
		for range 4 {
			_, err = f.svc.Decide(ctx, ra.ID, b.UserCode, true, "", f.pol())
			wantErr(t, err, ErrWrongCode)
		}
		_, err = f.svc.Decide(ctx, ra.ID, b.UserCode, true, "", f.pol())
		wantErr(t, err, ErrLocked)
		// B is untouched and still decides with its own pair.
		if dec, err := f.svc.Decide(ctx, rb.ID, b.UserCode, true, "", f.pol()); err != nil || dec.Grant.Agent != bob {
			t.Fatalf("B: %v", err)
		}
		_, err = f.svc.Decide(ctx, "df_nope", a.UserCode, true, "", f.pol())
		wantErr(t, err, ErrNotFound)
	})

	t.Run("C12 second submission", func(t *testing.T) {
		f := newFixture(t)
		fs := f.start(alice, "review:read_only", "")
		id := f.request(fs).ID
		first := f.decide(fs, true, Day)
		for _, allow := range []bool{true, false} {
			_, err := f.svc.Decide(ctx, id, fs.UserCode, allow, "", f.pol())
			wantErr(t, err, ErrAlreadyDecided)
		}
		gs, _ := f.svc.Grants(ctx)
		if len(gs) != 1 || gs[0].ID != first.Grant.ID {
			t.Errorf("grants = %+v", gs)
		}
		if _, status, _ := f.svc.Lookup(ctx, fs.UserCode); status != domain.FlowApproved {
			t.Errorf("status = %s", status)
		}
	})
}

func TestDurations(t *testing.T) {
	f := newFixture(t)
	now := f.clock.Now()
	for _, c := range []struct {
		d    Duration
		want *time.Time
	}{
		{Day, ptr(now.Add(24 * time.Hour))},
		{Month, ptr(now.Add(30 * 24 * time.Hour))},
		{"", ptr(now.Add(30 * 24 * time.Hour))}, // DefaultDuration
		{Forever, nil},
	} {
		dec := f.decide(f.start(alice, "review:read_only", ""), true, c.d)
		g := dec.Grant
		if (g.ExpiresAt == nil) != (c.want == nil) || (c.want != nil && !g.ExpiresAt.Equal(*c.want)) {
			t.Errorf("%q: expires %v, want %v", c.d, g.ExpiresAt, c.want)
		}
		claims, err := f.svc.VerifyGrant(g.JWS)
		if err != nil {
			t.Fatal(err)
		}
		if (claims.ExpiresAt == nil) != (c.want == nil) {
			t.Errorf("%q: signed exp %v", c.d, claims.ExpiresAt)
		}
	}
	fs := f.start(alice, "review:read_only", "")
	_, err := f.svc.Decide(ctx, f.request(fs).ID, fs.UserCode, true, "year", f.pol())
	wantErr(t, err, ErrBadDuration)
	if _, status, _ := f.svc.Lookup(ctx, fs.UserCode); status != domain.FlowPending {
		t.Errorf("a refused duration decided the request: %s", status)
	}
}

func ptr(t time.Time) *time.Time { return &t }

func TestSignedGrant(t *testing.T) {
	f := newFixture(t)
	dec := f.decide(f.start(alice, "", "fix"), true, Month)
	g := dec.Grant
	if g.Agent != alice || g.Brand != "fix" || g.Capability != "fix" || g.Workspace != "/ws/fix" ||
		g.AccessMode != "read_write" || g.Scope != "fix:read_write" || g.Status != GrantActive || !strings.HasPrefix(string(g.ID), "g_") {
		t.Errorf("grant = %+v", g)
	}
	c, err := f.svc.VerifyGrant(g.JWS)
	if err != nil {
		t.Fatal(err)
	}
	if c.Issuer != publicURL || c.Subject != "alice" || c.AgentIss != alice.Issuer || c.ID != string(g.ID) || c.Brand != "fix" ||
		c.Capability != "fix" || c.Workspace != "/ws/fix" || c.AccessMode != "read_write" || c.Scope != "fix:read_write" ||
		!c.IssuedAt.Equal(g.IssuedAt) || !c.ExpiresAt.Equal(*g.ExpiresAt) {
		t.Errorf("claims = %+v", c)
	}
	// Expired grants still verify as signed; other objects and tampering do not.
	f.clock.Advance(31 * 24 * time.Hour)
	if _, err := f.svc.VerifyGrant(g.JWS); err != nil {
		t.Errorf("expired grant: %v", err)
	}
	tok, _ := f.grant(alice, "review", Month)
	if _, err := f.svc.VerifyGrant(tok.AccessToken); err == nil {
		t.Error("a delegation token verified as a grant")
	}
	forged := *c
	forged.AccessMode = "read_write"
	forged.Issuer = "https://other.example"
	other, _ := f.key.Sign(GrantType, forged)
	if _, err := f.svc.VerifyGrant(other); err == nil {
		t.Error("another issuer's grant verified")
	}
	parts := strings.Split(g.JWS, ".")
	forged = *c
	forged.Workspace = "/"
	evil, _ := f.key.Sign(GrantType, forged)
	if _, err := f.svc.VerifyGrant(parts[0] + "." + strings.Split(evil, ".")[1] + "." + parts[2]); err == nil {
		t.Error("a grant with a swapped payload verified")
	}
}

func TestBrandChangedBeforeApproval(t *testing.T) {
	f := newFixture(t)
	events, stop := f.svc.Subscribe()
	defer stop()
	fs := f.start(alice, "review:read_only", "")
	next(t, events)
	b := reviewBrand()
	b.Scope.ID = "review:all"
	f.setBrand(b)
	_, err := f.svc.Decide(ctx, f.request(fs).ID, fs.UserCode, true, "", f.pol())
	wantErr(t, err, ErrBrandChanged)
	if e := next(t, events); e.Kind != EventRequestDecided || e.Outcome != OutcomeDenied || e.Agent != alice {
		t.Errorf("event = %+v", e)
	}
	_, err = f.svc.Poll(ctx, alice, fs.DeviceCode)
	wantOAuth(t, err, CodeAccessDenied, 400)
}
