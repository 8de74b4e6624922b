package node

import (
	"net/http"
	"strings"

	"github.com/aether/aether/backend/datadir"
	"github.com/aether/aether/backend/identity"
	"github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/policy"
	"github.com/aether/aether/backend/reach"
)

// newFunnel is the switch that publishes the gateway's handler, and only it, with Funnel.
func (n *Node) newFunnel() *reach.Switch {
	cfg := n.opts.Reach
	cfg.Dir, cfg.Handler, cfg.Logger = n.path(datadir.TailscaleDir), http.HandlerFunc(n.serveGateway), n.log
	cfg.Tailnet = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { n.phones.ServeHTTP(w, r) })
	cfg.OnChange = func(reach.Status) { n.owner.ReachabilityChanged() }
	return &reach.Switch{Config: cfg}
}

// syncFunnel publishes with Funnel when the --funnel flag or pact.funnel in the served
// policy asks for it, joins the tailnet for the owner's phones alone when pact.tailnet does,
// and leaves the tailnet when none does.
func (n *Node) syncFunnel(p *policy.Policy) {
	want := reach.ModeOff
	switch {
	case n.opts.Funnel || (p != nil && p.Pact != nil && p.Pact.Funnel):
		want = reach.ModeFunnel
	case p != nil && p.Pact != nil && p.Pact.Tailnet:
		want = reach.ModeTailnet
	}
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
	mode := owner.ReachFunnel
	if st.State == reach.OnTailnet || pub.TailnetOnly() {
		mode = owner.ReachTailnet
	}
	return owner.Reachability{Mode: mode, State: string(st.State), URL: st.URL, Device: st.Device,
		Reason: st.Reason, Fix: st.Fix, LoginURL: st.LoginURL, Probe: st.Probe, ProbeReason: st.ProbeReason}
}

// FunnelTailnet is the Funnel node when publishing is on (tests drive their ingress with it).
func (n *Node) FunnelTailnet() *reach.Publisher { return n.funnel.Publisher() }

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
	n.issuer.SetPublicURL(p.Pact.PublicURL)
	ids := identity.Config{Audience: p.Pact.Audience, AllowInsecureLocalIssuers: p.Pact.AllowInsecureLocalIssuers,
		OwnListeners: n.ownListeners(), NodeIssuer: p.Pact.PublicURL, Logger: n.log}
	if n.opts.IssuerNet != nil {
		n.opts.IssuerNet(&ids)
	}
	n.ids.Set(ids)
	n.mu.Lock()
	changed := n.addrs.PublicURL != p.Pact.PublicURL
	n.addrs.PublicURL = p.Pact.PublicURL
	n.mu.Unlock()
	if changed && n.dir != nil {
		if err := n.writeAddresses(); err != nil {
			n.log.Warn("could not write node.json", "err", err)
		}
	}
}
