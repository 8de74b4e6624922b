package store

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var taskStart = time.Date(2025, 12, 4, 15, 50, 0, 0, time.UTC)

// stepClock advances by step on every reading (step 0: a frozen clock).
type stepClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

func (c *stepClock) setStep(d time.Duration) {
	c.mu.Lock()
	c.step = d
	c.mu.Unlock()
}

type ownerKey struct{}

// as is a context whose caller is name, as the gateway's interceptor would set it.
func as(t *testing.T, name string) context.Context {
	return context.WithValue(t.Context(), ownerKey{}, name)
}

func ownerOf(ctx context.Context) (string, error) {
	name, _ := ctx.Value(ownerKey{}).(string)
	return name, nil
}

// newTaskDB opens a real pact.sqlite whose clock starts at taskStart and
// moves one second per reading.
func newTaskDB(t *testing.T) (*DB, string, *stepClock) {
	t.Helper()
	db, path := openTemp(t)
	clk := &stepClock{t: taskStart, step: time.Second}
	db.Now = clk.Now
	return db, path, clk
}

func mustCreateTask(t *testing.T, ctx context.Context, s taskstore.Store, tasks ...*a2a.Task) {
	t.Helper()
	for _, task := range tasks {
		v, err := s.Create(ctx, task)
		if err != nil {
			t.Fatalf("Create(%s): %v", task.ID, err)
		}
		if v != 1 {
			t.Fatalf("Create(%s) version = %d, want 1", task.ID, v)
		}
	}
}

func mustUpdateTask(t *testing.T, ctx context.Context, s taskstore.Store, task *a2a.Task, prev taskstore.TaskVersion) taskstore.TaskVersion {
	t.Helper()
	v, err := s.Update(ctx, &taskstore.UpdateRequest{Task: task, Event: task, PrevVersion: prev})
	if err != nil {
		t.Fatalf("Update(%s): %v", task.ID, err)
	}
	return v
}

func mustGetTask(t *testing.T, ctx context.Context, s taskstore.Store, id a2a.TaskID) *taskstore.StoredTask {
	t.Helper()
	got, err := s.Get(ctx, id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return got
}

func listIDs(tasks []*a2a.Task) []a2a.TaskID {
	ids := make([]a2a.TaskID, len(tasks))
	for i, task := range tasks {
		ids[i] = task.ID
	}
	return ids
}

func TestTaskStoreGetSaved(t *testing.T) {
	db, _, _ := newTaskDB(t)
	s := db.TaskStore("review", ownerOf)
	ctx := as(t, "alice")

	meta := map[string]any{"k1": 42.0, "k2": []any{1.0, 2.0, 3.0}}
	task := &a2a.Task{ID: a2a.NewTaskID(), ContextID: "id", Metadata: meta}
	mustCreateTask(t, ctx, s, task)

	got := mustGetTask(t, ctx, s, task.ID)
	if got.Task.ContextID != "id" || got.Version != 1 || got.User != "alice" {
		t.Fatalf("Get = %+v", got)
	}
	if diff := cmp.Diff(meta, got.Task.Metadata); diff != "" {
		t.Fatalf("metadata (-want +got):\n%s", diff)
	}
}

func TestTaskStoreGetUpdated(t *testing.T) {
	db, _, _ := newTaskDB(t)
	s := db.TaskStore("review", ownerOf)
	ctx := as(t, "alice")

	task := &a2a.Task{ID: a2a.NewTaskID(), ContextID: "id"}
	mustCreateTask(t, ctx, s, task)
	task.ContextID = "id2"
	if v := mustUpdateTask(t, ctx, s, task, taskstore.TaskVersionMissing); v != 2 {
		t.Fatalf("version = %d, want 2", v)
	}
	if got := mustGetTask(t, ctx, s, task.ID); got.Task.ContextID != "id2" {
		t.Fatalf("contextId = %q, want id2", got.Task.ContextID)
	}
	// The context id column follows the update.
	resp, err := s.List(ctx, &a2a.ListTasksRequest{ContextID: "id2"})
	if err != nil || len(resp.Tasks) != 1 {
		t.Fatalf("List(contextId=id2) = %v, %v", resp, err)
	}
}

func TestTaskStoreStoredImmutability(t *testing.T) {
	db, _, _ := newTaskDB(t)
	s := db.TaskStore("review", ownerOf)
	ctx := as(t, "alice")

	task := &a2a.Task{
		ID:        a2a.NewTaskID(),
		Status:    a2a.TaskStatus{State: a2a.TaskStateWorking},
		Artifacts: []*a2a.Artifact{{Name: "foo"}},
		Metadata:  map[string]any{},
	}
	mustCreateTask(t, ctx, s, task)

	task.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted}
	task.Artifacts[0] = &a2a.Artifact{Name: "bar"}
	task.Metadata["key"] = "modified"

	got := mustGetTask(t, ctx, s, task.ID)
	if got.Task.Status.State != a2a.TaskStateWorking || got.Task.Artifacts[0].Name != "foo" || got.Task.Metadata["key"] != nil {
		t.Fatalf("stored task changed with the caller's copy: %+v", got.Task)
	}
	// Changing what Get returned does not change the store either.
	got.Task.Artifacts[0].Name = "baz"
	if again := mustGetTask(t, ctx, s, task.ID); again.Task.Artifacts[0].Name != "foo" {
		t.Fatalf("stored task changed with Get's copy")
	}
}

func TestTaskStoreNotFound(t *testing.T) {
	db, _, _ := newTaskDB(t)
	s := db.TaskStore("review", ownerOf)
	ctx := as(t, "alice")

	if _, err := s.Get(ctx, "invalid"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("Get = %v, want ErrTaskNotFound", err)
	}
	_, err := s.Update(ctx, &taskstore.UpdateRequest{Task: &a2a.Task{ID: "invalid"}})
	if !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("Update = %v, want ErrTaskNotFound", err)
	}
	if _, _, _, err := db.TaskOwner(ctx, "invalid"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("TaskOwner = %v, want ErrTaskNotFound", err)
	}
}

func TestTaskStoreCreateDuplicate(t *testing.T) {
	db, _, _ := newTaskDB(t)
	review := db.TaskStore("review", ownerOf)
	docs := db.TaskStore("docs", ownerOf)

	task := &a2a.Task{ID: a2a.NewTaskID(), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	mustCreateTask(t, as(t, "alice"), review, task)
	for name, try := range map[string]func() error{
		"same owner":    func() error { _, err := review.Create(as(t, "alice"), task); return err },
		"another owner": func() error { _, err := review.Create(as(t, "bob"), task); return err },
		"another brand": func() error { _, err := docs.Create(as(t, "alice"), task); return err },
	} {
		if err := try(); !errors.Is(err, taskstore.ErrTaskAlreadyExists) {
			t.Errorf("%s: Create = %v, want ErrTaskAlreadyExists", name, err)
		}
	}
	// The first task is untouched.
	owner, brand, state, err := db.TaskOwner(t.Context(), task.ID)
	if err != nil || owner != "alice" || brand != "review" || state != a2a.TaskStateWorking {
		t.Fatalf("TaskOwner = %q %q %q %v", owner, brand, state, err)
	}
}

func TestTaskStoreCallerRequired(t *testing.T) {
	db, _, _ := newTaskDB(t)
	s := db.TaskStore("review", ownerOf)
	anon := t.Context()

	if _, err := s.Create(anon, &a2a.Task{ID: a2a.NewTaskID()}); !errors.Is(err, a2a.ErrUnauthenticated) {
		t.Errorf("Create = %v, want ErrUnauthenticated", err)
	}
	if _, err := s.Get(anon, "x"); !errors.Is(err, a2a.ErrUnauthenticated) {
		t.Errorf("Get = %v, want ErrUnauthenticated", err)
	}
	if _, err := s.Update(anon, &taskstore.UpdateRequest{Task: &a2a.Task{ID: "x"}}); !errors.Is(err, a2a.ErrUnauthenticated) {
		t.Errorf("Update = %v, want ErrUnauthenticated", err)
	}
	if _, err := s.List(anon, &a2a.ListTasksRequest{}); !errors.Is(err, a2a.ErrUnauthenticated) {
		t.Errorf("List = %v, want ErrUnauthenticated", err)
	}

	boom := errors.New("no call context")
	failing := db.TaskStore("review", func(context.Context) (string, error) { return "", boom })
	if _, err := failing.Get(t.Context(), "x"); !errors.Is(err, boom) {
		t.Errorf("Get with a failing owner func = %v, want it wrapped", err)
	}

	defer func() {
		if recover() == nil {
			t.Error("TaskStore accepted a nil owner func")
		}
	}()
	db.TaskStore("review", nil)
}

func TestTaskStoreListBasic(t *testing.T) {
	db, _, _ := newTaskDB(t)
	s := db.TaskStore("review", ownerOf)
	ctx := as(t, "alice")

	empty, err := s.List(ctx, &a2a.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if empty.Tasks == nil || empty.TotalSize != 0 || empty.PageSize != 50 || empty.NextPageToken != "" {
		t.Fatalf("empty List = %+v", empty)
	}
	// An empty list is [] on the wire, never null.
	if raw, _ := json.Marshal(empty); !bytes.Contains(raw, []byte(`"tasks":[]`)) {
		t.Fatalf("empty List JSON = %s", raw)
	}

	tasks := []*a2a.Task{{ID: a2a.NewTaskID()}, {ID: a2a.NewTaskID()}, {ID: a2a.NewTaskID()}}
	mustCreateTask(t, ctx, s, tasks...)
	resp, err := s.List(ctx, &a2a.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := []a2a.TaskID{tasks[2].ID, tasks[1].ID, tasks[0].ID}
	if diff := cmp.Diff(want, listIDs(resp.Tasks)); diff != "" {
		t.Fatalf("List order (-want +got):\n%s", diff)
	}
	if resp.TotalSize != 3 {
		t.Fatalf("TotalSize = %d", resp.TotalSize)
	}

	// An update moves a task to the front.
	mustUpdateTask(t, ctx, s, tasks[0], 1)
	resp, _ = s.List(ctx, &a2a.ListTasksRequest{})
	want = []a2a.TaskID{tasks[0].ID, tasks[2].ID, tasks[1].ID}
	if diff := cmp.Diff(want, listIDs(resp.Tasks)); diff != "" {
		t.Fatalf("List order after update (-want +got):\n%s", diff)
	}
}

func TestTaskStoreListStoredImmutability(t *testing.T) {
	db, _, _ := newTaskDB(t)
	s := db.TaskStore("review", ownerOf)
	ctx := as(t, "alice")
	mk := func(c, art string) *a2a.Task {
		return &a2a.Task{ID: a2a.NewTaskID(), ContextID: c, Status: a2a.TaskStatus{State: a2a.TaskStateWorking}, Artifacts: []*a2a.Artifact{{Name: art}}}
	}
	t1, t2, t3 := mk("id1", "foo"), mk("id2", "bar"), mk("id3", "baz")
	mustCreateTask(t, ctx, s, t1, t2, t3)

	resp, err := s.List(ctx, &a2a.ListTasksRequest{IncludeArtifacts: true})
	if err != nil {
		t.Fatal(err)
	}
	resp.Tasks[0].ContextID = "modified"
	resp.Tasks[1].Status.State = a2a.TaskStateCompleted
	resp.Tasks[2].Artifacts[0].Name = "modified"

	again, err := s.List(ctx, &a2a.ListTasksRequest{IncludeArtifacts: true})
	if err != nil {
		t.Fatal(err)
	}
	if again.Tasks[0].ContextID != "id3" || again.Tasks[1].Status.State != a2a.TaskStateWorking || again.Tasks[2].Artifacts[0].Name != "foo" {
		t.Fatalf("List results share state with the store: %+v", again.Tasks)
	}
}

func TestTaskStoreListFilters(t *testing.T) {
	id1, id2, id3 := a2a.NewTaskID(), a2a.NewTaskID(), a2a.NewTaskID()
	cutoff := taskStart.Add(2 * time.Second)
	before := cutoff.Add(-time.Nanosecond)
	after := cutoff.Add(time.Nanosecond)
	// The same instant as after, written in another zone: the filter compares instants.
	afterElsewhere := after.In(time.FixedZone("UTC-7", -7*3600))
	ptr := func(n int) *int { return &n }
	cases := []struct {
		name    string
		req     *a2a.ListTasksRequest
		given   []*a2a.Task
		want    []*a2a.Task
		wantErr error
	}{
		{
			name:  "empty request",
			req:   &a2a.ListTasksRequest{},
			given: []*a2a.Task{{ID: id1}, {ID: id2}, {ID: id3}},
			want:  []*a2a.Task{{ID: id3}, {ID: id2}, {ID: id1}},
		},
		{
			name:  "ContextID filter",
			req:   &a2a.ListTasksRequest{ContextID: "id1"},
			given: []*a2a.Task{{ID: id1, ContextID: "id1"}, {ID: id2, ContextID: "id2"}},
			want:  []*a2a.Task{{ID: id1, ContextID: "id1"}},
		},
		{
			name:  "Status filter",
			req:   &a2a.ListTasksRequest{Status: a2a.TaskStateCanceled},
			given: []*a2a.Task{{ID: id1, Status: a2a.TaskStatus{State: a2a.TaskStateCanceled}}, {ID: id2, Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}},
			want:  []*a2a.Task{{ID: id1, Status: a2a.TaskStatus{State: a2a.TaskStateCanceled}}},
		},
		{
			name:  "StatusTimestampAfter filter",
			req:   &a2a.ListTasksRequest{StatusTimestampAfter: &cutoff},
			given: []*a2a.Task{{ID: id1, Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &taskStart}}, {ID: id2}, {ID: id3}},
			want:  []*a2a.Task{{ID: id3}, {ID: id2}},
		},
		{
			name: "StatusTimestampAfter to the nanosecond",
			req:  &a2a.ListTasksRequest{StatusTimestampAfter: &cutoff},
			given: []*a2a.Task{
				{ID: id1, Status: a2a.TaskStatus{Timestamp: &before}},
				{ID: id2, Status: a2a.TaskStatus{Timestamp: &cutoff}},
				{ID: id3, Status: a2a.TaskStatus{Timestamp: &afterElsewhere}},
			},
			want: []*a2a.Task{{ID: id3, Status: a2a.TaskStatus{Timestamp: &after}}, {ID: id2, Status: a2a.TaskStatus{Timestamp: &cutoff}}},
		},
		{
			name:  "HistoryLength filter",
			req:   &a2a.ListTasksRequest{HistoryLength: ptr(2)},
			given: []*a2a.Task{{ID: id1, History: []*a2a.Message{{ID: "m1"}, {ID: "m2"}, {ID: "m3"}}}, {ID: id2, History: []*a2a.Message{{ID: "m4"}, {ID: "m5"}}}},
			want:  []*a2a.Task{{ID: id2, History: []*a2a.Message{{ID: "m4"}, {ID: "m5"}}}, {ID: id1, History: []*a2a.Message{{ID: "m2"}, {ID: "m3"}}}},
		},
		{
			name:  "HistoryLength filter with 0",
			req:   &a2a.ListTasksRequest{HistoryLength: ptr(0)},
			given: []*a2a.Task{{ID: id1, History: []*a2a.Message{{ID: "m1"}, {ID: "m2"}, {ID: "m3"}}}, {ID: id2, History: []*a2a.Message{{ID: "m4"}, {ID: "m5"}}}},
			want:  []*a2a.Task{{ID: id2, History: []*a2a.Message{}}, {ID: id1, History: []*a2a.Message{}}},
		},
		{
			name:  "negative HistoryLength",
			req:   &a2a.ListTasksRequest{HistoryLength: ptr(-1)},
			given: []*a2a.Task{{ID: id1, History: []*a2a.Message{{ID: "m1"}, {ID: "m2"}, {ID: "m3"}}}, {ID: id2, History: []*a2a.Message{{ID: "m4"}, {ID: "m5"}}}},
			want:  []*a2a.Task{{ID: id2, History: []*a2a.Message{{ID: "m4"}, {ID: "m5"}}}, {ID: id1, History: []*a2a.Message{{ID: "m1"}, {ID: "m2"}, {ID: "m3"}}}},
		},
		{
			name:  "PageSize filter",
			req:   &a2a.ListTasksRequest{PageSize: 2},
			given: []*a2a.Task{{ID: id1}, {ID: id2}, {ID: id3}},
			want:  []*a2a.Task{{ID: id3}, {ID: id2}},
		},
		{
			name:    "PageSize above 100",
			req:     &a2a.ListTasksRequest{PageSize: 212},
			given:   []*a2a.Task{{ID: id1}},
			wantErr: fmt.Errorf("page size must be between 1 and 100 inclusive, got 212: %w", a2a.ErrInvalidParams),
		},
		{
			name:    "negative PageSize",
			req:     &a2a.ListTasksRequest{PageSize: -1},
			given:   []*a2a.Task{{ID: id1}},
			wantErr: fmt.Errorf("page size must be between 1 and 100 inclusive, got -1: %w", a2a.ErrInvalidParams),
		},
		{
			// The clock gives the three tasks taskStart+1s, +2s, +3s.
			name:  "PageToken filter",
			req:   &a2a.ListTasksRequest{PageSize: 1, PageToken: encodePageToken(ms(taskStart.Add(3*time.Second)), string(id3))},
			given: []*a2a.Task{{ID: id1}, {ID: id2}, {ID: id3}},
			want:  []*a2a.Task{{ID: id2}},
		},
		{
			name:    "invalid PageToken",
			req:     &a2a.ListTasksRequest{PageSize: 1, PageToken: "invalidPageToken"},
			given:   []*a2a.Task{{ID: id1}},
			wantErr: fmt.Errorf("invalid page token: %w", a2a.ErrInvalidParams),
		},
		{
			name:    "PageToken with a bad time",
			req:     &a2a.ListTasksRequest{PageToken: base64.RawURLEncoding.EncodeToString([]byte("soon_x"))},
			given:   []*a2a.Task{{ID: id1}},
			wantErr: fmt.Errorf("invalid page token: %w", a2a.ErrInvalidParams),
		},
		{
			name:    "PageToken without a separator",
			req:     &a2a.ListTasksRequest{PageToken: base64.RawURLEncoding.EncodeToString([]byte("12345"))},
			given:   []*a2a.Task{{ID: id1}},
			wantErr: fmt.Errorf("invalid page token: %w", a2a.ErrInvalidParams),
		},
		{
			name:  "IncludeArtifacts true",
			req:   &a2a.ListTasksRequest{IncludeArtifacts: true},
			given: []*a2a.Task{{ID: id1, Artifacts: []*a2a.Artifact{{Name: "foo"}}}, {ID: id2, Artifacts: []*a2a.Artifact{{Name: "bar"}}}},
			want:  []*a2a.Task{{ID: id2, Artifacts: []*a2a.Artifact{{Name: "bar"}}}, {ID: id1, Artifacts: []*a2a.Artifact{{Name: "foo"}}}},
		},
		{
			name:  "IncludeArtifacts false",
			req:   &a2a.ListTasksRequest{},
			given: []*a2a.Task{{ID: id1, Artifacts: []*a2a.Artifact{{Name: "foo"}}}, {ID: id2, Artifacts: []*a2a.Artifact{{Name: "bar"}}}},
			want:  []*a2a.Task{{ID: id2}, {ID: id1}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db, _, _ := newTaskDB(t)
			s := db.TaskStore("review", ownerOf)
			ctx := as(t, "alice")
			mustCreateTask(t, ctx, s, tc.given...)

			resp, err := s.List(ctx, tc.req)
			if tc.wantErr != nil {
				if err == nil || err.Error() != tc.wantErr.Error() || !errors.Is(err, errors.Unwrap(tc.wantErr)) {
					t.Fatalf("List error = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, resp.Tasks); diff != "" {
				t.Fatalf("tasks (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTaskStoreListHistoryDefault(t *testing.T) {
	db, _, _ := newTaskDB(t)
	s := db.TaskStore("review", ownerOf)
	ctx := as(t, "alice")
	task := &a2a.Task{ID: a2a.NewTaskID()}
	for i := range 150 {
		task.History = append(task.History, &a2a.Message{ID: fmt.Sprint(i), Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart("hi")}})
	}
	mustCreateTask(t, ctx, s, task)

	resp, err := s.List(ctx, &a2a.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	h := resp.Tasks[0].History
	if len(h) != 100 || h[0].ID != "50" || h[99].ID != "149" {
		t.Fatalf("default listed history: %d messages from %s", len(h), h[0].ID)
	}
	// Get keeps the whole history: trimming it there is the handler's job.
	if got := mustGetTask(t, ctx, s, task.ID); len(got.Task.History) != 150 {
		t.Fatalf("Get history = %d messages", len(got.Task.History))
	}
}

func TestTaskStoreListPagination(t *testing.T) {
	id1, id2, id3, id4, id5 := a2a.NewTaskID(), a2a.NewTaskID(), a2a.NewTaskID(), a2a.NewTaskID(), a2a.NewTaskID()
	cases := []struct {
		name      string
		pageSize  int
		sameTime  bool
		given     []a2a.TaskID
		want      []a2a.TaskID
		wantCalls int
	}{
		{name: "incomplete last page", pageSize: 2, given: []a2a.TaskID{id1, id2, id3, id4, id5}, want: []a2a.TaskID{id5, id4, id3, id2, id1}, wantCalls: 3},
		{name: "complete last page", pageSize: 2, given: []a2a.TaskID{id1, id2, id3, id4}, want: []a2a.TaskID{id4, id3, id2, id1}, wantCalls: 2},
		{name: "page larger than the list", pageSize: 10, given: []a2a.TaskID{id1, id2, id3, id4, id5}, want: []a2a.TaskID{id5, id4, id3, id2, id1}, wantCalls: 1},
		{name: "empty list", pageSize: 3, want: []a2a.TaskID{}, wantCalls: 1},
		// UUIDv7 ids sort by creation, so with one timestamp the newest still comes first.
		{name: "same updated_at", pageSize: 2, sameTime: true, given: []a2a.TaskID{id1, id2, id3}, want: []a2a.TaskID{id3, id2, id1}, wantCalls: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db, _, clk := newTaskDB(t)
			if tc.sameTime {
				clk.setStep(0)
			}
			s := db.TaskStore("review", ownerOf)
			ctx := as(t, "alice")
			for _, id := range tc.given {
				mustCreateTask(t, ctx, s, &a2a.Task{ID: id})
			}
			got := []a2a.TaskID{}
			calls := 0
			token := ""
			for {
				resp, err := s.List(ctx, &a2a.ListTasksRequest{PageSize: tc.pageSize, PageToken: token})
				if err != nil {
					t.Fatal(err)
				}
				if resp.TotalSize != len(tc.given) || resp.PageSize != tc.pageSize {
					t.Fatalf("TotalSize = %d, PageSize = %d", resp.TotalSize, resp.PageSize)
				}
				got = append(got, listIDs(resp.Tasks)...)
				calls++
				if token = resp.NextPageToken; token == "" {
					break
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("tasks (-want +got):\n%s", diff)
			}
			if calls != tc.wantCalls {
				t.Fatalf("calls = %d, want %d", calls, tc.wantCalls)
			}
		})
	}
}

// Many tasks share a millisecond (as they do under load): walking the pages
// must still give every task once, in the order of a single full listing.
func TestTaskStoreListPagesWithEqualTimestamps(t *testing.T) {
	db, _, clk := newTaskDB(t)
	s := db.TaskStore("review", ownerOf)
	ctx := as(t, "alice")
	// Ids that do not sort by creation, in runs that share a timestamp.
	for i := range 23 {
		clk.setStep(0)
		if i%7 == 0 {
			clk.setStep(time.Millisecond)
		}
		mustCreateTask(t, ctx, s, &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("t-%02d", (i*11)%23)), ContextID: "c"})
	}
	mustCreateTask(t, as(t, "bob"), s, &a2a.Task{ID: "bob-task", ContextID: "c"})

	full, err := s.List(ctx, &a2a.ListTasksRequest{PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(full.Tasks) != 23 {
		t.Fatalf("full listing has %d tasks", len(full.Tasks))
	}
	for _, size := range []int{1, 4, 5, 22, 23} {
		var got []a2a.TaskID
		seen := map[a2a.TaskID]bool{}
		token := ""
		for {
			resp, err := s.List(ctx, &a2a.ListTasksRequest{PageSize: size, PageToken: token, ContextID: "c"})
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range listIDs(resp.Tasks) {
				if seen[id] {
					t.Fatalf("page size %d: %s listed twice", size, id)
				}
				seen[id] = true
				got = append(got, id)
			}
			if token = resp.NextPageToken; token == "" {
				break
			}
		}
		if diff := cmp.Diff(listIDs(full.Tasks), got); diff != "" {
			t.Fatalf("page size %d (-full +paged):\n%s", size, diff)
		}
	}
}

func TestTaskStoreVersions(t *testing.T) {
	db, _, _ := newTaskDB(t)
	s := db.TaskStore("review", ownerOf)
	ctx := as(t, "alice")
	task := &a2a.Task{ID: a2a.NewTaskID(), ContextID: "id"}
	mustCreateTask(t, ctx, s, task)

	task.ContextID = "id2"
	v2 := mustUpdateTask(t, ctx, s, task, 1)
	if v2 != 2 || !v2.After(1) {
		t.Fatalf("version after update = %d, want 2", v2)
	}
	// A stale version is refused and changes nothing.
	task.ContextID = "id3"
	if _, err := s.Update(ctx, &taskstore.UpdateRequest{Task: task, PrevVersion: 1}); !errors.Is(err, taskstore.ErrConcurrentModification) {
		t.Fatalf("stale Update = %v, want ErrConcurrentModification", err)
	}
	got := mustGetTask(t, ctx, s, task.ID)
	if got.Version != 2 || got.Task.ContextID != "id2" {
		t.Fatalf("after a refused update: version %d, contextId %q", got.Version, got.Task.ContextID)
	}
	// TaskVersionMissing does not track versions: it overwrites.
	if v := mustUpdateTask(t, ctx, s, task, taskstore.TaskVersionMissing); v != 3 {
		t.Fatalf("untracked Update version = %d, want 3", v)
	}
}

func TestTaskStoreConcurrentUntrackedUpdates(t *testing.T) {
	db, _, _ := newTaskDB(t)
	s := db.TaskStore("review", ownerOf)
	ctx := as(t, "alice")
	task := &a2a.Task{ID: a2a.NewTaskID(), ContextID: "id"}
	mustCreateTask(t, ctx, s, task)

	const n = 40
	versions := make(chan taskstore.TaskVersion, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			v, err := s.Update(ctx, &taskstore.UpdateRequest{Task: task, PrevVersion: taskstore.TaskVersionMissing})
			if err != nil {
				errs <- err
				return
			}
			versions <- v
		})
	}
	wg.Wait()
	close(versions)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[taskstore.TaskVersion]bool{}
	for v := range versions {
		if seen[v] || v < 2 || v > n+1 {
			t.Fatalf("version %d repeated or out of range", v)
		}
		seen[v] = true
	}
}

func TestTaskStoreConcurrentUpdatesSamePrevVersion(t *testing.T) {
	db, _, _ := newTaskDB(t)
	s := db.TaskStore("review", ownerOf)
	ctx := as(t, "alice")
	id := a2a.NewTaskID()
	mustCreateTask(t, ctx, s, &a2a.Task{ID: id, ContextID: "c"})

	const n = 16
	start := make(chan struct{})
	results := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			task := &a2a.Task{ID: id, ContextID: "c", Metadata: map[string]any{"writer": float64(i)}}
			_, results[i] = s.Update(ctx, &taskstore.UpdateRequest{Task: task, PrevVersion: 1})
		})
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, err := range results {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("writers %d and %d both won", winner, i)
			}
			winner = i
		case !errors.Is(err, taskstore.ErrConcurrentModification):
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer won")
	}
	got := mustGetTask(t, ctx, s, id)
	if got.Version != 2 || got.Task.Metadata["writer"] != float64(winner) {
		t.Fatalf("stored version %d by writer %v, want 2 by %d", got.Version, got.Task.Metadata["writer"], winner)
	}
}

func TestTaskStorePrivacy(t *testing.T) {
	db, _, _ := newTaskDB(t)
	review := db.TaskStore("review", ownerOf)
	docs := db.TaskStore("docs", ownerOf)
	alice, bob := as(t, "alice"), as(t, "bob")

	aliceTask := &a2a.Task{ID: a2a.NewTaskID(), ContextID: "shared", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
	mustCreateTask(t, alice, review, aliceTask)

	// blank hides the id in an error, so that a foreign task's error can be
	// compared with a missing one's: they must not differ.
	blank := func(err error, id a2a.TaskID) string { return strings.ReplaceAll(err.Error(), string(id), "ID") }

	t.Run("R15 other agent's task", func(t *testing.T) {
		_, err := review.Get(bob, aliceTask.ID)
		if !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Fatalf("bob Get = %v, want ErrTaskNotFound", err)
		}
		missing := a2a.NewTaskID()
		_, errMissing := review.Get(bob, missing)
		if blank(err, aliceTask.ID) != blank(errMissing, missing) {
			t.Fatalf("foreign and missing tasks answer differently: %q vs %q", err, errMissing)
		}

		// Bob cannot overwrite it, with or without a version.
		for _, prev := range []taskstore.TaskVersion{taskstore.TaskVersionMissing, 1} {
			hijack := &a2a.Task{ID: aliceTask.ID, ContextID: "shared", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
			if _, err := review.Update(bob, &taskstore.UpdateRequest{Task: hijack, PrevVersion: prev}); !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Fatalf("bob Update(prev=%d) = %v, want ErrTaskNotFound", prev, err)
			}
		}
		// Bob's list holds his task only, even filtered on alice's context.
		bobTask := &a2a.Task{ID: a2a.NewTaskID(), ContextID: "shared"}
		mustCreateTask(t, bob, review, bobTask)
		resp, err := review.List(bob, &a2a.ListTasksRequest{ContextID: "shared"})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]a2a.TaskID{bobTask.ID}, listIDs(resp.Tasks)); diff != "" || resp.TotalSize != 1 {
			t.Fatalf("bob List (-want +got):\n%s total %d", diff, resp.TotalSize)
		}
		got := mustGetTask(t, alice, review, aliceTask.ID)
		if got.Version != 1 || got.Task.Status.State != a2a.TaskStateSubmitted {
			t.Fatalf("alice's task changed: %+v", got)
		}
	})

	t.Run("same agent, other brand", func(t *testing.T) {
		if _, err := docs.Get(alice, aliceTask.ID); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Fatalf("Get through docs = %v, want ErrTaskNotFound", err)
		}
		if _, err := docs.Update(alice, &taskstore.UpdateRequest{Task: aliceTask}); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Fatalf("Update through docs = %v, want ErrTaskNotFound", err)
		}
		resp, err := docs.List(alice, &a2a.ListTasksRequest{})
		if err != nil || len(resp.Tasks) != 0 || resp.TotalSize != 0 {
			t.Fatalf("List through docs = %+v, %v", resp, err)
		}
	})

	t.Run("TaskOwner sees every task", func(t *testing.T) {
		owner, brand, state, err := db.TaskOwner(t.Context(), aliceTask.ID)
		if err != nil || owner != "alice" || brand != "review" || state != a2a.TaskStateSubmitted {
			t.Fatalf("TaskOwner = %q %q %q %v", owner, brand, state, err)
		}
	})
}

func TestTaskStoreSurvivesRestart(t *testing.T) {
	db, path, clk := newTaskDB(t)
	s := db.TaskStore("review", ownerOf)
	ctx := as(t, "alice")
	done := &a2a.Task{ID: a2a.NewTaskID(), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	running := &a2a.Task{ID: a2a.NewTaskID(), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
		History: []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("review this"))}}
	mustCreateTask(t, ctx, s, done, running)
	done.Status.State = a2a.TaskStateCompleted
	mustUpdateTask(t, ctx, s, done, 1)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db2.Close() })
	db2.Now = clk.Now
	s2 := db2.TaskStore("review", ownerOf)
	if got := mustGetTask(t, ctx, s2, done.ID); got.Version != 2 || got.Task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("after restart: %+v", got)
	}

	// The node died with running still working: start-up fails it.
	n, err := db2.FailInterrupted(t.Context(), "the node stopped during this turn")
	if err != nil || n != 1 {
		t.Fatalf("FailInterrupted = %d, %v", n, err)
	}
	got := mustGetTask(t, ctx, s2, running.ID)
	if got.Version != 2 || got.Task.Status.State != a2a.TaskStateFailed || got.Task.Status.Message.Parts[0].Text() != "the node stopped during this turn" {
		t.Fatalf("interrupted task after restart: %+v", got.Task.Status)
	}
	if len(got.Task.History) != 1 || got.Task.History[0].Parts[0].Text() != "review this" {
		t.Fatalf("history lost: %+v", got.Task.History)
	}
	resp, err := s2.List(ctx, &a2a.ListTasksRequest{})
	if err != nil || resp.TotalSize != 2 || resp.Tasks[0].ID != running.ID {
		t.Fatalf("List after restart = %+v, %v", resp, err)
	}
}

func TestFailInterrupted(t *testing.T) {
	db, _, clk := newTaskDB(t)
	review := db.TaskStore("review", ownerOf)
	docs := db.TaskStore("docs", ownerOf)
	alice, bob := as(t, "alice"), as(t, "bob")

	working := a2a.NewMessageForTask(a2a.MessageRoleAgent, a2a.TaskInfo{TaskID: "w", ContextID: "c"}, a2a.NewTextPart("thinking"))
	tasks := map[a2a.TaskState]*a2a.Task{}
	for _, st := range []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateAuthRequired, a2a.TaskStateInputRequired, a2a.TaskStateCompleted, a2a.TaskStateCanceled} {
		tasks[st] = &a2a.Task{ID: a2a.NewTaskID(), ContextID: "c", Status: a2a.TaskStatus{State: st}}
	}
	tasks[a2a.TaskStateWorking].Status.Message = working
	mustCreateTask(t, alice, review, tasks[a2a.TaskStateSubmitted], tasks[a2a.TaskStateAuthRequired], tasks[a2a.TaskStateCompleted])
	mustCreateTask(t, bob, docs, tasks[a2a.TaskStateWorking], tasks[a2a.TaskStateInputRequired], tasks[a2a.TaskStateCanceled])

	n, err := db.FailInterrupted(t.Context(), "node restarted")
	if err != nil || n != 2 {
		t.Fatalf("FailInterrupted = %d, %v; want 2", n, err)
	}
	now := clk.Now().Add(-time.Second) // the reading FailInterrupted took
	for st, task := range tasks {
		ctx, s := alice, review
		if _, brand, _, _ := db.TaskOwner(t.Context(), task.ID); brand == "docs" {
			ctx, s = bob, docs
		}
		got := mustGetTask(t, ctx, s, task.ID)
		if st != a2a.TaskStateSubmitted && st != a2a.TaskStateWorking {
			if got.Version != 1 || got.Task.Status.State != st {
				t.Errorf("%s task touched: %+v", st, got)
			}
			continue
		}
		status := got.Task.Status
		if got.Version != 2 || status.State != a2a.TaskStateFailed || status.Timestamp == nil || !status.Timestamp.Equal(now) {
			t.Errorf("%s task: version %d status %+v", st, got.Version, status)
		}
		msg := status.Message
		if msg == nil || msg.Role != a2a.MessageRoleAgent || msg.TaskID != task.ID || msg.ContextID != "c" ||
			len(msg.Parts) != 1 || msg.Parts[0].Text() != "node restarted" || msg.ID == "" {
			t.Errorf("%s task status message: %+v", st, msg)
		}
		// As with an SDK status update, the previous status message moves into the history.
		if st == a2a.TaskStateWorking && (len(got.Task.History) != 1 || got.Task.History[0].ID != working.ID) {
			t.Errorf("working task history: %+v", got.Task.History)
		}
		if _, _, state, _ := db.TaskOwner(t.Context(), task.ID); state != a2a.TaskStateFailed {
			t.Errorf("state column = %s", state)
		}
	}
	// The SDK's version check sees the change.
	if _, err := docs.Update(bob, &taskstore.UpdateRequest{Task: tasks[a2a.TaskStateWorking], PrevVersion: 1}); !errors.Is(err, taskstore.ErrConcurrentModification) {
		t.Fatalf("Update with the pre-failure version = %v", err)
	}
	if n, err := db.FailInterrupted(t.Context(), "again"); err != nil || n != 0 {
		t.Fatalf("second FailInterrupted = %d, %v", n, err)
	}
}

func TestRejectAuthRequired(t *testing.T) {
	db, _, _ := newTaskDB(t)
	review := db.TaskStore("review", ownerOf)
	docs := db.TaskStore("docs", ownerOf)
	alice, bob := as(t, "alice"), as(t, "bob")

	gate := func() *a2a.Task {
		id := a2a.NewTaskID()
		return &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{
			State: a2a.TaskStateAuthRequired,
			Message: a2a.NewMessageForTask(a2a.MessageRoleAgent, a2a.TaskInfo{TaskID: id, ContextID: "c"},
				a2a.NewTextPart("ask your owner"), a2a.NewDataPart(map[string]any{"reason": "missing", "scope": "review"})),
		}}
	}
	a1, a2 := gate(), gate()
	aliceDocs, bobReview := gate(), gate()
	aliceWorking := &a2a.Task{ID: a2a.NewTaskID(), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	mustCreateTask(t, alice, review, a1, a2, aliceWorking)
	mustCreateTask(t, alice, docs, aliceDocs)
	mustCreateTask(t, bob, review, bobReview)

	ids, err := db.RejectAuthRequired(t.Context(), "alice", "review", "the owner denied access")
	if err != nil {
		t.Fatal(err)
	}
	want := []a2a.TaskID{a1.ID, a2.ID}
	if want[0] > want[1] {
		want[0], want[1] = want[1], want[0]
	}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Fatalf("rejected (-want +got):\n%s", diff)
	}
	for _, task := range []*a2a.Task{a1, a2} {
		got := mustGetTask(t, alice, review, task.ID)
		st := got.Task.Status
		if got.Version != 2 || st.State != a2a.TaskStateRejected || st.Message.Role != a2a.MessageRoleAgent || st.Message.Parts[0].Text() != "the owner denied access" {
			t.Errorf("rejected task: version %d status %+v", got.Version, st)
		}
		// The AUTH_REQUIRED instructions stay readable in the history, data part included.
		if h := got.Task.History; len(h) != 1 || len(h[0].Parts) != 2 || h[0].Parts[1].Data().(map[string]any)["reason"] != "missing" {
			t.Errorf("history: %+v", got.Task.History)
		}
	}
	for _, c := range []struct {
		ctx  context.Context
		s    taskstore.Store
		task *a2a.Task
	}{{alice, review, aliceWorking}, {alice, docs, aliceDocs}, {bob, review, bobReview}} {
		if got := mustGetTask(t, c.ctx, c.s, c.task.ID); got.Version != 1 || got.Task.Status.State != c.task.Status.State {
			t.Errorf("task %s touched: %+v", c.task.ID, got.Task.Status)
		}
	}
	if ids, err := db.RejectAuthRequired(t.Context(), "alice", "review", "again"); err != nil || len(ids) != 0 {
		t.Fatalf("second RejectAuthRequired = %v, %v", ids, err)
	}
}

// A task with every kind of part and metadata at every level survives the
// store exactly, and what Get returns survives the SDK's gob deep copy and
// JSON encoding.
func TestTaskStoreRoundTrip(t *testing.T) {
	db, _, _ := newTaskDB(t)
	s := db.TaskStore("review", ownerOf)
	ctx := as(t, "alice")
	id := a2a.NewTaskID()
	info := a2a.TaskInfo{TaskID: id, ContextID: "ctx"}
	meta := func(k string) map[string]any {
		return map[string]any{k: "v", "n": 1.5, "b": true, "nil": nil, "list": []any{"a", 2.0, map[string]any{"deep": []any{}}}, "obj": map[string]any{"x": -3.0}}
	}
	ts := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("CET", 3600))
	user := a2a.NewMessageForTask(a2a.MessageRoleUser, info,
		a2a.NewTextPart("please review"),
		&a2a.Part{Content: a2a.Raw([]byte{0, 1, 2, 255}), Filename: "blob.bin", MediaType: "application/octet-stream", Metadata: meta("part")},
		a2a.NewFileURLPart("https://example.com/diff.patch", "text/x-patch"),
		a2a.NewDataPart(map[string]any{"files": []any{"a.go", "b.go"}, "count": 2.0}),
	)
	user.Metadata = meta("message")
	user.Extensions = []string{"https://pact.example/ext/v1"}
	user.ReferenceTasks = []a2a.TaskID{"earlier"}
	task := &a2a.Task{
		ID:        id,
		ContextID: "ctx",
		History:   []*a2a.Message{user},
		Metadata:  meta("task"),
		Artifacts: []*a2a.Artifact{{
			ID: a2a.NewArtifactID(), Name: "receipt", Description: "signed receipt", Metadata: meta("artifact"),
			Extensions: []string{"https://pact.example/ext/v1"},
			Parts:      a2a.ContentParts{a2a.NewDataPart(map[string]any{"jws": "eyJ..", "seq": 7.0}), a2a.NewTextPart("eyJ..")},
		}},
		Status: a2a.TaskStatus{
			State:     a2a.TaskStateCompleted,
			Timestamp: &ts,
			Message:   a2a.NewMessageForTask(a2a.MessageRoleAgent, info, a2a.NewTextPart("done")),
		},
	}
	mustCreateTask(t, ctx, s, task)
	got := mustGetTask(t, ctx, s, id).Task
	if diff := cmp.Diff(task, got); diff != "" {
		t.Fatalf("stored task (-want +got):\n%s", diff)
	}

	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(got); err != nil {
		t.Fatalf("gob encode: %v", err)
	}
	var copied a2a.Task
	if err := gob.NewDecoder(&buf).Decode(&copied); err != nil {
		t.Fatalf("gob decode: %v", err)
	}
	// gob turns an empty []any into nil (the SDK's copies do the same to its own tasks).
	if diff := cmp.Diff(task, &copied, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("gob copy (-want +got):\n%s", diff)
	}
	want, _ := json.Marshal(task)
	have, err := json.Marshal(got)
	if err != nil || !bytes.Equal(want, have) {
		t.Fatalf("JSON differs:\nwant %s\ngot  %s (%v)", want, have, err)
	}

	// Numbers travel as JSON numbers: an int comes back as float64, as it would from any client.
	intTask := &a2a.Task{ID: a2a.NewTaskID(), Metadata: map[string]any{"n": 42}}
	mustCreateTask(t, ctx, s, intTask)
	if n := mustGetTask(t, ctx, s, intTask.ID).Task.Metadata["n"]; n != 42.0 {
		t.Fatalf("metadata int came back as %T %v", n, n)
	}
}

func TestTaskStoreRefusesUndecodableTask(t *testing.T) {
	db, _, _ := newTaskDB(t)
	s := db.TaskStore("review", ownerOf)
	ctx := as(t, "alice")
	// A data part holding null encodes as "data": null, which no longer decodes as a part.
	bad := &a2a.Task{ID: a2a.NewTaskID(), History: []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(nil))}}
	if _, err := s.Create(ctx, bad); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Fatalf("Create = %v, want ErrInvalidParams", err)
	}
	good := &a2a.Task{ID: a2a.NewTaskID()}
	mustCreateTask(t, ctx, s, good)
	bad.ID = good.ID
	if _, err := s.Update(ctx, &taskstore.UpdateRequest{Task: bad}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Fatalf("Update = %v, want ErrInvalidParams", err)
	}
	if resp, err := s.List(ctx, &a2a.ListTasksRequest{}); err != nil || resp.TotalSize != 1 {
		t.Fatalf("List = %+v, %v", resp, err)
	}
	if _, err := s.Create(ctx, nil); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Fatalf("Create(nil) = %v", err)
	}
	// Every other part that encodes but would not decode again, wherever it sits.
	for name, p := range map[string]*a2a.Part{"raw nil": {Content: a2a.Raw(nil)}, "url empty": {Content: a2a.URL("")}, "no content": {}} {
		for where, task := range map[string]*a2a.Task{
			"artifact":       {ID: a2a.NewTaskID(), Artifacts: []*a2a.Artifact{{ID: "a", Parts: a2a.ContentParts{a2a.NewTextPart("ok"), p}}}},
			"status message": {ID: a2a.NewTaskID(), Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Message: a2a.NewMessage(a2a.MessageRoleAgent, p)}},
		} {
			if data, err := json.Marshal(task); err == nil {
				var back a2a.Task
				if json.Unmarshal(data, &back) == nil {
					t.Fatalf("%s in %s: decodes again, the case proves nothing", name, where)
				}
			}
			if _, err := s.Create(ctx, task); !errors.Is(err, a2a.ErrInvalidParams) {
				t.Errorf("%s in %s: Create = %v, want ErrInvalidParams", name, where, err)
			}
		}
	}
}
