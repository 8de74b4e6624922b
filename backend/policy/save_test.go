package policy

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The unmanaged sections of this file must come back byte for byte, in their places.
const (
	agentsRaw = `{ "b": 1.0e3, "a": "caf\u00e9",
      "nested": [ {"x": null}, true ] }`
	zetaRaw  = `[1,2,   3]`
	mixedDoc = `{
  "agents": ` + agentsRaw + `,
  "pact": {"publicUrl": "https://aether.example.com", "audience": "https://aether.example.com",
  "brands": [` + goodBrand + `]},
  "zeta": ` + zetaRaw + `,
  "scopes": [{"id": "files:read", "description": "Read files"}],
  "last": "kept"
}
`
)

func topKeys(t *testing.T, data []byte) []string {
	t.Helper()
	root, problems := parseJSON(data)
	if len(problems) > 0 {
		t.Fatalf("saved file does not parse: %v", problems)
	}
	var keys []string
	for _, m := range root.members {
		keys = append(keys, m.key)
	}
	return keys
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSaveRoundTripKeepsOtherSections(t *testing.T) {
	dir := policyDir(t)
	path := writePolicy(t, dir, mixedDoc)
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	edit := p.Clone()
	edit.Pact.Brands[0].Description = "Reviews code <carefully> & kindly."
	edit.Scopes = append(edit.Scopes, Scope{ID: "files:write", Description: "Write files"})
	if err := Save(path, edit); err != nil {
		t.Fatal(err)
	}
	out := readFile(t, path)
	for _, raw := range []string{`"agents": ` + agentsRaw, `"zeta": ` + zetaRaw, `"last": "kept"`} {
		if !strings.Contains(string(out), raw) {
			t.Errorf("saved file lost %q:\n%s", raw, out)
		}
	}
	if got, want := topKeys(t, out), []string{"agents", "pact", "zeta", "scopes", "last"}; !slices.Equal(got, want) {
		t.Errorf("top-level keys = %v, want %v", got, want)
	}
	if !strings.Contains(string(out), "<carefully> & kindly") {
		t.Errorf("HTML characters were escaped:\n%s", out)
	}
	q, err := Load(path)
	if err != nil {
		t.Fatalf("reload: %v\n%s", err, out)
	}
	if q.Pact.Brands[0].Description != "Reviews code <carefully> & kindly." || len(q.Scopes) != 2 {
		t.Errorf("reloaded %+v %+v", q.Pact.Brands[0], q.Scopes)
	}
	if q.Hash() != edit.Hash() {
		t.Error("hash changed through save and load")
	}
	if p.Pact.Brands[0].Description != "Reviews code in my workspace." {
		t.Error("the loaded snapshot changed")
	}

	// Saving what was loaded changes nothing more.
	if err := Save(path, q); err != nil {
		t.Fatal(err)
	}
	if again := readFile(t, path); string(again) != string(out) {
		t.Errorf("second save differs:\n%s\nvs\n%s", again, out)
	}
}

func TestSaveKeepsSectionsWrittenSinceLoad(t *testing.T) {
	dir := policyDir(t)
	path := writePolicy(t, dir, doc(goodBrand))
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	// Another tool adds a section after we loaded.
	writePolicy(t, dir, `{"tool": {"v": 2}, `+doc(goodBrand)[1:])
	if err := Save(path, p); err != nil {
		t.Fatal(err)
	}
	if out := readFile(t, path); !strings.Contains(string(out), `"tool": {"v": 2}`) {
		t.Errorf("the other tool's section was lost:\n%s", out)
	}
}

func TestSaveRefusesInvalidPolicy(t *testing.T) {
	dir := policyDir(t)
	path := writePolicy(t, dir, mixedDoc)
	before := readFile(t, path)
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := p.Clone()
	bad.Pact.Brands[0].Workspace = "../outside"
	bad.Pact.Brands = append(bad.Pact.Brands, bad.Pact.Brands[0])
	err = Save(path, bad)
	wantProblems(t, err,
		Problem{"pact.brands[0].workspace", `contains ".."`},
		Problem{"pact.brands[1].id", "already the id of pact.brands[0]"},
		Problem{"pact.brands[1].scope.id", "already declared"},
		Problem{"pact.brands[1].workspace", `contains ".."`},
	)
	if !strings.HasPrefix(err.Error(), path+": pact.brands[0].workspace") {
		t.Errorf("Error() = %q, want it to name the file", err)
	}
	if after := readFile(t, path); string(after) != string(before) {
		t.Errorf("the old file changed:\n%s", after)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "policy.json" && e.Name() != "workspace" {
			t.Errorf("left behind %s", e.Name())
		}
	}
}

func TestSaveRefusesToLoseABrokenFile(t *testing.T) {
	dir := policyDir(t)
	broken := "{\"other\": {\"a\": 1,}, // hand edit\n \"pact\": {}}"
	path := writePolicy(t, dir, broken)
	err := Save(path, Starter(""))
	if err == nil || !strings.Contains(err.Error(), "fix it by hand first") || !strings.Contains(err.Error(), "trailing comma") {
		t.Fatalf("err = %v", err)
	}
	if got := readFile(t, path); string(got) != broken {
		t.Errorf("the broken file changed:\n%s", got)
	}
}

func TestSaveNewFileAndModes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.json")
	if err := Save(path, Starter("")); err != nil {
		t.Fatal(err)
	}
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if p.Pact.PublicURL != "http://127.0.0.1:8080" || p.Pact.AllowInsecureLocalIssuers || len(p.Pact.Brands) != 0 || p.Scopes != nil {
		t.Errorf("starter reloaded as %+v", p.Pact)
	}
	if got := string(readFile(t, path)); !strings.Contains(got, `"brands": []`) || strings.Contains(got, "scopes") {
		t.Errorf("starter file:\n%s", got)
	}
	if runtime.GOOS == "windows" {
		return
	}
	mode := func() os.FileMode {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm()
	}
	if m := mode(); m != 0o600 {
		t.Errorf("new file mode = %04o, want 0600", m)
	}
	for _, tt := range []struct{ before, after os.FileMode }{{0o640, 0o640}, {0o664, 0o644}, {0o666, 0o644}} {
		if err := os.Chmod(path, tt.before); err != nil {
			t.Fatal(err)
		}
		if err := Save(path, p); err != nil {
			t.Fatal(err)
		}
		if m := mode(); m != tt.after {
			t.Errorf("mode %04o became %04o, want %04o", tt.before, m, tt.after)
		}
	}
}

func TestSaveAddsAndRemovesPact(t *testing.T) {
	dir := policyDir(t)
	path := writePolicy(t, dir, `{"other": true}`)
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if p.Pact != nil {
		t.Fatal("pact from nowhere")
	}
	edit := p.Clone()
	edit.Pact = Starter("").Pact
	if err := Save(path, edit); err != nil {
		t.Fatal(err)
	}
	if got := topKeys(t, readFile(t, path)); !slices.Equal(got, []string{"other", "pact"}) {
		t.Errorf("keys after adding pact = %v", got)
	}
	edit.Pact = nil
	if err := Save(path, edit); err != nil {
		t.Fatal(err)
	}
	if got := topKeys(t, readFile(t, path)); !slices.Equal(got, []string{"other"}) {
		t.Errorf("keys after removing pact = %v", got)
	}
}

func TestSaveThroughSymlink(t *testing.T) {
	dir := policyDir(t)
	real := writePolicy(t, dir, doc(goodBrand))
	link := filepath.Join(dir, "link.json")
	symlink(t, real, link)
	p, err := Load(link)
	if err != nil {
		t.Fatal(err)
	}
	edit := p.Clone()
	edit.Pact.Brands[0].Name = "Review"
	if err := Save(link, edit); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("link replaced: %v %v", fi, err)
	}
	if q, err := Load(real); err != nil || q.Pact.Brands[0].Name != "Review" {
		t.Errorf("target not updated: %v", err)
	}
}

func TestSaveNilPolicy(t *testing.T) {
	err := Save(filepath.Join(t.TempDir(), "policy.json"), nil)
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v", err)
	}
}
