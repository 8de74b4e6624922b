package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// mkdirs creates folders below root.
func mkdirs(t *testing.T, root string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.MkdirAll(filepath.Join(root, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlinks unavailable: %v", err)
	}
}

// withWorkspace is a one-brand policy whose workspace is ws.
func withWorkspace(ws string) string {
	q, _ := jsonString(ws)
	return doc(brandWith(`"workspace": "workspace"`, `"workspace": `+q))
}

func jsonString(s string) (string, error) {
	b, err := encodeIndented(s)
	return string(b), err
}

func TestWorkspaceRules(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("USERPROFILE", home)
	realHome, _ := filepath.EvalSymlinks(home)
	mkdirs(t, home, "projects/app")

	dir := policyDir(t)
	realDir, _ := filepath.EvalSymlinks(dir)
	outside := t.TempDir()
	mkdirs(t, dir, "sub/inner", "real")
	mkdirs(t, outside, "secret")
	if err := os.WriteFile(filepath.Join(dir, "afile"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	symlink(t, outside, filepath.Join(dir, "escape"))
	symlink(t, filepath.Join(dir, "real"), filepath.Join(dir, "inlink"))
	symlink(t, filepath.Join(home, "projects"), filepath.Join(home, "plink"))

	ok := []struct {
		name, ws, want string
	}{
		{"relative", "workspace", filepath.Join(realDir, "workspace")},
		{"relative with ./ and trailing slash", "./sub/inner/", filepath.Join(realDir, "sub", "inner")},
		{"P7 symlink that stays inside", "inlink", filepath.Join(realDir, "real")},
		{"absolute inside the policy folder", filepath.Join(realDir, "workspace"), filepath.Join(realDir, "workspace")},
		{"absolute inside home", filepath.Join(realHome, "projects", "app"), filepath.Join(realHome, "projects", "app")},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			p, err := parseIn(t, dir, withWorkspace(tt.ws))
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Pact.Brands[0].WorkspaceDir; got != tt.want {
				t.Errorf("WorkspaceDir = %q, want %q", got, tt.want)
			}
		})
	}

	const at = "pact.brands[0].workspace"
	bad := []struct {
		name, ws, want string
	}{
		{"P6 dot dot", "../../etc", `contains "..": name the folder directly`},
		{"P6 dot dot that would stay inside", "sub/../workspace", `contains ".."`},
		{"P6 tilde", "~/..", "starts with ~, which is not expanded"},
		{"P6 absolute outside allowed roots", filepath.Join(outside, "secret"), "is outside the allowed roots (the policy's folder " + realDir + " and your home folder " + realHome + ")"},
		{"W10 absolute root", "/", `"/" is the root of the file system; a brand may offer a folder, never the whole disk`},
		{"W10 home itself", realHome, fmt.Sprintf(`"%s" is your home folder; a brand may offer a folder inside it, never the whole of it`, realHome)},
		{"P6 the policy folder itself", ".", "is the policy's own folder; use a subfolder"},
		{"P6 absolute policy folder", realDir, "is the policy's own folder"},
		{"P6 missing folder", "nope", "folder " + filepath.Join(realDir, "nope") + " does not exist; create it or correct the path"},
		{"P6 a file", "afile", "is a file, not a folder"},
		{"P7 workspace is a symlink to outside", "escape", "leads through a symlink to " + outside},
		{"P7 workspace path contains a symlink to outside", "escape/secret", "leads through a symlink to " + filepath.Join(outside, "secret")},
		{"P7 absolute path through a symlink", filepath.Join(realHome, "plink", "app"), "goes through a symlink (it resolves to " + filepath.Join(realHome, "projects", "app") + ")"},
		{"P8 UNC", `\\server\share`, "is a UNC or device path"},
		{"P8 device namespace", `\\?\C:\x`, "is a UNC or device path"},
		{"P8 forward-slash UNC", "//server/share", "is a UNC or device path"},
		{"P8 drive relative", `C:..\x`, "is relative to the current folder of drive C:"},
		{"P8 reserved name", "CON", `"CON" is a reserved device name on Windows`},
		{"P8 reserved name with extension", "sub/nul.txt", `"nul.txt" is a reserved device name`},
		{"P8 alternate data stream", "file.txt:stream", `contains ":", which on Windows names an alternate data stream`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseIn(t, dir, withWorkspace(tt.ws))
			wantProblems(t, err, Problem{at, tt.want})
		})
	}
}

func TestPortableProblem(t *testing.T) {
	tests := []struct {
		ws      string
		windows bool
		want    string // "" means accepted
	}{
		{`C:..\x`, true, "relative to the current folder of drive C:"},
		{`C:foo`, false, "relative to the current folder of drive C:"},
		{`\\?\C:\work`, true, "UNC or device path"},
		{`\\.\PhysicalDrive0`, true, "UNC or device path"},
		{`\\server\share\repo`, true, "UNC or device path"},
		{`C:\work\repo`, true, ""},
		{`C:/work/repo`, true, ""},
		{`C:\work\repo`, false, "is a Windows drive path"},
		{`C:\work\file.txt:stream`, true, `contains ":"`},
		{`work\repo`, true, ""},
		{`work\repo`, false, `contains \; separate folders with /`},
		{`\work`, true, "starts at the root of whatever drive is current"},
		{`/work`, true, "starts at the root of whatever drive is current"},
		{`/work`, false, ""},
		{`work/con`, true, `"con" is a reserved device name`},
		{`work/Com1.log`, false, `"Com1.log" is a reserved device name`},
		{`work/lpt¹`, false, `"lpt¹" is a reserved device name`},
		{`work/console`, false, ""},
		{`work/dir.`, false, "ends with a dot or a space"},
		{`work/dir /x`, true, "ends with a dot or a space"},
		{`work/a?b`, false, `contains '?'`},
		{"work/\x01", false, "control character"},
		{`..`, false, `contains ".."`},
		{`C:\work\..\..`, true, `contains ".."`},
	}
	for _, tt := range tests {
		t.Run("P8 "+tt.ws, func(t *testing.T) {
			got := portableProblem(tt.ws, tt.windows)
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("portableProblem(%q, windows=%v) = %q, want %q", tt.ws, tt.windows, got, tt.want)
			}
		})
	}
}

func TestSameWorkspace(t *testing.T) {
	t.Run("P8 case-folded duplicate paths", func(t *testing.T) {
		dir := policyDir(t)
		two := brandWith(`"id": "review"`, `"id": "fix"`)
		two = strings.Replace(two, `"workspace": "workspace"`, `"workspace": "./workspace/"`, 1)
		two = strings.Replace(two, `"review:read_only"`, `"fix:read_write"`, 1)
		p, err := parseIn(t, dir, doc(goodBrand, two))
		if err != nil {
			t.Fatal(err)
		}
		a, b := p.Pact.Brands[0], p.Pact.Brands[1]
		if a.WorkspaceKey() != b.WorkspaceKey() {
			t.Errorf("keys differ for one folder: %q vs %q", a.WorkspaceKey(), b.WorkspaceKey())
		}
		folded := pathKey("/Work/Repo") == pathKey("/work/repo")
		if want := runtime.GOOS == "windows" || runtime.GOOS == "darwin"; folded != want {
			t.Errorf("case folding = %v on %s, want %v", folded, runtime.GOOS, want)
		}
	})
}

func TestRecheckWorkspace(t *testing.T) {
	dir := policyDir(t)
	outside := t.TempDir()
	p, err := parseIn(t, dir, doc(goodBrand))
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.RecheckWorkspace("review")
	if err != nil || got != p.Pact.Brands[0].WorkspaceDir {
		t.Fatalf("RecheckWorkspace = %q, %v", got, err)
	}
	t.Run("P7 folder swapped for a symlink after load", func(t *testing.T) {
		ws := filepath.Join(dir, "workspace")
		if err := os.Remove(ws); err != nil {
			t.Fatal(err)
		}
		symlink(t, outside, ws)
		_, err := p.RecheckWorkspace("review")
		if err == nil || !strings.Contains(err.Error(), "leads through a symlink to "+outside) {
			t.Errorf("err = %v, want the escape reported", err)
		}
	})
	t.Run("P7 folder swapped for a symlink that stays inside", func(t *testing.T) {
		ws := filepath.Join(dir, "workspace")
		mkdirs(t, dir, "elsewhere")
		if err := os.Remove(ws); err != nil {
			t.Fatal(err)
		}
		symlink(t, filepath.Join(dir, "elsewhere"), ws)
		_, err := p.RecheckWorkspace("review")
		if err == nil || !strings.Contains(err.Error(), "now resolves to") {
			t.Errorf("err = %v, want the move reported", err)
		}
	})
	if _, err := p.RecheckWorkspace("nope"); err == nil {
		t.Error("RecheckWorkspace of an unknown brand succeeded")
	}
}
