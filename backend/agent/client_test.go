package agent

import (
	"bytes"
	"context"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// doneExecutor completes every turn at once with an answer artifact.
type doneExecutor struct{}

func (doneExecutor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		ans := a2a.NewArtifactEvent(ec, a2a.NewTextPart("ok"))
		ans.Artifact.Name = "answer"
		if !yield(ans, nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (doneExecutor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

type seenCall struct {
	path       string
	auth, dele string
	body       string
	ext        []string // A2A-Extensions
}

// a2aServer is a plain a2a-go server (both bindings at /a2a/review) that
// records the credentials headers and body of every call.
func a2aServer(t *testing.T) (*httptest.Server, func() []seenCall) {
	h := a2asrv.NewHandler(doneExecutor{})
	rpc, rest := a2asrv.NewJSONRPCHandler(h), a2asrv.NewRESTHandler(h)
	var mu sync.Mutex
	var calls []seenCall
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		mu.Lock()
		calls = append(calls, seenCall{r.URL.Path, r.Header.Get("Authorization"), r.Header.Get(DelegationHeader), string(body), r.Header.Values("A2A-Extensions")})
		mu.Unlock()
		if r.URL.Path == "/a2a/review" {
			rpc.ServeHTTP(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = strings.TrimPrefix(r.URL.Path, "/a2a/review")
		rest.ServeHTTP(w, r2)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []seenCall {
		mu.Lock()
		defer mu.Unlock()
		return append([]seenCall(nil), calls...)
	}
}

// A card that does not declare the PACT extension gets no A2A-Extensions.
func TestConnActivatesOnlyWhatTheCardDeclares(t *testing.T) {
	srv, calls := a2aServer(t)
	ac := pactCard(srv.URL, "review", "review:read_only")
	ac.Capabilities.Extensions = nil
	card, err := ParseCard(mustJSON(t, ac), srv.URL+"/a2a/review/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := (&Client{Identity: &countingIdentity{}}).Connect(context.Background(), card, a2a.TransportProtocolJSONRPC)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Send(context.Background(), a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))); err != nil {
		t.Fatal(err)
	}
	if got := calls(); len(got) != 1 || len(got[0].ext) != 0 {
		t.Errorf("calls %+v; want one without A2A-Extensions", got)
	}
}

func TestConnCarriesCredentialsAsHeadersOnly(t *testing.T) {
	for _, binding := range []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON} {
		t.Run(string(binding), func(t *testing.T) {
			srv, calls := a2aServer(t)
			card, err := ParseCard(mustJSON(t, pactCard(srv.URL, "review", "review:read_only")), srv.URL+"/a2a/review/.well-known/agent-card.json")
			if err != nil {
				t.Fatal(err)
			}
			conn, err := (&Client{Identity: &countingIdentity{}}).Connect(context.Background(), card, binding)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx := context.Background()
			if _, err := conn.Send(ctx, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("no token yet"))); err != nil {
				t.Fatal(err)
			}
			conn.SetDelegation("deleg-secret")
			task, err := conn.Stream(ctx, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("with token")), nil)
			if err != nil {
				t.Fatal(err)
			}
			if task.Status.State != a2a.TaskStateCompleted || ReadOutcome(task).Answer != "ok" {
				t.Fatalf("streamed task %s answer %q", task.Status.State, ReadOutcome(task).Answer)
			}
			if _, err := conn.GetTask(ctx, task.ID); err != nil {
				t.Fatal(err)
			}
			got := calls()
			if len(got) != 3 {
				t.Fatalf("%d calls, want 3: %+v", len(got), got)
			}
			wantDeleg := []string{"", "deleg-secret", ""} // only a turn carries it
			for i, c := range got {
				if !strings.HasPrefix(c.auth, "Bearer tok-") {
					t.Errorf("call %d (%s): Authorization %q", i, c.path, c.auth)
				}
				if c.dele != wantDeleg[i] {
					t.Errorf("call %d (%s): %s %q, want %q", i, c.path, DelegationHeader, c.dele, wantDeleg[i])
				}
				if len(c.ext) != 1 || c.ext[0] != ExtensionURI { // the card declares PACT: activate it
					t.Errorf("call %d (%s): A2A-Extensions %q, want %s", i, c.path, c.ext, ExtensionURI)
				}
				if strings.Contains(c.body, "deleg-secret") || strings.Contains(c.body, "tok-") {
					t.Errorf("call %d carries a credential in its body: %s", i, c.body)
				}
			}
		})
	}
}
