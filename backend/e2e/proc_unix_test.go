//go:build unix

package e2e

import (
	"errors"
	"syscall"
)

// processGone reports whether no process has that pid any more.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// killProcess cleans up a fake Codex a failed test left behind.
func killProcess(pid int) { syscall.Kill(pid, syscall.SIGKILL) }
