package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/aether/aether/backend/a2atask"
	"github.com/aether/aether/backend/domain"
	"gorm.io/gorm"
)

// List page sizes and history trimming, as the SDK's in-memory store applies them.
const (
	defaultPageSize      = 50
	maxPageSize          = 100
	defaultListedHistory = 100
)

// taskView is one brand's view of the tasks table, scoped to the caller.
type taskView struct {
	db    *DB
	brand string
	owner func(ctx context.Context) (string, error)
}

var _ taskstore.Store = (*taskView)(nil)

// TaskStore returns the a2a-go task store of one brand (each brand has its own
// A2A handler). owner gives the caller's identity key, typically the user name
// the gateway's interceptor put in the a2asrv.CallContext; it must not be nil.
// A caller sees only the tasks it created on this brand: anything else is
// a2a.ErrTaskNotFound, the same answer as for an id that does not exist.
//
// Tasks are stored as JSON, as they travel on the wire: numbers in metadata and
// data parts come back as float64, and empty slices and maps come back as nil.
func (db *DB) TaskStore(brand string, owner func(ctx context.Context) (string, error)) taskstore.Store {
	if owner == nil {
		// A store that cannot tell callers apart would share every task: refuse at wiring time.
		panic("store: TaskStore needs an owner func")
	}
	return &taskView{db: db, brand: brand, owner: owner}
}

// caller refuses an empty identity on every call (the in-memory store only does
// so on List): tasks are private to an identity, and anonymous callers would share one.
func (v *taskView) caller(ctx context.Context) (string, error) {
	name, err := v.owner(ctx)
	if err != nil {
		return "", fmt.Errorf("taskstore auth failed: %w", err)
	}
	if name == "" {
		return "", a2a.ErrUnauthenticated
	}
	return name, nil
}

// taskRow is a row of the tasks table.
type taskRow struct {
	ID        string
	Owner     string
	Brand     string
	State     string
	Version   int64
	Data      []byte
	UpdatedAt int64
}

// Create implements taskstore.Store. The id is unique across owners and brands.
func (v *taskView) Create(ctx context.Context, task *a2a.Task) (taskstore.TaskVersion, error) {
	if task == nil || task.ID == "" {
		return taskstore.TaskVersionMissing, fmt.Errorf("create task: no task id: %w", a2a.ErrInvalidParams)
	}
	owner, err := v.caller(ctx)
	if err != nil {
		return taskstore.TaskVersionMissing, err
	}
	row, err := a2atask.Encode(task)
	if err != nil {
		return taskstore.TaskVersionMissing, err
	}
	err = v.db.write(ctx, func(tx *gorm.DB) error { return insertTask(tx, v.db.Now(), owner, v.brand, row) })
	if err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("create task %s: %w", task.ID, err)
	}
	return 1, nil
}

// insertTask adds task, encoded as data, at version 1. now is read inside the transaction so
// that updated_at follows commit order.
func insertTask(tx *gorm.DB, now time.Time, owner, brand string, row TaskRow) error {
	at := ms(now)
	_, err := exec(tx, `INSERT INTO tasks (id, owner, brand, context_id, state, status_ns, version, data, created_at, updated_at, ran)
		VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)`,
		row.ID, owner, brand, row.ContextID, row.State, statusNS(row.StatusAt), row.JSON, at, at, row.Ran)
	if err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed: tasks.id") {
		return taskstore.ErrTaskAlreadyExists // the id is taken, whoever owns it
	}
	return err
}

// TaskRow is a task to create: a write that creates a task in another's commit
// (Tx.CreateTask) hands it so, encoded and checked where it was built (a2atask.Encode).
type TaskRow = a2atask.Row

// CreateTask creates the task of row, owner's on brand, at version 1. An id taken is
// taskstore.ErrTaskAlreadyExists.
func (t *Tx) CreateTask(owner string, brand domain.BrandID, row TaskRow) error {
	if row.ID == "" {
		return fmt.Errorf("create task: no task id: %w", a2a.ErrInvalidParams)
	}
	if err := insertTask(t.tx, t.db.Now(), owner, string(brand), row); err != nil {
		return fmt.Errorf("create task %s: %w", row.ID, err)
	}
	return nil
}

// Update implements taskstore.Store: PrevVersion must be the stored version
// unless it is taskstore.TaskVersionMissing, which overwrites whatever is stored.
func (v *taskView) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	if req == nil || req.Task == nil || req.Task.ID == "" {
		return taskstore.TaskVersionMissing, fmt.Errorf("update task: no task id: %w", a2a.ErrInvalidParams)
	}
	owner, err := v.caller(ctx)
	if err != nil {
		return taskstore.TaskVersionMissing, err
	}
	task := req.Task
	data, err := encodeTask(task)
	if err != nil {
		return taskstore.TaskVersionMissing, err
	}
	var version int64
	err = v.db.write(ctx, func(tx *gorm.DB) error {
		// One statement on the common path: the version check is in the WHERE clause,
		// and only a miss reads the row to say why.
		var rows []taskRow
		if err := tx.Raw(`UPDATE tasks SET context_id = ?, state = ?, status_ns = ?, version = version + 1, data = ?, updated_at = ?, ran = max(ran, ?)
			WHERE id = ? AND owner = ? AND brand = ? AND (? OR version = ?) RETURNING version`,
			task.ContextID, string(task.Status.State), statusNS(task.Status.Timestamp), data, ms(v.db.Now()), a2atask.Ran(task),
			task.ID, owner, v.brand, req.PrevVersion == taskstore.TaskVersionMissing, int64(req.PrevVersion)).Scan(&rows).Error; err != nil {
			return err
		}
		if len(rows) == 1 {
			version = rows[0].Version
			return nil
		}
		if err := tx.Raw("SELECT version FROM tasks WHERE id = ? AND owner = ? AND brand = ?", task.ID, owner, v.brand).Scan(&rows).Error; err != nil {
			return err
		}
		if len(rows) == 0 {
			return a2a.ErrTaskNotFound
		}
		return taskstore.ErrConcurrentModification
	})
	if err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("update task %s: %w", task.ID, err)
	}
	return taskstore.TaskVersion(version), nil
}

// Get implements taskstore.Store.
func (v *taskView) Get(ctx context.Context, id a2a.TaskID) (*taskstore.StoredTask, error) {
	owner, err := v.caller(ctx)
	if err != nil {
		return nil, err
	}
	var rows []taskRow
	err = v.db.read(ctx).Raw("SELECT version, data FROM tasks WHERE id = ? AND owner = ? AND brand = ?", id, owner, v.brand).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("get task %s: %w", id, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("get task %s: %w", id, a2a.ErrTaskNotFound)
	}
	task, err := decodeTask(rows[0].Data)
	if err != nil {
		return nil, fmt.Errorf("get task %s: %w", id, err)
	}
	return &taskstore.StoredTask{Task: task, Version: taskstore.TaskVersion(rows[0].Version), User: owner}, nil
}

// listFilter is the WHERE clause of owner's tasks on brand that req asks for, and its arguments.
func listFilter(owner, brand string, req *a2a.ListTasksRequest) (string, []any) {
	where := []string{"owner = ?", "brand = ?"}
	args := []any{owner, brand}
	if req.ContextID != "" {
		where, args = append(where, "context_id = ?"), append(args, req.ContextID)
	}
	if req.Status != a2a.TaskStateUnspecified {
		where, args = append(where, "state = ?"), append(args, string(req.Status))
	}
	if req.StatusTimestampAfter != nil {
		// As in the SDK: a task without a status timestamp is kept, and so is one stamped exactly at the cutoff.
		where, args = append(where, "(status_ns IS NULL OR status_ns >= ?)"), append(args, unixNano(*req.StatusTimestampAfter))
	}
	return strings.Join(where, " AND "), args
}

// List implements taskstore.Store: the caller's tasks on this brand, most
// recently updated first, keyset-paginated on (updated_at, id).
func (v *taskView) List(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	owner, err := v.caller(ctx)
	if err != nil {
		return nil, err
	}
	if req == nil {
		req = &a2a.ListTasksRequest{}
	}
	pageSize := req.PageSize
	if pageSize == 0 {
		pageSize = defaultPageSize
	} else if pageSize < 1 || pageSize > maxPageSize {
		return nil, fmt.Errorf("page size must be between 1 and 100 inclusive, got %d: %w", pageSize, a2a.ErrInvalidParams)
	}

	filter, args := listFilter(owner, v.brand, req)
	page, pageArgs := filter, args
	if req.PageToken != "" {
		at, id, err := decodePageToken(req.PageToken)
		if err != nil {
			return nil, err
		}
		page = filter + " AND (updated_at < ? OR (updated_at = ? AND id < ?))"
		pageArgs = append(append([]any{}, args...), at, at, id)
	}

	var total int64
	var rows []taskRow
	// One read transaction, so that the count and the page come from the same snapshot.
	err = v.db.read(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Raw("SELECT count(*) FROM tasks WHERE "+filter, args...).Scan(&total).Error; err != nil {
			return err
		}
		// One row more than the page tells whether another page follows.
		return tx.Raw("SELECT id, version, data, updated_at FROM tasks WHERE "+page+" ORDER BY updated_at DESC, id DESC LIMIT ?",
			append(pageArgs, pageSize+1)...).Scan(&rows).Error
	})
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}

	var next string
	if len(rows) > pageSize {
		rows = rows[:pageSize]
		last := rows[pageSize-1]
		next = encodePageToken(last.UpdatedAt, last.ID)
	}
	historyLength := defaultListedHistory
	if req.HistoryLength != nil {
		historyLength = *req.HistoryLength
	}
	tasks := make([]*a2a.Task, 0, len(rows))
	for _, r := range rows {
		task, err := decodeTask(r.Data)
		if err != nil {
			return nil, fmt.Errorf("list tasks: task %s: %w", r.ID, err)
		}
		if historyLength == 0 {
			task.History = []*a2a.Message{}
		} else if historyLength > 0 && len(task.History) > historyLength {
			task.History = task.History[len(task.History)-historyLength:]
		}
		if !req.IncludeArtifacts {
			task.Artifacts = nil
		}
		tasks = append(tasks, task)
	}
	return &a2a.ListTasksResponse{Tasks: tasks, TotalSize: int(total), PageSize: pageSize, NextPageToken: next}, nil
}

// TaskOwner tells the gateway who owns a task, on which brand, and in which
// state, before it lets a call reach the SDK handler. It sees every task:
// callers must not pass what it returns to another agent.
func (db *DB) TaskOwner(ctx context.Context, id a2a.TaskID) (owner, brand string, state a2a.TaskState, err error) {
	var rows []taskRow
	if err := db.read(ctx).Raw("SELECT owner, brand, state FROM tasks WHERE id = ?", id).Scan(&rows).Error; err != nil {
		return "", "", "", fmt.Errorf("task owner %s: %w", id, err)
	}
	if len(rows) == 0 {
		return "", "", "", fmt.Errorf("task owner %s: %w", id, a2a.ErrTaskNotFound)
	}
	return rows[0].Owner, rows[0].Brand, a2a.TaskState(rows[0].State), nil
}

// FailInterrupted ends every task that was submitted or working when the node
// stopped: nothing runs it any more. Each becomes TASK_STATE_FAILED with reason
// as the status message. It returns how many tasks it failed.
func (db *DB) FailInterrupted(ctx context.Context, reason string) (int, error) {
	var ids []a2a.TaskID
	err := db.write(ctx, func(tx *gorm.DB) error {
		var err error
		// Literal states, as the partial index tasks_unfinished names them (migration 3).
		ids, err = endTasks(tx, db.Now(), a2a.TaskStateFailed, reason,
			"state IN ('"+string(a2a.TaskStateSubmitted)+"', '"+string(a2a.TaskStateWorking)+"')")
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("fail interrupted tasks: %w", err)
	}
	return len(ids), nil
}

// RejectAuthRequired ends owner's tasks on brand that wait in
// TASK_STATE_AUTH_REQUIRED (the owner denied, or the device code expired): each
// becomes TASK_STATE_REJECTED with reason as the status message.
func (db *DB) RejectAuthRequired(ctx context.Context, owner string, brand domain.BrandID, reason string) ([]a2a.TaskID, error) {
	var ids []a2a.TaskID
	err := db.write(ctx, func(tx *gorm.DB) error {
		var err error
		ids, err = endTasks(tx, db.Now(), a2a.TaskStateRejected, reason,
			"owner = ? AND brand = ? AND state = ?", owner, brand, string(a2a.TaskStateAuthRequired))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reject tasks of %s on %s: %w", owner, brand, err)
	}
	return ids, nil
}

// endTasks moves the tasks matching where to state, the way the SDK applies a
// status update: the old status message joins the history, and the new status
// carries an agent message with reason.
func endTasks(tx *gorm.DB, now time.Time, state a2a.TaskState, reason, where string, args ...any) ([]a2a.TaskID, error) {
	var rows []taskRow
	if err := tx.Raw("SELECT id, version, data FROM tasks WHERE "+where+" ORDER BY id", args...).Scan(&rows).Error; err != nil {
		return nil, err
	}
	ids := make([]a2a.TaskID, 0, len(rows))
	for _, r := range rows {
		task, err := decodeTask(r.Data)
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", r.ID, err)
		}
		if task.Status.Message != nil {
			task.History = append(task.History, task.Status.Message)
		}
		ts := now
		task.Status = a2a.TaskStatus{
			State:     state,
			Message:   a2a.NewMessageForTask(a2a.MessageRoleAgent, task, a2a.NewTextPart(reason)),
			Timestamp: &ts,
		}
		data, err := encodeTask(task)
		if err != nil {
			return nil, err
		}
		err = tx.Exec("UPDATE tasks SET state = ?, status_ns = ?, version = ?, data = ?, updated_at = ? WHERE id = ?",
			string(state), statusNS(task.Status.Timestamp), r.Version+1, data, ms(now), r.ID).Error
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", r.ID, err)
		}
		ids = append(ids, a2a.TaskID(r.ID))
	}
	return ids, nil
}

// encodeTask gives the stored form of task (a2atask.Encode).
func encodeTask(task *a2a.Task) ([]byte, error) {
	row, err := a2atask.Encode(task)
	return row.JSON, err
}

func decodeTask(data []byte) (*a2a.Task, error) {
	var task a2a.Task
	if err := json.Unmarshal(data, &task); err != nil {
		return nil, fmt.Errorf("decode task: %w", err)
	}
	return &task, nil
}

// statusNS is the status_ns column: the status timestamp, or NULL.
func statusNS(at *time.Time) *int64 {
	if at == nil {
		return nil
	}
	v := unixNano(*at)
	return &v
}

// unixNano is t.UnixNano clamped to int64, so that far-off times keep their order.
func unixNano(t time.Time) int64 {
	switch {
	case t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// A page token is the (updated_at, id) of the last task of the previous page.
// It needs no secrecy: every query is filtered by the caller anyway.
func encodePageToken(updatedAt int64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(updatedAt, 10) + "_" + id))
}

// decodePageToken answers a2a.ErrParseError for a bad token, as the SDK's in-memory store does.
func decodePageToken(token string) (int64, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return 0, "", fmt.Errorf("invalid page token: %w", a2a.ErrInvalidParams)
	}
	at, id, ok := strings.Cut(string(raw), "_")
	if !ok {
		return 0, "", fmt.Errorf("invalid page token: %w", a2a.ErrInvalidParams)
	}
	v, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("invalid page token: %w", a2a.ErrInvalidParams)
	}
	return v, id, nil
}
