package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	agentpkg "github.com/aether/aether/backend/agent"
	"github.com/aether/aether/backend/cardjson"
	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/identity"
	"github.com/aether/aether/backend/identity/identitytest"
	"github.com/aether/aether/backend/internal/loopport"
	"github.com/aether/aether/backend/node"

	_ "github.com/glebarez/go-sqlite" // pactSQLite: what the node stored, read and changed as one with the file could
)

// env is one running node with its policy, workspace, fake Codex and an
// identity issuer for the personal agents of a test.
type env struct {
	t         *testing.T
	n         *node.Node
	opts      node.Options
	dataDir   string
	policy    string
	workspace string
	publicURL string
	issuer    *identitytest.Issuer
	record    string // the fake Codex's record of every run
	admin     *adminClient
}

type envOption func(*envConfig)

type envConfig struct {
	brands    string // JSON of the brands array; default one read-only "review"
	codexEnv  []string
	codexPath string // the Codex binary; default the fake
	publicURL string // the policy's publicUrl and audience; default the gateway's own http:// address
	log       io.Writer
	proxies   []string // pact.trustedProxies
	node      []func(*node.Options)
	// publicIssuer: the policy leaves allowInsecureLocalIssuers off and the env's issuer is a
	// public one (identitytest.WithPublicName), as a public gateway needs (docs/threats.md N4).
	publicIssuer bool
	// insecureIssuers sets allowInsecureLocalIssuers even so (the N4 tests try it).
	insecureIssuers bool
}

// withPublicIssuer makes the env's issuer a public one and leaves the loopback flag off.
func withPublicIssuer() envOption { return func(c *envConfig) { c.publicIssuer = true } }

// withNode changes the node's options before it starts.
func withNode(fn func(*node.Options)) envOption {
	return func(c *envConfig) { c.node = append(c.node, fn) }
}

// withLog sends the node's log to w.
func withLog(w io.Writer) envOption { return func(c *envConfig) { c.log = w } }

func withBrands(js string) envOption { return func(c *envConfig) { c.brands = js } }

func withCodexEnv(kv ...string) envOption {
	return func(c *envConfig) { c.codexEnv = append(c.codexEnv, kv...) }
}

const reviewBrand = `[{"id":"review","name":"Code review","description":"Reviews code in my workspace.","capability":"review","workspace":"workspace","accessMode":"read_only","scope":{"id":"review:read_only","description":"Review code (read only)"}}]`

// ports are the Go tests' ports below the ephemeral range, each handed out once (loopport).
var ports = loopport.New(20000, 6000)

// freePort is a free port no other test of this binary gets: a node can be told it before it
// binds it.
func freePort(t *testing.T) int { return ports.Port(t) }

func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	cfg := envConfig{brands: reviewBrand}
	for _, o := range opts {
		o(&cfg)
	}
	root := t.TempDir()
	e := &env{t: t, dataDir: filepath.Join(root, "data"), policy: filepath.Join(root, "policy.json"),
		workspace: filepath.Join(root, "workspace"), record: filepath.Join(root, "fake-codex", "record.jsonl")}
	for _, dir := range []string{e.workspace, filepath.Dir(e.record)} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(e.workspace, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	port := freePort(t)
	e.publicURL = fmt.Sprintf("http://127.0.0.1:%d", port)
	if cfg.publicURL != "" {
		e.publicURL = cfg.publicURL
	}
	proxies, _ := json.Marshal(append([]string{}, cfg.proxies...))
	insecure := !cfg.publicIssuer || cfg.insecureIssuers
	pol := fmt.Sprintf(`{"pact":{"publicUrl":%q,"audience":%q,"allowInsecureLocalIssuers":%t,"trustedProxies":%s,"brands":%s}}`, e.publicURL, e.publicURL, insecure, proxies, cfg.brands)
	if err := os.WriteFile(e.policy, []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg.publicIssuer {
		e.issuer = identitytest.NewIssuer(t, identitytest.WithPublicName())
		cfg.node = append([]func(*node.Options){func(o *node.Options) {
			o.IssuerNet = func(c *identity.Config) {
				c.LookupIP, c.Dial, c.RootCAs = identitytest.LookupPublic, identitytest.DialPublic, e.issuer.RootCAs()
			}
		}}, cfg.node...)
	} else {
		e.issuer = identitytest.NewIssuer(t)
	}
	e.opts = node.Options{
		PolicyPath: e.policy, DataDir: e.dataDir, PactListen: fmt.Sprintf("127.0.0.1:%d", port),
		CodexPath: codextest.BuildFake(t),
		CodexEnv:  append([]string{"FAKE_CODEX_RECORD=" + e.record, "FAKE_CODEX_LOGGED_IN=1", "CODEX_API_KEY=e2e-test-key"}, cfg.codexEnv...),
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	e.opts.CodexTestMounts = codextest.Mounts(e.opts.CodexEnv)
	if cfg.codexPath != "" {
		e.opts.CodexPath = cfg.codexPath
	}
	if cfg.log != nil {
		e.opts.Logger = slog.New(slog.NewTextHandler(cfg.log, nil))
	}
	for _, fn := range cfg.node {
		fn(&e.opts)
	}
	if os.Getenv("AETHER_LOG") == "debug" {
		e.opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	e.start()
	t.Cleanup(func() { e.stop() })
	return e
}

func (e *env) start() {
	e.t.Helper()
	n, err := node.Start(context.Background(), e.opts)
	if err != nil {
		e.t.Fatalf("start node: %v", err)
	}
	e.n = n
	e.admin = newAdminClient(e.t, n)
}

func (e *env) stop() {
	if e.n == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := e.n.Stop(ctx); err != nil {
		e.t.Errorf("stop node: %v", err)
	}
	e.n = nil
}

func (e *env) restart() {
	e.t.Helper()
	e.stop()
	e.start()
}

// codexRuns is how many times the fake Codex was started.
func (e *env) codexRuns() int {
	data, err := os.ReadFile(e.record)
	if err != nil {
		return 0
	}
	return strings.Count(string(data), `"phase":"start"`)
}

// agent is a personal agent: an identity (iss, sub) and an a2a-go client that
// sends its identity JWT and, once it holds one, its delegation token.
type agent struct {
	e          *env
	issuer     *identitytest.Issuer // the env's issuer unless agentOf names another
	sub        string
	delegation string
	mu         sync.Mutex
}

func (e *env) agent(sub string) *agent { return e.agentOf(e.issuer, sub) }

// pactSQLite opens a node's pact.sqlite beside it, for a test that must read or change what
// the node stored where no API reaches (a flow's expiry, an issuer no test can reach).
func pactSQLite(t *testing.T, dataDir string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dataDir, "pact.sqlite")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// agentOf is an agent whose identity another issuer signs.
func (e *env) agentOf(is *identitytest.Issuer, sub string) *agent {
	return &agent{e: e, issuer: is, sub: sub}
}

func (a *agent) identityToken() string { return a.issuer.Token(a.sub, a.e.publicURL) }

// RoundTrip adds the PACT credentials as HTTP headers (never as metadata).
func (a *agent) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+a.identityToken())
	a.mu.Lock()
	if a.delegation != "" {
		r.Header.Set("PACT-Delegation", a.delegation)
	}
	a.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (a *agent) httpClient() *http.Client {
	return a2aHTTPClient(a)
}

// a2aHTTPClient is the HTTP client of a test's a2a-go client over rt. a2a-go's client reads
// the plain answer to a streaming call (an error before the stream) as the one event of a
// stream, as Aether's agent does (agent.StreamAnswers).
func a2aHTTPClient(rt http.RoundTripper) *http.Client {
	return &http.Client{Transport: agentpkg.StreamAnswers(rt), Timeout: waitLimit}
}

func (a *agent) setDelegation(tok string) {
	a.mu.Lock()
	a.delegation = tok
	a.mu.Unlock()
}

// card reads a brand's agent card as any agent would, with no credentials.
func (e *env) card(brand string) *a2a.AgentCard {
	e.t.Helper()
	resp, err := http.Get(e.publicURL + "/a2a/" + brand + "/.well-known/agent-card.json")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		e.t.Fatalf("card %s: %s", brand, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("card %s: %v", brand, err)
	}
	var c a2a.AgentCard
	if err := cardjson.Unmarshal(body, &c); err != nil { // a2a-go's decoder reads no StringList
		e.t.Fatalf("card %s: %v", brand, err)
	}
	return &c
}

// client is the official a2a-go client on the brand's card, preferring one binding.
func (a *agent) client(brand string, binding a2a.TransportProtocol) *a2aclient.Client {
	a.e.t.Helper()
	hc := a.httpClient()
	c, err := a2aclient.NewFromCard(context.Background(), a.e.card(brand),
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{binding}}),
		a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc))
	if err != nil {
		a.e.t.Fatalf("a2a client: %v", err)
	}
	return c
}

func textMessage(text string) *a2a.SendMessageRequest {
	return &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))}
}

func (a *agent) send(c *a2aclient.Client, taskID a2a.TaskID, text string) *a2a.Task {
	a.e.t.Helper()
	req := textMessage(text)
	req.Message.TaskID = taskID
	res, err := c.SendMessage(context.Background(), req)
	if err != nil {
		a.e.t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		a.e.t.Fatalf("SendMessage answered %T, want a task", res)
	}
	return task
}

// authData is the data part of an AUTH_REQUIRED status message.
func authData(t *testing.T, task *a2a.Task) map[string]any {
	t.Helper()
	if task.Status.State != a2a.TaskStateAuthRequired {
		t.Fatalf("task state %s, want AUTH_REQUIRED", task.Status.State)
	}
	if task.Status.Message == nil {
		t.Fatal("AUTH_REQUIRED without a status message")
	}
	for _, p := range task.Status.Message.Parts {
		if d, ok := p.Data().(map[string]any); ok {
			return d
		}
	}
	t.Fatal("AUTH_REQUIRED status message has no data part")
	return nil
}

// oauthForm posts a device-flow form with the agent's identity.
func (a *agent) oauthForm(endpoint string, form url.Values) (int, map[string]any) {
	a.e.t.Helper()
	req, _ := http.NewRequest("POST", endpoint, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+a.identityToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// adminClient is the owner in a browser-less form: signed in with the admin
// token link, calling the admin JSON API over HTTPS with its CSRF token.
type adminClient struct {
	t      *testing.T
	base   string
	origin string
	hc     *http.Client
	csrf   string
}

// newAdminClient signs in with a one-time sign-in link, as the owner's browser does.
func newAdminClient(t *testing.T, n *node.Node) *adminClient {
	t.Helper()
	return adminSignIn(t, n.Addresses().Admin, func(hc *http.Client, base string) (*http.Response, error) {
		return hc.Get(n.SignInURL())
	})
}

// adminClientAt signs in to the admin UI at addr with the admin token, as the sign-in page
// posts it.
func adminClientAt(t *testing.T, addr, token string) *adminClient {
	t.Helper()
	return adminSignIn(t, addr, func(hc *http.Client, base string) (*http.Response, error) {
		return hc.PostForm(base+"/login", url.Values{"token": {token}})
	})
}

func adminSignIn(t *testing.T, addr string, signIn func(hc *http.Client, base string) (*http.Response, error)) *adminClient {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: waitLimit,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, // the node's self-signed admin certificate
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	a := &adminClient{t: t, base: "https://" + addr, hc: hc}
	a.origin = a.base
	resp, err := signIn(hc, a.base)
	if err != nil {
		t.Fatalf("sign in: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %s", resp.Status)
	}
	var s struct{ CSRFToken string }
	a.do("GET", "/api/session", nil, &s)
	a.csrf = s.CSRFToken
	return a
}

func (a *adminClient) do(method, path string, body any, out any) int {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, a.base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method != "GET" {
		req.Header.Set("Origin", a.origin)
		req.Header.Set("X-CSRF-Token", a.csrf)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

type consentRequest struct {
	ID, UserCode string
	Agent        struct{ Issuer, Subject string }
	Brand        struct{ ID string }
}

// pending waits for the consent request with that user code to be listed.
func (a *adminClient) pending(userCode string) consentRequest {
	a.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		var out struct{ Requests []consentRequest }
		a.do("GET", "/api/consent", nil, &out)
		for _, r := range out.Requests {
			if r.UserCode == userCode {
				return r
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	a.t.Fatalf("no pending consent request with code %s", userCode)
	return consentRequest{}
}

func (a *adminClient) decide(userCode, decision string) (int, map[string]any) {
	a.t.Helper()
	r := a.pending(userCode)
	var out map[string]any
	code := a.do("POST", "/api/consent/"+r.ID+"/decision", map[string]string{"userCode": userCode, "decision": decision, "duration": "1d"}, &out)
	return code, out
}

// withPublicURL serves the node at another publicUrl, e.g. a TLS proxy's https:// one.
func withPublicURL(u string) envOption { return func(c *envConfig) { c.publicURL = u } }

// withTrustedProxies sets pact.trustedProxies.
func withTrustedProxies(cidrs ...string) envOption {
	return func(c *envConfig) { c.proxies = cidrs }
}

// withCodexPath runs the node with another Codex binary (a missing one, say).
func withCodexPath(p string) envOption { return func(c *envConfig) { c.codexPath = p } }
