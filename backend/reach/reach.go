// Package reach publishes the gateway on the internet with Tailscale Funnel, embedded
// (tailscale.com/tsnet): the node joins the owner's tailnet as a device of its own, listens
// with Funnel on :443 of its <device>.<tailnet>.ts.net name and ends TLS in this process, so
// the relays carry only ciphertext. Only the handler it is given is served there: the node
// gives it the gateway's, never the admin UI or the node API (docs/deploy.md).
package reach

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"tailscale.com/ipn/store/mem"
	"tailscale.com/logtail"
	"tailscale.com/tsnet"
)

// State is where publishing stands.
type State string

const (
	Off       State = "off"        // not publishing
	Starting  State = "starting"   // joining the tailnet
	LoggingIn State = "logging_in" // waiting for the owner to sign in at LoginURL
	Published State = "published"  // serving at URL
	OnTailnet State = "tailnet"    // on the tailnet at URL for the owner's phones, not published (TailnetOnly)
	Failed    State = "failed"     // not reachable: Reason says why, Fix what to do
)

// Status is what the window, `aether status` and the log say of publishing.
type Status struct {
	State    State
	URL      string // https://<device>.<tailnet>.ts.net once published
	Device   string // the device's name on the tailnet
	Reason   string // why it is not reachable (Failed, or a LoggingIn after a logout)
	Fix      string // what the owner can do about it
	LoginURL string // where to sign in (LoggingIn)
	// Probe is what the public address answered when the node last asked it (probe.go):
	// ProbeChecking, ProbeReachable or ProbeUnreachable with ProbeReason; "" before the first.
	Probe       string
	ProbeReason string
}

// Config is what a Publisher serves and where it keeps its state.
type Config struct {
	Dir      string       // tsnet's state: <data dir>/tailscale, kept at mode 0700
	Hostname string       // the device name asked for ("" = "aether"); the tailnet may add a suffix
	Handler  http.Handler // the gateway's handler: all the Funnel listener serves
	// TailnetOnly joins the tailnet for Tailnet's listener alone: no Funnel listener.
	TailnetOnly bool
	// Tailnet, when set, is the owner's pages: served on the tailnet listener (tailnet.go) to
	// the devices of the node's own Tailscale user, never on the Funnel listener.
	Tailnet  http.Handler
	Logger   *slog.Logger
	OnChange func(Status) // called after every change of Status, in order
	// ConnectTimeout is how long joining may take before the control server counts as
	// unreachable (still retried). 0 means 30 s.
	ConnectTimeout time.Duration

	// Probe asks the public address as an agent would (nil: http.DefaultClient, the system's
	// resolver and the internet); ProbeEvery is how often (0: every 5 minutes).
	Probe      *http.Client
	ProbeEvery time.Duration

	// Tests only: a loopback control server, an in-memory ephemeral node, and the test
	// certificate issuer's TLS config in place of the tailnet's Let's Encrypt certificate.
	ControlURL string
	Ephemeral  bool
	TLS        *tls.Config
}

// Publisher runs one tsnet node and its Funnel listener.
type Publisher struct {
	cfg     Config
	srv     *tsnet.Server
	cancel  context.CancelFunc
	done    chan struct{}
	recheck chan struct{} // Recheck's: probe now

	mu      sync.Mutex
	st      Status
	http    *http.Server // the Funnel listener's server, once listening
	tailnet *http.Server // the owner's tailnet listener's server, once listening
	wasUp   bool         // Running once: a later NeedsLogin is a logout

	probeOnce sync.Once // probeLoop runs once per Publisher
}

// Start joins the tailnet in the background and publishes once it is up; Status follows it.
func Start(cfg Config) (*Publisher, error) {
	if cfg.Handler == nil || cfg.Dir == "" {
		return nil, errors.New("reach: a handler and a state folder are required")
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("reach: state folder %s: %w", cfg.Dir, err)
	}
	if err := os.Chmod(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("reach: state folder %s: %w", cfg.Dir, err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 30 * time.Second
	}
	if cfg.Hostname == "" {
		cfg.Hostname = "aether"
	}
	// tsnet uploads its own debug log to Tailscale unless told not to; nothing of the node's
	// but the tailnet's own traffic leaves the machine (docs/deploy.md).
	logtail.Disable()
	debug := cfg.Logger.With("part", "tsnet")
	srv := &tsnet.Server{
		Dir: cfg.Dir, Hostname: cfg.Hostname, ControlURL: cfg.ControlURL, Ephemeral: cfg.Ephemeral,
		Logf:     func(format string, a ...any) { debug.Debug(fmt.Sprintf(format, a...)) },
		UserLogf: func(format string, a ...any) { debug.Debug(fmt.Sprintf(format, a...)) }, // the login URL: Status says it
	}
	if cfg.Ephemeral {
		srv.Store = new(mem.Store)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Publisher{cfg: cfg, srv: srv, cancel: cancel, done: make(chan struct{}), recheck: make(chan struct{}, 1), st: Status{State: Starting}}
	go p.run(ctx)
	return p, nil
}

// Status is where publishing stands now.
func (p *Publisher) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st
}

// TailnetOnly: on the tailnet for the owner's phones alone, no Funnel.
func (p *Publisher) TailnetOnly() bool { return p.cfg.TailnetOnly }

// Tailnet is the tsnet node (tests make it a Funnel target of their own ingress).
func (p *Publisher) Tailnet() *tsnet.Server { return p.srv }

// Stop ends publishing: the Funnel listener's requests get until ctx ends, then the node leaves.
func (p *Publisher) Stop(ctx context.Context) error {
	p.cancel()
	p.mu.Lock()
	servers := []*http.Server{p.http, p.tailnet}
	p.mu.Unlock()
	var err error
	for _, hs := range servers {
		if hs == nil {
			continue
		}
		if e := hs.Shutdown(ctx); e != nil {
			hs.Close()
			err = e
		}
	}
	<-p.done
	p.srv.Close()
	return err
}

func (p *Publisher) set(st Status) {
	p.mu.Lock()
	if p.st == st {
		p.mu.Unlock()
		return
	}
	// Logged before the state is visible: whoever reads a state can find its reason in the log.
	p.logState(st)
	p.st = st
	p.mu.Unlock()
	if p.cfg.OnChange != nil {
		p.cfg.OnChange(st)
	}
}

func (p *Publisher) logState(st Status) {
	log := p.cfg.Logger.With("state", st.State)
	switch st.State {
	case Published:
		switch st.Probe {
		case "":
			log.Info("published with Tailscale Funnel; checking that it is reachable", "url", st.URL, "device", st.Device)
		case ProbeReachable:
			log.Info("reachable from the internet (Tailscale Funnel)", "url", st.URL, "device", st.Device)
		case ProbeUnreachable:
			log.Warn("published, but not reachable from the internet (Tailscale Funnel)", "url", st.URL, "reason", st.ProbeReason)
		}
	case OnTailnet:
		log.Info("on the tailnet for your phones; the gateway is not published", "url", st.URL)
	case LoggingIn:
		// Never the link: whoever opens it first puts this device in their tailnet. The
		// window and the terminal of `node serve` show it (docs/deploy.md).
		log.Info("Tailscale Funnel: sign in to your tailnet to publish the gateway (the link is on the Status page)", "reason", st.Reason)
	case Failed:
		log.Warn("not reachable from the internet (Tailscale Funnel)", "reason", st.Reason, "fix", st.Fix)
	}
}

func (p *Publisher) fail(reason, fix string) {
	p.set(Status{State: Failed, Reason: reason, Fix: fix})
}

// trimDot is a DNS name without its final dot.
func trimDot(name string) string { return strings.TrimSuffix(name, ".") }
