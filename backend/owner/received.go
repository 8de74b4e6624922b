package owner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/receipts"
	"github.com/aether/aether/backend/store"
	"github.com/aether/aether/backend/work"
)

// Receipts come home (docs/assistants.md): what the owner's agents receive from other nodes is
// sent to the node by `aether mcp`, checked on arrival (receipts.CheckReceived) and kept.

// ReceivedStore keeps received receipts: the node's *store.DB.
type ReceivedStore interface {
	KeepReceived(ctx context.Context, r store.Received) (int64, error)
	ReceivedReceipts(ctx context.Context, limit int) ([]store.Received, error)
}

// ReceivedRequest is POST /v1/received: a receipt an agent of the owner received, with the
// node JWKS and tlog-proof it came with, and what the agent found of the node's log.
type ReceivedRequest struct {
	Agent         string          `json:"agent"` // the owner's agent's name
	JWS           string          `json:"jws"`
	Proof         string          `json:"proof"`
	JWKS          json.RawMessage `json:"jwks"`
	LogConsistent bool            `json:"logConsistent"`
	LogProblem    string          `json:"logProblem,omitempty"`
}

// ReceivedReceipt is one row of the Receipts page's Received list.
type ReceivedReceipt struct {
	ID            int64     `json:"id"`
	Node          string    `json:"node"`
	RID           string    `json:"rid"`
	Agent         string    `json:"agent"`
	Brand         string    `json:"brand"`
	Task          string    `json:"task"`
	Status        string    `json:"status"`
	Verified      bool      `json:"verified"`
	LogConsistent bool      `json:"logConsistent"`
	Problem       string    `json:"problem"`
	Ran           string    `json:"ran"` // what ran, in words, from the receipt's signed work
	ReceivedAt    time.Time `json:"receivedAt"`
}

// ReceivedList is GET /api/receipts/received.
type ReceivedList struct {
	Receipts []ReceivedReceipt `json:"receipts"`
}

// maxReceivedShown is how many received receipts the page lists.
const maxReceivedShown = 200

// KeepReceived checks a received receipt and keeps it. One whose signature does not verify
// with the JWKS it came with, or that is not for the owner's agent, is refused (ErrInvalid): it
// says nothing anyone could hold its node to. One whose log proof fails, or whose node's log
// the agent caught contradicting itself, is kept, marked, as the evidence it is.
func (s *Service) KeepReceived(ctx context.Context, req ReceivedRequest) (ReceivedReceipt, error) {
	is, err := s.issuer()
	if err != nil {
		return ReceivedReceipt{}, err
	}
	if s.cfg.Received == nil {
		return ReceivedReceipt{}, fmt.Errorf("%w: this node keeps no received receipts", ErrInvalid)
	}
	me := domain.Agent{Issuer: is.URL(), Subject: req.Agent}
	c, _, err := receipts.CheckReceived(req.JWS, req.Proof, req.JWKS, me)
	if c == nil || (err != nil && c.Agent != me) {
		return ReceivedReceipt{}, fmt.Errorf("%w: the receipt is refused: %v", ErrInvalid, err)
	}
	r := store.Received{Node: c.Issuer, RID: c.RID, AgentIssuer: me.Issuer, Agent: req.Agent, Brand: c.Brand, Task: c.Task, Status: string(c.Status),
		JWS: req.JWS, Proof: req.Proof, JWKS: string(req.JWKS), Verified: err == nil, LogConsistent: req.LogConsistent && err == nil,
		ReceivedAt: time.Now().UTC()}
	var problems []string
	if err != nil {
		problems = append(problems, err.Error())
	}
	if req.LogProblem != "" {
		problems = append(problems, req.LogProblem)
	}
	r.Problem = strings.Join(problems, "; ")
	if r.ID, err = s.cfg.Received.KeepReceived(ctx, r); err != nil {
		return ReceivedReceipt{}, err
	}
	return receivedDTO(r, c), nil
}

// Received lists the received receipts, newest first.
func (s *Service) Received(ctx context.Context) (ReceivedList, error) {
	out := ReceivedList{Receipts: []ReceivedReceipt{}}
	if s.cfg.Received == nil {
		return out, nil
	}
	rs, err := s.cfg.Received.ReceivedReceipts(ctx, maxReceivedShown)
	if err != nil {
		return out, err
	}
	for _, r := range rs {
		c, _ := receipts.VerifyOne(r.JWS, historyOf(r.JWKS))
		out.Receipts = append(out.Receipts, receivedDTO(r, c))
	}
	return out, nil
}

// ExportReceived writes every received receipt as JSON Lines, oldest first: each with the JWS,
// the tlog-proof and the JWKS it was checked with, so anyone can check it again.
func (s *Service) ExportReceived(ctx context.Context, w io.Writer) error {
	if s.cfg.Received == nil {
		return nil
	}
	rs, err := s.cfg.Received.ReceivedReceipts(ctx, 0)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	for i := len(rs) - 1; i >= 0; i-- {
		r := rs[i]
		if err := enc.Encode(ReceivedExport{Node: r.Node, Agent: r.Agent, JWS: r.JWS, Proof: r.Proof, JWKS: json.RawMessage(r.JWKS), ReceivedAt: r.ReceivedAt}); err != nil {
			return err
		}
	}
	return nil
}

// ReceivedExport is one line of the Received export.
type ReceivedExport struct {
	Node       string          `json:"node"`
	Agent      string          `json:"agent"`
	JWS        string          `json:"jws"`
	Proof      string          `json:"proof"`
	JWKS       json.RawMessage `json:"jwks"`
	ReceivedAt time.Time       `json:"receivedAt"`
}

func receivedDTO(r store.Received, c *receipts.Claims) ReceivedReceipt {
	d := ReceivedReceipt{ID: r.ID, Node: r.Node, RID: r.RID, Agent: r.Agent, Brand: r.Brand, Task: r.Task, Status: r.Status,
		Verified: r.Verified, LogConsistent: r.LogConsistent, Problem: r.Problem, ReceivedAt: r.ReceivedAt}
	if c != nil {
		d.Ran = Ran(c.Work)
	}
	return d
}

// Ran says what ran for a receipt, from its signed work: Codex, its sandbox and the node's
// confinement, and how many commands ran and files changed.
func Ran(w *work.Work) string {
	if w == nil {
		return "not stated (a receipt of version 1)"
	}
	s := "Codex " + w.Codex
	if w.Sandbox != "" {
		s += ", " + w.Sandbox
	}
	if w.Confinement != "" {
		s += ", in " + w.Confinement
	}
	return fmt.Sprintf("%s: %d command(s), %d file(s) changed", s, w.Commands.Count, w.Files.Count)
}

// historyOf parses a stored JWKS; one that no longer parses verifies nothing.
func historyOf(jwks string) keys.History {
	h, _ := keys.ParseHistory([]byte(jwks))
	return h
}
