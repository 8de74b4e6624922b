package keys

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/jcs"
)

// cardHeader is the protected header of an agent card signature (A2A 1.0 §8.4).
type cardHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ,omitempty"`
}

// CardPayload is the RFC 8785 canonical form of a card's JSON with its
// signatures member left out: the detached payload a card signature covers.
// It works on the JSON as served, so members a client's types do not know
// are covered too.
func CardPayload(cardJSON []byte) ([]byte, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(cardJSON, &members); err != nil {
		return nil, fmt.Errorf("agent card is not a JSON object: %w", err)
	}
	delete(members, "signatures")
	rest, err := json.Marshal(members)
	if err != nil {
		return nil, err
	}
	return jcs.Canonicalize(rest)
}

// SignCard makes the JWS (alg EdDSA, kid of k, detached payload: CardPayload)
// that goes in the signatures of the card whose JSON is cardJSON: sign the
// JSON that will be served, not a struct a different encoder may write.
func (k *Key) SignCard(cardJSON []byte) (a2a.AgentCardSignature, error) {
	payload, err := CardPayload(cardJSON)
	if err != nil {
		return a2a.AgentCardSignature{}, fmt.Errorf("sign agent card: %w", err)
	}
	hdr, err := json.Marshal(cardHeader{Alg: "EdDSA", Kid: k.kid, Typ: "JOSE"})
	if err != nil {
		return a2a.AgentCardSignature{}, err
	}
	protected := base64.RawURLEncoding.EncodeToString(hdr)
	input := protected + "." + base64.RawURLEncoding.EncodeToString(payload)
	sig := ed25519.Sign(k.priv, []byte(input))
	return a2a.AgentCardSignature{Protected: protected, Signature: base64.RawURLEncoding.EncodeToString(sig)}, nil
}

// VerifyCard checks that one of the signatures of the card (its JSON as
// served) is an EdDSA JWS over the card's canonical form made by a key of s.
// A card with no signature fails.
func (s Set) VerifyCard(cardJSON []byte) error {
	var sigs struct {
		Signatures []a2a.AgentCardSignature `json:"signatures"`
	}
	if err := json.Unmarshal(cardJSON, &sigs); err != nil {
		return fmt.Errorf("agent card signatures: %w", err)
	}
	if len(sigs.Signatures) == 0 {
		return errors.New("the agent card is not signed (no signatures)")
	}
	payload, err := CardPayload(cardJSON)
	if err != nil {
		return fmt.Errorf("agent card signature: %w", err)
	}
	enc := base64.RawURLEncoding.EncodeToString(payload)
	var last error
	for _, sig := range sigs.Signatures {
		if last = s.verifyCardSignature(sig, enc); last == nil {
			return nil
		}
	}
	return fmt.Errorf("agent card signature: %w", last)
}

func (s Set) verifyCardSignature(sig a2a.AgentCardSignature, payload string) error {
	raw, err := base64.RawURLEncoding.DecodeString(sig.Protected)
	if err != nil {
		return errors.New("protected header is not base64url")
	}
	var hdr cardHeader
	if err := json.Unmarshal(raw, &hdr); err != nil {
		return errors.New("protected header is not a JSON object")
	}
	if hdr.Alg != "EdDSA" {
		return fmt.Errorf("alg %q, want EdDSA", hdr.Alg)
	}
	pub, ok := s[hdr.Kid]
	if !ok {
		return fmt.Errorf("kid %q is not in the node JWKS", hdr.Kid)
	}
	sb, err := base64.RawURLEncoding.DecodeString(sig.Signature)
	if err != nil {
		return errors.New("signature is not base64url")
	}
	if !ed25519.Verify(pub, []byte(sig.Protected+"."+payload), sb) {
		return fmt.Errorf("signature by kid %s does not match the card's content", hdr.Kid)
	}
	return nil
}
