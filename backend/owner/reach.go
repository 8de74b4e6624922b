package owner

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/aether/aether/backend/policy"
)

// Reachability is how agents elsewhere reach the gateway: the Reachability card of the
// Status page, the tray's line, `aether status` (docs/deploy.md).
type Reachability struct {
	// Mode is "funnel" (published with Tailscale Funnel), "tailnet" (on the owner's tailnet
	// for the paired phones only), "proxy" (publicUrl is an https:// address of the owner's own
	// proxy or domain) or "off" (loopback only).
	Mode string `json:"mode"`
	// State is Funnel's: off, starting, logging_in, published (Funnel), tailnet (tailnet only)
	// or failed.
	State    string `json:"state"`
	URL      string `json:"url"`      // https://<device>.<tailnet>.ts.net once published
	Device   string `json:"device"`   // the device's name on the tailnet
	Reason   string `json:"reason"`   // why it is not reachable
	Fix      string `json:"fix"`      // what to do about it
	LoginURL string `json:"loginUrl"` // where to sign in to the tailnet
	// Probe is what the published address answered when the node last asked it as an agent
	// would: "checking", "reachable" or "unreachable" (ProbeReason says why); "" before the
	// first check, and when not published.
	Probe       string `json:"probe"`
	ProbeReason string `json:"probeReason"`
	// InUse: publicUrl and audience are URL. A published URL not in use waits for the owner
	// to confirm it (UseFunnelURL): agents are told the old publicUrl until then.
	InUse bool `json:"inUse"`
}

// Reachability modes.
const (
	ReachOff    = "off"
	ReachFunnel = "funnel"
	ReachProxy  = "proxy"
	// ReachTailnet: on the owner's tailnet for the paired phones, the gateway not published.
	ReachTailnet = "tailnet"
)

// Reach states (Reachability.State).
const (
	ReachStateOff       = "off"
	ReachStatePublished = "published"
)

// Reachability.Probe: what the published address answered the node asking as an agent would.
const (
	ProbeReachable   = "reachable"
	ProbeUnreachable = "unreachable"
)

// EventReachability is sent when Reachability changes; Data: Reachability.
const EventReachability = "reachability"

// Reachability is the reachability now.
func (s *Service) Reachability() Reachability {
	r := s.cfg.Node.Reach()
	publicURL := s.PublicURL()
	if r.Mode == "" {
		r.Mode, r.State = ReachOff, ReachStateOff
		if isOwnHTTPS(publicURL) {
			r.Mode, r.URL = ReachProxy, strings.TrimRight(publicURL, "/")
		}
	}
	r.InUse = r.URL != "" && strings.TrimRight(publicURL, "/") == r.URL
	return r
}

// ReachabilityChanged tells the streams (the window, the tray) that Reachability changed.
func (s *Service) ReachabilityChanged() {
	s.hub.Publish(Event{Name: EventReachability, Data: s.Reachability()})
}

// SetFunnel turns publishing with Tailscale Funnel on or off: pact.funnel in policy.json,
// saved and served like a brand edit. The publicUrl does not change here (UseFunnelURL).
func (s *Service) SetFunnel(ctx context.Context, on bool) (Reachability, error) {
	edit := func(p *policy.Policy) (int, error) {
		if on && p.Pact.AllowInsecureLocalIssuers {
			return -1, errLoopbackIssuers
		}
		p.Pact.Funnel = on
		return -1, nil
	}
	if _, err := s.modify(edit); err != nil {
		return Reachability{}, err
	}
	return s.Reachability(), nil
}

// SetTailnet joins the owner's tailnet for the paired phones without publishing the gateway,
// or leaves it: pact.tailnet in policy.json (Funnel, when on, joins it anyway).
func (s *Service) SetTailnet(ctx context.Context, on bool) (Reachability, error) {
	edit := func(p *policy.Policy) (int, error) {
		p.Pact.Tailnet = on
		return -1, nil
	}
	if _, err := s.modify(edit); err != nil {
		return Reachability{}, err
	}
	return s.Reachability(), nil
}

// UseFunnelURL makes the published Funnel address the node's publicUrl and audience, once
// the owner confirmed it. Delegation tokens made under the old publicUrl stop working; the
// grants stay, and their agents get new tokens at the new address without asking the owner
// (docs/deploy.md, "Switching publicUrl").
func (s *Service) UseFunnelURL(ctx context.Context) (Reachability, error) {
	r := s.cfg.Node.Reach()
	if r.State != ReachStatePublished || r.URL == "" {
		return Reachability{}, fmt.Errorf("%w: the gateway is not published with Tailscale Funnel yet", ErrInvalid)
	}
	// No policy with allowInsecureLocalIssuers loads while Funnel publishes (N4), so none is
	// kept here.
	edit := func(p *policy.Policy) (int, error) {
		p.Pact.PublicURL, p.Pact.Audience = r.URL, r.URL
		return -1, nil
	}
	if _, err := s.modify(edit); err != nil {
		return Reachability{}, err
	}
	s.ReachabilityChanged() // now in use: the tray and the window follow
	return s.Reachability(), nil
}

// errLoopbackIssuers says in the owner's words why Funnel is not turned on while policy.json
// sets allowInsecureLocalIssuers; the policy check refuses the pair whatever makes the gateway
// public (docs/threats.md N4).
var errLoopbackIssuers = fmt.Errorf("%w: Tailscale Funnel was not turned on: policy.json sets allowInsecureLocalIssuers, "+
	"which is for tests on this computer only. With it, anyone who reaches the gateway from the internet could make this "+
	"node fetch addresses on this computer. Remove it from policy.json, then try again", ErrInvalid)

// CheckReachability asks the published address again now; the answer comes as a
// reachability event (the check takes up to 15 s).
func (s *Service) CheckReachability(ctx context.Context) (Reachability, error) {
	if r := s.cfg.Node.Reach(); r.State != ReachStatePublished {
		return Reachability{}, fmt.Errorf("%w: the gateway is not published with Tailscale Funnel", ErrInvalid)
	}
	s.cfg.Node.Recheck()
	return s.Reachability(), nil
}

// isOwnHTTPS: an https:// publicUrl that is not loopback, i.e. the owner's own proxy or domain.
func isOwnHTTPS(publicURL string) bool {
	u, err := url.Parse(publicURL)
	if err != nil || u.Scheme != "https" {
		return false
	}
	h := u.Hostname()
	return h != "localhost" && !strings.HasPrefix(h, "127.") && h != "::1"
}
