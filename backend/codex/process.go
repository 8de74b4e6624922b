package codex

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/aether/aether/backend/confine"
)

// The descriptors of cmd.ExtraFiles, after stdin, stdout and stderr: bwrap writes the view's
// first process to the first (--info-fd), and waits for a byte on the second before it starts
// codex (--block-fd).
const (
	sandboxInfoFD  = 3
	sandboxBlockFD = 4
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

// runProcess runs codex in its own process group with the prompt on stdin and calls onLine
// for each stdout line. bwrap makes the view while hold runs; codex itself starts only once
// hold has returned nil (bwrap's --block-fd, sandboxBlockFD), and an error from hold ends the
// view instead, codex never having run in it (outcome.heldBy); runProcess returns after hold
// has. When ctx ends, or stdout goes over the cap, the group gets SIGINT and,
// after the grace period, SIGKILL (S1). Whatever of the group outlives codex is killed (S2).
// stdin, stdout and stderr are pipes of our own rather than exec's copying goroutines, so a
// grandchild that keeps them open cannot hold Run: after codex exits they get a read
// deadline, or are closed.
func (r *Runner) runProcess(ctx context.Context, bin string, args, env []string, dir, prompt string, hold func() error, onLine func([]byte)) procOutcome {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	grace := r.grace()
	ps, err := pipes(5)
	if err != nil {
		return procOutcome{startErr: fmt.Errorf("pipes for codex: %w", err)}
	}
	// The go-ahead's pipe. Its write end is closed last of all, once bwrap and the view are
	// gone: its end would let a view still waiting on it start codex.
	goR, goW := ps[0].r, ps[0].w
	defer goW.Close()
	// The prompt goes in only with the go-ahead. bwrap's view arms its parent-death signal
	// only as it starts codex, and takes the go-ahead pipe's end for a go-ahead: a node that
	// dies before the go-ahead leaves a view that starts codex on its own, and that codex
	// reads no prompt and ends, having done nothing (docs/threats.md, W20).
	inR, inW := ps[1].r, ps[1].w
	defer inW.Close()
	outR, outW := ps[2].r, ps[2].w
	errR, errW := ps[3].r, ps[3].w
	infoR, infoW := ps[4].r, ps[4].w
	// Until bwrap is reaped: its parent-death signal follows this thread.
	unlock := sync.OnceFunc(lockThread())
	defer unlock()

	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = inR
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.ExtraFiles = []*os.File{infoW, goR} // sandboxInfoFD, sandboxBlockFD
	setProcessGroup(cmd)
	startErr := cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	infoW.Close()
	goR.Close()
	if startErr != nil {
		outR.Close()
		errR.Close()
		infoR.Close()
		return procOutcome{startErr: startErr}
	}
	// The view's first process, once bwrap has made it (nil if bwrap ended without one).
	var box *sandbox
	boxKnown := make(chan struct{})
	go func() {
		defer close(boxKnown)
		defer infoR.Close()
		if pid, err := confine.ReadSandboxPID(infoR); err == nil {
			box = openSandbox(pid)
		}
	}()
	// waitBox waits for that answer. A view bwrap made without saying so (killed in between)
	// could hold the pipe's other end for as long as it runs: after the grace period the
	// pipe is closed, which ends the read.
	waitBox := func() {
		select {
		case <-boxKnown:
		case <-time.After(grace):
			infoR.Close()
			<-boxKnown
		}
	}
	stopperDone := make(chan struct{})
	defer func() {
		waitBox()
		<-stopperDone // it may still be signalling the view
		box.close()
	}()
	var heldBy error
	holdDone := make(chan struct{})
	go func() {
		defer close(holdDone)
		if hold != nil {
			heldBy = hold()
		}
		switch {
		case heldBy != nil:
			stop(errHeld)
		case ctx.Err() == nil: // a turn stopped meanwhile is not let start
			if _, err := goW.Write([]byte{1}); err == nil { // fails only when bwrap is gone already
				// Blocks while codex reads, until it exits (inW is closed then); EOF ends it.
				_, _ = io.WriteString(inW, prompt)
			}
		}
		inW.Close()
	}()
	defer func() { <-holdDone }() // what hold set is the caller's once runProcess returns

	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		defer outR.Close() // after the cap, codex's writes fail instead of blocking
		if err := readLines(outR, r.maxOutput(), onLine); errors.Is(err, errOutputCap) {
			stop(errOutputCap)
		}
	}()
	tail := &tailBuffer{max: stderrTailBytes}
	errDone := make(chan struct{})
	go func() {
		defer close(errDone)
		_, _ = io.Copy(tail, errR)
	}()

	exited := make(chan struct{})
	stopped := make(chan error, 1)
	go func() {
		defer close(stopperDone)
		select {
		case <-exited:
			stopped <- nil
			return
		case <-ctx.Done():
		}
		stopped <- context.Cause(ctx)
		if errors.Is(context.Cause(ctx), errHeld) {
			// Codex never ran: no grace, end the view (once bwrap has named it) and bwrap.
			waitBox()
			box.kill()
			_ = killGroup(cmd.Process)
			return
		}
		graceOver := time.After(grace)
		// bwrap is not signalled before it has said which view it made (or ended): killed
		// while making it, it could leave the view running with nobody to stop it.
		select {
		case <-boxKnown:
			box.interrupt()
			_ = interruptGroup(cmd.Process)
			select {
			case <-exited:
				return
			case <-graceOver:
			}
		case <-graceOver: // bwrap never got that far: no more waiting
		}
		_ = killGroup(cmd.Process)
		waitBox()
		box.kill()
	}()

	_ = cmd.Wait() // the exit status is in ProcessState
	unlock()       // what is left may run on any thread, and need not wake this one
	close(exited)
	inW.Close() // a prompt codex did not read all of
	out := procOutcome{state: cmd.ProcessState, stoppedBy: <-stopped}
	if groupAlive(cmd.Process) {
		out.leftovers = true
		_ = killGroup(cmd.Process)
	}
	// bwrap has exited (its info descriptor is closed with it), so the turn is over: its view
	// ends now too. Normally the view is ending by itself; if bwrap died before the view armed
	// its parent-death signal, this is what ends it (S2).
	waitBox()
	box.kill()
	deadline := time.Now().Add(grace)
	_ = outR.SetReadDeadline(deadline)
	_ = errR.SetReadDeadline(deadline)
	<-outDone
	<-errDone
	errR.Close()
	out.stderr = tail.String()
	<-holdDone
	out.heldBy = heldBy
	if out.leftovers {
		r.logger().Warn("codex left processes behind; killed its process group", "pid", cmd.Process.Pid)
	}
	return out
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
