package cli

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aether/aether/backend/keys"
)

// TestReceiptsVerifyVersion1: `aether receipts verify --in` still checks an export of version 1
// receipts, made by the code before receipts recorded what ran (docs/wire.md, "What the turn
// did"), and still refuses one of them edited.
func TestReceiptsVerifyVersion1(t *testing.T) {
	seed := bytes.Repeat([]byte{1}, ed25519.SeedSize) // the key that signed the fixture
	jwks, err := json.Marshal(keys.FromPrivate(ed25519.NewKeyFromSeed(seed)).Set().JWKS())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	jwksPath := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(jwksPath, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	fixture, err := os.ReadFile("../receipts/testdata/v1-export.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	verify := func(export []byte) (int, string) {
		in := filepath.Join(dir, "export.jsonl")
		if err := os.WriteFile(in, export, 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		code := Main([]string{"receipts", "verify", "--in", in, "--jwks", jwksPath}, Env{Stdout: &out, Stderr: &out})
		return code, out.String()
	}
	if code, out := verify(fixture); code != 0 || !strings.Contains(out, "3") {
		t.Fatalf("version 1 export: exit %d\n%s", code, out)
	}
	edited := bytes.Replace(fixture, []byte(`"brand":"acme"`), []byte(`"brand":"acmf"`), 1)
	if code, out := verify(edited); code != 1 || !strings.Contains(out, "receipt 1") {
		t.Fatalf("an edited version 1 export: exit %d\n%s", code, out)
	}
}
