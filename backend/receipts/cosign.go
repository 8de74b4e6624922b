package receipts

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/store"
)

// ErrCosignature: an agent's cosignature was refused (docs/threats.md L6); nothing was stored.
var ErrCosignature = errors.New("cosignature refused")

// Witness checks an agent's cosignature of one of the log's checkpoints and stores it
// (docs/wire.md, "Witnesses"): cosigned is the checkpoint as a signed note carrying the
// witness's signature line, vkey the witness's key. The checkpoint must be one the node
// signed, byte for byte, and the cosignature must verify with vkey.
func (l *Ledger) Witness(ctx context.Context, agent domain.Agent, cosigned []byte, vkey string) error {
	if len(cosigned) > MaxCheckpointNote {
		return fmt.Errorf("%w: the cosigned checkpoint is %d bytes, over %d", ErrCosignature, len(cosigned), MaxCheckpointNote)
	}
	v, err := keys.ParseCosigVerifier(vkey)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCosignature, err)
	}
	body, _, ok := strings.Cut(string(cosigned), "\n\n")
	if !ok {
		return fmt.Errorf("%w: the cosigned checkpoint is not a signed note", ErrCosignature)
	}
	cp, err := ParseCheckpoint(body + "\n")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCosignature, err)
	}
	signed, ok, err := l.db.CheckpointAt(ctx, cp.Size)
	if err != nil {
		return err
	}
	if mine, _, _ := strings.Cut(string(signed), "\n\n"); !ok || mine != body {
		return fmt.Errorf("%w: this node never signed that checkpoint of %d receipts", ErrCosignature, cp.Size)
	}
	n, err := note.Open(cosigned, note.VerifierList(v))
	if err != nil {
		return fmt.Errorf("%w: the cosignature by %s does not verify: %w", ErrCosignature, v.Name(), err)
	}
	line := "— " + n.Sigs[0].Name + " " + n.Sigs[0].Base64 + "\n"
	return l.db.AddCosignature(ctx, store.Cosignature{Agent: agent, Size: cp.Size, Witness: vkey, SignedAt: v.Time, Line: line})
}

// Cosign adds the witness c's cosignature to signed, a checkpoint the node signed and the
// agent checked.
func Cosign(signed []byte, c *keys.Cosigner) ([]byte, error) {
	body, _, ok := strings.Cut(string(signed), "\n\n")
	if !ok {
		return nil, errors.New("the checkpoint is not a signed note")
	}
	mine, err := note.Sign(&note.Note{Text: body + "\n"}, c)
	if err != nil {
		return nil, fmt.Errorf("cosign the checkpoint: %w", err)
	}
	_, line, _ := strings.Cut(string(mine), "\n\n")
	return append(append([]byte{}, signed...), line...), nil
}
