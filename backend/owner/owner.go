// Package owner is what the node's owner can do and see: decide consent requests, list and
// revoke grants, read, verify and export receipts, edit brands, read the node's status, pause
// the gateway, and follow all of it as events. Every front door goes through one Service: the
// admin UI's API and the node API (backend/admin), the desktop window, tray and notifications
// (app), and the CLI through the node API. An action therefore means the same, and fails the
// same way, wherever the owner takes it (docs/architecture.md). The service serves nothing
// itself: no HTTP, no window.
package owner

import (
	"sync"

	"github.com/aether/aether/backend/consent"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/policy"
	"github.com/aether/aether/backend/receipts"
)

// Node is what the service needs of the node that runs it; the node implements it.
type Node interface {
	// Served is the policy the gateway serves now, nil before one loaded: the same snapshot
	// consent and the gateway read.
	Served() *policy.Policy
	// PolicyFile is policy.json's path and, when the file does not load, why.
	PolicyFile() (path string, err error)
	// ServeSaved reads policy.json back after the service saved it, and serves it.
	ServeSaved() (*policy.Policy, error)
	// Gateway says whether the gateway serves (the policy loads) and whether it is paused.
	Gateway() (running, paused bool)
	// SetPaused pauses or resumes the gateway; it fails when the gateway does not run.
	SetPaused(paused bool) error
	// Health is the last check of Codex and of the confinement.
	Health() (CodexStatus, Confinement)
	// Reach is where publishing with Tailscale Funnel stands; Mode "" when it is off.
	Reach() Reachability
}

// Config is what a Service works over.
type Config struct {
	Consent *consent.Service
	Ledger  *receipts.Ledger
	Keys    keys.History // verifies a receipt shown on its own: every key the node signed with, bounded by its rotation
	Node    Node
	// Listen and PublicURL are the gateway's, AdminURL the admin listener's, as bound.
	Listen, PublicURL, AdminURL string
	// Setup gets Codex and keeps its model settings; nil where the node has none.
	Setup CodexSetup
	// TokensToday is a grant's model tokens today, as the model gateway counted them; nil = none.
	TokensToday func(grantID string) int64
}

// Service carries out the owner's actions. It is safe for concurrent use.
type Service struct {
	cfg  Config
	hub  *hub
	save sync.Mutex // one brand edit at a time
}

// New builds the service; run Forward for its consent and grant events.
func New(cfg Config) *Service {
	return &Service{cfg: cfg, hub: newHub()}
}

// PublicURL is the served policy's publicUrl (it changes with the policy), else the one the
// node started with.
func (s *Service) PublicURL() string {
	if p := s.cfg.Node.Served(); p != nil && p.Pact != nil {
		return p.Pact.PublicURL
	}
	return s.cfg.PublicURL
}
