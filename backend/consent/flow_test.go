package consent

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aether/aether/backend/domain"
)

func TestStartFlowAnswer(t *testing.T) {
	f := newFixture(t)
	fs := f.start(alice, "review:read_only", "")
	if len(fs.DeviceCode) != deviceCodeLen || !validDeviceCode(fs.DeviceCode) {
		t.Errorf("device code %q is not 128 bits base64url", fs.DeviceCode)
	}
	if len(fs.UserCode) != 9 || fs.UserCode[4] != '-' {
		t.Errorf("user code %q is not XXXX-XXXX", fs.UserCode)
	}
	for _, c := range strings.ReplaceAll(fs.UserCode, "-", "") {
		if !strings.ContainsRune(userCodeAlphabet, c) {
			t.Errorf("user code %q has %q outside the alphabet", fs.UserCode, c)
		}
	}
	if fs.VerificationURI != "https://127.0.0.1:3000/pact/consent" ||
		fs.VerificationURIComplete != fs.VerificationURI+"?user_code="+fs.UserCode ||
		fs.ExpiresIn != 600 || fs.Interval != 5 {
		t.Errorf("answer = %+v", fs)
	}
	// Only the hash of the device code is at rest.
	f.db.Close()
	data, err := os.ReadFile(f.path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(fs.DeviceCode)) || !bytes.Contains(data, []byte(hashDeviceCode(fs.DeviceCode))) {
		t.Error("pact.sqlite holds the device code itself, or not its hash")
	}
	f.open()
	pend, err := f.svc.Pending(ctx)
	if err != nil || len(pend) != 1 {
		t.Fatalf("pending = %v, %v", pend, err)
	}
	r := pend[0]
	// The brand's name and scope text are the owner's side's, from its policy: owner's TestConsentViewsNameTheBrand.
	if r.Agent != alice || r.Brand != "review" || r.Scope != "review:read_only" ||
		r.UserCode != fs.UserCode || !r.ExpiresAt.Equal(r.CreatedAt.Add(10*time.Minute)) {
		t.Errorf("request = %+v", r)
	}
}

func TestFlowTTLClamped(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{{time.Minute, 5 * time.Minute}, {time.Hour, 10 * time.Minute}, {7 * time.Minute, 7 * time.Minute}} {
		f := newFixture(t, func(cfg *Config) { cfg.FlowTTL = c.in })
		if got := f.start(alice, "", "review").ExpiresIn; got != int(c.want/time.Second) {
			t.Errorf("FlowTTL %v: expires_in %d, want %v", c.in, got, c.want)
		}
	}
}

func TestDeviceFlow(t *testing.T) {
	const ip = "198.51.100.7"

	t.Run("D1 no caller identity", func(t *testing.T) {
		// The gateway answers 401 before calling consent; consent refuses too.
		f := newFixture(t)
		_, err := f.svc.StartFlow(ctx, domain.Agent{}, "review:read_only", "", f.pol())
		wantOAuth(t, err, CodeInvalidClient, 401)
		fs := f.start(alice, "review:read_only", "")
		_, err = f.svc.Poll(ctx, domain.Agent{Issuer: alice.Issuer}, fs.DeviceCode)
		wantOAuth(t, err, CodeInvalidClient, 401)
	})

	t.Run("D2 pending flow caps", func(t *testing.T) {
		f := newFixture(t, func(c *Config) { c.MaxPendingTotal, c.MaxPendingPerSite = 8, 8 })
		for range 5 {
			f.start(alice, "review:read_only", "")
		}
		for range 200 {
			_, err := f.svc.StartFlow(ctx, alice, "review:read_only", "", f.pol())
			wantOAuth(t, err, CodeSlowDown, 429)
		}
		// The same sub at another issuer is another agent.
		for range 3 {
			f.start(mallory, "review:read_only", "")
		}
		_, err := f.svc.StartFlow(ctx, bob, "review:read_only", "", f.pol())
		wantOAuth(t, err, CodeSlowDown, 429)
		pend, _ := f.svc.Pending(ctx)
		if len(pend) != 8 {
			t.Fatalf("%d pending rows, want the cap of 8", len(pend))
		}
		// Expired requests free their slots.
		f.clock.Advance(10 * time.Minute)
		f.start(bob, "review:read_only", "")
	})

	t.Run("D3 pact scope in any disguise", func(t *testing.T) {
		f := newFixture(t)
		for _, scope := range []string{
			"pact", "PACT", " Pact ", "review:read_only pact", "pact,review:read_only", "p a c t",
			"ｐａｃｔ", "𝐩𝐚𝐜𝐭", "pa\u200bct", "\u0440\u0430\u0441\u0442", "P\u0391CT", "pact\u3000",
		} {
			for _, brand := range []domain.BrandID{"", "review"} {
				_, err := f.svc.StartFlow(ctx, alice, scope, brand, f.pol())
				wantOAuth(t, err, CodeInvalidScope, 400)
				if !strings.Contains(err.Error(), "the node adds the pact scope") {
					t.Errorf("scope %q: %v", scope, err)
				}
			}
		}
		if pend, _ := f.svc.Pending(ctx); len(pend) != 0 {
			t.Errorf("%d requests stored", len(pend))
		}
	})

	t.Run("D4 unknown or oversized scope", func(t *testing.T) {
		f := newFixture(t)
		for _, c := range []struct {
			scope string
			brand domain.BrandID
			code  string
		}{
			{"admin", "", CodeInvalidScope},
			{"", "", CodeInvalidScope},
			{strings.Repeat("a", 100<<10), "", CodeInvalidScope},
			{"review:read_only fix:read_write", "", CodeInvalidScope},
			{"Review:Read_Only", "", CodeInvalidScope},
			{"fix:read_write", "review", CodeInvalidScope},
			{"review:read_only", "nope", CodeInvalidRequest},
			{"\xff", "", CodeInvalidScope},
		} {
			_, err := f.svc.StartFlow(ctx, alice, c.scope, c.brand, f.pol())
			wantOAuth(t, err, c.code, 400)
		}
		if pend, _ := f.svc.Pending(ctx); len(pend) != 0 {
			t.Errorf("%d requests stored", len(pend))
		}
	})

	t.Run("D5 poll faster than interval", func(t *testing.T) {
		f := newFixture(t)
		fs := f.start(alice, "review:read_only", "")
		_, err := f.svc.Poll(ctx, alice, fs.DeviceCode)
		wantOAuth(t, err, CodeAuthorizationPending, 400)
		f.clock.Advance(time.Second)
		_, err = f.svc.Poll(ctx, alice, fs.DeviceCode)
		wantOAuth(t, err, CodeSlowDown, 400) // interval is now 10 s
		f.clock.Advance(10 * time.Second)
		_, err = f.svc.Poll(ctx, alice, fs.DeviceCode)
		wantOAuth(t, err, CodeAuthorizationPending, 400)
		// Sticky: 6 s would have done for the first interval of 5 s, not for 10 s.
		f.clock.Advance(6 * time.Second)
		_, err = f.svc.Poll(ctx, alice, fs.DeviceCode)
		wantOAuth(t, err, CodeSlowDown, 400)
		// And it survives a restart.
		f.restart()
		f.clock.Advance(10 * time.Second)
		_, err = f.svc.Poll(ctx, alice, fs.DeviceCode)
		wantOAuth(t, err, CodeSlowDown, 400) // 10 s < 15 s
	})

	t.Run("D5 a poll a few milliseconds early is not too fast", func(t *testing.T) {
		f := newFixture(t)
		fs := f.start(alice, "review:read_only", "")
		_, err := f.svc.Poll(ctx, alice, fs.DeviceCode)
		wantOAuth(t, err, CodeAuthorizationPending, 400)
		f.clock.Advance(5*time.Second - 20*time.Millisecond) // a client's timer, jittered
		_, err = f.svc.Poll(ctx, alice, fs.DeviceCode)
		wantOAuth(t, err, CodeAuthorizationPending, 400)
	})

	t.Run("D6 poll while pending", func(t *testing.T) {
		f := newFixture(t)
		fs := f.start(alice, "review:read_only", "")
		for range 3 {
			_, err := f.svc.Poll(ctx, alice, fs.DeviceCode)
			wantOAuth(t, err, CodeAuthorizationPending, 400)
			f.clock.Advance(5 * time.Second)
		}
	})

	t.Run("D7 poll after deny", func(t *testing.T) {
		f := newFixture(t)
		fs := f.start(alice, "review:read_only", "")
		if dec := f.decide(fs, false, ""); dec.Outcome != OutcomeDenied || dec.Grant != nil {
			t.Fatalf("decision = %+v", dec)
		}
		for range 2 {
			_, err := f.svc.Poll(ctx, alice, fs.DeviceCode)
			wantOAuth(t, err, CodeAccessDenied, 400)
			f.clock.Advance(5 * time.Second)
		}
		if _, status, _ := f.svc.Lookup(ctx, fs.UserCode); status != domain.FlowDenied {
			t.Errorf("status = %s", status)
		}
		if gs, _ := f.svc.Grants(ctx); len(gs) != 0 {
			t.Errorf("deny wrote %d grants", len(gs))
		}
	})

	t.Run("D8 poll after expiry", func(t *testing.T) {
		f := newFixture(t)
		events, stop := f.svc.Subscribe()
		defer stop()
		fs := f.start(alice, "review:read_only", "")
		next(t, events) // request_added
		f.clock.Advance(10 * time.Minute)
		_, err := f.svc.Poll(ctx, alice, fs.DeviceCode)
		wantOAuth(t, err, CodeExpiredToken, 400)
		if e := next(t, events); e.Kind != EventRequestExpired || e.Agent != alice || e.Brand != "review" {
			t.Errorf("event = %+v", e)
		}
		f.clock.Advance(5 * time.Second)
		_, err = f.svc.Poll(ctx, alice, fs.DeviceCode)
		wantOAuth(t, err, CodeExpiredToken, 400)
		// An approved but uncollected code expires too.
		fs = f.start(alice, "review:read_only", "")
		f.decide(fs, true, "")
		f.clock.Advance(10 * time.Minute)
		_, err = f.svc.Poll(ctx, alice, fs.DeviceCode)
		wantOAuth(t, err, CodeExpiredToken, 400)
		// Its grant stands: the agent collects a token with it.
		if _, err := f.svc.Refresh(ctx, alice, "review", f.pol()); err != nil {
			t.Errorf("refresh on the uncollected grant: %v", err)
		}
	})

	t.Run("D9 second redemption", func(t *testing.T) {
		f := newFixture(t)
		fs := f.start(alice, "review:read_only", "")
		f.decide(fs, true, "")
		if _, err := f.svc.Poll(ctx, alice, fs.DeviceCode); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(5 * time.Second)
		_, err := f.svc.Poll(ctx, alice, fs.DeviceCode)
		wantOAuth(t, err, CodeInvalidGrant, 400)
		if _, status, _ := f.svc.Lookup(ctx, fs.UserCode); status != domain.FlowRedeemed {
			t.Errorf("status = %s", status)
		}
	})

	t.Run("D10 another agent's device code", func(t *testing.T) {
		f := newFixture(t)
		fs := f.start(alice, "review:read_only", "")
		f.decide(fs, true, "")
		for _, thief := range []domain.Agent{bob, mallory} {
			_, err := f.svc.Poll(ctx, thief, fs.DeviceCode)
			wantOAuth(t, err, CodeInvalidGrant, 400)
			if !strings.Contains(err.Error(), "unknown device code") {
				t.Errorf("foreign code answered differently from an unknown one: %v", err)
			}
		}
		// The thief's attempts neither redeemed nor closed the flow.
		tok, err := f.svc.Poll(ctx, alice, fs.DeviceCode)
		if err != nil || tok.AccessToken == "" {
			t.Fatalf("owner's poll: %v", err)
		}
	})

	t.Run("D11 guessing device codes", func(t *testing.T) {
		f := newFixture(t)
		fs := f.start(alice, "review:read_only", "")
		for i := range 10 {
			guess := randomToken(16)
			if i == 9 {
				guess = "not-a-code" // malformed codes count too
			}
			_, err := f.svc.Poll(ctx, alice, guess)
			wantOAuth(t, err, CodeInvalidGrant, 400)
		}
		_, err := f.svc.Poll(ctx, alice, randomToken(16))
		wantRetry(t, err, 6)
		// Past the budget nothing is looked up, not even the agent's own code.
		_, err = f.svc.Poll(ctx, alice, fs.DeviceCode)
		wantRetry(t, err, 6)
		// One more code every 6 s.
		f.clock.Advance(6 * time.Second)
		if err := f.svc.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		_, err = f.svc.Poll(ctx, alice, fs.DeviceCode)
		wantOAuth(t, err, CodeAuthorizationPending, 400)
	})

	t.Run("F4 one agent's made-up device codes do not refuse another's own", func(t *testing.T) {
		f := newFixture(t)
		fs := f.start(bob, "review:read_only", "")
		f.decide(fs, true, Day)
		for range 10 {
			_, err := f.svc.Poll(ctx, alice, randomToken(16))
			wantOAuth(t, err, CodeInvalidGrant, 400)
		}
		_, err := f.svc.Poll(ctx, alice, randomToken(16))
		wantRetry(t, err, 6)
		// Bob polls from the same address (Poll never sees one) and gets his token.
		if tok, err := f.svc.Poll(ctx, bob, fs.DeviceCode); err != nil || tok.AccessToken == "" {
			t.Fatalf("bob's poll of his approved code: %v", err)
		}
		// Nor does the guesser's issuer share its budget: mallory is alice's sub elsewhere.
		_, err = f.svc.Poll(ctx, mallory, randomToken(16))
		wantOAuth(t, err, CodeInvalidGrant, 400)
	})

	t.Run("D12 missing device_code", func(t *testing.T) {
		// grant_type is the gateway's to check; consent gets only device-code polls.
		f := newFixture(t)
		_, err := f.svc.Poll(ctx, alice, "")
		wantOAuth(t, err, CodeInvalidRequest, 400)
	})

	t.Run("D13 grant revoked before first poll", func(t *testing.T) {
		f := newFixture(t)
		fs := f.start(alice, "review:read_only", "")
		dec := f.decide(fs, true, "")
		if _, err := f.svc.Revoke(ctx, dec.Grant.ID); err != nil {
			t.Fatal(err)
		}
		_, err := f.svc.Poll(ctx, alice, fs.DeviceCode)
		wantOAuth(t, err, CodeAccessDenied, 400)
	})

	t.Run("D14 user code normalised", func(t *testing.T) {
		f := newFixture(t)
		fs := f.start(alice, "review:read_only", "")
		want := f.request(fs).ID
		raw := strings.ReplaceAll(fs.UserCode, "-", "")
		for _, typed := range []string{
			fs.UserCode, raw, strings.ToLower(raw), strings.ToLower(raw[:4] + " " + raw[4:]),
			" " + raw[:2] + "-" + raw[2:6] + " - " + raw[6:] + " ",
		} {
			r, status, err := f.svc.Lookup(ctx, typed)
			if err != nil || r.ID != want || status != domain.FlowPending {
				t.Errorf("Lookup(%q) = %v, %s, %v", typed, r, status, err)
			}
		}
		dec, err := f.svc.Decide(ctx, want, strings.ToLower(raw[:4]+" "+raw[4:]), true, "", f.pol())
		if err != nil || dec.Outcome != OutcomeAllowed {
			t.Fatalf("Decide with a lower-case code: %v", err)
		}
	})

	t.Run("D15 user code outside the alphabet or wrong length", func(t *testing.T) {
		f := newFixture(t)
		fs := f.start(alice, "review:read_only", "")
		id := f.request(fs).ID
		for _, typed := range []string{"BCDF-GHJ0", "BCDF-GHJO", "BCDF-GHJA", "BCDF-GHJ", "BCDF-GHJKL", "", "BCDF_GHJK", "ＢＣＤＦＧＨＪＫ", "ſCDFGHJK"} {
			if _, _, err := f.svc.Lookup(ctx, typed); err != ErrBadUserCode {
				t.Errorf("Lookup(%q) = %v, want ErrBadUserCode", typed, err)
			}
		}
		// On a decision a malformed code counts as a wrong guess on that request.
		for range 5 {
			_, err := f.svc.Decide(ctx, id, "AEIO-U000", true, "", f.pol())
			wantErr(t, err, ErrWrongCode)
		}
		_, err := f.svc.Decide(ctx, id, "AEIO-U000", true, "", f.pol())
		wantErr(t, err, ErrLocked)
	})

	t.Run("D16 sixth wrong user code locks", func(t *testing.T) {
		f := newFixture(t)
		events, stop := f.svc.Subscribe()
		defer stop()
		fs := f.start(alice, "review:read_only", "")
		next(t, events)
		id := f.request(fs).ID
		wrong := "BBBB-BBBB"
		if fs.UserCode == wrong {
			wrong = "CCCC-CCCC"
		}
		for range 5 {
			_, err := f.svc.Decide(ctx, id, wrong, true, "", f.pol())
			wantErr(t, err, ErrWrongCode)
		}
		_, err := f.svc.Decide(ctx, id, wrong, true, "", f.pol())
		wantErr(t, err, ErrLocked)
		e := next(t, events)
		if e.Kind != EventRequestExpired || e.Outcome != OutcomeLocked || e.Agent != alice || e.Brand != "review" {
			t.Errorf("event = %+v", e)
		}
		// Even the right code no longer works; the agent is told to start again.
		_, err = f.svc.Decide(ctx, id, fs.UserCode, true, "", f.pol())
		wantErr(t, err, ErrLocked)
		if _, status, _ := f.svc.Lookup(ctx, fs.UserCode); status != domain.FlowLocked {
			t.Errorf("status = %s", status)
		}
		_, err = f.svc.Poll(ctx, alice, fs.DeviceCode)
		wantOAuth(t, err, CodeExpiredToken, 400)
		if pend, _ := f.svc.Pending(ctx); len(pend) != 0 {
			t.Errorf("locked request still pending")
		}
	})

	t.Run("D17 user code collision", func(t *testing.T) {
		f := newFixture(t)
		codes := []string{"BCDFGHJK", "BCDFGHJK", "BCDFGHJK", "LMNPQRST"}
		f.svc.newUserCode = func() string {
			c := codes[0]
			codes = codes[1:]
			return c
		}
		a := f.start(alice, "review:read_only", "")
		b := f.start(bob, "review:read_only", "")
		if a.UserCode != "BCDF-GHJK" || b.UserCode != "LMNP-QRST" {
			t.Fatalf("codes %s and %s", a.UserCode, b.UserCode)
		}
		if ra, rb := f.request(a), f.request(b); ra.Agent != alice || rb.Agent != bob {
			t.Errorf("lookups: %+v %+v", ra, rb)
		}
	})

	t.Run("D18 restart mid-flow", func(t *testing.T) {
		f := newFixture(t)
		fs := f.start(alice, "review:read_only", "")
		_, err := f.svc.Poll(ctx, alice, fs.DeviceCode)
		wantOAuth(t, err, CodeAuthorizationPending, 400)
		f.restart()
		// Nothing was approved on its own: the owner sees the request again.
		pend, err := f.svc.Pending(ctx)
		if err != nil || len(pend) != 1 || pend[0].UserCode != fs.UserCode {
			t.Fatalf("pending after restart = %v, %v", pend, err)
		}
		f.clock.Advance(5 * time.Second)
		_, err = f.svc.Poll(ctx, alice, fs.DeviceCode)
		wantOAuth(t, err, CodeAuthorizationPending, 400)
		if _, err := f.svc.Decide(ctx, pend[0].ID, pend[0].UserCode, true, "", f.pol()); err != nil {
			t.Fatal(err)
		}
		f.restart()
		tok, err := f.svc.Poll(ctx, alice, fs.DeviceCode)
		if err != nil {
			t.Fatal(err)
		}
		f.restart()
		if _, err := f.svc.CheckDelegation(ctx, tok.AccessToken, alice, "review", f.pol()); err != nil {
			t.Fatalf("token after restart: %v", err)
		}
	})
}

func TestSweep(t *testing.T) {
	f := newFixture(t)
	events, stop := f.svc.Subscribe()
	defer stop()
	a := f.start(alice, "review:read_only", "")
	f.clock.Advance(time.Minute)
	f.start(bob, "", "fix")
	next(t, events)
	next(t, events)
	f.clock.Advance(9 * time.Minute) // alice's request is at its expiry, bob's is not
	if err := f.svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	e := next(t, events)
	if e.Kind != EventRequestExpired || e.Outcome != OutcomeExpired || e.Agent != alice || e.Brand != "review" || e.Request.UserCode != a.UserCode {
		t.Errorf("event = %+v", e)
	}
	select {
	case e := <-events:
		t.Errorf("unexpected event %+v", e)
	default:
	}
	if pend, _ := f.svc.Pending(ctx); len(pend) != 1 || pend[0].Agent != bob {
		t.Errorf("pending = %+v", pend)
	}
	// A day after expiry the finished request is gone.
	f.clock.Advance(24*time.Hour + time.Minute)
	if err := f.svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	next(t, events) // bob's expiry
	if _, _, err := f.svc.Lookup(ctx, a.UserCode); err != ErrNotFound {
		t.Errorf("Lookup of a pruned request = %v", err)
	}
}

// TestFloods replays device-flow floods from one issuer site (docs/threats.md, F1–F3).
func TestFloods(t *testing.T) {
	evil := func(i int) domain.Agent {
		return domain.Agent{Issuer: "https://evil.example", Subject: fmt.Sprintf("made-up-%d", i%200)}
	}

	t.Run("F1 one issuer with 200 made-up subjects opens 1000 device flows", func(t *testing.T) {
		f := newFixture(t, func(c *Config) { c.NewFlowBurst = 100000 }) // the pending cap alone
		opened := 0
		for i := range 1000 {
			_, err := f.svc.StartFlow(ctx, evil(i), "review:read_only", "", f.pol())
			if err == nil {
				opened++
				continue
			}
			wantRetry(t, err, 600) // when the site's oldest request expires
			if !strings.Contains(err.Error(), "issuer site evil.example have 100 pending requests") {
				t.Fatalf("refusal %v does not say what was hit", err)
			}
		}
		if opened != 100 {
			t.Fatalf("evil.example opened %d requests, want its cap of 100 (a tenth of the node's 1000)", opened)
		}
		f.start(alice, "review:read_only", "") // another issuer still has room
		if pend, _ := f.svc.Pending(ctx); len(pend) != 101 {
			t.Fatalf("%d pending, want 101", len(pend))
		}
	})

	t.Run("F2 issuers under one registrable domain share its budget", func(t *testing.T) {
		f := newFixture(t, func(c *Config) { c.NewFlowBurst = 100000 })
		opened := 0
		for i := range 300 {
			a := domain.Agent{Issuer: fmt.Sprintf("https://id%d.evil.example", i), Subject: "alice"}
			if _, err := f.svc.StartFlow(ctx, a, "review:read_only", "", f.pol()); err == nil {
				opened++
			}
		}
		if opened != 100 {
			t.Fatalf("300 hosts under evil.example opened %d requests, want the site's 100", opened)
		}
		// A public suffix is not a site: two users' pages on one are two sites.
		f.start(domain.Agent{Issuer: "https://alice.github.io", Subject: "a"}, "review:read_only", "")
		f.start(domain.Agent{Issuer: "https://bob.github.io", Subject: "b"}, "review:read_only", "")
	})

	t.Run("F3 new device flows of one site past the rate", func(t *testing.T) {
		f := newFixture(t)
		for i := range 20 {
			f.start(evil(i), "review:read_only", "")
		}
		_, err := f.svc.StartFlow(ctx, evil(20), "review:read_only", "", f.pol())
		wantRetry(t, err, 3)
		if !strings.Contains(err.Error(), "issuer site evil.example asked for more than 20 requests in a burst") {
			t.Fatalf("refusal %v does not say what was hit", err)
		}
		f.start(alice, "review:read_only", "") // another site's budget is its own
		f.clock.Advance(3 * time.Second)
		f.start(evil(21), "review:read_only", "")
		_, err = f.svc.StartFlow(ctx, evil(22), "review:read_only", "", f.pol())
		wantRetry(t, err, 3)
		// A refusal by a pending cap does not spend the rate: the agent opened nothing.
		f.clock.Advance(time.Minute)
		for range 5 {
			f.start(bob, "review:read_only", "")
		}
		for range 30 {
			_, err := f.svc.StartFlow(ctx, bob, "review:read_only", "", f.pol())
			wantOAuth(t, err, CodeSlowDown, 429)
		}
		f.start(domain.Agent{Issuer: bob.Issuer, Subject: "carol"}, "review:read_only", "")
	})
}
