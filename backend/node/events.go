package node

import (
	"context"
	"sync"

	"github.com/aether/aether/backend/admin"
	"github.com/aether/aether/backend/consent"
	"github.com/aether/aether/backend/receipts"
)

// hub fans the node's events out to the admin UI's event streams. Delivery
// never blocks the publisher: a stream that falls behind loses events and the
// UI re-reads the lists on the next one.
type hub struct {
	mu   sync.Mutex
	subs map[chan admin.Event]struct{}
}

func newHub() *hub { return &hub{subs: map[chan admin.Event]struct{}{}} }

func (h *hub) subscribe(ctx context.Context) <-chan admin.Event {
	ch := make(chan admin.Event, 32)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	context.AfterFunc(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.subs, ch)
		close(ch)
	})
	return ch
}

func (h *hub) publish(ev admin.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}

// bridgeConsent turns consent events into the UI's consent and grant events.
func (n *Node) bridgeConsent(ctx context.Context) {
	defer n.bg.Done()
	events, stop := n.consent.Subscribe()
	defer stop()
	b := &backend{n: n}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			pending := 0
			if reqs, err := n.consent.Pending(ctx); err == nil {
				pending = len(reqs)
			}
			ce := admin.ConsentEvent{Pending: pending}
			if ev.Request != nil {
				r := requestDTO(*ev.Request)
				ce.Request = &r
			}
			switch ev.Kind {
			case consent.EventRequestAdded:
				ce.Kind = "added"
			case consent.EventRequestDecided:
				ce.Kind = "decided"
			case consent.EventRequestExpired:
				ce.Kind = "expired"
			}
			if ce.Kind != "" {
				n.hub.publish(admin.Event{Name: admin.EventConsent, Data: ce})
			}
			if ev.Grant != nil {
				n.hub.publish(admin.Event{Name: admin.EventGrant, Data: b.grantDTO(*ev.Grant)})
			}
		}
	}
}

func (n *Node) notifyPolicy() { n.hub.publish(admin.Event{Name: admin.EventPolicy}) }

func (n *Node) onReceipt(r *receipts.Receipt) {
	n.hub.publish(admin.Event{Name: admin.EventReceipt, Data: receiptDTO(r)})
}
