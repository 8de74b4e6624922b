// Package owner is what the node's owner can do and see: decide consent requests, list and
// revoke grants, read, verify and export receipts, edit brands, read the node's status, pause
// the gateway, and follow all of it as events. Every front door goes through one Service: the
// admin UI's API and the node API (backend/admin), the desktop window, tray and notifications
// (app), and the CLI through the node API. An action therefore means the same, and fails the
// same way, wherever the owner takes it (docs/architecture.md). The service serves nothing
// itself: no HTTP, no window.
package owner

import (
	"github.com/aether/aether/backend/consent"
	"github.com/aether/aether/backend/fanout"
	"github.com/aether/aether/backend/issuer"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/policy"
	"github.com/aether/aether/backend/receipts"
)

// Node is what the service needs of the node that runs it; the node implements it.
type Node interface {
	// Gateway says whether the gateway serves (the policy loads) and whether it is paused.
	Gateway() (running, paused bool)
	// SetPaused pauses or resumes the gateway; it fails when the gateway does not run.
	SetPaused(paused bool) error
	// Health is the last check of Codex and of the confinement.
	Health() (CodexStatus, Confinement)
	// Reach is where publishing with Tailscale Funnel stands; Mode "" when it is off.
	Reach() Reachability
	// Recheck asks the published address again (Reachability.Probe follows).
	Recheck()
}

// Config is what a Service works over.
type Config struct {
	Consent *consent.Service
	Ledger  *receipts.Ledger
	Keys    keys.History // verifies a receipt shown on its own: every key the node signed with, bounded by its rotation
	Node    Node
	// Policy is policy.json: the service reads the last good policy from it, and saves and
	// serves brand edits through it.
	Policy *policy.File
	// Listen and PublicURL are the gateway's, AdminURL the admin listener's, as bound.
	Listen, PublicURL, AdminURL string
	// Setup gets Codex and keeps its model settings; nil where the node has none.
	Setup CodexSetup
	// TokensToday is a grant's model tokens today, as the model gateway counted them; nil = none.
	TokensToday func(grantID string) int64
	// Issuer is the owner's agents' identity issuer; nil where the node has none.
	Issuer *issuer.Issuer
	// Received keeps what the owner's agents received from other nodes; nil keeps nothing.
	Received ReceivedStore
}

// Service carries out the owner's actions. It is safe for concurrent use.
type Service struct {
	cfg Config
	hub *fanout.Hub[Event] // the event streams
}

// New builds the service; run Forward for its consent and grant events. It follows
// cfg.Policy: every change of the file is an EventPolicy.
func New(cfg Config) *Service {
	s := &Service{cfg: cfg, hub: fanout.New[Event](streamBuffer)}
	if cfg.Policy != nil {
		cfg.Policy.Subscribe(policy.Subscriber{Changed: func(policy.Snapshot) { s.PolicyChanged() }})
	}
	return s
}

// served is the last good policy, nil before one loaded.
func (s *Service) served() *policy.Policy { return s.cfg.Policy.Current().Policy }

// policyFile is policy.json's path and, when the file does not load, why.
func (s *Service) policyFile() (string, error) {
	return s.cfg.Policy.Path(), s.cfg.Policy.Current().Err
}

// PublicURL is the served policy's publicUrl (it changes with the policy), else the one the
// node started with.
func (s *Service) PublicURL() string {
	if p := s.served(); p != nil && p.Pact != nil {
		return p.Pact.PublicURL
	}
	return s.cfg.PublicURL
}
