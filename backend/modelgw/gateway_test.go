package modelgw

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aether/aether/backend/model"
	"github.com/aether/aether/backend/store"
)

// fakeUpstream is a Responses server on loopback that records what reaches it.
type fakeUpstream struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []*http.Request
	bodies []string
	answer func(w http.ResponseWriter, r *http.Request)
}

func newFakeUpstream(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *fakeUpstream {
	u := &fakeUpstream{answer: answer}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return // a body cut short never counts as a request
		}
		u.mu.Lock()
		u.got, u.bodies = append(u.got, r), append(u.bodies, string(b))
		u.mu.Unlock()
		u.answer(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *fakeUpstream) requests() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*http.Request(nil), u.got...)
}

// completed answers with one streamed response whose usage is in/out.
func completed(in, out int) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\"}}\n\n")
		fmt.Fprintf(w, "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"usage\":{\"input_tokens\":%d,\"input_tokens_details\":{\"cached_tokens\":2},\"output_tokens\":%d}}}\n\n", in, out)
	}
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// window is what the owner set in the window, saved in a model.Store as the node saves it.
type window struct{ BaseURL, Key, Model string }

func (w window) store(t *testing.T) *model.Store {
	t.Helper()
	s := &model.Store{Dir: t.TempDir()}
	c := model.Change{BaseURL: &w.BaseURL, Model: &w.Model}
	if w.Key != "" {
		c.Key = &w.Key
	}
	if err := s.Change(c); err != nil {
		t.Fatal(err)
	}
	return s
}

func gatewayFor(t *testing.T, up window, clk *clock, maxBody int64) *Gateway {
	g, err := Start(Config{Models: up.store(t), Now: clk.Now, MaxBody: maxBody,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func post(t *testing.T, url, token, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

const testKey = "sk-owner-test-5f1e2d3c"

// TestTokens: a token works for its turn while it runs, and for nothing else.
func TestTokens(t *testing.T) {
	up := newFakeUpstream(t, completed(10, 5))
	clk := &clock{now: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	g := gatewayFor(t, window{BaseURL: up.srv.URL + "/v1", Key: testKey}, clk, 0)
	a, err := g.Open(Binding{Turn: "t_a", Grant: "g_a", Brand: "review", Agent: "alice"}, clk.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	url := a.BaseURL + "/responses"
	if resp, body := post(t, url, a.Token, `{"model":"m","input":[]}`); resp.StatusCode != 200 || !strings.Contains(body, "response.completed") {
		t.Fatalf("a live token: %d %s", resp.StatusCode, body)
	}
	if got := up.requests(); len(got) != 1 || got[0].Header.Get("Authorization") != "Bearer "+testKey {
		t.Fatalf("the upstream got %d requests, Authorization %q", len(got), got[0].Header.Get("Authorization"))
	}
	b, err := g.Open(Binding{Turn: "t_b", Grant: "g_b", Brand: "review", Agent: "bob"}, clk.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if u := a.Close(); u.InputTokens != 10 || u.OutputTokens != 5 || u.CachedInputTokens != 2 {
		t.Errorf("usage %+v, want the upstream's 10 in (2 cached), 5 out", u)
	}
	refused := func(t *testing.T, token string) {
		t.Helper()
		before := len(up.requests())
		resp, body := post(t, url, token, `{"model":"m","input":[]}`)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "invalid_api_key") {
			t.Errorf("got %d %s, want 401", resp.StatusCode, body)
		}
		if len(up.requests()) != before {
			t.Errorf("the upstream was called")
		}
	}
	t.Run("M2 a turn's token replayed after the turn ended, while another turn runs", func(t *testing.T) {
		refused(t, a.Token)
	})
	t.Run("M4 a made-up token, no token, a token cut short or in another case", func(t *testing.T) {
		for _, tok := range []string{"aether-turn-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "", b.Token[:len(b.Token)-1], strings.ToUpper(b.Token), testKey} {
			refused(t, tok)
		}
	})
	t.Run("M3 a token after its deadline", func(t *testing.T) {
		clk.add(time.Minute)
		refused(t, b.Token)
		select {
		case <-b.Ended():
		default:
			t.Error("the expired pass was not ended")
		}
	})
}

// TestNoOpenProxy: with a live token, nothing but POST /v1/responses reaches anything, and it
// reaches only the owner's upstream, whatever the request names.
func TestNoOpenProxy(t *testing.T) {
	up := newFakeUpstream(t, completed(1, 1))
	victim := newFakeUpstream(t, completed(1, 1))
	clk := &clock{now: time.Now()}
	g := gatewayFor(t, window{BaseURL: up.srv.URL + "/v1", Key: testKey}, clk, 1<<10)
	p, err := g.Open(Binding{Turn: "t", Grant: "g"}, clk.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(strings.TrimSuffix(p.BaseURL, "/v1"), "http://")
	victimHost := strings.TrimPrefix(victim.srv.URL, "http://")
	raw := func(t *testing.T, req string) string {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprint(c, req)
		line, _ := bufio.NewReader(c).ReadString('\n')
		return strings.TrimSpace(line)
	}
	auth := "Authorization: Bearer " + p.Token + "\r\n"
	t.Run("M5 other paths, methods and hosts", func(t *testing.T) {
		for _, req := range []string{
			"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n",
			"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 2\r\n\r\n{}",
			"POST /v1/responses/../../admin HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 2\r\n\r\n{}",
			"POST /v1/responses?url=http://" + victimHost + "/ HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 2\r\n\r\n{}",
			"GET http://" + victimHost + "/v1/responses HTTP/1.1\r\nHost: " + victimHost + "\r\n" + auth + "\r\n",
			"CONNECT " + victimHost + " HTTP/1.1\r\nHost: " + victimHost + "\r\n" + auth + "\r\n",
		} {
			if line := raw(t, req); !strings.Contains(line, " 404 ") && !strings.Contains(line, " 400 ") {
				t.Errorf("%q answered %q", strings.SplitN(req, "\r\n", 2)[0], line)
			}
		}
		if n := len(up.requests()) + len(victim.requests()); n != 0 {
			t.Errorf("%d requests went through", n)
		}
	})
	t.Run("M5 a proxy-form POST goes to the owner's upstream, never the host it names", func(t *testing.T) {
		line := raw(t, "POST http://"+victimHost+"/v1/responses HTTP/1.1\r\nHost: "+victimHost+"\r\n"+auth+"Content-Length: 2\r\n\r\n{}")
		if !strings.Contains(line, " 200 ") || len(victim.requests()) != 0 || len(up.requests()) != 1 {
			t.Errorf("answered %q; victim got %d, upstream %d", line, len(victim.requests()), len(up.requests()))
		}
	})
	t.Run("M6 a body over the cap", func(t *testing.T) {
		before := len(up.requests())
		resp, body := post(t, p.BaseURL+"/responses", p.Token, `{"input":"`+strings.Repeat("x", 2<<10)+`"}`)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || len(up.requests()) != before {
			t.Errorf("got %d %s; upstream requests %d → %d", resp.StatusCode, body, before, len(up.requests()))
		}
	})
	t.Run("M7 a WebSocket upgrade", func(t *testing.T) {
		before := len(up.requests())
		line := raw(t, "GET /v1/responses HTTP/1.1\r\nHost: x\r\n"+auth+"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
		if !strings.Contains(line, " 426 ") || len(up.requests()) != before {
			t.Errorf("answered %q", line)
		}
	})
	t.Run("M8 what the upstream is sent and sends back", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, p.BaseURL+"/responses", strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+p.Token)
		req.Header.Set("Cookie", "session=owner")
		req.Header.Set("X-Forwarded-For", "10.0.0.1")
		req.Header.Set("Proxy-Authorization", "Basic b3duZXI=")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got := up.requests()
		h := got[len(got)-1].Header
		for _, name := range []string{"Cookie", "X-Forwarded-For", "Proxy-Authorization"} {
			if h.Get(name) != "" {
				t.Errorf("%s reached the upstream", name)
			}
		}
		if strings.Contains(fmt.Sprint(h), p.Token) {
			t.Error("the turn's token reached the upstream")
		}
	})
}

// TestStreaming: each event the upstream flushes reaches Codex before the upstream goes on.
func TestStreaming(t *testing.T) {
	release := make(chan struct{})
	up := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: response.created\ndata: {\"type\":\"response.created\"}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release: // the client saw the first event
		case <-r.Context().Done():
			return
		}
		completed(3, 4)(w, r)
	})
	clk := &clock{now: time.Now()}
	g := gatewayFor(t, window{BaseURL: up.srv.URL + "/v1"}, clk, 0)
	p, _ := g.Open(Binding{Turn: "t", Grant: "g"}, clk.Now().Add(time.Hour))
	req, _ := http.NewRequest(http.MethodPost, p.BaseURL+"/responses", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+p.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	first, err := r.ReadString('\n')
	if err != nil || !strings.Contains(first, "response.created") {
		t.Fatalf("first line %q %v", first, err)
	}
	close(release)
	rest, _ := io.ReadAll(r)
	if !strings.Contains(string(rest), "response.completed") {
		t.Fatalf("rest %q", rest)
	}
	if got := up.requests()[0].Header.Get("Authorization"); got != "" {
		t.Errorf("a server set without a key got Authorization %q", got)
	}
	if u := p.Close(); u.InputTokens != 3 || u.OutputTokens != 4 {
		t.Errorf("usage %+v", u)
	}
}

// TestBudget: a grant's tokens a day: refused once used up, ended when crossed mid-turn.
func TestBudget(t *testing.T) {
	up := newFakeUpstream(t, completed(60, 20))
	clk := &clock{now: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	g := gatewayFor(t, window{BaseURL: up.srv.URL + "/v1", Key: testKey}, clk, 0)
	bind := Binding{Turn: "t1", Grant: "g", Budget: 100}
	p, err := g.Open(bind, clk.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	url := p.BaseURL + "/responses"
	post(t, url, p.Token, "{}") // 80 of 100
	select {
	case <-p.Ended():
		t.Fatal("ended under its budget")
	default:
	}
	post(t, url, p.Token, "{}") // 160: crossed
	<-p.Ended()
	if err := p.Err(); !errors.Is(err, ErrBudget) {
		t.Fatalf("pass ended with %v", err)
	}
	if resp, _ := post(t, url, p.Token, "{}"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the ended pass's token: %d", resp.StatusCode)
	}
	if u := p.Close(); total(u) != 160 {
		t.Errorf("usage %+v", u)
	}
	if _, err := g.Open(Binding{Turn: "t2", Grant: "g", Budget: 100}, clk.Now().Add(time.Hour)); !errors.Is(err, ErrBudget) {
		t.Errorf("a new turn of the spent grant: %v", err)
	}
	if _, err := g.Open(Binding{Turn: "t3", Grant: "other", Budget: 100}, clk.Now().Add(time.Hour)); err != nil {
		t.Errorf("another grant: %v", err)
	}
	if _, err := g.Open(Binding{Turn: "t4", Grant: "g"}, clk.Now().Add(time.Hour)); err != nil {
		t.Errorf("no limit: %v", err)
	}
	clk.add(24 * time.Hour)
	if _, err := g.Open(bind, clk.Now().Add(time.Hour)); err != nil {
		t.Errorf("the next day: %v", err)
	}
}

// TestUpstreamErrors: the errors a retry will not mend end the turn with a fixed reason; the
// owner's Status page gets the upstream's words; the key is never among either.
func TestUpstreamErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		body   string
		owner  string // in the Status page's last error
		agent  string // the pass's reason, the answer Codex gets
	}{
		{"M8 401", 401, `{"error":{"message":"Incorrect API key provided: ` + testKey + `","code":"invalid_api_key"}}`,
			"refused the owner's key (set another on the Status page) (HTTP 401: Incorrect API key provided: [the owner's key])",
			"the owner's model server refused the request (HTTP 401)"},
		{"429 quota", 429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`,
			"quota is used up", "the owner's model server says the owner's quota is used up (HTTP 429)"},
		{"model not found", 404, `{"error":{"message":"The model 'gpt-x' does not exist","code":"model_not_found"}}`,
			"does not have the model asked for (HTTP 404: The model 'gpt-x' does not exist)",
			"the owner's model server does not have the model asked for (HTTP 404)"},
		{"400", 400, `{"error":{"message":"Invalid value for 'input'"}}`, "refused the request (HTTP 400: Invalid value for 'input')",
			"the owner's model server refused the request (HTTP 400)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				io.WriteString(w, c.body)
			})
			clk := &clock{now: time.Now()}
			g := gatewayFor(t, window{BaseURL: up.srv.URL + "/v1", Key: testKey}, clk, 0)
			p, _ := g.Open(Binding{Turn: "t", Grant: "g"}, clk.Now().Add(time.Hour))
			resp, body := post(t, p.BaseURL+"/responses", p.Token, "{}")
			<-p.Ended()
			st := g.Status()
			if resp.StatusCode != c.status || !errors.Is(p.Err(), ErrUpstream) || p.Err().Error() != "model_unavailable: "+c.agent ||
				!strings.Contains(body, c.agent) || !strings.Contains(st.LastError, c.owner) || !st.KeyPresent {
				t.Fatalf("%d %s; ended with %v; status %+v", resp.StatusCode, body, p.Err(), st)
			}
			if strings.Contains(body+st.LastError, testKey) {
				t.Errorf("M8 the key came back: %s / %s", body, st.LastError)
			}
		})
	}
	t.Run("down", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		clk := &clock{now: time.Now()}
		g := gatewayFor(t, window{BaseURL: "http://" + addr + "/v1"}, clk, 0)
		p, _ := g.Open(Binding{Turn: "t", Grant: "g"}, clk.Now().Add(time.Hour))
		resp, _ := post(t, p.BaseURL+"/responses", p.Token, "{}")
		<-p.Ended()
		if st := g.Status(); resp.StatusCode != http.StatusBadGateway || !strings.Contains(st.LastError, "cannot be reached") || st.KeyPresent {
			t.Fatalf("%d; status %+v", resp.StatusCode, st)
		}
	})
}

// TestWhichKey: the gateway reads the key from the window's settings as it forwards each
// request, and sends a server only the key saved for it (docs/model-gateway.md).
func TestWhichKey(t *testing.T) {
	const nodeKey = "sk-node-env-77aa"
	signIn := func(problem string) func() (string, string) {
		return func() (string, string) { return nodeKey, problem }
	}
	start := func(t *testing.T, models *model.Store, in func() (string, string)) (*Gateway, *clock) {
		clk := &clock{now: time.Now()}
		g, err := Start(Config{Models: models, SignIn: in, Now: clk.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		return g, clk
	}
	bearer := func(u *fakeUpstream) string {
		reqs := u.requests()
		return reqs[len(reqs)-1].Header.Get("Authorization")
	}
	t.Run("X10 a server the owner named without a key gets none, never Codex's own sign-in", func(t *testing.T) {
		up := newFakeUpstream(t, completed(1, 1))
		g, clk := start(t, window{BaseURL: up.srv.URL + "/v1"}.store(t), signIn(""))
		p, err := g.Open(Binding{Turn: "t"}, clk.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		post(t, p.BaseURL+"/responses", p.Token, "{}")
		if got := bearer(up); got != "" || g.Status().KeyPresent {
			t.Errorf("the named server got Authorization %q", got)
		}
	})
	t.Run("X10 OpenAI named in the window gets no sign-in key; unnamed, it gets Codex's own sign-in", func(t *testing.T) {
		g, _ := start(t, window{}.store(t), signIn(""))
		if key, err := g.key(model.Settings{}); key != nodeKey || err != nil || !g.Status().KeyPresent {
			t.Errorf("key %q, %v", key, err)
		}
		if key, _ := g.key(model.Settings{BaseURL: model.OpenAIBaseURL}); key != "" {
			t.Errorf("X10 OpenAI named in the window got the sign-in's key %q", key)
		}
	})
	t.Run("an unusable sign-in refuses the turn before Codex starts", func(t *testing.T) {
		g, clk := start(t, window{}.store(t), signIn("codex is signed in with a ChatGPT account"))
		if _, err := g.Open(Binding{Turn: "t"}, clk.Now().Add(time.Hour)); !errors.Is(err, ErrUpstream) {
			t.Fatalf("open: %v", err)
		}
	})
	t.Run("M16 a key saved for another server mid-turn: the turn's server gets neither it nor the key it replaced", func(t *testing.T) {
		up := newFakeUpstream(t, completed(1, 1))
		models := window{BaseURL: up.srv.URL + "/v1", Key: testKey}.store(t)
		g, clk := start(t, models, signIn(""))
		p, err := g.Open(Binding{Turn: "t"}, clk.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		post(t, p.BaseURL+"/responses", p.Token, "{}")
		if got := bearer(up); got != "Bearer "+testKey {
			t.Fatalf("the turn's server got %q", got)
		}
		other, otherKey := "https://llm.example/v1", "sk-other-server-99"
		if err := models.Change(model.Change{BaseURL: &other, Key: &otherKey}); err != nil {
			t.Fatal(err)
		}
		post(t, p.BaseURL+"/responses", p.Token, "{}")
		if got := bearer(up); got != "" {
			t.Errorf("the turn's server got %q after the owner saved a key for another", got)
		}
	})
	t.Run("a key removed mid-turn is not sent again", func(t *testing.T) {
		up := newFakeUpstream(t, completed(1, 1))
		models := window{BaseURL: up.srv.URL + "/v1", Key: testKey}.store(t)
		g, clk := start(t, models, nil)
		p, err := g.Open(Binding{Turn: "t"}, clk.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if err := models.RemoveKey(); err != nil {
			t.Fatal(err)
		}
		post(t, p.BaseURL+"/responses", p.Token, "{}")
		if got := bearer(up); got != "" {
			t.Errorf("the removed key was sent: %q", got)
		}
	})
}

// TestBudgetSurvivesRestart: the grants' daily counts live in pact.sqlite, not in the
// gateway's memory: a node that restarts gives no grant its budget back (M10).
func TestBudgetSurvivesRestart(t *testing.T) {
	up := newFakeUpstream(t, completed(30, 10))
	clk := &clock{now: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "pact.sqlite")
	models := window{BaseURL: up.srv.URL + "/v1", Key: testKey}.store(t)
	start := func() (*Gateway, *store.DB) {
		db, err := store.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		g, err := Start(Config{Models: models,
			Now: clk.Now, Ledger: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return g, db
	}
	turn := func(g *Gateway, id string, requests int) error {
		p, err := g.Open(Binding{Turn: id, Grant: "g", Budget: 100}, clk.Now().Add(time.Hour))
		if err != nil {
			return err
		}
		for range requests {
			post(t, p.BaseURL+"/responses", p.Token, "{}")
		}
		p.Close()
		return nil
	}
	g, db := start()
	if err := turn(g, "t1", 2); err != nil { // 80 of 100
		t.Fatal(err)
	}
	g.Close()
	db.Close()

	t.Run("M10 a restart does not give the grant its budget back", func(t *testing.T) {
		g, db := start()
		defer db.Close()
		defer g.Close()
		if used, err := g.Used("g"); err != nil || used != 80 {
			t.Fatalf("after the restart the grant has used %d (%v), want 80", used, err)
		}
		if err := turn(g, "t2", 1); err != nil { // 120: crossed
			t.Fatal(err)
		}
		before := len(up.requests())
		if err := turn(g, "t3", 0); !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "used 120 of its 100") {
			t.Fatalf("a turn over the budget: %v", err)
		}
		if n := len(up.requests()); n != before {
			t.Errorf("the model was asked %d more times", n-before)
		}
		if used, err := db.ModelUse(context.Background(), "g", "2026-12-02"); err != nil || used != 120 {
			t.Errorf("pact.sqlite holds %d (%v), want 120", used, err)
		}
	})
	t.Run("the next UTC day starts afresh", func(t *testing.T) {
		clk.add(24 * time.Hour)
		g, db := start()
		defer db.Close()
		defer g.Close()
		if err := turn(g, "t4", 1); err != nil {
			t.Fatalf("the next day: %v", err)
		}
		if used, err := g.Used("g"); err != nil || used != 40 {
			t.Errorf("the next day's use %d (%v), want 40", used, err)
		}
	})
}
