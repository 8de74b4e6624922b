package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/receipts"
)

// NodeKeys fetches and parses the node JWKS at jwksURL (Card.KeysURL), with the rotation
// statement of each retired key, which bounds what that key may have signed (T13).
func (c *Client) NodeKeys(ctx context.Context, jwksURL string) (keys.History, error) {
	body, err := c.get(ctx, jwksURL, "the node JWKS")
	if err != nil {
		return keys.History{}, err
	}
	h, err := keys.ParseHistory(body)
	if err != nil {
		return keys.History{}, fmt.Errorf("the node JWKS: %w", err)
	}
	return h, nil
}

// CheckReceiptData checks that a receipt artifact's data part shows exactly
// the claims its JWS signs, as receipts.DataPart names them (camelCase): the
// data part is a convenience, and one that says something unsigned is refused.
func CheckReceiptData(data map[string]any, jws string) error {
	want, err := receipts.DataPart(jws)
	if err != nil {
		return err
	}
	a, errA := json.Marshal(data)
	b, errB := json.Marshal(want)
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		return fmt.Errorf("the receipt's data part is not its signed claims:\n data part %s\n signed    %s", a, b)
	}
	return nil
}

// ReceiptExpect is what a receipt must say about the turn it is for. Empty
// fields are not checked.
type ReceiptExpect struct {
	Issuer string // the node's publicUrl
	TaskID string
	Brand  string
	Agent  domain.Agent
	// Answer, when set, must hash to the receipt's answer hash.
	Answer *string
}

// VerifyReceipt checks a receipt JWS with the node keys (receipts.VerifyOne:
// alg, typ, kid, signature, well-formed claims, a retired key used before its
// rotation only) and that it is the receipt of the expected turn.
func VerifyReceipt(jws string, nodeKeys keys.History, want ReceiptExpect) (*receipts.Claims, error) {
	c, err := receipts.VerifyOne(jws, nodeKeys)
	if err != nil {
		return nil, fmt.Errorf("receipt: %w", err)
	}
	mismatch := func(what, got, exp string) error {
		return fmt.Errorf("receipt %s: %s is %q, want %q", c.RID, what, got, exp)
	}
	switch {
	case want.Issuer != "" && strings.TrimRight(c.Issuer, "/") != strings.TrimRight(want.Issuer, "/"):
		return nil, mismatch("issuer", c.Issuer, want.Issuer)
	case want.TaskID != "" && c.Task != want.TaskID:
		return nil, mismatch("task", c.Task, want.TaskID)
	case want.Brand != "" && c.Brand != want.Brand:
		return nil, mismatch("brand", c.Brand, want.Brand)
	case want.Agent.Issuer != "" && c.Agent.Issuer != want.Agent.Issuer:
		return nil, mismatch("agent issuer", c.Agent.Issuer, want.Agent.Issuer)
	case want.Agent.Subject != "" && c.Agent.Subject != want.Agent.Subject:
		return nil, mismatch("agent subject", c.Agent.Subject, want.Agent.Subject)
	case want.Answer != nil && receipts.HashBytes([]byte(*want.Answer)) != c.Ans:
		return nil, fmt.Errorf("receipt %s: the answer received does not hash to the receipt's answer hash", c.RID)
	}
	return c, nil
}
