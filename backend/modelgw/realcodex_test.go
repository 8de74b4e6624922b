package modelgw

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aether/aether/backend/codex"
	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/codex/mockmodel"
	"github.com/aether/aether/backend/domain"
)

func realCodex(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("AETHER_REAL_CODEX"); p != "" {
		return p
	}
	p, err := exec.LookPath("codex")
	if err != nil {
		t.Skip("no real codex: set AETHER_REAL_CODEX=$(scripts/install-codex.sh) or put codex on PATH")
	}
	return p
}

func ownerKey() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "sk-owner-" + hex.EncodeToString(b[:])
}

// upstream is the mock model behind a recorder that, on each request, reads every process's
// environment and command line on the machine, as anyone of the owner's user could while
// Codex waits for its model: what it finds there of the owner's key, the view held.
type upstream struct {
	mock  *mockmodel.Server
	srv   *httptest.Server
	key   string
	mu    sync.Mutex
	found []string // /proc/<pid>/{environ,cmdline} that held the key
	token []string // … that held a turn's token
	live  string   // the token being looked for
	// hold, when set, sees each request before the mock does, and may wait on it.
	hold func(r *http.Request)
	// streaming, when set, is called as the mock's answer starts to flow back.
	streaming func()
}

// firstWrite calls fn at the first write of an answer.
type firstWrite struct {
	http.ResponseWriter
	once sync.Once
	fn   func()
}

func (w *firstWrite) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	if w.fn != nil {
		w.once.Do(w.fn)
	}
	return n, err
}

func (w *firstWrite) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

func newUpstream(t *testing.T, key string, steps ...mockmodel.Step) *upstream {
	u := &upstream{mock: mockmodel.New(steps...), key: key}
	target, _ := url.Parse(u.mock.BaseURL())
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(&url.URL{Scheme: target.Scheme, Host: target.Host})
	}, FlushInterval: -1}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.scanProcesses()
		if u.hold != nil {
			u.hold(r)
		}
		proxy.ServeHTTP(&firstWrite{ResponseWriter: w, fn: u.streaming}, r)
	}))
	t.Cleanup(func() { u.srv.Close(); u.mock.Close() })
	return u
}

func (u *upstream) baseURL() string { return u.srv.URL + "/v1" }

func (u *upstream) scanProcesses() {
	files, _ := filepath.Glob("/proc/[0-9]*/environ")
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, f := range append(files, cmdlines...) {
		if strings.HasPrefix(f, "/proc/"+strconv.Itoa(os.Getpid())+"/") {
			continue // the node itself holds the key, in memory and not in its environment
		}
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if bytes.Contains(b, []byte(u.key)) {
			u.found = append(u.found, f)
		}
		if u.live != "" && bytes.Contains(b, []byte(u.live)) {
			u.token = append(u.token, f)
		}
	}
}

// turnRunner is the node's runner: the real codex, a turn only through the gateway.
func turnRunner(t *testing.T, home string) *codex.Runner {
	r := &codex.Runner{Path: realCodex(t), Home: home, StateDir: filepath.Join(codextest.Home(t), "state"),
		Timeout: 2 * time.Minute, RequireProvider: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	t.Cleanup(r.Wait)
	return r
}

func startGateway(t *testing.T, up window) *Gateway {
	g, err := Start(Config{Models: up.store(t),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// TestRealCodexThroughGateway: the real codex → the gateway → the mock model. The turn
// completes, streaming; the owner's key reaches the model server as the bearer token and
// nowhere in the turn: not in any process's environment or command line while it runs, not
// in anything Codex or its commands read (every /proc/*/environ, CODEX_HOME, the view's
// files), which the model would have been sent.
func TestRealCodexThroughGateway(t *testing.T) {
	key := ownerKey()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("workspace text\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	home := codextest.Home(t)
	// The owner's own codex sign-in holds the key as well: no turn reads it.
	if err := os.WriteFile(filepath.Join(home, "auth.json"), []byte(`{"auth_mode":"apikey","OPENAI_API_KEY":"`+key+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	hunt := `cat /proc/*/environ | tr '\0' '\n'; env; ls -la $CODEX_HOME; cat $CODEX_HOME/* 2>&1; ` +
		`grep -raoE 'sk-owner-[0-9a-f]+' /run /tmp /etc $HOME $CODEX_HOME . 2>/dev/null | head; echo HUNT-DONE`
	up := newUpstream(t, key, mockmodel.Shell("cat a.txt"), mockmodel.Shell(hunt), mockmodel.Message("done"))
	g := startGateway(t, window{BaseURL: up.baseURL(), Key: key})
	pass, err := g.Open(Binding{Turn: "t_1", Grant: "g_1", Brand: "b", Agent: "a"}, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	up.live = pass.Token
	res, err := turnRunner(t, home).Run(context.Background(), codex.Request{Workspace: ws, AccessMode: domain.ReadOnly,
		Prompt: "review", Conversation: "a\x00b", Provider: &codex.Provider{BaseURL: pass.BaseURL, Token: pass.Token}}, nil)
	usage := pass.Close()
	if err != nil || res.Status != codex.StatusCompleted || res.Answer != "done" {
		t.Fatalf("turn: %v %+v", err, res)
	}
	reqs := up.mock.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		if got := r.Header.Get("Authorization"); got != "Bearer "+key {
			t.Errorf("request %d reached the model with Authorization %q, want the owner's key", i, got)
		}
		if strings.Contains(strings.Join(headerValues(r.Header), " "), pass.Token) {
			t.Errorf("request %d passed the turn's token on to the model", i)
		}
	}
	outs := strings.Join(reqs[2].ToolOutput, "\n")
	if !strings.Contains(outs, "workspace text") || !strings.Contains(outs, "HUNT-DONE") {
		t.Fatalf("the commands did not run: %.2000s", outs)
	}
	t.Run("M1 the owner's key is in no process's environment or command line during the turn, nor in what the model is sent", func(t *testing.T) {
		if len(up.found) > 0 {
			t.Errorf("the key was in %q", up.found)
		}
		for i, r := range reqs {
			if bytes.Contains(r.Body, []byte(key)) {
				t.Errorf("request %d sent the model the owner's key in its body", i)
			}
		}
		if len(up.token) == 0 {
			t.Errorf("the scan found not even the turn's token in Codex's environment: it proves nothing")
		}
	})
	t.Run("M2 the token Codex held, replayed after the turn ended", func(t *testing.T) {
		resp, body := post(t, pass.BaseURL+"/responses", pass.Token, `{"model":"m","input":[]}`)
		if resp.StatusCode != http.StatusUnauthorized || len(up.mock.Requests()) != 3 {
			t.Errorf("got %d %s; the model got %d requests", resp.StatusCode, body, len(up.mock.Requests()))
		}
	})
	if usage.InputTokens != 30 || usage.OutputTokens != 15 {
		t.Errorf("usage %+v, want the mock's 3×(10 in, 5 out)", usage)
	}
}

func headerValues(h http.Header) []string {
	var out []string
	for _, v := range h {
		out = append(out, v...)
	}
	return out
}

// agentOf is the codex agent a request comes from ("/root", or a sub-agent's task path).
func agentOf(r *http.Request) string {
	var m struct {
		Agent string `json:"agent_name"`
	}
	_ = json.Unmarshal([]byte(r.Header.Get("X-Codex-Turn-Metadata")), &m)
	return m.Agent
}

// TestRealCodexBudget: the real codex, the gateway and a scripted model: a grant's budget
// holds when a turn is cancelled mid-answer and when Codex cuts its sub-agents; sub-agents
// run on the turn's model, whatever spawn_agent asks; a passing rate limit is retried.
func TestRealCodexBudget(t *testing.T) {
	ws := t.TempDir()
	home := codextest.Home(t)
	run := func(t *testing.T, ctx context.Context, up *upstream, b Binding) (codex.Result, domain.Usage, *Gateway, *Pass) {
		t.Helper()
		g := startGateway(t, window{BaseURL: up.baseURL(), Key: ownerKey()})
		pass, err := g.Open(b, time.Now().Add(2*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		res, _ := turnRunner(t, home).Run(ctx, codex.Request{Workspace: ws, AccessMode: domain.ReadOnly, Prompt: "work",
			Conversation: "a\x00" + b.Turn, Provider: &codex.Provider{BaseURL: pass.BaseURL, Token: pass.Token}}, nil)
		return res, pass.Close(), g, pass
	}
	t.Run("M11 the agent cancels its turn mid-answer: what was sent and streamed is charged", func(t *testing.T) {
		up := newUpstream(t, ownerKey(), mockmodel.Stall(8000))
		ctx, cancel := context.WithCancel(context.Background())
		up.streaming = cancel // the agent cancels as the answer starts to stream
		b := Binding{Turn: "t_cancel", Grant: "g_cancel", Budget: 2000}
		res, usage, g, _ := run(t, ctx, up, b)
		if res.Status == codex.StatusCompleted {
			t.Fatalf("the cancelled turn completed: %+v", res)
		}
		reqs := up.mock.Requests()
		if len(reqs) != 1 || usage.InputTokens < int64(len(reqs[0].Body))/4 {
			t.Fatalf("the model got %d requests; the turn was charged %+v", len(reqs), usage)
		}
		if _, err := g.Open(Binding{Turn: "t_next", Grant: b.Grant, Budget: b.Budget}, time.Now().Add(time.Minute)); !errors.Is(err, ErrBudget) {
			t.Errorf("the grant's next turn: %v", err)
		}
	})
	t.Run("M12 M14 sub-agents run on the turn's model, and Codex cutting them is charged", func(t *testing.T) {
		up := newUpstream(t, ownerKey(), mockmodel.Spawn("helper", "look around", "gpt-6-astra", "ultra"), mockmodel.Message("done"))
		up.mock.Agent("/root/helper", mockmodel.Stall(8000))
		subAsked := make(chan struct{})
		var once sync.Once
		rootAsked := 0
		up.hold = func(r *http.Request) {
			switch agentOf(r) {
			case "/root/helper":
				once.Do(func() { close(subAsked) })
			case "/root":
				if rootAsked++; rootAsked == 2 {
					select { // the root answers once its sub-agent is at work
					case <-subAsked:
					case <-r.Context().Done():
					}
				}
			}
		}
		res, usage, _, _ := run(t, context.Background(), up, Binding{Turn: "t_spawn", Grant: "g_spawn"})
		var root, sub []mockmodel.Request
		for _, r := range up.mock.Requests() {
			if r.TurnMetadata()["agent_name"] == "/root/helper" {
				sub = append(sub, r)
			} else {
				root = append(root, r)
			}
		}
		if len(sub) == 0 || len(root) < 2 {
			t.Fatalf("root %d, sub-agent %d requests; turn %+v", len(root), len(sub), res)
		}
		var rootBody, subBody struct {
			Model     string
			Reasoning struct{ Effort string }
		}
		_ = json.Unmarshal(root[0].Body, &rootBody)
		_ = json.Unmarshal(sub[0].Body, &subBody)
		if subBody.Model != rootBody.Model || subBody.Reasoning.Effort != rootBody.Reasoning.Effort {
			t.Errorf("M14 the sub-agent asked the model for %q at %q; the turn runs %q at %q", subBody.Model, subBody.Reasoning.Effort,
				rootBody.Model, rootBody.Reasoning.Effort)
		}
		counted := int64(10 * len(root)) // the mock's usage of each answer that completed
		if usage.InputTokens < counted+int64(len(sub[0].Body))/4 {
			t.Errorf("M12 the turn was charged %+v: the cut sub-agent's %d bytes are missing", usage, len(sub[0].Body))
		}
	})
	t.Run("M18 a passing rate limit is retried by Codex, and the turn completes", func(t *testing.T) {
		up := newUpstream(t, ownerKey(), mockmodel.RateLimited("1"), mockmodel.Message("done"))
		res, _, _, pass := run(t, context.Background(), up, Binding{Turn: "t_rate", Grant: "g_rate"})
		if res.Status != codex.StatusCompleted || res.Answer != "done" || pass.Err() != nil {
			t.Errorf("turn %+v; pass ended with %v; the model got %d requests", res, pass.Err(), len(up.mock.Requests()))
		}
	})
}
