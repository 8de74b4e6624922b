package consent

import (
	"errors"
	"sync"
	"testing"

	"github.com/aether/aether/backend/domain"
)

func TestRevocation(t *testing.T) {
	t.Run("V1 token used after revoke", func(t *testing.T) {
		f := newFixture(t)
		tok, gid := f.grant(alice, "review", Month)
		v, err := f.svc.Revoke(ctx, gid)
		if err != nil || v.Status != GrantRevoked || v.RevokedAt == nil {
			t.Fatalf("Revoke = %+v, %v", v, err)
		}
		_, err = f.svc.CheckDelegation(ctx, tok.AccessToken, alice, "review", f.pol())
		wantReason(t, err, ReasonRevoked)
		_, err = f.svc.Refresh(ctx, alice, "review", f.pol())
		wantOAuth(t, err, CodeInvalidGrant, 400)
	})

	t.Run("V3 revoke then restart", func(t *testing.T) {
		f := newFixture(t)
		tok, gid := f.grant(alice, "review", Forever)
		if _, err := f.svc.Revoke(ctx, gid); err != nil {
			t.Fatal(err)
		}
		f.restart()
		_, err := f.svc.CheckDelegation(ctx, tok.AccessToken, alice, "review", f.pol())
		wantReason(t, err, ReasonRevoked)
		gs, _ := f.svc.Grants(ctx)
		if len(gs) != 1 || gs[0].Status != GrantRevoked {
			t.Errorf("grants after restart = %+v", gs)
		}
	})

	t.Run("V4 revoke races token issuance", func(t *testing.T) {
		f := newFixture(t)
		for range 10 {
			fs := f.start(alice, "review:read_only", "")
			gid := f.decide(fs, true, "").Grant.ID
			var (
				wg                 sync.WaitGroup
				tok                *Token
				pollErr, revokeErr error
			)
			wg.Add(2)
			go func() { defer wg.Done(); tok, pollErr = f.svc.Poll(ctx, alice, fs.DeviceCode) }()
			go func() { defer wg.Done(); _, revokeErr = f.svc.Revoke(ctx, gid) }()
			wg.Wait()
			if revokeErr != nil {
				t.Fatal(revokeErr)
			}
			// Either the redemption came first (and its token is dead now), or
			// the revocation did (and no token was issued).
			if pollErr != nil {
				wantOAuth(t, pollErr, CodeAccessDenied, 400)
				continue
			}
			_, err := f.svc.CheckDelegation(ctx, tok.AccessToken, alice, "review", f.pol())
			wantReason(t, err, ReasonRevoked)
		}
	})

	t.Run("V5 re-approve after revoke", func(t *testing.T) {
		f := newFixture(t)
		old, oldID := f.grant(alice, "review", Month)
		if _, err := f.svc.Revoke(ctx, oldID); err != nil {
			t.Fatal(err)
		}
		fresh, newID := f.grant(alice, "review", Month)
		if newID == oldID {
			t.Fatal("re-approval reused the grant id")
		}
		_, err := f.svc.CheckDelegation(ctx, old.AccessToken, alice, "review", f.pol())
		wantReason(t, err, ReasonRevoked)
		d, err := f.svc.CheckDelegation(ctx, fresh.AccessToken, alice, "review", f.pol())
		if err != nil || d.GrantID != newID {
			t.Fatalf("new token: %+v, %v", d, err)
		}
		ref, err := f.svc.Refresh(ctx, alice, "review", f.pol())
		if err != nil || f.claimsOf(ref.AccessToken).Grant != string(newID) {
			t.Fatalf("refresh: %v", err)
		}
	})
}

func TestRevokeIsIdempotentAndEndsPendingRequests(t *testing.T) {
	f := newFixture(t)
	_, gid := f.grant(alice, "review", Month)
	again := f.start(alice, "review:read_only", "") // asked again meanwhile: ended by the revoke
	other := f.start(alice, "", "fix")              // another brand: untouched
	events, stop := f.svc.Subscribe()
	defer stop()

	v, err := f.svc.Revoke(ctx, gid)
	if err != nil {
		t.Fatal(err)
	}
	e := next(t, events)
	if e.Kind != EventRequestDecided || e.Outcome != OutcomeDenied || e.Agent != alice || e.Brand != "review" || e.Request.UserCode != again.UserCode {
		t.Errorf("first event = %+v", e)
	}
	e = next(t, events)
	if e.Kind != EventGrantRevoked || e.Grant.ID != gid || e.Agent != alice || e.Brand != "review" {
		t.Errorf("second event = %+v", e)
	}
	_, err = f.svc.Poll(ctx, alice, again.DeviceCode)
	wantOAuth(t, err, CodeAccessDenied, 400)
	if _, status, _ := f.svc.Lookup(ctx, other.UserCode); status != domain.FlowPending {
		t.Errorf("other brand's request is %s", status)
	}

	f.clock.Advance(1)
	v2, err := f.svc.Revoke(ctx, gid)
	if err != nil || !v2.RevokedAt.Equal(*v.RevokedAt) {
		t.Fatalf("second revoke = %+v, %v", v2, err)
	}
	select {
	case e := <-events:
		t.Errorf("second revoke emitted %+v", e)
	default:
	}
	if _, err := f.svc.Revoke(ctx, "g_nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown grant: %v", err)
	}
}
