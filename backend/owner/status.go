package owner

import (
	"context"
	"runtime"
	"runtime/metrics"

	"github.com/aether/aether/backend/store"
)

// Status is the Status page and `aether status`.
func (s *Service) Status(ctx context.Context) (Status, error) {
	running, paused := s.cfg.Node.Gateway()
	path, perr := s.policyFile()
	st := Status{
		Gateway: GatewayStatus{Listen: s.cfg.Listen, PublicURL: s.PublicURL(), Running: running, Paused: paused},
		Admin:   AdminStatus{URL: s.cfg.AdminURL},
		Policy:  PolicyStatus{Path: path, Error: policyErrorDTO(perr)},
		Brands:  s.brandDTOs(s.served()),

		Reachability: s.Reachability(),
	}
	st.Codex, st.Confinement = s.cfg.Node.Health()
	if s.cfg.Setup != nil {
		st.Download = s.cfg.Setup.CodexDownload()
		var err error
		if st.Model, err = s.cfg.Setup.Model(); err != nil {
			return st, err
		}
	}
	st.Setup = setupSteps(st)
	pending, err := s.cfg.Consent.Pending(ctx)
	if err != nil {
		return st, err
	}
	st.Pending = len(pending)
	recs, _, err := s.cfg.Ledger.List(ctx, store.ReceiptFilter{Limit: 5})
	if err != nil {
		return st, err
	}
	for i := range recs {
		st.LastReceipts = append(st.LastReceipts, receiptDTO(&recs[i]))
	}
	return st, nil
}

// Runtime reads the node process's goroutine count and heap size (cheap: no stop-the-world).
func (s *Service) Runtime() Runtime {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	return Runtime{Goroutines: runtime.NumGoroutine(), HeapBytes: sample[0].Value.Uint64()}
}

// DesktopState is what the desktop shell shows outside its window: the tray's Pause/Resume
// item and whether to open the Brands page at start.
type DesktopState struct {
	Brands      int   // brands in the served policy
	Running     bool  // the gateway serves (the policy loaded without errors)
	Paused      bool  // paused from the tray or the node API
	PolicyError error // the policy file's problem, if any
}

// DesktopState reports the gateway and policy state without reading the database.
func (s *Service) DesktopState() DesktopState {
	st := DesktopState{}
	st.Running, st.Paused = s.cfg.Node.Gateway()
	_, st.PolicyError = s.policyFile()
	if p := s.served(); p != nil && p.Pact != nil {
		st.Brands = len(p.Pact.Brands)
	}
	return st
}

// SetPaused pauses or resumes the gateway (the tray, the node API).
func (s *Service) SetPaused(paused bool) error { return s.cfg.Node.SetPaused(paused) }
