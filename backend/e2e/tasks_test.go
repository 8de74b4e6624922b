package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/identity/identitytest"
)

// stranger is an agent whose identity JWT comes from its own issuer: the same
// sub at another issuer is another agent.
type stranger struct {
	e          *env
	iss        *identitytest.Issuer
	sub        string
	delegation string // a token it got hold of, if any
}

func (s *stranger) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+s.iss.Token(s.sub, s.e.publicURL))
	if s.delegation != "" {
		r.Header.Set("PACT-Delegation", s.delegation)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (s *stranger) client(brand string, binding a2a.TransportProtocol) *a2aclient.Client {
	s.e.t.Helper()
	hc := a2aHTTPClient(s)
	c, err := a2aclient.NewFromCard(context.Background(), s.e.card(brand),
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{binding}}),
		a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc))
	if err != nil {
		s.e.t.Fatalf("a2a client: %v", err)
	}
	return c
}

// sendVia sends one message with any client and wants a task back.
func sendVia(t *testing.T, c *a2aclient.Client, taskID a2a.TaskID, text string) *a2a.Task {
	t.Helper()
	req := textMessage(text)
	req.Message.TaskID = taskID
	res, err := c.SendMessage(context.Background(), req)
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage answered %T, want a task", res)
	}
	return task
}

// wireCall sends one request to the review brand with the agent's identity and
// delegation, plus hdr, and decodes the JSON answer. path "" is the JSON-RPC
// endpoint; anything else is a REST route below the brand.
func (a *agent) wireCall(method, path string, body any, hdr map[string]string) (int, map[string]any) {
	t := a.e.t
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, a.e.publicURL+"/a2a/review"+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+a.identityToken())
	a.mu.Lock()
	if a.delegation != "" {
		req.Header.Set("PACT-Delegation", a.delegation)
	}
	a.mu.Unlock()
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// rpc is one JSON-RPC call; it returns the HTTP status, the error code (0 if
// none) and the whole answer.
func (a *agent) rpc(method string, params any, hdr map[string]string) (int, float64, map[string]any) {
	a.e.t.Helper()
	status, out := a.wireCall("POST", "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, hdr)
	e, _ := out["error"].(map[string]any)
	code, _ := e["code"].(float64)
	return status, code, out
}

// TestTaskPrivacy: another agent — another sub, or the same sub from another
// issuer — cannot see, cancel, follow or continue alice's task, and lists
// only its own tasks.
func TestTaskPrivacy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.agent("alice")
	bob := e.agent("bob")
	impostor := &stranger{e: e, iss: identitytest.NewIssuer(t), sub: "alice"}
	ctx := context.Background()
	for _, b := range bothBindings {
		t.Run(string(b), func(t *testing.T) {
			ca := alice.client("review", b)
			mine := sendVia(t, ca, "", "alice's private question")
			for _, in := range []struct {
				name string
				c    *a2aclient.Client
			}{
				{"another sub", bob.client("review", b)},
				{"same sub from another issuer", impostor.client("review", b)},
			} {
				t.Run(in.name, func(t *testing.T) {
					t.Run("R15 GetTask of another agent's task", func(t *testing.T) {
						if task, err := in.c.GetTask(ctx, &a2a.GetTaskRequest{ID: mine.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
							t.Fatalf("GetTask answered %v, %v; want TaskNotFound", task, err)
						}
					})
					t.Run("CancelTask of another agent's task", func(t *testing.T) {
						if task, err := in.c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: mine.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
							t.Fatalf("CancelTask answered %v, %v; want TaskNotFound", task, err)
						}
					})
					t.Run("SubscribeToTask of another agent's task", func(t *testing.T) {
						if evs, err := collectStream(t, subscribeStream(in.c, mine.ID)); !errors.Is(err, a2a.ErrTaskNotFound) {
							t.Fatalf("SubscribeToTask answered %s, %v; want TaskNotFound", describeAll(evs), err)
						}
					})
					t.Run("SendMessage on another agent's taskId", func(t *testing.T) {
						req := textMessage("let me in")
						req.Message.TaskID = mine.ID
						if res, err := in.c.SendMessage(ctx, req); !errors.Is(err, a2a.ErrTaskNotFound) {
							t.Fatalf("SendMessage answered %v, %v; want TaskNotFound", res, err)
						}
					})
					t.Run("ListTasks lists only the caller's", func(t *testing.T) {
						own := sendVia(t, in.c, "", "my own question")
						list, err := in.c.ListTasks(ctx, &a2a.ListTasksRequest{})
						if err != nil {
							t.Fatalf("ListTasks: %v", err)
						}
						found := false
						for _, task := range list.Tasks {
							if task.ID == mine.ID {
								t.Errorf("alice's task is listed to %s", in.name)
							}
							found = found || task.ID == own.ID
						}
						if !found {
							t.Errorf("the caller's own task is not listed")
						}
					})
				})
			}

			// Alice's task is untouched and still hers.
			got, err := ca.GetTask(ctx, &a2a.GetTaskRequest{ID: mine.ID})
			if err != nil {
				t.Fatalf("alice's GetTask: %v", err)
			}
			if got.Status.State != a2a.TaskStateAuthRequired || len(got.History) != len(mine.History) {
				t.Errorf("alice's task changed: %s with %d messages (was %d)", got.Status.State, len(got.History), len(mine.History))
			}
			list, err := ca.ListTasks(ctx, &a2a.ListTasksRequest{})
			if err != nil {
				t.Fatalf("alice's ListTasks: %v", err)
			}
			for _, task := range list.Tasks {
				for _, m := range task.History {
					if strings.Contains(messageText(m), "my own question") {
						t.Errorf("another agent's task %s is listed to alice", task.ID)
					}
				}
			}
		})
	}

	t.Run("G8 alice's delegation token presented by alice at another issuer", func(t *testing.T) {
		alice.allow()
		thief := &stranger{e: e, iss: impostor.iss, sub: "alice", delegation: alice.delegation}
		runs := e.codexRuns()
		got := sendVia(t, thief.client("review", a2a.TransportProtocolJSONRPC), "", "Review main.go please")
		if r := authData(t, got)["reason"]; r != "wrong_agent" {
			t.Errorf("reason %v, want wrong_agent", r)
		}
		if e.codexRuns() != runs {
			t.Error("codex ran for a stolen token")
		}
	})

	t.Run("R15 a foreign task id answers like an unknown one", func(t *testing.T) {
		mine := sendVia(t, alice.client("review", a2a.TransportProtocolJSONRPC), "", "alice's second question")
		_, foreign, _ := bob.rpc("GetTask", map[string]any{"id": mine.ID}, nil)
		_, unknown, _ := bob.rpc("GetTask", map[string]any{"id": a2a.NewTaskID()}, nil)
		if foreign != -32001 || unknown != -32001 {
			t.Errorf("JSON-RPC GetTask codes: foreign %v, unknown %v; want -32001 for both", foreign, unknown)
		}
		fs, _ := bob.wireCall("GET", "/tasks/"+string(mine.ID), nil, nil)
		us, _ := bob.wireCall("GET", "/tasks/"+string(a2a.NewTaskID()), nil, nil)
		if fs != http.StatusNotFound || us != http.StatusNotFound {
			t.Errorf("REST GetTask statuses: foreign %d, unknown %d; want 404 for both", fs, us)
		}
	})
}

func messageText(m *a2a.Message) string {
	var b strings.Builder
	for _, p := range m.Parts {
		b.WriteString(p.Text())
	}
	return b.String()
}

// TestFinishedTaskAndVersion: a finished task takes no more messages, and
// A2A-Version is checked on both bothBindings.
func TestFinishedTaskAndVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.agent("alice")
	a.allow()
	done := a.send(a.client("review", a2a.TransportProtocolJSONRPC), "", "Review main.go please")
	if done.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("turn ended %s: %q", done.Status.State, statusText(done))
	}
	req := textMessage("one more thing")
	req.Message.TaskID = done.ID

	t.Run("message to a finished task is UnsupportedOperation", func(t *testing.T) {
		runs := e.codexRuns()
		for _, b := range bothBindings {
			c := a.client("review", b)
			if res, err := c.SendMessage(context.Background(), req); !errors.Is(err, a2a.ErrUnsupportedOperation) {
				t.Errorf("%s SendMessage: %v, %v; want UnsupportedOperation", b, res, err)
			}
			if evs, err := collectStream(t, streamSend(c, done.ID, "one more thing")); !errors.Is(err, a2a.ErrUnsupportedOperation) {
				t.Errorf("%s SendStreamingMessage: %s, %v; want UnsupportedOperation", b, describeAll(evs), err)
			}
		}
		if _, code, out := a.rpc("SendMessage", req, nil); code != -32004 {
			t.Errorf("JSON-RPC code %v (%v), want -32004", code, out)
		}
		if status, out := a.wireCall("POST", "/message:send", req, nil); status != http.StatusBadRequest {
			t.Errorf("REST status %d (%v), want 400", status, out)
		}
		if n := e.codexRuns(); n != runs {
			t.Errorf("codex ran %d times for messages to a finished task", n-runs)
		}
		got, err := a.client("review", a2a.TransportProtocolJSONRPC).GetTask(context.Background(), &a2a.GetTaskRequest{ID: done.ID})
		if err != nil || got.Status.State != a2a.TaskStateCompleted || len(got.History) != len(done.History) {
			t.Errorf("the finished task changed: %v %v", got, err)
		}
	})

	get := map[string]any{"id": done.ID}
	t.Run("A2A-Version 2.0 is VersionNotSupported", func(t *testing.T) {
		hdr := map[string]string{"A2A-Version": "2.0"}
		if _, code, out := a.rpc("GetTask", get, hdr); code != -32009 {
			t.Errorf("JSON-RPC code %v (%v), want -32009", code, out)
		}
		if status, out := a.wireCall("GET", "/tasks/"+string(done.ID), nil, hdr); status != http.StatusBadRequest {
			t.Errorf("REST status %d (%v), want 400", status, out)
		}
		runs := e.codexRuns()
		if _, code, out := a.rpc("SendMessage", textMessage("hello from the future"), hdr); code != -32009 {
			t.Errorf("JSON-RPC SendMessage code %v (%v), want -32009", code, out)
		}
		if n := e.codexRuns(); n != runs {
			t.Error("codex ran for a turn with an unsupported A2A-Version")
		}
	})
	t.Run("A2A-Version 1.0 is accepted", func(t *testing.T) {
		hdr := map[string]string{"A2A-Version": "1.0"}
		status, code, out := a.rpc("GetTask", get, hdr)
		res, _ := out["result"].(map[string]any)
		if status != 200 || code != 0 || res["id"] != string(done.ID) {
			t.Errorf("JSON-RPC GetTask: %d %v %v", status, code, out)
		}
		if status, out := a.wireCall("GET", "/tasks/"+string(done.ID), nil, hdr); status != 200 || out["id"] != string(done.ID) {
			t.Errorf("REST GetTask: %d %v", status, out)
		}
	})
}

// TestRestart: tasks, grants and revocations survive a restart, and a turn
// that was running when the node stopped ends FAILED with a receipt.
func TestRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	alice := e.agent("alice")
	grant := alice.allow()
	c := alice.client("review", a2a.TransportProtocolJSONRPC)
	done := alice.send(c, "", "Review main.go please")
	if done.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("turn ended %s: %q", done.Status.State, statusText(done))
	}
	bob := e.agent("bob")
	cb := bob.client("review", a2a.TransportProtocolJSONRPC)
	waiting := bob.send(cb, "", "Review main.go please")
	e.restart()

	t.Run("tasks survive a restart", func(t *testing.T) {
		got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: done.ID})
		if err != nil || got.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("GetTask after restart: %v %v", got, err)
		}
		if claims := receiptClaims(t, e, got); claims.Status != "completed" {
			t.Errorf("receipt after restart: %s", claims.Status)
		}
		w, err := cb.GetTask(ctx, &a2a.GetTaskRequest{ID: waiting.ID})
		if err != nil || w.Status.State != a2a.TaskStateAuthRequired {
			t.Fatalf("the waiting task after restart: %v %v", w, err)
		}
		if _, err := cb.GetTask(ctx, &a2a.GetTaskRequest{ID: done.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Errorf("after restart bob's GetTask of alice's task: %v", err)
		}
	})
	t.Run("a delegation token keeps working after a restart", func(t *testing.T) {
		if got := alice.send(c, "", "Review main.go again"); got.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("turn after restart ended %s: %q", got.Status.State, statusText(got))
		}
	})
	t.Run("V3 revoke then restart stays revoked", func(t *testing.T) {
		e.revoke(grant)
		e.restart()
		runs := e.codexRuns()
		got := alice.send(c, "", "Review main.go once more")
		if r := authData(t, got)["reason"]; r != "revoked" {
			t.Errorf("reason %v, want revoked", r)
		}
		if n := e.codexRuns(); n != runs {
			t.Error("codex ran on a revoked grant")
		}
		if g := e.grant(grant); g["status"] != "revoked" {
			t.Errorf("grant after restart: %v", g)
		}
	})
	t.Run("D18 a pending device flow survives a restart", func(t *testing.T) {
		erin := e.agent("erin")
		code, start := erin.oauthForm(e.publicURL+"/pact/device_authorization", url.Values{"scope": {"review:read_only"}})
		if code != 200 {
			t.Fatalf("device authorization: %d %v", code, start)
		}
		e.restart()
		if code, out := e.admin.decide(start["user_code"].(string), "allow"); code != 200 {
			t.Fatalf("allow after restart: %d %v", code, out)
		}
		code, tok := erin.oauthForm(e.publicURL+"/pact/token", url.Values{
			"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {start["device_code"].(string)}})
		if code != 200 || tok["access_token"] == nil {
			t.Fatalf("token after restart: %d %v", code, tok)
		}
		erin.setDelegation(tok["access_token"].(string))
		if got := erin.send(erin.client("review", a2a.TransportProtocolJSONRPC), "", "Review main.go please"); got.Status.State != a2a.TaskStateCompleted {
			t.Errorf("turn ended %s: %q", got.Status.State, statusText(got))
		}
	})
	t.Run("a streaming turn at a graceful stop ends FAILED and its stream ends", func(t *testing.T) {
		fay := e.agent("fay")
		fay.allow()
		cf := fay.client("review", a2a.TransportProtocolHTTPJSON)
		marker := "stream while I stop [fake:hang]"
		sctx, cancel := context.WithTimeout(ctx, waitLimit)
		defer cancel()
		first, next, stop := startStream(t, sctx, cf, marker)
		defer stop()
		e.codexStarted(marker)
		streamed := make(chan []a2a.Event, 1)
		go func() {
			var evs []a2a.Event
			for {
				ev, err, ok := next()
				if !ok || err != nil {
					break
				}
				evs = append(evs, ev)
			}
			streamed <- evs
		}()
		e.stop()
		if !processGone(e.record) {
			t.Errorf("codex still runs after the node stopped: %v", codextest.Processes(e.record))
			killProcess(e.record)
		}
		evs := <-streamed
		if sctx.Err() != nil {
			t.Errorf("the stream did not end with the node: %s", describeAll(evs))
		} else if len(evs) == 0 || describe(evs[len(evs)-1]) != "status:TASK_STATE_FAILED" {
			t.Errorf("the stream ended with %s, want a FAILED status", describeAll(evs))
		}
		e.start()
		got := waitState(t, cf, first.ID, a2a.TaskStateFailed)
		if !strings.Contains(statusText(got), "stopped") {
			t.Errorf("reason %q does not say the node stopped", statusText(got))
		}
		if r := e.receiptFor(first.ID); r == nil || r["status"] != "failed" {
			t.Errorf("the interrupted turn's receipt: %v", r)
		}
	})
	t.Run("a turn running at a graceful stop ends FAILED with a receipt", func(t *testing.T) {
		dave := e.agent("dave")
		cd := dave.client("review", a2a.TransportProtocolJSONRPC)
		task := dave.send(cd, "", "placeholder") // AUTH_REQUIRED: its id is known before the turn runs
		dave.allow()
		marker := "stopped under me [fake:hang]"
		sctx, cancel := context.WithCancel(ctx)
		sent := make(chan struct{})
		go func() {
			defer close(sent)
			req := textMessage(marker)
			req.Message.TaskID = task.ID
			cd.SendMessage(sctx, req) // a non-streaming caller that gives up; the turn goes on
		}()
		e.codexStarted(marker)
		cancel()
		<-sent
		e.stop()
		if !processGone(e.record) {
			t.Errorf("codex still runs after the node stopped: %v", codextest.Processes(e.record))
			killProcess(e.record)
		}
		e.start()
		got := waitState(t, cd, task.ID, a2a.TaskStateFailed)
		if statusText(got) == "" {
			t.Error("the interrupted task has no reason")
		}
		r := e.receiptFor(task.ID)
		if r == nil || r["status"] != "failed" {
			t.Errorf("the interrupted turn's receipt: %v", r)
		}
	})
}

// A plain send's new task is stored once, finished (its id reaches the agent only with the
// answer); a send with returnImmediately is answered with the task stored WORKING at once.
func TestTaskWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.agent("alice")
	a.allow()
	version := func(id a2a.TaskID) int64 {
		t.Helper()
		var v int64
		if err := pactSQLite(t, e.dataDir).QueryRow(`SELECT version FROM tasks WHERE id = ?`, string(id)).Scan(&v); err != nil {
			t.Fatalf("task %s: %v", id, err)
		}
		return v
	}
	for _, b := range bothBindings {
		c := a.client("review", b)
		t.Run(string(b)+" plain send", func(t *testing.T) {
			done := a.send(c, "", "Review main.go please")
			if done.Status.State != a2a.TaskStateCompleted || len(done.History) < 2 {
				t.Fatalf("turn: %s, history %d", done.Status.State, len(done.History))
			}
			if v := version(done.ID); v != 1 {
				t.Errorf("the finished task was written %d times, want once", v)
			}
		})
		t.Run(string(b)+" returnImmediately", func(t *testing.T) {
			req := textMessage("Review main.go please")
			req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
			res, err := c.SendMessage(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			task, ok := res.(*a2a.Task)
			if !ok || task.Status.State.Terminal() {
				t.Fatalf("returnImmediately answered %#v; want the task before it finished", res)
			}
			if got := waitState(t, c, task.ID, a2a.TaskStateCompleted); len(got.Artifacts) != 2 {
				t.Errorf("finished task has %d artifacts, want answer and receipt", len(got.Artifacts))
			}
		})
	}
}
