//go:build !unix

package codex

import "testing"

// assertGone cannot look at another process here without platform APIs; the runner's
// result was checked already.
func assertGone(t *testing.T, pid int) {
	t.Helper()
	t.Logf("not checking that process %d is gone on this platform", pid)
}
