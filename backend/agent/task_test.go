package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// viaJSON round-trips a task through its wire form, as a client receives it.
func viaJSON(t *testing.T, task *a2a.Task) *a2a.Task {
	t.Helper()
	var out a2a.Task
	if err := json.Unmarshal(mustJSON(t, task), &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func authRequiredTask(data map[string]any) *a2a.Task {
	task := &a2a.Task{ID: "task-1", ContextID: "ctx-1"}
	parts := []*a2a.Part{a2a.NewTextPart("The owner of this node has not allowed this agent.")}
	if data != nil {
		parts = append(parts, a2a.NewDataPart(data))
	}
	task.Status = a2a.TaskStatus{State: a2a.TaskStateAuthRequired, Message: a2a.NewMessageForTask(a2a.MessageRoleAgent, task, parts...)}
	return task
}

func TestParseAuthRequired(t *testing.T) {
	task := viaJSON(t, authRequiredTask(map[string]any{
		"reason": "expired", "consentUrl": "https://127.0.0.1:3000/pact/consent",
		"deviceAuthorizationUrl": "https://n.example/pact/device_authorization", "tokenUrl": "https://n.example/pact/token",
		"scope": "review:read_only", "credentialHeader": "PACT-Delegation", "resumeTaskId": "task-1", "brand": "review",
	}))
	ar, err := ParseAuthRequired(task)
	if err != nil {
		t.Fatal(err)
	}
	want := AuthRequired{
		TaskID: "task-1", ContextID: "ctx-1", Reason: "expired", Text: "The owner of this node has not allowed this agent.",
		ConsentURL: "https://127.0.0.1:3000/pact/consent", DeviceAuthorizationURL: "https://n.example/pact/device_authorization",
		TokenURL: "https://n.example/pact/token", Scope: "review:read_only", CredentialHeader: "PACT-Delegation",
		Brand: "review", ResumeTaskID: "task-1",
	}
	if *ar != want {
		t.Fatalf("got  %+v\nwant %+v", *ar, want)
	}

	// No resumeTaskId: resume the task itself.
	ar, err = ParseAuthRequired(viaJSON(t, authRequiredTask(map[string]any{"reason": "missing"})))
	if err != nil || ar.ResumeTaskID != "task-1" {
		t.Fatalf("resume = %v, %v", ar, err)
	}
}

func TestParseAuthRequiredRefusesIncompleteAnswers(t *testing.T) {
	done := &a2a.Task{ID: "t", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
	noMsg := &a2a.Task{ID: "t", Status: a2a.TaskStatus{State: a2a.TaskStateAuthRequired}}
	for name, task := range map[string]*a2a.Task{
		"nil":          nil,
		"not auth":     done,
		"no message":   noMsg,
		"no data part": authRequiredTask(nil),
		"no reason":    authRequiredTask(map[string]any{"tokenUrl": "https://n.example/pact/token"}),
		"reason typed": authRequiredTask(map[string]any{"reason": 42}),
	} {
		if _, err := ParseAuthRequired(task); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestReadOutcome(t *testing.T) {
	task := &a2a.Task{ID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
	answer := a2a.NewArtifactEvent(task, a2a.NewTextPart("Looks "), a2a.NewTextPart("good."))
	answer.Artifact.Name = "answer"
	receipt := a2a.NewArtifactEvent(task, a2a.NewDataPart(map[string]any{"rid": "r1", "seq": 3}), a2a.NewTextPart("aaa.bbb.ccc"))
	receipt.Artifact.Name = "receipt"
	task.Artifacts = []*a2a.Artifact{answer.Artifact, receipt.Artifact}
	o := ReadOutcome(viaJSON(t, task))
	if o.Answer != "Looks good." || o.ReceiptJWS != "aaa.bbb.ccc" || o.ReceiptData["rid"] != "r1" {
		t.Fatalf("outcome = %+v", o)
	}

	// Unnamed artifacts: a data part beside a JWS is the receipt, text is the answer.
	answer.Artifact.Name, receipt.Artifact.Name = "", ""
	if o := ReadOutcome(viaJSON(t, task)); o.Answer != "Looks good." || o.ReceiptJWS != "aaa.bbb.ccc" {
		t.Fatalf("unnamed: %+v", o)
	}
	// A text that merely has dots is not a receipt.
	task.Artifacts = []*a2a.Artifact{{ID: "a", Parts: a2a.ContentParts{a2a.NewTextPart("see a.b.c")}}}
	if o := ReadOutcome(task); o.ReceiptJWS != "" || o.Answer != "see a.b.c" {
		t.Fatalf("dots: %+v", o)
	}
}

func TestTaskFolderBuildsTheTaskFromStreamEvents(t *testing.T) {
	task := &a2a.Task{ID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
	var f taskFolder
	chunk1 := a2a.NewArtifactEvent(task, a2a.NewTextPart("Looks "))
	chunk2 := a2a.NewArtifactUpdateEvent(task, chunk1.Artifact.ID, a2a.NewTextPart("good."))
	chunk2.Append = true
	working := a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, a2a.NewMessageForTask(a2a.MessageRoleAgent, task, a2a.NewTextPart("working")))
	final := a2a.NewStatusUpdateEvent(task, a2a.TaskStateCompleted, nil)
	final.Metadata = map[string]any{"k": "v"}
	for _, ev := range []a2a.Event{task, working, chunk1, chunk2, final} {
		if err := f.apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	if f.task.Status.State != a2a.TaskStateCompleted || f.task.Metadata["k"] != "v" || len(f.task.Artifacts) != 1 {
		t.Fatalf("task = %+v", f.task)
	}
	if o := ReadOutcome(f.task); o.Answer != "Looks good." {
		t.Fatalf("answer %q", o.Answer)
	}
	if err := f.apply(a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("hi"))); err == nil || !strings.Contains(err.Error(), "message") {
		t.Fatalf("message event: %v", err)
	}
}
