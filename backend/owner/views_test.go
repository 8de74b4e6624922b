package owner

import (
	"context"
	"crypto/ed25519"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/aether/aether/backend/consent"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/policy"
	"github.com/aether/aether/backend/store"
)

// servedNode is the node as far as the consent views need it: the policy it serves.
type servedNode struct {
	Node
	p atomic.Pointer[policy.Policy]
}

func (n *servedNode) Served() *policy.Policy { return n.p.Load() }

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
	pol := &policy.Policy{Pact: &policy.Pact{Brands: []policy.Brand{{ID: "review", Name: "Code review", Capability: "review",
		WorkspaceDir: "/ws/review", AccessMode: domain.ReadOnly, Scope: policy.Scope{ID: "review:read_only", Description: "Review code (read only)"}}}}}
	node := &servedNode{}
	node.p.Store(pol)
	s := New(Config{Consent: cs, Node: node})

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

	node.p.Store(&policy.Policy{Pact: &policy.Pact{}}) // the brand is gone
	reqs, err = s.Pending(ctx)
	if err != nil || len(reqs) != 1 {
		t.Fatalf("pending = %v, %v", reqs, err)
	}
	if r := reqs[0]; r.Brand != (BrandRef{ID: "review", Name: "review"}) || r.Scope != (Scope{ID: "review:read_only"}) {
		t.Fatalf("request of a gone brand = %+v, want its bare id and no description", r)
	}
}
