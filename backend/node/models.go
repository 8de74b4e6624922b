package node

import (
	"context"
	"time"

	"github.com/aether/aether/backend/codex"
	"github.com/aether/aether/backend/datadir"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/modelgw"
	"github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/turn"
)

// turnTag, set in the node's environment, is passed to every turn's Codex: a value that is no
// secret by which a process of the node's turns can be found from outside (the kill tests do).
// The key is no such mark any more: Codex gets a one-time token in its place.
const turnTag = "AETHER_TURN_TAG"

// startModels starts the node's model gateway: every turn, and the Status page's Check, reach
// the model through it with a one-time token, and the runner refuses a turn that comes
// without one, so the owner's key is never handed to Codex (docs/model-gateway.md).
func (n *Node) startModels() error {
	g, err := modelgw.Start(modelgw.Config{Upstream: n.modelUpstream, Logger: n.log})
	if err != nil {
		return err
	}
	n.models = g
	n.runner.RequireProvider = true
	return nil
}

// modelUpstream is the one upstream: the server the owner named in the window (else OpenAI),
// the model named there, and the credential the runner would have handed Codex before.
func (n *Node) modelUpstream() (modelgw.Upstream, error) {
	up, err := n.runner.Upstream()
	if err != nil {
		return modelgw.Upstream{}, err
	}
	cred, key := n.runner.Credential()
	return modelgw.Upstream{BaseURL: up.BaseURL, Key: key, Model: up.Model, Problem: cred.Problem}, nil
}

// openModel is turn.Config.Models: a turn's pass, bound to the turn, its grant, agent and brand.
func (n *Node) openModel(t turn.ModelTurn) (*turn.ModelPass, error) {
	p, err := n.models.Open(modelgw.Binding{Turn: t.Turn, Grant: string(t.Grant), Brand: string(t.Brand), Agent: t.Agent.Key(),
		Model: t.Model, Budget: t.TokensPerDay}, t.Deadline)
	if err != nil {
		return nil, err
	}
	return &turn.ModelPass{
		Provider: codex.Provider{BaseURL: p.BaseURL, Token: p.Token, Model: p.Model},
		Ended:    p.Ended(),
		Close: func() (domain.Usage, error) {
			u := p.Close()
			return domain.Usage{InputTokens: u.InputTokens, CachedInputTokens: u.CachedInputTokens, OutputTokens: u.OutputTokens}, p.Err()
		},
	}, nil
}

// probeModel is the Status page's Check through the gateway, under a pass of its own.
func (n *Node) probeModel(ctx context.Context) (codex.Result, error) {
	p, err := n.models.Open(modelgw.Binding{Turn: "check"}, time.Now().Add(codex.ProbeTimeout))
	if err != nil {
		return codex.Result{Status: codex.StatusFailed, Reason: err.Error()}, err
	}
	res, err := n.runner.ProbeVia(ctx, n.path(datadir.CodexDir), &codex.Provider{BaseURL: p.BaseURL, Token: p.Token, Model: p.Model})
	p.Close()
	if why := p.Err(); why != nil {
		res.Status, res.Reason = codex.StatusFailed, why.Error()
	}
	return res, err
}

// modelStatus is the gateway as the Status page shows it; nil before it started.
func (n *Node) modelStatus() *owner.ModelGateway {
	if n.models == nil {
		return nil
	}
	st := n.models.Status()
	g := &owner.ModelGateway{Upstream: st.Upstream, KeyPresent: st.KeyPresent, LastError: st.LastError}
	if !st.LastErrorAt.IsZero() {
		at := st.LastErrorAt.UTC()
		g.LastErrorAt = &at
	}
	return g
}
