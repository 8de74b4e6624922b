// Package a2atask holds the node's rules for an A2A task it stores, shared by the store, which
// keeps a2a-go's tasks, and the gateway, which builds a plain send's task for its receipt's
// commit (docs/wire.md, "Plain send"): which tasks may be stored, and what their row says.
package a2atask

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Row is a task as the store keeps it: its JSON (a2a-go's Task, as the wire has it), stored as
// it is, and the columns its row is found by.
type Row struct {
	ID, ContextID, State string
	StatusAt             *time.Time
	Ran                  bool // the task has started a turn (Ran)
	JSON                 []byte
}

// Encode is task's row, its parts checked (CheckParts): a task that would not decode again (a
// data part holding null, say) is refused, since one such row would break every List of its
// owner.
func Encode(task *a2a.Task) (Row, error) {
	if err := CheckParts(task); err != nil {
		return Row{}, fmt.Errorf("encode task %s: %w: %w", task.ID, a2a.ErrInvalidParams, err)
	}
	data, err := json.Marshal(task)
	if err != nil {
		return Row{}, fmt.Errorf("encode task %s: %w", task.ID, err)
	}
	return Row{ID: string(task.ID), ContextID: task.ContextID, State: string(task.Status.State),
		StatusAt: task.Status.Timestamp, Ran: Ran(task), JSON: data}, nil
}

// CheckParts refuses a task with a part that would not decode again (a2a-go reads a part only
// with exactly one of text, raw, data or url): stored, it would make the task unreadable. It
// is the structural form of a decode after the encode, at a fraction of its cost on every
// write.
func CheckParts(task *a2a.Task) error {
	check := func(where string, parts a2a.ContentParts) error {
		for i, p := range parts {
			if p == nil {
				continue
			}
			ok := false
			switch c := p.Content.(type) {
			case a2a.Text:
				ok = true
			case a2a.Raw:
				ok = c != nil
			case a2a.Data:
				ok = c.Value != nil
			case a2a.URL:
				ok = c != ""
			}
			if !ok {
				return fmt.Errorf("%s part %d has no content that would decode (%T)", where, i, p.Content)
			}
		}
		return nil
	}
	msg := func(where string, m *a2a.Message) error {
		if m == nil {
			return nil
		}
		return check(where, m.Parts)
	}
	if err := msg("status message", task.Status.Message); err != nil {
		return err
	}
	for i, m := range task.History {
		if err := msg(fmt.Sprintf("history message %d", i), m); err != nil {
			return err
		}
	}
	for i, a := range task.Artifacts {
		if a != nil {
			if err := check(fmt.Sprintf("artifact %d", i), a.Parts); err != nil {
				return err
			}
		}
	}
	return nil
}

// Ran says whether the task has started a turn, as its row's ran column keeps it: a task
// marked WORKING has, and so has one that carries artifacts (only a turn gives a task any:
// every turn ends with its receipt), such as a plain send's task, stored once, finished.
func Ran(task *a2a.Task) bool {
	return task.Status.State == a2a.TaskStateWorking || len(task.Artifacts) > 0
}
