package codex

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/aether/aether/backend/confine"
)

// Where a turn's own folders appear inside its view (docs/confinement.md). None is under
// /tmp: codex's sandboxed commands cannot run with CODEX_HOME there.
const (
	viewHome      = "/run/aether/home"  // HOME: the turn's scratch
	viewCodexHome = "/run/aether/codex" // CODEX_HOME: this conversation's codex state
	viewTmp       = "/tmp"              // TMPDIR: the turn's scratch
	viewPath      = "/usr/local/bin:/usr/bin:/bin"
)

// turnDirs are a turn's folders on the host, all under Runner.StateDir.
type turnDirs struct {
	scratch string // removed when the turn ends
	home    string // scratch/home → viewHome
	tmp     string // scratch/tmp → viewTmp
	state   string // StateDir/conversations/<key> → viewCodexHome, kept for resume
}

// prepareTurn makes the turn's scratch and, if new, its conversation's codex state. The
// scratch is the spare one made after the last turn when there is one (its folders cost a
// turn about a millisecond); the turn's end makes the next (doneWith).
func (r *Runner) prepareTurn(conversation string) (turnDirs, error) {
	root, err := r.stateDir()
	if err != nil {
		return turnDirs{}, err
	}
	d := turnDirs{state: filepath.Join(root, "conversations", conversationKey(conversation))}
	if err := os.MkdirAll(d.state, 0o700); err != nil {
		return turnDirs{}, fmt.Errorf("codex state: %w", err)
	}
	select {
	case d.scratch = <-r.spares():
	default:
		if d.scratch, err = newScratch(root); err != nil {
			return turnDirs{}, fmt.Errorf("turn scratch: %w", err)
		}
	}
	d.home, d.tmp = filepath.Join(d.scratch, "home"), filepath.Join(d.scratch, "tmp")
	return d, nil
}

// newScratch makes an empty scratch folder, with its home and tmp, under root's turns/.
func newScratch(root string) (string, error) {
	turns := filepath.Join(root, "turns")
	if err := os.MkdirAll(turns, 0o700); err != nil {
		return "", err
	}
	scratch, err := os.MkdirTemp(turns, "t-")
	if err != nil {
		return "", err
	}
	for _, dir := range []string{"home", "tmp"} {
		if err := os.Mkdir(filepath.Join(scratch, dir), 0o700); err != nil {
			os.RemoveAll(scratch)
			return "", err
		}
	}
	return scratch, nil
}

// spares holds the one scratch folder made ahead of a turn.
func (r *Runner) spares() chan string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.spare == nil {
		r.spare = make(chan string, 1)
	}
	return r.spare
}

// doneWith removes a finished turn's scratch and makes the next turn's spare, once tidy is
// closed (at once if nil), off the turn's path and away from the next turn's start: the
// answer does not wait for the unlinks (Wait does; a scratch a crash left behind goes with
// RemoveLeftovers).
func (r *Runner) doneWith(d turnDirs, tidy <-chan struct{}) {
	r.removing.Add(1)
	go func() {
		defer r.removing.Done()
		if tidy != nil {
			<-tidy
		}
		if err := os.RemoveAll(d.scratch); err != nil {
			r.logger().Warn("could not remove a turn's scratch folder", "dir", d.scratch, "err", err)
		}
		s, err := newScratch(filepath.Dir(filepath.Dir(d.scratch)))
		if err != nil {
			return // the next turn makes its own
		}
		select {
		case r.spares() <- s:
		default: // another turn's end made it first
			os.RemoveAll(s)
		}
	}()
}

// Wait returns once the scratch of every finished turn, and the spare one, is removed.
func (r *Runner) Wait() {
	r.removing.Wait()
	select {
	case s := <-r.spares():
		if err := os.RemoveAll(s); err != nil {
			r.logger().Warn("could not remove a spare scratch folder", "dir", s, "err", err)
		}
	default:
	}
}

// RemoveLeftovers ends the views a node killed mid-turn left running, and removes every
// turn's scratch folder, those a crash left behind; it returns how many processes it ended.
// Such a view was not yet tied to the node's life: one stuck in its setup would wait forever,
// and one let go on by the node's death may still run (docs/threats.md, W20). bwrap and the
// view are known by the turn's scratch folder on their command line. Call it only while no
// turn runs (the node does, at start).
func (r *Runner) RemoveLeftovers() (int, error) {
	root, err := r.stateDir()
	if err != nil {
		return 0, err
	}
	scratch := filepath.Join(root, "turns", "t-")
	ended := 0
	for _, p := range processesWith(func(argv []string) bool { return isView(argv, scratch) }) {
		if p.Kill() == nil { // with the view's first process, the kernel ends the rest of the view
			ended++
		}
	}
	left, err := filepath.Glob(scratch + "*")
	if err != nil {
		return ended, err
	}
	var errs []error
	for _, dir := range left {
		errs = append(errs, os.RemoveAll(dir))
	}
	return ended, errors.Join(errs...)
}

// isView reports whether argv is bwrap's for a view of a turn whose scratch folder starts with
// scratch (or of the confinement probe, whose mark does: Runner.sandbox).
func isView(argv []string, scratch string) bool {
	if filepath.Base(argv[0]) != "bwrap" {
		return false
	}
	for _, arg := range argv[1:] {
		if strings.HasPrefix(arg, scratch) {
			return true
		}
	}
	return false
}

// conversationKey names a conversation's state folder without putting agent names on disk.
func conversationKey(conversation string) string {
	sum := sha256.Sum256([]byte("aether-codex-conversation\x00" + conversation))
	return hex.EncodeToString(sum[:16])
}

// stateDir is Runner.StateDir, else a folder of this user's under the system's temp dir.
func (r *Runner) stateDir() (string, error) {
	if r.StateDir != "" {
		return r.StateDir, nil
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("aether-codex-%d", os.Getuid())), nil
}

// turnView is everything codex and the commands it runs can see: the system, codex's own
// files, the workspace (writable for read_write), the turn's scratch and its conversation's
// codex state. Paths are resolved first, so a symlink cannot widen the view.
func (r *Runner) turnView(bin, workspace string, writable bool, d turnDirs) confine.View {
	v := confine.View{Dir: workspace}
	add := func(src, target string, w bool) {
		v.Mounts = append(v.Mounts, confine.Mount{Source: src, Target: target, Writable: w})
	}
	add(d.tmp, viewTmp, true)
	add(d.home, viewHome, true)
	add(d.state, viewCodexHome, true)
	for _, dir := range codexFiles(bin) {
		add(dir, "", false)
	}
	for _, p := range r.TestMounts {
		add(p, "", true)
	}
	v.Mounts = append(v.Mounts, confine.Mount{Source: workspace, Writable: writable, FD: sandboxWorkspaceFD})
	return v
}

// codexFiles are the folders codex needs besides the system: its binary's own (helpers such
// as codex-code-mode-host sit beside it) and, in the npm package, the resources next to it.
func codexFiles(bin string) []string {
	dir := filepath.Dir(bin)
	out := []string{dir}
	if strings.HasPrefix(dir, "/usr/") {
		out = nil // under /usr, which every view has
	}
	for _, sib := range []string{"codex-resources", "codex-path"} {
		p := filepath.Join(filepath.Dir(dir), sib)
		if st, err := os.Stat(p); err == nil && st.IsDir() && filepath.Base(dir) == "bin" {
			out = append(out, p)
		}
	}
	return out
}

// nativeBinary resolves links and, for the npm launcher (a Node script that also orphans its
// child when killed), finds the native binary of its package.
func nativeBinary(bin string) string {
	if real, err := filepath.EvalSymlinks(bin); err == nil {
		bin = real
	}
	head := make([]byte, 2)
	if f, err := os.Open(bin); err == nil {
		_, _ = f.Read(head)
		f.Close()
	}
	if !bytes.Equal(head, []byte("#!")) {
		return bin
	}
	pkg := filepath.Dir(filepath.Dir(bin)) // …/@openai/codex/bin/codex.js → …/@openai/codex
	var found string
	_ = filepath.WalkDir(pkg, func(p string, e fs.DirEntry, err error) error {
		if err != nil || found != "" {
			return fs.SkipDir
		}
		if !e.IsDir() && e.Name() == "codex" && filepath.Base(filepath.Dir(p)) == "bin" && strings.Contains(p, "/vendor/") {
			found = p
		}
		return nil
	})
	if found == "" {
		return bin
	}
	return found
}
