//go:build unix && !linux

package codex

import (
	"os"
	"syscall"
)

// dieWithParent has no equivalent here: a node killed with SIGKILL leaves codex
// to its own deadline.
func dieWithParent(*syscall.SysProcAttr) {}

func lockThread() func() { return func() {} }

// liveInGroup has no cheap way to list a group here; the caller falls back to kill(-pgid, 0).
func liveInGroup(int) (alive, ok bool) { return false, false }

// processesWith finds nothing: turns are confined on Linux only, so no view is left here.
func processesWith(func(argv []string) bool) []*os.Process { return nil }
