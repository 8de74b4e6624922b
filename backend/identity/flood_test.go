package identity

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aether/aether/backend/identity/identitytest"
)

// TestFloodLimits: someone else's throwaway issuers never refuse a real one (docs/threats.md,
// F5, F6). The gateway passes the real client address, resolved through the trusted proxies.
func TestFloodLimits(t *testing.T) {
	clk := newClock()
	key := identitytest.NewEdDSAKey("k")
	// Issuers nothing answers for: a closed port on loopback.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	throwaway := func(i int) string { return key.Sign(nil, claimsFor(clk, fmt.Sprintf("%s/throwaway/%d", dead, i))) }

	t.Run("F5 ten throwaway issuers from one client", func(t *testing.T) {
		v := newVerifier(t, clk)
		for i := range 10 {
			if _, err := v.Verify(context.Background(), throwaway(i), "203.0.113.9"); err == nil || errors.Is(err, ErrRateLimited) {
				t.Fatalf("throwaway issuer %d: %v, want a failed fetch", i, err)
			}
		}
		// The next new issuer of that client waits, and is told how long.
		real := newIssuer(t, clk)
		_, err := v.Verify(context.Background(), real.Token("alice", testAud), "203.0.113.9")
		var ie *Error
		if !errors.Is(err, ErrRateLimited) || !errors.As(err, &ie) || ie.RetryAfter != 6*time.Second {
			t.Fatalf("the flooding client's next new issuer: %v, want ErrRateLimited with RetryAfter 6s", err)
		}
		// Another client's new issuer is not refused: the budget is the client's, not the node's.
		if _, err := v.Verify(context.Background(), real.Token("bob", testAud), "203.0.113.10"); err != nil {
			t.Fatalf("a new legitimate issuer from another client: %v", err)
		}
	})

	t.Run("F6 slow throwaway issuers hold the fetch slots", func(t *testing.T) {
		release := make(chan struct{})
		// One host whose every issuer (/t/0, /t/1, …) hangs.
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			http.NotFound(w, r)
		}))
		defer func() { close(release); slow.Close() }()
		v := newVerifier(t, clk) // 16 fetches node-wide, 4 per client
		for i := range 4 {
			go v.Verify(context.Background(), key.Sign(nil, claimsFor(clk, fmt.Sprintf("%s/t/%d", slow.URL, i))), "203.0.113.9")
		}
		for v.clientSlot.Take("203.0.113.9") {
			v.clientSlot.Release("203.0.113.9")
			time.Sleep(time.Millisecond) // the four fetches are not all started yet
		}
		_, err := v.Verify(context.Background(), key.Sign(nil, claimsFor(clk, slow.URL+"/t/4")), "203.0.113.9")
		var ie *Error
		if !errors.Is(err, ErrRateLimited) || !errors.As(err, &ie) || ie.RetryAfter != v.cfg.FetchTimeout {
			t.Fatalf("a fifth slow fetch of one client: %v, want ErrRateLimited with RetryAfter %v", err, v.cfg.FetchTimeout)
		}
		real := newIssuer(t, clk)
		if _, err := v.Verify(context.Background(), real.Token("alice", testAud), "203.0.113.10"); err != nil {
			t.Fatalf("another client's new issuer while the slow ones hang: %v", err)
		}
	})
}
