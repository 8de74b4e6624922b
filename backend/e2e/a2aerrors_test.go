package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/codex/codextest"
)

// TestA2AErrors: validation errors A2A 1.0 names, on both bindings (issue 12).
func TestA2AErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.agent("alice")

	// Each invalid ListTasks parameter is InvalidParams: -32602 in HTTP 200 on JSON-RPC, 400
	// INVALID_ARGUMENT on HTTP+JSON (A2A 1.0 §3.3.2, §6.5), before the task store runs.
	cases := []struct {
		name   string
		params map[string]any
		query  string
	}{
		{"pageSize 0", map[string]any{"pageSize": 0}, "pageSize=0"},
		{"pageSize -1", map[string]any{"pageSize": -1}, "pageSize=-1"},
		{"pageSize 101", map[string]any{"pageSize": 101}, "pageSize=101"},
		{"historyLength -1", map[string]any{"historyLength": -1}, "historyLength=-1"},
		{"statusTimestampAfter not a timestamp", map[string]any{"statusTimestampAfter": "yesterday"}, "statusTimestampAfter=yesterday"},
		{"pageToken not one the node gave", map[string]any{"pageToken": "not-a-page-token"}, "pageToken=not-a-page-token"},
		{"status not a TaskState", map[string]any{"status": "UNRECOGNIZED"}, "status=UNRECOGNIZED"},
	}
	for _, c := range cases {
		t.Run("JSONRPC ListTasks "+c.name+" is InvalidParams in 200", func(t *testing.T) {
			status, code, out := a.rpc("ListTasks", c.params, nil)
			if status != http.StatusOK || code != -32602 {
				t.Errorf("HTTP %d code %v (%v), want -32602 in HTTP 200", status, code, out)
			}
			if id, _ := out["id"].(float64); id != 1 {
				t.Errorf("id %v, want the request's 1", out["id"])
			}
		})
		t.Run("HTTP+JSON ListTasks "+c.name+" is 400 INVALID_ARGUMENT", func(t *testing.T) {
			status, out := a.wireCall("GET", "/tasks?"+c.query, nil, nil)
			errObj, _ := out["error"].(map[string]any)
			if status != http.StatusBadRequest || errObj["status"] != "INVALID_ARGUMENT" {
				t.Errorf("HTTP %d (%v), want 400 INVALID_ARGUMENT", status, out)
			}
		})
	}
	t.Run("valid ListTasks parameters are accepted on both bindings", func(t *testing.T) {
		params := map[string]any{"pageSize": 1, "historyLength": 0, "statusTimestampAfter": "2020-01-01T00:00:00Z", "status": "TASK_STATE_COMPLETED"}
		if status, code, out := a.rpc("ListTasks", params, nil); status != http.StatusOK || code != 0 {
			t.Errorf("JSON-RPC: HTTP %d code %v (%v)", status, code, out)
		}
		if status, out := a.wireCall("GET", "/tasks?pageSize=1&historyLength=0&statusTimestampAfter=2020-01-01T00:00:00Z&status=TASK_STATE_COMPLETED", nil, nil); status != http.StatusOK {
			t.Errorf("HTTP+JSON: HTTP %d (%v)", status, out)
		}
	})

	// SubscribeToTask on, and SendStreamingMessage to, a terminal task is UnsupportedOperation
	// (A2A 1.0 §3.1.2, §3.1.6). On HTTP+JSON it is the HTTP answer, 400 FAILED_PRECONDITION with
	// reason UNSUPPORTED_OPERATION, before any event-stream headers (§11.6).
	a.allow()
	done := a.send(a.client("review", a2a.TransportProtocolJSONRPC), "", "Review main.go please")
	if done.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("turn ended %s: %q", done.Status.State, statusText(done))
	}
	for _, b := range bothBindings {
		t.Run(string(b)+" SubscribeToTask on a finished task is UnsupportedOperation", func(t *testing.T) {
			c := a.client("review", b)
			var err error
			for _, err = range c.SubscribeToTask(context.Background(), &a2a.SubscribeToTaskRequest{ID: done.ID}) {
				if err != nil {
					break
				}
			}
			if !errors.Is(err, a2a.ErrUnsupportedOperation) {
				t.Errorf("SubscribeToTask: %v, want UnsupportedOperation", err)
			}
		})
	}
	restWant := func(t *testing.T, what string, resp *http.Response, m map[string]any) {
		t.Helper()
		errObj, _ := m["error"].(map[string]any)
		ct := resp.Header.Get("Content-Type")
		if resp.StatusCode != http.StatusBadRequest || strings.HasPrefix(ct, "text/event-stream") || errObj["status"] != "FAILED_PRECONDITION" || !strings.Contains(string(mustJSON(t, errObj)), "UNSUPPORTED_OPERATION") {
			t.Errorf("%s: HTTP %d %s %v, want 400 FAILED_PRECONDITION UNSUPPORTED_OPERATION before any stream", what, resp.StatusCode, ct, m)
		}
	}
	sse := map[string]string{"Accept": "text/event-stream"}
	t.Run("HTTP+JSON SubscribeToTask on a finished task is HTTP 400 before the stream", func(t *testing.T) {
		resp, m := a.raw("GET", "/a2a/review/tasks/"+string(done.ID)+":subscribe", "", nil, sse)
		restWant(t, "GET :subscribe", resp, m)
		resp, m = a.raw("POST", "/a2a/review/tasks/"+string(done.ID)+":subscribe", "application/json", nil, sse)
		restWant(t, "POST :subscribe", resp, m)
	})
	t.Run("HTTP+JSON SendStreamingMessage to a finished task is HTTP 400 before the stream", func(t *testing.T) {
		body := `{"message":{"messageId":"m-late","role":"ROLE_USER","taskId":"` + string(done.ID) + `","parts":[{"text":"one more thing"}]}}`
		resp, m := a.raw("POST", "/a2a/review/message:stream", "application/json", []byte(body), sse)
		restWant(t, "message:stream", resp, m)
	})
	t.Run("SendMessage of a message without a role is InvalidParams on both bindings, and nothing runs", func(t *testing.T) {
		d := e.agent("dora")
		d.setDelegation(e.delegate(t, d, "review"))
		before := e.codexRuns()
		msg := map[string]any{"messageId": "m-no-role", "parts": []any{map[string]any{"text": "hi"}}}
		if status, code, out := d.rpc("SendMessage", map[string]any{"message": msg}, nil); status != http.StatusOK || code != -32602 {
			t.Errorf("JSON-RPC: HTTP %d code %v (%v), want -32602 in HTTP 200", status, code, out)
		}
		status, out := d.wireCall("POST", "/message:send", map[string]any{"message": msg}, nil)
		if errObj, _ := out["error"].(map[string]any); status != http.StatusBadRequest || errObj["status"] != "INVALID_ARGUMENT" {
			t.Errorf("HTTP+JSON: HTTP %d (%v), want 400 INVALID_ARGUMENT", status, out)
		}
		if n := e.codexRuns(); n != before {
			t.Errorf("codex ran %d times for messages without a role", n-before)
		}
	})
	t.Run("HTTP+JSON SubscribeToTask on another agent's task is 404 before the stream", func(t *testing.T) {
		resp, m := e.agent("bob").raw("GET", "/a2a/review/tasks/"+string(done.ID)+":subscribe", "", nil, sse)
		errObj, _ := m["error"].(map[string]any)
		if resp.StatusCode != http.StatusNotFound || errObj["status"] != "NOT_FOUND" {
			t.Errorf("HTTP %d %v, want 404 NOT_FOUND", resp.StatusCode, m)
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSubscribeTerminal: SubscribeToTask on a task in any terminal state is UnsupportedOperation
// (A2A 1.0 §3.1.6), on JSON-RPC as on HTTP+JSON: through the official client on both bindings,
// and as a raw JSON-RPC call that asks for an event stream, whose answer must carry the error
// -32004 and no event of the task.
func TestSubscribeTerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.agent("alice")
	ctx := context.Background()
	terminal := map[a2a.TaskState]a2a.TaskID{}

	// REJECTED: a task waiting for consent whose device flow the owner denies.
	waiting := a.send(a.client("review", a2a.TransportProtocolJSONRPC), "", "Review main.go please")
	code, start := a.oauthForm(e.publicURL+"/pact/device_authorization", url.Values{"scope": {"review:read_only"}})
	if code != 200 {
		t.Fatalf("device authorization: %d %v", code, start)
	}
	if code, out := e.admin.decide(start["user_code"].(string), "deny"); code != 200 {
		t.Fatalf("deny: %d %v", code, out)
	}
	terminal[a2a.TaskStateRejected] = waitState(t, a.client("review", a2a.TransportProtocolJSONRPC), waiting.ID, a2a.TaskStateRejected).ID

	a.allow()
	c := a.client("review", a2a.TransportProtocolJSONRPC)
	terminal[a2a.TaskStateCompleted] = a.send(c, "", "Review main.go please").ID
	if failed := a.send(c, "", "Review main.go please [fake:"+codextest.ScenarioFail+"]"); failed.Status.State == a2a.TaskStateFailed {
		terminal[a2a.TaskStateFailed] = failed.ID
	}
	// CANCELED: a task waiting for consent, canceled by its agent (no turn runs on it).
	b := e.agent("bob")
	cb := b.client("review", a2a.TransportProtocolJSONRPC)
	idle := b.send(cb, "", "Review main.go please")
	if got, err := cb.CancelTask(ctx, &a2a.CancelTaskRequest{ID: idle.ID}); err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask of a waiting task: %v, %v", got, err)
	}
	owners := map[a2a.TaskState]*agent{a2a.TaskStateCanceled: b}
	terminal[a2a.TaskStateCanceled] = idle.ID
	if len(terminal) != 4 {
		t.Fatalf("terminal tasks made: %v", terminal)
	}

	for state, id := range terminal {
		who := a
		if o := owners[state]; o != nil {
			who = o
		}
		for _, bd := range bothBindings {
			t.Run(string(bd)+" client SubscribeToTask on a "+state.String()+" task", func(t *testing.T) {
				var err error
				var events int
				for ev, e := range who.client("review", bd).SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id}) {
					if err = e; err != nil {
						break
					}
					events++
					_ = ev
				}
				if !errors.Is(err, a2a.ErrUnsupportedOperation) || events != 0 {
					t.Errorf("SubscribeToTask: %d events, %v; want UnsupportedOperation and none", events, err)
				}
			})
		}
		t.Run("raw JSON-RPC SubscribeToTask on a "+state.String()+" task", func(t *testing.T) {
			body := `{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"` + string(id) + `"}}`
			ct, msgs := who.rawStream("/a2a/review", body)
			if len(msgs) != 1 || rpcCode(msgs[0]) != -32004 || msgs[0]["result"] != nil {
				t.Errorf("answer %v; want one JSON-RPC error -32004 and no result", msgs)
			}
			if ct != "application/json" {
				t.Errorf("answer as %q; want application/json: the stream never started", ct)
			}
		})
	}
}

// TestStreamErrorsArePlain: a streaming call that fails before its first event never started
// a stream: on JSON-RPC its answer is the plain JSON-RPC error (HTTP 200, application/json,
// the request's id), on HTTP+JSON the HTTP error (A2A 1.0 §11.6; docs/wire.md, "Streams"), so
// a client that reads the content type first (the A2A TCK's) sees the error. A stream that
// started stays an event stream.
func TestStreamErrorsArePlain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.agent("alice")
	a.allow()
	done := a.send(a.client("review", a2a.TransportProtocolJSONRPC), "", "Review main.go please")
	if done.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("turn ended %s: %q", done.Status.State, statusText(done))
	}
	message := func(taskID string) string {
		return `{"message":{"messageId":"m-` + taskID + `","role":"ROLE_USER","taskId":"` + taskID + `","parts":[{"text":"one more thing"}]}}`
	}
	for _, tc := range []struct {
		name   string
		who    *agent
		method string
		params string
		code   float64
	}{
		{"SubscribeToTask on a finished task", a, "SubscribeToTask", `{"id":"` + string(done.ID) + `"}`, -32004},
		{"SendStreamingMessage to a finished task", a, "SendStreamingMessage", message(string(done.ID)), -32004},
		{"SubscribeToTask on an unknown task", a, "SubscribeToTask", `{"id":"no-such-task"}`, -32001},
		{"SendStreamingMessage to an unknown task", a, "SendStreamingMessage", message("no-such-task"), -32001},
		{"SubscribeToTask on another agent's task", e.agent("bob"), "SubscribeToTask", `{"id":"` + string(done.ID) + `"}`, -32001},
	} {
		t.Run("JSON-RPC "+tc.name, func(t *testing.T) {
			body := `{"jsonrpc":"2.0","id":"call-7","method":"` + tc.method + `","params":` + tc.params + `}`
			resp, m := tc.who.raw("POST", "/a2a/review", "application/json", []byte(body), map[string]string{"Accept": "text/event-stream"})
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "application/json" {
				t.Errorf("HTTP %d %q; want 200 application/json", resp.StatusCode, ct)
			}
			if m["jsonrpc"] != "2.0" || m["id"] != "call-7" || rpcCode(m) != tc.code || m["result"] != nil {
				t.Errorf("body %v; want the JSON-RPC error %v with id call-7", m, tc.code)
			}
		})
	}
	sse := map[string]string{"Accept": "text/event-stream"}
	t.Run("HTTP+JSON SubscribeToTask on an unknown task is 404 before the stream", func(t *testing.T) {
		resp, m := a.raw("GET", "/a2a/review/tasks/no-such-task:subscribe", "", nil, sse)
		errObj, _ := m["error"].(map[string]any)
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusNotFound || ct != "application/json" || errObj["status"] != "NOT_FOUND" {
			t.Errorf("HTTP %d %q %v; want 404 NOT_FOUND as application/json", resp.StatusCode, ct, m)
		}
	})
	for _, b := range bothBindings {
		t.Run(string(b)+" a stream that started stays an event stream", func(t *testing.T) {
			var events int
			var err error
			for _, err = range a.client("review", b).SendStreamingMessage(context.Background(), textMessage("Review main.go please")) {
				if err != nil {
					break
				}
				events++
			}
			if err != nil || events < 2 {
				t.Errorf("%d events, %v", events, err)
			}
		})
	}
	// A message without the agent's delegation starts a stream whose first event is the
	// AUTH_REQUIRED task: that is the task's state, not an error (docs/wire.md).
	t.Run("JSON-RPC a started stream's raw answer is an event stream", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"m-new","role":"ROLE_USER","parts":[{"text":"Review main.go please"}]}}}`
		ct, msgs := e.agent("carol").rawStream("/a2a/review", body)
		if ct != "text/event-stream" || len(msgs) == 0 || msgs[0]["result"] == nil {
			t.Errorf("answer as %q: %v; want an event stream of results", ct, msgs)
		}
	})
}

// rawStream posts a JSON-RPC call that asks for an event stream and returns the answer's
// content type and JSON-RPC messages: the events of a stream, or the one of a plain answer.
func (a *agent) rawStream(path, body string) (string, []map[string]any) {
	a.e.t.Helper()
	req, _ := http.NewRequest("POST", a.e.publicURL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+a.identityToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.e.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out []map[string]any
	ct := resp.Header.Get("Content-Type")
	if !strings.HasPrefix(ct, "text/event-stream") {
		var m map[string]any
		if json.Unmarshal(data, &m) == nil {
			out = append(out, m)
		}
		return ct, out
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "data:"); ok {
			var m map[string]any
			if json.Unmarshal([]byte(strings.TrimSpace(rest)), &m) == nil {
				out = append(out, m)
			}
		}
	}
	return ct, out
}
