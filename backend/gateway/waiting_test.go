package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// TestRefusingWriter: what the gate refuses is the whole answer, even where a2a-go has set a
// stream's headers already; what it lets through goes out unchanged (K2).
func TestRefusingWriter(t *testing.T) {
	t.Run("K2 a refusal replaces the stream a2a-go began", func(t *testing.T) {
		rec := httptest.NewRecorder()
		w := &refusingWriter{ResponseWriter: rec, b: bindingJSONRPC}
		ctx := withRefusals(context.Background(), w)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.Flush() // held: a refusal may still come
		if rec.Flushed {
			t.Fatal("flushed before the first byte")
		}
		err := refuse(ctx, errBusy.with("this agent already has 10 tasks waiting"), 90*time.Second+time.Millisecond)
		if err == nil {
			t.Fatal("refuse returned no error for a2a-go")
		}
		w.Write([]byte("data: {\"error\": …}\n\n"))
		w.finish()
		var body struct {
			Error struct {
				Code    int
				Message string
			}
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("body %q: %v", rec.Body.String(), err)
		}
		if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "91" ||
			rec.Header().Get("Content-Type") != "application/json" || body.Error.Code != -32000 || !strings.Contains(body.Error.Message, "10 tasks") {
			t.Fatalf("refusal: %d %v %s", rec.Code, rec.Header(), rec.Body.String())
		}
	})

	t.Run("K2 an answer without a refusal goes out as written", func(t *testing.T) {
		rec := httptest.NewRecorder()
		w := &refusingWriter{ResponseWriter: rec, b: bindingREST}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("data: 1\n\n"))
		w.Flush()
		// A refusal after the first byte is too late to change the answer; the error stays a2a-go's.
		if err := refuse(withRefusals(context.Background(), w), errBusy, time.Second); !strings.Contains(err.Error(), a2a.ErrServerError.Error()) {
			t.Fatalf("late refusal: %v", err)
		}
		w.Write([]byte("data: 2\n\n"))
		w.finish()
		if rec.Code != http.StatusOK || !rec.Flushed || rec.Body.String() != "data: 1\n\ndata: 2\n\n" || rec.Header().Get("Retry-After") != "" {
			t.Fatalf("passed through: %d %v %q", rec.Code, rec.Header(), rec.Body.String())
		}
	})
}

// durableFunc is a turn.Finished's Durable, as a function.
type durableFunc func() error

func (d durableFunc) Durable() error { return d() }

// TestHeldAnswer: a plain send's answer carries a receipt whose commit is still under way; it
// is made meanwhile, but the agent gets no byte of it before that commit is durable, and an
// error in its place when the commit fails (T8). A real server on loopback, a real client.
func TestHeldAnswer(t *testing.T) {
	const answer = `{"jsonrpc":"2.0","id":"7","result":{"task":{"artifacts":[{"name":"receipt"}]}}}`
	// written, if not nil, is closed once the handler has written the answer.
	serve := func(t *testing.T, b binding, durable func() error, written chan struct{}) string {
		t.Helper()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rw := &refusingWriter{ResponseWriter: w, b: b, id: json.RawMessage(`"7"`)}
			rw.Header().Set("Content-Type", "application/json")
			if err := holdAnswer(withRefusals(r.Context(), rw), durableFunc(durable)); err != nil {
				rw.Write([]byte(`{"jsonrpc":"2.0","id":"7","error":{"code":-32000}}`)) // as a2a-go writes the error
			} else {
				rw.WriteHeader(http.StatusOK)
				rw.Write([]byte(answer)) // as a2a-go writes the answer it encoded
				rw.Flush()
			}
			if written != nil {
				close(written)
			}
			rw.finish()
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	get := func(url string) (*http.Response, string, error) {
		res, err := http.Post(url, "application/json", strings.NewReader(`{}`))
		if err != nil {
			return nil, "", err
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		return res, string(body), err
	}

	t.Run("T8 no byte of the answer leaves before its receipt is durable", func(t *testing.T) {
		commit := make(chan struct{})
		written := make(chan struct{})
		url := serve(t, bindingJSONRPC, func() error { <-commit; return nil }, written)
		type got struct {
			body string
			err  error
		}
		done := make(chan got, 1)
		go func() {
			_, body, err := get(url)
			done <- got{body, err}
		}()
		select { // the answer is made, and flushed, while the commit is under way
		case <-written:
		case <-time.After(10 * time.Second):
			t.Fatal("the answer was not made while its commit was under way")
		}
		select {
		case g := <-done:
			t.Fatalf("answered before the commit: %q, %v", g.body, g.err)
		case <-time.After(50 * time.Millisecond): // time enough for an answer not held back to arrive
		}
		close(commit)
		if g := <-done; g.err != nil || g.body != answer {
			t.Fatalf("after the commit: %q, %v", g.body, g.err)
		}
	})

	t.Run("T8 an answer whose receipt was not recorded is replaced by an error", func(t *testing.T) {
		failed := func() error { return errors.New("commit: disk I/O error") }
		for _, c := range []struct {
			b      binding
			status int
		}{{bindingJSONRPC, http.StatusOK}, {bindingREST, http.StatusInternalServerError}} {
			res, body, err := get(serve(t, c.b, failed, nil))
			if err != nil {
				t.Fatal(err)
			}
			var out struct {
				ID    json.RawMessage
				Error struct {
					Code    int
					Status  string
					Message string
				}
			}
			if err := json.Unmarshal([]byte(body), &out); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if strings.Contains(body, "receipt\"}") || res.StatusCode != c.status || !strings.Contains(out.Error.Message, "could not record") {
				t.Errorf("binding %d: %d %q", c.b, res.StatusCode, body)
			}
			if c.b == bindingJSONRPC && (out.Error.Code != -32603 || string(out.ID) != `"7"`) {
				t.Errorf("JSON-RPC error: code %d id %s", out.Error.Code, out.ID)
			}
			if c.b == bindingREST && out.Error.Status != "INTERNAL" {
				t.Errorf("REST error status %q", out.Error.Status)
			}
		}
	})
}
