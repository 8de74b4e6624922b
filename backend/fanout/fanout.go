// Package fanout hands each event to every subscriber without ever making the sender wait: a
// subscriber that falls a buffer behind loses events. Consent's events and the owner's event
// stream both go through it (docs/architecture.md).
package fanout

import "sync"

// Hub fans events of type E out to its subscribers.
type Hub[E any] struct {
	buffer int

	mu   sync.Mutex
	subs map[chan E]struct{}
}

// New makes a hub whose subscribers each hold up to buffer events not yet read.
func New[E any](buffer int) *Hub[E] {
	return &Hub[E]{buffer: buffer, subs: map[chan E]struct{}{}}
}

// Subscribe returns a channel of the events published from now on, and a function that ends
// the subscription and closes the channel (once, however often it is called).
func (h *Hub[E]) Subscribe() (<-chan E, func()) {
	ch := make(chan E, h.buffer)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[ch]; ok {
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// Publish hands e to every subscriber with room for it and returns how many had none.
func (h *Hub[E]) Publish(e E) (dropped int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- e:
		default:
			dropped++
		}
	}
	return dropped
}
