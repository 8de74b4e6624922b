package e2e

import (
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/codex/codextest"
)

// TestConversationResumesCodexThread: a new task in the context of an earlier
// one continues that task's Codex thread (`codex exec resume <id>`), and
// another agent's task in a context of the same id does not.
func TestConversationResumesCodexThread(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.agent("alice")
	alice.setDelegation(e.delegate(t, alice, "review"))
	c := alice.client("review", a2a.TransportProtocolJSONRPC)

	first := alice.send(c, "", "Review main.go")
	if first.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("first turn: %s", first.Status.State)
	}
	req := textMessage("And now the tests, please")
	req.Message.ContextID = first.ContextID
	res, err := c.SendMessage(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if task := res.(*a2a.Task); task.Status.State != a2a.TaskStateCompleted || task.ID == first.ID {
		t.Fatalf("second turn: %s %s", task.ID, task.Status.State)
	}

	bob := e.agent("bob")
	bob.setDelegation(e.delegate(t, bob, "review"))
	breq := textMessage("Review main.go")
	breq.Message.ContextID = first.ContextID
	if _, err := bob.client("review", a2a.TransportProtocolJSONRPC).SendMessage(t.Context(), breq); err != nil {
		t.Fatal(err)
	}

	var starts []codextest.Record
	for _, r := range codextest.ReadRecords(t, e.record) {
		if r.Phase == "start" {
			starts = append(starts, r)
		}
	}
	if len(starts) != 3 {
		t.Fatalf("%d codex runs, want 3", len(starts))
	}
	if starts[0].Resume {
		t.Error("the first turn resumed a thread")
	}
	if !starts[1].Resume || starts[1].ThreadID == "" {
		t.Errorf("the second turn in the context did not resume the first's thread: %+v", starts[1])
	}
	if starts[2].Resume {
		t.Errorf("another agent resumed alice's Codex thread: %+v", starts[2])
	}
}
