//go:build !unix

package e2e

import "os"

// processGone reports whether no process has that pid any more.
func processGone(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return true
	}
	p.Release()
	return false
}

// killProcess cleans up a fake Codex a failed test left behind.
func killProcess(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}
