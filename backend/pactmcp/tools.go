package pactmcp

import (
	"context"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aether/aether/backend/agent"
	"github.com/aether/aether/backend/owner"
)

// DescribeIn is pact_describe's input.
type DescribeIn struct {
	URL   string `json:"url" jsonschema:"the brand's agent card URL (https://node.example/a2a/review/.well-known/agent-card.json), or the node's publicUrl"`
	Brand string `json:"brand,omitempty" jsonschema:"the brand id, when url is a publicUrl serving several brands"`
}

// Description is a brand's card as pact_describe tells it.
type Description struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Brand       string `json:"brand"`
	Scope       string `json:"scope" jsonschema:"what the node's owner is asked to approve"`
	AccessMode  string `json:"accessMode" jsonschema:"read_only or read_write: what a turn may do to the owner's workspace"`
	Node        string `json:"node" jsonschema:"the node's publicUrl"`
	CardURL     string `json:"cardUrl"`
	Signature   string `json:"signature" jsonschema:"how the card's signature was checked"`
}

// AskIn is pact_ask's input.
type AskIn struct {
	URL     string `json:"url,omitempty" jsonschema:"the brand's agent card URL, or the node's publicUrl (with brand); not needed with handle"`
	Brand   string `json:"brand,omitempty" jsonschema:"the brand id, when url is a publicUrl serving several brands"`
	Message string `json:"message,omitempty" jsonschema:"what to ask the brand; not needed with handle"`
	Task    string `json:"task,omitempty" jsonschema:"continue this task (its id from an earlier answer) instead of starting a new one"`
	Handle  string `json:"handle,omitempty" jsonschema:"the handle of an earlier pact_ask that answered still waiting: go on waiting for it"`
}

// Answer is what pact_ask returns: the answer with its checked receipt, or still waiting.
type Answer struct {
	State   string `json:"state" jsonschema:"answered, waiting (call again with handle), or failed"`
	Handle  string `json:"handle,omitempty"`
	Node    string `json:"node,omitempty"`
	Brand   string `json:"brand,omitempty"`
	Task    string `json:"task,omitempty"`
	Answer  string `json:"answer,omitempty"`
	Waiting string `json:"waiting,omitempty" jsonschema:"what the ask waits for"`
	Code    string `json:"code,omitempty" jsonschema:"the user code the node's owner approves"`
	Receipt *Proof `json:"receipt,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Proof is what was checked of an answer's receipt.
type Proof struct {
	ID            string `json:"id"`
	Status        string `json:"status"`
	Signature     bool   `json:"signatureVerified"`
	LogIncluded   bool   `json:"logIncluded"`
	LogConsistent bool   `json:"logConsistent"`
	Checkpoint    string `json:"checkpoint,omitempty" jsonschema:"the node's log checkpoint the receipt is in: origin and size"`
	Ran           string `json:"ran" jsonschema:"what ran for the turn, as the receipt signs it"`
	KeptAtHome    bool   `json:"keptAtHome" jsonschema:"the owner's node keeps it under Receipts, Received"`
	Problem       string `json:"problem,omitempty"`
}

// ReceiptsIn is pact_receipts' input.
type ReceiptsIn struct {
	Filter string `json:"filter,omitempty" jsonschema:"only receipts whose node, brand, agent, status or task contain this text"`
}

// ReceiptsOut is pact_receipts' answer.
type ReceiptsOut struct {
	Receipts []owner.ReceivedReceipt `json:"receipts"`
}

func (s *Server) addTools() {
	sdk.AddTool(s.sdk, &sdk.Tool{Name: "pact_describe", Title: "Describe a PACT brand",
		Description: "Reads a brand's agent card from an Aether (PACT) node and checks its signature with the node's keys: " +
			"its name, what it does, the scope its owner is asked to approve, whether it may change the owner's files, and the node."},
		s.describe)
	sdk.AddTool(s.sdk, &sdk.Tool{Name: "pact_ask", Title: "Ask a PACT brand",
		Description: "Asks a brand on another person's Aether (PACT) node, as this user's agent. The first time, the node's owner must approve: " +
			"the tool reports the code they approve and waits. If it answers state \"waiting\", call it again with the handle it gave (and nothing else) to go on waiting. " +
			"The answer comes with its signed receipt, checked: signature, inclusion in the node's public log, and that log's consistency."},
		s.ask)
	sdk.AddTool(s.sdk, &sdk.Tool{Name: "pact_receipts", Title: "Receipts this user's agents hold",
		Description: "Lists the signed receipts this user's agents received from other nodes' brands, newest first, as the user's own Aether node keeps them."},
		s.receipts)
}

func (s *Server) describe(ctx context.Context, _ *sdk.CallToolRequest, in DescribeIn) (*sdk.CallToolResult, Description, error) {
	c := &agent.Client{HTTP: s.cfg.HTTPClient}
	cardURL, err := agent.CardURL(in.URL, in.Brand)
	if err != nil {
		return nil, Description{}, err
	}
	card, err := c.FetchCard(ctx, cardURL)
	if err != nil {
		return nil, Description{}, err
	}
	keysURL, err := card.KeysURL()
	if err != nil {
		return nil, Description{}, err
	}
	h, err := c.NodeKeys(ctx, keysURL)
	if err != nil {
		return nil, Description{}, err
	}
	if err := card.VerifySignature(h.Set); err != nil {
		return nil, Description{}, err
	}
	d := Description{Name: card.Name, Description: card.Description, Brand: card.Brand, Scope: card.Scope, Node: card.PublicURL,
		CardURL: card.URL, AccessMode: accessMode(card), Signature: "verified with the node JWKS at " + keysURL}
	return nil, d, nil
}

// accessMode is the brand's skill's second tag (docs/wire.md: the capability, then the access mode).
func accessMode(card *agent.Card) string {
	for _, sk := range card.Skills {
		if (sk.ID == card.Brand || len(card.Skills) == 1) && len(sk.Tags) >= 2 {
			return sk.Tags[1]
		}
	}
	return ""
}

func (s *Server) receipts(ctx context.Context, _ *sdk.CallToolRequest, in ReceiptsIn) (*sdk.CallToolResult, ReceiptsOut, error) {
	l, err := s.cfg.Node.Received(ctx)
	if err != nil {
		return nil, ReceiptsOut{}, err
	}
	out := ReceiptsOut{Receipts: []owner.ReceivedReceipt{}}
	f := strings.ToLower(in.Filter)
	for _, r := range l.Receipts {
		if f == "" || strings.Contains(strings.ToLower(strings.Join([]string{r.Node, r.Brand, r.Agent, r.Status, r.Task}, " ")), f) {
			out.Receipts = append(out.Receipts, r)
		}
	}
	return nil, out, nil
}

func (s *Server) ask(ctx context.Context, req *sdk.CallToolRequest, in AskIn) (*sdk.CallToolResult, Answer, error) {
	a, err := s.askFor(in)
	if err != nil {
		return nil, Answer{}, err
	}
	ans := a.wait(ctx, s.cfg.Wait, notifier(req))
	if ans.State != "waiting" {
		s.forget(a.handle)
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: ans.text()}}, IsError: ans.State == "failed"}, ans, nil
}

// text is the answer in words, for assistants that read the content rather than the structure.
func (a Answer) text() string {
	switch a.State {
	case "waiting":
		return fmt.Sprintf("Still waiting: %s. Call pact_ask again with handle %q to go on waiting.", a.Waiting, a.Handle)
	case "failed":
		return "The ask failed: " + a.Error
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n— answered by brand %s on %s (task %s)", a.Answer, a.Brand, a.Node, a.Task)
	if r := a.Receipt; r != nil {
		fmt.Fprintf(&b, "; receipt %s (%s): signature verified, in the node's log %s, log consistent: %v; ran: %s", r.ID, r.Status, r.Checkpoint, r.LogConsistent, r.Ran)
		if r.Problem != "" {
			fmt.Fprintf(&b, "; PROBLEM: %s", r.Problem)
		}
	}
	return b.String()
}
