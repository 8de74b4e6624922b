package identity

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aether/aether/backend/identity/identitytest"
)

const testAud = "https://node.example"

// clock is a settable test clock shared by a verifier and its issuers.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_800_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newVerifier returns a verifier for loopback test issuers; mods adjust the config.
func newVerifier(t testing.TB, clk *clock, mods ...func(*Config)) *Verifier {
	t.Helper()
	cfg := Config{Audience: testAud, NodeIssuer: "https://node.example", AllowInsecureLocalIssuers: true, Now: clk.Now}
	for _, m := range mods {
		m(&cfg)
	}
	v := New(cfg)
	t.Cleanup(v.fetches.Wait) // background refreshes end before the test's servers go away
	return v
}

func newIssuer(t testing.TB, clk *clock, opts ...identitytest.Option) *identitytest.Issuer {
	t.Helper()
	return identitytest.NewIssuer(t, append([]identitytest.Option{identitytest.WithNow(clk.Now)}, opts...)...)
}

// claimsFor returns valid identity claims for an arbitrary iss.
func claimsFor(clk *clock, iss string) map[string]any {
	now := clk.Now()
	return map[string]any{"iss": iss, "sub": "alice", "aud": testAud, "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix()}
}

func verify(v *Verifier, tok string) (Identity, error) {
	return v.Verify(context.Background(), tok, "192.0.2.10")
}

func wantOK(t *testing.T, v *Verifier, tok string) Identity {
	t.Helper()
	id, err := verify(v, tok)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return id
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	e, ok := errors.AsType[*Error](err)
	if !ok {
		t.Fatalf("error = %v, want *Error with code %s", err, code)
	}
	if e.Code != code {
		t.Fatalf("code = %s (%v), want %s", e.Code, err, code)
	}
}

func wantReject(t *testing.T, v *Verifier, tok, code string) {
	t.Helper()
	_, err := verify(v, tok)
	wantCode(t, err, code)
}

// lookupCounter is a resolver hook that answers from a table and counts its calls.
type lookupCounter struct {
	calls atomic.Int64
	table map[string][]net.IP
}

func (l *lookupCounter) LookupIP(_ context.Context, host string) ([]net.IP, error) {
	l.calls.Add(1)
	if ips, ok := l.table[host]; ok {
		return ips, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// countingListener counts accepted connections, to prove that a blocked address is never
// connected to.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}
