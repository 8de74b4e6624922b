package codex

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
	"time"

	"github.com/aether/aether/backend/confine"
	"github.com/aether/aether/backend/work"
)

// maxPendingCommands bounds the commands Codex started and has not yet reported finished that
// the node keeps a start time for; past it, a command's duration is not kept.
const maxPendingCommands = 256

// workLog is what Codex's event stream says the turn did (docs/wire.md, "What the turn did"):
// its commands, with their exit codes, the time the node saw them take and the hash of their
// output, and the file changes it applied. The stream is telemetry, not an audit log: a
// command the sandbox refused leaves no item, so the files the turn changed come from the
// node's own look at the workspace (workFiles).
type workLog struct {
	workspace string
	now       func() time.Time
	commands  work.List[work.Command]
	patches   work.List[work.Patch]
	pending   map[string]pendingCommand // by item id
	order     []string                  // ids of pending, in the order they started
}

type pendingCommand struct {
	line    string
	started time.Time
}

func newWorkLog(workspace string, now func() time.Time) *workLog {
	return &workLog{workspace: workspace, now: now, pending: map[string]pendingCommand{}}
}

// item folds one item event of Codex's into the log.
func (l *workLog) item(phase string, it *item) {
	if l == nil {
		return
	}
	switch {
	case it.Type == "command_execution" && phase == "item.started":
		if _, ok := l.pending[it.ID]; !ok && len(l.pending) < maxPendingCommands {
			l.pending[it.ID] = pendingCommand{line: it.Command, started: l.now()}
			l.order = append(l.order, it.ID)
		}
	case it.Type == "command_execution" && phase == "item.completed":
		c := workCommand(it.Command, it.Status)
		c.Exit = it.ExitCode
		sum := sha256.Sum256([]byte(it.AggregatedOutput))
		c.OutputSHA256 = hex.EncodeToString(sum[:])
		if p, ok := l.pending[it.ID]; ok {
			ms := l.now().Sub(p.started).Milliseconds()
			c.Ms = &ms
			delete(l.pending, it.ID)
		}
		l.commands.Add(c)
	case it.Type == "file_change" && phase == "item.completed":
		for _, ch := range it.Changes {
			l.patches.Add(work.Patch{Path: work.Text(l.relative(ch.Path), work.MaxPathBytes), Kind: work.Text(ch.Kind, 16),
				Status: work.Text(it.Status, 16)})
		}
	}
}

// workCommand is a command as the receipt lists it: its line bounded and escaped, and its hash.
func workCommand(line, status string) work.Command {
	sum := sha256.Sum256([]byte(line))
	return work.Command{Line: work.Text(line, work.MaxCommandBytes), LineSHA256: hex.EncodeToString(sum[:]),
		Status: work.Text(status, 16)}
}

// relative is p relative to the workspace when it is inside it (Codex reports absolute
// paths), else p as Codex gave it.
func (l *workLog) relative(p string) string {
	if !filepath.IsAbs(p) {
		return filepath.ToSlash(p)
	}
	rel, err := filepath.Rel(l.workspace, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return p
	}
	return filepath.ToSlash(rel)
}

// finish is the turn's work: what ran it (meta), the log, then the commands Codex never
// reported finished, and the files the node found changed (files, nil when it did not look).
func (l *workLog) finish(meta work.Work, files *workFiles) *work.Work {
	for _, id := range l.order {
		if p, ok := l.pending[id]; ok {
			l.commands.Add(workCommand(p.line, work.Unfinished))
		}
	}
	w := meta
	w.Commands, w.Patches = l.commands, l.patches
	if files != nil {
		w.Before, w.After, w.Partial, w.Files = files.before, files.after, files.partial, files.list
	}
	return &w
}

// workMeta is what ran the turn: Codex's version, the model and its server as the node set
// them, Codex's sandbox and the node's confinement.
func workMeta(version string, req Request, up Upstream, box confine.Status) work.Work {
	sandbox, _ := sandboxFor(req.AccessMode)
	name := req.Model
	if name == "" {
		name = up.Model
	}
	return work.Work{Codex: work.Text(version, 64), Model: work.Text(name, 128), Upstream: work.Text(up.Host, 256),
		Sandbox: sandbox, Confinement: work.Text(box.Mechanism, 128)}
}
