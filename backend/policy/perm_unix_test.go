//go:build unix

package policy

import (
	"os"
	"testing"
)

func TestPermissions(t *testing.T) {
	dir := policyDir(t)
	path := writePolicy(t, dir, doc(goodBrand))
	t.Run("P12 group-writable policy is refused", func(t *testing.T) {
		if err := os.Chmod(path, 0o664); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		wantProblems(t, err, Problem{"", "is writable by other users (mode 0664); run: chmod go-w " + path})
	})
	t.Run("P12 world-writable policy is refused along with its other problems", func(t *testing.T) {
		bad := writePolicy(t, t.TempDir(), `{"scopes": [{"id": "pact", "description": "x"}]}`)
		if err := os.Chmod(bad, 0o646); err != nil {
			t.Fatal(err)
		}
		_, err := Load(bad)
		wantProblems(t, err,
			Problem{"", "(mode 0646)"},
			Problem{"scopes[0].id", "the node adds the pact scope"})
	})
	t.Run("P12 owner-only policy loads", func(t *testing.T) {
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("P12 policy owned by another user is refused", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to give the file away")
		}
		if err := os.Chown(path, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		defer os.Chown(path, 0, 0)
		_, err := Load(path)
		wantProblems(t, err, Problem{"", "is owned by uid 4242, not by this user (uid 0)"})
	})
}
