package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/receipts"
)

// metaCosignature is the message metadata an agent sends its cosignature of a checkpoint of
// the receipts log in (docs/pact-extension.md, docs/wire.md "Witnesses"): an object with
// "checkpoint" (the cosigned checkpoint, a signed note) and "witness" (the witness's vkey).
const metaCosignature = "aether.cosignature"

// witness stores the cosignature msg carries, if any, before its turn runs. A bad one refuses
// the call (INVALID_PARAMS, docs/threats.md L6): the agent meant to vouch for the log and
// must hear that it did not. Witnessing is optional: a message without one goes through.
func (g *Gateway) witness(ctx context.Context, agent domain.Agent, msg *a2a.Message) error {
	raw, ok := msg.Metadata[metaCosignature]
	if !ok {
		return nil
	}
	m, _ := raw.(map[string]any)
	cp, _ := m["checkpoint"].(string)
	vkey, _ := m["witness"].(string)
	if cp == "" || vkey == "" {
		return a2a.NewError(a2a.ErrInvalidParams, metaCosignature+" must be an object with the strings checkpoint and witness")
	}
	err := g.cfg.Ledger.Witness(ctx, agent, []byte(cp), vkey)
	if errors.Is(err, receipts.ErrCosignature) {
		return a2a.NewError(a2a.ErrInvalidParams, err.Error())
	}
	if err != nil {
		return fmt.Errorf("store the cosignature: %w", err)
	}
	return nil
}
