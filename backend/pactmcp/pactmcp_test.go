package pactmcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/pactmcp"
)

// noNode is an owner's node that is never reached: the hostile node fails the ask first.
type noNode struct{}

func (noNode) MintIdentity(context.Context, string, string) (owner.IdentityToken, error) {
	return owner.IdentityToken{}, errors.New("not reached")
}
func (noNode) KeepReceived(context.Context, owner.ReceivedRequest) (owner.ReceivedReceipt, error) {
	return owner.ReceivedReceipt{}, errors.New("not reached")
}
func (noNode) Received(context.Context) (owner.ReceivedList, error) { return owner.ReceivedList{}, nil }

// connect runs the server on an in-memory transport and connects the SDK's client to it.
func connect(t *testing.T, cfg pactmcp.Config) *sdk.ClientSession {
	t.Helper()
	cfg.Agent, cfg.Node, cfg.Dir = "assistant", noNode{}, t.TempDir()
	s, err := pactmcp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go s.Run(ctx, st)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *sdk.ClientSession, name string, args any) (*sdk.CallToolResult, pactmcp.Answer) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var ans pactmcp.Answer
	data, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(data, &ans)
	return res, ans
}

func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestHostileNode(t *testing.T) {
	t.Run("Q1 a card larger than the cap is refused, not read whole", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"name":"`))
			chunk := []byte(strings.Repeat("a", 64<<10))
			for range 64 { // 4 MiB
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}))
		defer srv.Close()
		cs := connect(t, pactmcp.Config{})
		res, _ := call(t, cs, "pact_describe", map[string]any{"url": srv.URL + "/a2a/x/.well-known/agent-card.json"})
		if !res.IsError || !strings.Contains(text(res), "larger than") {
			t.Fatalf("pact_describe of a 4 MiB card: error %v, %q", res.IsError, text(res))
		}
	})

	t.Run("Q2 a node that never answers: each call returns within the wait, and the ask ends at its limit", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select { // holds every request open
			case <-r.Context().Done():
			case <-release:
			}
		}))
		defer srv.Close()
		defer close(release)
		cs := connect(t, pactmcp.Config{Wait: 200 * time.Millisecond, AskLimit: time.Second})
		res, ans := call(t, cs, "pact_ask", map[string]any{"url": srv.URL + "/a2a/x/.well-known/agent-card.json", "message": "hi"})
		if ans.State != "waiting" || ans.Handle == "" || !strings.Contains(text(res), ans.Handle) {
			t.Fatalf("first call: %+v %q", ans, text(res))
		}
		for ans.State == "waiting" { // as an assistant goes on: each call is bounded by the wait
			res, ans = call(t, cs, "pact_ask", map[string]any{"handle": ans.Handle})
		}
		if ans.State != "failed" || !res.IsError || !strings.Contains(ans.Error, "deadline exceeded") {
			t.Fatalf("the ask did not end at its limit: %+v", ans)
		}
		res, _ = call(t, cs, "pact_ask", map[string]any{"handle": ans.Handle})
		if !res.IsError || !strings.Contains(text(res), "no ask with handle") {
			t.Fatalf("a finished handle answered again: %q", text(res))
		}
	})
}
