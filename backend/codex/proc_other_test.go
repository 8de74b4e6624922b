//go:build !unix

package codex

import "testing"

// assertGone cannot look at another process here without platform APIs; the runner's
// result was checked already.
func assertGone(t *testing.T, marker string) {
	t.Helper()
	t.Logf("not checking that the processes of %s are gone on this platform", marker)
}
