package codex

import (
	"fmt"
	"strings"
	"time"

	"github.com/aether/aether/backend/domain"
)

// workspaceGuard is what the runner checks of a workspace around a turn: a read_only one must
// not change at all (S6); a read_write one must not be left holding what runs on the owner's
// side (W23).
type workspaceGuard struct {
	access domain.AccessMode
	digest workspaceDigest // before the turn
	after  workspaceDigest // once codex has ended (changes)
	// afterErr: the workspace could not be read after the turn.
	afterErr error
	scan     guardedScan // read_write
}

// before looks at the workspace before codex starts: its digest, for the read_only check and
// the receipt's files, and, for read_write, what runs on the owner's side.
func (g *workspaceGuard) before(dir string, now time.Time) (err error) {
	if g.digest, err = digestWorkspace(dir, now); err != nil || g.access == domain.ReadOnly {
		return err
	}
	g.scan, err = scanGuarded(dir)
	return err
}

// changes looks at the workspace again once codex has ended, before anything is moved out of
// it, and returns what the turn changed there (nil when it could not be read).
func (g *workspaceGuard) changes(dir string) *workFiles {
	if g.after, g.afterErr = redigest(dir, g.digest); g.afterErr != nil {
		return nil
	}
	return compareWorkspace(dir, g.digest, g.after)
}

// guardAfter returns the reason the turn is a violation, or "", once changes has looked at the
// workspace. It records the paths in res, and moves what a read_write turn planted out of the
// workspace (quarantine).
func (r *Runner) guardAfter(g *workspaceGuard, dir string, res *Result) string {
	if g.access == domain.ReadOnly {
		after, err := g.after, g.afterErr
		if g.digest.partial || after.partial {
			r.logger().Warn("read-only workspace too large for a full digest; checked the first entries only",
				"workspace", dir, "entries", maxDigestEntries)
		}
		changed := changedPaths(g.digest, after)
		if err != nil {
			changed = append(changed, "(workspace unreadable after the turn: "+err.Error()+")")
		}
		if len(changed) == 0 {
			return ""
		}
		res.WorkspaceChanged = true
		res.ChangedPaths = changed[:min(len(changed), maxChangedPaths)]
		example := changed[len(changed)-1] // "." (the root's mtime) sorts first; a file says more
		return fmt.Sprintf("the read-only workspace changed during the turn (%d paths, e.g. %s)", len(changed), example)
	}
	after, err := scanGuarded(dir)
	if g.scan.partial || after.partial {
		r.logger().Warn("read-write workspace too large to look through; checked the first entries only for what runs on the owner's side",
			"workspace", dir, "entries", maxDigestEntries)
	}
	if err != nil {
		return "the workspace could not be checked after the turn: " + err.Error()
	}
	planted := plantedPaths(g.scan, after)
	if len(planted) == 0 {
		return ""
	}
	res.ChangedPaths = planted[:min(len(planted), maxChangedPaths)]
	done, err := r.quarantine(dir, planted)
	if err != nil {
		done = "could not be moved out: " + err.Error()
	}
	r.logger().Warn("a read-write turn left what runs on the owner's side", "workspace", dir, "paths", planted)
	return fmt.Sprintf("the turn left what would run on the owner's side (%s), %s", strings.Join(res.ChangedPaths, ", "), done)
}
