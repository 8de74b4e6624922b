package node

import (
	"context"
	"crypto/tls"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aether/aether/backend/identity"
	"github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/policy"
	"github.com/aether/aether/backend/reach"
)

// ReachOptions configure publishing with Tailscale Funnel (docs/deploy.md).
type ReachOptions struct {
	Hostname string // the device name asked for; "" = "aether"
	// Tests only: a loopback control server, an ephemeral in-memory node, the test
	// certificate's TLS config, and a short wait before the control server counts as
	// unreachable.
	ControlURL     string
	Ephemeral      bool
	TLS            *tls.Config
	ConnectTimeout time.Duration
}

// newFunnel is the switch that publishes the gateway's handler, and only it, with Funnel.
func (n *Node) newFunnel() *reach.Switch {
	hostname := n.opts.Reach.Hostname
	if hostname == "" {
		hostname = "aether"
	}
	return &reach.Switch{Config: reach.Config{
		Dir: n.path(dirTailscale), Hostname: hostname, Handler: http.HandlerFunc(n.serveGateway),
		Logger: n.log, OnChange: func(reach.Status) { n.owner.ReachabilityChanged() }, ConnectTimeout: n.opts.Reach.ConnectTimeout,
		ControlURL: n.opts.Reach.ControlURL, Ephemeral: n.opts.Reach.Ephemeral, TLS: n.opts.Reach.TLS,
	}}
}

// syncFunnel publishes with Funnel when the --funnel flag or pact.funnel in the served
// policy asks for it, and stops publishing when neither does.
func (n *Node) syncFunnel(p *policy.Policy) {
	want := n.opts.Funnel || (p != nil && p.Pact != nil && p.Pact.Funnel)
	if n.funnel.Set(want) {
		n.owner.ReachabilityChanged()
	}
}

// reachability is the Publisher's state as the owner's service shows it; Mode "" when off.
func (n *Node) reachability() owner.Reachability {
	pub := n.funnel.Publisher()
	if pub == nil {
		return owner.Reachability{}
	}
	st := pub.Status()
	return owner.Reachability{Mode: owner.ReachFunnel, State: string(st.State), URL: st.URL, Device: st.Device,
		Reason: st.Reason, Fix: st.Fix, LoginURL: st.LoginURL}
}

// FunnelTailnet is the Funnel node when publishing is on (tests drive their ingress with it).
func (n *Node) FunnelTailnet() *reach.Publisher { return n.funnel.Publisher() }

// identities is the gateway's identity verifier for the served publicUrl and audience: a
// policy that changes them gets a new verifier (applyPublicURL).
type identities struct {
	v   atomic.Pointer[identity.Verifier]
	key atomic.Pointer[[3]string] // audience, publicUrl and allowInsecureLocalIssuers of v
}

func (ids *identities) Verify(ctx context.Context, raw, clientIP string) (identity.Identity, error) {
	return ids.v.Load().Verify(ctx, raw, clientIP)
}

// set builds a verifier for p unless the current one was built for the same settings.
func (ids *identities) set(p *policy.Policy, n *Node) {
	k := [3]string{p.Pact.Audience, p.Pact.PublicURL, strconv.FormatBool(p.Pact.AllowInsecureLocalIssuers)}
	if old := ids.key.Load(); old != nil && *old == k && ids.v.Load() != nil {
		return
	}
	ids.v.Store(identity.New(identity.Config{
		Audience:                  p.Pact.Audience,
		AllowInsecureLocalIssuers: p.Pact.AllowInsecureLocalIssuers,
		OwnListeners:              n.ownListeners(),
		NodeIssuer:                p.Pact.PublicURL,
		Logger:                    n.log,
	}))
	ids.key.Store(&k)
}

// applyPublicURL makes consent's tokens, the receipts and the identity checks follow p's
// publicUrl and audience, before the gateway serves p's cards (docs/deploy.md, "Switching
// publicUrl").
func (n *Node) applyPublicURL(p *policy.Policy) {
	if n.consent.PublicURL() != strings.TrimRight(p.Pact.PublicURL, "/") {
		n.log.Info("publicUrl changed: tokens made under the old one are refused, and their agents get new ones from their grants",
			"old", n.consent.PublicURL(), "new", p.Pact.PublicURL)
	}
	n.consent.SetPublicURL(p.Pact.PublicURL)
	n.ledger.SetIssuer(p.Pact.PublicURL)
	n.ids.set(p, n)
	n.mu.Lock()
	changed := n.addrs.PublicURL != p.Pact.PublicURL
	n.addrs.PublicURL = p.Pact.PublicURL
	n.mu.Unlock()
	if changed && n.lock != nil {
		if err := n.writeAddresses(); err != nil {
			n.log.Warn("could not write node.json", "err", err)
		}
	}
}
