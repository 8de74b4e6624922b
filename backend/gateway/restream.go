package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/identity"
)

var (
	errRESTTaskNotFound   = wireError{http.StatusNotFound, -32001, "NOT_FOUND", "TASK_NOT_FOUND", ""}
	errRESTUnsupportedOps = wireError{http.StatusBadRequest, -32004, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION", ""}
)

// restStreamTask is the task an HTTP+JSON streaming call names, if any:
// SubscribeToTask (GET or POST /tasks/{id}:subscribe) and SendStreamingMessage
// (POST /message:stream) with message.taskId. path is the REST path below the
// brand; body the checked request body.
func restStreamTask(method, path string, body []byte) (a2a.TaskID, bool, bool) {
	if rest, ok := strings.CutPrefix(path, "/tasks/"); ok && (method == http.MethodGet || method == http.MethodPost) {
		if id, ok := strings.CutSuffix(rest, ":subscribe"); ok && id != "" && !strings.Contains(id, "/") {
			return a2a.TaskID(id), true, true
		}
		return "", false, false
	}
	if path == "/message:stream" && method == http.MethodPost {
		var req struct {
			Message *struct {
				TaskID string `json:"taskId"`
			} `json:"message"`
		}
		if json.Unmarshal(body, &req) == nil && req.Message != nil && req.Message.TaskID != "" {
			return a2a.TaskID(req.Message.TaskID), false, true
		}
	}
	return "", false, false
}

// checkRESTStream answers, before a2a-go's REST handler writes a 200 event
// stream's headers, the errors a streaming call on HTTP+JSON is known to get
// from the gate: TaskNotFound for a task the caller does not own on this
// brand, UnsupportedOperation for a terminal task (and, for a message, a task
// with a turn running). A2A 1.0 §11.6: an error known before the first event
// is the HTTP answer, 400 for UnsupportedOperation (§5.4). The gate keeps the
// same checks for both bindings; on JSON-RPC its error is the stream's first event, which
// holdFirstEvent turns into the plain JSON-RPC answer.
func (g *Gateway) checkRESTStream(br *brandRoute, id identity.Identity, r *http.Request, body []byte) *wireError {
	tid, subscribe, ok := restStreamTask(r.Method, r.URL.Path, body)
	if !ok {
		return nil
	}
	owner, brand, state, err := g.cfg.Tasks.TaskOwner(r.Context(), tid)
	if err != nil || owner != id.Key() || domain.BrandID(brand) != br.brand.ID {
		e := errRESTTaskNotFound.with("task not found")
		return &e
	}
	switch {
	case state.Terminal() && subscribe:
		e := errRESTUnsupportedOps.with("the task is " + state.String() + ": read it with GetTask")
		return &e
	case state.Terminal():
		e := errRESTUnsupportedOps.with("the task is " + state.String() + " and takes no more messages; start a new task")
		return &e
	case !subscribe && g.turns.Running(string(tid)):
		e := errRESTUnsupportedOps.with("a turn is already running on this task; wait for it or cancel it")
		return &e
	}
	return nil
}

// holdFirstEvent holds what a2a-go writes of an event stream until its first event is whole:
// a stream whose first event is an error never started, so the error is the call's plain
// answer, as application/json (A2A 1.0 §11.6; docs/wire.md, "Streams"): a JSON-RPC error
// response in HTTP 200 with the request's id, or on HTTP+JSON the AIP-193 body with its HTTP
// status. Any other first event, a keep-alive included, starts the stream as it is. It
// returns ok false when p is not held back (no stream, or one that started), and otherwise
// what to send now: nil while the event is not whole or when the error went out instead.
func (w *refusingWriter) holdFirstEvent(p []byte) (send []byte, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent || w.refusal != nil || w.status != http.StatusOK ||
		!strings.HasPrefix(w.ResponseWriter.Header().Get("Content-Type"), "text/event-stream") {
		return nil, false
	}
	w.first = append(w.first, p...)
	end := bytes.Index(w.first, []byte("\n\n"))
	if end < 0 {
		return nil, true
	}
	held := w.first
	w.first = nil
	status, body := streamError(held[:end], w.b)
	if body == nil {
		return held, true
	}
	w.sent = true
	h := w.ResponseWriter.Header()
	for k := range h {
		delete(h, k) // a2a-go's stream headers
	}
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.ResponseWriter.WriteHeader(status)
	w.ResponseWriter.Write(append(body, '\n'))
	w.refusal = &wireError{} // sent with a refusal: send drops the rest of the stream, if any
	return nil, true
}

// streamError reads an SSE event: when its data is an error, the HTTP status and body that
// answer it instead (JSON-RPC: a response with an "error" member, in 200; HTTP+JSON: an
// AIP-193 {"error": {"code": <HTTP status>, …}}); body is nil for any other event.
func streamError(event []byte, b binding) (int, []byte) {
	var data []byte
	for line := range bytes.SplitSeq(event, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if data != nil {
				data = append(data, '\n') // an event's data lines are one value
			}
			data = append(data, bytes.TrimPrefix(d, []byte(" "))...)
		}
	}
	var v struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &v) != nil || v.Error == nil {
		return 0, nil
	}
	if b == bindingJSONRPC {
		return http.StatusOK, data
	}
	if v.Error.Code < 400 || v.Error.Code > 599 {
		return http.StatusInternalServerError, data
	}
	return v.Error.Code, data
}
