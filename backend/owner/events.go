package owner

import (
	"context"

	"github.com/aether/aether/backend/consent"
	"github.com/aether/aether/backend/receipts"
)

// Events streams the owner's events (consent, grant, receipt, policy) until ctx ends, then
// closes the channel. Delivery never blocks the publisher: a stream that falls behind loses
// events, and its reader re-reads the lists on the next one.
func (s *Service) Events(ctx context.Context) <-chan Event {
	ch, end := s.hub.Subscribe()
	context.AfterFunc(ctx, end)
	return ch
}

// Forward turns consent's events into consent and grant events until ctx ends; the node runs it.
func (s *Service) Forward(ctx context.Context) {
	s.cfg.Consent.Watch(ctx, func(ev consent.Event) {
		pending := 0
		if reqs, err := s.cfg.Consent.Pending(ctx); err == nil {
			pending = len(reqs)
		}
		ce := ConsentEvent{Pending: pending}
		if ev.Request != nil {
			r := s.requestDTO(*ev.Request)
			ce.Request = &r
		}
		switch ev.Kind {
		case consent.EventRequestAdded:
			ce.Kind = ConsentAdded
		case consent.EventRequestDecided:
			ce.Kind = ConsentDecided
		case consent.EventRequestExpired:
			ce.Kind = ConsentExpired
		}
		if ce.Kind != "" {
			s.hub.Publish(Event{Name: EventConsent, Data: ce})
		}
		if ev.Grant != nil {
			s.hub.Publish(Event{Name: EventGrant, Data: s.grantDTO(*ev.Grant)})
		}
	})
}

// PolicyChanged tells the streams that the served policy or its file changed.
func (s *Service) PolicyChanged() { s.hub.Publish(Event{Name: EventPolicy}) }

// ReceiptAdded tells the streams of a committed receipt (the gateway calls it).
func (s *Service) ReceiptAdded(r *receipts.Receipt) {
	s.hub.Publish(Event{Name: EventReceipt, Data: receiptDTO(r)})
}

// streamBuffer is how many events a stream may fall behind before it loses some.
const streamBuffer = 32
