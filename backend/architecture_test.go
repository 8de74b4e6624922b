package backend

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestArchitectureDoc holds docs/architecture.md to the code: its "Arrows" are the module's
// imports as `go list` gives them (the packages the binary is built from, desktop included;
// test-only packages left out), and every name it gives in backquotes as `pkg.Name` or
// `pkg.Type.Member` exists in that package.
func TestArchitectureDoc(t *testing.T) {
	doc, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := modulePackages(t)
	t.Run("arrows are go list's imports", func(t *testing.T) {
		documented := docArrows(t, string(doc))
		for short, p := range pkgs {
			if !p.built {
				continue
			}
			got, ok := documented[short]
			if !ok {
				t.Errorf("%s is not in the arrows", short)
				continue
			}
			if want := p.imports; !slices.Equal(got, want) {
				t.Errorf("%s → %s in the doc, but go list says → %s", short, strings.Join(got, ", "), strings.Join(want, ", "))
			}
		}
		for short := range documented {
			if p, ok := pkgs[short]; !ok || !p.built {
				t.Errorf("the arrows list %s, which the binary is not built from", short)
			}
		}
	})
	t.Run("every name exists", func(t *testing.T) {
		for _, m := range docName.FindAllStringSubmatch(string(doc), -1) {
			p, ok := pkgs[m[1]]
			if !ok || fileSuffix[m[2]] {
				continue // a file (policy.json) or not a package's name
			}
			names := p.names(t)
			switch {
			case m[3] == "" && !names.top[m[2]] && !names.anyMethod[m[2]]:
				t.Errorf("`%s.%s`: %s declares no %s, nor a method of that name", m[1], m[2], m[1], m[2])
			case m[3] != "" && !names.members[m[2]+"."+m[3]]:
				t.Errorf("`%s.%s.%s`: %s.%s has no member %s", m[1], m[2], m[3], m[1], m[2], m[3])
			}
		}
	})
}

// docName is a name in backquotes: package, name and, for a type's member, the member.
var docName = regexp.MustCompile("`([a-z][a-z0-9]*)\\.([A-Za-z_][A-Za-z0-9_]*)(?:\\.([A-Za-z_][A-Za-z0-9_]*))?`")

// fileSuffix: `policy.json`, `model.key`, `receipts.head` and the like are files, not names.
var fileSuffix = map[string]bool{"json": true, "key": true, "head": true, "sqlite": true, "go": true, "jsonl": true, "lock": true, "token": true, "md": true}

type modulePackage struct {
	dir     string
	built   bool     // the binary is built from it (desktop included)
	imports []string // the module's packages it imports, by short name, sorted
	parsed  *declared
}

// declared is what a package declares: its top-level names, and its types' members (fields,
// methods, interface methods) as "Type.Member", and its methods by name alone (anyMethod: the
// doc writes a method of a package's one service as `consent.Decide`, `store.CreateFlow`).
type declared struct{ top, members, anyMethod map[string]bool }

// modulePackages lists the module's packages by short name (the last element of the path;
// "main" for the module's root).
func modulePackages(t *testing.T) map[string]*modulePackage {
	const root = "github.com/aether/aether"
	list := func(args ...string) []string {
		out, err := exec.Command("go", append([]string{"list", "-tags", "desktop,production,webkit2_41"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		return strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	short := func(path string) string {
		if path == root {
			return "main"
		}
		return path[strings.LastIndex(path, "/")+1:]
	}
	built := map[string]bool{}
	for _, dep := range list("-deps", "-f", "{{.ImportPath}}", root) {
		built[dep] = true
	}
	pkgs := map[string]*modulePackage{}
	for _, line := range list("-f", `{{.ImportPath}} {{.Dir}} {{join .Imports " "}}`, root+"/...") {
		f := strings.Fields(line)
		p := &modulePackage{dir: f[1], built: built[f[0]]}
		for _, imp := range f[2:] {
			if strings.HasPrefix(imp, root+"/") {
				p.imports = append(p.imports, short(imp))
			}
		}
		slices.Sort(p.imports)
		if other, dup := pkgs[short(f[0])]; dup && (other.built || !p.built) {
			if other.built && p.built {
				t.Fatalf("two packages are called %s: the doc's short names are ambiguous", short(f[0]))
			}
			continue // a test helper of the same name (app/guitest/agent)
		}
		pkgs[short(f[0])] = p
	}
	return pkgs
}

// names parses the package's files (tests left out) once.
func (p *modulePackage) names(t *testing.T) *declared {
	if p.parsed != nil {
		return p.parsed
	}
	d := &declared{top: map[string]bool{}, members: map[string]bool{}, anyMethod: map[string]bool{}}
	files, _ := filepath.Glob(filepath.Join(p.dir, "*.go"))
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			declare(d, decl)
		}
	}
	p.parsed = d
	return d
}

func declare(d *declared, decl ast.Decl) {
	switch decl := decl.(type) {
	case *ast.FuncDecl:
		if decl.Recv == nil {
			d.top[decl.Name.Name] = true
			return
		}
		typ := decl.Recv.List[0].Type
		if star, ok := typ.(*ast.StarExpr); ok {
			typ = star.X
		}
		if idx, ok := typ.(*ast.IndexExpr); ok {
			typ = idx.X
		}
		if id, ok := typ.(*ast.Ident); ok {
			d.members[id.Name+"."+decl.Name.Name] = true
		}
		d.anyMethod[decl.Name.Name] = true
	case *ast.GenDecl:
		for _, spec := range decl.Specs {
			switch s := spec.(type) {
			case *ast.ValueSpec:
				for _, id := range s.Names {
					d.top[id.Name] = true
				}
			case *ast.TypeSpec:
				d.top[s.Name.Name] = true
				var fields *ast.FieldList
				switch ty := s.Type.(type) {
				case *ast.StructType:
					fields = ty.Fields
				case *ast.InterfaceType:
					fields = ty.Methods
				}
				if fields == nil {
					continue
				}
				for _, f := range fields.List {
					for _, id := range f.Names {
						d.members[s.Name.Name+"."+id.Name] = true
					}
					if len(f.Names) == 0 { // embedded: its name
						ty := f.Type
						if star, ok := ty.(*ast.StarExpr); ok {
							ty = star.X
						}
						if sel, ok := ty.(*ast.SelectorExpr); ok {
							d.members[s.Name.Name+"."+sel.Sel.Name] = true
						} else if id, ok := ty.(*ast.Ident); ok {
							d.members[s.Name.Name+"."+id.Name] = true
						}
					}
				}
			}
		}
	}
}

// docArrows reads the code block of the doc's "Arrows": each line `a, b → c, d`, or
// `→ (nothing of the module)`, and `(desktop tag: → app)` for what only the desktop build
// imports.
func docArrows(t *testing.T, doc string) map[string][]string {
	_, after, ok := strings.Cut(doc, "## Arrows")
	if !ok {
		t.Fatal("no Arrows section")
	}
	parts := strings.SplitN(after, "```", 3)
	if len(parts) < 3 {
		t.Fatal("no code block in Arrows")
	}
	out := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(parts[1]), "\n") {
		from, to, ok := strings.Cut(line, "→")
		if !ok {
			t.Fatalf("arrow line without →: %q", line)
		}
		to = strings.NewReplacer("(desktop tag:", ",", "→", "", "(nothing of the module)", "", ")", "").Replace(to)
		var imports []string
		for _, name := range strings.Split(to, ",") {
			if name = strings.TrimSpace(name); name != "" {
				imports = append(imports, name)
			}
		}
		slices.Sort(imports)
		for _, name := range strings.Split(from, ",") {
			name = strings.TrimSpace(name)
			if _, dup := out[name]; dup {
				t.Errorf("%s has two arrow lines", name)
			}
			out[name] = imports
		}
	}
	return out
}
