package consent

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/limit"
	"github.com/aether/aether/backend/policy"
	"github.com/aether/aether/backend/store"
)

const publicURL = "https://aether.example.com"

var (
	alice   = domain.Agent{Issuer: "https://id.example", Subject: "alice"}
	bob     = domain.Agent{Issuer: "https://id.example", Subject: "bob"}
	mallory = domain.Agent{Issuer: "https://evil.example", Subject: "alice"} // alice's sub at another issuer
	ctx     = context.Background()
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fixture is a service over a real pact.sqlite in a temp dir, with a fake clock
// and a policy the test may change.
type fixture struct {
	t      *testing.T
	path   string
	db     *store.DB
	key    *keys.Key
	clock  *clock
	cfg    Config
	svc    *Service
	mu     sync.Mutex
	brands []policy.Brand
}

func reviewBrand() policy.Brand {
	return policy.Brand{ID: "review", Name: "Code review", Capability: "review", WorkspaceDir: "/ws/review",
		AccessMode: domain.ReadOnly, Scope: policy.Scope{ID: "review:read_only", Description: "Review code (read only)"}}
}

func fixBrand() policy.Brand {
	return policy.Brand{ID: "fix", Name: "Fixer", Capability: "fix", WorkspaceDir: "/ws/fix",
		AccessMode: domain.ReadWrite, Scope: policy.Scope{ID: "fix:read_write", Description: "Fix code"}}
}

func newFixture(t *testing.T, tune ...func(*Config)) *fixture {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = 7
	f := &fixture{
		t:      t,
		path:   filepath.Join(t.TempDir(), "pact.sqlite"),
		key:    keys.FromPrivate(ed25519.NewKeyFromSeed(seed)),
		clock:  &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)},
		brands: []policy.Brand{reviewBrand(), fixBrand()},
	}
	f.cfg = Config{
		PublicURL:  publicURL,
		ConsentURL: "https://127.0.0.1:3000/pact/consent",
		Now:        f.clock.Now,
	}
	for _, fn := range tune {
		fn(&f.cfg)
	}
	f.open()
	t.Cleanup(func() { f.db.Close() })
	return f
}

func (f *fixture) open() {
	db, err := store.Open(f.path)
	if err != nil {
		f.t.Fatal(err)
	}
	f.db = db
	f.svc = New(db, f.key, f.cfg)
}

// restart closes pact.sqlite and opens it again under a new service, as a node restart does.
func (f *fixture) restart() {
	if err := f.db.Close(); err != nil {
		f.t.Fatal(err)
	}
	f.open()
}

// pol is the policy the test serves now, as the gateway and owner pass theirs to consent.
func (f *fixture) pol() *policy.Policy {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &policy.Policy{Pact: &policy.Pact{Brands: append([]policy.Brand(nil), f.brands...)}}
}

func (f *fixture) setBrand(b policy.Brand) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.brands {
		if f.brands[i].ID == b.ID {
			f.brands[i] = b
		}
	}
}

func (f *fixture) start(a domain.Agent, scope string, brand domain.BrandID) *FlowStart {
	f.t.Helper()
	fs, err := f.svc.StartFlow(ctx, a, scope, brand, f.pol())
	if err != nil {
		f.t.Fatalf("StartFlow: %v", err)
	}
	return fs
}

// request finds the owner's view of a started flow.
func (f *fixture) request(fs *FlowStart) *Request {
	f.t.Helper()
	r, _, err := f.svc.Lookup(ctx, fs.UserCode)
	if err != nil {
		f.t.Fatalf("Lookup: %v", err)
	}
	return r
}

func (f *fixture) decide(fs *FlowStart, allow bool, d Duration) *Decision {
	f.t.Helper()
	dec, err := f.svc.Decide(ctx, f.request(fs).ID, fs.UserCode, allow, d, f.pol())
	if err != nil {
		f.t.Fatalf("Decide: %v", err)
	}
	return dec
}

// grant runs a whole flow for agent on brand and returns the token and the grant id.
func (f *fixture) grant(a domain.Agent, brand domain.BrandID, d Duration) (*Token, domain.GrantID) {
	f.t.Helper()
	fs := f.start(a, "", brand)
	dec := f.decide(fs, true, d)
	tok, err := f.svc.Poll(ctx, a, fs.DeviceCode)
	if err != nil {
		f.t.Fatalf("Poll: %v", err)
	}
	return tok, dec.Grant.ID
}

func wantOAuth(t *testing.T, err error, code string, status int) {
	t.Helper()
	var oe *OAuthError
	if !errors.As(err, &oe) {
		t.Fatalf("err = %v, want OAuth %s", err, code)
	}
	if oe.Code != code || oe.Status != status {
		t.Fatalf("err = %s (%d) %q, want %s (%d)", oe.Code, oe.Status, oe.Description, code, status)
	}
}

// wantRetry wants a cap's 429 slow_down that says to retry in secs seconds, in its
// description and in RetryAfter (the gateway's Retry-After).
func wantRetry(t *testing.T, err error, secs int) {
	t.Helper()
	wantOAuth(t, err, CodeSlowDown, 429)
	oe := err.(*OAuthError)
	if limit.RetryAfter(oe.RetryAfter) != secs || !strings.HasSuffix(oe.Description, fmt.Sprintf("retry in %d s", secs)) {
		t.Fatalf("retry after %v (%q), want %d s", oe.RetryAfter, oe.Description, secs)
	}
}

func wantReason(t *testing.T, err error, reason string) {
	t.Helper()
	var de *DelegationError
	if !errors.As(err, &de) {
		t.Fatalf("err = %v, want delegation refusal %s", err, reason)
	}
	if de.Reason != reason {
		t.Fatalf("reason = %s (%s), want %s", de.Reason, de.Detail, reason)
	}
}

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("err = %v, want %v", err, want)
	}
}

// next reads the next event, failing if none is buffered.
func next(t *testing.T, ch <-chan Event) Event {
	t.Helper()
	select {
	case e := <-ch:
		return e
	default:
		t.Fatal("no event")
		return Event{}
	}
}
