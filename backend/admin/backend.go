package admin

import (
	"context"
	"io"

	"github.com/aether/aether/backend/owner"
)

// Backend is what admin serves: *owner.Service, or a test's fake. Every method is called only
// for a signed-in owner or a caller with the admin token. Its errors are owner's kinds, which
// fail maps to statuses.
type Backend interface {
	Status(ctx context.Context) (owner.Status, error)
	Pending(ctx context.Context) ([]owner.ConsentRequest, error)
	LookupCode(ctx context.Context, userCode string) (owner.CodeLookup, error)
	Decide(ctx context.Context, id string, req owner.DecisionRequest) (owner.DecisionResult, error)
	DenyIssuer(ctx context.Context, req owner.DenyIssuerRequest) (owner.DenyIssuerResult, error)
	Grants(ctx context.Context) ([]owner.Grant, error)
	Revoke(ctx context.Context, id string) (owner.Grant, error)
	Receipts(ctx context.Context, f owner.ReceiptFilter) (owner.ReceiptPage, error)
	Receipt(ctx context.Context, id string) (owner.ReceiptDetail, error)
	ExportReceipts(ctx context.Context, f owner.ReceiptFilter, w io.Writer) error
	Brands(ctx context.Context) (owner.BrandsView, error)
	PutBrand(ctx context.Context, id string, b owner.Brand) ([]owner.Brand, error)
	DeleteBrand(ctx context.Context, id string) ([]owner.Brand, error)
	Events(ctx context.Context) <-chan owner.Event
	SetPaused(paused bool) error
	Runtime() owner.Runtime
	// Codex and its model (docs/admin-api.md): never the key, only whether one is set.
	GetCodex() (owner.CodexDownload, error)
	CancelCodex() (owner.CodexDownload, error)
	CodexDownload() (owner.CodexDownload, error)
	UseCodex(path string) (owner.ModelStatus, error)
	Model() (owner.ModelStatus, error)
	SetModel(req owner.ModelRequest) (owner.ModelStatus, error)
	CheckModel(ctx context.Context) (owner.ModelCheck, error)
	SetFunnel(ctx context.Context, on bool) (owner.Reachability, error)
	UseFunnelURL(ctx context.Context) (owner.Reachability, error)
	// The owner's agents (the node is their issuer) and what they received.
	MyAgents() (owner.MyAgents, error)
	AddAgent(req owner.AgentRequest) (owner.MyAgent, error)
	SetAgent(name string, req owner.AgentSwitch) (owner.MyAgent, error)
	MintIdentity(name string, req owner.MintRequest) (owner.IdentityToken, error)
	KeepReceived(ctx context.Context, req owner.ReceivedRequest) (owner.ReceivedReceipt, error)
	Received(ctx context.Context) (owner.ReceivedList, error)
	ExportReceived(ctx context.Context, w io.Writer) error
	SetTailnet(ctx context.Context, on bool) (owner.Reachability, error)
	CheckReachability(ctx context.Context) (owner.Reachability, error)
}

var _ Backend = (*owner.Service)(nil)
