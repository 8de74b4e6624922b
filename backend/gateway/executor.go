package gateway

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/aether/aether/backend/a2atask"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/receipts"
	"github.com/aether/aether/backend/turn"
)

// metaThread is the task metadata key that keeps the Codex thread id, so a
// later turn on the same task resumes the same Codex conversation.
const metaThread = "aether.codexThreadId"

// executor maps a delegated turn (turn.Service) onto A2A events: its progress as WORKING
// statuses, its answer and receipt as artifacts, its end as the final status.
type executor struct {
	g     *Gateway
	brand domain.BrandID
	tasks taskstore.Store // the route's
}

func (e *executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		c := callFrom(ctx)
		t := &turnRun{ec: ec, yield: yield, task: ec.StoredTask, created: ec.StoredTask != nil, streaming: c.streaming, watched: c.watched}
		if t.task == nil {
			t.task = a2a.NewSubmittedTask(ec, ec.Message)
		}
		e.run(ctx, c, t)
	}
}

// answerPlain runs the turn of a plain send on a new task and answers with its task, stored.
// Nobody sees such a task before it has finished, so a2a-go's execution machinery (its event
// queue, task manager and copies of the task at every step) would only carry the one
// finished task from the turn to the answer. The turn stores it in its receipt's commit
// (turn.Request.Keep) and the answer leaves once that commit is durable (turn.Finished); a
// task the turn could not store so (it failed first) is created here, as a2a-go would. The
// turn runs detached from the request: a client that goes away does not stop it, and its
// receipt is written.
func (e *executor) answerPlain(ctx context.Context, cc *a2asrv.CallContext, p *a2a.SendMessageRequest) (*a2a.Task, error) {
	ctx = context.WithoutCancel(ctx)
	ec := &a2asrv.ExecutorContext{Message: p.Message, TaskID: a2a.NewTaskID(), ContextID: p.Message.ContextID,
		Metadata: p.Metadata, User: cc.User, ServiceParams: cc.ServiceParams(), Tenant: cc.Tenant()}
	if ec.ContextID == "" {
		ec.ContextID = a2a.NewContextID()
	}
	var last a2a.Event
	var failed error
	t := &turnRun{ec: ec, task: a2a.NewSubmittedTask(ec, ec.Message), keep: true, yield: func(ev a2a.Event, err error) bool {
		last, failed = ev, err
		return err == nil
	}}
	if fin := e.run(ctx, callFrom(ctx), t); fin != nil && fin.Kept {
		if err := holdAnswer(ctx, fin); err != nil {
			return nil, err
		}
		return t.kept, nil
	}
	if failed != nil {
		return nil, failed
	}
	task, ok := last.(*a2a.Task)
	if !ok {
		return nil, fmt.Errorf("the turn ended without its task: %w", a2a.ErrInvalidAgentResponse)
	}
	if _, err := e.tasks.Create(ctx, task); err != nil {
		return nil, fmt.Errorf("store the task: %w", err)
	}
	return task, nil
}

// turnRun is one delegated turn's events: the turn.Watcher the gateway gives the turn.
type turnRun struct {
	ec        *a2asrv.ExecutorContext
	yield     func(a2a.Event, error) bool
	task      *a2a.Task // the task as it was before this turn
	created   bool      // the task is in the store
	streaming bool
	watched   bool           // the agent sees the task during the turn: store it at once
	shown     []*a2a.Message // status messages sent: each next status moves the last into history
	keep      bool           // answerPlain's (a new task, not watched): stored in the receipt's commit
	kept      *a2a.Task      // that task, finished
}

// Started sends a new task's first event on a stream, the task as submitted: the agent learns
// the task's id from it. A plain send creates the task directly in a later state (status),
// fewer writes.
func (t *turnRun) Started() bool {
	if !t.streaming || t.created {
		return true
	}
	t.created = true
	return t.yield(t.task, nil)
}

// Working sends a WORKING status.
func (t *turnRun) Working(text string) bool { return t.status(a2a.TaskStateWorking, text) }

// status sends a status; the first event of a task not yet stored is the task itself.
// A new task of a plain send is not stored WORKING: its id reaches the agent only with
// the answer, so it is stored once, finished, in its receipt's commit (keep). The turn's
// durable trace before Codex starts is its turn record (docs/threats.md T8).
func (t *turnRun) status(state a2a.TaskState, text string) bool {
	if !t.Started() {
		return false
	}
	msg := agentText(t.ec, text)
	t.shown = append(t.shown, msg)
	if !t.created && !t.watched && state == a2a.TaskStateWorking {
		return true
	}
	if !t.created {
		t.created = true
		task := *t.task
		now := time.Now().UTC()
		task.Status = a2a.TaskStatus{State: state, Message: msg, Timestamp: &now}
		return t.yield(&task, nil)
	}
	return t.yield(a2a.NewStatusUpdateEvent(t.ec, state, msg), nil)
}

// withhold makes the task of a turn refused before any work keep the agent's message as a
// waiting task does (withheld: a preview and the hash of the whole), when the task is not
// stored yet: a refused turn leaves nothing of its size behind (docs/threats.md L11).
func (t *turnRun) withhold() {
	msg := t.ec.Message
	if t.created || msg == nil {
		return
	}
	kept, err := withheld(msg, t.task)
	if err != nil {
		return // the task keeps the message, as before
	}
	task := *t.task
	task.History = slices.Clone(task.History)
	for i, m := range task.History {
		if m == msg || m.ID == msg.ID {
			task.History[i] = kept
		}
	}
	t.task = &task
}

// finish sends the artifacts and the final status: as events on a stream, as
// the finished task in one write on a plain send (nobody watches its events).
func (t *turnRun) finish(arts []*a2a.TaskArtifactUpdateEvent, final *a2a.TaskStatusUpdateEvent) {
	if !t.streaming {
		t.yield(finishedTask(t.task, t.shown, arts, final), nil)
		return
	}
	for _, a := range arts {
		if !t.yield(a, nil) {
			return
		}
	}
	t.yield(final, nil)
}

// ending is what the agent gets of a finished turn: the answer, the receipt, the final status.
func (t *turnRun) ending(out domain.Outcome, rec *receipts.Receipt) ([]*a2a.TaskArtifactUpdateEvent, *a2a.TaskStatusUpdateEvent) {
	state := taskState(out.Status)
	var arts []*a2a.TaskArtifactUpdateEvent
	if state == a2a.TaskStateCompleted {
		arts = append(arts, answerArtifact(t.ec, out.Answer))
	}
	arts = append(arts, receiptArtifact(t.ec, rec))
	final := a2a.NewStatusUpdateEvent(t.ec, state, agentText(t.ec, finalText(state, out.Reason)))
	if out.ThreadID != "" {
		final.Metadata = map[string]any{metaThread: out.ThreadID}
	}
	return arts, final
}

// keeper is the task a plain send keeps in its receipt's commit, finished (turn.Request.Keep).
func (t *turnRun) keeper(ctx context.Context) func(domain.Outcome) *receipts.NewTask {
	return func(out domain.Outcome) *receipts.NewTask {
		owner, err := ownerFromContext(ctx)
		if err != nil {
			return nil
		}
		return &receipts.NewTask{Owner: owner, Build: func(rec *receipts.Receipt) (receipts.TaskRow, error) {
			arts, final := t.ending(out, rec)
			t.kept = finishedTask(t.task, t.shown, arts, final)
			return a2atask.Encode(t.kept)
		}}
	}
}

func taskState(s domain.TurnStatus) a2a.TaskState {
	switch s {
	case domain.TurnCompleted:
		return a2a.TaskStateCompleted
	case domain.TurnCanceled:
		return a2a.TaskStateCanceled
	}
	return a2a.TaskStateFailed
}

// run hands the turn to the turn service and maps how it ended onto the task's events.
func (e *executor) run(ctx context.Context, c call, t *turnRun) *turn.Finished {
	ec := t.ec
	rt := e.g.routes.Load() // the policy snapshot this turn runs on (P11)
	br := rt.brands[e.brand]
	if br == nil {
		t.status(a2a.TaskStateFailed, "the brand "+quoteTrunc(string(e.brand))+" is no longer offered by this node")
		return nil
	}
	if err := e.g.witness(ctx, c.agent, ec.Message); err != nil {
		t.yield(nil, err)
		return nil
	}
	reqHash, err := receipts.HashJSON(ec.Message)
	if err != nil {
		t.yield(nil, fmt.Errorf("hash request: %w", err))
		return nil
	}
	req := turn.Request{TaskID: string(ec.TaskID), ContextID: ec.ContextID, Brand: br.brand, Policy: rt.policy,
		PolicyHash: rt.hash, Grant: c.grant, Agent: c.agent, RequestHash: reqHash, Texts: messageTexts(ec.Message),
		ThreadID: e.threadFor(ctx, ec), Disconnect: c.disconnect}
	if t.keep {
		req.Keep = t.keeper(ctx)
	}
	fin, err := e.g.turns.Run(ctx, req, t)
	var refusal *turn.Refusal
	switch {
	case errors.As(err, &refusal):
		t.withhold()
		t.status(a2a.TaskStateFailed, refusal.Text)
	case errors.Is(err, turn.ErrRunning):
		t.yield(nil, a2a.NewError(a2a.ErrUnsupportedOperation, err.Error()))
	case errors.Is(err, turn.ErrUnwatched):
	case err != nil:
		t.yield(nil, err)
	case fin.ByAgent: // Cancel emits the receipt and the CANCELED status on the same queue
	case !fin.Kept:
		t.finish(t.ending(fin.Outcome, fin.Receipt))
	}
	return fin
}

// finishedTask is task as the SDK would store it after the turn's status
// updates (shown), artifacts and final status, applied at once.
func finishedTask(task *a2a.Task, shown []*a2a.Message, arts []*a2a.TaskArtifactUpdateEvent, final *a2a.TaskStatusUpdateEvent) *a2a.Task {
	t := *task
	t.History = append(slices.Clone(task.History), shown...)
	t.Artifacts = slices.Clone(task.Artifacts)
	for _, a := range arts {
		t.Artifacts = append(t.Artifacts, a.Artifact)
	}
	t.Status = final.Status
	if len(final.Metadata) > 0 {
		t.Metadata = maps.Clone(task.Metadata)
		if t.Metadata == nil {
			t.Metadata = map[string]any{}
		}
		maps.Copy(t.Metadata, final.Metadata)
	}
	return &t
}

// Cancel stops a running turn (Codex gets SIGTERM, then SIGKILL) and ends the
// task CANCELED with the turn's receipt; an idle task is simply canceled.
func (e *executor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		rec, err := e.g.turns.Cancel(ctx, string(ec.TaskID))
		if err != nil {
			yield(nil, err)
			return
		}
		if rec != nil && !yield(receiptArtifact(ec, rec), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, agentText(ec, "Canceled at the agent's request.")), nil)
	}
}

func finalText(state a2a.TaskState, reason string) string {
	switch {
	case state == a2a.TaskStateCompleted:
		return "Done. The answer and its signed receipt are in the task's artifacts."
	case state == a2a.TaskStateCanceled:
		return "Canceled: " + reason
	case reason == turn.ReasonRevoked:
		return "The turn failed: revoked (the owner revoked this agent's grant while the turn waited; Codex did not run)"
	}
	return "The turn failed: " + reason
}

func agentText(ec *a2asrv.ExecutorContext, text string) *a2a.Message {
	return a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text))
}

func answerArtifact(ec *a2asrv.ExecutorContext, answer string) *a2a.TaskArtifactUpdateEvent {
	ev := a2a.NewArtifactEvent(ec, a2a.NewTextPart(answer))
	ev.Artifact.Name = "answer"
	ev.Artifact.Description = "Codex's answer"
	return ev
}

// receiptArtifact carries the receipt twice: its claims as a data part, and the
// compact JWS that anyone with the node JWKS can verify; and beside them its C2SP tlog-proof
// in the node's receipts log (docs/pact-extension.md).
func receiptArtifact(ec *a2asrv.ExecutorContext, rec *receipts.Receipt) *a2a.TaskArtifactUpdateEvent {
	parts := []*a2a.Part{a2a.NewDataPart(receiptData(rec)), a2a.NewTextPart(rec.JWS)}
	if proof := rec.Proof(); proof != "" {
		p := a2a.NewTextPart(proof)
		p.MediaType, p.Filename = "text/plain; charset=utf-8", "receipt.tlog-proof"
		parts = append(parts, p)
	}
	ev := a2a.NewArtifactEvent(ec, parts...)
	ev.Artifact.Name = "receipt"
	ev.Artifact.Extensions = []string{ExtensionURI}
	ev.Artifact.Description = "Signed receipt (JWS, typ pact-receipt+jwt); verify with " + "/.well-known/jwks.json"
	return ev
}

// messageTexts is what the agent asked: its text parts, and data parts as JSON.
func messageTexts(m *a2a.Message) []string {
	var out []string
	for _, p := range m.Parts {
		if t := p.Text(); t != "" {
			out = append(out, t)
		} else if d := p.Data(); d != nil {
			out = append(out, fmt.Sprintf("%v", d))
		}
	}
	return out
}

// threadFor is the Codex thread a turn continues: its task's own, else the
// newest one in the same context (the caller's tasks on this brand only, in
// the same workspace), so a conversation keeps Codex's memory across tasks.
func (e *executor) threadFor(ctx context.Context, ec *a2asrv.ExecutorContext) string {
	if id := threadOf(ec.StoredTask); id != "" {
		return id
	}
	if ec.Message.ContextID == "" { // a new conversation: the SDK made up its context id
		return ""
	}
	none := 0
	page, err := e.tasks.List(ctx, &a2a.ListTasksRequest{ContextID: ec.ContextID, PageSize: 10, HistoryLength: &none})
	if err != nil {
		return ""
	}
	for _, t := range page.Tasks {
		if id := threadOf(t); id != "" {
			return id
		}
	}
	return ""
}

func threadOf(t *a2a.Task) string {
	if t == nil {
		return ""
	}
	// The thread id travels on the final status event's metadata, which the SDK
	// merges into the task's metadata.
	if s, ok := t.Metadata[metaThread].(string); ok {
		return s
	}
	return ""
}

// receiptData is the receipt's data part: its signed claims in camelCase
// (receipts.DataPart), JSON-native values as the task store's gob copies need.
func receiptData(rec *receipts.Receipt) map[string]any {
	m, err := receipts.DataPart(rec.JWS)
	if err != nil {
		return map[string]any{"error": "receipt claims not readable: " + err.Error()}
	}
	return m
}
