package reach

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Funnel on is not "reachable": after publishing, the node asks its public address for the
// gateway's /healthz as an agent would, through the public name and the Funnel ingress, from
// outside its own listener, and Status says what came back (docs/deploy.md). It asks again
// every Config.ProbeEvery and when Recheck is called.

// Probe results (Status.Probe).
const (
	ProbeChecking    = "checking"
	ProbeReachable   = "reachable"
	ProbeUnreachable = "unreachable"
)

const probeTimeout = 15 * time.Second

// Recheck asks the public address again now (the card's "Check again").
func (p *Publisher) Recheck() {
	select {
	case p.recheck <- struct{}{}:
	default: // one is already due
	}
}

// probeLoop checks the public address on demand (publish asks once published) and on the timer.
func (p *Publisher) probeLoop(ctx context.Context) {
	every := p.cfg.ProbeEvery
	if every <= 0 {
		every = 5 * time.Minute
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-p.recheck:
		}
		p.probe(ctx)
	}
}

// probe asks the published URL for /healthz and notes the answer, if publishing still stands.
func (p *Publisher) probe(ctx context.Context) {
	st := p.Status()
	if st.State != Published {
		return
	}
	p.setProbe(st.URL, ProbeChecking, "")
	client := p.cfg.Probe
	if client == nil {
		client = http.DefaultClient
	}
	cctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(cctx, http.MethodGet, st.URL+"/healthz", nil)
	resp, err := client.Do(req)
	if ctx.Err() != nil {
		return // stopping
	}
	switch {
	case err != nil:
		p.setProbe(st.URL, ProbeUnreachable, probeError(err))
	case resp.StatusCode != http.StatusOK:
		resp.Body.Close()
		p.setProbe(st.URL, ProbeUnreachable, fmt.Sprintf("%s/healthz answered %s", st.URL, resp.Status))
	default:
		resp.Body.Close()
		p.setProbe(st.URL, ProbeReachable, "")
	}
}

// probeError says in the owner's words why the public address did not answer.
func probeError(err error) string {
	var dns *net.DNSError
	switch {
	case errors.As(err, &dns):
		return "its name does not resolve (" + dns.Err + "); Tailscale may still be setting it up"
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("no answer within %s", probeTimeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return "no connection to it: " + err.Error()
}

// setProbe notes a probe's result on the Status it was made for.
func (p *Publisher) setProbe(addr, result, reason string) {
	st := p.Status()
	if st.State != Published || st.URL != addr {
		return
	}
	st.Probe, st.ProbeReason = result, reason
	p.set(st)
}
