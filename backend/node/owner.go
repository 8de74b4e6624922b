package node

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/policy"
)

// ownerNode is the node as the owner's service sees it (owner.Node).
type ownerNode struct{ n *Node }

func (o ownerNode) Served() *policy.Policy { return o.n.served() }

func (o ownerNode) PolicyFile() (string, error) {
	o.n.mu.Lock()
	defer o.n.mu.Unlock()
	return o.n.polPath, o.n.polErr
}

func (o ownerNode) ServeSaved() (*policy.Policy, error) {
	n := o.n
	saved, err := n.policyLimits().Load(n.polPath)
	if err != nil {
		return nil, fmt.Errorf("re-read %s after saving: %w", n.polPath, err)
	}
	if fi, err := os.Stat(n.polPath); err == nil {
		n.mu.Lock()
		n.polModTime = fi.ModTime()
		n.mu.Unlock()
	}
	if err := n.applyPolicy(saved); err != nil {
		return nil, err
	}
	return saved, nil
}

func (o ownerNode) Gateway() (running, paused bool) {
	gw := o.n.gw.Load()
	if gw == nil {
		return false, false
	}
	o.n.mu.Lock()
	perr := o.n.polErr
	o.n.mu.Unlock()
	return perr == nil, gw.Paused()
}

func (o ownerNode) SetPaused(paused bool) error {
	gw := o.n.gw.Load()
	if gw == nil {
		return errors.New("the gateway is not running: policy.json has errors")
	}
	if paused {
		gw.Pause()
	} else {
		gw.Resume()
	}
	o.n.log.Info("gateway", "paused", paused, "at", time.Now().Format(time.RFC3339))
	return nil
}

func (o ownerNode) Health() (owner.CodexStatus, owner.Confinement) {
	h := o.n.codexHealth()
	c := owner.CodexStatus{Found: h.Found, Path: h.Path, Version: h.Version, VersionOK: h.VersionOK, LoggedIn: h.LoggedIn || h.APIKey, Error: h.Error}
	c.Credential.Kind, c.Credential.Summary, c.Credential.Problem = h.Credential.Kind, h.Credential.Summary, h.Credential.Problem
	return c, owner.Confinement{Available: h.Confinement.Available, Mechanism: h.Confinement.Mechanism, Text: h.Confinement.Text()}
}

func (o ownerNode) Reach() owner.Reachability { return o.n.reachability() }
