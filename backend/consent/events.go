package consent

import (
	"context"
	"fmt"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/store"
)

// Event kinds.
const (
	EventRequestAdded   = "request_added"
	EventRequestDecided = "request_decided"
	EventRequestExpired = "request_expired"
	EventGrantRevoked   = "grant_revoked"
)

// Event outcomes.
const (
	OutcomeAllowed = "allowed"
	OutcomeDenied  = "denied"
	OutcomeExpired = "expired"
	OutcomeLocked  = "locked" // request_expired after too many wrong user codes (D16)
	OutcomeRevoked = "revoked"
)

// Event tells the UI and the desktop notifier that something changed. A
// request that ends without a grant (denied, expired, locked) carries Agent and
// Brand so the node can end that agent's waiting AUTH_REQUIRED tasks as REJECTED.
type Event struct {
	Kind    string         `json:"kind"`
	Request *Request       `json:"request,omitempty"`
	Grant   *GrantView     `json:"grant,omitempty"`
	Agent   domain.Agent   `json:"agent"`
	Brand   domain.BrandID `json:"brand"`
	Outcome string         `json:"outcome,omitempty"`
}

const subscriberBuffer = 64

// Watch calls fn with each event, in order, until ctx ends (or the service's events end).
// fn runs on Watch's goroutine: while it runs, later events wait in the subscription's buffer.
func (s *Service) Watch(ctx context.Context, fn func(Event)) {
	events, stop := s.Subscribe()
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			fn(ev)
		}
	}
}

// Subscribe returns a channel of events and a function that ends the
// subscription (and closes the channel). Delivery never blocks the service: a
// subscriber that falls more than a buffer behind loses events.
func (s *Service) Subscribe() (<-chan Event, func()) { return s.events.Subscribe() }

func (s *Service) emit(e Event) {
	if dropped := s.events.Publish(e); dropped > 0 {
		s.log.Warn("consent event dropped: subscriber too slow", "kind", e.Kind, "subscribers", dropped)
	}
}

func (s *Service) emitExpired(f store.DeviceFlow, outcome string) {
	req := s.request(f)
	s.emit(Event{Kind: EventRequestExpired, Request: &req, Agent: req.Agent, Brand: f.Brand, Outcome: outcome})
}

// Sweep marks pending requests past their expiry as expired (emitting
// request_expired for each), deletes finished requests a day after they
// expired, and forgets the limits' idle counters. The node calls it every few seconds.
func (s *Service) Sweep(ctx context.Context) error {
	now := s.now()
	expired, err := s.db.ExpireFlows(ctx, now)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	for _, f := range expired {
		s.emitExpired(f, OutcomeExpired)
	}
	if _, err := s.db.PruneFlows(ctx, now.Add(-flowRetention)); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	s.unknown.Prune(now)
	s.flows.Prune(now)
	return nil
}
