package modelgw

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// partial streams an answer's first events and a long delta, then holds the stream open
// until the request is cut: an answer that never reaches its usage event.
func partial(delta int) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\"}}\n\n")
		fmt.Fprintf(w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":%q}\n\n", strings.Repeat("x", delta))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
}

// TestBudgetHolds: a grant's budget holds against every way a request can end.
func TestBudgetHolds(t *testing.T) {
	clk := &clock{now: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	t.Run("M11 a stream cut mid-answer is charged what was sent and streamed", func(t *testing.T) {
		up := newFakeUpstream(t, partial(4000))
		g := gatewayFor(t, window{BaseURL: up.srv.URL + "/v1", Key: testKey}, clk, 0)
		p, err := g.Open(Binding{Turn: "t1", Grant: "g", Budget: 1000}, clk.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		body := `{"model":"m","input":"` + strings.Repeat("y", 4000) + `"}`
		req, _ := http.NewRequest(http.MethodPost, p.BaseURL+"/responses", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+p.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(resp.Body)
		for { // the agent reads the answer's start, then drops it (its turn cancelled, Codex stopped)
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(line, "output_text.delta\",\"delta") {
				break
			}
		}
		resp.Body.Close()
		u := p.Close()
		if u.InputTokens < int64(len(body))/4 || u.OutputTokens < 1000 {
			t.Fatalf("the cut request was charged %+v, want at least what was sent and streamed (%d in, 1000 out)", u, len(body)/4)
		}
		before := len(up.requests())
		if _, err := g.Open(Binding{Turn: "t2", Grant: "g", Budget: 1000}, clk.Now().Add(time.Hour)); !errors.Is(err, ErrBudget) {
			t.Fatalf("the grant's next turn: %v", err)
		}
		if len(up.requests()) != before {
			t.Error("the model was asked again")
		}
	})
	t.Run("M13 a turn that opened before the budget was spent gets no request through", func(t *testing.T) {
		up := newFakeUpstream(t, completed(60, 60))
		g := gatewayFor(t, window{BaseURL: up.srv.URL + "/v1", Key: testKey}, clk, 0)
		first, _ := g.Open(Binding{Turn: "t1", Grant: "g", Budget: 100}, clk.Now().Add(time.Hour))
		queued, err := g.Open(Binding{Turn: "t2", Grant: "g", Budget: 100}, clk.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		other, _ := g.Open(Binding{Turn: "t3", Grant: "other", Budget: 100}, clk.Now().Add(time.Hour))
		post(t, first.BaseURL+"/responses", first.Token, "{}") // 120 of 100
		<-first.Ended()
		before := len(up.requests())
		resp, body := post(t, queued.BaseURL+"/responses", queued.Token, "{}")
		if resp.StatusCode < 400 || len(up.requests()) != before {
			t.Fatalf("the queued turn's request: %d %s; the model was asked %d times more", resp.StatusCode, body, len(up.requests())-before)
		}
		select {
		case <-queued.Ended():
			if !errors.Is(queued.Err(), ErrBudget) {
				t.Errorf("the queued turn's pass ended with %v", queued.Err())
			}
		default:
			t.Error("the queued turn's pass stands")
		}
		if resp, _ := post(t, other.BaseURL+"/responses", other.Token, "{}"); resp.StatusCode != http.StatusOK {
			t.Errorf("another grant's turn: %d", resp.StatusCode)
		}
	})
	t.Run("M19 an upstream that reports no usage is charged an estimate, and the Status page says so", func(t *testing.T) {
		up := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":%q}\n\n", strings.Repeat("z", 1600))
			fmt.Fprint(w, "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\"}}\n\n")
		})
		g := gatewayFor(t, window{BaseURL: "http://" + strings.TrimPrefix(up.srv.URL, "http://") + "/v1"}, clk, 0)
		p, _ := g.Open(Binding{Turn: "t1", Grant: "g", Budget: 300}, clk.Now().Add(time.Hour))
		post(t, p.BaseURL+"/responses", p.Token, `{"model":"m"}`)
		if u := p.Close(); u.OutputTokens < 400 {
			t.Errorf("usage %+v, want at least what was streamed (400 out)", u)
		}
		if !g.Status().NoUsage {
			t.Error("the Status page is not told that the upstream reports no usage")
		}
		if _, err := g.Open(Binding{Turn: "t2", Grant: "g", Budget: 300}, clk.Now().Add(time.Hour)); !errors.Is(err, ErrBudget) {
			t.Errorf("the grant's next turn: %v", err)
		}
	})
}

// TestHold: every request of a turn asks for the model, effort and service tier the turn
// began with (the pass's model when set): a sub-agent's choice is not the owner's.
func TestHold(t *testing.T) {
	up := newFakeUpstream(t, completed(1, 1))
	clk := &clock{now: time.Now()}
	g := gatewayFor(t, window{BaseURL: up.srv.URL + "/v1", Key: testKey, Model: "owner-model"}, clk, 0)
	p, err := g.Open(Binding{Turn: "t", Grant: "g"}, clk.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	seen := func() map[string]any {
		up.mu.Lock()
		defer up.mu.Unlock()
		var m map[string]any
		if err := json.Unmarshal([]byte(up.bodies[len(up.bodies)-1]), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	post(t, p.BaseURL+"/responses", p.Token, `{"model":"codex-default","reasoning":{"effort":"low","summary":"auto"},"input":[]}`)
	if m := seen(); m["model"] != "owner-model" || m["reasoning"].(map[string]any)["effort"] != "low" {
		t.Fatalf("the root request reached the model as %v", m)
	}
	t.Run("M14 a sub-agent's request on another model, effort and service tier", func(t *testing.T) {
		resp, body := post(t, p.BaseURL+"/responses", p.Token,
			`{"model":"gpt-frontier","reasoning":{"effort":"ultra","summary":"auto"},"service_tier":"priority","input":[{"x":1}]}`)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		m := seen()
		r, _ := m["reasoning"].(map[string]any)
		if m["model"] != "owner-model" || r["effort"] != "low" || r["summary"] != "auto" || m["service_tier"] != nil || m["input"] == nil {
			t.Errorf("the sub-agent's request reached the model as %v", m)
		}
	})
	t.Run("M14 a body that is not a JSON object, or a model that is not a string", func(t *testing.T) {
		before := len(up.requests())
		for _, b := range []string{`[1]`, `{"model":1}`, `{"model":"a"`, `{"reasoning":"high"}`} {
			if resp, body := post(t, p.BaseURL+"/responses", p.Token, b); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s: %d %s", b, resp.StatusCode, body)
			}
		}
		if n := len(up.requests()) - before; n != 0 {
			t.Errorf("%d went through", n)
		}
	})
}

// TestUpstreamWords: what an upstream says goes to the owner, never to the agent.
func TestUpstreamWords(t *testing.T) {
	const key = "sk-proj/owner+9f/2c"
	escaped := strings.ReplaceAll(key, "/", `\/`)
	for _, c := range []struct {
		name, body, owner string
	}{
		{"M15 a rate limit names the owner's organisation", `{"error":{"message":"Rate limit reached for gpt-x in organization org-OwnerSecret42 on tokens per min","code":"rate_limit_exceeded"}}`,
			"org-OwnerSecret42"},
		{"M15 a key echoed JSON-escaped", `{"error":{"message":"Incorrect API key provided: ` + escaped + `","code":"invalid_api_key"}}`,
			"Incorrect API key provided: [the owner's key]"},
		{"M15 a key echoed escaped in text that is not JSON", `bad key \u0073k-proj\/owner+9f\/2c`, "bad key [the owner's key]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status := http.StatusUnauthorized
			if strings.Contains(c.body, "rate_limit") {
				status = http.StatusTooManyRequests
			}
			up := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(status)
				io.WriteString(w, c.body)
			})
			clk := &clock{now: time.Now()}
			g := gatewayFor(t, window{BaseURL: up.srv.URL + "/v1", Key: key}, clk, 0)
			p, _ := g.Open(Binding{Turn: "t", Grant: "g"}, clk.Now().Add(time.Hour))
			resp, body := post(t, p.BaseURL+"/responses", p.Token, "{}")
			var e struct {
				Error struct{ Message string } `json:"error"`
			}
			_ = json.Unmarshal([]byte(body), &e)
			want := fmt.Sprintf("the owner's model server %s (HTTP %d)", map[int]string{401: "refused the request", 429: "is rate-limiting the owner's key"}[status], status)
			if resp.StatusCode != status || e.Error.Message != want {
				t.Errorf("Codex got %d %s, want the fixed %q", resp.StatusCode, body, want)
			}
			if status == http.StatusUnauthorized {
				<-p.Ended()
				if p.Err().Error() != "model_unavailable: "+want {
					t.Errorf("the turn's reason %q", p.Err())
				}
			}
			if st := g.Status(); !strings.Contains(st.LastError, c.owner) || strings.Contains(st.LastError, key) {
				t.Errorf("the Status page shows %q, want %q without the key", st.LastError, c.owner)
			}
		})
	}
}

// TestRedirects: an upstream's redirect is not followed; the key goes nowhere else.
func TestRedirects(t *testing.T) {
	elsewhere := newFakeUpstream(t, completed(1, 1))
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
		t.Run(fmt.Sprintf("M17 an upstream redirects to another port (%d)", status), func(t *testing.T) {
			up := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, elsewhere.srv.URL+"/v1/responses", status)
			})
			clk := &clock{now: time.Now()}
			g := gatewayFor(t, window{BaseURL: up.srv.URL + "/v1", Key: testKey}, clk, 0)
			p, _ := g.Open(Binding{Turn: "t", Grant: "g"}, clk.Now().Add(time.Hour))
			resp, body := post(t, p.BaseURL+"/responses", p.Token, "{}")
			if n := len(elsewhere.requests()); n != 0 {
				t.Fatalf("the redirect was followed: the other server got %d requests", n)
			}
			<-p.Ended()
			if resp.StatusCode != http.StatusBadGateway || !errors.Is(p.Err(), ErrUpstream) || strings.Contains(body, elsewhere.srv.URL) {
				t.Errorf("%d %s; ended with %v", resp.StatusCode, body, p.Err())
			}
		})
	}
}

// TestRateLimit: a passing rate limit is Codex's to retry; a quota ends the turn.
func TestRateLimit(t *testing.T) {
	var limited atomic.Bool
	limited.Store(true)
	up := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if limited.Load() {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"message":"Rate limit reached","code":"rate_limit_exceeded"}}`)
			return
		}
		completed(1, 1)(w, r)
	})
	clk := &clock{now: time.Now()}
	g := gatewayFor(t, window{BaseURL: up.srv.URL + "/v1", Key: testKey}, clk, 0)
	p, _ := g.Open(Binding{Turn: "t", Grant: "g"}, clk.Now().Add(time.Hour))
	t.Run("M18 a rate limit with Retry-After leaves the turn standing", func(t *testing.T) {
		resp, _ := post(t, p.BaseURL+"/responses", p.Token, "{}")
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("%d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		select {
		case <-p.Ended():
			t.Fatalf("the pass ended: %v", p.Err())
		default:
		}
		if !strings.Contains(g.Status().LastError, "rate-limiting") {
			t.Errorf("the Status page: %+v", g.Status())
		}
		limited.Store(false)
		if resp, _ := post(t, p.BaseURL+"/responses", p.Token, "{}"); resp.StatusCode != http.StatusOK {
			t.Errorf("the retry: %d", resp.StatusCode)
		}
	})
}
