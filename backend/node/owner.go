package node

import (
	"errors"
	"time"

	"github.com/aether/aether/backend/owner"
)

// ownerNode is the node as the owner's service sees it (owner.Node).
type ownerNode struct{ n *Node }

func (o ownerNode) Gateway() (running, paused bool) {
	gw := o.n.gw.Load()
	if gw == nil {
		return false, false
	}
	return o.n.policy.Current().Err == nil, gw.Paused()
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

func (o ownerNode) Health() (owner.CodexStatus, owner.Confinement) { return o.n.setup.Health() }

func (o ownerNode) Reach() owner.Reachability { return o.n.reachability() }

func (o ownerNode) Recheck() {
	if pub := o.n.funnel.Publisher(); pub != nil {
		pub.Recheck()
	}
}
