package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	agentpkg "github.com/aether/aether/backend/agent"
	"github.com/aether/aether/backend/keys"
)

// TestCardSignatureAgentRefusesTampered: the node's card verifies with its
// JWKS, and the reference agent refuses the same card served with one field
// changed, or with its signatures removed (by a server in front of the node
// that passes its JWKS through), before it sends anything to the node.
func TestCardSignatureAgentRefusesTampered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cardURL := e.publicURL + "/a2a/review/.well-known/agent-card.json"
	body := httpGetBody(t, cardURL)
	set, err := keys.ParseJWKS(httpGetBody(t, e.publicURL+"/.well-known/jwks.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := set.VerifyCard(body); err != nil {
		t.Fatalf("the node's card does not verify with its JWKS: %v", err)
	}
	for name, c := range map[string]struct{ from, to, want string }{
		"tampered": {`"description":"`, `"description":"Evil. `, "does not match"},
		"unsigned": {`"signatures":`, `"unsignatures":`, "not signed"},
	} {
		t.Run(name, func(t *testing.T) {
			changed := strings.Replace(string(body), c.from, c.to, 1)
			if changed == string(body) {
				t.Fatalf("%q is not in the card", c.from)
			}
			host := cardHost(t, e, []byte(changed))
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			_, err := agentpkg.Run(ctx, agentpkg.Options{
				Card: host + "/a2a/review/.well-known/agent-card.json", Brand: "review", Message: "hi", Dir: t.TempDir(),
				OnUserCode: func(code, _ string) { t.Errorf("the agent went on to the device flow (%s)", code) },
			})
			if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("agent on a %s card: %v; want it refused (%s)", name, err, c.want)
			}
		})
	}
}

func httpGetBody(t *testing.T, u string) []byte {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", u, resp.StatusCode, err)
	}
	return b
}

// TestCardKeysPinned: aether agent verifies a card with the JWKS below the
// card URL it was given, never with the keys the card's own publicUrl names.
func TestCardKeysPinned(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	genuine := httpGetBody(t, e.publicURL+"/a2a/review/.well-known/agent-card.json")

	t.Run("R17 a card pointing at another server's keys is refused", func(t *testing.T) {
		// The attacker's server: its own key and JWKS; it counts every request.
		_, priv, _ := ed25519.GenerateKey(rand.Reader)
		evilKey := keys.FromPrivate(priv)
		var evilHits atomic.Int32
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			evilHits.Add(1)
			if r.URL.Path == "/.well-known/jwks.json" {
				json.NewEncoder(w).Encode(evilKey.Set().JWKS())
				return
			}
			http.NotFound(w, r)
		}))
		defer evil.Close()
		// The node's card with every URL moved to the attacker and signed by
		// the attacker's key, so that it verifies with the attacker's JWKS.
		var card map[string]json.RawMessage
		if err := json.Unmarshal([]byte(strings.ReplaceAll(string(genuine), e.publicURL, evil.URL)), &card); err != nil {
			t.Fatal(err)
		}
		delete(card, "signatures")
		unsigned, _ := json.Marshal(card)
		sig, err := evilKey.SignCard(unsigned)
		if err != nil {
			t.Fatal(err)
		}
		card["signatures"], _ = json.Marshal([]any{sig})
		forged, _ := json.Marshal(card)
		if err := evilKey.Set().VerifyCard(forged); err != nil {
			t.Fatalf("the forged card does not even verify with the attacker's keys: %v", err)
		}
		// Served at the address the user gave, in front of the real node
		// (whose JWKS it passes through).
		host := cardHost(t, e, forged)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		_, err = agentpkg.Run(ctx, agentpkg.Options{
			Card: host + "/a2a/review/.well-known/agent-card.json", Brand: "review", Message: "hi", Dir: t.TempDir(),
			OnUserCode: func(code, _ string) { t.Errorf("the agent went on to the device flow (%s)", code) },
		})
		if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "not in the node JWKS") {
			t.Fatalf("agent on a card pointing at %s: %v; want it refused (kid not in the node JWKS)", evil.URL, err)
		}
		if n := evilHits.Load(); n != 0 {
			t.Errorf("the agent sent %d requests to the attacker's server", n)
		}
	})

	t.Run("a genuine card reached through another address still works", func(t *testing.T) {
		host := cardHost(t, e, genuine)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		res, err := agentpkg.Run(ctx, agentpkg.Options{
			Card: host + "/a2a/review/.well-known/agent-card.json", Brand: "review", Message: "hi", Dir: t.TempDir(),
			OnUserCode: func(code, _ string) {
				if st, out := e.admin.decide(code, "allow"); st != http.StatusOK {
					t.Errorf("allow %s: %d %v", code, st, out)
				}
			},
		})
		if err != nil || res.Receipt == nil || res.Card.PublicURL != e.publicURL {
			t.Fatalf("agent through %s: %v (receipt %v, publicUrl %q)", host, err, res.Receipt, res.Card.PublicURL)
		}
	})
}

// cardHost serves card at /a2a/review/.well-known/agent-card.json and passes
// every other request on to the node.
func cardHost(t *testing.T, e *env, card []byte) string {
	t.Helper()
	target, _ := url.Parse(e.publicURL)
	node := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/a2a/review/.well-known/agent-card.json" {
			w.Header().Set("Content-Type", "application/json")
			w.Write(card)
			return
		}
		node.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
