package codex

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aether/aether/backend/confine"
)

// The descriptors of cmd.ExtraFiles, after stdin, stdout and stderr: bwrap writes the view's
// first process to the first (--info-fd), waits for a byte on the second before it starts
// codex (--block-fd), and binds the third, the workspace the runner opened, into the view.
const (
	sandboxInfoFD      = 3
	sandboxBlockFD     = 4
	sandboxWorkspaceFD = 5
)

// procOutcome is how one codex process ended.
type procOutcome struct {
	startErr  error
	heldBy    error            // hold's error: the view was ended before codex could start
	state     *os.ProcessState // nil when it did not start
	stoppedBy error            // why the runner stopped it (timeout, cancel, output cap); nil if it ended by itself
	leftovers bool
	stderr    string
}

// errHeld is the cause a view is ended with when hold refused: at once, no grace period,
// since codex never ran in it.
var errHeld = errors.New("the turn was not let start")

// command is what runProcess starts: bwrap's command line, which runs codex in the view.
type command struct {
	bin       string
	args, env []string
	dir       string
	prompt    string   // codex's stdin
	workspace *os.File // bound into the view (sandboxWorkspaceFD)
}

// runProcess runs codex in its own process group with the prompt on stdin and calls onLine
// for each stdout line. bwrap makes the view while hold runs; codex itself starts only once
// hold has returned nil (bwrap's --block-fd, sandboxBlockFD), and an error from hold ends the
// view instead, codex never having run in it (outcome.heldBy); runProcess returns after hold
// has. When ctx ends, or stdout goes over the cap, the group gets SIGINT and,
// after the grace period, SIGKILL (S1). Whatever of the group outlives codex is killed (S2).
// stdin, stdout and stderr are pipes of our own rather than exec's copying goroutines, so a
// grandchild that keeps them open cannot hold Run: after codex exits, a read that has waited
// the grace period for more is ended (drainPipe).
func (r *Runner) runProcess(ctx context.Context, c command, hold func() error, onLine func([]byte)) procOutcome {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	p, err := startProcess(c, r.grace(), stop)
	if err != nil {
		return procOutcome{startErr: err}
	}
	// The go-ahead's write end is closed last of all, once bwrap and the view are gone: its
	// end would let a view still waiting on it start codex.
	defer p.goW.Close()
	defer p.inW.Close()
	defer p.unlock()
	go p.readBox()
	defer func() {
		p.waitBox()
		<-p.stopperDone // it may still be signalling the view
		p.box.close()
	}()
	go p.holdThenGo(ctx, hold, c.prompt)
	defer func() { <-p.holdDone }() // what hold set is the caller's once runProcess returns
	go p.readStdout(r.maxOutput(), onLine)
	go p.readStderr()
	go p.stopper(ctx)
	out := p.reap()
	if out.leftovers {
		r.logger().Warn("codex left processes behind; killed its process group", "pid", p.cmd.Process.Pid)
	}
	return out
}

// proc is one codex process that runProcess runs: bwrap's command, the node's ends of its
// pipes, and what runProcess's goroutines learn, each told by closing a channel.
type proc struct {
	cmd    *exec.Cmd
	grace  time.Duration
	stop   context.CancelCauseFunc
	unlock func() // the thread bwrap was started from: its parent-death signal follows it

	goW   *os.File // the go-ahead (sandboxBlockFD)
	inW   *os.File // the prompt
	outR  *drainPipe
	errR  *drainPipe
	infoR *os.File // the view's first process (sandboxInfoFD)

	box         *sandbox // once boxKnown is closed; nil if bwrap ended without a view
	boxKnown    chan struct{}
	heldBy      error // hold's error, once holdDone is closed
	holdDone    chan struct{}
	tail        *tailBuffer // stderr's, once errDone is closed
	outDone     chan struct{}
	errDone     chan struct{}
	exited      chan struct{}
	stopped     chan error // why stopper stopped codex; nil if it ended by itself
	stopperDone chan struct{}
}

// startProcess starts bwrap on pipes of its own, from a thread locked until p.unlock.
func startProcess(c command, grace time.Duration, stop context.CancelCauseFunc) (*proc, error) {
	ps, err := pipes(5)
	if err != nil {
		return nil, fmt.Errorf("pipes for codex: %w", err)
	}
	goR, goW := ps[0].r, ps[0].w
	// The prompt goes in only with the go-ahead. bwrap's view arms its parent-death signal
	// only as it starts codex, and takes the go-ahead pipe's end for a go-ahead: a node that
	// dies before the go-ahead leaves a view that starts codex on its own, and that codex
	// reads no prompt and ends, having done nothing (docs/threats.md, W20).
	inR, inW := ps[1].r, ps[1].w
	outR, outW := ps[2].r, ps[2].w
	errR, errW := ps[3].r, ps[3].w
	infoR, infoW := ps[4].r, ps[4].w
	// Until bwrap is reaped: its parent-death signal follows this thread.
	unlock := sync.OnceFunc(lockThread())

	cmd := exec.Command(c.bin, c.args...)
	cmd.Dir = c.dir
	cmd.Env = c.env
	cmd.Stdin = inR
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.ExtraFiles = []*os.File{infoW, goR, c.workspace} // sandboxInfoFD, sandboxBlockFD, sandboxWorkspaceFD
	setProcessGroup(cmd)
	startErr := cmd.Start()
	for _, f := range []*os.File{inR, outW, errW, infoW, goR} {
		f.Close()
	}
	if startErr != nil {
		for _, f := range []*os.File{outR, errR, infoR, inW, goW} {
			f.Close()
		}
		unlock()
		return nil, startErr
	}
	return &proc{cmd: cmd, grace: grace, stop: stop, unlock: unlock,
		goW: goW, inW: inW, outR: &drainPipe{f: outR}, errR: &drainPipe{f: errR}, infoR: infoR,
		boxKnown: make(chan struct{}), holdDone: make(chan struct{}), tail: &tailBuffer{max: stderrTailBytes},
		outDone: make(chan struct{}), errDone: make(chan struct{}), exited: make(chan struct{}),
		stopped: make(chan error, 1), stopperDone: make(chan struct{})}, nil
}

// readBox learns the view's first process, once bwrap has made it.
func (p *proc) readBox() {
	defer close(p.boxKnown)
	defer p.infoR.Close()
	if pid, err := confine.ReadSandboxPID(p.infoR); err == nil {
		p.box = openSandbox(pid)
	}
}

// waitBox waits for readBox. A view bwrap made without saying so (killed in between) could
// hold the pipe's other end for as long as it runs: after the grace period the pipe is
// closed, which ends the read.
func (p *proc) waitBox() {
	select {
	case <-p.boxKnown:
	case <-time.After(p.grace):
		p.infoR.Close()
		<-p.boxKnown
	}
}

// holdThenGo runs hold while bwrap makes the view, then gives codex the go-ahead and the
// prompt, or ends the view (errHeld) if hold refused.
func (p *proc) holdThenGo(ctx context.Context, hold func() error, prompt string) {
	defer close(p.holdDone)
	if hold != nil {
		p.heldBy = hold()
	}
	switch {
	case p.heldBy != nil:
		p.stop(errHeld)
	case ctx.Err() == nil: // a turn stopped meanwhile is not let start
		if _, err := p.goW.Write([]byte{1}); err == nil { // fails only when bwrap is gone already
			// Blocks while codex reads, until it exits (inW is closed then); EOF ends it.
			_, _ = io.WriteString(p.inW, prompt)
		}
	}
	p.inW.Close()
}

// readStdout hands each stdout line to onLine, and stops codex once it has written more
// than limit.
func (p *proc) readStdout(limit int64, onLine func([]byte)) {
	defer close(p.outDone)
	defer p.outR.Close() // after the cap, codex's writes fail instead of blocking
	if err := readLines(p.outR, limit, onLine); errors.Is(err, errOutputCap) {
		p.stop(errOutputCap)
	}
}

// readStderr keeps stderr's tail.
func (p *proc) readStderr() {
	defer close(p.errDone)
	_, _ = io.Copy(p.tail, p.errR)
}

// stopper stops codex when ctx ends before it exits: SIGINT, then SIGKILL after the grace
// period (S1); no grace when hold refused, since codex never ran.
func (p *proc) stopper(ctx context.Context) {
	defer close(p.stopperDone)
	select {
	case <-p.exited:
		p.stopped <- nil
		return
	case <-ctx.Done():
	}
	p.stopped <- context.Cause(ctx)
	if errors.Is(context.Cause(ctx), errHeld) {
		// Codex never ran: no grace, end the view (once bwrap has named it) and bwrap.
		p.waitBox()
		p.box.kill()
		_ = killGroup(p.cmd.Process)
		return
	}
	graceOver := time.After(p.grace)
	// bwrap is not signalled before it has said which view it made (or ended): killed
	// while making it, it could leave the view running with nobody to stop it.
	select {
	case <-p.boxKnown:
		p.box.interrupt()
		_ = interruptGroup(p.cmd.Process)
		select {
		case <-p.exited:
			return
		case <-graceOver:
		}
	case <-graceOver: // bwrap never got that far: no more waiting
	}
	_ = killGroup(p.cmd.Process)
	p.waitBox()
	p.box.kill()
}

// reap waits for bwrap to exit, then ends what is left of the turn: the rest of its group,
// its view, and the pipes a grandchild may still hold.
func (p *proc) reap() procOutcome {
	_ = p.cmd.Wait() // the exit status is in ProcessState
	p.unlock()       // what is left may run on any thread, and need not wake this one
	close(p.exited)
	p.inW.Close() // a prompt codex did not read all of
	out := procOutcome{state: p.cmd.ProcessState, stoppedBy: <-p.stopped}
	if groupAlive(p.cmd.Process) {
		out.leftovers = true
		_ = killGroup(p.cmd.Process)
	}
	// bwrap has exited (its info descriptor is closed with it), so the turn is over: its view
	// ends now too. Normally the view is ending by itself; if bwrap died before the view armed
	// its parent-death signal, this is what ends it (S2).
	p.waitBox()
	p.box.kill()
	go p.errR.drain(p.errDone, p.grace)
	p.outR.drain(p.outDone, p.grace)
	<-p.errDone
	p.errR.Close()
	out.stderr = p.tail.String()
	<-p.holdDone
	out.heldBy = p.heldBy
	return out
}

// drainPipe is the node's end of codex's stdout or stderr, its reads watched: once codex has
// exited, the pipe is given up only when a read has waited the grace period for more (a
// writer outlived the view), never while its reader is busy with what it read: the events
// codex wrote before it exited are all read.
type drainPipe struct {
	f       *os.File
	waiting atomic.Int64 // when the read under way began (monoNow); 0: none
}

// monoNow is the time on the monotonic clock since the process began: never 0.
func monoNow() int64 { return int64(time.Since(monoOrigin)) + 1 }

var monoOrigin = time.Now()

func (d *drainPipe) Read(b []byte) (int, error) {
	d.waiting.Store(monoNow())
	defer d.waiting.Store(0)
	return d.f.Read(b)
}

func (d *drainPipe) Close() error { return d.f.Close() }

// drain returns once the pipe's reader is done (done closed), ending a read that has waited
// grace with a read deadline.
func (d *drainPipe) drain(done <-chan struct{}, grace time.Duration) {
	t := time.NewTimer(grace)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		next := grace
		if began := d.waiting.Load(); began != 0 {
			waited := time.Duration(monoNow() - began)
			if waited >= grace {
				_ = d.f.SetReadDeadline(time.Now())
				<-done
				return
			}
			next = grace - waited
		}
		t.Reset(next)
	}
}

type pipe struct{ r, w *os.File }

// pipes makes n pipes, or none: on an error it closes those it made.
func pipes(n int) ([]pipe, error) {
	ps := make([]pipe, 0, n)
	for range n {
		r, w, err := os.Pipe()
		if err != nil {
			for _, p := range ps {
				p.r.Close()
				p.w.Close()
			}
			return nil, err
		}
		ps = append(ps, pipe{r, w})
	}
	return ps, nil
}
