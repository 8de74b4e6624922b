package agent

import (
	"path/filepath"
	"strings"
	"unicode"

	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/receipts"
)

// An agent run with Options.Witness cosigns the checkpoint it holds once the answer's log check
// passed, and sends that cosignature with its next call to the node, in the message metadata
// (docs/wire.md, "Witnesses"). The node stores it; it requires none.

// witnessKeyFile is the agent's witness key (Ed25519, PEM, 0600) in its folder.
const witnessKeyFile = "witness-key.pem"

// metaCosignature is the message metadata the cosignature travels in (docs/pact-extension.md).
const metaCosignature = "aether.cosignature"

// witnessName is the witness's signed-note key name: the agent's identity, issuer host and
// subject, with what a key name may not hold (spaces, "+") as "_".
func witnessName(who Who) string {
	host := strings.TrimPrefix(strings.TrimPrefix(who.Issuer, "https://"), "http://")
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || r == '+' {
			return '_'
		}
		return r
	}, host+"#"+who.Subject)
}

// cosigner is the agent's witness, its key made on first use.
func (r *run) cosigner() (*keys.Cosigner, error) {
	k, err := keys.LoadOrCreate(filepath.Join(r.o.Dir, witnessKeyFile))
	if err != nil {
		return nil, err
	}
	return k.Cosigner(witnessName(r.who), r.o.Now), nil
}

// cosign cosigns the checkpoint held for the node and keeps the cosignature for the next call.
func (lc *logCheck) cosign(c *keys.Cosigner) error {
	st, err := lc.load()
	if err != nil {
		return err
	}
	n, err := lc.held(st)
	if err != nil {
		return err
	}
	cosigned, err := receipts.Cosign([]byte(n.Checkpoint), c)
	if err != nil {
		return err
	}
	n.Cosigned, n.Witness = string(cosigned), c.VerifierKey()
	return lc.save(st)
}

// cosignature is the metadata of the cosignature kept for the node, nil if none.
func (lc *logCheck) cosignature() (map[string]any, error) {
	st, err := lc.load()
	if err != nil {
		return nil, err
	}
	n := st.Nodes[lc.node]
	if n == nil || n.Cosigned == "" {
		return nil, nil
	}
	return map[string]any{metaCosignature: map[string]any{"checkpoint": n.Cosigned, "witness": n.Witness}}, nil
}
