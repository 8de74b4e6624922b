package keys

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

func signedCard(t *testing.T, k *Key) []byte {
	t.Helper()
	card := &a2a.AgentCard{Name: "Brand", Description: "a brand", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{{URL: "https://node.example/a2a/b", ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.Version}}}
	unsigned, err := json.Marshal(card)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := k.SignCard(unsigned)
	if err != nil {
		t.Fatal(err)
	}
	card.Signatures = []a2a.AgentCardSignature{sig}
	body, err := json.Marshal(card)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func TestCardSignatureRoundTrip(t *testing.T) {
	r, err := LoadRing(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	body := signedCard(t, r.Current)
	if err := r.Set().VerifyCard(body); err != nil {
		t.Fatalf("verify: %v", err)
	}
	var card a2a.AgentCard
	json.Unmarshal(body, &card)
	hdr, _ := base64.RawURLEncoding.DecodeString(card.Signatures[0].Protected)
	var h map[string]any
	json.Unmarshal(hdr, &h)
	if h["alg"] != "EdDSA" || h["kid"] != r.Current.ID() {
		t.Errorf("protected header %s", hdr)
	}
	tampered := []byte(strings.Replace(string(body), `"name":"Brand"`, `"name":"Brand!"`, 1))
	if err := r.Set().VerifyCard(tampered); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("tampered card: %v", err)
	}
	unsigned := []byte(strings.Replace(string(body), `"signatures"`, `"x"`, 1))
	if err := r.Set().VerifyCard(unsigned); err == nil || !strings.Contains(err.Error(), "not signed") {
		t.Errorf("unsigned card: %v", err)
	}
	other, _ := LoadRing(t.TempDir())
	if err := other.Set().VerifyCard(body); err == nil || !strings.Contains(err.Error(), "not in the node JWKS") {
		t.Errorf("foreign JWKS: %v", err)
	}
}

// A card signed before a rotation verifies with the JWKS after it.
func TestCardSignatureAfterRotation(t *testing.T) {
	dir := t.TempDir()
	r0, err := LoadRing(dir)
	if err != nil {
		t.Fatal(err)
	}
	body := signedCard(t, r0.Current)
	if _, _, err := Rotate(dir, time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	r1, err := LoadRing(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r1.Current.ID() == r0.Current.ID() {
		t.Fatal("rotation kept the key")
	}
	doc, _ := json.Marshal(r1.Set().JWKS())
	set, err := ParseJWKS(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.VerifyCard(body); err != nil {
		t.Fatalf("old card after rotation: %v", err)
	}
	if err := r1.Current.Set().VerifyCard(body); err == nil {
		t.Error("verified without the old key in the set")
	}
}
