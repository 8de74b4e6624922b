package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBrandWorkspaceLimits: the Brands form (PUT /api/brands/{id}) refuses a workspace a turn
// could not be confined to with 422 and the message on the workspace field, leaving
// policy.json as it was; a hand edit to the same is refused like any broken edit, its problem
// on the Brands page under its JSON path (docs/threats.md W10–W12, W24).
func TestBrandWorkspaceLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	before, err := os.ReadFile(e.policy)
	if err != nil {
		t.Fatal(err)
	}
	// The folder every agent's Codex sessions and turn scratch live in.
	if err := os.MkdirAll(filepath.Join(e.dataDir, "codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	realData, _ := filepath.EvalSymlinks(e.dataDir)
	realWS, _ := filepath.EvalSymlinks(e.workspace)
	put := func(t *testing.T, workspace, mode string) (int, struct {
		Error  string
		Fields []struct{ Field, Message string }
	}) {
		t.Helper()
		brand := map[string]any{"id": "fix", "name": "Fix code", "description": "Fixes code in my workspace.", "capability": "review",
			"workspace": workspace, "accessMode": mode, "scope": map[string]string{"id": "fix:" + mode, "description": "Fix code"}}
		var out struct {
			Error  string
			Fields []struct{ Field, Message string }
		}
		code := e.admin.do("PUT", "/api/brands/fix", brand, &out)
		return code, out
	}
	for _, tt := range []struct {
		name, workspace, mode, want string
	}{
		{"W10 workspace is the data dir", "data", "read_only", `"` + realData + `" is the node's data dir (node key, admin token, pact.sqlite); a brand must never offer it`},
		{"W24 read_only workspace is the data dir's codex folder", "data/codex", "read_only", "this read_only workspace lies inside the data dir " + realData + ", where the node keeps its own files (every agent's Codex sessions and turn scratch in codex/ among them)"},
		{"W12 read_write overlaps another brand", "./workspace", "read_write", "this read_write workspace " + realWS + ` is the same folder as the workspace of pact.brands[0] ("review"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out := put(t, tt.workspace, tt.mode)
			if code != http.StatusUnprocessableEntity || len(out.Fields) != 1 || out.Fields[0].Field != "workspace" || !strings.Contains(out.Fields[0].Message, tt.want) {
				t.Fatalf("PUT: %d %+v; want 422 with the workspace field saying %q", code, out, tt.want)
			}
			if after, _ := os.ReadFile(e.policy); !bytes.Equal(after, before) {
				t.Fatalf("a refused brand changed policy.json:\n%s", after)
			}
		})
	}

	t.Run("W11 hand edit of a workspace that contains the data dir", func(t *testing.T) {
		// By hand, the workspace becomes the whole test folder, which holds the data dir.
		root, _ := json.Marshal(filepath.Dir(e.policy))
		broken := strings.Replace(string(before), `"workspace":"workspace"`, `"workspace":`+string(root), 1)
		if broken == string(before) {
			t.Fatal("the test policy has no workspace to change")
		}
		if err := os.WriteFile(e.policy, []byte(broken), 0o600); err != nil {
			t.Fatal(err)
		}
		var view struct {
			Error *struct {
				Problems []struct{ Path, Message string }
			}
		}
		for deadline := time.Now().Add(waitLimit); ; time.Sleep(100 * time.Millisecond) {
			e.admin.do("GET", "/api/brands", nil, &view)
			if view.Error != nil || time.Now().After(deadline) {
				break
			}
		}
		if view.Error == nil || len(view.Error.Problems) != 1 || view.Error.Problems[0].Path != "pact.brands[0].workspace" ||
			!strings.Contains(view.Error.Problems[0].Message, "contains the data dir "+realData) {
			t.Fatalf("brands page after the hand edit: %+v", view.Error)
		}
		resp, err := http.Get(e.publicURL + "/a2a/review/.well-known/agent-card.json")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("the gateway answered %d on a refused policy, want 503", resp.StatusCode)
		}
	})
}
