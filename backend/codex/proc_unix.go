//go:build unix

package codex

import (
	"os"
	"os/exec"
	"syscall"
)

// openNoBlock keeps the digest from blocking on a FIFO swapped in after the Lstat.
const openNoBlock = syscall.O_NONBLOCK

// setProcessGroup puts codex in its own process group so that everything it spawns
// (sandbox helpers, shells, stray daemons) can be signalled together.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(cmd.SysProcAttr)
}

// interruptGroup asks the whole group to stop. codex exits 1 promptly on SIGINT (observed
// on 0.169.0), which lets it close its session file; SIGKILL follows after the grace period.
func interruptGroup(p *os.Process) error {
	return syscall.Kill(-p.Pid, syscall.SIGINT)
}

func killGroup(p *os.Process) error {
	return syscall.Kill(-p.Pid, syscall.SIGKILL)
}

// groupAlive reports whether any process of the group still runs after the leader exited.
// Zombies do not count: codex does not reap the git it starts in the background, and an
// orphaned zombie stays in the group until init collects it.
func groupAlive(p *os.Process) bool {
	if syscall.Kill(-p.Pid, 0) != nil {
		return false // the usual case, and cheap: scanning /proc costs milliseconds a turn
	}
	if alive, ok := liveInGroup(p.Pid); ok {
		return alive
	}
	return true
}

// exitSignal returns the signal that ended the process, if one did.
func exitSignal(ps *os.ProcessState) (int, bool) {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return int(ws.Signal()), true
}
