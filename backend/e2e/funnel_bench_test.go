package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/aether/aether/backend/node"
	ownerpkg "github.com/aether/aether/backend/owner"
)

// TestPrintB8 measures what publishing with Tailscale Funnel adds to a delegated turn (the
// instant stand-in for Codex): one agent's turns, one after the other on a kept-alive
// connection, through the loopback Funnel ingress (a tsnet node, WireGuard through the
// loopback relay, TLS ended in the node) against the plain gateway listener (ratio=).
func TestPrintB8(t *testing.T) {
	benchOnly(t)
	tn := newTailnet(t, nil, false)
	e := newEnv(t, withFunnel(tn), withNode(func(o *node.Options) { o.Runner = instant{} }))
	waitReach(t, e, "published", func(r ownerpkg.Reachability) bool { return r.State == ownerpkg.ReachStatePublished })
	in := newIngress(t, tn, e.n.FunnelTailnet().Tailnet())
	a := e.agent("bench-funnel")
	a.setDelegation(e.delegate(t, a, "review"))
	plain := a.client("review", a2a.TransportProtocolJSONRPC)
	funnel, err := a2aclient.NewFromEndpoints(t.Context(),
		[]*a2a.AgentInterface{a2a.NewAgentInterface(funnelURL+"/a2a/review", a2a.TransportProtocolJSONRPC)},
		a2aclient.WithJSONRPCTransport(&http.Client{Transport: credentials{a, in.client().Transport}}))
	if err != nil {
		t.Fatal(err)
	}
	turn := func(c *a2aclient.Client) time.Duration {
		start := time.Now()
		res, err := c.SendMessage(context.Background(), textMessage("bench"))
		if task, ok := res.(*a2a.Task); err != nil || !ok || task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("turn: %v %v", err, res)
		}
		return time.Since(start)
	}
	turn(plain)
	turn(funnel) // connections set up
	// Interleaved: the machine is shared and its speed drifts.
	var p, f []time.Duration
	for range 60 {
		p, f = append(p, turn(plain)), append(f, turn(funnel))
	}
	slices.Sort(p)
	slices.Sort(f)
	pm, fm := p[len(p)/2], f[len(f)/2]
	fmt.Printf("B8 plain=%.1fms funnel=%.1fms ratio=%.2f funnel-added=%.1fms\n", ms(pm), ms(fm), float64(fm)/float64(pm), ms(fm-pm))
}

// credentials puts an agent's identity and delegation on requests sent over base.
type credentials struct {
	a    *agent
	base http.RoundTripper
}

func (c credentials) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+c.a.identityToken())
	c.a.mu.Lock()
	r.Header.Set("PACT-Delegation", c.a.delegation)
	c.a.mu.Unlock()
	return c.base.RoundTrip(r)
}
