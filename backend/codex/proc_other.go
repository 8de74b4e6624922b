//go:build !unix

package codex

import (
	"os"
	"os/exec"
)

const openNoBlock = 0

// Without process groups only the leader can be stopped; a Windows job object would be
// needed to take its children down too.
func setProcessGroup(*exec.Cmd) {}

func interruptGroup(p *os.Process) error { return p.Kill() }

func killGroup(p *os.Process) error { return p.Kill() }

func groupAlive(*os.Process) bool { return false }

func exitSignal(*os.ProcessState) (int, bool) { return 0, false }

func lockThread() func() { return func() {} }

// processesWith finds nothing: turns are confined on Linux only, so no view is left here.
func processesWith(func(argv []string) bool) []*os.Process { return nil }
