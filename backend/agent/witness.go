package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

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
// subject, with what a key name may not hold (spaces, "+") as "_"; one over the
// keys.MaxCosignerName a node takes is cut and ends with "~" and 12 hex digits of its SHA-256.
func witnessName(who Who) string {
	host := strings.TrimPrefix(strings.TrimPrefix(who.Issuer, "https://"), "http://")
	name := strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || r == '+' {
			return '_'
		}
		return r
	}, host+"#"+who.Subject)
	if len(name) <= keys.MaxCosignerName {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	cut := keys.MaxCosignerName - 13
	for !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut] + "~" + hex.EncodeToString(sum[:6])
}

// cosigner is the agent's witness, its key made on first use.
func (r *run) cosigner() (*keys.Cosigner, error) {
	k, err := keys.LoadOrCreate(filepath.Join(r.o.Dir, witnessKeyFile))
	if err != nil {
		return nil, err
	}
	return k.Cosigner(witnessName(r.who), r.o.Now), nil
}

// Cosign cosigns the checkpoint held for the node with the witness c and keeps the
// cosignature for the next call (Cosignature).
func (lc *LogCheck) Cosign(c *keys.Cosigner) error {
	return lc.update(func(st *LogState) error {
		l, err := lc.find(st)
		if err != nil {
			return err
		}
		if l == nil {
			return errors.New("no checkpoint of the node's log is held to cosign")
		}
		cosigned, err := receipts.Cosign([]byte(l.Checkpoint), c)
		if err != nil {
			return err
		}
		l.Cosigned, l.Witness = string(cosigned), c.VerifierKey()
		return nil
	})
}

// Cosignature is the message metadata of the cosignature kept for the node, nil if none.
func (lc *LogCheck) Cosignature() (map[string]any, error) {
	var meta map[string]any
	err := lc.update(func(st *LogState) error {
		l, err := lc.find(st)
		if l != nil && l.Cosigned != "" {
			meta = map[string]any{metaCosignature: map[string]any{"checkpoint": l.Cosigned, "witness": l.Witness}}
		}
		return err
	})
	return meta, err
}
