package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	agentpkg "github.com/aether/aether/backend/agent"
	"github.com/aether/aether/backend/keys"
)

// TestCardSignatureAgentRefusesTampered: the node's card verifies with its
// JWKS, and the reference agent refuses the same card served with one field
// changed (a test server in front of the node), or with its signatures
// removed, before it sends anything to the node.
func TestCardSignatureAgentRefusesTampered(t *testing.T) {
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
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, changed)
			}))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			_, err := agentpkg.Run(ctx, agentpkg.Options{
				Card: srv.URL + "/a2a/review/.well-known/agent-card.json", Brand: "review", Message: "hi", Dir: t.TempDir(),
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
