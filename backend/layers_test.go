// Package backend holds no code of its own; this test keeps its layers apart.
package backend

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayers keeps the rules of the architecture: nothing under backend/
// imports the desktop toolkit; only store imports gorm; service packages do
// not serve HTTP (identity and the reference agent are HTTP clients); the
// gateway does not import store.
func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const mod = "github.com/aether/aether/backend/"
	services := map[string]bool{"policy": true, "store": true, "keys": true, "consent": true, "codex": true, "receipts": true, "fsutil": true}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := strings.TrimPrefix(fields[0], mod), fields[1:]
		for _, imp := range imports {
			switch {
			case strings.HasPrefix(imp, "github.com/wailsapp/"), strings.HasPrefix(imp, "fyne.io/systray"), strings.HasPrefix(imp, "github.com/godbus/"):
				t.Errorf("%s imports %s: only app/ may use the desktop toolkit", pkg, imp)
			case (strings.HasPrefix(imp, "gorm.io/") || strings.HasPrefix(imp, "github.com/glebarez/")) && pkg != "store":
				t.Errorf("%s imports %s: only store talks to the database", pkg, imp)
			case imp == "net/http" && services[pkg]:
				t.Errorf("%s imports net/http: services are called by the transport packages, they do not serve", pkg)
			case imp == mod+"store" && pkg == "gateway":
				t.Errorf("gateway imports store: it reads tasks through its Config and grants through consent")
			}
		}
	}
}
