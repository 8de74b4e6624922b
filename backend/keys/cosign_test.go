package keys

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// A cosignature made by Cosigner verifies with its vkey, carries its time, and verifies with
// nothing else: another key under the same name, or a vkey whose hash was changed.
func TestCosignature(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(nil)
	at := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	c := NewCosigner("agent.example#alice", priv, func() time.Time { return at })
	signed, err := note.Sign(&note.Note{Text: "node.example/log\n1\nAAAA\n"}, c)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ParseCosigVerifier(c.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open(signed, note.VerifierList(v)); err != nil || !v.Time.Equal(at) {
		t.Fatalf("open: %v, time %v", err, v.Time)
	}
	_, other, _ := ed25519.GenerateKey(nil)
	w, _ := ParseCosigVerifier(NewCosigner(c.Name(), other, time.Now).VerifierKey())
	if _, err := note.Open(signed, note.VerifierList(w)); err == nil {
		t.Fatal("another key's verifier opened the cosignature")
	}
	name, rest, _ := strings.Cut(c.VerifierKey(), "+")
	if _, err := ParseCosigVerifier(name + "+00000000" + rest[8:]); err == nil || !strings.Contains(err.Error(), "hash does not match") {
		t.Fatalf("a vkey with another hash: %v", err)
	}
}
