package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aether/aether/backend/admin"
	"github.com/aether/aether/backend/datadir"
	"github.com/aether/aether/backend/identity"
	"github.com/aether/aether/backend/node"
	ownerpkg "github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/pactmcp"
)

// tlsFront is an https front on 127.0.0.1 with a certificate of the test CA, bound before its
// node starts (the node's publicUrl names it) and proxying to the node's gateway once it runs.
type tlsFront struct {
	ln  net.Listener
	url string
}

func newTLSFront(t *testing.T, ca *testCA) *tlsFront {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.root, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &tlsFront{ln: ln, url: "https://" + ln.Addr().String()}
}

// to serves the front, proxying to the gateway at addr (streams flushed as they come).
func (f *tlsFront) to(addr string) {
	target, _ := url.Parse("http://" + addr)
	p := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }, FlushInterval: -1}
	go (&http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}).Serve(f.ln)
}

// mcpClient is `aether mcp` started as an assistant starts it, driven by the Go SDK's client,
// with every message it exchanged and every progress message it told.
type mcpClient struct {
	s          *sdk.ClientSession
	transcript *lockedBuffer
	mu         sync.Mutex
	progress   []string
	code       chan string
}

var userCodeRE = regexp.MustCompile(`\(code ([A-Z0-9]{4}-[A-Z0-9]{4})\)`)

func startMCP(t *testing.T, bin string, env []string, args ...string) *mcpClient {
	t.Helper()
	c := &mcpClient{transcript: &lockedBuffer{}, code: make(chan string, 4)}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	client := sdk.NewClient(&sdk.Implementation{Name: "e2e-assistant", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			c.mu.Lock()
			c.progress = append(c.progress, req.Params.Message)
			c.mu.Unlock()
			if m := userCodeRE.FindStringSubmatch(req.Params.Message); m != nil {
				c.code <- m[1]
			}
		}})
	s, err := client.Connect(context.Background(), &sdk.LoggingTransport{Transport: &sdk.CommandTransport{Command: cmd}, Writer: c.transcript}, nil)
	if err != nil {
		t.Fatalf("start aether mcp: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	c.s = s
	return c
}

// call calls a tool with a progress token and decodes its structured answer into out.
func (c *mcpClient) call(t *testing.T, name string, args, out any) *sdk.CallToolResult {
	t.Helper()
	p := &sdk.CallToolParams{Name: name, Arguments: args}
	p.SetProgressToken(name + "-" + time.Now().Format("150405.000000"))
	res, err := c.s.CallTool(context.Background(), p)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s answered an error: %s", name, toolText(res))
	}
	data, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("%s: structured answer %s: %v", name, data, err)
	}
	return res
}

func toolText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestMCPTwoNodes is the whole exchange with real parts: node A issues its owner's agent's
// identity at its https publicUrl; A's `aether mcp`, driven over stdio by the Go SDK's MCP
// client, asks a brand of node B (https too, through a test CA only B and the MCP server
// trust); B's owner approves through B's admin API; the answer and its verified receipt come
// back through MCP and stand on A's Received list; B's grants name A's agent.
func TestMCPTwoNodes(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	frontA, frontB := newTLSFront(t, ca), newTLSFront(t, ca)
	// Both nodes serve the built UI, for the window's part at the end (skipped without a browser).
	ui := withNode(func(o *node.Options) { o.UI = os.DirFS(filepath.Join("..", "..", "frontend", "dist")) })
	a := newEnv(t, withPublicURL(frontA.url), ui)
	b := newEnv(t, withPublicURL(frontB.url), ui, withNode(func(o *node.Options) { o.IssuerNet = func(c *identity.Config) { c.RootCAs = ca.pool() } }))
	frontA.to(a.n.Addresses().Gateway)
	frontB.to(b.n.Addresses().Gateway)

	addr, token, err := datadir.LocalAPI(a.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	apiA := admin.NewClient(addr, token)
	ctx := context.Background()
	if _, err := apiA.AddAgent(ctx, "claude-desktop"); err != nil {
		t.Fatal(err)
	}

	caFile := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.root.Raw}), 0o600)
	bin := buildAether(t)
	c := startMCP(t, bin, []string{"SSL_CERT_FILE=" + caFile},
		"mcp", "--agent", "claude-desktop", "--data-dir", a.dataDir, "--agent-dir", filepath.Join(t.TempDir(), "agent"), "--wait", "2s")
	cardURL := frontB.url + "/a2a/review/.well-known/agent-card.json"

	var tools *sdk.ListToolsResult
	if tools, err = c.s.ListTools(ctx, nil); err != nil || len(tools.Tools) != 3 {
		t.Fatalf("tools: %v %v", tools, err)
	}

	var d pactmcp.Description
	c.call(t, "pact_describe", map[string]any{"url": cardURL}, &d)
	if d.Name != "Code review" || d.Brand != "review" || d.AccessMode != "read_only" || d.Scope != "review:read_only" || d.Node != frontB.url {
		t.Fatalf("pact_describe: %+v", d)
	}

	// The first ask waits for B's owner: it answers "waiting" with a handle after --wait.
	var ans pactmcp.Answer
	c.call(t, "pact_ask", map[string]any{"url": cardURL, "message": "Review main.go"}, &ans)
	if ans.State != "waiting" || ans.Handle == "" || ans.Code == "" || !strings.Contains(ans.Waiting, ans.Code) {
		t.Fatalf("first pact_ask: %+v", ans)
	}
	code := <-c.code
	if code != ans.Code {
		t.Fatalf("progress told code %s, the answer %s", code, ans.Code)
	}
	req := b.admin.pending(code)
	if req.Agent.Issuer != frontA.url+"/id" || req.Agent.Subject != "claude-desktop" {
		t.Fatalf("B's consent request names %+v, want claude-desktop at %s/id", req.Agent, frontA.url)
	}
	t.Run("B's consent page names node A and its agent", func(t *testing.T) {
		root := browserRoot(t)
		ob := startOwner(t, b, root)
		browse[map[string]any](t, ob, "signin", map[string]any{"link": b.n.SignInURL()})
		browse[map[string]any](t, ob, "openRequest", map[string]any{
			"link": "https://" + b.n.Addresses().Admin + "/pact/consent?user_code=" + code, "userCode": code,
			"issuerOrigin": frontA.url, "subject": "claude-desktop",
			"brand": "Code review", "brandId": "review", "scope": "review:read_only", "shot": "mcp-b-consent.png"})
		noBrowserProblems(t, ob)
	})
	if st, _ := b.admin.decide(code, "allow"); st != http.StatusOK {
		t.Fatalf("approve: %d", st)
	}
	for ans.State == "waiting" {
		handle := ans.Handle
		ans = pactmcp.Answer{}
		c.call(t, "pact_ask", map[string]any{"handle": handle}, &ans)
	}
	checkAnswered(t, "first ask", ans, frontB.url)

	// A second ask needs no approval: the time from pact_ask to the answer.
	start := time.Now()
	ans = pactmcp.Answer{}
	c.call(t, "pact_ask", map[string]any{"url": cardURL, "message": "Review main.go again"}, &ans)
	took := time.Since(start)
	for ans.State == "waiting" {
		handle := ans.Handle
		ans = pactmcp.Answer{}
		c.call(t, "pact_ask", map[string]any{"handle": handle}, &ans)
	}
	took = time.Since(start)
	checkAnswered(t, "second ask", ans, frontB.url)
	t.Logf("pact_ask to answer, approval excluded (fake Codex): %s", took)

	// The receipts are home: A's Received list, pact_receipts, and `aether receipts verify`.
	got, err := apiA.Received(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Receipts) != 2 {
		t.Fatalf("A's Received list: %+v", got.Receipts)
	}
	for _, r := range got.Receipts {
		if r.Node != frontB.url || r.Brand != "review" || r.Agent != "claude-desktop" || r.Status != "completed" || !r.Verified || !r.LogConsistent || r.Ran == "" {
			t.Fatalf("received: %+v", r)
		}
	}
	// The first answer's checkpoint, cosigned by the agent as a witness, went with the second ask.
	var page struct{ Log struct{ Witnesses int } }
	b.admin.do("GET", "/api/receipts", nil, &page)
	if page.Log.Witnesses != 1 {
		t.Fatalf("B's receipts log has %d witnesses, want A's agent", page.Log.Witnesses)
	}
	var held pactmcp.ReceiptsOut
	c.call(t, "pact_receipts", map[string]any{"filter": "review"}, &held)
	if len(held.Receipts) != 2 {
		t.Fatalf("pact_receipts: %+v", held)
	}
	var grants struct {
		Grants []struct {
			Agent struct{ Issuer, Subject string }
		}
	}
	b.admin.do("GET", "/api/grants", nil, &grants)
	if len(grants.Grants) != 1 || grants.Grants[0].Agent.Issuer != frontA.url+"/id" || grants.Grants[0].Agent.Subject != "claude-desktop" {
		t.Fatalf("B's grants: %+v", grants)
	}
	t.Run("the MCP Inspector CLI lists the tools and calls pact_describe", func(t *testing.T) {
		inspector := inspectorBin(t)
		base := []string{"--cli", "-e", "SSL_CERT_FILE=" + caFile, bin, "mcp", "--agent", "claude-desktop", "--data-dir", a.dataDir}
		catalog := "MCP_CATALOG_PATH=" + filepath.Join(t.TempDir(), "mcp.json") // not the user's ~/.mcp-inspector
		run := func(args ...string) ([]byte, error) {
			cmd := exec.Command(inspector, append(base, args...)...)
			cmd.Env = append(os.Environ(), catalog)
			return cmd.CombinedOutput()
		}
		out, err := run("--method", "tools/list")
		if err != nil || !strings.Contains(string(out), `"pact_ask"`) || !strings.Contains(string(out), `"pact_describe"`) || !strings.Contains(string(out), `"pact_receipts"`) {
			t.Fatalf("tools/list: %v\n%s", err, out)
		}
		out, err = run("--method", "tools/call", "--tool-name", "pact_describe", "--tool-arg", "url="+cardURL)
		if err != nil || !strings.Contains(string(out), "Code review") || !strings.Contains(string(out), "verified with the node JWKS") {
			t.Fatalf("tools/call pact_describe: %v\n%s", err, out)
		}
	})
	t.Run("aether receipts verify checks the received receipts again", func(t *testing.T) {
		if code, out := verifyCLI(t, a.dataDir); code != 0 || !strings.Contains(out, "Received: 2 receipt(s)") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
	t.Run("Q3 a receipt that does not verify, or is not for the agent, is refused at home", func(t *testing.T) {
		resp, err := a.admin.hc.Get(a.admin.base + "/api/receipts/received/export")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var line ownerpkg.ReceivedExport
		if err := json.NewDecoder(resp.Body).Decode(&line); err != nil {
			t.Fatalf("export: %v", err)
		}
		forged := line.JWS[:len(line.JWS)-4] + "AAAA"
		if forged == line.JWS {
			forged = line.JWS[:len(line.JWS)-4] + "BBBB"
		}
		for name, req := range map[string]ownerpkg.ReceivedRequest{
			"a forged signature":   {Agent: "claude-desktop", JWS: forged, Proof: line.Proof, JWKS: line.JWKS, LogConsistent: true},
			"another agent's":      {Agent: "assistant", JWS: line.JWS, Proof: line.Proof, JWKS: line.JWKS, LogConsistent: true},
			"checked with no keys": {Agent: "claude-desktop", JWS: line.JWS, Proof: line.Proof, JWKS: json.RawMessage(`{"keys":[]}`), LogConsistent: true},
		} {
			if _, err := apiA.KeepReceived(ctx, req); err == nil || !strings.Contains(err.Error(), "400") {
				t.Errorf("%s: kept (%v)", name, err)
			}
		}
		if got, _ := apiA.Received(ctx); len(got.Receipts) != 2 {
			t.Fatalf("the Received list has %d receipts after the refusals", len(got.Receipts))
		}
	})
	t.Run("I5 the identity key is not the receipts key", func(t *testing.T) {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool()}}}
		kids := func(u string) map[string]bool {
			resp, err := hc.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var set struct{ Keys []struct{ Kid string } }
			json.NewDecoder(resp.Body).Decode(&set)
			out := map[string]bool{}
			for _, k := range set.Keys {
				out[k.Kid] = true
			}
			return out
		}
		node, id := kids(frontA.url+"/.well-known/jwks.json"), kids(frontA.url+"/id/.well-known/jwks.json")
		if len(node) == 0 || len(id) != 1 {
			t.Fatalf("node JWKS %v, issuer JWKS %v", node, id)
		}
		for k := range id {
			if node[k] {
				t.Fatalf("the issuer's key %s is in the node JWKS: it would sign receipts too", k)
			}
		}
	})
	t.Run("the window: My agents, the Received list, and B's Sharing page naming A's agent", func(t *testing.T) {
		root := browserRoot(t)
		o := startOwner(t, a, root)
		browse[map[string]any](t, o, "signin", map[string]any{"link": a.n.SignInURL()})
		agents := browse[struct{ Rows []struct{ Name, Text string } }](t, o, "myAgents", map[string]any{"name": "assistant", "off": "assistant", "shot": "mcp-my-agents.png"})
		if len(agents.Rows) != 2 || agents.Rows[0].Name != "claude-desktop" || !strings.Contains(agents.Rows[1].Text, "Off") {
			t.Fatalf("My agents: %+v", agents.Rows)
		}
		recv := browse[struct{ Rows []struct{ RID, Text string } }](t, o, "received", map[string]any{"shot": "mcp-received.png"})
		if len(recv.Rows) != 2 {
			t.Fatalf("Received: %+v", recv.Rows)
		}
		for _, r := range recv.Rows {
			for _, want := range []string{frontB.url, "review", "claude-desktop", "Completed", "Verified", "Consistent", "Codex"} {
				if !strings.Contains(r.Text, want) {
					t.Errorf("a Received row lacks %q: %q", want, r.Text)
				}
			}
		}
		noBrowserProblems(t, o)
		ob := startOwner(t, b, root)
		browse[map[string]any](t, ob, "signin", map[string]any{"link": b.n.SignInURL()})
		sharing := browse[struct{ Rows []struct{ ID, Text string } }](t, ob, "sharing", map[string]any{"shot": "mcp-b-sharing.png"})
		if len(sharing.Rows) != 1 || !strings.Contains(sharing.Rows[0].Text, "claude-desktop") || !strings.Contains(sharing.Rows[0].Text, "127.0.0.1") {
			t.Fatalf("B's Sharing page: %+v", sharing.Rows)
		}
		if _, err := apiA.MintIdentity(ctx, "assistant", frontB.url); err == nil || !strings.Contains(err.Error(), "turned off") {
			t.Fatalf("I4 the agent turned off in the window still gets a token: %v", err)
		}
	})
	if os.Getenv("AETHER_MCP_TRANSCRIPT") != "" {
		os.WriteFile(os.Getenv("AETHER_MCP_TRANSCRIPT"), []byte(c.transcript.String()), 0o600)
	}
}

func checkAnswered(t *testing.T, what string, ans pactmcp.Answer, node string) {
	t.Helper()
	r := ans.Receipt
	if ans.State != "answered" || ans.Answer == "" || ans.Node != node || r == nil || !r.Signature || !r.LogIncluded || !r.LogConsistent || !r.KeptAtHome || r.Problem != "" {
		t.Fatalf("%s: %+v (receipt %+v)", what, ans, r)
	}
}

// inspectorBin is the MCP Inspector's CLI from interop/node_modules (pinned in
// interop/package.json), or skips (fails with AETHER_REQUIRE_BROWSER=1) when it is missing.
func inspectorBin(t *testing.T) string {
	t.Helper()
	root := jsSDKRoot(t)
	bin := filepath.Join(root, "interop", "node_modules", ".bin", "mcp-inspector")
	if _, err := os.Stat(bin); err != nil {
		msg := "the MCP Inspector test needs interop/node_modules with @modelcontextprotocol/inspector (scripts/deps.sh, or cd interop && npm ci)"
		if os.Getenv("AETHER_REQUIRE_BROWSER") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}
