package gateway

import (
	"fmt"
	"net/http"
	"time"

	"github.com/aether/aether/backend/identity"
	"github.com/aether/aether/backend/limit"
	"github.com/aether/aether/backend/site"
)

// Limits on what one client holds of the gateway (docs/wire.md, "Limits"; docs/threats.md, F7–F9).
const (
	// bodyTimeout is how long a client has to send its request body once the headers are in;
	// 4 MiB in 30 s is 1.1 Mbit/s.
	bodyTimeout = 30 * time.Second
	// maxRequestsPerAgent caps one identity's requests in progress (a turn holds its request
	// while it runs, so this is above the four turns one grant may run).
	maxRequestsPerAgent = 16
	// maxRequestsPerSite caps the requests in progress of all the agents of one issuer site, so
	// that made-up subjects do not multiply the agent's cap.
	maxRequestsPerSite = 64
	// busyRetry is the Retry-After of a refusal by those caps.
	busyRetry = 2 * time.Second
)

var (
	errBodyTimeout = wireError{http.StatusRequestTimeout, -32600, "DEADLINE_EXCEEDED", "INVALID_REQUEST", ""}
	// errBusy answers a request over a cap of what one agent or site holds: requests in
	// progress here, waiting tasks (K2, K3); always with Retry-After.
	errBusy = wireError{http.StatusTooManyRequests, -32000, "RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED", ""}
)

// withBodyDeadline gives a request with a body bodyTimeout to send it (F7): a client that
// trickles it is cut off, and its connection closed, even on paths that never read the body
// (net/http reads up to 256 KiB of what is left before it reuses a connection). The handler
// that reads the body lifts the deadline once it is in (liftBodyDeadline): the server reads on
// to notice a client that goes away, and must not take the deadline for that.
func withBodyDeadline(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyTimeout))
		}
		h.ServeHTTP(w, r)
	})
}

func liftBodyDeadline(w http.ResponseWriter) {
	http.NewResponseController(w).SetReadDeadline(time.Time{})
}

// closeUnread marks an answer given before the body was read whole: the connection closes
// after it. Otherwise net/http would read what is left of the body before it sends the answer,
// and a trickling client would get it only at the body deadline.
func closeUnread(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
}

// requestSlots counts the requests in progress per agent identity and per issuer site (F8, F9).
type requestSlots struct {
	agents, sites *limit.Slots
}

func newRequestSlots() requestSlots {
	return requestSlots{agents: limit.NewSlots(maxRequestsPerAgent), sites: limit.NewSlots(maxRequestsPerSite)}
}

// take holds a slot of the agent and of its site until release is called, or answers the
// 429 (with Retry-After set on w) saying which cap was hit.
func (s requestSlots) take(w http.ResponseWriter, id identity.Identity) (release func(), werr *wireError) {
	who, where := id.Key(), site.OfIssuer(id.Issuer)
	var e wireError
	switch {
	case !s.agents.Take(who):
		e = errBusy.with(fmt.Sprintf("this agent has %d requests in progress, the most one agent may have; retry in %d s", maxRequestsPerAgent, limit.RetryAfter(busyRetry)))
	case !s.sites.Take(where):
		s.agents.Release(who)
		e = errBusy.with(fmt.Sprintf("the agents of issuer site %s have %d requests in progress, the most one site may have; retry in %d s", where, maxRequestsPerSite, limit.RetryAfter(busyRetry)))
	default:
		return func() { s.sites.Release(where); s.agents.Release(who) }, nil
	}
	setRetryAfter(w, busyRetry)
	closeUnread(w)
	return nil, &e
}
