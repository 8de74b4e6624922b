package admin

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/aether/aether/backend/owner"
)

// fakeBackend is an in-memory Backend: enough state to see that the guards let the right calls
// through and that Backend errors become the right statuses.
type fakeBackend struct {
	mu          sync.Mutex
	calls       map[string]int
	decided     map[string]bool
	grants      []owner.Grant
	brands      []owner.Brand
	lastFilter  owner.ReceiptFilter
	events      chan owner.Event
	streams     chan context.Context // each Events call's ctx
	nilLists    bool
	exportFails bool
	noGateway   bool // SetPaused fails
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{
		calls:   map[string]int{},
		decided: map[string]bool{},
		grants: []owner.Grant{{ID: "g1", Agent: owner.Agent{Issuer: "https://agent.example", Subject: "alice", IssuerOrigin: "https://agent.example"},
			Brand: owner.BrandRef{ID: "docs", Name: "Docs"}, Scope: owner.Scope{ID: "docs.read"}, AccessMode: "read_only", Status: "active"}},
		brands:  []owner.Brand{{ID: "docs", Name: "Docs", Workspace: "/srv/docs", AccessMode: "read_only", Scope: owner.Scope{ID: "docs.read"}}},
		events:  make(chan owner.Event),
		streams: make(chan context.Context, 8),
	}
}

func (f *fakeBackend) count(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

func (f *fakeBackend) filter() owner.ReceiptFilter {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastFilter
}

func (f *fakeBackend) failExports() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exportFails = true
}

func (f *fakeBackend) note(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[name]++
}

func (f *fakeBackend) Status(ctx context.Context) (owner.Status, error) {
	f.note("Status")
	st := owner.Status{Gateway: owner.GatewayStatus{Listen: "127.0.0.1:8080", Running: true}, Pending: 1}
	if !f.nilLists {
		st.Brands = f.brands
	}
	return st, nil
}

func (f *fakeBackend) Pending(ctx context.Context) ([]owner.ConsentRequest, error) {
	f.note("Pending")
	if f.nilLists {
		return nil, nil
	}
	return []owner.ConsentRequest{{ID: "req1", UserCode: "BCDF-GHJK", Brand: owner.BrandRef{ID: "docs", Name: "Docs"}}}, nil
}

func (f *fakeBackend) LookupCode(ctx context.Context, code string) (owner.CodeLookup, error) {
	f.note("LookupCode")
	return owner.CodeLookup{UserCode: code, Status: "unknown"}, nil
}

func (f *fakeBackend) Decide(ctx context.Context, id string, req owner.DecisionRequest) (owner.DecisionResult, error) {
	if err := req.Validate(); err != nil { // owner's rule, as Service.Decide applies it first
		return owner.DecisionResult{}, err
	}
	f.note("Decide")
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case id == "old":
		return owner.DecisionResult{}, fmt.Errorf("the request expired at 10:05: %w", owner.ErrExpired)
	case id != "req1":
		return owner.DecisionResult{}, fmt.Errorf("consent request %s: %w", id, owner.ErrNotFound)
	case req.UserCode != "BCDF-GHJK":
		return owner.DecisionResult{}, fmt.Errorf("decide %s: %w", id, owner.ErrCodeMismatch)
	case f.decided[id]:
		return owner.DecisionResult{}, fmt.Errorf("this request was already decided: %w", owner.ErrAlreadyDecided)
	}
	f.decided[id] = true
	if req.Decision == owner.DecisionDeny {
		return owner.DecisionResult{Status: "denied"}, nil
	}
	return owner.DecisionResult{Status: "allowed", Grant: &f.grants[0]}, nil
}

func (f *fakeBackend) DenyIssuer(ctx context.Context, req owner.DenyIssuerRequest) (owner.DenyIssuerResult, error) {
	f.note("DenyIssuer")
	return owner.DenyIssuerResult{Site: req.Site, Denied: 1}, nil
}

func (f *fakeBackend) Grants(ctx context.Context) ([]owner.Grant, error) {
	f.note("Grants")
	if f.nilLists {
		return nil, nil
	}
	return f.grants, nil
}

func (f *fakeBackend) Revoke(ctx context.Context, id string) (owner.Grant, error) {
	f.note("Revoke")
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.grants {
		if string(f.grants[i].ID) == id {
			f.grants[i].Status = "revoked"
			return f.grants[i], nil
		}
	}
	return owner.Grant{}, fmt.Errorf("grant %s: %w", id, owner.ErrNotFound)
}

func (f *fakeBackend) Receipts(ctx context.Context, flt owner.ReceiptFilter) (owner.ReceiptPage, error) {
	f.note("Receipts")
	f.mu.Lock()
	f.lastFilter = flt
	f.mu.Unlock()
	if flt.Cursor == "bad" {
		return owner.ReceiptPage{}, fmt.Errorf("cursor: %w", owner.ErrInvalid)
	}
	if f.nilLists {
		return owner.ReceiptPage{}, nil
	}
	return owner.ReceiptPage{Receipts: []owner.ReceiptSummary{{ID: "r1", Seq: 1, Status: "completed"}}, NextCursor: "c2"}, nil
}

func (f *fakeBackend) Receipt(ctx context.Context, id string) (owner.ReceiptDetail, error) {
	f.note("Receipt")
	if id != "r1" {
		return owner.ReceiptDetail{}, fmt.Errorf("receipt %s: %w", id, owner.ErrNotFound)
	}
	return owner.ReceiptDetail{Receipt: owner.ReceiptSummary{ID: "r1", Seq: 1}, Claims: json.RawMessage(`{"seq":1}`), JWS: "a.b.c", Verify: owner.VerifyResult{OK: true}}, nil
}

func (f *fakeBackend) ExportReceipts(ctx context.Context, flt owner.ReceiptFilter, w io.Writer) error {
	f.note("ExportReceipts")
	f.mu.Lock()
	f.lastFilter = flt
	fails := f.exportFails
	f.mu.Unlock()
	if fails {
		return fmt.Errorf("open receipts: disk on fire")
	}
	_, err := io.WriteString(w, "{\"id\":\"r2\"}\n{\"id\":\"r1\"}\n")
	return err
}

func (f *fakeBackend) Brands(ctx context.Context) (owner.BrandsView, error) {
	f.note("Brands")
	v := owner.BrandsView{PolicyPath: "/data/policy.json"}
	if !f.nilLists {
		v.Brands = f.brands
	}
	return v, nil
}

func (f *fakeBackend) PutBrand(ctx context.Context, id string, b owner.Brand) ([]owner.Brand, error) {
	if err := b.CheckID(id); err != nil { // owner's rule, as Service.PutBrand applies it first
		return nil, err
	}
	f.note("PutBrand")
	if b.Workspace == "" {
		return nil, &owner.FieldErrors{Fields: []owner.FieldError{{Field: "workspace", Message: "a workspace folder is required"}}}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.brands {
		if string(f.brands[i].ID) == id {
			f.brands[i] = b
			return f.brands, nil
		}
	}
	f.brands = append(f.brands, b)
	return f.brands, nil
}

func (f *fakeBackend) DeleteBrand(ctx context.Context, id string) ([]owner.Brand, error) {
	f.note("DeleteBrand")
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.brands {
		if string(f.brands[i].ID) == id {
			f.brands = append(f.brands[:i], f.brands[i+1:]...)
			return f.brands, nil
		}
	}
	return nil, fmt.Errorf("brand %s: %w", id, owner.ErrNotFound)
}

func (f *fakeBackend) SetPaused(paused bool) error {
	f.note("SetPaused")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noGateway {
		return errors.New("the gateway is not running: policy.json has errors")
	}
	return nil
}

func (f *fakeBackend) SetFunnel(ctx context.Context, on bool) (owner.Reachability, error) {
	f.note("SetFunnel")
	return owner.Reachability{Mode: owner.ReachFunnel, State: "starting"}, nil
}

func (f *fakeBackend) SetTailnet(ctx context.Context, on bool) (owner.Reachability, error) {
	f.note("SetTailnet")
	return owner.Reachability{Mode: "tailnet"}, nil
}

func (f *fakeBackend) CheckReachability(ctx context.Context) (owner.Reachability, error) {
	f.note("CheckReachability")
	return owner.Reachability{Mode: "funnel", State: "published", Probe: "checking"}, nil
}

func (f *fakeBackend) UseFunnelURL(ctx context.Context) (owner.Reachability, error) {
	f.note("UseFunnelURL")
	return owner.Reachability{}, fmt.Errorf("%w: not published", owner.ErrInvalid)
}

func (f *fakeBackend) Runtime() owner.Runtime {
	f.note("Runtime")
	return owner.Runtime{Goroutines: 7, HeapBytes: 1 << 20}
}

func (f *fakeBackend) GetCodex() (owner.CodexDownload, error) {
	f.note("GetCodex")
	return owner.CodexDownload{State: owner.DownloadRunning}, nil
}

func (f *fakeBackend) CancelCodex() (owner.CodexDownload, error) {
	f.note("CancelCodex")
	return owner.CodexDownload{State: owner.DownloadIdle}, nil
}

func (f *fakeBackend) CodexDownload() (owner.CodexDownload, error) {
	f.note("CodexDownload")
	return owner.CodexDownload{State: owner.DownloadIdle}, nil
}

func (f *fakeBackend) UseCodex(path string) (owner.ModelStatus, error) {
	f.note("UseCodex")
	return owner.ModelStatus{CodexPath: path}, nil
}

func (f *fakeBackend) Model() (owner.ModelStatus, error) {
	f.note("Model")
	return owner.ModelStatus{}, nil
}

func (f *fakeBackend) SetModel(req owner.ModelRequest) (owner.ModelStatus, error) {
	f.note("SetModel")
	return owner.ModelStatus{KeySet: req.Key != nil}, nil
}

func (f *fakeBackend) CheckModel(ctx context.Context) (owner.ModelCheck, error) {
	f.note("CheckModel")
	return owner.ModelCheck{OK: true}, nil
}

func (f *fakeBackend) Events(ctx context.Context) <-chan owner.Event {
	f.note("Events")
	out := make(chan owner.Event)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-f.events:
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	f.streams <- ctx
	return out
}

// clock is the injected Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

const testToken = "dGVzdC10b2tlbi10ZXN0LXRva2VuLXRlc3QtdG9rZW4"

var testUI = fstest.MapFS{
	"index.html":              {Data: []byte("<!doctype html><title>Aether</title><script type=module src=/assets/index-Ab12Cd.js></script>")},
	"assets/index-Ab12Cd.js":  {Data: []byte("console.log('aether')")},
	"assets/index-Ef34Gh.css": {Data: []byte("body{margin:0}")},
	"favicon.svg":             {Data: []byte("<svg xmlns='http://www.w3.org/2000/svg'/>")},
}

// env is a real admin listener: TLS on a loopback port, with the port known before New so the
// Host allow list is the real one.
type env struct {
	t      *testing.T
	srv    *Server
	ts     *httptest.Server
	b      *fakeBackend
	clock  *clock
	addr   string // 127.0.0.1:port
	port   string
	client *http.Client
}

func newEnv(t *testing.T, tweak ...func(*Config)) *env {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	clk := &clock{t: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}
	b := newFakeBackend()
	cfg := Config{Token: testToken, Addr: addr, UI: testUI, Now: clk.Now}
	for _, f := range tweak {
		f(&cfg)
	}
	srv := New(cfg, b)
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.Listener.Close()
	ts.Listener = ln
	ts.StartTLS()
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close) // runs first: open event streams end, so ts.Close does not wait on them
	client := ts.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &env{t: t, srv: srv, ts: ts, b: b, clock: clk, addr: addr, port: port, client: client}
}

// req builds a request to the listener; hdr may set "Host" to override the Host header.
func (e *env) req(method, path, body string, hdr map[string]string) *http.Request {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, "https://"+e.addr+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			r.Host = v
			continue
		}
		r.Header.Set(k, v)
	}
	return r
}

// do sends r and returns the answer with its body read.
func (e *env) do(r *http.Request) (*http.Response, string) {
	e.t.Helper()
	resp, err := e.client.Do(r)
	if err != nil {
		e.t.Fatalf("%s %s: %v", r.Method, r.URL.Path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, string(data)
}

func (e *env) call(method, path, body string, hdr map[string]string) (*http.Response, string) {
	e.t.Helper()
	return e.do(e.req(method, path, body, hdr))
}

// raw writes bytes on a fresh TLS connection and reads one answer: the Host header is exactly
// what the test wrote.
func (e *env) raw(request string) (*http.Response, string) {
	e.t.Helper()
	conn, err := tls.Dial("tcp", e.addr, e.client.Transport.(*http.Transport).TLSClientConfig)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, request); err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, string(data)
}

func (e *env) origin() string { return "https://" + e.addr }

// link is the path of a fresh one-time sign-in link.
func (e *env) link() string {
	return strings.TrimPrefix(e.srv.SignInLink(), e.origin())
}

// signIn follows the sign-in link and returns the session cookie and its CSRF token.
func (e *env) signIn() (cookie, csrf string) {
	e.t.Helper()
	resp, body := e.call("GET", e.link(), "", nil)
	if resp.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("login: %d %s", resp.StatusCode, body)
	}
	var c *http.Cookie
	for _, x := range resp.Cookies() {
		if x.Name == CookieName {
			c = x
		}
	}
	if c == nil {
		e.t.Fatal("login set no session cookie")
	}
	cookie = CookieName + "=" + c.Value
	resp, body = e.call("GET", "/api/session", "", map[string]string{"Cookie": cookie})
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("/api/session: %d %s", resp.StatusCode, body)
	}
	var s struct {
		CSRFToken string `json:"csrfToken"`
		Desktop   bool   `json:"desktop"`
	}
	if err := json.Unmarshal([]byte(body), &s); err != nil || s.CSRFToken == "" || s.Desktop {
		e.t.Fatalf("/api/session = %s (%v)", body, err)
	}
	return cookie, s.CSRFToken
}

// fetchHeaders are what the UI's own fetch() sends on a non-GET call.
func (e *env) fetchHeaders(cookie, csrf string) map[string]string {
	return map[string]string{
		"Cookie":         cookie,
		"X-CSRF-Token":   csrf,
		"Origin":         e.origin(),
		"Sec-Fetch-Site": "same-origin",
		"Sec-Fetch-Mode": "cors",
		"Content-Type":   "application/json",
	}
}

func with(base map[string]string, kv ...string) map[string]string {
	m := map[string]string{}
	for k, v := range base {
		m[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(m, kv[i])
		} else {
			m[kv[i]] = kv[i+1]
		}
	}
	return m
}

func wantStatus(t *testing.T, resp *http.Response, body string, code int) {
	t.Helper()
	if resp.StatusCode != code {
		t.Fatalf("status %d, want %d; body %s", resp.StatusCode, code, body)
	}
}

// jsonBody decodes an answer into a generic map.
func jsonBody(t *testing.T, body string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("not JSON: %q: %v", body, err)
	}
	return m
}

const decisionBody = `{"userCode":"BCDF-GHJK","decision":"allow","duration":"30d"}`

func (f *fakeBackend) MyAgents() (owner.MyAgents, error) { return owner.MyAgents{}, owner.ErrInvalid }
func (f *fakeBackend) AddAgent(owner.AgentRequest) (owner.MyAgent, error) {
	return owner.MyAgent{}, owner.ErrInvalid
}
func (f *fakeBackend) SetAgent(string, owner.AgentSwitch) (owner.MyAgent, error) {
	return owner.MyAgent{}, owner.ErrInvalid
}
func (f *fakeBackend) MintIdentity(string, owner.MintRequest) (owner.IdentityToken, error) {
	f.note("MintIdentity")
	return owner.IdentityToken{Token: "minted"}, nil
}
func (f *fakeBackend) KeepReceived(context.Context, owner.ReceivedRequest) (owner.ReceivedReceipt, error) {
	return owner.ReceivedReceipt{}, owner.ErrInvalid
}
func (f *fakeBackend) Received(context.Context) (owner.ReceivedList, error) {
	return owner.ReceivedList{}, nil
}
func (f *fakeBackend) ExportReceived(context.Context, io.Writer) error { return nil }
