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
// gateway does not import store; a delegated turn is turn's, below the A2A transport: the
// gateway hands it over, and turn imports neither a2a-go nor net/http.
func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const mod = "github.com/aether/aether/backend/"
	services := map[string]bool{"policy": true, "store": true, "keys": true, "consent": true, "codex": true, "receipts": true, "fsutil": true, "owner": true, "turn": true,
		"codexsetup": true, "datadir": true}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := strings.TrimPrefix(fields[0], mod), fields[1:]
		for _, imp := range imports {
			seen[pkg+" "+imp] = true
			switch {
			case strings.HasPrefix(imp, "github.com/wailsapp/"), strings.HasPrefix(imp, "fyne.io/systray"), strings.HasPrefix(imp, "github.com/godbus/"):
				t.Errorf("%s imports %s: only app/ may use the desktop toolkit", pkg, imp)
			case (strings.HasPrefix(imp, "gorm.io/") || strings.HasPrefix(imp, "github.com/glebarez/")) && pkg != "store":
				t.Errorf("%s imports %s: only store talks to the database", pkg, imp)
			case imp == "net/http" && services[pkg]:
				t.Errorf("%s imports net/http: services are called by the transport packages, they do not serve", pkg)
			case imp == mod+"store" && pkg == "gateway":
				t.Errorf("gateway imports store: it reads tasks through its Config and grants through consent")
			case strings.HasPrefix(imp, "github.com/a2aproject/") && pkg == "turn":
				t.Errorf("turn imports %s: it speaks the node's types; the gateway maps a turn onto A2A", imp)
			case imp == mod+"codex" && pkg == "gateway":
				t.Errorf("gateway imports codex: a turn's Codex is turn's")
			}
		}
	}
	if !seen["gateway "+mod+"turn"] {
		t.Errorf("gateway does not import turn: who runs a delegated turn, if not turn.Service?")
	}
}

// TestOwnerLayers keeps the owner's side to one front door (docs/architecture.md): the desktop
// app reaches consent, the store and the gateway only through owner and node; the CLI never
// opens the database itself (datadir does); admin is a transport over owner alone (besides
// devices, the paired phones' sessions, which it keeps as it keeps its own); and node, the composition
// root, is the only package that imports both transports, gateway and admin.
func TestOwnerLayers(t *testing.T) {
	const root = "github.com/aether/aether/"
	// The desktop tags, so that app is listed as the desktop binary builds it.
	out, err := exec.Command("go", "list", "-tags", "desktop,production,webkit2_41", "-f", `{{.ImportPath}} {{join .Imports " "}}`, root+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	never := map[string]struct {
		imports []string
		why     string
	}{
		"app":         {[]string{"backend/consent", "backend/store", "backend/gateway"}, "the desktop acts through owner.Service"},
		"backend/cli": {[]string{"backend/store"}, "the offline verbs open the data dir through datadir"},
	}
	adminMay := map[string]bool{"backend/owner": true, "backend/fsutil": true, "backend/version": true, "backend/devices": true}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], root)
		seen[pkg] = true
		imports := map[string]bool{}
		for _, imp := range fields[1:] {
			if rel, ok := strings.CutPrefix(imp, root); ok {
				imports[rel] = true
			}
		}
		for _, bad := range never[pkg].imports {
			if imports[bad] {
				t.Errorf("%s imports %s: %s", pkg, bad, never[pkg].why)
			}
		}
		if pkg == "backend/admin" {
			for imp := range imports {
				if !adminMay[imp] {
					t.Errorf("admin imports %s: it is a transport over owner.Service alone", imp)
				}
			}
		}
		if imports["backend/gateway"] && imports["backend/admin"] && pkg != "backend/node" {
			t.Errorf("%s imports both gateway and admin: only node, the composition root, wires them", pkg)
		}
	}
	for pkg := range never {
		if !seen[pkg] {
			t.Errorf("go list did not list %s: the rules above checked nothing", pkg)
		}
	}
}
