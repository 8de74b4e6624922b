package agent

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// hostileAnswerBytes is the audit's answer: 400 MB gave a 926 MB peak (docs/threats.md, R19).
const hostileAnswerBytes = 400 << 20

// hostileNode answers every A2A call with a valid start of an answer whose one text part runs
// on for hostileAnswerBytes: JSON for a plain call, an SSE event of 1 MiB data lines (a2a-go
// joins them into one event) for a stream. It counts the bytes it got out, and tells when a
// call's writing ended (the client let go, or it was all written).
func hostileNode(t *testing.T) (srv *httptest.Server, written *atomic.Int64, ended chan struct{}) {
	written, ended = new(atomic.Int64), make(chan struct{}, 8)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { ended <- struct{}{} }()
		stream := strings.Contains(r.Header.Get("Accept"), "text/event-stream")
		task := `{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"},"artifacts":[{"artifactId":"a1","parts":[{"text":"`
		head, chunk, tail := task, bytes.Repeat([]byte("a"), 1<<20), `"}]}]}}`
		if r.URL.Path == "/a2a/review" { // JSON-RPC: the task is the result
			head, tail = `{"jsonrpc":"2.0","id":"1","result":`+task, tail+"}"
		}
		w.Header().Set("Content-Type", "application/json")
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			head, chunk, tail = "data: "+head, append([]byte("\ndata: "), chunk...), tail+"\n\n"
		}
		n, err := w.Write([]byte(head))
		written.Add(int64(n))
		for sent := 0; err == nil && sent < hostileAnswerBytes; sent += len(chunk) {
			n, err = w.Write(chunk)
			written.Add(int64(n))
		}
		if err == nil {
			w.Write([]byte(tail))
		}
	}))
	t.Cleanup(srv.Close)
	return srv, written, ended
}

// TestHostileNodeAnswers: a node answers a turn with 400 MB, plain or streamed, on either
// binding. The agent refuses it once it has read maxAnswerBytes, saying so, and lets the
// connection go; it allocates a bounded amount meanwhile.
func TestHostileNodeAnswers(t *testing.T) {
	for _, binding := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON} {
		for _, stream := range []bool{false, true} {
			name := "R19 a 400 MB answer " + string(binding)
			if stream {
				name += " streamed"
			}
			t.Run(name, func(t *testing.T) {
				srv, written, ended := hostileNode(t)
				card, err := ParseCard(mustJSON(t, pactCard(srv.URL, "review", "review:read_only")), srv.URL+"/a2a/review/.well-known/agent-card.json")
				if err != nil {
					t.Fatal(err)
				}
				conn, err := (&Client{Identity: &countingIdentity{}}).Connect(context.Background(), card, binding)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				if stream {
					_, err = conn.Stream(context.Background(), msg, nil)
				} else {
					_, err = conn.Send(context.Background(), msg)
				}
				runtime.ReadMemStats(&after)
				if !errors.Is(err, ErrAnswerTooLarge) {
					t.Errorf("the agent answered %v; want %v", err, ErrAnswerTooLarge)
				}
				<-ended // the node's writes failed: the agent dropped the connection
				// What the agent read is the cap; the rest is what the sockets buffer on loopback.
				if got := written.Load(); got > maxAnswerBytes+32<<20 {
					t.Errorf("the node got %d MiB out before the agent let go; want about %d MiB", got>>20, maxAnswerBytes>>20)
				}
				// a2a-go's decoder grows its buffer by doubling (4 times the cap here): a few times the cap,
				// never the answer.
				if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 5*maxAnswerBytes {
					t.Errorf("the agent allocated %d MiB reading the answer; want at most %d MiB", alloc>>20, 5*maxAnswerBytes>>20)
				} else {
					t.Logf("allocated %d MiB, the node wrote %d MiB", alloc>>20, written.Load()>>20)
				}
			})
		}
	}
}
