package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aether/aether/backend/node"
	ownerpkg "github.com/aether/aether/backend/owner"
)

// TestFunnelRefusesLoopbackIssuers: N4, the audit's way. A node published with Funnel gets
// allowInsecureLocalIssuers back by a hand edit; a client on the internet sends, through the
// Funnel, an identity token whose issuer is a service on the node's loopback (and one on a
// closed port), to make the node GET it and to tell open ports from closed by the answer. The
// node serves nothing on that policy: the service is never asked, and both answers are the
// same 503. With the flag set and Funnel off, the owner's "Turn Funnel on" is refused with
// the reason and policy.json stays as it was.
func TestFunnelRefusesLoopbackIssuers(t *testing.T) {
	t.Parallel()
	tn := newTailnet(t, nil, false)
	e := newEnv(t, withFunnel(tn), withNode(func(o *node.Options) { o.Funnel = false })) // pact.funnel, as the window sets it
	if _, err := e.n.Owner().SetFunnel(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	waitReach(t, e, "published", func(r ownerpkg.Reachability) bool { return r.State == ownerpkg.ReachStatePublished })
	hc := newIngress(t, tn, e.n.FunnelTailnet().Tailnet()).client()

	var asked atomic.Int64 // a loopback service of the machine, not the node's
	service := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.NotFound(w, r)
	}))
	defer service.Close()
	closed := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	attack := func(iss string) (int, string) {
		t.Helper()
		c := e.issuer.Claims("mallory", e.publicURL)
		c["iss"] = iss
		req, _ := http.NewRequest("POST", funnelURL+"/a2a/review", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+e.issuer.Sign(c))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("through the Funnel: %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	readPolicy := func() []byte {
		t.Helper()
		data, err := os.ReadFile(e.policy)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	const edited = "Code review, edited by hand"
	handEdit := func(insecure, funnel bool) {
		t.Helper()
		var pol map[string]map[string]any
		if err := json.Unmarshal(readPolicy(), &pol); err != nil {
			t.Fatal(err)
		}
		pol["pact"]["allowInsecureLocalIssuers"], pol["pact"]["funnel"] = insecure, funnel
		pol["pact"]["brands"].([]any)[0].(map[string]any)["name"] = edited // what shows the edit was read
		if err := os.WriteFile(e.policy, []byte(mustJSON(t, pol)), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("N4 the flag back by hand on a published gateway", func(t *testing.T) {
		handEdit(true, true)
		// The node read the edit once the card says so, or the gateway is stopped.
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			resp, err := hc.Get(funnelURL + "/a2a/review/.well-known/agent-card.json")
			if err != nil {
				t.Fatal(err)
			}
			card, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable || strings.Contains(string(card), edited) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the node never read the hand edit: %d %s", resp.StatusCode, card)
			}
		}
		openCode, openBody := attack(service.URL)
		closedCode, closedBody := attack(closed)
		if n := asked.Load(); n != 0 {
			t.Errorf("the loopback service was asked %d times by the node, for a client on the internet", n)
		}
		if openCode != http.StatusServiceUnavailable || openCode != closedCode || openBody != closedBody {
			t.Errorf("an open port answers %d %q, a closed one %d %q; want the same 503", openCode, openBody, closedCode, closedBody)
		}
		var view struct {
			Error *struct {
				Problems []struct{ Path, Message string }
			}
		}
		e.admin.do("GET", "/api/brands", nil, &view)
		if view.Error == nil || len(view.Error.Problems) != 1 || view.Error.Problems[0].Path != "pact.allowInsecureLocalIssuers" ||
			!strings.Contains(view.Error.Problems[0].Message, "must not be set while pact.funnel is on") {
			t.Errorf("the Brands page shows %+v; want the problem at pact.allowInsecureLocalIssuers", view.Error)
		}
	})

	t.Run("N4 Turn Funnel on while the flag is set", func(t *testing.T) {
		handEdit(true, false) // loopback only: the flag may stay
		waitReach(t, e, "off", func(r ownerpkg.Reachability) bool { return r.Mode == ownerpkg.ReachOff })
		before := readPolicy()
		var out struct{ Error string }
		if st := e.admin.do("POST", "/api/reachability/funnel", map[string]bool{"on": true}, &out); st != http.StatusBadRequest ||
			!strings.Contains(out.Error, "Tailscale Funnel was not turned on: policy.json sets allowInsecureLocalIssuers, which is for tests on this computer only.") ||
			!strings.Contains(out.Error, "Remove it from policy.json, then try again") {
			t.Errorf("turning Funnel on with the flag set: %d %q; want 400 and the reason", st, out.Error)
		}
		if after := readPolicy(); string(after) != string(before) {
			t.Errorf("policy.json changed:\n%s", after)
		}
		if r := e.n.Owner().Reachability(); r.Mode != ownerpkg.ReachOff {
			t.Errorf("Funnel after the refusal: %+v", r)
		}
	})
}
