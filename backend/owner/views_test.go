package owner

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"

	"github.com/aether/aether/backend/consent"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/policy"
	"github.com/aether/aether/backend/store"
)

// TestConsentViewsNameTheBrand: consent keeps no view of the policy, so the owner's side names
// a request's brand and describes its scope from the policy it serves (the list, and the events
// through the same requestDTO), and shows the bare id once the brand is gone.
func TestConsentViewsNameTheBrand(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(filepath.Join(t.TempDir(), "pact.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cs := consent.New(db, keys.FromPrivate(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))),
		consent.Config{PublicURL: "https://aether.example.com", ConsentURL: "https://127.0.0.1:3000/pact/consent"})
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(path, []byte(`{"pact": {"publicUrl": "https://aether.example.com", "audience": "https://aether.example.com",
  "brands": [{"id": "review", "name": "Code review", "description": "Reviews code in my workspace.",
    "capability": "review", "workspace": "workspace", "accessMode": "read_only",
    "scope": {"id": "review:read_only", "description": "Review code (read only)"}}]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	file, err := policy.OpenFile(policy.FileConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	pol := file.Current().Policy
	s := New(Config{Consent: cs, Policy: file})

	alice := domain.Agent{Issuer: "https://id.example", Subject: "alice"}
	if _, err := cs.StartFlow(ctx, alice, "review:read_only", "", pol); err != nil {
		t.Fatal(err)
	}
	reqs, err := s.Pending(ctx)
	if err != nil || len(reqs) != 1 {
		t.Fatalf("pending = %v, %v", reqs, err)
	}
	if r := reqs[0]; r.Brand != (BrandRef{ID: "review", Name: "Code review"}) || r.Scope != (Scope{ID: "review:read_only", Description: "Review code (read only)"}) {
		t.Fatalf("request = %+v", r)
	}

	if _, err := file.Modify(func(p *policy.Policy) error { p.Pact.Brands = nil; return nil }); err != nil { // the brand is gone
		t.Fatal(err)
	}
	reqs, err = s.Pending(ctx)
	if err != nil || len(reqs) != 1 {
		t.Fatalf("pending = %v, %v", reqs, err)
	}
	if r := reqs[0]; r.Brand != (BrandRef{ID: "review", Name: "review"}) || r.Scope != (Scope{ID: "review:read_only"}) {
		t.Fatalf("request of a gone brand = %+v, want its bare id and no description", r)
	}
}
