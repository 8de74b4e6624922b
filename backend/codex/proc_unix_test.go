//go:build unix

package codex

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aether/aether/backend/codex/codextest"
)

// assertGone fails if a process of the turn marked by marker (its record path) still runs.
func assertGone(t *testing.T, marker string) {
	t.Helper()
	if pids := codextest.Processes(marker); len(pids) > 0 {
		for _, pid := range pids {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			t.Errorf("process %d still running: %q", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		t.FailNow()
	}
}

func TestDigestFIFO(t *testing.T) {
	ws := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	d, err := digestWorkspace(ws, time.Now()) // must not block on the FIFO
	if err != nil || d.entries["fifo"] == "" {
		t.Fatalf("digest %v %v", d.entries, err)
	}
}
