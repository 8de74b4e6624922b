package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aether/aether/backend/owner"
)

// openStream starts GET /api/events and returns a reader positioned after the retry line.
func openStream(t *testing.T, e *env, ctx context.Context, cookie string) (*http.Response, *bufio.Reader) {
	t.Helper()
	r := e.req("GET", "/api/events", "", map[string]string{"Cookie": cookie, "Accept": "text/event-stream", "Sec-Fetch-Site": "same-origin"})
	resp, err := e.client.Do(r.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	wantStatus(t, resp, "", http.StatusOK)
	if resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("stream headers %v", resp.Header)
	}
	br := bufio.NewReader(resp.Body)
	if got := readChunk(t, br); got != "retry: 3000\n" {
		t.Fatalf("first chunk %q", got)
	}
	return resp, br
}

// readChunk reads one SSE block (up to the blank line).
func readChunk(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	var sb strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read stream: %v (so far %q)", err, sb.String())
		}
		if line == "\n" {
			return sb.String()
		}
		sb.WriteString(line)
	}
}

func TestEvents(t *testing.T) {
	t.Run("delivers events and ends on Close", func(t *testing.T) {
		e := newEnv(t)
		cookie, _ := e.signIn()
		_, br := openStream(t, e, context.Background(), cookie)
		backendCtx := <-e.b.streams

		req := owner.ConsentRequest{ID: "req1", UserCode: "BCDF-GHJK"}
		e.b.events <- owner.Event{Name: owner.EventConsent, Data: owner.ConsentEvent{Pending: 1, Request: &req, Kind: "added"}}
		chunk := readChunk(t, br)
		name, data, ok := strings.Cut(chunk, "\ndata: ")
		if !ok || name != "event: consent" {
			t.Fatalf("chunk %q", chunk)
		}
		var ce owner.ConsentEvent
		if err := json.Unmarshal([]byte(data), &ce); err != nil || ce.Kind != "added" || ce.Request == nil || ce.Request.UserCode != "BCDF-GHJK" {
			t.Fatalf("data %q (%v)", data, err)
		}
		e.b.events <- owner.Event{Name: owner.EventPolicy}
		if got := readChunk(t, br); got != "event: policy\ndata: {}\n" {
			t.Fatalf("policy chunk %q", got)
		}

		e.srv.Close()
		if line, err := br.ReadString('\n'); err == nil {
			t.Fatalf("stream still open after Close: %q", line)
		}
		<-backendCtx.Done() // the backend's subscription ended too

		// New streams are refused once closed.
		resp, body := e.call("GET", "/api/events", "", map[string]string{"Cookie": cookie})
		wantStatus(t, resp, body, http.StatusServiceUnavailable)
	})

	t.Run("pings and ends when the client goes", func(t *testing.T) {
		e := newEnv(t)
		e.srv.pingEvery = time.Millisecond
		cookie, _ := e.signIn()
		ctx, cancel := context.WithCancel(context.Background())
		_, br := openStream(t, e, ctx, cookie)
		backendCtx := <-e.b.streams
		if got := readChunk(t, br); got != ": ping\n" {
			t.Fatalf("ping chunk %q", got)
		}
		cancel()
		<-backendCtx.Done()
	})
}
