package reach

import (
	"context"
	"fmt"
	"strings"
	"time"

	"tailscale.com/client/local"
	"tailscale.com/ipn"
)

// run follows the tsnet backend's state on its notification bus until Stop: a login URL while
// the owner has to sign in, the Funnel listener once the device runs.
func (p *Publisher) run(ctx context.Context) {
	defer close(p.done)
	lc, err := p.srv.LocalClient() // starts the node
	if err != nil {
		p.fail("Tailscale could not start: "+err.Error(), "check that the data dir can be written, then turn Funnel off and on again")
		return
	}
	w, err := lc.WatchIPNBus(ctx, ipn.NotifyInitialState)
	if err != nil {
		if ctx.Err() == nil {
			p.fail("Tailscale could not start: "+err.Error(), "turn Funnel off and on again")
		}
		return
	}
	defer w.Close()
	stuck := time.AfterFunc(p.cfg.ConnectTimeout, func() { p.unreachable(ctx, lc) })
	defer stuck.Stop()
	var login string
	for {
		n, err := w.Next()
		if err != nil {
			return // ctx ended: Stop
		}
		if n.ErrMessage != nil {
			p.fail("Tailscale: "+*n.ErrMessage, "turn Funnel off and on again; if it stays, sign in again")
		}
		if n.BrowseToURL != nil && *n.BrowseToURL != "" {
			login = *n.BrowseToURL
			p.loggingIn(login)
		}
		if n.State == nil {
			continue
		}
		switch *n.State {
		case ipn.NeedsLogin:
			if st, err := lc.StatusWithoutPeers(ctx); err == nil && st.AuthURL != "" {
				login = st.AuthURL
			}
			if login != "" {
				p.loggingIn(login)
			} else if p.wasRunning() {
				p.fail(loggedOut, signInAgain)
			}
		case ipn.NeedsMachineAuth:
			p.fail("an admin of your tailnet has to approve this device", "approve it on the Machines page of the Tailscale admin console")
		case ipn.Running:
			stuck.Stop()
			login = ""
			p.ran()
			p.publish(ctx, lc)
		case ipn.Stopped:
			if p.wasRunning() { // a logout from the tailnet stops the backend
				p.fail(loggedOut, signInAgain)
			} else {
				p.fail("Tailscale is stopped on this device", "turn Funnel off and on again")
			}
		}
	}
}

// ran notes that the device is on the tailnet: a later NeedsLogin or Stopped is a logout.
func (p *Publisher) ran() {
	p.mu.Lock()
	p.wasUp = true
	p.mu.Unlock()
}

// A logout (or an expired key) while running: tsnet asks for a login link only when it starts,
// so turning Funnel off and on starts it again and shows a new link.
const (
	loggedOut   = "this device was logged out of your tailnet (or its key expired)"
	signInAgain = "turn Funnel off and on again, then sign in with the new link"
)

// wasRunning: the device ran before in this run, so a NeedsLogin is a logout or an expired key.
func (p *Publisher) wasRunning() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.wasUp
}

// loggingIn shows where to sign in; after the device has run once this is a logout.
func (p *Publisher) loggingIn(url string) {
	st := Status{State: LoggingIn, LoginURL: url, Fix: "open the link and sign in to your tailnet"}
	if p.wasRunning() {
		st.Reason, st.Fix = loggedOut, "open the link and sign in again"
	}
	p.set(st)
}

// unreachable runs when the device is neither up nor waiting for a login after
// ConnectTimeout: the control server did not answer. tsnet keeps trying; a later state
// replaces this one.
func (p *Publisher) unreachable(ctx context.Context, lc *local.Client) {
	if ctx.Err() != nil {
		return
	}
	st := p.Status()
	if st.State != Starting && !(st.State == LoggingIn && st.LoginURL == "") {
		return
	}
	reason := "cannot reach the Tailscale control server"
	if s, err := lc.StatusWithoutPeers(ctx); err == nil && len(s.Health) > 0 {
		reason += " (" + strings.Join(s.Health, "; ") + ")"
	}
	p.fail(reason, "check this computer's internet connection; Aether keeps trying")
}

// publish listens with Funnel on :443 (once per run) and serves the handler there, and the
// owner's door on the tailnet; with TailnetOnly only the latter.
func (p *Publisher) publish(ctx context.Context, lc *local.Client) {
	st, err := lc.StatusWithoutPeers(ctx)
	if err != nil {
		p.fail("Tailscale: "+err.Error(), "turn Funnel off and on again")
		return
	}
	device := trimDot(st.Self.DNSName)
	p.mu.Lock()
	listening := p.http != nil || p.cfg.TailnetOnly
	p.mu.Unlock()
	if !listening {
		if err := p.listen(); err != nil {
			reason, fix := funnelRefusal(err)
			p.fail(reason, fix)
			return
		}
	}
	if len(st.CertDomains) > 0 {
		device = st.CertDomains[0]
	}
	p.mu.Lock()
	owners := p.cfg.Tailnet != nil && p.tailnet == nil
	p.mu.Unlock()
	if owners {
		if err := p.listenTailnet(lc, st.Self.UserID, device); err != nil {
			p.fail("the owner's pages could not listen on the tailnet: "+err.Error(), "turn Funnel off and on again")
			return
		}
	}
	url := "https://" + device
	if p.cfg.TailnetOnly {
		p.set(Status{State: OnTailnet, URL: url, Device: device})
		return
	}
	if cur := p.Status(); cur.State == Published && cur.URL == url {
		return // still published: the probe's word stands
	}
	p.set(Status{State: Published, URL: url, Device: device})
	p.probeOnce.Do(func() { go p.probeLoop(ctx) })
	p.Recheck()
}

// funnelRefusal turns ListenFunnel's error into what the owner reads and can do.
func funnelRefusal(err error) (reason, fix string) {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "HTTPS must be enabled"):
		return "your tailnet has no HTTPS certificates", "turn on HTTPS Certificates in the Tailscale admin console (DNS page), then turn Funnel off and on again"
	case strings.Contains(msg, `"funnel" node attribute`):
		return "your tailnet's policy does not allow Funnel for this device (no \"funnel\" node attribute)",
			"add a nodeAttrs entry with \"attr\": [\"funnel\"] for this device in the tailnet policy file, then turn Funnel off and on again"
	case strings.Contains(msg, "not allowed for funnel"):
		return "your tailnet's policy does not allow Funnel on port 443", "allow port 443 in the funnel node attribute, then turn Funnel off and on again"
	}
	return fmt.Sprintf("Tailscale Funnel refused to listen: %v", err), "turn Funnel off and on again"
}
