package reach

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is what the node does on the tailnet.
type Mode int

const (
	ModeOff     Mode = iota // not on the tailnet
	ModeTailnet             // on the tailnet for the owner's phones, the gateway not published
	ModeFunnel              // the gateway published with Funnel, and the owner's phones
)

// Switch turns publishing on and off as the node's settings say: it starts a Publisher with
// Config in the mode wanted and stops it when none is; a change of mode starts it again.
// Starts and stops happen one at a time; readers take the running Publisher without waiting
// for them.
type Switch struct {
	Config Config // what a Publisher is started with (TailnetOnly is the mode's)

	mu  sync.Mutex // orders starts and stops
	pub atomic.Pointer[Publisher]
}

// Set starts, restarts or stops the Publisher to match want; it reports whether that changed
// anything.
func (s *Switch) Set(want Mode) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	log := s.Config.Logger
	if log == nil {
		log = slog.Default()
	}
	if cur := s.pub.Load(); cur != nil && want != ModeOff && cur.cfg.TailnetOnly != (want == ModeTailnet) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.stop(ctx); err != nil {
			log.Warn("Tailscale: requests still running were cut off", "err", err)
		}
	}
	switch {
	case want != ModeOff && s.pub.Load() == nil:
		cfg := s.Config
		cfg.TailnetOnly = want == ModeTailnet
		pub, err := Start(cfg)
		if err != nil {
			log.Error("Tailscale could not start", "err", err)
			return false
		}
		s.pub.Store(pub)
		if cfg.TailnetOnly {
			log.Info("Tailscale: joining the tailnet for your phones (the gateway is not published)", "state", s.Config.Dir)
		} else {
			log.Info("Tailscale Funnel: joining the tailnet to publish the gateway", "state", s.Config.Dir)
		}
	case want == ModeOff && s.pub.Load() != nil:
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.stop(ctx); err != nil {
			log.Warn("Tailscale Funnel: requests still running were cut off", "err", err)
		}
		log.Info("Tailscale Funnel: turned off; the gateway is no longer published")
	default:
		return false
	}
	return true
}

// Stop ends publishing, giving running requests until ctx ends.
func (s *Switch) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stop(ctx)
}

func (s *Switch) stop(ctx context.Context) error {
	pub := s.pub.Swap(nil)
	if pub == nil {
		return nil
	}
	return pub.Stop(ctx)
}

// Publisher is the running Publisher, nil when publishing is off.
func (s *Switch) Publisher() *Publisher { return s.pub.Load() }
