package receipts

import (
	"fmt"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/keys"
)

// CheckReceived checks a receipt one of the owner's agents received from another node
// (docs/assistants.md, "Receipts come home"), with what came with it: the node JWKS and the
// tlog-proof. The signature (VerifyOne), that the receipt names agent, and that the proof puts
// it in a checkpoint the node's keys signed (VerifyProof). The node arrival check and
// `aether receipts verify` are this one function.
func CheckReceived(jws, proof string, jwks []byte, agent domain.Agent) (*Claims, Checkpoint, error) {
	h, err := keys.ParseHistory(jwks)
	if err != nil {
		return nil, Checkpoint{}, fmt.Errorf("the node JWKS that came with it: %w", err)
	}
	c, err := VerifyOne(jws, h)
	if err != nil {
		return nil, Checkpoint{}, err
	}
	if c.Agent != agent {
		return c, Checkpoint{}, fmt.Errorf("receipt %s is for the agent %s at %s, not %s at %s", c.RID, c.Agent.Subject, c.Agent.Issuer, agent.Subject, agent.Issuer)
	}
	cp, err := VerifyProof(proof, jws, c.Seq, h.Set)
	if err != nil {
		return c, Checkpoint{}, err
	}
	return c, cp, nil
}
