package issuer_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether/aether/backend/identity"
	"github.com/aether/aether/backend/issuer"
)

// serve starts the issuer behind https on loopback, as a node's publicUrl would serve it, and
// returns it with a verifier of another node that trusts that certificate.
func serve(t *testing.T, dir string) (*issuer.Issuer, *identity.Verifier, string) {
	t.Helper()
	is, err := issuer.Open(filepath.Join(dir, "identity.key"), filepath.Join(dir, "agents.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(is.Handler())
	t.Cleanup(srv.Close)
	is.SetPublicURL(srv.URL)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	aud := "https://other.example"
	v := identity.New(identity.Config{Audience: aud, NodeIssuer: aud, AllowInsecureLocalIssuers: true, RootCAs: roots})
	return is, v, aud
}

func TestIssuer(t *testing.T) {
	dir := t.TempDir()
	is, v, aud := serve(t, dir)
	if _, err := is.Add("claude-desktop"); err != nil {
		t.Fatal(err)
	}

	t.Run("I2 another node fetches the issuer by docs/wire.md's rules and accepts its token, which lives five minutes at most", func(t *testing.T) {
		tok, err := is.Mint("claude-desktop", aud)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(tok.Issuer, issuer.PathPrefix) || tok.Subject != "claude-desktop" {
			t.Fatalf("token says %s / %s", tok.Issuer, tok.Subject)
		}
		if got := time.Until(tok.ExpiresAt); got > 5*time.Minute {
			t.Fatalf("the token lives %s, more than five minutes", got)
		}
		id, err := v.Verify(context.Background(), tok.Token, "127.0.0.1")
		if err != nil {
			t.Fatalf("the other node refused the token: %v", err)
		}
		if id.Issuer != tok.Issuer || id.Subject != "claude-desktop" {
			t.Fatalf("the other node read %+v", id.Agent)
		}
	})

	t.Run("I4 an agent turned off gets no token", func(t *testing.T) {
		if _, err := is.Set("claude-desktop", false); err != nil {
			t.Fatal(err)
		}
		if _, err := is.Mint("claude-desktop", aud); !errors.Is(err, issuer.ErrAgentOff) {
			t.Fatalf("minted for an agent turned off: %v", err)
		}
		if _, err := is.Set("claude-desktop", true); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("I1 an agent the owner did not name gets no token", func(t *testing.T) {
		if _, err := is.Mint("mallory", aud); !errors.Is(err, issuer.ErrNoAgent) {
			t.Fatalf("minted for an unnamed agent: %v", err)
		}
	})

	t.Run("names are checked", func(t *testing.T) {
		for _, bad := range []string{"", "Claude", "a b", "../x", strings.Repeat("a", 65), "-x"} {
			if _, err := is.Add(bad); !errors.Is(err, issuer.ErrBadName) {
				t.Errorf("Add(%q) = %v", bad, err)
			}
		}
		if _, err := is.Add("claude-desktop"); !errors.Is(err, issuer.ErrAgentExists) {
			t.Errorf("a second claude-desktop: %v", err)
		}
	})

	t.Run("the agents and the key stay across a restart", func(t *testing.T) {
		again, err := issuer.Open(filepath.Join(dir, "identity.key"), filepath.Join(dir, "agents.json"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if again.KeyID() != is.KeyID() {
			t.Fatal("a new identity key after a restart")
		}
		if a := again.Agents(); len(a) != 1 || a[0].Name != "claude-desktop" || !a[0].On {
			t.Fatalf("agents after a restart: %+v", a)
		}
	})
}

func TestIssuerNeedsHTTPS(t *testing.T) {
	dir := t.TempDir()
	is, err := issuer.Open(filepath.Join(dir, "identity.key"), filepath.Join(dir, "agents.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	is.Add("assistant")
	is.SetPublicURL("http://127.0.0.1:8080")
	if _, err := is.Mint("assistant", "https://other.example"); !errors.Is(err, issuer.ErrNotHTTPS) {
		t.Fatalf("minted under an http publicUrl: %v", err)
	}
}
