//go:build unix

package e2e

import (
	"syscall"

	"github.com/aether/aether/backend/codex/codextest"
)

// processGone reports whether every process of the env's turns (their environment names its
// record file) has ended: a confined turn's PIDs mean nothing outside its sandbox.
func processGone(record string) bool { return len(codextest.Processes(record)) == 0 }

// killProcess cleans up the turn processes a failed test left behind.
func killProcess(record string) {
	for _, pid := range codextest.Processes(record) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}
