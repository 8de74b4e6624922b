package gateway

import (
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
// same checks for JSON-RPC, where the error travels in the stream.
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
