package node

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/aether/aether/backend/gateway"
	"github.com/aether/aether/backend/issuer"
	"github.com/aether/aether/backend/policy"
)

// openPolicy opens policy.json (policy.File, its one owner), writing a starter policy on a
// first run. A broken file never yields a guessed policy: its error is kept for the UI and the
// gateway serves no turn. The desktop remembers a file that loaded (last-policy).
func (n *Node) openPolicy() error {
	var starter *policy.Policy
	if n.opts.StarterPolicy {
		starter = policy.Starter(n.opts.PactListen)
	}
	// The data dir is what every workspace keeps clear of besides the policy file, so a save
	// from the Brands page is checked by the same rules as a hand edit (docs/confinement.md);
	// --funnel and the gateway's address make it public whatever the policy says (N4).
	lim := policy.Limits{DataDir: n.dir.Path, Funnel: n.opts.Funnel, GatewayListen: n.opts.PactListen}
	f, err := policy.OpenFile(policy.FileConfig{Path: n.dir.PolicyPath(n.opts.PolicyPath), Limits: lim, Starter: starter, Logger: n.log})
	if err != nil {
		return err
	}
	n.policy = f
	if f.Current().Err == nil && (n.opts.PolicyPath == "" || n.opts.Desktop) {
		n.dir.RememberPolicy(f.Path())
	}
	return nil
}

// startGateway builds the gateway on s; from then on it holds the served policy.
func (n *Node) startGateway(s policy.Snapshot) error {
	n.applyPublicURL(s.Policy)
	gw, err := gateway.New(gateway.Config{
		ConsentURL: n.consentURL(),
		Identity:   &n.ids,
		Consent:    n.consent,
		Tasks:      n.db,
		Ledger:     n.ledger,
		Turns:      n.turns,
		Keys:       n.history,
		Logger:     n.log,

		Signer: n.ring.Current,
		// The policy file's mtime: unchanged cards keep their Last-Modified across restarts.
		CardsModified: s.ModTime,
	}, s)
	if err != nil {
		return err
	}
	n.gw.Store(gw)
	return nil
}

// servePolicy makes s the served policy (policy.File calls it, one change at a time, after a
// save from the Brands page or a hand edit of the file). The gateway's routes are the only
// copy of it, so the one store that swaps them swaps it for consent too: consent never sees
// other brands than the gateway serves (docs/architecture.md).
func (n *Node) servePolicy(s policy.Snapshot) error {
	gw := n.gw.Load()
	if gw == nil {
		return n.startGateway(s)
	}
	n.applyPublicURL(s.Policy)
	return gw.Reload(s)
}

// ownListeners are the addresses the node's listeners are bound to: no issuer fetch goes there
// (docs/threats.md J31).
func (n *Node) ownListeners() []netip.AddrPort {
	out := make([]netip.AddrPort, 0, len(n.lns))
	for _, ln := range n.lns {
		if a, ok := ln.Addr().(*net.TCPAddr); ok {
			out = append(out, a.AddrPort())
		}
	}
	return out
}

// serveGateway answers on the gateway listener; with no valid policy it says
// so (503) rather than serve a guessed one.
func (n *Node) serveGateway(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, issuer.PathPrefix+"/") {
		// The owner's agents' issuer: public documents, served whatever the policy's state.
		n.issuer.Handler().ServeHTTP(w, r)
		return
	}
	gw := n.gw.Load()
	if gw == nil || n.policy.Current().Err != nil {
		if r.URL.Path == "/healthz" {
			http.Error(w, "policy.json has errors: the gateway is stopped", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Retry-After", "60")
		http.Error(w, "this node's policy.json has errors; the owner must fix it before agents can call", http.StatusServiceUnavailable)
		return
	}
	gw.Handler().ServeHTTP(w, r)
}
