//go:build linux

package codex

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// sandbox is the first process of a turn's view (bwrap's PID 1 of the view, from its
// --info-fd). bwrap starts the view in a session of its own, so signals to bwrap's process
// group never reach it, and if bwrap dies before the view arms its parent-death signal the
// view would run on unparented: the runner stops the view through this handle instead. The
// pidfd, opened while bwrap still holds the view as its child, keeps a reused PID from ever
// being signalled.
type sandbox struct {
	pid   int
	pidfd int
}

func openSandbox(pid int) *sandbox {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil // already gone
	}
	return &sandbox{pid: pid, pidfd: fd}
}

// interrupt sends SIGINT to the view's session (codex is in its process group), so codex
// can close its session file; kill follows after the grace period.
func (s *sandbox) interrupt() {
	// Not reaped, so its process group id (its PID) is still its own.
	if s != nil && unix.PidfdSendSignal(s.pidfd, 0, nil, 0) == nil {
		_ = syscall.Kill(-s.pid, syscall.SIGINT)
	}
}

// kill ends the view: SIGKILL to its PID 1, which makes the kernel kill every process in it.
func (s *sandbox) kill() {
	if s != nil {
		_ = unix.PidfdSendSignal(s.pidfd, syscall.SIGKILL, nil, 0)
	}
}

func (s *sandbox) close() {
	if s != nil {
		_ = unix.Close(s.pidfd)
	}
}
