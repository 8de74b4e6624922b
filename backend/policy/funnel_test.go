package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pact.funnel is read, checked and written back like the other pact fields (docs/deploy.md).
func TestFunnelField(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.json")
	base := `{"pact":{"publicUrl":"https://node.example","audience":"https://node.example","brands":[]%s}}`
	if err := os.WriteFile(path, []byte(strings.Replace(base, "%s", "", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := Load(path)
	if err != nil || p.Pact.Funnel {
		t.Fatalf("without the field: %v, funnel %v", err, p != nil && p.Pact.Funnel)
	}
	p.Pact.Funnel = true
	if err := Save(path, p); err != nil {
		t.Fatal(err)
	}
	if p, err = Load(path); err != nil || !p.Pact.Funnel {
		t.Fatalf("saved with funnel on, read back: %v, %+v", err, p)
	}
	if _, err := Parse([]byte(strings.Replace(base, "%s", `,"funnel":"yes"`, 1)), dir); err == nil || !strings.Contains(err.Error(), "pact.funnel: must be true or false") {
		t.Fatalf("funnel \"yes\": %v", err)
	}
}
