package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
)

// ident is one identity (iss, sub) as a personal agent holds it: an identity JWT it renews,
// and the delegation token once the owner allowed it. A bad ident sends broken identity JWTs.
type ident struct {
	is       *issuer
	sub, aud string
	bad      bool

	mu         sync.Mutex
	tok        string
	minted     time.Time
	delegation string
	badKind    int
	lastStatus atomic.Int32 // HTTP status of the last answer
}

func (id *ident) identity() string {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.bad {
		return id.badToken()
	}
	if now := time.Now(); now.Sub(id.minted) > 2*time.Minute {
		id.tok, id.minted = id.is.token(id.sub, id.aud, now, now.Add(5*time.Minute)), now
	}
	return id.tok
}

// badToken cycles through the broken identity JWTs a hostile or buggy agent sends: malformed,
// expired, for another audience, and signed by no key of its issuer. Each must get 401.
func (id *ident) badToken() string {
	id.badKind++
	now := time.Now()
	switch id.badKind % 4 {
	case 0:
		return "not-a-jwt"
	case 1: // expired
		return id.is.token(id.sub, id.aud, now.Add(-10*time.Minute), now.Add(-5*time.Minute))
	case 2: // for another audience
		return id.is.token(id.sub, "https://elsewhere.example", now, now.Add(5*time.Minute))
	default: // a signature that is not the key's
		tok := id.is.token(id.sub, id.aud, now, now.Add(5*time.Minute))
		i := strings.LastIndexByte(tok, '.') + 5
		flip := byte('A')
		if tok[i] == 'A' {
			flip = 'B'
		}
		return tok[:i] + string(flip) + tok[i+1:]
	}
}

// RoundTrip adds the PACT credentials as HTTP headers and notes the answer's status.
func (id *ident) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+id.identity())
	id.mu.Lock()
	if id.delegation != "" {
		r.Header.Set("PACT-Delegation", id.delegation)
	}
	id.mu.Unlock()
	resp, err := id.is.agents.RoundTrip(r)
	if resp != nil {
		id.lastStatus.Store(int32(resp.StatusCode))
	}
	return resp, err
}

// client is the official a2a-go client on the brand's card, on one binding.
func (id *ident) client(card *a2a.AgentCard, binding a2a.TransportProtocol) (*a2aclient.Client, error) {
	hc := &http.Client{Transport: id, Timeout: time.Minute}
	return a2aclient.NewFromCard(context.Background(), card,
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{binding}}),
		a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc))
}

// agent is one personal agent with its grant, and the two identities it also calls with:
// a stranger's that was never allowed (its turns wait AUTH_REQUIRED, on one task it keeps
// resuming: the node caps waiting tasks per agent and issuer site, docs/threats.md K2–K5) and
// a broken one.
type agent struct {
	me, stranger, bad *ident
	c, sc, bc         *a2aclient.Client
	waiting           a2a.TaskID
	tasks             []a2a.TaskID // its latest answered tasks, for GetTask
	rng               *rand.Rand
	n                 int
}

// The operations of the load, and how often an agent picks each (out of 100).
const (
	opSend        = "send"
	opStream      = "stream"
	opGet         = "get-task"
	opList        = "list-tasks"
	opCancel      = "cancel"
	opUndelegated = "undelegated"
	opBadToken    = "bad-token"
)

var opWeights = []struct {
	op     string
	weight int
}{{opSend, 30}, {opStream, 25}, {opGet, 12}, {opList, 10}, {opCancel, 6}, {opUndelegated, 10}, {opBadToken, 7}}

func (a *agent) pick() string {
	n := a.rng.IntN(100)
	for _, w := range opWeights {
		if n -= w.weight; n < 0 {
			if w.op == opGet && len(a.tasks) == 0 {
				return opSend
			}
			return w.op
		}
	}
	return opSend
}

// answered is a receipt an agent got with an answer.
type answered struct {
	rid, task, status string
	hash              string // SHA-256 of the JWS, hex
}

// outcome is what one operation got: the receipt of a delegated turn it completed, or why the
// call did not do what it must.
type outcome struct {
	receipt *answered
	err     error
}

func (a *agent) message(text string, task a2a.TaskID) *a2a.SendMessageRequest {
	a.n++
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(fmt.Sprintf("%s (#%d)", text, a.n)))
	m.TaskID = task
	return &a2a.SendMessageRequest{Message: m}
}

// do runs one operation to its end, within a minute.
func (a *agent) do(op string) outcome {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	switch op {
	case opSend:
		res, err := a.c.SendMessage(ctx, a.message("Review main.go please", ""))
		if err != nil {
			return outcome{err: err}
		}
		task, ok := res.(*a2a.Task)
		if !ok {
			return outcome{err: fmt.Errorf("SendMessage answered %T, want a task", res)}
		}
		return a.finished(task.ID, task.Status.State, task.Artifacts, a2a.TaskStateCompleted)
	case opStream:
		var id a2a.TaskID
		var state a2a.TaskState
		var arts []*a2a.Artifact
		for ev, err := range a.c.SendStreamingMessage(ctx, a.message("Review main.go as a stream", "")) {
			if err != nil {
				return outcome{err: err}
			}
			id, state, arts = follow(ev, id, state, arts)
		}
		return a.finished(id, state, arts, a2a.TaskStateCompleted)
	case opGet:
		id := a.tasks[a.rng.IntN(len(a.tasks))]
		task, err := a.c.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
		if err == nil && task.ID != id {
			err = fmt.Errorf("GetTask %s answered task %s", id, task.ID)
		}
		return outcome{err: err}
	case opList:
		res, err := a.c.ListTasks(ctx, &a2a.ListTasksRequest{PageSize: 20})
		if err == nil && len(res.Tasks) > 20 {
			err = fmt.Errorf("ListTasks pageSize 20 answered %d tasks", len(res.Tasks))
		}
		return outcome{err: err}
	case opCancel:
		return a.cancelTurn(ctx)
	case opUndelegated:
		res, err := a.sc.SendMessage(ctx, a.message("Review main.go, no delegation", a.waiting))
		if err != nil {
			return outcome{err: err}
		}
		task, ok := res.(*a2a.Task)
		if !ok || task.Status.State != a2a.TaskStateAuthRequired {
			return outcome{err: fmt.Errorf("an un-delegated turn answered %s, want AUTH_REQUIRED", describe(res))}
		}
		a.waiting = task.ID
		return outcome{}
	case opBadToken:
		var err error
		if a.rng.IntN(2) == 0 {
			_, err = a.bc.SendMessage(ctx, a.message("Review main.go with a broken identity", ""))
		} else {
			_, err = a.bc.ListTasks(ctx, &a2a.ListTasksRequest{PageSize: 5})
		}
		if st := a.bad.lastStatus.Swap(0); err == nil || st != http.StatusUnauthorized {
			return outcome{err: fmt.Errorf("a broken identity JWT got HTTP %d, want 401: %w", st, err)}
		}
		return outcome{}
	}
	return outcome{err: fmt.Errorf("unknown operation %s", op)}
}

// cancelTurn starts a streaming turn that would run forever, cancels it with CancelTask, and
// reads the stream to its end: the turn ends CANCELED with a receipt.
func (a *agent) cancelTurn(ctx context.Context) outcome {
	next, stop := iter.Pull2(a.c.SendStreamingMessage(ctx, a.message("[fake:hang] a turn to cancel", "")))
	defer stop()
	ev, err, ok := next()
	switch {
	case !ok:
		return outcome{err: errors.New("the stream ended before its first event")}
	case err != nil:
		return outcome{err: fmt.Errorf("stream: %w", err)}
	}
	first, isTask := ev.(*a2a.Task)
	if !isTask {
		return outcome{err: fmt.Errorf("the stream began with %s, want the task", describe(ev))}
	}
	got, err := a.c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: first.ID})
	if err != nil {
		return outcome{err: fmt.Errorf("CancelTask: %w", err)}
	}
	id, state, arts := got.ID, got.Status.State, got.Artifacts
	for {
		ev, err, ok := next()
		if !ok {
			break
		}
		if err != nil {
			return outcome{err: fmt.Errorf("the canceled turn's stream: %w", err)}
		}
		id, state, arts = follow(ev, id, state, arts)
	}
	return a.finished(id, state, arts, a2a.TaskStateCanceled)
}

// follow applies one stream event to what the stream has shown of its task so far.
func follow(ev a2a.Event, id a2a.TaskID, state a2a.TaskState, arts []*a2a.Artifact) (a2a.TaskID, a2a.TaskState, []*a2a.Artifact) {
	switch v := ev.(type) {
	case *a2a.Task:
		return v.ID, v.Status.State, append(arts, v.Artifacts...)
	case *a2a.TaskStatusUpdateEvent:
		return v.TaskID, v.Status.State, arts
	case *a2a.TaskArtifactUpdateEvent:
		return v.TaskID, state, append(arts, v.Artifact)
	}
	return id, state, arts
}

// finished checks that a turn ended in want with its receipt, and keeps both.
func (a *agent) finished(id a2a.TaskID, state a2a.TaskState, arts []*a2a.Artifact, want a2a.TaskState) outcome {
	if state != want {
		return outcome{err: fmt.Errorf("the turn ended %s, want %s", state, want)}
	}
	r, err := receiptOf(arts)
	if err != nil {
		return outcome{err: err}
	}
	if r.task != string(id) {
		return outcome{err: fmt.Errorf("task %s came with the receipt of task %s", id, r.task)}
	}
	if a.tasks = append(a.tasks, id); len(a.tasks) > 16 {
		a.tasks = a.tasks[1:]
	}
	return outcome{receipt: r}
}

// receiptOf reads the receipt artifact's JWS (its claims are not verified here: the store's
// copy is compared with it, and `aether receipts verify` verifies the store).
func receiptOf(arts []*a2a.Artifact) (*answered, error) {
	for _, art := range arts {
		if art == nil || art.Name != "receipt" {
			continue
		}
		for _, p := range art.Parts {
			jws := p.Text()
			parts := strings.Split(jws, ".")
			if len(parts) != 3 {
				continue
			}
			payload, err := base64.RawURLEncoding.DecodeString(parts[1])
			if err != nil {
				return nil, fmt.Errorf("receipt payload: %w", err)
			}
			var c struct{ RID, Task, Status string }
			if err := json.Unmarshal(payload, &c); err != nil || c.RID == "" {
				return nil, fmt.Errorf("receipt claims %q: %v", payload, err)
			}
			sum := sha256.Sum256([]byte(jws))
			return &answered{rid: c.RID, task: c.Task, status: c.Status, hash: hex.EncodeToString(sum[:])}, nil
		}
	}
	return nil, errors.New("the answer has no receipt artifact with a JWS")
}

func describe(v any) string {
	switch v := v.(type) {
	case *a2a.Task:
		return "task " + string(v.Status.State)
	case *a2a.Message:
		return "a message"
	}
	return fmt.Sprintf("%T", v)
}
