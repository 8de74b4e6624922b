package gateway

import (
	"context"
	"sync"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
)

// routeTasks is a brand route's task store as a2a-go, the gate and the executor use it. A
// plain send's new task is created by its turn, finished, in the commit of its receipt
// (receipts.Ledger.AppendCreatingTask); the Create that follows when the executor hands it
// over (executor.answerPlain) then finds it stored instead of writing it a second time. A
// task the turn could not store so (it failed first) is created then.
type routeTasks struct {
	taskstore.Store
	created sync.Map // a2a.TaskID → struct{}: created by its turn, answerPlain's Create still to come
}

// createdByTurn marks id as stored by its turn; call it before the task is handed over.
func (r *routeTasks) createdByTurn(id a2a.TaskID) { r.created.Store(id, struct{}{}) }

// Create implements taskstore.Store: a task its turn created is at version 1 already.
func (r *routeTasks) Create(ctx context.Context, task *a2a.Task) (taskstore.TaskVersion, error) {
	if task != nil {
		if _, ok := r.created.LoadAndDelete(task.ID); ok {
			return 1, nil
		}
	}
	return r.Store.Create(ctx, task)
}
