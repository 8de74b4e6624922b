package node

import (
	"context"
	"errors"
	"fmt"
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

// policyLimits are what every workspace must keep clear of besides the policy file: the data
// dir, which no turn may see (docs/confinement.md). A policy loaded with them keeps them, so
// the Brands page's saves are checked by the same rules as a hand edit.
func (n *Node) policyLimits() policy.Limits { return policy.Limits{DataDir: n.dataDir} }

// loadPolicy reads the policy file at start. A broken file never yields a guessed
// policy: the error is kept for the UI and the gateway stops serving turns.
func (n *Node) loadPolicy() (*policy.Policy, error) {
	path := n.policyPath()
	n.polPath = path
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && n.opts.StarterPolicy {
		if err := policy.Save(path, n.starterPolicy()); err != nil {
			return nil, fmt.Errorf("write a starter policy: %w", err)
		}
		n.log.Info("wrote a starter policy with no brands; add one on the Brands page", "path", path)
	}
	fi, statErr := os.Stat(path)
	p, err := n.policyLimits().Load(path)
	if err == nil && p.Pact == nil {
		err = fmt.Errorf("%s has no \"pact\" section: add one (see examples/policy.json)", path)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if statErr == nil {
		n.polModTime = fi.ModTime()
	}
	if err != nil {
		n.polErr = err
		return nil, err
	}
	if n.opts.PolicyPath == "" || n.opts.Desktop {
		fsutil.WriteFileAtomic(n.path(fileLastPol), []byte(path+"\n"), 0o600)
	}
	return p, nil
}

// startGateway builds the gateway on p; from then on it holds the served policy.
func (n *Node) startGateway(p *policy.Policy, publicURL, consentURL string) error {
	n.mu.Lock()
	modTime := n.polModTime
	n.mu.Unlock()
	n.applyPublicURL(p)
	gw, err := gateway.New(gateway.Config{
		ConsentURL: consentURL,
		Identity:   &n.ids,
		Consent:    n.consent,
		Tasks:      n.db,
		Ledger:     n.ledger,
		Runner:     n.turns,
		Models:     n.openModel,
		Keys:       n.history,
		OnReceipt:  n.owner.ReceiptAdded,
		Logger:     n.log,

		Signer: n.ring.Current,
		// The policy file's mtime: unchanged cards keep their Last-Modified across restarts.
		CardsModified: modTime,
	}, p)
	if err != nil {
		return err
	}
	n.gw.Store(gw)
	return nil
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
	n.mu.Lock()
	perr := n.polErr
	n.mu.Unlock()
	if perr != nil || gw == nil {
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

// applyPolicy makes p the served policy (after a save from the Brands page or a hand edit of
// the file). The gateway's routes are the only copy of it, so the one store that swaps them
// swaps it for consent and the owner too: none of them ever sees other brands than the
// gateway serves (docs/architecture.md).
func (n *Node) applyPolicy(p *policy.Policy) error {
	n.applyMu.Lock()
	defer n.applyMu.Unlock()
	gw := n.gw.Load()
	if gw == nil {
		if err := n.startGateway(p, n.addrs.PublicURL, "https://"+n.addrs.Admin+"/pact/consent"); err != nil {
			return err
		}
	} else {
		n.applyPublicURL(p)
		if err := gw.Reload(p); err != nil {
			return err
		}
	}
	n.mu.Lock()
	n.polErr = nil
	n.mu.Unlock()
	n.syncFunnel(p)
	return nil
}

// watchPolicy notices hand edits of policy.json (a cheap stat every 2 s).
func (n *Node) watchPolicy(ctx context.Context) {
	fi, err := os.Stat(n.polPath)
	n.mu.Lock()
	changed := err == nil && !fi.ModTime().Equal(n.polModTime)
	n.mu.Unlock()
	if changed {
		n.reloadFromFile()
	}
}

func (n *Node) reloadFromFile() {
	fi, _ := os.Stat(n.polPath)
	p, err := n.policyLimits().Load(n.polPath)
	if err == nil && p.Pact == nil {
		err = fmt.Errorf("%s has no \"pact\" section", n.polPath)
	}
	n.mu.Lock()
	if fi != nil {
		n.polModTime = fi.ModTime()
	}
	if err != nil {
		n.polErr = err
		n.mu.Unlock()
		n.log.Error("policy.json has errors: the gateway stops serving until it is fixed", "path", n.polPath, "err", err)
		n.owner.PolicyChanged()
		return
	}
	n.mu.Unlock()
	if err := n.applyPolicy(p); err != nil {
		n.log.Error("policy reload failed", "err", err)
	} else {
		n.log.Info("policy reloaded", "path", n.polPath, "brands", len(p.Pact.Brands))
	}
	n.owner.PolicyChanged()
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
