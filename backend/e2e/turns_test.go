package e2e

import (
	"context"
	"errors"
	"iter"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/receipts"
)

// bothBindings are the two HTTP bindings every card offers.
var bothBindings = []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON}

// waitLimit bounds every wait of these tests. It is a hang guard, never a speed check:
// far longer than anything they wait for takes on a loaded machine (the Makefile gives go
// test the -timeout to match), short enough that a hang fails the test, not the whole run.
const waitLimit = 2 * time.Minute

// allow runs the device flow for the agent on the review brand with the owner
// allowing at once. The first poll after the decision gets the token, so no
// poll interval is waited. It returns the grant id.
func (a *agent) allow() string {
	t := a.e.t
	t.Helper()
	code, start := a.oauthForm(a.e.publicURL+"/pact/device_authorization", url.Values{"scope": {"review:read_only"}})
	if code != 200 {
		t.Fatalf("device authorization: %d %v", code, start)
	}
	code, out := a.e.admin.decide(start["user_code"].(string), "allow")
	if code != 200 {
		t.Fatalf("allow: %d %v", code, out)
	}
	grant, _ := out["grant"].(map[string]any)
	id, _ := grant["id"].(string)
	if id == "" {
		t.Fatalf("allow answered no grant: %v", out)
	}
	code, tok := a.oauthForm(a.e.publicURL+"/pact/token", url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {start["device_code"].(string)}})
	if code != 200 || tok["access_token"] == nil {
		t.Fatalf("token: %d %v", code, tok)
	}
	a.setDelegation(tok["access_token"].(string))
	return id
}

// collectStream reads a stream to its end. A stream still open after the bounded
// wait fails the test: every stream these tests open must end by itself.
func collectStream(t *testing.T, stream func(ctx context.Context) iter.Seq2[a2a.Event, error]) ([]a2a.Event, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var evs []a2a.Event
	for ev, err := range stream(ctx) {
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("the stream did not end within %s (after %d events: %s)", waitLimit, len(evs), describeAll(evs))
			}
			return evs, err
		}
		evs = append(evs, ev)
	}
	if ctx.Err() != nil {
		t.Fatalf("the stream did not end within %s (after %d events: %s)", waitLimit, len(evs), describeAll(evs))
	}
	return evs, nil
}

// describe names an event for sequence checks: "task:TASK_STATE_SUBMITTED",
// "status:TASK_STATE_WORKING", "artifact:receipt".
func describe(ev a2a.Event) string {
	switch v := ev.(type) {
	case *a2a.Task:
		return "task:" + string(v.Status.State)
	case *a2a.TaskStatusUpdateEvent:
		return "status:" + string(v.Status.State)
	case *a2a.TaskArtifactUpdateEvent:
		return "artifact:" + v.Artifact.Name
	case *a2a.Message:
		return "message"
	}
	return "?"
}

func describeAll(evs []a2a.Event) string {
	var s []string
	for _, ev := range evs {
		s = append(s, describe(ev))
	}
	return strings.Join(s, " ")
}

// waitState polls GetTask until the task is in state, within the bounded wait; a task that
// ended in another state fails at once.
func waitState(t *testing.T, c *a2aclient.Client, id a2a.TaskID, state a2a.TaskState) *a2a.Task {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	var last *a2a.Task
	for time.Now().Before(deadline) {
		task, err := c.GetTask(context.Background(), &a2a.GetTaskRequest{ID: id})
		if err != nil {
			t.Fatalf("GetTask %s: %v", id, err)
		}
		if task.Status.State == state {
			return task
		}
		if task.Status.State.Terminal() { // final: it will never be in state
			t.Fatalf("task %s ended %s, not %s: %q", id, task.Status.State, state, statusText(task))
		}
		last = task
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("task %s is %s, not %s, after %s: %q", id, last.Status.State, state, waitLimit, statusText(last))
	return nil
}

// codexStarted waits until the fake Codex recorded the start of a run whose
// prompt holds marker (it records before playing its scenario).
func (e *env) codexStarted(marker string) codextest.Record {
	e.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		for _, r := range codextest.ReadRecords(e.t, e.record) {
			if r.Phase == "start" && strings.Contains(r.Prompt, marker) {
				return r
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.t.Fatalf("codex was not started for %q within %s", marker, waitLimit)
	return codextest.Record{}
}

// receiptClaims verifies a task's receipt artifact with the node JWKS.
func receiptClaims(t *testing.T, e *env, task *a2a.Task) *receipts.Claims {
	t.Helper()
	_, rec := artifacts(t, task)
	claims, err := receipts.VerifyOne(rec, nodeJWKS(t, e))
	if err != nil {
		t.Fatalf("the receipt does not verify: %v", err)
	}
	if claims.Task != string(task.ID) {
		t.Errorf("the receipt is for task %s, not %s", claims.Task, task.ID)
	}
	return claims
}

// hasAnswer reports whether a task carries an answer artifact.
func hasAnswer(task *a2a.Task) bool {
	for _, a := range task.Artifacts {
		if a.Name == "answer" {
			return true
		}
	}
	return false
}

// streamSend and subscribeStream defer a stream until collectStream gives it its context.
func streamSend(c *a2aclient.Client, taskID a2a.TaskID, text string) func(ctx context.Context) iter.Seq2[a2a.Event, error] {
	return func(ctx context.Context) iter.Seq2[a2a.Event, error] {
		req := textMessage(text)
		req.Message.TaskID = taskID
		return c.SendStreamingMessage(ctx, req)
	}
}

func subscribeStream(c *a2aclient.Client, id a2a.TaskID) func(ctx context.Context) iter.Seq2[a2a.Event, error] {
	return func(ctx context.Context) iter.Seq2[a2a.Event, error] {
		return c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id})
	}
}

// TestStreamingTurn drives streams on both bindings: a turn without
// delegation is one AUTH_REQUIRED event and the stream ends; SubscribeToTask
// on that idle task answers its snapshot; a delegated turn streams submitted →
// working → answer → receipt → completed; a finished task takes no subscriber.
func TestStreamingTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, b := range bothBindings {
		t.Run(string(b), func(t *testing.T) {
			a := e.agent("streamer-" + string(b))
			c := a.client("review", b)
			runs := e.codexRuns()

			evs, err := collectStream(t, streamSend(c, "", "Review main.go please"))
			if err != nil {
				t.Fatalf("stream without delegation: %v", err)
			}
			if len(evs) != 1 || describe(evs[0]) != "task:"+string(a2a.TaskStateAuthRequired) {
				t.Fatalf("stream without delegation: %s, want exactly one AUTH_REQUIRED task", describeAll(evs))
			}
			waiting := evs[0].(*a2a.Task)
			if authData(t, waiting)["reason"] != "missing" {
				t.Errorf("AUTH_REQUIRED reason %v", authData(t, waiting)["reason"])
			}
			if n := e.codexRuns(); n != runs {
				t.Fatalf("codex ran %d times for a turn without delegation", n-runs)
			}

			t.Run("SubscribeToTask on an idle AUTH_REQUIRED task answers its snapshot", func(t *testing.T) {
				evs, err := collectStream(t, subscribeStream(c, waiting.ID))
				if err != nil {
					t.Fatalf("subscribe: %v", err)
				}
				if len(evs) != 1 || describe(evs[0]) != "task:"+string(a2a.TaskStateAuthRequired) || evs[0].(*a2a.Task).ID != waiting.ID {
					t.Fatalf("subscribe answered %s, want the AUTH_REQUIRED snapshot", describeAll(evs))
				}
			})

			a.allow()
			evs, err = collectStream(t, streamSend(c, "", "Review main.go please [fake:tools]"))
			if err != nil {
				t.Fatalf("delegated stream: %v (after %s)", err, describeAll(evs))
			}
			seq := describeAll(evs)
			if !strings.HasPrefix(seq, "task:TASK_STATE_SUBMITTED status:TASK_STATE_WORKING ") ||
				!strings.HasSuffix(seq, " artifact:answer artifact:receipt status:TASK_STATE_COMPLETED") {
				t.Fatalf("delegated stream: %s, want submitted → working → (progress) → answer → receipt → completed", seq)
			}
			for _, ev := range evs[1 : len(evs)-3] {
				if describe(ev) != "status:TASK_STATE_WORKING" {
					t.Errorf("between submitted and the artifacts: %s", describe(ev))
				}
			}
			id := evs[0].(*a2a.Task).ID
			var answer, jws string
			for _, ev := range evs {
				if ae, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
					switch ae.Artifact.Name {
					case "answer":
						answer = ae.Artifact.Parts[0].Text()
					case "receipt":
						for _, p := range ae.Artifact.Parts {
							if s := p.Text(); s != "" && !strings.HasPrefix(s, receipts.ProofHeader) { // the JWS, not its tlog-proof
								jws = s
							}
						}
					}
				}
			}
			if answer != codextest.DefaultAnswer {
				t.Errorf("streamed answer %q", answer)
			}
			claims, err := receipts.VerifyOne(jws, nodeJWKS(t, e))
			if err != nil {
				t.Fatalf("streamed receipt: %v", err)
			}
			if claims.Task != string(id) || claims.Status != "completed" || claims.Ans != receipts.HashBytes([]byte(answer)) {
				t.Errorf("streamed receipt claims: task %s status %s", claims.Task, claims.Status)
			}
			// What was streamed is what was stored.
			stored := waitState(t, c, id, a2a.TaskStateCompleted)
			if _, rec := artifacts(t, stored); rec != jws {
				t.Error("the stored receipt differs from the streamed one")
			}

			t.Run("resuming the AUTH_REQUIRED task streams to completed", func(t *testing.T) {
				evs, err := collectStream(t, streamSend(c, waiting.ID, "Review main.go please"))
				if err != nil {
					t.Fatalf("resume: %v (after %s)", err, describeAll(evs))
				}
				if len(evs) == 0 || describe(evs[len(evs)-1]) != "status:TASK_STATE_COMPLETED" {
					t.Fatalf("resume streamed %s, want it to end completed", describeAll(evs))
				}
				if got := waitState(t, c, waiting.ID, a2a.TaskStateCompleted); receiptClaims(t, e, got).Status != "completed" {
					t.Error("the resumed task's receipt is not completed")
				}
			})

			t.Run("SubscribeToTask on a finished task is UnsupportedOperation", func(t *testing.T) {
				evs, err := collectStream(t, subscribeStream(c, id))
				if !errors.Is(err, a2a.ErrUnsupportedOperation) {
					t.Fatalf("subscribe to a completed task: %s, %v; want UnsupportedOperation", describeAll(evs), err)
				}
			})
		})
	}
}

// TestCancelTurn cancels running turns: with CancelTask on both bindings, and
// by dropping a streaming connection (R16). Either way Codex is stopped, the
// task ends CANCELED, and the turn has a receipt whose status is canceled.
func TestCancelTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.agent("carol")
	a.allow()
	for _, b := range bothBindings {
		t.Run(string(b)+" CancelTask stops codex", func(t *testing.T) {
			c := a.client("review", b)
			marker := "cancel me on " + string(b) + " [fake:hang]"
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			first, next, stop := startStream(t, ctx, c, marker)
			defer stop()
			e.codexStarted(marker)
			// The stored task follows the stream: a2a-go saves what it streams on a goroutine of
			// its own, so it may still say SUBMITTED when Codex has started. A subscriber begins
			// with what is stored, so wait until that is WORKING.
			waitState(t, c, first.ID, a2a.TaskStateWorking)

			// A second turn on the running task is refused; a subscriber follows the turn.
			req := textMessage("and one more thing")
			req.Message.TaskID = first.ID
			if res, err := c.SendMessage(ctx, req); !errors.Is(err, a2a.ErrUnsupportedOperation) {
				t.Errorf("a message to the running task: %v, %v; want UnsupportedOperation", res, err)
			}
			snext, sstop := iter.Pull2(c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: first.ID}))
			defer sstop()
			if ev, err, ok := snext(); !ok || err != nil || describe(ev) != "task:"+string(a2a.TaskStateWorking) {
				t.Errorf("SubscribeToTask on the running task began with %v %v %v, want its WORKING snapshot", ok, err, ev)
			}

			task, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: first.ID})
			if err != nil {
				t.Fatalf("CancelTask: %v", err)
			}
			if task.Status.State != a2a.TaskStateCanceled {
				t.Fatalf("CancelTask answered %s: %q", task.Status.State, statusText(task))
			}
			if !processGone(e.record) {
				t.Errorf("codex still runs after CancelTask answered: %v", codextest.Processes(e.record))
				killProcess(e.record)
			}
			if hasAnswer(task) {
				t.Error("a canceled turn carries an answer")
			}
			if got := receiptClaims(t, e, task); got.Status != "canceled" || !strings.Contains(got.Reason, "CancelTask") {
				t.Errorf("receipt status %q reason %q, want canceled by CancelTask", got.Status, got.Reason)
			}
			// The stream that started the turn ends with the cancellation.
			var rest []a2a.Event
			for {
				ev, err, ok := next()
				if !ok {
					break
				}
				if err != nil {
					t.Fatalf("stream after cancel: %v (after %s)", err, describeAll(rest))
				}
				rest = append(rest, ev)
			}
			if len(rest) == 0 || describe(rest[len(rest)-1]) != "status:TASK_STATE_CANCELED" {
				t.Errorf("the turn's stream went on with %s, want it to end canceled", describeAll(rest))
			}
			var followed []a2a.Event
			for {
				ev, err, ok := snext()
				if !ok || err != nil {
					break
				}
				followed = append(followed, ev)
			}
			if len(followed) == 0 || describe(followed[len(followed)-1]) != "status:TASK_STATE_CANCELED" {
				t.Errorf("the subscriber saw %s, want it to end canceled", describeAll(followed))
			}
			if got := waitState(t, c, first.ID, a2a.TaskStateCanceled); receiptClaims(t, e, got).Status != "canceled" {
				t.Error("the stored task has no canceled receipt")
			}
		})
	}

	for _, b := range bothBindings {
		t.Run(string(b)+" CancelTask on an idle AUTH_REQUIRED task", func(t *testing.T) {
			idle := e.agent("idle-" + string(b))
			c := idle.client("review", b)
			waiting := idle.send(c, "", "Review main.go please")
			runs := e.codexRuns()
			task, err := c.CancelTask(context.Background(), &a2a.CancelTaskRequest{ID: waiting.ID})
			if err != nil || task.Status.State != a2a.TaskStateCanceled {
				t.Fatalf("CancelTask: %v %v", task, err)
			}
			if len(task.Artifacts) != 0 || e.codexRuns() != runs || e.receiptFor(waiting.ID) != nil {
				t.Error("canceling a task on which nothing ran ran something or wrote a receipt")
			}
		})
		t.Run(string(b)+" CancelTask on a finished task is TaskNotCancelable", func(t *testing.T) {
			c := a.client("review", b)
			done := a.send(c, "", "Review main.go please")
			if task, err := c.CancelTask(context.Background(), &a2a.CancelTaskRequest{ID: done.ID}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
				t.Fatalf("CancelTask of a completed task: %v %v; want TaskNotCancelable", task, err)
			}
			waitState(t, c, done.ID, a2a.TaskStateCompleted)
		})
	}

	t.Run("R16 streaming client disconnects mid-turn", func(t *testing.T) {
		c := a.client("review", a2a.TransportProtocolJSONRPC)
		marker := "disconnect from me [fake:hang]"
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		first, _, stop := startStream(t, ctx, c, marker)
		e.codexStarted(marker)
		cancel()
		stop()

		task := waitState(t, c, first.ID, a2a.TaskStateCanceled)
		deadline := time.Now().Add(waitLimit)
		for !processGone(e.record) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if !processGone(e.record) {
			t.Errorf("codex still runs after the client went away: %v", codextest.Processes(e.record))
			killProcess(e.record)
		}
		if got := receiptClaims(t, e, task); got.Status != "canceled" || !strings.Contains(got.Reason, "disconnected") {
			t.Errorf("receipt status %q reason %q, want canceled because the client disconnected", got.Status, got.Reason)
		}
	})
}

// TestCodexFailures maps each way Codex can fail to TASK_STATE_FAILED with a
// clear reason, and a signed receipt that says failed.
func TestCodexFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.agent("fred")
	a.allow()
	c := a.client("review", a2a.TransportProtocolJSONRPC)
	for _, tc := range []struct {
		name, scenario, reason string
		exit                   int
	}{
		{"codex answers 401: the model refused the key", codextest.Scenario401, "the model refused the key", 1},
		{"codex quota exceeded", codextest.ScenarioQuota, "quota exceeded", 1},
		{"codex crashes", codextest.ScenarioCrash, "crashed", -1},
		{"S4 codex exits non-zero", codextest.ScenarioFail, "exited with code 3", 3},
		{"S5 codex exits 0 with an empty answer", codextest.ScenarioEmpty, "without an answer", 0},
		{"S5 codex exits 0 without completing the turn", codextest.ScenarioNoComplete, "without completing", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := a.send(c, "", "Review main.go please [fake:"+tc.scenario+"]")
			if task.Status.State != a2a.TaskStateFailed {
				t.Fatalf("task ended %s: %q", task.Status.State, statusText(task))
			}
			if !strings.Contains(statusText(task), tc.reason) {
				t.Errorf("reason %q does not say %q", statusText(task), tc.reason)
			}
			if hasAnswer(task) {
				t.Error("a failed turn carries an answer")
			}
			claims := receiptClaims(t, e, task)
			if claims.Status != "failed" || !strings.Contains(claims.Reason, tc.reason) || claims.Exit != tc.exit {
				t.Errorf("receipt: status %q reason %q exit %d; want failed, %q, exit %d", claims.Status, claims.Reason, claims.Exit, tc.reason, tc.exit)
			}
			if strings.Contains(statusText(task)+claims.Reason, "SECRET") || strings.Contains(statusText(task)+claims.Reason, "sk-live") {
				t.Errorf("a secret from codex's stderr reached the agent: %q / %q", statusText(task), claims.Reason)
			}
		})
	}
}

// TestCodexMissing starts the node with no Codex at its path: a turn fails at
// once with a reason that says so, and still gets a receipt (S12).
func TestCodexMissing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withCodexPath(t.TempDir()+"/no-codex-here"))
	a := e.agent("gina")
	a.allow()
	t.Run("S12 codex binary missing", func(t *testing.T) {
		task := a.send(a.client("review", a2a.TransportProtocolJSONRPC), "", "Review main.go please")
		if task.Status.State != a2a.TaskStateFailed {
			t.Fatalf("task ended %s: %q", task.Status.State, statusText(task))
		}
		if !strings.Contains(statusText(task), "not installed") {
			t.Errorf("reason %q does not say codex is not installed", statusText(task))
		}
		if claims := receiptClaims(t, e, task); claims.Status != "failed" || !strings.Contains(claims.Reason, "not installed") {
			t.Errorf("receipt: status %q reason %q", claims.Status, claims.Reason)
		}
	})
}

// startStream sends a streaming turn and reads its first event, the submitted
// task; next reads on, stop ends the stream.
func startStream(t *testing.T, ctx context.Context, c *a2aclient.Client, text string) (first *a2a.Task, next func() (a2a.Event, error, bool), stop func()) {
	t.Helper()
	next, stop = iter.Pull2(c.SendStreamingMessage(ctx, textMessage(text)))
	ev, err, ok := next()
	if !ok || err != nil {
		stop()
		t.Fatalf("first event: %v %v", ok, err)
	}
	first, isTask := ev.(*a2a.Task)
	if !isTask {
		stop()
		t.Fatalf("first event %s, want the submitted task", describe(ev))
	}
	return first, next, stop
}
