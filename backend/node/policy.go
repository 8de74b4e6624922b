package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/aether/aether/backend/consent"
	"github.com/aether/aether/backend/fsutil"
	"github.com/aether/aether/backend/gateway"
	"github.com/aether/aether/backend/identity"
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

// loadPolicy reads the policy file. A broken file never yields a guessed
// policy: the error is kept for the UI and the gateway stops serving turns.
func (n *Node) loadPolicy() error {
	path := n.policyPath()
	n.polPath = path
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && n.opts.StarterPolicy {
		if err := policy.Save(path, n.starterPolicy()); err != nil {
			return fmt.Errorf("write a starter policy: %w", err)
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
		return err
	}
	n.pol, n.polErr = p, nil
	if n.opts.PolicyPath == "" || n.opts.Desktop {
		fsutil.WriteFileAtomic(n.path(fileLastPol), []byte(path+"\n"), 0o600)
	}
	return nil
}

// startGateway builds the gateway on the loaded policy.
func (n *Node) startGateway(publicURL, consentURL string) error {
	n.mu.Lock()
	p := n.pol
	n.mu.Unlock()
	if p == nil {
		return n.polErr
	}
	gw, err := gateway.New(gateway.Config{
		ConsentURL: consentURL,
		Identity: identity.New(identity.Config{
			Audience:                  p.Pact.Audience,
			AllowInsecureLocalIssuers: p.Pact.AllowInsecureLocalIssuers,
			NodeIssuer:                publicURL,
			Logger:                    n.log,
		}),
		Consent:   n.consent,
		Tasks:     n.db,
		Ledger:    n.ledger,
		Runner:    n.turns,
		Keys:      n.ring.Set(),
		OnReceipt: n.onReceipt,
		Logger:    n.log,
	}, p)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.gw = gw
	n.mu.Unlock()
	return nil
}

// serveGateway answers on the gateway listener; with no valid policy it says
// so (503) rather than serve a guessed one.
func (n *Node) serveGateway(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	gw, perr := n.gw, n.polErr
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

// applyPolicy makes p the served policy (after a save from the Brands page or
// a hand edit of the file).
func (n *Node) applyPolicy(p *policy.Policy) error {
	n.mu.Lock()
	gw, old := n.gw, n.pol
	n.mu.Unlock()
	if old != nil && old.Pact.PublicURL != p.Pact.PublicURL {
		n.log.Warn("publicUrl changed: restart the node for tokens and receipts to use the new one", "old", old.Pact.PublicURL, "new", p.Pact.PublicURL)
	}
	if gw == nil {
		n.mu.Lock()
		n.pol, n.polErr = p, nil
		n.mu.Unlock()
		return n.startGateway(n.addrs.PublicURL, "https://"+n.addrs.Admin+"/pact/consent")
	}
	if err := gw.Reload(p); err != nil {
		return err
	}
	n.mu.Lock()
	n.pol, n.polErr = p, nil
	n.mu.Unlock()
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
		n.notifyPolicy()
		return
	}
	n.mu.Unlock()
	if err := n.applyPolicy(p); err != nil {
		n.log.Error("policy reload failed", "err", err)
	} else {
		n.log.Info("policy reloaded", "path", n.polPath, "brands", len(p.Pact.Brands))
	}
	n.notifyPolicy()
}

// consentBrands is what consent knows of the current brands.
func (n *Node) consentBrands() []consent.BrandInfo {
	n.mu.Lock()
	p := n.pol
	n.mu.Unlock()
	if p == nil || p.Pact == nil {
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
