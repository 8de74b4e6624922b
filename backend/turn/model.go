package turn

import (
	"context"
	"errors"
	"time"

	"github.com/aether/aether/backend/codex"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/receipts"
)

// ModelTurn is what a turn's pass to the node's model gateway is bound to (docs/model-gateway.md).
type ModelTurn struct {
	Turn         string
	Grant        domain.GrantID
	Brand        domain.BrandID
	Agent        domain.Agent
	Model        string // the brand's model; "" = the owner's
	TokensPerDay int64  // the grant's budget (set at approval, else the brand's); 0 = no limit
	Deadline     time.Time
}

// ModelPass is a turn's one-time way to the model: Codex gets Provider's token, the owner's
// key stays with the gateway.
type ModelPass struct {
	Provider codex.Provider
	// Ended is closed when the gateway ends the pass itself (the budget crossed, the upstream
	// failed); the turn then ends at once.
	Ended <-chan struct{}
	// Close kills the token and returns the usage the upstream reported, and why the gateway
	// ended the pass (nil if it did not).
	Close func() (domain.Usage, error)
}

// errModelEnded: the gateway ended the turn's pass; the pass's error says why.
var errModelEnded = errors.New("the model gateway ended the turn")

// openModel opens the turn's pass under its grant's budget; nil without a gateway
// (Config.Models). A refusal (the budget used up, the upstream unusable) is the turn's
// reason: Codex does not start.
func (s *Service) openModel(ctx context.Context, req Request, turn receipts.Turn, deadline time.Time) (*ModelPass, error) {
	if s.cfg.Models == nil {
		return nil, nil
	}
	budget, err := s.cfg.Consent.TokensPerDay(ctx, turn.GrantID, req.Brand)
	if err != nil {
		return nil, err
	}
	return s.cfg.Models(ModelTurn{Turn: turn.ID, Grant: turn.GrantID, Brand: req.Brand.ID, Agent: turn.Agent,
		Model: req.Brand.Model, TokensPerDay: budget, Deadline: deadline})
}

// watchModel cancels ctx when the gateway ends the pass; stop ends the watch.
func watchModel(pass *ModelPass, cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	go func() {
		select {
		case <-pass.Ended:
			cancel(errModelEnded)
		case <-done:
		}
	}()
	return func() { close(done) }
}

// closeModel kills the pass's token and makes the gateway's count the turn's usage; a pass the
// gateway ended makes the turn fail with the gateway's reason.
func closeModel(pass *ModelPass, res *codex.Result) {
	usage, why := pass.Close()
	res.Usage = usage
	if why != nil {
		res.Status, res.Reason, res.Answer = codex.StatusFailed, why.Error(), ""
	}
}
