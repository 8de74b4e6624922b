package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aether/aether/backend/node"
	ownerpkg "github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/reach"
)

// publicPath is how the node's reachability check reaches its public address in the tests:
// through the test's Funnel ingress, as an agent on the internet would, once there is one.
type publicPath struct {
	mu sync.Mutex
	in *ingress
}

func (p *publicPath) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	p.mu.Lock()
	in := p.in
	p.mu.Unlock()
	if in == nil {
		return nil, errors.New("no route to the Funnel ingress")
	}
	return in.dial(ctx, network, addr)
}

func (p *publicPath) set(in *ingress) {
	p.mu.Lock()
	p.in = in
	p.mu.Unlock()
}

// TestFunnelReachable: after publishing, the node asks its public address as an agent would
// (through the Funnel ingress) and the card says "reachable" only when that answered; with the
// ingress stopped, "Check again" says it is not reachable, and why.
func TestFunnelReachable(t *testing.T) {
	t.Parallel()
	tn := newTailnet(t, nil, false)
	path := &publicPath{}
	e := newEnv(t, withPublicIssuer(), withNode(func(o *node.Options) {
		o.Funnel = true
		o.Reach = reach.Config{ControlURL: tn.url, Ephemeral: true, TLS: tn.ca.tlsConfig(), Hostname: "aether",
			Probe: &http.Client{Transport: &http.Transport{DialContext: path.dial, TLSClientConfig: &tls.Config{RootCAs: tn.ca.pool()}}}}
	}))
	r := waitReach(t, e, "published and checked", func(r ownerpkg.Reachability) bool {
		return r.State == ownerpkg.ReachStatePublished && r.Probe == ownerpkg.ProbeUnreachable
	})
	if !strings.Contains(r.ProbeReason, "no route to the Funnel ingress") {
		t.Errorf("before there is an ingress: %+v", r)
	}
	in := newIngress(t, tn, e.n.FunnelTailnet().Tailnet())
	path.set(in)
	check := func() {
		t.Helper()
		var out ownerpkg.Reachability
		if code := e.admin.do("POST", "/api/reachability/check", nil, &out); code != http.StatusOK {
			t.Fatalf("check again: %d", code)
		}
	}
	check()
	waitReach(t, e, "reachable", func(r ownerpkg.Reachability) bool { return r.Probe == ownerpkg.ProbeReachable })

	// The ingress stops: Funnel is still "on", but nothing reaches the node from outside.
	in.srv.Close()
	check()
	r = waitReach(t, e, "unreachable", func(r ownerpkg.Reachability) bool { return r.Probe == ownerpkg.ProbeUnreachable })
	if r.State != ownerpkg.ReachStatePublished || r.ProbeReason == "" {
		t.Fatalf("after the ingress stopped: %+v", r)
	}
	t.Logf("the card says: Published, but not reachable from the internet: %s", r.ProbeReason)
}
