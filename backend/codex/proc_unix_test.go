//go:build unix

package codex

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// assertGone fails if pid is still running. A killed process can stay a zombie until its
// parent (or init, for an orphan) reaps it; that counts as gone.
func assertGone(t *testing.T, pid int) {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err == nil {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		if i := bytes.LastIndexByte(data, ')'); i >= 0 && len(data) > i+2 && data[i+2] == 'Z' {
			return
		}
		t.Fatalf("process %d still running: %s", pid, data)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("process %d still running", pid)
	}
}

func TestDigestFIFO(t *testing.T) {
	ws := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	d, err := digestWorkspace(ws) // must not block on the FIFO
	if err != nil || d.entries["fifo"] == "" {
		t.Fatalf("digest %v %v", d.entries, err)
	}
}
