package node

import (
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/aether/aether/backend/consent"
	"github.com/aether/aether/backend/fsutil"
	"github.com/aether/aether/backend/gateway"
	"github.com/aether/aether/backend/policy"
)

// policyPath picks the policy file: the flag, else (desktop) the last used
// path, else <data-dir>/policy.json.
func (n *Node) policyPath() string {
	if n.opts.PolicyPath != "" {
		p, err := filepath.Abs(n.opts.PolicyPath)
		if err == nil {
			return p
		}
		return n.opts.PolicyPath
	}
	if last, err := os.ReadFile(n.path(fileLastPol)); err == nil {
		if p := strings.TrimSpace(string(last)); filepath.IsAbs(p) {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	return n.path(filePolicy)
}

// openPolicy opens policy.json (policy.File, its one owner), writing a starter policy on a
// first run. A broken file never yields a guessed policy: its error is kept for the UI and the
// gateway serves no turn. The desktop remembers a file that loaded (last-policy).
func (n *Node) openPolicy() error {
	var starter *policy.Policy
	if n.opts.StarterPolicy {
		starter = n.starterPolicy()
	}
	// The data dir is what every workspace keeps clear of besides the policy file, so a save
	// from the Brands page is checked by the same rules as a hand edit (docs/confinement.md).
	f, err := policy.OpenFile(policy.FileConfig{Path: n.policyPath(), Limits: policy.Limits{DataDir: n.dataDir}, Starter: starter, Logger: n.log})
	if err != nil {
		return err
	}
	n.policy = f
	if f.Current().Err == nil && (n.opts.PolicyPath == "" || n.opts.Desktop) {
		fsutil.WriteFileAtomic(n.path(fileLastPol), []byte(f.Path()+"\n"), 0o600)
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
		Runner:     n.turns,
		Keys:       n.history,
		OnReceipt:  n.owner.ReceiptAdded,
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

// served is the policy the gateway serves; nil before one loaded.
func (n *Node) served() *policy.Policy {
	if gw := n.gw.Load(); gw != nil {
		return gw.Policy()
	}
	return nil
}

// consentBrands is what consent knows of the brands: those of the served policy.
func (n *Node) consentBrands() []consent.BrandInfo {
	p := n.served()
	if p == nil {
		return nil
	}
	out := make([]consent.BrandInfo, 0, len(p.Pact.Brands))
	for _, b := range p.Pact.Brands {
		out = append(out, consent.BrandInfo{
			ID: b.ID, Name: b.Name, Capability: b.Capability, Workspace: b.WorkspaceDir,
			AccessMode: string(b.AccessMode), ScopeID: b.Scope.ID, ScopeDescription: b.Scope.Description,
		})
	}
	return out
}

// starterPolicy is the first-run policy, its publicUrl the gateway's own
// address (on loopback: agents on this machine can try it at once).
func (n *Node) starterPolicy() *policy.Policy {
	p := policy.Starter()
	_, port, err := net.SplitHostPort(n.opts.PactListen)
	if err != nil || port == "0" {
		return p
	}
	p.Pact.PublicURL = "http://127.0.0.1:" + port
	p.Pact.Audience = p.Pact.PublicURL
	return p
}
