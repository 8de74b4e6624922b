package node

import (
	"context"
	"net/http"
	"time"

	"github.com/aether/aether/backend/admin"
	"github.com/aether/aether/backend/devices"
	"github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/reach"
)

// The owner's phones: their door on the tailnet (reach's tailnet listener, which vouches for
// the calling device, in front of admin's TailnetHandler) and a push to each for every new
// consent request (docs/admin-api.md, "Phones").

// tailnetPeer is reach's word on the device a tailnet request comes from.
func tailnetPeer(r *http.Request) (admin.TailnetPeer, bool) {
	p, ok := reach.PeerOf(r.Context())
	return admin.TailnetPeer{Node: p.Node, Name: p.Name, Host: p.Host}, ok
}

// tailnetHost is the node's ts.net name while it is on the tailnet.
func (n *Node) tailnetHost() string {
	pub := n.funnel.Publisher()
	if pub == nil {
		return ""
	}
	if st := pub.Status(); st.State == reach.Published || st.State == reach.OnTailnet {
		return st.Device
	}
	return ""
}

// pushRequests sends a push to the paired phones for each new consent request, until ctx ends.
func (n *Node) pushRequests(ctx context.Context) {
	for ev := range n.owner.Events(ctx) {
		ce, ok := ev.Data.(owner.ConsentEvent)
		if ev.Name != owner.EventConsent || !ok || ce.Kind != owner.ConsentAdded || ce.Request == nil {
			continue
		}
		notice := devices.Notice{ID: ce.Request.ID, Site: ce.Request.Agent.Site, Brand: ce.Request.Brand.Name, Code: ce.Request.UserCode}
		sub := "mailto:owner@aether.invalid"
		if h := n.tailnetHost(); h != "" {
			sub = "https://" + h
		}
		push := &devices.Push{Store: n.devices, Client: n.opts.PushClient, Subscriber: sub}
		n.bg.Add(1)
		go func() { // one slow push service holds up no other request's push
			defer n.bg.Done()
			pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if sent, err := push.Send(pctx, notice); err != nil {
				n.log.Warn("a push to a paired phone failed", "request", notice.ID, "sent", sent, "err", err)
			}
		}()
	}
}
