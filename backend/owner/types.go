package owner

import (
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/aether/aether/backend/domain"
)

// The JSON shapes below are exactly those of docs/admin-api.md (and frontend/src/api.ts): every
// transport sends them as they are.

// Scope is a brand scope as shown to the owner.
type Scope struct {
	ID          string `json:"id"`
	Description string `json:"description"`
}

// BrandRef names a brand inside a consent request or grant.
type BrandRef struct {
	ID   domain.BrandID `json:"id"`
	Name string         `json:"name"`
}

// Brand is one brand of policy.json. CardURL is computed by the service; it is accepted (and
// ignored) in a PUT body because the UI sends back what it got.
type Brand struct {
	ID          domain.BrandID    `json:"id"`
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Capability  string            `json:"capability"`
	Workspace   string            `json:"workspace"`
	AccessMode  domain.AccessMode `json:"accessMode"`
	Scope       Scope             `json:"scope"`
	CardURL     string            `json:"cardUrl"`
}

// Agent is an agent identity; IssuerOrigin is the issuer's origin with a punycode host. The
// rest is what the owner reads, computed once here (site.Describe) so that every page, the
// notification and the tray say the same (C13–C15): Site is the issuer's registrable domain
// in ASCII (the key of "Deny all from this issuer"), SiteName the same as shown (an IDN in
// Unicode with its punycode beside it), Host the issuer host cut from the left only, and
// Claim "says it is <subject> — issued by <site name>".
type Agent struct {
	Issuer       string `json:"issuer"`
	Subject      string `json:"subject"`
	IssuerOrigin string `json:"issuerOrigin"`
	Site         string `json:"site"`
	SiteName     string `json:"siteName"`
	Host         string `json:"host"`
	Claim        string `json:"claim"`
}

// CodeLookup is what became of the request with a user code: "pending", "allowed",
// "denied", "expired", or "unknown" (no such request, or not a well-formed code).
type CodeLookup struct {
	UserCode string `json:"userCode"`
	Status   string `json:"status"`
}

// ConsentRequest is a pending device-flow request.
type ConsentRequest struct {
	ID        string    `json:"id"`
	UserCode  string    `json:"userCode"`
	Agent     Agent     `json:"agent"`
	Brand     BrandRef  `json:"brand"`
	Scope     Scope     `json:"scope"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	// TokensPerDay is the brand's model budget, the approval's default; 0 = no limit.
	TokensPerDay int64 `json:"tokensPerDay"`
}

// Grant is a signed grant; nil times are JSON null.
type Grant struct {
	ID         domain.GrantID    `json:"id"`
	Agent      Agent             `json:"agent"`
	Brand      BrandRef          `json:"brand"`
	Scope      Scope             `json:"scope"`
	AccessMode domain.AccessMode `json:"accessMode"`
	IssuedAt   time.Time         `json:"issuedAt"`
	ExpiresAt  *time.Time        `json:"expiresAt"`
	LastUsedAt *time.Time        `json:"lastUsedAt"`
	Uses       int64             `json:"uses"`
	Status     string            `json:"status"` // "active", "revoked" or "expired"
	RevokedAt  *time.Time        `json:"revokedAt"`
	// TokensToday is the model tokens the grant's turns used today (UTC), as the model gateway
	// counted them; TokensPerDay its budget, set at approval or else its brand's, 0 = no
	// limit (docs/model-gateway.md).
	TokensToday  int64 `json:"tokensToday"`
	TokensPerDay int64 `json:"tokensPerDay"`
}

// ReceiptSummary is the listing view of one receipt.
type ReceiptSummary struct {
	ID         string            `json:"id"`
	Seq        int64             `json:"seq"`
	TaskID     string            `json:"taskId"`
	Brand      string            `json:"brand"`
	Scope      string            `json:"scope"`
	GrantID    string            `json:"grantId"`
	Agent      Agent             `json:"agent"`
	Status     domain.TurnStatus `json:"status"`
	ExitCode   int               `json:"exitCode"`
	StartedAt  time.Time         `json:"startedAt"`
	EndedAt    time.Time         `json:"endedAt"`
	AnswerHash string            `json:"answerHash"`
}

// ReceiptDetail is one receipt with its signed claims and the verification result.
type ReceiptDetail struct {
	Receipt ReceiptSummary  `json:"receipt"`
	Claims  json.RawMessage `json:"claims"`
	JWS     string          `json:"jws"`
	Verify  VerifyResult    `json:"verify"`
}

// VerifyResult says whether a receipt's signature and chain check out.
type VerifyResult struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

// ReceiptFilter is the query of GET /api/receipts and /api/receipts/export. Zero values mean
// "any"; Agent matches issuer or subject as a substring. Limit is 1..MaxReceiptLimit for a page
// (DefaultReceiptLimit when not given) and 0 (everything) for an export unless given.
type ReceiptFilter struct {
	Agent  string
	Brand  string
	Status string
	From   time.Time
	To     time.Time
	Cursor string
	Limit  int
}

// Receipt page sizes.
const (
	DefaultReceiptLimit = 50
	MaxReceiptLimit     = 500
)

// ReceiptPage is one page of receipts, newest first; NextCursor is "" on the last page.
type ReceiptPage struct {
	Receipts   []ReceiptSummary `json:"receipts"`
	NextCursor string           `json:"nextCursor"`
	// Log is the receipts log; null before its first checkpoint.
	Log *ReceiptLog `json:"log"`
}

// ReceiptLog is the receipts log on the Receipts page: its newest checkpoint, whether that
// checkpoint holds (signed by the node's keys, over the root of the tree the node stores: not
// the full rebuild of `aether receipts verify`), and the agents that witness it
// (docs/wire.md, "The receipts log").
type ReceiptLog struct {
	Origin string       `json:"origin"`
	Size   int64        `json:"size"`
	Root   string       `json:"root"` // base64, as the checkpoint writes it
	Time   time.Time    `json:"time"` // when it was signed: its last receipt's time
	Verify VerifyResult `json:"verify"`
	// Witnesses is how many agents cosigned one of its checkpoints; Agents, per agent with
	// receipts, how many of them cosigned a checkpoint that holds its last receipt.
	Witnesses int              `json:"witnesses"`
	Agents    []AgentWitnesses `json:"agents"`
}

// AgentWitnesses is one agent's history and the witnesses of it.
type AgentWitnesses struct {
	Agent       Agent `json:"agent"`
	LastSeq     int64 `json:"lastSeq"`
	WitnessedBy int   `json:"witnessedBy"`
}

// Problem is one precise policy problem.
type Problem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// PolicyError says why policy.json does not load.
type PolicyError struct {
	Message  string    `json:"message"`
	Problems []Problem `json:"problems,omitempty"`
}

// BrandsView is the answer of GET /api/brands.
type BrandsView struct {
	PolicyPath string       `json:"policyPath"`
	Brands     []Brand      `json:"brands"`
	Error      *PolicyError `json:"error"`
}

// Status is the answer of GET /api/status.
type Status struct {
	Version      string           `json:"version"`
	Gateway      GatewayStatus    `json:"gateway"`
	Admin        AdminStatus      `json:"admin"`
	Brands       []Brand          `json:"brands"`
	Codex        CodexStatus      `json:"codex"`
	Confinement  Confinement      `json:"confinement"`
	Pending      int              `json:"pending"`
	Policy       PolicyStatus     `json:"policy"`
	LastReceipts []ReceiptSummary `json:"lastReceipts"`
	// Model, Download and Setup are the first run's: how Codex reaches its model (never the
	// key), the Get Codex download, and the checklist to "Ready for agents".
	Model        ModelStatus   `json:"model"`
	Download     CodexDownload `json:"download"`
	Setup        []SetupStep   `json:"setup"`
	Reachability Reachability  `json:"reachability"`
}

// Runtime is the answer of GET /v1/runtime: the node process's own counters, so that a soak
// run (make soak) or a monitor can see whether goroutines or the heap grow under load.
type Runtime struct {
	Goroutines int    `json:"goroutines"`
	HeapBytes  uint64 `json:"heapBytes"` // live and not yet swept heap objects
}

// GatewayStatus describes the PACT listener.
type GatewayStatus struct {
	Listen    string `json:"listen"`
	PublicURL string `json:"publicUrl"`
	Paused    bool   `json:"paused"`
	Running   bool   `json:"running"`
}

// AdminStatus describes the admin listener.
type AdminStatus struct {
	URL string `json:"url"`
}

// CodexStatus describes the coding agent found on the machine.
type CodexStatus struct {
	Found     bool   `json:"found"`
	Path      string `json:"path"`
	Version   string `json:"version"`
	VersionOK bool   `json:"versionOk"`
	LoggedIn  bool   `json:"loggedIn"`
	Error     string `json:"error"`
	// Pinned is the Codex release this Aether pins, was tested with and Get Codex installs;
	// PinNote, when the codex in use is another release, says so and what may differ.
	Pinned  string `json:"pinned"`
	PinNote string `json:"pinNote"`
	// Credential is how codex reaches its model: kind (api_key_env, api_key_login, chatgpt,
	// unreadable, none), what the Status page says of it, and why turns cannot use it.
	Credential struct {
		Kind    string `json:"kind"`
		Summary string `json:"summary"`
		Problem string `json:"problem"`
	} `json:"credential"`
}

// Confinement says whether each turn can be held to its brand's workspace; without it no
// turn runs. Text is the line the Status page, `aether status` and the log show.
type Confinement struct {
	Available bool   `json:"available"`
	Mechanism string `json:"mechanism"`
	Text      string `json:"text"`
}

// PolicyStatus names policy.json and, when it does not load, why.
type PolicyStatus struct {
	Path  string       `json:"path"`
	Error *PolicyError `json:"error"`
}

// Decisions and durations of POST /api/consent/{id}/decision.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"

	Duration1Day    = "1d"
	Duration30Days  = "30d"
	DurationForever = "forever"
)

// DecisionRequest is the body of POST /api/consent/{id}/decision, and a desktop notification's
// decision; Validate is its rule. An Allow names its Duration; a Deny may leave it "".
type DecisionRequest struct {
	UserCode string `json:"userCode"`
	Decision string `json:"decision"`
	Duration string `json:"duration"`
	// TokensPerDay is the grant's model tokens a UTC day; absent = the brand's, 0 = no limit
	// (docs/model-gateway.md).
	TokensPerDay *int64 `json:"tokensPerDay,omitempty"`
}

// DecisionResult is the 200 answer of a decision.
type DecisionResult struct {
	Status string `json:"status"` // OutcomeAllowed or OutcomeDenied
	Grant  *Grant `json:"grant,omitempty"`
}

// DenyIssuerRequest is the body of POST /api/consent/deny-issuer: an Agent's Site.
type DenyIssuerRequest struct {
	Site string `json:"site"`
}

// DenyIssuerResult is its 200 answer: how many pending requests were denied.
type DenyIssuerResult struct {
	Site   string `json:"site"`
	Denied int    `json:"denied"`
}

// Outcomes of a decision.
const (
	OutcomeAllowed = "allowed"
	OutcomeDenied  = "denied"
)

// Event names of GET /api/events.
const (
	EventConsent = "consent" // Data: ConsentEvent
	EventGrant   = "grant"   // Data: Grant
	EventReceipt = "receipt" // Data: ReceiptSummary
	EventPolicy  = "policy"  // Data: nil (sent as {})
)

// Event is one server-sent event; Data is marshalled to JSON.
type Event struct {
	Name string
	Data any
}

// ConsentEvent is the data of a consent event.
type ConsentEvent struct {
	Pending int             `json:"pending"`
	Request *ConsentRequest `json:"request,omitempty"`
	Kind    string          `json:"kind"` // ConsentAdded, ConsentDecided or ConsentExpired
}

// Kinds of a ConsentEvent.
const (
	ConsentAdded   = "added"
	ConsentDecided = "decided"
	ConsentExpired = "expired"
)

// Errors of the service, by kind: each transport maps a kind to its answer (admin's fail), and
// the message is what the owner reads.
var (
	ErrNotFound       = errors.New("not found")
	ErrInvalid        = errors.New("invalid request") // e.g. a bad cursor
	ErrCodeMismatch   = errors.New("user code does not match this request")
	ErrAlreadyDecided = errors.New("already decided")
	ErrExpired        = errors.New("expired")
)

// FieldError is a validation message next to one field (a Brand JSON key).
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// FieldErrors is returned by PutBrand when the brand is not valid, with the fields at fault.
type FieldErrors struct {
	Message string // "" → "the brand is not valid"
	Fields  []FieldError
}

func (e *FieldErrors) Error() string {
	msg := e.Message
	if msg == "" {
		msg = "the brand is not valid"
	}
	parts := make([]string, 0, len(e.Fields))
	for _, f := range e.Fields {
		parts = append(parts, f.Field+": "+f.Message)
	}
	if len(parts) == 0 {
		return msg
	}
	return msg + " (" + strings.Join(parts, "; ") + ")"
}
