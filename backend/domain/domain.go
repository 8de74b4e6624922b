// Package domain is the vocabulary the node's packages share: who an agent is, which brand and
// grant a turn runs under, and the states a turn and a consent request go through. It holds no
// behaviour beyond naming and imports nothing but the standard library, so every package may
// use it (docs/architecture.md).
package domain

import "strconv"

// Agent is a personal agent as its identity JWT names it: the issuer and the subject there.
// The same subject at another issuer is another agent. Its JSON is the JWT's own claim names,
// as receipts carry it (docs/wire.md).
type Agent struct {
	Issuer  string `json:"iss"`
	Subject string `json:"sub"`
}

// Key is an unambiguous encoding of the pair: the issuer's length, a colon, the issuer, a "|",
// the subject. No two distinct agents share a key.
func (a Agent) Key() string {
	return strconv.Itoa(len(a.Issuer)) + ":" + a.Issuer + "|" + a.Subject
}

// BrandID names a brand of policy.json (its id, the path segment of its card URL).
type BrandID string

// GrantID names a grant the owner signed (its jti, "g_…"): a type of its own, so that no other
// string is taken for one.
type GrantID string

// AccessMode says what Codex may do in a brand's workspace: policy.json's accessMode, a grant's
// and a receipt's access_mode (docs/confinement.md).
type AccessMode string

const (
	// ReadOnly runs Codex with --sandbox read-only.
	ReadOnly AccessMode = "read_only"
	// ReadWrite runs Codex with --sandbox workspace-write.
	ReadWrite AccessMode = "read_write"
)

// Valid reports whether m is one of the known access modes.
func (m AccessMode) Valid() bool { return m == ReadOnly || m == ReadWrite }

// TurnStatus is where a turn stands: running until its receipt, then how it ended, as the
// receipt says.
type TurnStatus string

const (
	// TurnRunning is a turn without a receipt yet (the turns table's status allows it; no
	// receipt carries it).
	TurnRunning   TurnStatus = "running"
	TurnCompleted TurnStatus = "completed"
	TurnFailed    TurnStatus = "failed"
	TurnCanceled  TurnStatus = "canceled"
)

// Usage is what the coding agent reported using in a turn; its JSON is the receipt's
// (docs/wire.md).
type Usage struct {
	InputTokens       int64 `json:"input_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
}

// Outcome is how a turn ended.
type Outcome struct {
	Status   TurnStatus
	Reason   string
	Answer   string // Codex's answer; shown only when Status is completed
	ThreadID string
	Usage    Usage
}

// FlowStatus is where a device-flow consent request stands.
type FlowStatus string

const (
	FlowPending  FlowStatus = "pending"
	FlowApproved FlowStatus = "approved"
	FlowDenied   FlowStatus = "denied"
	FlowExpired  FlowStatus = "expired"
	FlowRedeemed FlowStatus = "redeemed"
	FlowLocked   FlowStatus = "locked"
)
