package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// errInvalidParams is a parameter that fails validation (A2A 1.0 §3.3.2):
// -32602 in HTTP 200 on JSON-RPC, 400 INVALID_ARGUMENT on HTTP+JSON.
var errInvalidParams = wireError{http.StatusBadRequest, -32602, "INVALID_ARGUMENT", "INVALID_PARAMS", ""}

// listTaskStates are the TaskState values a ListTasks status filter may name.
var listTaskStates = map[a2a.TaskState]bool{
	a2a.TaskStateAuthRequired: true, a2a.TaskStateCanceled: true, a2a.TaskStateCompleted: true,
	a2a.TaskStateFailed: true, a2a.TaskStateInputRequired: true, a2a.TaskStateRejected: true,
	a2a.TaskStateSubmitted: true, a2a.TaskStateWorking: true,
}

// checkListTasks validates ListTasks parameters as A2A 1.0 states them
// (pageSize 1..100 when present, historyLength not negative, statusTimestampAfter
// a timestamp, status a TaskState) before a2a-go decodes them: a2a-go reads an
// explicit pageSize 0 as unset and answers an unparsable timestamp as a parse
// error. get returns a parameter's text and whether it was sent; the page token
// is checked by the task store (ErrInvalidParams).
func checkListTasks(get func(name string) (string, bool)) error {
	if v, ok := get("pageSize"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return fmt.Errorf("pageSize must be an integer from 1 to 100, got %s", quoteTrunc(v))
		}
	}
	if v, ok := get("historyLength"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("historyLength must be a non-negative integer, got %s", quoteTrunc(v))
		}
	}
	if v, ok := get("statusTimestampAfter"); ok {
		if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
			return fmt.Errorf("statusTimestampAfter must be an RFC 3339 timestamp, got %s", quoteTrunc(v))
		}
	}
	if v, ok := get("status"); ok && v != "" && v != "TASK_STATE_UNSPECIFIED" && !listTaskStates[a2a.TaskState(v)] {
		return fmt.Errorf("status must be a TaskState, got %s", quoteTrunc(v))
	}
	return nil
}

// listTasksQuery reads HTTP+JSON ListTasks parameters from the query.
func listTasksQuery(q url.Values) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if !q.Has(name) {
			return "", false
		}
		return q.Get(name), true
	}
}

// listTasksRPC reads JSON-RPC ListTasks parameters from the request body; a
// JSON null counts as not sent, a string or number as its text.
func listTasksRPC(body []byte) (func(string) (string, bool), json.RawMessage, bool) {
	var env struct {
		ID     json.RawMessage            `json:"id"`
		Method string                     `json:"method"`
		Params map[string]json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.Method != "ListTasks" {
		return nil, nil, false // a2a-go answers params of the wrong type
	}
	return func(name string) (string, bool) {
		raw, ok := env.Params[name]
		if !ok || string(raw) == "null" {
			return "", false
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s, true
		}
		return strings.TrimSpace(string(raw)), true
	}, env.ID, true
}
