package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/identity/identitytest"
	"github.com/aether/aether/backend/node"
	"github.com/aether/aether/backend/receipts"
	"github.com/aether/aether/backend/store"
)

// The store's caps and the gateway's preview, as docs/wire.md gives them.
const (
	waitingPerAgent = store.MaxWaitingPerAgent
	waitingPerSite  = store.MaxWaitingPerSite
	previewLimit    = 256
)

// dbBytes is what pact.sqlite takes on disk, its write-ahead log included.
func dbBytes(t *testing.T, dataDir string) int64 {
	t.Helper()
	var n int64
	for _, f := range []string{"pact.sqlite", "pact.sqlite-wal"} {
		if fi, err := os.Stat(filepath.Join(dataDir, f)); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// backdate moves the matching tasks' last change into the past, as if that time had gone by.
func backdate(t *testing.T, dataDir string, by time.Duration, where string, args ...any) {
	t.Helper()
	res, err := pactSQLite(t, dataDir).Exec("UPDATE tasks SET updated_at = updated_at - ? WHERE "+where, append([]any{by.Milliseconds()}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		t.Fatalf("backdate: no task matches %s %v", where, args)
	}
}

// sendAs posts a SendMessage (or SendStreamingMessage) with text on JSON-RPC, or on HTTP+JSON
// when rest, with an identity JWT and no delegation. It returns the HTTP answer and its body.
func sendAs(t *testing.T, e *env, token, id, text string, method string, rest bool) (*http.Response, []byte) {
	t.Helper()
	msg := map[string]any{"messageId": id, "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}
	path, body := "/a2a/review", map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": map[string]any{"message": msg}}
	if rest {
		path, body = "/a2a/review/message:send", map[string]any{"message": msg}
	}
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", e.publicURL+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

// waitingTask is the AUTH_REQUIRED task a JSON-RPC SendMessage answered with.
func waitingTask(t *testing.T, resp *http.Response, body []byte) *a2a.Task {
	t.Helper()
	var out struct {
		Result *struct {
			Task *a2a.Task `json:"task"`
		} `json:"result"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &out) != nil || out.Result == nil || out.Result.Task == nil ||
		out.Result.Task.Status.State != a2a.TaskStateAuthRequired {
		t.Fatalf("want an AUTH_REQUIRED task, got %d %.300s", resp.StatusCode, body)
	}
	return out.Result.Task
}

// newWaiting sends a plain message as an un-delegated agent and wants an AUTH_REQUIRED task.
func newWaiting(t *testing.T, e *env, token, id, text string) *a2a.Task {
	t.Helper()
	resp, body := sendAs(t, e, token, id, text, "SendMessage", false)
	return waitingTask(t, resp, body)
}

// overCap checks a refusal over a cap: 429 with Retry-After within the device-flow lifetime,
// in the binding's error shape, naming the cap.
func overCap(t *testing.T, resp *http.Response, body []byte, rest bool, scope string) {
	t.Helper()
	after, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != http.StatusTooManyRequests || err != nil || after < 1 || after > int(store.WaitingTTL/time.Second) {
		t.Fatalf("over the %s cap: %d Retry-After %q; want 429 with 1..600 (%.300s)", scope, resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	var m map[string]any
	json.Unmarshal(body, &m)
	e, _ := m["error"].(map[string]any)
	msg, _ := e["message"].(string)
	switch {
	case rest && e["status"] != "RESOURCE_EXHAUSTED", !rest && e["code"] != float64(-32000):
		t.Fatalf("over the %s cap: error %v, not the binding's shape", scope, e)
	case !strings.Contains(msg, "this "+scope+" already has"):
		t.Fatalf("over the %s cap: message %q does not say which cap", scope, msg)
	}
}

// TestWaitingTasks: what an agent the owner never approved can store is a preview per message,
// capped per agent and per issuer site, and it expires; the resend with a delegation runs the
// turn; retention deletes finished tasks and never a receipt (docs/threats.md, K1–K5).
func TestWaitingTasks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withNode(func(o *node.Options) { o.PruneEvery = 50 * time.Millisecond }))
	alice := e.agent("alice")
	big := strings.Repeat("review this line of code, please; ", 3_900_000/34)
	var kept []*a2a.Task

	t.Run("K1 twenty-five un-delegated 3.9 MB messages grow pact.sqlite by a bounded amount", func(t *testing.T) {
		before := dbBytes(t, e.dataDir)
		const calls = 25
		for i := range calls {
			id := fmt.Sprintf("big-%d", i)
			resp, body := sendAs(t, e, alice.identityToken(), id, big, "SendMessage", false)
			if i >= waitingPerAgent {
				overCap(t, resp, body, false, "agent")
				continue
			}
			task := waitingTask(t, resp, body)
			kept = append(kept, task)
			if len(task.History) != 1 {
				t.Fatalf("history of %d messages", len(task.History))
			}
			h := task.History[0]
			want, _ := receipts.HashJSON(a2a.Message{ID: id, Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart(big)}})
			w, _ := h.Metadata["aether.withheld"].(map[string]any)
			if h.ID != id || len(h.Parts) != 1 || len(h.Parts[0].Text()) > previewLimit+len("…") || !strings.HasPrefix(big, strings.TrimSuffix(h.Parts[0].Text(), "…")) ||
				w["sha256"] != want || w["textBytes"] != float64(len(big)) {
				t.Fatalf("stored message: id %s, %d parts, text %d bytes, withheld %v; want a preview and sha256 %s", h.ID, len(h.Parts), len(h.Parts[0].Text()), w, want)
			}
		}
		// A stored task costs its preview and, in the write-ahead log, at most 16 pages of 4 KiB:
		// its row with the status message, and one leaf of each of the table's indexes. A
		// refused call writes nothing. Keeping the messages grew the file by 97 MB.
		grown := dbBytes(t, e.dataDir) - before
		bound := int64(waitingPerAgent * (previewLimit + 16*4096))
		t.Logf("pact.sqlite grew by %d bytes for %d calls of %d bytes (bound %d)", grown, calls, len(big), bound)
		if grown > bound || grown >= int64(len(big)) {
			t.Fatalf("pact.sqlite grew by %d bytes, over %d", grown, bound)
		}
		// GetTask reads the same preview back.
		got, err := alice.client("review", a2a.TransportProtocolJSONRPC).GetTask(t.Context(), &a2a.GetTaskRequest{ID: kept[0].ID})
		if err != nil || len(got.History) != 1 || len(got.History[0].Parts[0].Text()) > previewLimit+len("…") {
			t.Fatalf("GetTask of a waiting task: %v %v", got, err)
		}
	})

	t.Run("K2 over the agent cap: 429 with Retry-After on both bindings, also streaming", func(t *testing.T) {
		resp, body := sendAs(t, e, alice.identityToken(), "rest-over", "hi", "", true)
		overCap(t, resp, body, true, "agent")
		resp, body = sendAs(t, e, alice.identityToken(), "stream-over", "hi", "SendStreamingMessage", false)
		overCap(t, resp, body, false, "agent")
		// Another agent of the same issuer is not affected.
		newWaiting(t, e, e.agent("bob").identityToken(), "b", "hi")
	})

	t.Run("K3 one issuer's agents fill its site's cap; another issuer is unaffected", func(t *testing.T) {
		for i := 0; i < waitingPerSite-waitingPerAgent-1; i++ { // alice holds 10 and bob 1 already
			sub := fmt.Sprintf("sock-%d", i/waitingPerAgent)
			newWaiting(t, e, e.agent(sub).identityToken(), fmt.Sprintf("s%d", i), "hi")
		}
		resp, body := sendAs(t, e, e.agent("newcomer").identityToken(), "n", "hi", "SendMessage", false)
		overCap(t, resp, body, false, "issuer")
		other := identitytest.NewIssuer(t)
		other.URL = strings.Replace(other.URL, "127.0.0.1", "localhost", 1) // another site
		newWaiting(t, e, other.Token("carol", e.publicURL), "c", "hi")
	})

	t.Run("K4 tasks of agents never approved expire with their device flow", func(t *testing.T) {
		// The device-flow lifetime goes by for every waiting task of the socks; the sweep
		// deletes them and the site has room again.
		backdate(t, e.dataDir, store.WaitingTTL+time.Second, "owner LIKE ?", "%|sock-%")
		deadline := time.Now().Add(waitLimit)
		for {
			resp, body := sendAs(t, e, e.agent("newcomer").identityToken(), "n2", "hi", "SendMessage", false)
			if resp.StatusCode == 200 {
				waitingTask(t, resp, body)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the site cap did not free after the tasks expired: %d %.200s", resp.StatusCode, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
		c := e.agent("sock-0").client("review", a2a.TransportProtocolJSONRPC)
		if _, err := c.ListTasks(t.Context(), &a2a.ListTasksRequest{}); err != nil {
			t.Fatal(err)
		}
		if page, _ := c.ListTasks(t.Context(), &a2a.ListTasksRequest{}); len(page.Tasks) != 0 {
			t.Fatalf("sock-0 still has %d tasks", len(page.Tasks))
		}
	})

	var done *a2a.Task
	t.Run("K1 the resend with a delegation completes the turn", func(t *testing.T) {
		alice.allow()
		c := alice.client("review", a2a.TransportProtocolJSONRPC)
		done = alice.send(c, kept[0].ID, big)
		if done.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("resend ended %s: %q", done.Status.State, statusText(done))
		}
		if r := e.receiptFor(done.ID); r == nil {
			t.Fatal("no receipt for the resent turn")
		}
		// Sent unchanged as a new task, the message's receipt names the hash the stand-in kept.
		kept1 := kept[1].History[0]
		res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: &a2a.Message{ID: kept1.ID, Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart(big)}}})
		if err != nil {
			t.Fatal(err)
		}
		again := res.(*a2a.Task)
		var req any
		for _, art := range again.Artifacts {
			if art.Name == "receipt" {
				if d, ok := art.Parts[0].Data().(map[string]any); ok {
					req = d["req"]
				}
			}
		}
		if want := kept1.Metadata["aether.withheld"].(map[string]any)["sha256"]; again.Status.State != a2a.TaskStateCompleted || req != want {
			t.Fatalf("resent as a new task: %s, receipt req %v, want the stand-in's %v", again.Status.State, req, want)
		}
	})

	t.Run("K5 retention removes finished tasks, never receipts", func(t *testing.T) {
		c := alice.client("review", a2a.TransportProtocolJSONRPC)
		backdate(t, e.dataDir, 31*24*time.Hour, "id = ?", string(done.ID))
		deadline := time.Now().Add(waitLimit)
		for {
			_, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: done.ID})
			if err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a task finished 31 days ago is still there (retention 30 days)")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if r := e.receiptFor(done.ID); r == nil {
			t.Fatal("retention deleted the receipt")
		}
		e.stop()
		if code, out := verifyCLI(t, e.dataDir); code != 0 {
			t.Fatalf("receipts verify after retention: %d %s", code, out)
		}
	})
}
