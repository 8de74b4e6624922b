package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"golang.org/x/oauth2"

	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/node"
	ownerpkg "github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/receipts"
	"github.com/aether/aether/backend/version"
)

// The browser tests: the owner is Debian's Chromium driven by frontend/tests/consent.mjs
// (playwright-core) against a real node whose admin listener serves the built UI
// (frontend/dist). Screenshots land in <repo>/test-results/ui/ for CI to keep.

// uiShotsDir is where the screenshots go, relative to the repository root.
const uiShotsDir = "test-results/ui"

// evilHost is a name Chromium resolves to 127.0.0.1 (--host-resolver-rules): another site
// served from loopback, and a rebinding name for the admin port.
const evilHost = "evil.example"

// browserRoot returns the repository root, or skips (fails, with AETHER_REQUIRE_BROWSER=1)
// when Chromium, node, playwright-core or the built UI are missing.
func browserRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	chromium := os.Getenv("CHROMIUM_PATH")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	var missing []string
	if _, err := os.Stat(chromium); err != nil {
		missing = append(missing, chromium+" (apt-get install chromium)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node on PATH")
	}
	if _, err := os.Stat(filepath.Join(root, "frontend", "node_modules", "playwright-core", "package.json")); err != nil {
		missing = append(missing, "frontend/node_modules/playwright-core (cd frontend && npm ci)")
	}
	if _, err := os.Stat(filepath.Join(root, "frontend", "dist", "index.html")); err != nil {
		missing = append(missing, "frontend/dist (cd frontend && npm run build)")
	}
	if len(missing) > 0 {
		msg := "browser test needs " + strings.Join(missing, ", ")
		if os.Getenv("AETHER_REQUIRE_BROWSER") == "1" {
			t.Fatal(msg + " (AETHER_REQUIRE_BROWSER=1)")
		}
		t.Skip(msg + "; set AETHER_REQUIRE_BROWSER=1 to make this a failure")
	}
	return root
}

// newUIEnv is newEnv with the built UI served on the admin listener. The harness has no
// option for it, so the node is started again with Options.UI set (same data dir).
func newUIEnv(t *testing.T, root string, opts ...envOption) *env {
	t.Helper()
	e := newEnv(t, opts...)
	e.stop()
	e.opts.UI = os.DirFS(filepath.Join(root, "frontend", "dist"))
	e.start()
	return e
}

// owner is the node's owner in Chromium: a running consent.mjs that takes one step per line.
type owner struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte
	seq    int
	stderr *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// clearShots empties the screenshot folder once per test binary, before the first browser starts.
var clearShots sync.Once

func startOwner(t *testing.T, e *env, root string) *owner {
	t.Helper()
	shots := filepath.Join(root, uiShotsDir)
	clearShots.Do(func() { os.RemoveAll(shots) })
	cmd := exec.Command("node", filepath.Join(root, "frontend", "tests", "consent.mjs"),
		"--admin", "https://"+e.n.Addresses().Admin, "--out", shots, "--evil-host", evilHost)
	cmd.Dir = filepath.Join(root, "frontend")
	o := &owner{cmd: cmd, lines: make(chan []byte, 1), stderr: &syncBuffer{}}
	cmd.Stderr = o.stderr
	var err error
	if o.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start consent.mjs: %v", err)
	}
	go func() {
		defer close(o.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			o.lines <- bytes.Clone(sc.Bytes())
		}
	}()
	t.Cleanup(func() {
		o.stdin.Close() // the script closes Chromium and exits
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(waitLimit):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("consent.mjs stderr:\n%s", o.stderr.String())
		}
	})
	return o
}

// step runs one browser step and returns its raw JSON result; a failed step fails the test.
func (o *owner) step(t *testing.T, name string, args map[string]any) []byte {
	t.Helper()
	o.seq++
	line, _ := json.Marshal(map[string]any{"seq": o.seq, "step": name, "args": args})
	if _, err := o.stdin.Write(append(line, '\n')); err != nil {
		t.Fatalf("browser step %s: %v\n%s", name, err, o.stderr.String())
	}
	select {
	case ans, ok := <-o.lines:
		if !ok {
			t.Fatalf("browser step %s: consent.mjs exited\n%s", name, o.stderr.String())
		}
		var head struct {
			Seq    int
			OK     bool
			Error  string
			Result json.RawMessage
		}
		if err := json.Unmarshal(ans, &head); err != nil || head.Seq != o.seq {
			t.Fatalf("browser step %s: answer %.300q (%v)", name, ans, err)
		}
		if !head.OK {
			t.Fatalf("browser step %s failed: %s", name, head.Error)
		}
		return head.Result
	case <-time.After(waitLimit):
		t.Fatalf("browser step %s: no answer within 60s\n%s", name, o.stderr.String())
	}
	return nil
}

// browse runs a step and decodes its answer into T.
func browse[T any](t *testing.T, o *owner, name string, args map[string]any) T {
	t.Helper()
	var out T
	if err := json.Unmarshal(o.step(t, name, args), &out); err != nil {
		t.Fatalf("browser step %s: %v", name, err)
	}
	return out
}

// outcome is what a consent card says after a decision (and the grant Allow made).
type outcome struct{ Title, Detail, GrantID string }

// noBrowserProblems fails when an admin page logged a script error or a CSP violation.
func noBrowserProblems(t *testing.T, o *owner) {
	t.Helper()
	if p := browse[struct{ Problems []string }](t, o, "problems", nil).Problems; len(p) > 0 {
		t.Errorf("the admin pages reported problems:\n%s", strings.Join(p, "\n"))
	}
}

// deviceAgent is a personal agent's OAuth side: golang.org/x/oauth2's device flow client
// sending the agent's identity JWT on every request.
func deviceAgent(a *agent, data map[string]any) (*oauth2.Config, context.Context) {
	oc := &oauth2.Config{ClientID: a.sub + "-agent", Scopes: []string{data["scope"].(string)},
		Endpoint: oauth2.Endpoint{DeviceAuthURL: data["deviceAuthorizationUrl"].(string), TokenURL: data["tokenUrl"].(string)}}
	return oc, context.WithValue(context.Background(), oauth2.HTTPClient, a.httpClient())
}

type tokenResult struct {
	tok *oauth2.Token
	err error
}

// pollToken runs x/oauth2's polling loop in the background, as an agent waits for the owner.
func pollToken(oc *oauth2.Config, ctx context.Context, da *oauth2.DeviceAuthResponse) <-chan tokenResult {
	ch := make(chan tokenResult, 1)
	go func() {
		tok, err := oc.DeviceAccessToken(ctx, da)
		ch <- tokenResult{tok, err}
	}()
	return ch
}

func awaitToken(t *testing.T, ch <-chan tokenResult) tokenResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitLimit):
		t.Fatal("the agent's token poll did not finish within 30s")
	}
	return tokenResult{}
}

// awaitTaskState polls a task until it reaches state.
func awaitTaskState(t *testing.T, c *a2aclient.Client, id a2a.TaskID, state a2a.TaskState) *a2a.Task {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		task, err := c.GetTask(context.Background(), &a2a.GetTaskRequest{ID: id})
		if err != nil {
			t.Fatalf("GetTask %s: %v", id, err)
		}
		if task.Status.State == state {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %s, want %s: %q", id, task.Status.State, state, statusText(task))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// grantsOf lists the grants of the agent with that subject, as the admin API reports them.
func grantsOf(t *testing.T, e *env, sub string) []map[string]any {
	t.Helper()
	var out struct{ Grants []map[string]any }
	if code := e.admin.do("GET", "/api/grants", nil, &out); code != 200 {
		t.Fatalf("grants: %d", code)
	}
	var mine []map[string]any
	for _, g := range out.Grants {
		if a, _ := g["agent"].(map[string]any); a["subject"] == sub {
			mine = append(mine, g)
		}
	}
	return mine
}

// stillPending says whether the request with that user code is still awaiting the owner.
func stillPending(t *testing.T, e *env, userCode string) bool {
	t.Helper()
	var out struct{ Requests []consentRequest }
	if code := e.admin.do("GET", "/api/consent", nil, &out); code != 200 {
		t.Fatalf("consent requests: %d", code)
	}
	for _, r := range out.Requests {
		if r.UserCode == userCode {
			return true
		}
	}
	return false
}

// pageState is what markup injected by an agent would change on a page (C9).
type pageState struct {
	Pwned                                        any
	CSPViolations, Imgs, Handlers, ScriptsInBody int
	Bidi, OverflowX                              bool
}

// TestBrowserConsent is the consent path with real parts: the node on loopback, personal
// agents using x/oauth2's device flow client with their identity JWTs, and the owner deciding
// in Chromium. Allow → token → the delegated turn completes with a receipt; Deny →
// access_denied and the waiting task ends REJECTED; Revoke on /sharing → the next turn with
// the old token is AUTH_REQUIRED (revoked). The pages are photographed on the way.
func TestBrowserConsent(t *testing.T) {
	root := browserRoot(t)
	t.Parallel()
	e := newUIEnv(t, root)
	o := startOwner(t, e, root)
	signin := browse[struct{ URL, Title string }](t, o, "signin", map[string]any{"link": e.n.SignInURL()})
	if signin.Title != "Consent · Aether" {
		t.Errorf("after sign-in the page title is %q", signin.Title)
	}
	wantConsent := "https://" + e.n.Addresses().Admin + "/pact/consent"

	// alice asks, the owner allows in the browser, alice's turn runs.
	alice := e.agent("alice")
	ac := alice.client("review", a2a.TransportProtocolJSONRPC)
	task := alice.send(ac, "", "Review main.go please")
	data := authData(t, task)
	if data["reason"] != "missing" || data["consentUrl"] != wantConsent {
		t.Errorf("AUTH_REQUIRED data %v", data)
	}
	oc, octx := deviceAgent(alice, data)
	da, err := oc.DeviceAuth(octx)
	if err != nil {
		t.Fatalf("device authorization: %v", err)
	}
	if da.VerificationURIComplete != wantConsent+"?user_code="+da.UserCode {
		t.Errorf("verification_uri_complete %q", da.VerificationURIComplete)
	}
	shown := browse[struct{ CacheControl, Text string }](t, o, "openRequest", map[string]any{
		"link": da.VerificationURIComplete, "userCode": da.UserCode, "issuerOrigin": e.issuer.URL, "subject": "alice",
		"brand": "Code review", "brandId": "review", "scope": "review:read_only", "shot": "consent.png"})
	if shown.CacheControl != "no-store" {
		t.Errorf("the consent page's Cache-Control is %q, want no-store", shown.CacheControl)
	}
	polled := pollToken(oc, octx, da)
	allowed := browse[outcome](t, o, "decide", map[string]any{"userCode": da.UserCode, "decision": "allow", "shot": "consent-allowed.png"})
	if allowed.Title != "Allowed for 30 days" || !strings.Contains(allowed.Detail, "can now use Code review") {
		t.Errorf("after Allow the page says %q: %q", allowed.Title, allowed.Detail)
	}
	grantID := allowed.GrantID
	if g := grantsOf(t, e, "alice"); len(g) != 1 || g[0]["id"] != grantID || g[0]["status"] != "active" {
		t.Fatalf("after Allow the page shows grant %q; the node has %v", grantID, g)
	}
	tr := awaitToken(t, polled)
	if tr.err != nil {
		t.Fatalf("the agent's token poll after Allow: %v", tr.err)
	}
	alice.setDelegation(tr.tok.AccessToken)
	done := alice.send(ac, task.ID, "Review main.go please")
	if done.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("delegated turn ended %s: %q", done.Status.State, statusText(done))
	}
	answer, rec := artifacts(t, done)
	if answer != codextest.DefaultAnswer {
		t.Errorf("answer %q", answer)
	}
	claims, err := receipts.VerifyOne(rec, nodeJWKS(t, e))
	if err != nil {
		t.Fatalf("receipt: %v", err)
	}
	if claims.Grant != grantID || claims.Agent.Subject != "alice" || claims.Status != "completed" {
		t.Errorf("receipt claims grant %q agent %q status %q; want grant %s", claims.Grant, claims.Agent.Subject, claims.Status, grantID)
	}

	// bob asks, the owner denies: bob's poll gets access_denied, his waiting task ends REJECTED.
	bob := e.agent("bob")
	bc := bob.client("review", a2a.TransportProtocolHTTPJSON)
	waiting := bob.send(bc, "", "Review main.go please")
	boc, bctx := deviceAgent(bob, authData(t, waiting))
	bda, err := boc.DeviceAuth(bctx)
	if err != nil {
		t.Fatalf("device authorization: %v", err)
	}
	browse[map[string]any](t, o, "openRequest", map[string]any{
		"link": bda.VerificationURIComplete, "userCode": bda.UserCode, "issuerOrigin": e.issuer.URL, "subject": "bob",
		"brand": "Code review", "brandId": "review", "scope": "review:read_only"})
	bpolled := pollToken(boc, bctx, bda)
	denied := browse[outcome](t, o, "decide", map[string]any{"userCode": bda.UserCode, "decision": "deny", "shot": "consent-denied.png"})
	if denied.Title != "Denied" {
		t.Errorf("after Deny the page says %q", denied.Title)
	}
	btr := awaitToken(t, bpolled)
	var rerr *oauth2.RetrieveError
	if !errors.As(btr.err, &rerr) || rerr.ErrorCode != "access_denied" {
		t.Errorf("the agent's token poll after Deny: %v; want access_denied", btr.err)
	}
	rejected := awaitTaskState(t, bc, waiting.ID, a2a.TaskStateRejected)
	if !strings.Contains(statusText(rejected), "denied") {
		t.Errorf("REJECTED reason %q", statusText(rejected))
	}
	if g := grantsOf(t, e, "bob"); len(g) != 0 {
		t.Errorf("bob has grants after Deny: %v", g)
	}

	// The receipt on /receipts verifies; the status page counts nothing pending.
	rv := browse[struct {
		Verify, Detail string
		OK             bool
	}](t, o, "receipt", map[string]any{"id": claims.RID, "shot": "receipts.png"})
	if !rv.OK || !strings.Contains(rv.Verify, "Valid signature") || !strings.Contains(rv.Detail, string(task.ID)) {
		t.Errorf("receipt page: verify %q ok %v", rv.Verify, rv.OK)
	}
	st := browse[struct{ Text string }](t, o, "status", map[string]any{"shot": "status.png"})
	for _, want := range []string{e.publicURL, "Code review", "Confinement: bubblewrap", "each turn sees only its brand's workspace",
		"API key from CODEX_API_KEY: the node's model gateway holds it; each turn's Codex gets a one-time token"} {
		if !strings.Contains(st.Text, want) {
			t.Errorf("the status page does not show %q:\n%s", want, st.Text)
		}
	}
	if !regexp.MustCompile(`(?i:Aether version)\s+` + regexp.QuoteMeta(version.String()) + `\b`).MatchString(st.Text) {
		t.Errorf("the status page does not show the version %q:\n%s", version.String(), st.Text)
	}

	// A second, lasting grant so the sharing page shows more than one state.
	carol := e.agent("carol")
	code, start := carol.oauthForm(e.publicURL+"/pact/device_authorization", url.Values{"scope": {"review:read_only"}})
	if code != 200 {
		t.Fatalf("device authorization: %d %v", code, start)
	}
	if code, out := e.admin.decideLasting(start["user_code"].(string), "allow", "forever"); code != 200 {
		t.Fatalf("allow carol: %d %v", code, out)
	}

	// The owner revokes alice on /sharing: her next turn with the old token is refused.
	sh := browse[struct {
		Rows []struct {
			ID, Text string
			Revoke   bool
		}
	}](t, o, "sharing", map[string]any{"wait": grantID, "shot": "sharing.png"})
	if len(sh.Rows) != 2 || sh.Rows[0].ID == grantID || sh.Rows[1].ID != grantID || !sh.Rows[1].Revoke {
		t.Errorf("sharing rows %+v; want carol's then alice's grant %s, each with Revoke", sh.Rows, grantID)
	}
	browse[map[string]any](t, o, "revoke", map[string]any{"grantId": grantID, "dialogShot": "sharing-revoke-dialog.png", "shot": "sharing-revoked.png"})
	if g := grantsOf(t, e, "alice"); len(g) != 1 || g[0]["status"] != "revoked" {
		t.Errorf("alice's grant after Revoke: %v", g)
	}
	runs := e.codexRuns()
	again := alice.send(ac, "", "Review main.go again")
	if r := authData(t, again)["reason"]; r != "revoked" {
		t.Errorf("the turn after Revoke: reason %v, want revoked", r)
	}
	if n := e.codexRuns(); n != runs {
		t.Error("codex ran on a revoked grant")
	}
	noBrowserProblems(t, o)
}

// decideLasting decides with a chosen duration (the harness's decide always asks for 1d).
func (a *adminClient) decideLasting(userCode, decision, duration string) (int, map[string]any) {
	a.t.Helper()
	r := a.pending(userCode)
	var out map[string]any
	code := a.do("POST", "/api/consent/"+r.ID+"/decision", map[string]string{"userCode": userCode, "decision": decision, "duration": duration}, &out)
	return code, out
}

// otherSite serves the pages of a site that is not the node: a form that posts itself at
// once, a frame, an empty page.
func otherSite(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	switch r.URL.Path {
	case "/form":
		// A text/plain form whose body is JSON: the classic cross-site JSON POST.
		body := q.Get("body")
		i := strings.LastIndex(body, `"}`)
		otherPages.ExecuteTemplate(w, "form", map[string]string{"Action": q.Get("action"), "Name": body[:i] + `","pad":"`, "Value": `"}`})
	case "/frame":
		otherPages.ExecuteTemplate(w, "frame", q.Get("src"))
	default:
		io.WriteString(w, "<!doctype html><title>another site</title><p>another site</p>")
	}
}

var otherPages = template.Must(template.Must(template.New("form").Parse(`<!doctype html><title>win a prize</title>
<form method="POST" enctype="text/plain" action="{{.Action}}"><input type="hidden" name="{{.Name}}" value="{{.Value}}"></form>
<script>document.forms[0].submit()</script>`)).New("frame").Parse(`<!doctype html><title>framed</title>
<iframe src="{{.}}" width="800" height="600" onload="window.__frameLoaded = true"></iframe>`))

// expireFlow moves a pending request's expiry into the past in pact.sqlite, as if its ten
// minutes had passed: the node has no clock or flow-lifetime option to make that happen sooner.
func expireFlow(t *testing.T, e *env, id string) {
	t.Helper()
	res, err := pactSQLite(t, e.dataDir).Exec(`UPDATE device_flows SET expires_at = ? WHERE id = ? AND status = 'pending'`, time.Now().Add(-time.Second).UnixMilli(), id)
	if err != nil {
		t.Fatalf("expire flow %s: %v", id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("expire flow %s: %d rows", id, n)
	}
}

// startFlow has agent a ask for the review brand with a raw device authorization request.
func startFlow(t *testing.T, e *env, a *agent) (userCode, deviceCode, link string) {
	t.Helper()
	code, start := a.oauthForm(e.publicURL+"/pact/device_authorization", url.Values{"scope": {"review:read_only"}})
	if code != 200 {
		t.Fatalf("device authorization for %.40q: %d %v", a.sub, code, start)
	}
	return start["user_code"].(string), start["device_code"].(string), start["verification_uri_complete"].(string)
}

// denyLeftover denies requests a subtest left pending, so later pages show only their own.
func denyLeftover(t *testing.T, e *env, userCodes ...string) {
	t.Helper()
	for _, c := range userCodes {
		if code, out := e.admin.decide(c, "deny"); code != 200 {
			t.Errorf("deny %s: %d %v", c, code, out)
		}
	}
}

// TestBrowserGuards runs every C row of docs/threats.md against the real node: through Chromium
// where a browser is the attacker's tool or the victim, through raw HTTP where it is not.
func TestBrowserGuards(t *testing.T) {
	root := browserRoot(t)
	t.Parallel()
	e := newUIEnv(t, root)
	o := startOwner(t, e, root)
	browse[map[string]any](t, o, "signin", map[string]any{"link": e.n.SignInURL()})
	adminAddr := e.n.Addresses().Admin

	t.Run("A3 the sign-in page posts the admin token, never in a URL", func(t *testing.T) {
		token := adminToken(t, e.dataDir)
		got := browse[map[string]struct {
			URL        string
			TokenInURL bool
		}](t, o, "signinForm", map[string]any{"token": token, "link": e.n.SignInURL()})
		if r := got["token"]; r.URL != "https://"+adminAddr+"/sharing" || r.TokenInURL {
			t.Errorf("token pasted on /sharing: landed on %q, token in a URL: %v", r.URL, r.TokenInURL)
		}
		if r := got["link"]; r.URL != "https://"+adminAddr+"/pact/consent" || r.TokenInURL {
			t.Errorf("link pasted: landed on %q, token in a URL: %v", r.URL, r.TokenInURL)
		}
	})
	adminURL := "https://" + adminAddr
	_, adminPort, _ := strings.Cut(adminAddr, ":")

	// Another site (http://evil.example:<port>) and another local app on the same host
	// (https://127.0.0.1:<other port>, same-site with the admin listener).
	evil := httptest.NewServer(http.HandlerFunc(otherSite))
	defer evil.Close()
	_, evilPort, _ := strings.Cut(strings.TrimPrefix(evil.URL, "http://"), ":")
	evilOrigin := "http://" + evilHost + ":" + evilPort
	local := httptest.NewTLSServer(http.HandlerFunc(otherSite))
	defer local.Close()

	formAt := func(origin, id, userCode string) string {
		body := fmt.Sprintf(`{"userCode":%q,"decision":"allow","duration":"forever"}`, userCode)
		return origin + "/form?" + url.Values{"action": {adminURL + "/api/consent/" + id + "/decision"}, "body": {body}}.Encode()
	}

	t.Run("C1 cross-site form POST approve", func(t *testing.T) {
		mallory := e.agent("mallory-c1")
		userCode, _, _ := startFlow(t, e, mallory)
		req := e.admin.pending(userCode)
		got := browse[struct {
			Status               int
			Origin, SecFetchSite string
			Cookie               bool
		}](t, o, "formPost", map[string]any{"url": formAt(evilOrigin, req.ID, userCode)})
		t.Logf("cross-site form POST: %+v", got)
		if got.Status != 403 || got.Origin != evilOrigin || got.SecFetchSite != "cross-site" {
			t.Errorf("cross-site form POST: %d (Origin %q, Sec-Fetch-Site %q); want 403", got.Status, got.Origin, got.SecFetchSite)
		}
		// A script on that site cannot read the API either (no CORS; and refused anyway).
		read := browse[struct{ Read bool }](t, o, "fetchAPI", map[string]any{"url": evilOrigin + "/", "target": adminURL + "/api/session"})
		if read.Read {
			t.Error("another site's script read /api/session")
		}
		if !stillPending(t, e, userCode) || len(grantsOf(t, e, "mallory-c1")) != 0 {
			t.Error("the cross-site POST decided the request")
		}
		denyLeftover(t, e, userCode)
	})

	t.Run("C2 same-site local app posts approve", func(t *testing.T) {
		mallory := e.agent("mallory-c2")
		userCode, _, _ := startFlow(t, e, mallory)
		req := e.admin.pending(userCode)
		got := browse[struct {
			Status               int
			Origin, SecFetchSite string
			Cookie               bool
		}](t, o, "formPost", map[string]any{"url": formAt(local.URL, req.ID, userCode)})
		t.Logf("same-site form POST: %+v", got)
		// Same site: the browser sends the SameSite=Strict session cookie; the origin check must refuse.
		if got.Status != 403 || got.Origin != local.URL || got.SecFetchSite != "same-site" || !got.Cookie {
			t.Errorf("same-site form POST: %d (Origin %q, Sec-Fetch-Site %q, cookie sent %v); want 403 with the cookie sent", got.Status, got.Origin, got.SecFetchSite, got.Cookie)
		}
		// Another local program with a stolen session and CSRF token, from http://127.0.0.1:3000.
		e.admin.origin = "http://127.0.0.1:3000"
		var out map[string]any
		code := e.admin.do("POST", "/api/consent/"+req.ID+"/decision", map[string]string{"userCode": userCode, "decision": "allow", "duration": "1d"}, &out)
		e.admin.origin = adminURL
		if code != 403 {
			t.Errorf("POST with Origin http://127.0.0.1:3000: %d %v; want 403", code, out)
		}
		if !stillPending(t, e, userCode) || len(grantsOf(t, e, "mallory-c2")) != 0 {
			t.Error("the same-site POST decided the request")
		}
		denyLeftover(t, e, userCode)
	})

	t.Run("C3 DNS rebinding Host evil.example", func(t *testing.T) {
		for _, p := range []string{"/pact/consent", "/api/consent", "/login?token=x"} {
			got := browse[struct {
				Status int
				Text   string
			}](t, o, "rebind", map[string]any{"url": "https://" + evilHost + ":" + adminPort + p})
			if got.Status != http.StatusMisdirectedRequest || strings.Contains(got.Text, "Consent") {
				t.Errorf("https://%s:%s%s: %d %q; want 421", evilHost, adminPort, p, got.Status, got.Text)
			}
		}
	})

	t.Run("C4 local process POSTs approve without a session", func(t *testing.T) {
		userCode, _, _ := startFlow(t, e, e.agent("mallory-c4"))
		req := e.admin.pending(userCode)
		post := func(hdr map[string]string) (int, string) {
			hreq, _ := http.NewRequest("POST", adminURL+"/api/consent/"+req.ID+"/decision",
				strings.NewReader(fmt.Sprintf(`{"userCode":%q,"decision":"allow","duration":"forever"}`, userCode)))
			hreq.Header.Set("Content-Type", "application/json")
			for k, v := range hdr {
				hreq.Header.Set(k, v)
			}
			resp, err := (&http.Client{Transport: e.admin.hc.Transport}).Do(hreq)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out struct{ Error string }
			json.NewDecoder(resp.Body).Decode(&out)
			return resp.StatusCode, out.Error
		}
		// A process that dresses up as the UI (its Origin, a same-origin fetch) still has no session.
		if code, msg := post(map[string]string{"Origin": adminURL, "Sec-Fetch-Site": "same-origin", "X-CSRF-Token": "guessed"}); code != 401 || msg != "sign in required" {
			t.Errorf("POST as the UI without a session: %d %q; want 401 sign in required", code, msg)
		}
		// A bare POST (curl) is refused as well; the origin check answers it first.
		if code, _ := post(nil); code != 401 && code != 403 {
			t.Errorf("bare POST without a session: %d; want it refused", code)
		}
		if !stillPending(t, e, userCode) {
			t.Error("a POST without a session decided the request")
		}
		denyLeftover(t, e, userCode)
	})

	t.Run("C5 page framed by another site", func(t *testing.T) {
		got := browse[struct {
			FrameURL, Text, XFO, CSP string
			Buttons                  int
		}](t, o, "frame", map[string]any{"url": evilOrigin + "/frame?" + url.Values{"src": {adminURL + "/pact/consent"}}.Encode()})
		t.Logf("framed: %q, %d buttons, text %q", got.FrameURL, got.Buttons, got.Text)
		if got.XFO != "DENY" || !strings.Contains(got.CSP, "frame-ancestors 'none'") {
			t.Errorf("consent page headers: X-Frame-Options %q, CSP %q", got.XFO, got.CSP)
		}
		if strings.HasPrefix(got.FrameURL, adminURL) || got.Buttons != 0 || strings.Contains(got.Text, "Consent") {
			t.Errorf("the framed consent page rendered: frame %q, %d buttons, text %q", got.FrameURL, got.Buttons, got.Text)
		}
	})

	t.Run("C6 double submit and two tabs racing", func(t *testing.T) {
		userCode, _, link := startFlow(t, e, e.agent("dave-dbl"))
		dbl := browse[struct {
			Posts int
			outcome
		}](t, o, "doubleClick", map[string]any{"link": link, "userCode": userCode})
		if dbl.Posts != 1 || !strings.HasPrefix(dbl.Title, "Allowed") || len(grantsOf(t, e, "dave-dbl")) != 1 {
			t.Errorf("double click: %d POSTs, %q, %d grants; want 1, Allowed, 1", dbl.Posts, dbl.Title, len(grantsOf(t, e, "dave-dbl")))
		}
		for _, race := range [][2]string{{"allow", "allow"}, {"allow", "deny"}} {
			sub := "dave-" + race[0] + "-" + race[1]
			userCode, _, link := startFlow(t, e, e.agent(sub))
			res := browse[struct{ Results []outcome }](t, o, "race", map[string]any{"link": link, "userCode": userCode, "decisions": race[:]})
			var won, lost []string
			for _, r := range res.Results {
				if r.Title == "Already decided" {
					lost = append(lost, r.Title)
				} else {
					won = append(won, r.Title)
				}
			}
			grants := len(grantsOf(t, e, sub))
			if len(won) != 1 || len(lost) != 1 {
				t.Errorf("%s vs %s: the tabs say %+v; want one decision and one \"Already decided\"", race[0], race[1], res.Results)
			} else if wantGrants := map[bool]int{true: 1, false: 0}[strings.HasPrefix(won[0], "Allowed")]; grants != wantGrants {
				t.Errorf("%s vs %s: %q won, %d grants", race[0], race[1], won[0], grants)
			}
			if stillPending(t, e, userCode) {
				t.Errorf("%s vs %s: still pending", race[0], race[1])
			}
		}
	})

	t.Run("C7 approve an expired code", func(t *testing.T) {
		eve := e.agent("eve")
		c := eve.client("review", a2a.TransportProtocolJSONRPC)
		waiting := eve.send(c, "", "Review main.go please")
		authData(t, waiting)
		userCode, deviceCode, link := startFlow(t, e, eve)
		req := e.admin.pending(userCode)
		// The page is loaded and Allow clicked before the expiry; the answer reaches the node after it.
		browse[map[string]any](t, o, "holdDecision", map[string]any{"link": link, "userCode": userCode})
		expireFlow(t, e, req.ID)
		got := browse[outcome](t, o, "releaseDecision", map[string]any{"shot": "consent-expired.png"})
		if got.Title != "Expired" || !strings.Contains(got.Detail, "No access was given") {
			t.Errorf("the page says %q: %q; want Expired", got.Title, got.Detail)
		}
		if g := grantsOf(t, e, "eve"); len(g) != 0 {
			t.Errorf("grants after an expired approval: %v", g)
		}
		code, tok := eve.oauthForm(e.publicURL+"/pact/token", url.Values{
			"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {deviceCode}})
		if code != 400 || tok["error"] != "expired_token" {
			t.Errorf("token after the expiry: %d %v; want 400 expired_token", code, tok)
		}
		awaitTaskState(t, c, waiting.ID, a2a.TaskStateRejected)
	})

	t.Run("C8 request id A with the code of request B", func(t *testing.T) {
		codeA, _, linkA := startFlow(t, e, e.agent("frank-a"))
		codeB, _, _ := startFlow(t, e, e.agent("frank-b"))
		got := browse[struct {
			UIError      string
			StillPending bool
			Raw          struct {
				Status int
				Body   map[string]any
			}
		}](t, o, "swapCode", map[string]any{"link": linkA, "userCode": codeA, "otherCode": codeB})
		if !strings.Contains(got.UIError, "The node refused this answer") || !got.StillPending {
			t.Errorf("the page after a swapped code: %q (buttons live again %v)", got.UIError, got.StillPending)
		}
		if got.Raw.Status != 400 {
			t.Errorf("POST of A with B's code: %d %v; want 400", got.Raw.Status, got.Raw.Body)
		}
		for _, c := range []string{codeA, codeB} {
			if !stillPending(t, e, c) {
				t.Errorf("request %s was decided by a swapped code", c)
			}
		}
		if len(grantsOf(t, e, "frank-a"))+len(grantsOf(t, e, "frank-b")) != 0 {
			t.Error("a swapped code made a grant")
		}
		denyLeftover(t, e, codeA, codeB)
	})

	t.Run("C9 hostile agent subject", func(t *testing.T) {
		// 10 KB: the identity layer refuses it before anything is stored or shown.
		huge := e.agent(strings.Repeat("A", 10<<10))
		if code, out := huge.oauthForm(e.publicURL+"/pact/device_authorization", url.Values{"scope": {"review:read_only"}}); code != 401 {
			t.Errorf("10 KB subject: %d %v; want 401", code, out)
		}
		// The longest subject accepted, with markup, script, a right-to-left override and ANSI.
		hostile := `<img src=x onerror=window.__pwned=1><script>window.__pwned=2</script>` + "\u202Egnp.exe\x1b[31m "
		hostile += strings.Repeat("W", 1024-len(hostile))
		userCode, _, link := startFlow(t, e, e.agent(hostile))
		got := browse[struct {
			Subject, SubjectTitle, Origin, SharingSubject string
			CardWidth                                     float64
			Consent, Sharing                              pageState
		}](t, o, "hostile", map[string]any{"link": link, "userCode": userCode, "shot": "consent-hostile.png", "sharingShot": "sharing-hostile.png"})
		for name, s := range map[string]pageState{"consent": got.Consent, "sharing": got.Sharing} {
			if s.Pwned != nil || s.CSPViolations != 0 || s.Imgs != 0 || s.Handlers != 0 || s.ScriptsInBody != 0 {
				t.Errorf("%s page: the subject became markup: %+v", name, s)
			}
			if s.Bidi {
				t.Errorf("%s page shows a bidi control", name)
			}
			if s.OverflowX {
				t.Errorf("%s page: the long subject makes the page scroll sideways", name)
			}
		}
		for name, s := range map[string]string{"consent": got.Subject, "sharing": got.SharingSubject} {
			// The subject is the issuer's claim, cut by the node; the site that ends the claim never is.
			if !strings.HasPrefix(s, "says it is <img src=x onerror=window.__pwned=1><script>") {
				t.Errorf("%s page: subject not shown as text: %.80q", name, s)
			}
			if claim, site, ok := strings.Cut(s, "… — issued by "); !ok || len([]rune(claim)) > 100 || site != "127.0.0.1" {
				t.Errorf("%s page: claim %q; want the subject truncated and the site in full after it", name, s)
			}
			if strings.ContainsAny(s, "\u202E\x1b") {
				t.Errorf("%s page: subject keeps a bidi or escape character: %q", name, s)
			}
		}
		if got.Origin != e.issuer.URL {
			t.Errorf("issuer origin shown as %q, want %q on its own line", got.Origin, e.issuer.URL)
		}
		if strings.Contains(got.SubjectTitle, "\u202E") {
			t.Error("the subject's tooltip keeps the bidi override")
		}
	})

	t.Run("C10 verification_uri_complete with extra parameters", func(t *testing.T) {
		userCode, _, link := startFlow(t, e, e.agent("grace"))
		extra := link + "&" + url.Values{"agent": {"Bank"}, "brand": {"Evil Corp"}, "scope": {"admin:all"}, "issuer": {"https://bank.example"}, "subject": {"your bank"}}.Encode()
		got := browse[struct{ Text string }](t, o, "extraParams", map[string]any{"link": extra})
		for _, bad := range []string{"Bank", "Evil Corp", "admin:all", "bank.example", "your bank"} {
			if strings.Contains(got.Text, bad) {
				t.Errorf("the page shows %q from the link", bad)
			}
		}
		for _, want := range []string{userCode, "grace", "Code review", "review:read_only", e.issuer.URL} {
			if !strings.Contains(got.Text, want) {
				t.Errorf("the page does not show the server's %q", want)
			}
		}
		denyLeftover(t, e, userCode)
	})

	t.Run("C11 open redirect via return_to", func(t *testing.T) {
		targets := []string{"https://" + evilHost + "/", "//" + evilHost + "/x", `/\` + evilHost, "/\t/" + evilHost, "javascript:alert(1)", "http:" + evilHost, "/sharing"}
		var results []struct{ ReturnTo, URL, Error string }
		for _, target := range targets { // a sign-in link works once
			got := browse[struct {
				Results []struct{ ReturnTo, URL, Error string }
			}](t, o, "returnTo", map[string]any{"link": e.n.SignInURL(), "targets": []string{target}})
			results = append(results, got.Results...)
		}
		for _, r := range results {
			want := adminURL + "/pact/consent"
			if r.ReturnTo == "/sharing" {
				want = adminURL + "/sharing"
			}
			if r.URL != want || r.Error != "" {
				t.Errorf("return_to %q: landed on %q (%s); want %s", r.ReturnTo, r.URL, r.Error, want)
			}
		}
	})

	t.Run("C12 back button after approval", func(t *testing.T) {
		userCode, _, link := startFlow(t, e, e.agent("heidi"))
		browse[map[string]any](t, o, "openRequest", map[string]any{"link": link, "userCode": userCode, "issuerOrigin": e.issuer.URL,
			"subject": "heidi", "brand": "Code review", "brandId": "review", "scope": "review:read_only"})
		browse[outcome](t, o, "decide", map[string]any{"userCode": userCode, "decision": "allow"})
		got := browse[struct {
			SPA struct {
				URL, Notice string
				LiveButtons int
			}
			Full struct {
				Status               int
				CacheControl, Notice string
				LiveButtons          int
			}
			Resubmit struct {
				Status       int
				CacheControl string
				Body         map[string]any
			}
		}](t, o, "back", map[string]any{"userCode": userCode, "shot": "consent-back.png"})
		t.Logf("back: %+v", got)
		if got.SPA.LiveButtons != 0 || !strings.Contains(got.SPA.Notice, "already decided") {
			t.Errorf("Back after Allow: %d live Allow buttons, notice %q", got.SPA.LiveButtons, got.SPA.Notice)
		}
		if got.Full.Status != 200 || got.Full.CacheControl != "no-store" || got.Full.LiveButtons != 0 {
			t.Errorf("Back to a full page load: %d, Cache-Control %q, %d live Allow buttons; want 200 from the node, no-store, none",
				got.Full.Status, got.Full.CacheControl, got.Full.LiveButtons)
		}
		if got.Resubmit.Status != 409 || got.Resubmit.Body["status"] != "already_decided" || got.Resubmit.CacheControl != "no-store" {
			t.Errorf("re-submit: %d %v (Cache-Control %q); want 409 already_decided", got.Resubmit.Status, got.Resubmit.Body, got.Resubmit.CacheControl)
		}
		if g := grantsOf(t, e, "heidi"); len(g) != 1 {
			t.Errorf("%d grants after a re-submit, want 1", len(g))
		}
	})

	noBrowserProblems(t, o)
}

// TestGetCodexCancelInBrowser is X12 in Chromium: with no Codex found, the owner presses Get
// Codex on the Status page against a registry that sends its headers and then nothing; the
// Codex card shows Cancel while it downloads, and Cancel stops it: the node says idle and the
// card offers Get Codex again.
func TestGetCodexCancelInBrowser(t *testing.T) {
	root := browserRoot(t)
	t.Parallel()
	var asked atomic.Int64
	registry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Header().Set("Content-Length", "1000000")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer func() { registry.CloseClientConnections(); registry.Close() }() // a download left running ends too
	e := newUIEnv(t, root, withNode(func(o *node.Options) {
		o.CodexRegistry, o.CodexPath = registry.URL, filepath.Join(t.TempDir(), "no-codex")
	}))
	var d ownerpkg.CodexDownload
	if e.admin.do("GET", "/api/codex/download", nil, &d); d.State == ownerpkg.DownloadUnavailable {
		t.Skip("no pinned Codex for this machine")
	}
	o := startOwner(t, e, root)
	browse[map[string]any](t, o, "signin", map[string]any{"link": e.n.SignInURL()})
	t.Run("X12 Cancel on the Status page while the registry stalls", func(t *testing.T) {
		type card struct {
			Text   string
			Cancel bool // the Cancel button is shown
		}
		got := browse[struct{ During, After card }](t, o, "cancelCodex", map[string]any{"shot": "codex-cancel.png"})
		if !got.During.Cancel || !strings.Contains(got.During.Text, "Getting Codex…") {
			t.Errorf("the Codex card while it downloads (Cancel shown: %v):\n%s", got.During.Cancel, got.During.Text)
		}
		if got.After.Cancel || !strings.Contains(got.After.Text, "Get Codex") {
			t.Errorf("the Codex card after Cancel (Cancel shown: %v):\n%s", got.After.Cancel, got.After.Text)
		}
		if e.admin.do("GET", "/api/codex/download", nil, &d); d.State != ownerpkg.DownloadIdle || d.Error != "" {
			t.Errorf("the download after Cancel: %+v; want idle", d)
		}
		if asked.Load() == 0 {
			t.Error("the registry was never asked")
		}
	})
	noBrowserProblems(t, o)
}

// TestModelKeyInBrowser is X9 in Chromium: the key typed into the Status page's Model card is
// stored (0600) and then nowhere in the page (markup, text, field values) or the node's log.
func TestModelKeyInBrowser(t *testing.T) {
	root := browserRoot(t)
	t.Parallel()
	var log syncBuffer
	e := newUIEnv(t, root, withLog(&log))
	o := startOwner(t, e, root)
	browse[map[string]any](t, o, "signin", map[string]any{"link": e.n.SignInURL()})
	const key = "sk-browser-5d1f0c9a7e3b"
	got := browse[struct{ InMarkup, InText, InFields, KeySetShown bool }](t, o, "modelKey", map[string]any{"key": key, "shot": "model-key-set.png"})
	if got.InMarkup || got.InText || got.InFields || !got.KeySetShown {
		t.Fatalf("X9 after saving: %+v", got)
	}
	data, err := os.ReadFile(filepath.Join(e.dataDir, "model.key"))
	if saved, _, _ := strings.Cut(string(data), "\n"); err != nil || saved != key { // then the server it belongs to (M16)
		t.Fatalf("model.key: %q, %v", data, err)
	}
	if fi, _ := os.Stat(filepath.Join(e.dataDir, "model.key")); fi.Mode().Perm() != 0o600 {
		t.Errorf("model.key mode %v", fi.Mode())
	}
	if strings.Contains(log.String(), key) {
		t.Error("X9 the key is in the node's log")
	}
}

// TestModelGatewayInBrowser: the Status page's Model card shows where the model gateway
// forwards, whether it has a key (never the key), and the model's last error in the owner's
// words, here a server that is down, as the real codex's Check met it through the gateway.
func TestModelGatewayInBrowser(t *testing.T) {
	bin := os.Getenv("AETHER_REAL_CODEX")
	if bin == "" {
		t.Skip("no real codex: set AETHER_REAL_CODEX=$(scripts/install-codex.sh)")
	}
	root := browserRoot(t)
	t.Parallel()
	e := newEnv(t, withCodexPath(bin))
	e.stop()
	e.opts.UI = os.DirFS(filepath.Join(root, "frontend", "dist"))
	e.opts.CodexHome = codextest.Home(t)
	e.opts.CodexEnv = nil // no CODEX_API_KEY: a server named without a key gets none
	e.start()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	svc := e.n.Owner()
	base := "http://" + down + "/v1"
	if _, err := svc.SetModel(ownerpkg.ModelRequest{BaseURL: &base}); err != nil {
		t.Fatal(err)
	}
	if c, err := svc.CheckModel(context.Background()); err != nil || c.OK {
		t.Fatalf("check against a server that is down: %+v %v", c, err)
	}
	o := startOwner(t, e, root)
	browse[map[string]any](t, o, "signin", map[string]any{"link": e.n.SignInURL()})
	got := browse[struct{ Text string }](t, o, "status", map[string]any{"shot": "model-gateway-error.png"})
	for _, want := range []string{"forwards to " + down, "key: none", "Last model error: the model server " + down + " cannot be reached"} {
		if !strings.Contains(got.Text, want) {
			t.Errorf("the Status page lacks %q:\n%s", want, got.Text)
		}
	}
}
