package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aether/aether/backend/datadir"
)

// TestPolicyCheckRefusesUnconfinableWorkspaces: `aether policy check` refuses, with the JSON
// path and exit code 1, a policy whose workspaces a turn could not be confined to
// (docs/threats.md W10–W12, W24), checking against --data-dir or, without it, the node's default.
func TestPolicyCheckRefusesUnconfinableWorkspaces(t *testing.T) {
	root := t.TempDir()
	real, _ := filepath.EvalSymlinks(root)
	t.Setenv("HOME", filepath.Join(root, "home"))
	t.Setenv("XDG_DATA_HOME", filepath.Join(root, "xdg"))
	def, err := datadir.Default()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(root, def)
	if err != nil || strings.HasPrefix(rel, "..") {
		t.Skipf("the default data dir %s is not under the test's HOME or XDG_DATA_HOME", def)
	}
	top := strings.Split(filepath.ToSlash(rel), "/")[0] // xdg on Linux, home on macOS
	for _, d := range []string{"data", "data/codex", "workspace", "other", "home", rel, filepath.Join(rel, "codex")} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	brand := func(id, ws, mode string) string {
		return fmt.Sprintf(`{"id":%q,"name":"Brand %s","description":"A brand.","capability":"review","workspace":%q,"accessMode":%q,"scope":{"id":"%s:%s","description":"Brand %s"}}`,
			id, id, ws, mode, id, mode, id)
	}
	policyPath := filepath.Join(root, "policy.json")
	check := func(t *testing.T, brands []string, extra ...string) (int, string, string) {
		t.Helper()
		pol := `{"pact":{"publicUrl":"http://127.0.0.1:8080","audience":"http://127.0.0.1:8080","allowInsecureLocalIssuers":true,"brands":[` +
			strings.Join(brands, ",") + `]}}`
		if err := os.WriteFile(policyPath, []byte(pol), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		code := Main(append([]string{"policy", "check", "--policy", policyPath}, extra...), Env{Stdout: &out, Stderr: &errb})
		return code, out.String(), errb.String()
	}
	dataDir := filepath.Join(root, "data")

	t.Run("data dir, policy and workspaces side by side", func(t *testing.T) {
		code, out, errs := check(t, []string{brand("review", "workspace", "read_only"), brand("fix", "other", "read_write")}, "--data-dir", dataDir)
		if code != 0 || !strings.Contains(out, "review") || errs != "" {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
		}
	})
	bad := []struct {
		name   string
		brands []string
		flags  []string
		want   string
	}{
		{"W10 workspace is the data dir", []string{brand("review", "data", "read_only")}, []string{"--data-dir", dataDir},
			fmt.Sprintf(`%s: pact.brands[0].workspace: "%s" is the node's data dir (node key, admin token, pact.sqlite); a brand must never offer it`, policyPath, filepath.Join(real, "data"))},
		{"W11 workspace contains the default data dir", []string{brand("review", top, "read_only")}, nil,
			fmt.Sprintf(`%s: pact.brands[0].workspace: this read_only workspace contains the data dir %s (node key, admin token, pact.sqlite)`, policyPath, filepath.Join(real, rel))},
		{"W24 read_only workspace is the data dir's codex folder", []string{brand("review", "data/codex", "read_only")}, []string{"--data-dir", dataDir},
			fmt.Sprintf(`%s: pact.brands[0].workspace: this read_only workspace lies inside the data dir %s, where the node keeps its own files (every agent's Codex sessions and turn scratch in codex/ among them)`, policyPath, filepath.Join(real, "data"))},
		{"W24 read_only workspace is the default data dir's codex folder", []string{brand("review", filepath.Join(rel, "codex"), "read_only")}, nil,
			fmt.Sprintf(`%s: pact.brands[0].workspace: this read_only workspace lies inside the data dir %s`, policyPath, filepath.Join(real, rel))},
		{"W12 read_write overlaps another brand", []string{brand("review", "workspace", "read_only"), brand("fix", "./workspace/", "read_write")}, []string{"--data-dir", dataDir},
			policyPath + `: pact.brands[1].workspace: this read_write workspace ` + filepath.Join(real, "workspace") + ` is the same folder as the workspace of pact.brands[0] ("review"`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := check(t, tt.brands, tt.flags...)
			if code != 1 || out != "" || !strings.Contains(errs, tt.want) {
				t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s\nwant stderr to contain:\n%s", code, out, errs, tt.want)
			}
		})
	}
}
