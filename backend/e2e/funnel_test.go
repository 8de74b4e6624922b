package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tailscale.com/tailcfg"

	agentpkg "github.com/aether/aether/backend/agent"
	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/node"
	ownerpkg "github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/reach"
)

const funnelURL = "https://aether." + tailnetDomain

// TestFunnel publishes a node with Tailscale Funnel on a loopback tailnet and walks it as
// agents on the internet would, through the ingress at https://aether.tail-scale.ts.net: an
// agent with a grant made under the node's old publicUrl gets a fresh token from it at the new
// address without the owner (its old token is refused), and a new agent walks card →
// AUTH_REQUIRED → device flow → a streamed delegated turn with the official a2a-go client,
// and verifies the receipt with the JWKS fetched through the Funnel. The identity check logs
// the address the ingress reported, not the ingress node's.
func TestFunnel(t *testing.T) {
	t.Parallel()
	tn := newTailnet(t, nil, false)
	var log lockedBuffer
	e := newEnv(t, withFunnel(tn), withLog(&log))
	oldURL := e.publicURL
	r := waitReach(t, e, "published", func(r ownerpkg.Reachability) bool { return r.State == ownerpkg.ReachStatePublished })
	if r.Mode != ownerpkg.ReachFunnel || r.URL != funnelURL || r.Device != "aether."+tailnetDomain || r.InUse {
		t.Fatalf("published %+v; want %s, not in use before the owner confirms", r, funnelURL)
	}
	in := newIngress(t, tn, e.n.FunnelTailnet().Tailnet())
	hc := in.client()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	// Before the owner confirms, the Funnel serves the node as it is: the old publicUrl.
	var card map[string]any
	getJSONVia(t, hc, funnelURL+"/a2a/review/.well-known/agent-card.json", &card)
	if !strings.Contains(string(mustJSON(t, card)), oldURL+"/a2a/review") {
		t.Errorf("before the switch the card does not name %s: %s", oldURL, string(mustJSON(t, card)))
	}

	// A grant made under the old publicUrl, on loopback.
	oldDir := t.TempDir()
	allow := func(code, link string) {
		if st, out := e.admin.decide(code, "allow"); st != http.StatusOK {
			t.Errorf("allow %s: %d %v", code, st, out)
		}
	}
	if _, err := agentpkg.Run(ctx, agentpkg.Options{Card: oldURL, Brand: "review", Message: "first", Dir: oldDir, OnUserCode: allow,
		IdentityToken: e.issuer.Token("old-agent", oldURL)}); err != nil {
		t.Fatalf("the agent on loopback: %v", err)
	}

	// The owner confirms: publicUrl and audience become the Funnel address, in policy.json.
	var used map[string]any
	if st := e.admin.do("POST", "/api/reachability/use", nil, &used); st != http.StatusOK {
		t.Fatalf("use the Funnel URL: %d %v", st, used)
	}
	pol, _ := os.ReadFile(e.policy)
	if !strings.Contains(string(pol), `"publicUrl": "`+funnelURL+`"`) || !strings.Contains(string(pol), `"audience": "`+funnelURL+`"`) {
		t.Fatalf("policy.json after the switch:\n%s", pol)
	}
	if r := e.n.Owner().Reachability(); !r.InUse {
		t.Errorf("after the switch the Funnel URL is not in use: %+v", r)
	}

	t.Run("N3 a token made under the old publicUrl", func(t *testing.T) {
		moveTokens(t, oldDir, oldURL, funnelURL) // the agent tries its old token at the new address
		res, err := agentpkg.Run(ctx, agentpkg.Options{Card: funnelURL, Brand: "review", Message: "again", Dir: oldDir, HTTPClient: hc,
			IdentityToken: e.issuer.Token("old-agent", funnelURL),
			OnUserCode:    func(code, _ string) { t.Errorf("the owner was asked again (%s)", code) }})
		if err != nil {
			t.Fatalf("the agent with an old grant through the Funnel: %v", err)
		}
		if res.AuthRequired == nil || res.AuthRequired.Reason != "invalid" {
			t.Errorf("the token made under %s was not refused: %+v", oldURL, res.AuthRequired)
		}
		if !res.Refreshed || res.Consented || res.Answer != codextest.DefaultAnswer {
			t.Errorf("refreshed %v consented %v answer %q; want a new token from the old grant", res.Refreshed, res.Consented, res.Answer)
		}
		if res.Receipt == nil || res.Receipt.Issuer != funnelURL {
			t.Errorf("receipt %+v; want one issued by %s", res.Receipt, funnelURL)
		}
	})

	t.Run("new agent streams", func(t *testing.T) {
		var codes []string
		res, err := agentpkg.Run(ctx, agentpkg.Options{Card: funnelURL, Brand: "review", Message: "Review main.go please", Dir: t.TempDir(),
			IdentityToken: e.issuer.Token("new-agent", funnelURL),
			HTTPClient:    hc, Stream: true, OnUserCode: func(code, link string) { codes = append(codes, code); allow(code, link) }})
		if err != nil {
			t.Fatalf("a new agent through the Funnel: %v", err)
		}
		if res.Card.PublicURL != funnelURL || !strings.HasPrefix(res.Interface.URL, funnelURL+"/a2a/review") {
			t.Errorf("card publicUrl %q, interface %q; want them at %s", res.Card.PublicURL, res.Interface.URL, funnelURL)
		}
		if res.AuthRequired == nil || res.AuthRequired.Reason != "missing" || !res.Consented || len(codes) != 1 {
			t.Errorf("auth %+v consented %v codes %v; want AUTH_REQUIRED then one device flow", res.AuthRequired, res.Consented, codes)
		}
		if res.Answer != codextest.DefaultAnswer || res.Receipt == nil || res.Receipt.Issuer != funnelURL || res.Receipt.Status != "completed" {
			t.Fatalf("answer %q receipt %+v; want a verified receipt issued by %s", res.Answer, res.Receipt, funnelURL)
		}
		var meta struct {
			Issuer  string `json:"issuer"`
			JwksURI string `json:"jwks_uri"`
		}
		getJSONVia(t, hc, funnelURL+"/.well-known/oauth-authorization-server", &meta)
		if meta.Issuer != funnelURL || meta.JwksURI != funnelURL+"/.well-known/jwks.json" {
			t.Errorf("metadata %+v; want it at %s", meta, funnelURL)
		}
	})

	t.Run("N2 the client address is the one the ingress reported", func(t *testing.T) {
		in.from("203.0.113.44:5555")
		req, _ := http.NewRequest("POST", funnelURL+"/a2a/review", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer not.a.jwt")
		req.Header.Set("X-Forwarded-For", "192.0.2.99") // the agent's own claim never counts
		fresh := &http.Client{Transport: &http.Transport{DialContext: in.dial, TLSClientConfig: hc.Transport.(*http.Transport).TLSClientConfig}}
		resp, err := fresh.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a bad identity through the Funnel: %d", resp.StatusCode)
		}
		var line string
		for _, l := range strings.Split(log.String(), "\n") {
			if strings.Contains(l, "identity rejected") {
				line = l
			}
		}
		if !strings.Contains(line, "client=203.0.113.44") {
			t.Fatalf("the node logged %q; want the ingress-reported client=203.0.113.44", line)
		}
	})
}

// moveTokens re-keys an agent's saved delegation tokens from one node address to another.
func moveTokens(t *testing.T, dir, from, to string) {
	t.Helper()
	path := filepath.Join(dir, "tokens.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"node": "`+from+`"`) {
		t.Fatalf("no token saved for %s: %s", from, data)
	}
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(data), `"node": "`+from+`"`, `"node": "`+to+`"`)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestFunnelServesOnlyTheGateway: N1, every admin UI and node API route asked through the
// Funnel listener gets 404 from the gateway; none is served there.
func TestFunnelServesOnlyTheGateway(t *testing.T) {
	t.Parallel()
	tn := newTailnet(t, nil, false)
	e := newEnv(t, withFunnel(tn))
	waitReach(t, e, "published", func(r ownerpkg.Reachability) bool { return r.State == ownerpkg.ReachStatePublished })
	in := newIngress(t, tn, e.n.FunnelTailnet().Tailnet())
	hc := in.client()
	routes := []string{
		"/", "/index.html", "/signin", "/pact/consent?user_code=BCDF-GHJK", "/assets/index.js",
		"/api/session", "/api/status", "/api/consent", "/api/consent/x/decision", "/api/consent/deny-issuer",
		"/api/grants", "/api/grants/x/revoke", "/api/receipts", "/api/receipts/export", "/api/receipts/x",
		"/api/brands", "/api/brands/review", "/api/events", "/api/reachability/funnel", "/api/reachability/use",
		"/v1/status", "/v1/consent", "/v1/grants", "/v1/grants/x/revoke", "/v1/gateway/pause", "/v1/gateway/resume",
		"/v1/admin/token", "/v1/admin/sign-in-link", "/v1/runtime", "/v1/reachability/funnel", "/v1/reachability/use",
	}
	tok, err := os.ReadFile(filepath.Join(e.dataDir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("N1 admin and node API through the Funnel", func(t *testing.T) {
		for _, route := range routes {
			for _, method := range []string{"GET", "POST"} {
				req, _ := http.NewRequest(method, funnelURL+route, strings.NewReader("{}"))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok))) // even with the admin token
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatalf("%s %s: %v", method, route, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusNotFound {
					t.Errorf("%s %s through the Funnel: %d %.120q; want 404", method, route, resp.StatusCode, body)
				}
			}
		}
	})
	// The gateway's own routes are there.
	resp, err := hc.Get(funnelURL + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz through the Funnel: %v %v", err, resp)
	}
	resp.Body.Close()
}

// TestFunnelRefused: a tailnet whose policy gives no funnel attribute refuses the listener;
// the window, `aether status` and the log say why and what to do, and the local gateway
// keeps answering.
func TestFunnelRefused(t *testing.T) {
	t.Parallel()
	caps := tailcfg.NodeCapMap{tailcfg.CapabilityHTTPS: nil}
	tn := newTailnet(t, &caps, false)
	var log lockedBuffer
	e := newEnv(t, withFunnel(tn), withLog(&log))
	r := waitReach(t, e, "failed", func(r ownerpkg.Reachability) bool { return r.State == "failed" })
	if !strings.Contains(r.Reason, `"funnel" node attribute`) || !strings.Contains(r.Fix, "nodeAttrs") || r.URL != "" {
		t.Errorf("refused Funnel: %+v; want the missing attribute and the fix", r)
	}
	var st ownerpkg.Status
	e.admin.do("GET", "/api/status", nil, &st)
	if st.Reachability.State != "failed" || st.Reachability.Reason != r.Reason {
		t.Errorf("the status the window polls: %+v", st.Reachability)
	}
	if !strings.Contains(log.String(), "not reachable from the internet") || !strings.Contains(log.String(), "nodeAttrs") {
		t.Errorf("the log does not say why:\n%s", log.String())
	}
	resp, err := http.Get(e.publicURL + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the local gateway with Funnel refused: %v %v", err, resp)
	}
	resp.Body.Close()
	if _, err := agentpkg.Run(t.Context(), agentpkg.Options{Card: e.publicURL, Brand: "review", Message: "hi", Dir: t.TempDir(),
		IdentityToken: e.issuer.Token("local-agent", e.publicURL),
		OnUserCode:    func(code, _ string) { e.admin.decide(code, "allow") }}); err != nil {
		t.Fatalf("a turn on the local gateway with Funnel refused: %v", err)
	}
}

// TestFunnelLogin: a node not yet on the tailnet shows the login URL until the owner signs in,
// then publishes.
func TestFunnelLogin(t *testing.T) {
	t.Parallel()
	tn := newTailnet(t, nil, true)
	e := newEnv(t, withFunnel(tn), withNode(func(o *node.Options) { o.Funnel = false })) // pact.funnel, as the window sets it
	if _, err := e.n.Owner().SetFunnel(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	r := waitReach(t, e, "logging in", func(r ownerpkg.Reachability) bool { return r.LoginURL != "" })
	if r.State != "logging_in" || !strings.HasPrefix(r.LoginURL, tn.url+"/auth/") {
		t.Fatalf("before the login: %+v", r)
	}
	if !tn.control.CompleteAuth(r.LoginURL) {
		t.Fatalf("the control server does not know the login URL %s", r.LoginURL)
	}
	r = waitReach(t, e, "published", func(r ownerpkg.Reachability) bool { return r.State == ownerpkg.ReachStatePublished })
	if r.URL != funnelURL || r.LoginURL != "" {
		t.Errorf("after the login: %+v", r)
	}
}

// TestFunnelControlUnreachable: with the control server down the card says so and what to do,
// and the local gateway answers.
func TestFunnelControlUnreachable(t *testing.T) {
	t.Parallel()
	tn := newTailnet(t, nil, false)
	tn.control.HTTPTestServer.Close()
	e := newEnv(t, withPublicIssuer(), withNode(func(o *node.Options) {
		o.Funnel = true
		o.Reach = reach.Config{ControlURL: tn.url, Ephemeral: true, ConnectTimeout: time.Second}
	}))
	r := waitReach(t, e, "failed", func(r ownerpkg.Reachability) bool { return r.State == "failed" })
	if !strings.Contains(r.Reason, "cannot reach the Tailscale control server") || !strings.Contains(r.Fix, "internet connection") {
		t.Errorf("control server down: %+v", r)
	}
	resp, err := http.Get(e.publicURL + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the local gateway with the control server down: %v %v", err, resp)
	}
	resp.Body.Close()
}

// TestFunnelLoggedOut: a device logged out of the tailnet (from the admin console) says so and
// what to do; turning Funnel off and on shows a new login link, and it publishes again.
func TestFunnelLoggedOut(t *testing.T) {
	t.Parallel()
	tn := newTailnet(t, nil, true)
	e := newEnv(t, withFunnel(tn), withNode(func(o *node.Options) { o.Funnel = false })) // pact.funnel, as the window sets it
	if _, err := e.n.Owner().SetFunnel(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	r := waitReach(t, e, "logging in", func(r ownerpkg.Reachability) bool { return r.LoginURL != "" })
	tn.control.CompleteAuth(r.LoginURL)
	waitReach(t, e, "published", func(r ownerpkg.Reachability) bool { return r.State == ownerpkg.ReachStatePublished })
	lc, err := e.n.FunnelTailnet().Tailnet().LocalClient()
	if err != nil {
		t.Fatal(err)
	}
	if err := lc.Logout(t.Context()); err != nil {
		t.Fatalf("log the device out: %v", err)
	}
	r = waitReach(t, e, "logged out", func(r ownerpkg.Reachability) bool { return r.State == "failed" })
	if !strings.Contains(r.Reason, "logged out") || !strings.Contains(r.Fix, "off and on") {
		t.Errorf("after the logout: %+v", r)
	}
	for _, on := range []bool{false, true} { // what the card's buttons do
		if _, err := e.n.Owner().SetFunnel(t.Context(), on); err != nil {
			t.Fatal(err)
		}
	}
	r = waitReach(t, e, "logging in again", func(r ownerpkg.Reachability) bool { return r.LoginURL != "" })
	if !tn.control.CompleteAuth(r.LoginURL) {
		t.Fatalf("the control server does not know the login URL %s", r.LoginURL)
	}
	waitReach(t, e, "published again", func(r ownerpkg.Reachability) bool { return r.State == ownerpkg.ReachStatePublished })
}
