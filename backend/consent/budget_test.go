package consent

import (
	"testing"
)

// TestGrantBudget: the owner's approval sets the grant's model tokens a day, signed into the
// grant and kept in its row through a restart; without one the grant follows its brand's
// (docs/model-gateway.md).
func TestGrantBudget(t *testing.T) {
	f := newFixture(t)
	b := f.pol().Pact.Brands[0]
	b.TokensPerDay = 5000
	f.setBrand(b)
	decide := func(tokens *int64) *Decision {
		fs := f.start(alice, "", b.ID)
		dec, err := f.svc.DecideTerms(ctx, f.request(fs).ID, fs.UserCode, true, Terms{TokensPerDay: tokens}, f.pol())
		if err != nil {
			t.Fatal(err)
		}
		return dec
	}
	zero, own := int64(0), int64(1200)
	for _, c := range []struct {
		name  string
		set   *int64
		want  int64
		claim *int64
	}{
		{"the owner's budget", &own, 1200, &own},
		{"no limit", &zero, 0, &zero},
		{"the brand's", nil, 5000, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			dec := decide(c.set)
			claims, err := f.svc.VerifyGrant(dec.Grant.JWS)
			if err != nil {
				t.Fatal(err)
			}
			if (claims.TokensPerDay == nil) != (c.claim == nil) || (c.claim != nil && *claims.TokensPerDay != *c.claim) {
				t.Errorf("signed tokens_per_day %v, want %v", claims.TokensPerDay, c.claim)
			}
			f.restart()
			got, err := f.svc.TokensPerDay(ctx, dec.Grant.ID, b)
			if err != nil || got != c.want {
				t.Errorf("the grant's budget after a restart: %d (%v), want %d", got, err, c.want)
			}
		})
	}
	t.Run("a negative budget is refused", func(t *testing.T) {
		fs := f.start(bob, "", b.ID)
		neg := int64(-1)
		_, err := f.svc.DecideTerms(ctx, f.request(fs).ID, fs.UserCode, true, Terms{TokensPerDay: &neg}, f.pol())
		wantErr(t, err, ErrBadBudget)
	})
}
