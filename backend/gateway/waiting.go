package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/aether/aether/backend/consent"
	"github.com/aether/aether/backend/identity"
	"github.com/aether/aether/backend/receipts"
	"github.com/aether/aether/backend/site"
)

// A task that waits for consent keeps no message the agent sent, only what it needs to be
// recognised (docs/wire.md, K1): its id and role, the first previewBytes of its text, and the
// SHA-256 of the whole, under metaWithheld. The agent sends the message again with its
// delegation. At most maxWaitingHistory such entries are kept per task.
const (
	previewBytes      = 256
	maxWaitingHistory = 8
	metaWithheld      = "aether.withheld"
)

// withheld is m, as received, the way task keeps it.
func withheld(m *a2a.Message, task *a2a.Task) (*a2a.Message, error) {
	hash, err := receipts.HashJSON(m)
	if err != nil {
		return nil, fmt.Errorf("hash message: %w", err)
	}
	text := strings.Join(messageTexts(m), "\n")
	preview, cut := text, false
	if len(preview) > previewBytes {
		preview, cut = preview[:previewBytes], true
		for !utf8.ValidString(preview) {
			preview = preview[:len(preview)-1]
		}
	}
	if cut {
		preview += "…"
	}
	return &a2a.Message{
		ID: m.ID, Role: m.Role, ContextID: task.ContextID, TaskID: task.ID,
		Parts: a2a.ContentParts{a2a.NewTextPart(preview)},
		Metadata: map[string]any{metaWithheld: map[string]any{
			"sha256": hash, "parts": len(m.Parts), "textBytes": len(text), "previewCut": cut,
		}},
	}, nil
}

// authRequired stores (or updates) the task in TASK_STATE_AUTH_REQUIRED with the status
// message docs/wire.md describes and returns it. No work runs. A new task over the caps is
// refused with 429 and Retry-After (refuse).
func (gt *gate) authRequired(ctx context.Context, id identity.Identity, msg *a2a.Message, existing *taskstore.StoredTask, derr error) (*a2a.Task, error) {
	reason, detail := "invalid", "the delegation token is not valid"
	var de *consent.DelegationError
	if errors.As(derr, &de) {
		reason, detail = de.Reason, de.Detail
	} else {
		gt.g.cfg.Logger.Warn("delegation check failed", "brand", gt.brand, "err", derr)
	}
	gt.g.cfg.Logger.Info("turn needs consent", "brand", gt.brand, "reason", reason, "agent_iss", id.Issuer)
	br := gt.g.routes.Load().brands[gt.brand]
	scope := br.brand.Scope.ID
	now := time.Now().UTC()

	var task *a2a.Task
	if existing == nil {
		task = &a2a.Task{ID: a2a.NewTaskID(), ContextID: msg.ContextID}
		if task.ContextID == "" {
			task.ContextID = a2a.NewContextID()
		}
	} else {
		task = existing.Task
		if msg.ContextID != "" && msg.ContextID != task.ContextID {
			return nil, a2a.NewError(a2a.ErrInvalidParams, "the message's contextId is not the task's")
		}
	}
	kept, err := withheld(msg, task)
	if err != nil {
		return nil, err
	}
	task.History = append(task.History, kept)
	if n := len(task.History); n > maxWaitingHistory {
		task.History = task.History[n-maxWaitingHistory:]
	}
	text := fmt.Sprintf("The owner of this node has not allowed this agent to use %q (%s). "+
		"Start the OAuth device flow at %s with scope %q and show the owner the user code; "+
		"they approve it on %s. Then send this message again on task %s with the token in the %s header: "+
		"the node did not keep it (only a preview and its SHA-256).",
		br.brand.Name, reasonText(reason, detail), gt.urls.deviceAuthorization(), scope, gt.g.cfg.ConsentURL, task.ID, DelegationHeader)
	status := a2a.NewMessageForTask(a2a.MessageRoleAgent, task,
		a2a.NewTextPart(text),
		a2a.NewDataPart(map[string]any{
			"reason":                 reason,
			"consentUrl":             gt.g.cfg.ConsentURL,
			"deviceAuthorizationUrl": gt.urls.deviceAuthorization(),
			"tokenUrl":               gt.urls.token(),
			"scope":                  scope,
			"credentialHeader":       DelegationHeader,
			"resumeTaskId":           string(task.ID),
			"brand":                  gt.brand,
		}))
	status.Extensions = []string{ExtensionURI} // the data part is PACT's (docs/pact-extension.md)
	task.Status = a2a.TaskStatus{State: a2a.TaskStateAuthRequired, Message: status, Timestamp: &now}
	prev := taskstore.TaskVersionMissing
	if existing != nil {
		prev = existing.Version
	}
	_, err = gt.g.cfg.Tasks.SaveWaiting(ctx, string(gt.brand), id.Key(), site.OfIssuer(id.Issuer), task, prev)
	var capped interface{ RetryAfter() time.Duration }
	if errors.As(err, &capped) {
		gt.g.cfg.Logger.Info("waiting task refused", "brand", gt.brand, "agent_iss", id.Issuer, "err", err)
		return nil, refuse(ctx, errBusy.with(err.Error()+"; retry later, or run the device flow first"), capped.RetryAfter())
	}
	if err != nil {
		return nil, fmt.Errorf("store auth-required task: %w", err)
	}
	return task, nil
}

func reasonText(reason, detail string) string {
	switch reason {
	case consent.ReasonMissing:
		return "no delegation token was sent"
	case consent.ReasonExpired:
		return "the delegation token or its grant has expired"
	case consent.ReasonRevoked:
		return "the owner revoked the grant behind the delegation token"
	case consent.ReasonWrongBrand:
		return "the delegation token is for another brand"
	case consent.ReasonWrongAgent:
		return "the delegation token was issued to another agent"
	}
	if detail != "" {
		return "the delegation token is not valid: " + detail
	}
	return "the delegation token is not valid"
}

// A refusal lets the gate answer a call with an error of the transport's own, a limit with
// Retry-After, which a2a-go's error mapping cannot express: the guard hands a2a-go a writer
// that holds the status line back until the first byte of the body (a stream's headers
// included), and writes the refusal instead when the gate set one by then. The same writer
// holds a plain send's whole answer while its receipt's commit is under way (holdAnswer).
type refusingWriter struct {
	http.ResponseWriter
	b  binding
	id json.RawMessage // the JSON-RPC request's id, for an error in its place

	mu      sync.Mutex
	status  int // held back by WriteHeader
	refusal *wireError
	retry   time.Duration
	sent    bool    // the held status or the refusal went out
	first   []byte  // an event stream's first event, held until it is whole (restream.go)
	durable durable // what the answer waits for (holdAnswer); its bytes are held meanwhile
	held    []byte
}

// durable is a turn.Finished's Durable: nil once what the answer carries is durable.
type durable interface{ Durable() error }

type refusalKey struct{}

func withRefusals(ctx context.Context, w *refusingWriter) context.Context {
	return context.WithValue(ctx, refusalKey{}, w)
}

// refuse makes the call's answer e with Retry-After, whatever a2a-go writes for the error it
// returns (which is what a caller without the guard gets).
func refuse(ctx context.Context, e wireError, retry time.Duration) error {
	if w, ok := ctx.Value(refusalKey{}).(*refusingWriter); ok {
		w.refuse(e, retry)
	}
	return a2a.NewError(a2a.ErrServerError, e.Message)
}

// refuse makes the answer e, unless a byte of another has gone out.
func (w *refusingWriter) refuse(e wireError, retry time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.sent {
		w.refusal, w.retry = &e, retry
	}
}

// holdAnswer lets a2a-go make the answer while what it carries becomes durable (fin), and
// holds every byte of it until then: no byte of a receipt leaves the node before its commit
// and the head mark are (docs/threats.md T8, T14). If it does not become durable, the agent
// gets errNotRecorded instead (refusingWriter.finish). Without the guard's writer, it waits
// here.
func holdAnswer(ctx context.Context, fin durable) error {
	if w, ok := ctx.Value(refusalKey{}).(*refusingWriter); ok {
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.sent {
			w.durable = fin
			return nil
		}
	}
	if err := fin.Durable(); err != nil {
		return refuse(ctx, errNotRecorded, 0)
	}
	return nil
}

func (w *refusingWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.sent && w.status == 0 {
		w.status = code
	}
}

// send writes the held status or the refusal; it reports whether a2a-go's body goes out.
func (w *refusingWriter) send() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent {
		return w.refusal == nil
	}
	w.sent = true
	if w.refusal != nil {
		h := w.ResponseWriter.Header()
		for k := range h {
			delete(h, k) // a2a-go's stream headers
		}
		setRetryAfter(w.ResponseWriter, w.retry)
		writeWireError(w.ResponseWriter, w.b, *w.refusal, w.id)
		return false
	}
	if w.status != 0 {
		w.ResponseWriter.WriteHeader(w.status)
	}
	return true
}

func (w *refusingWriter) Write(p []byte) (int, error) {
	if w.hold(p) {
		return len(p), nil
	}
	if held, ok := w.holdFirstEvent(p); ok {
		if held == nil {
			return len(p), nil
		}
		p = held
	}
	if !w.send() {
		return len(p), nil
	}
	if _, err := w.ResponseWriter.Write(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush sends nothing before the first byte of the body: until then a refusal may come.
func (w *refusingWriter) Flush() {
	w.mu.Lock()
	sent, refused := w.sent, w.refusal != nil
	w.mu.Unlock()
	if !sent || refused {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// hold keeps p while the answer waits for its receipt (holdAnswer).
func (w *refusingWriter) hold(p []byte) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.durable == nil {
		return false
	}
	w.held = append(w.held, p...)
	return true
}

// finish sends what is still held when the handler returns (a refusal with no body written,
// a stream's unfinished first event, an answer once its receipt is durable).
func (w *refusingWriter) finish() {
	w.mu.Lock()
	fin := w.durable
	w.mu.Unlock()
	if fin != nil && fin.Durable() != nil {
		w.refuse(errNotRecorded, 0)
	}
	w.mu.Lock()
	first := append(w.held, w.first...)
	w.first, w.held, w.durable = nil, nil, nil
	w.mu.Unlock()
	if w.send() && len(first) > 0 {
		w.ResponseWriter.Write(first)
	}
}

func (w *refusingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
