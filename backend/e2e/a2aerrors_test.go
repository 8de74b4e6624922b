package e2e

import (
	"net/http"
	"testing"
)

// TestA2AErrors: validation errors A2A 1.0 names, on both bindings (issue 12).
func TestA2AErrors(t *testing.T) {
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
}
