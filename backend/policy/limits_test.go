package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/aether/aether/backend/domain"
)

// brandJSON is a valid brand with its own id and scope.
func brandJSON(id, ws string, mode domain.AccessMode) string {
	q, _ := jsonString(ws)
	return fmt.Sprintf(`{"id": %q, "name": "Brand %s", "description": "A brand.", "capability": "review",
  "workspace": %s, "accessMode": %q, "scope": {"id": "%s:%s", "description": "Brand %s"}}`, id, id, q, mode, id, mode, id)
}

// TestWorkspaceLimits: workspaces that a turn's view would turn into a view of the node's own
// files, the owner's home or another brand's files are refused (docs/threats.md W10–W12).
func TestWorkspaceLimits(t *testing.T) {
	// The e2e layout: data dir, policy.json and workspaces side by side in one folder.
	root := t.TempDir()
	real, _ := filepath.EvalSymlinks(root)
	at := func(parts ...string) string { return filepath.Join(append([]string{real}, parts...)...) }
	home := at("people", "al")
	t.Setenv("HOME", home)
	t.Setenv("USERPROFILE", home)
	mkdirs(t, root, "workspace/sub", "workspace/.aether/node", "other", "other2", "data/inner", "data/codex", "data2", "people/al/proj")
	data := filepath.Join(root, "data")
	const ro, rw = domain.ReadOnly, domain.ReadWrite
	ws := func(i int) string { return fmt.Sprintf("pact.brands[%d].workspace", i) }

	tests := []struct {
		name    string
		dataDir string
		brands  []string
		want    []Problem // none: valid
	}{
		{"data dir, policy and workspace side by side", data,
			[]string{brandJSON("review", "workspace", ro), brandJSON("fix", "other", rw)}, nil},
		{"read_write beside the data dir", data, []string{brandJSON("fix", "workspace", rw)}, nil},
		{"a name that only starts like the data dir is not inside it", data, []string{brandJSON("fix", "data2", rw)}, nil},
		{"read_only brands may share a folder", data,
			[]string{brandJSON("review", "workspace", ro), brandJSON("explain", "./workspace/", ro), brandJSON("deep", "workspace/sub", ro)}, nil},
		{"a name that only starts like another brand's folder does not overlap it", data,
			[]string{brandJSON("fix", "other", rw), brandJSON("d", "other2", ro)}, nil},
		{"a data dir not created yet", filepath.Join(root, "later", "node"), []string{brandJSON("fix", "workspace", rw)}, nil},
		{"absolute in home, data dir elsewhere", data, []string{brandJSON("fix", at("people", "al", "proj"), rw)}, nil},

		{"W10 workspace is the data dir", data, []string{brandJSON("review", "data", ro)},
			[]Problem{{ws(0), fmt.Sprintf(`"%s" is the node's data dir (node key, admin token, pact.sqlite); a brand must never offer it: choose a project folder outside it`, at("data"))}}},
		{"W10 read_write workspace is the data dir", data, []string{brandJSON("fix", "data", rw)},
			[]Problem{{ws(0), "is the node's data dir"}}},
		{"W10 workspace is home", data, []string{brandJSON("review", home, ro)},
			[]Problem{{ws(0), fmt.Sprintf(`"%s" is your home folder; a brand may offer a folder inside it, never the whole of it`, home)}}},
		{"W10 workspace contains home", data, []string{brandJSON("review", "people", ro)},
			[]Problem{{ws(0), fmt.Sprintf("%s contains your home folder %s (~/.ssh, ~/.config, your other projects)", at("people"), home)}}},
		{"W10 workspace is the root", data, []string{brandJSON("review", "/", ro)},
			[]Problem{{ws(0), `"/" is the root of the file system`}}},

		{"W11 read_only workspace contains the data dir", filepath.Join(root, "workspace", ".aether", "node"),
			[]string{brandJSON("review", "workspace", ro)},
			[]Problem{{ws(0), fmt.Sprintf("this read_only workspace contains the data dir %s (node key, admin token, pact.sqlite), and a turn sees all of its workspace, so it could read them; choose a folder that does not", at("workspace", ".aether", "node"))}}},
		{"W11 read_write workspace contains the data dir", filepath.Join(root, "workspace", ".aether", "node"),
			[]string{brandJSON("fix", "workspace", rw)},
			[]Problem{{ws(0), "this read_write workspace contains the data dir " + at("workspace", ".aether", "node") + " (node key, admin token, pact.sqlite), and a turn sees all of its workspace, so it could read and change them"}}},
		{"W11 workspace contains a data dir not created yet", filepath.Join(root, "workspace", "sub", "later", "node"),
			[]string{brandJSON("review", "workspace", ro)},
			[]Problem{{ws(0), "contains the data dir " + at("workspace", "sub", "later", "node")}}},
		{"W11 data dir named through a symlink", filepath.Join(root, "link", ".aether", "node"),
			[]string{brandJSON("review", "workspace", ro)},
			[]Problem{{ws(0), "contains the data dir " + at("workspace", ".aether", "node")}}},
		{"W12 read_write workspace lies inside the data dir", data, []string{brandJSON("fix", "data/inner", rw)},
			[]Problem{{ws(0), "this read_write workspace lies inside the data dir " + at("data") + ", where the node keeps its own files (every agent's Codex sessions and turn scratch in codex/ among them), so a turn could read and change them; choose a folder outside the data dir"}}},
		{"W24 read_only workspace is the data dir's codex folder", data, []string{brandJSON("review", "data/codex", ro)},
			[]Problem{{ws(0), "this read_only workspace lies inside the data dir " + at("data") + ", where the node keeps its own files (every agent's Codex sessions and turn scratch in codex/ among them), so a turn could read them; choose a folder outside the data dir"}}},
		{"W24 read_only workspace inside the data dir", data, []string{brandJSON("review", "data/inner", ro)},
			[]Problem{{ws(0), "this read_only workspace lies inside the data dir " + at("data")}}},

		{"W12 read_write is the same folder as another brand's", data,
			[]string{brandJSON("review", "workspace", ro), brandJSON("fix", "./workspace", rw)},
			[]Problem{
				{ws(0), fmt.Sprintf(`this workspace %s is the same folder as the read_write workspace of pact.brands[1] ("fix", %s), whose turns could change this brand's files`, at("workspace"), at("workspace"))},
				{ws(1), fmt.Sprintf(`this read_write workspace %s is the same folder as the workspace of pact.brands[0] ("review", %s), so its turns could change that brand's files; give each read_write brand a folder of its own`, at("workspace"), at("workspace"))},
			}},
		{"W12 read_write contains another brand's workspace", data,
			[]string{brandJSON("fix", "workspace", rw), brandJSON("review", "workspace/sub", ro)},
			[]Problem{
				{ws(0), "this read_write workspace " + at("workspace") + " contains the workspace of pact.brands[1]"},
				{ws(1), "this workspace " + at("workspace", "sub") + " lies inside the read_write workspace of pact.brands[0]"},
			}},
		{"W12 read_write overlaps another brand", data,
			[]string{brandJSON("review", "other", ro), brandJSON("fix", "workspace/sub", rw), brandJSON("edit", "workspace", rw)},
			[]Problem{
				{ws(1), "this read_write workspace " + at("workspace", "sub") + " lies inside the workspace of pact.brands[2]"},
				{ws(2), "this read_write workspace " + at("workspace") + " contains the workspace of pact.brands[1]"},
			}},
	}
	symlink(t, filepath.Join(root, "workspace"), filepath.Join(root, "link"))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writePolicy(t, root, doc(tt.brands...))
			p, err := Limits{DataDir: tt.dataDir}.Load(path)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if p.Pact.Brands[0].WorkspaceDir == "" {
					t.Error("workspace not resolved")
				}
				return
			}
			wantProblems(t, err, tt.want...)
		})
	}

	t.Run("W11 workspace contains the policy file behind a symlink", func(t *testing.T) {
		conf := t.TempDir()
		proj := at("people", "al", "proj")
		realFile := writePolicy(t, proj, doc(brandJSON("review", proj, ro)))
		symlink(t, realFile, filepath.Join(conf, "policy.json"))
		_, err := Limits{DataDir: data}.Load(filepath.Join(conf, "policy.json"))
		wantProblems(t, err, Problem{ws(0), "this read_only workspace contains the policy file " + realFile + " (reached through a symlink), and a turn sees all of its workspace, so it could read it"})
		// Without Limits the policy file is still known, and still refused.
		_, err = Load(filepath.Join(conf, "policy.json"))
		wantProblems(t, err, Problem{ws(0), "contains the policy file " + realFile})
	})

	t.Run("W12 Save and Validate of a loaded policy apply its Limits", func(t *testing.T) {
		path := writePolicy(t, root, doc(brandJSON("review", "workspace", ro)))
		before := readFile(t, path)
		p, err := Limits{DataDir: data}.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		edit := p.Clone()
		edit.Pact.Brands = append(edit.Pact.Brands, Brand{ID: "fix", Name: "Fix", Description: "Fixes.", Capability: "review",
			Workspace: "data/inner", AccessMode: domain.ReadWrite, Scope: Scope{ID: "fix:read_write", Description: "Fix code"}})
		wantProblems(t, Save(path, edit), Problem{ws(1), "lies inside the data dir " + at("data")})
		wantProblems(t, Validate(edit, root), Problem{ws(1), "lies inside the data dir"})
		edit.Pact.Brands[1].Workspace = "workspace"
		wantProblems(t, Save(path, edit),
			Problem{ws(0), "the read_write workspace of pact.brands[1]"},
			Problem{ws(1), "is the same folder as the workspace of pact.brands[0]"})
		if after := readFile(t, path); string(after) != string(before) {
			t.Errorf("a refused save changed the file:\n%s", after)
		}
		edit.Pact.Brands[1].Workspace = "other"
		if err := Save(path, edit); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("the example policy with the data dir ./.aether/node", func(t *testing.T) {
		dir, _ := filepath.Abs(filepath.Join("..", "..", "examples"))
		data, err := os.ReadFile(filepath.Join(dir, "policy.json"))
		if err != nil {
			t.Fatal(err)
		}
		lim := Limits{DataDir: filepath.Join("..", "..", ".aether", "node")} // the repository root's ./.aether/node
		if _, err := parse(data, dir, "", filepath.Join(dir, "policy.json"), lim, nil); err != nil {
			t.Fatal(err)
		}
	})
}

func TestResolvePath(t *testing.T) {
	dir := t.TempDir()
	real, _ := filepath.EvalSymlinks(dir)
	mkdirs(t, dir, "a")
	symlink(t, filepath.Join(dir, "a"), filepath.Join(dir, "l"))
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{filepath.Join(dir, "a"), filepath.Join(real, "a")},
		{filepath.Join(dir, "l", "x", "y"), filepath.Join(real, "a", "x", "y")},
		{filepath.Join(dir, "a", "..", "a", "x") + string(filepath.Separator), filepath.Join(real, "a", "x")},
	} {
		if got := resolvePath(tt.in); got != tt.want {
			t.Errorf("resolvePath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
