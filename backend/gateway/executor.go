package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/aether/aether/backend/codex"
	"github.com/aether/aether/backend/consent"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/policy"
	"github.com/aether/aether/backend/receipts"
)

// metaThread is the task metadata key that keeps the Codex thread id, so a
// later turn on the same task resumes the same Codex conversation.
const metaThread = "aether.codexThreadId"

// executor runs a delegated turn: Codex in the brand's workspace under its
// access mode, then a receipt committed before the answer is sent.
type executor struct {
	g     *Gateway
	brand string
	tasks taskstore.Store // the route's
}

// turn is one running turn, found by task id for CancelTask and disconnects.
type turn struct {
	cancel  context.CancelCauseFunc
	done    chan struct{}
	receipt *receipts.Receipt // set before done closes
}

// maxTurnsPerGrant caps the turns of one grant that run or wait for a workspace at once:
// no agent fills the queue that other agents' turns wait in (W14).
const maxTurnsPerGrant = 4

var (
	errCanceledByAgent = errors.New("canceled by the agent (CancelTask)")
	errDisconnected    = errors.New("the streaming client disconnected")
	errShutdown        = errors.New("the node stopped while the turn was running")
)

type turnTable struct {
	mu sync.Mutex
	m  map[a2a.TaskID]*turn
}

func newTurnTable() *turnTable { return &turnTable{m: map[a2a.TaskID]*turn{}} }

func (t *turnTable) running(id a2a.TaskID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[id] != nil
}

func (t *turnTable) get(id a2a.TaskID) *turn {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[id]
}

func (t *turnTable) add(id a2a.TaskID, tr *turn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[id] != nil {
		return false
	}
	t.m[id] = tr
	return true
}

// cancelAll stops every running turn and waits until each has ended (its
// receipt committed) or ctx ends.
func (t *turnTable) cancelAll(ctx context.Context, cause error) error {
	t.mu.Lock()
	running := make([]*turn, 0, len(t.m))
	for _, tr := range t.m {
		running = append(running, tr)
	}
	t.mu.Unlock()
	for _, tr := range running {
		tr.cancel(cause)
	}
	for _, tr := range running {
		select {
		case <-tr.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (t *turnTable) remove(id a2a.TaskID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, id)
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
// finished task from the turn to the answer. The turn normally stores it with its receipt
// (run): it hands the task over as soon as it is written in that commit, and a2a-go encodes
// the answer while the commit is made durable; the guard's writer sends it only once it is
// (holdAnswer). A task the turn could not store so (it failed first) is created here, as
// a2a-go would. The turn runs detached from the request, on a goroutine of its own, as
// a2a-go runs an execution: a client that goes away does not stop it, and its receipt is
// written.
func (e *executor) answerPlain(ctx context.Context, cc *a2asrv.CallContext, p *a2a.SendMessageRequest) (*a2a.Task, error) {
	ctx = context.WithoutCancel(ctx)
	ec := &a2asrv.ExecutorContext{Message: p.Message, TaskID: a2a.NewTaskID(), ContextID: p.Message.ContextID,
		Metadata: p.Metadata, User: cc.User, ServiceParams: cc.ServiceParams(), Tenant: cc.Tenant()}
	if ec.ContextID == "" {
		ec.ContextID = a2a.NewContextID()
	}
	var last a2a.Event
	var failed error
	t := &turnRun{ec: ec, task: a2a.NewSubmittedTask(ec, ec.Message), yield: func(ev a2a.Event, err error) bool {
		last, failed = ev, err
		return err == nil
	}, handed: make(chan storedTask, 1)}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		e.run(ctx, callFrom(ctx), t)
	}()
	select {
	case st := <-t.handed:
		if err := holdAnswer(ctx, st.durable); err != nil {
			return nil, err
		}
		return st.task, nil
	case <-ended:
	}
	if failed != nil {
		return nil, failed
	}
	task, ok := last.(*a2a.Task)
	if !ok {
		return nil, fmt.Errorf("the turn ended without its task: %w", a2a.ErrInvalidAgentResponse)
	}
	if !t.stored {
		if _, err := e.tasks.Create(ctx, task); err != nil {
			return nil, fmt.Errorf("store the task: %w", err)
		}
	}
	return task, nil
}

// turnRun is one delegated turn's events.
type turnRun struct {
	ec        *a2asrv.ExecutorContext
	yield     func(a2a.Event, error) bool
	task      *a2a.Task // the task as it was before this turn
	created   bool      // the task is in the store
	streaming bool
	watched   bool            // the agent sees the task during the turn: store it at once
	stored    bool            // the turn stored the task, finished, with its receipt (createFinished)
	shown     []*a2a.Message  // status messages sent: each next status moves the last into history
	handed    chan storedTask // answerPlain's (a new task, not watched): the task, once written with its receipt
}

// storedTask is a turn's finished task, written in its receipt's commit; durable returns once
// that commit is durable, and nothing of the task may leave the node before it has.
type storedTask struct {
	task    *a2a.Task
	durable func() error
}

// open sends a new task's first event on a stream, the task as submitted: the agent learns
// the task's id from it. A plain send creates the task directly in a later state (status),
// fewer writes.
func (t *turnRun) open() bool {
	if !t.streaming || t.created {
		return true
	}
	t.created = true
	return t.yield(t.task, nil)
}

// status sends a status; the first event of a task not yet stored is the task itself.
// A new task of a plain send is not stored WORKING: its id reaches the agent only with
// the answer, so it is stored once, finished, in its receipt's commit (run). The turn's
// durable trace before Codex starts is its turn record (docs/threats.md T8).
func (t *turnRun) status(state a2a.TaskState, text string) bool {
	if !t.open() {
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

func (e *executor) run(ctx context.Context, c call, t *turnRun) {
	ec := t.ec
	rt := e.g.routes.Load() // the policy snapshot this turn runs on (P11)
	br := rt.brands[e.brand]
	if br == nil {
		t.status(a2a.TaskStateFailed, "the brand "+quoteTrunc(e.brand)+" is no longer offered by this node")
		return
	}
	brand := br.brand
	if c.grant == "" {
		// The gate lets no turn through without a delegation; refuse loudly if one gets here.
		t.status(a2a.TaskStateFailed, "no delegation on this turn")
		return
	}
	if !e.g.grantTurns.Take(c.grant) {
		t.status(a2a.TaskStateFailed, fmt.Sprintf("too many turns of this grant are running or waiting (at most %d at once); retry when one has finished", maxTurnsPerGrant))
		return
	}
	defer e.g.grantTurns.Release(c.grant)
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	tr := &turn{cancel: cancel, done: make(chan struct{})}
	if !e.g.turns.add(ec.TaskID, tr) {
		t.yield(nil, a2a.NewError(a2a.ErrUnsupportedOperation, "a turn is already running on this task"))
		return
	}
	defer e.g.turns.remove(ec.TaskID)
	defer close(tr.done)
	if !t.open() { // once the turn is running: a CancelTask sent on it at once finds the turn
		return
	}
	if c.disconnect != nil {
		go func() {
			select {
			case <-c.disconnect:
				cancel(errDisconnected)
			case <-runCtx.Done():
			}
		}()
	}

	reqHash, err := receipts.HashJSON(ec.Message)
	if err != nil {
		t.yield(nil, fmt.Errorf("hash request: %w", err))
		return
	}
	base := receipts.Turn{
		ID: newID("t_"), TaskID: string(ec.TaskID), ContextID: ec.ContextID, Brand: brand.ID, BrandScope: brand.Scope.ID,
		GrantID: c.grant, Agent: domain.Agent{Issuer: c.agent.Issuer, Subject: c.agent.Subject}, PolicyHash: rt.hash, RequestHash: reqHash,
		StartedAt: time.Now().UTC(),
	}
	// The turn record is written by Admit, while bwrap makes the turn's view; Codex starts
	// only once it is durable (T8). A turn that ends before Admit writes it here, before its
	// receipt.
	recorded := sync.OnceValue(func() error { return e.g.cfg.Ledger.Start(ctx, base) })
	visible := t.status(a2a.TaskStateWorking, "Codex is working on it in "+brand.Name+" ("+string(brand.AccessMode)+").")
	if !visible {
		if err := recorded(); err != nil {
			t.yield(nil, fmt.Errorf("record turn: %w", err))
			return
		}
		// The task could not be updated (the SDK stopped the execution): close
		// the turn with a receipt rather than leave it running until a restart.
		end := base
		end.Status, end.Reason, end.ExitCode, end.EndedAt = domain.TurnFailed, "the task could not be updated; codex did not run", -1, time.Now().UTC()
		end.AnswerHash = receipts.HashBytes(nil)
		if _, err := e.g.cfg.Ledger.Append(context.WithoutCancel(ctx), end); err != nil {
			e.g.cfg.Logger.Error("receipt not committed", "task", ec.TaskID, "err", err)
		}
		return
	}

	// The turn's folders are tidied once its receipt is committed, below (codex.Request.Tidy).
	tidy := make(chan struct{})
	defer close(tidy)
	res := e.runCodex(runCtx, rt, brand, t, base, recorded, tidy)
	if err := recorded(); err != nil {
		t.yield(nil, fmt.Errorf("record turn: %w", err)) // Codex did not start (Admit)
		return
	}
	status, state, reason := outcome(runCtx, res)
	end := base
	end.AnswerHash = receipts.HashBytes([]byte(res.Answer))
	end.Status, end.Reason, end.ExitCode, end.EndedAt = status, reason, res.ExitCode, time.Now().UTC()
	end.Usage = receipts.Usage{InputTokens: res.Usage.InputTokens, CachedInputTokens: res.Usage.CachedInputTokens, OutputTokens: res.Usage.OutputTokens}
	end.Violation = res.Status == codex.StatusViolation
	// A revoke during the turn lets it finish: the ledger reads the grant in the receipt's
	// commit and marks the receipt (V2). What the agent gets: the answer, the receipt, the
	// final status.
	ending := func(rec *receipts.Receipt) ([]*a2a.TaskArtifactUpdateEvent, *a2a.TaskStatusUpdateEvent) {
		var arts []*a2a.TaskArtifactUpdateEvent
		if state == a2a.TaskStateCompleted {
			arts = append(arts, answerArtifact(ec, res.Answer))
		}
		arts = append(arts, receiptArtifact(ec, rec))
		final := a2a.NewStatusUpdateEvent(ec, state, agentText(ec, finalText(state, reason)))
		if res.ThreadID != "" {
			final.Metadata = map[string]any{metaThread: res.ThreadID}
		}
		return arts, final
	}
	if t.handed != nil && !errors.Is(context.Cause(runCtx), errCanceledByAgent) {
		// A plain send's task, not stored yet (see status): the finished task goes into its
		// receipt's commit, and to answerPlain as soon as it is written there; the turn ends
		// once the commit is durable.
		if done, rec, durable := e.createFinished(ctx, t, end, ending); done != nil {
			t.stored = true
			t.handed <- storedTask{done, durable}
			if err := durable(); err != nil {
				e.g.cfg.Logger.Error("receipt not committed", "task", ec.TaskID, "err", err)
				return
			}
			e.receipted(tr, rec)
			return
		}
	}
	rec, err := e.g.cfg.Ledger.Append(context.WithoutCancel(ctx), end)
	if err != nil {
		// No receipt, no answer: the turn fails rather than answer unrecorded.
		e.g.cfg.Logger.Error("receipt not committed", "task", ec.TaskID, "err", err)
		t.status(a2a.TaskStateFailed, "the node could not record a receipt for this turn")
		return
	}
	e.receipted(tr, rec)
	if errors.Is(context.Cause(runCtx), errCanceledByAgent) {
		return // Cancel emits the receipt and the CANCELED status on the same queue
	}
	t.finish(ending(rec))
}

// createFinished writes the turn's receipt and its task, finished, in one commit, and returns
// them once written there, with durable (Ledger.AppendCreatingTask). It returns a nil task
// when that failed (logged): the caller appends the receipt alone, as for a stored task.
func (e *executor) createFinished(ctx context.Context, t *turnRun, end receipts.Turn,
	ending func(*receipts.Receipt) ([]*a2a.TaskArtifactUpdateEvent, *a2a.TaskStatusUpdateEvent)) (*a2a.Task, *receipts.Receipt, func() error) {
	owner, err := ownerFromContext(ctx)
	if err != nil {
		return nil, nil, nil
	}
	var done *a2a.Task
	rec, durable, err := e.g.cfg.Ledger.AppendCreatingTask(context.WithoutCancel(ctx), end, e.brand, owner, func(rec *receipts.Receipt) (*a2a.Task, error) {
		arts, final := ending(rec)
		done = finishedTask(t.task, t.shown, arts, final)
		return done, nil
	})
	if err != nil {
		e.g.cfg.Logger.Warn("receipt and task not committed together; appending the receipt alone", "task", t.ec.TaskID, "err", err)
		return nil, nil, nil
	}
	return done, rec, durable
}

// receipted records a committed receipt: on the running turn (for Cancel), and for OnReceipt.
func (e *executor) receipted(tr *turn, rec *receipts.Receipt) {
	tr.receipt = rec
	if e.g.cfg.OnReceipt != nil {
		e.g.cfg.OnReceipt(rec)
	}
}

// runCodex runs the coding agent, relaying its progress as WORKING updates. It starts
// only once recorded (the turn's record) and the grant's standing both hold.
func (e *executor) runCodex(ctx context.Context, rt *routes, brand policy.Brand, t *turnRun, turn receipts.Turn, recorded func() error, tidy <-chan struct{}) codex.Result {
	req := codex.Request{
		AccessMode: string(brand.AccessMode),
		Prompt:     codex.BuildPrompt(brand.InstructionText(), messageTexts(t.ec.Message)),
		ThreadID:   e.threadFor(ctx, t.ec),
		// Codex's sessions are kept per agent and brand: a thread resumes only for them.
		Conversation: turn.Agent.Issuer + "\x00" + turn.Agent.Subject + "\x00" + brand.ID,
		Admit: func(ctx context.Context) error {
			if err := recorded(); err != nil {
				return fmt.Errorf("record turn: %w", err)
			}
			return e.g.admit(ctx, turn.GrantID, brand.ID)
		},
		Tidy: tidy,
	}
	progress := make(chan string, 16)
	resc := make(chan codex.Result, 1)
	timeout, cancelTimeout := context.WithTimeout(ctx, e.g.cfg.TurnTimeout)
	defer cancelTimeout()
	go func() {
		// Resolve the workspace again at turn start: it must still be the folder
		// the policy named, not a symlink swapped in since (P7).
		dir, err := rt.policy.RecheckWorkspace(brand.ID)
		if err != nil {
			resc <- codex.Result{Status: codex.StatusFailed, Reason: err.Error()}
			return
		}
		req.Workspace = dir
		res, err := e.g.cfg.Runner.Run(timeout, req, func(p codex.Progress) {
			select {
			case progress <- p.Text:
			default: // a slow consumer drops progress, never the turn
			}
		})
		if err != nil && res.Reason == "" {
			res.Status, res.Reason = codex.StatusFailed, err.Error()
		}
		if errors.Is(err, errRevokedWhileQueued) {
			res.Reason = reasonRevoked
		}
		resc <- res
	}()
	for {
		select {
		case text := <-progress:
			if !t.status(a2a.TaskStateWorking, text) {
				// The event pipe is gone; let Codex finish and keep its receipt.
				return <-resc
			}
		case res := <-resc:
			return res
		}
	}
}

// outcome maps how the turn ended onto the receipt status and the task state.
func outcome(runCtx context.Context, res codex.Result) (status domain.TurnStatus, state a2a.TaskState, reason string) {
	cause := context.Cause(runCtx)
	switch {
	case errors.Is(cause, errShutdown):
		return domain.TurnFailed, a2a.TaskStateFailed, errShutdown.Error()
	case cause != nil && !errors.Is(cause, context.Canceled):
		return domain.TurnCanceled, a2a.TaskStateCanceled, cause.Error()
	case res.Status == codex.StatusCompleted && res.Answer != "":
		return domain.TurnCompleted, a2a.TaskStateCompleted, ""
	case res.Reason == reasonRevoked:
		return domain.TurnFailed, a2a.TaskStateFailed, reasonRevoked
	case res.Status == codex.StatusViolation:
		if res.Reason == "" {
			res.Reason = "the turn broke its brand's access mode"
		}
	case res.Reason == "":
		res.Reason = "codex finished without an answer"
	}
	return domain.TurnFailed, a2a.TaskStateFailed, res.Reason
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
		if tr := e.g.turns.get(ec.TaskID); tr != nil {
			tr.cancel(errCanceledByAgent)
			select {
			case <-tr.done:
			case <-ctx.Done():
				yield(nil, ctx.Err())
				return
			}
			if tr.receipt != nil {
				if !yield(receiptArtifact(ec, tr.receipt), nil) {
					return
				}
			}
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
	case reason == reasonRevoked:
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
// compact JWS that anyone with the node JWKS can verify.
func receiptArtifact(ec *a2asrv.ExecutorContext, rec *receipts.Receipt) *a2a.TaskArtifactUpdateEvent {
	ev := a2a.NewArtifactEvent(ec, a2a.NewDataPart(receiptData(rec)), a2a.NewTextPart(rec.JWS))
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

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
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

// reasonRevoked is the receipt's reason for a turn whose grant was revoked while it waited.
const reasonRevoked = "revoked"

var errRevokedWhileQueued = errors.New(reasonRevoked)

// admit runs once a turn holds its workspace, right before Codex starts: the grant must
// still stand and the brand still be offered, however long the turn waited (W13).
func (g *Gateway) admit(ctx context.Context, grantID, brandID string) error {
	if g.routes.Load().brands[brandID] == nil {
		return errors.New("the brand " + quoteTrunc(brandID) + " is no longer offered by this node")
	}
	err := g.cfg.Consent.GrantStands(ctx, grantID, brandID)
	var de *consent.DelegationError
	if errors.As(err, &de) && de.Reason == consent.ReasonRevoked {
		return errRevokedWhileQueued
	}
	return err
}
