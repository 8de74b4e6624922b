package codexsetup

import (
	"context"
	"errors"
	"time"

	"github.com/aether/aether/backend/codex"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/modelgw"
	"github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/store"
	"github.com/aether/aether/backend/turn"
)

// StartModels starts the node's model gateway: every turn, and Check, reach the model through
// it with a one-time token, and the runner refuses a turn that comes without one, so the
// owner's key is never handed to Codex (docs/model-gateway.md).
//
// use keeps each grant's tokens a day in pact.sqlite, so a restart gives no budget back.
func (s *Setup) StartModels(use *store.DB) error {
	if use == nil {
		return errors.New("codexsetup: the model gateway needs the store for the grants' budgets")
	}
	g, err := modelgw.Start(modelgw.Config{Models: s.cfg.Models, SignIn: s.signIn, Logger: s.log, Ledger: use})
	if err != nil {
		return err
	}
	s.models = g
	s.cfg.Runner.RequireProvider = true
	return nil
}

// signIn is modelgw.Config.SignIn: Codex's own sign-in, which the gateway reads as it forwards
// to OpenAI without a key from the window.
func (s *Setup) signIn() (key, problem string) {
	cred, key := s.cfg.Runner.SignIn()
	return key, cred.Problem
}

// OpenPass is turn.Config.Models: a turn's pass, bound to the turn, its grant, agent and brand.
func (s *Setup) OpenPass(t turn.ModelTurn) (*turn.ModelPass, error) {
	p, err := s.models.Open(modelgw.Binding{Turn: t.Turn, Grant: string(t.Grant), Brand: string(t.Brand), Agent: t.Agent.Key(),
		Model: t.Model, Budget: t.TokensPerDay}, t.Deadline)
	if err != nil {
		return nil, err
	}
	return &turn.ModelPass{
		Provider: codex.Provider{BaseURL: p.BaseURL, Token: p.Token, Model: p.Model},
		Ended:    p.Ended(),
		Close:    func() (domain.Usage, error) { return p.Close(), p.Err() },
	}, nil
}

// TokensToday is the model tokens a grant's turns used today (UTC), for the Sharing page.
func (s *Setup) TokensToday(grant string) int64 {
	if s.models == nil {
		return 0
	}
	n, err := s.models.Used(grant)
	if err != nil {
		s.log.Warn("cannot show a grant's model use", "grant", grant, "err", err)
	}
	return n
}

// probe is Check's probe turn: through the gateway, under a pass of its own, once it runs.
func (s *Setup) probe(ctx context.Context) (codex.Result, error) {
	if s.models == nil {
		return s.cfg.Runner.Probe(ctx, s.cfg.ProbeDir)
	}
	p, err := s.models.Open(modelgw.Binding{Turn: "check"}, time.Now().Add(codex.ProbeTimeout))
	if err != nil {
		return codex.Result{Status: codex.StatusFailed, Reason: err.Error()}, err
	}
	res, err := s.cfg.Runner.ProbeVia(ctx, s.cfg.ProbeDir, &codex.Provider{BaseURL: p.BaseURL, Token: p.Token, Model: p.Model})
	p.Close()
	if why := p.OwnerErr(); why != nil { // Check is the owner's: the server's own words
		res.Status, res.Reason = codex.StatusFailed, why.Error()
	}
	return res, err
}

// gateway is the model gateway as the Status page shows it; nil before it started.
func (s *Setup) gateway() *owner.ModelGateway {
	if s.models == nil {
		return nil
	}
	st := s.models.Status()
	g := &owner.ModelGateway{Upstream: st.Upstream, KeyPresent: st.KeyPresent, LastError: st.LastError, NoUsage: st.NoUsage}
	if !st.LastErrorAt.IsZero() {
		at := st.LastErrorAt.UTC()
		g.LastErrorAt = &at
	}
	return g
}
