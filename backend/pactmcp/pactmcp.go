// Package pactmcp is `aether mcp`: an MCP server (the official Go SDK, over stdio) that puts
// PACT in the assistants people use (docs/assistants.md). Its tools call other nodes' brands as
// one of the owner's agents: the identity comes from the owner's own node (the node API,
// backend/issuer), the flow is backend/agent's Run (the device flow, the turn, the receipt
// checked against the node's log, with the delegation tokens and held checkpoints `aether
// agent` keeps), and each receipt goes home to the owner's node (POST /v1/received).
package pactmcp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aether/aether/backend/agent"
	"github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/version"
)

// Node is what the server asks of the owner's node: *admin.Client.
type Node interface {
	MintIdentity(ctx context.Context, name, audience string) (owner.IdentityToken, error)
	KeepReceived(ctx context.Context, req owner.ReceivedRequest) (owner.ReceivedReceipt, error)
	Received(ctx context.Context) (owner.ReceivedList, error)
}

// Defaults of Config.
const (
	// DefaultWait is how long one pact_ask call waits before it answers "still waiting" with a
	// handle: below the minute after which many assistants give up on a tool call.
	DefaultWait = 45 * time.Second
	// DefaultAskLimit is how long an ask may take in all, approval included (docs/threats.md Q2).
	DefaultAskLimit = 30 * time.Minute
	// maxAnswerRunes caps the answer handed to the assistant; the receipt signs the whole.
	maxAnswerRunes = 64 << 10
	// maxAsks bounds the asks one server keeps (running, or finished and not yet collected).
	maxAsks = 32
)

// Config configures the server.
type Config struct {
	Agent string // the owner's agent this server speaks as (its name on the owner's node)
	Node  Node
	// Dir is the agent folder shared with `aether agent`: saved delegation tokens and the
	// checkpoints held of each node's log. Default agent.DefaultDir().
	Dir string
	// HTTPClient carries the calls to other nodes (nil: agent's default).
	HTTPClient *http.Client
	Wait       time.Duration // DefaultWait when 0
	AskLimit   time.Duration // DefaultAskLimit when 0
	Log        io.Writer     // the server's own log (stderr); nil discards
}

// Server is the MCP server with its asks in flight.
type Server struct {
	cfg Config
	sdk *sdk.Server

	mu   sync.Mutex
	asks map[string]*ask
}

// New builds the server and its tools.
func New(cfg Config) (*Server, error) {
	if cfg.Agent == "" || cfg.Node == nil {
		return nil, fmt.Errorf("pactmcp: an agent name and the node are required")
	}
	if cfg.Dir == "" {
		d, err := agent.DefaultDir()
		if err != nil {
			return nil, err
		}
		cfg.Dir = d
	}
	if cfg.Wait <= 0 {
		cfg.Wait = DefaultWait
	}
	if cfg.AskLimit <= 0 {
		cfg.AskLimit = DefaultAskLimit
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	s := &Server{cfg: cfg, asks: map[string]*ask{}}
	s.sdk = sdk.NewServer(&sdk.Implementation{Name: "aether", Title: "Aether (PACT)", Version: version.String()}, nil)
	s.addTools()
	return s, nil
}

// Run serves MCP on t (sdk.StdioTransport for `aether mcp`) until the client goes away.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error { return s.sdk.Run(ctx, t) }
