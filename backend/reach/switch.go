package reach

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Switch turns publishing on and off as the node's settings say: it starts a Publisher with
// Config when publishing is wanted and stops it when not. Starts and stops happen one at a
// time; readers take the running Publisher without waiting for them.
type Switch struct {
	Config Config // what a Publisher is started with

	mu  sync.Mutex // orders starts and stops
	pub atomic.Pointer[Publisher]
}

// Set starts or stops publishing to match want; it reports whether that changed anything.
func (s *Switch) Set(want bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	log := s.Config.Logger
	if log == nil {
		log = slog.Default()
	}
	switch {
	case want && s.pub.Load() == nil:
		pub, err := Start(s.Config)
		if err != nil {
			log.Error("Tailscale Funnel could not start", "err", err)
			return false
		}
		s.pub.Store(pub)
		log.Info("Tailscale Funnel: joining the tailnet to publish the gateway", "state", s.Config.Dir)
	case !want && s.pub.Load() != nil:
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
