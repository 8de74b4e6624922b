package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aether/aether/backend/internal/fuzzseed"
)

func policySeeds() []fuzzseed.Seed {
	s := func(name, data string) fuzzseed.Seed { return fuzzseed.S(name, []byte(data)) }
	example, err := os.ReadFile("../../examples/policy.json")
	if err != nil {
		panic(err)
	}
	twoBrands := `{"pact": {"publicUrl": "https://aether.example.com", "audience": "https://aether.example.com",
  "trustedProxies": ["10.0.0.0/8", "::1"],
  "brands": [` + goodBrand + `, {"id": "fix", "name": "Fixes", "description": "Fixes bugs.",
  "capability": "my-fixer", "instructions": "Fix the bug.\nKeep it small.", "workspace": "other", "accessMode": "read_write",
  "scope": {"id": "fix:read_write", "description": "Fix code"}}]},
  "scopes": [{"id": "extra", "description": "An extra scope"}],
  "editor": {"theme": "dark", "tabs": [1, 2, {"x": null}]}}`
	return []fuzzseed.Seed{
		fuzzseed.S("valid-example", example),
		s("valid-doc", doc(goodBrand)),
		s("valid-two-brands-and-other-sections", twoBrands),
		s("valid-no-pact", `{"scopes": [], "other": "kept"}`),
		s("valid-empty-object", `{}`),
		s("p1-missing-workspace", doc(strings.Replace(goodBrand, `"workspace": "workspace", `, "", 1))),
		s("p2-duplicate-brand", doc(goodBrand, goodBrand)),
		s("p3-duplicate-key", `{"pact": {"publicUrl": "https://a.example", "publicUrl": "https://b.example", "audience": "https://a.example", "brands": []}}`),
		s("p3-case-variant", doc(brandWith(`"accessMode": "read_only"`, `"accessMode": "read_only", "AccessMode": "read_write"`))),
		s("p3-duplicate-in-other-section", `{"editor": {"a": 1, "a": 2}}`),
		s("p3-long-s-variant", doc(brandWith(`"scope": {`, `"`+"\u017f"+`cope": {"id": "x", "description": "y"}, "scope": {`))),
		s("p4-typo", doc(brandWith(`"accessMode"`, `"acessMode"`))),
		s("p5-bad-mode", doc(brandWith(`"read_only"`, `"readonly"`))),
		s("p5-http-public-url", strings.Replace(doc(goodBrand), "https://aether", "http://aether", 2)),
		s("p6-dotdot", doc(brandWith(`"workspace": "workspace"`, `"workspace": "../../etc"`))),
		s("p6-tilde", doc(brandWith(`"workspace": "workspace"`, `"workspace": "~/x"`))),
		s("p6-root", doc(brandWith(`"workspace": "workspace"`, `"workspace": "/"`))),
		s("p8-windows", doc(brandWith(`"workspace": "workspace"`, `"workspace": "C:..\\x"`))),
		s("p8-unc", doc(brandWith(`"workspace": "workspace"`, `"workspace": "\\\\?\\C:\\x"`))),
		s("p9-pact-scope", `{"scopes": [{"id": "pact", "description": "x"}]}`),
		s("p10-bom", "\ufeff"+doc(goodBrand)),
		s("p10-utf16", "\xff\xfe{\x00}\x00"),
		s("p10-comment", "// my policy\n"+doc(goodBrand)),
		s("p10-trailing-comma", `{"scopes": [],}`),
		s("p10-truncated", doc(goodBrand)[:80]),
		s("p10-invalid-utf8", "{\"scopes\": [{\"id\": \"a\xff\", \"description\": \"x\"}]}"),
		s("p10-nul", "{\"scopes\": [{\"id\": \"a\", \"description\": \"x\x00\"}]}"),
		s("p10-deep", `{"other": `+strings.Repeat("[", 100)+strings.Repeat("]", 100)+`}`),
		s("p10-huge-number", `{"pact": {"publicUrl": "https://a.example", "audience": "https://a.example", "allowInsecureLocalIssuers": 1e400, "brands": []}}`),
		s("p10-single-quotes", `{'pact': {}}`),
		s("p10-not-object", `[1, 2]`),
		s("escapes-and-bidi", doc(brandWith(`"Code review"`, `"Code \u202ereview\u0000"`))),
	}
}

// FuzzPolicyParse checks Parse (docs/threats.md, P1–P10): it returns a policy or an *Error with
// at least one problem, never both; a policy it returns validates, and written by Save and read
// back it has the same hash and keeps the sections Aether does not manage byte for byte. Its
// JSON reader agrees with encoding/json on what is JSON, and counts every repeated key.
// README.md, "Fuzzing", says how to run it.
func FuzzPolicyParse(f *testing.F) {
	fuzzseed.Write(f, policySeeds())
	home, base := f.TempDir(), f.TempDir()
	f.Setenv("HOME", home) // no workspace of the machine's own home
	for _, d := range []string{"workspace", "other"} {
		if err := os.Mkdir(filepath.Join(base, d), 0o755); err != nil {
			f.Fatal(err)
		}
	}
	file := filepath.Join(base, "policy.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		checkTree(t, data)
		p, err := Parse(data, base)
		if (p == nil) == (err == nil) {
			t.Fatalf("Parse returned policy %v and error %v", p != nil, err)
		}
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || len(pe.Problems) == 0 {
				t.Fatalf("Parse error %v (%T) is not an *Error with problems", err, err)
			}
			for _, pr := range pe.Problems {
				if pr.Message == "" {
					t.Fatalf("problem at %q without a message", pr.Path)
				}
			}
			return
		}
		if err := Validate(p, base); err != nil {
			t.Fatalf("a parsed policy does not validate: %v", err)
		}
		if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if err := Save(file, p); err != nil {
			if strings.Contains(err.Error(), "more than the") {
				return // re-encoded past MaxSize
			}
			t.Fatalf("Save of a parsed policy: %v", err)
		}
		saved, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		p2, err := Parse(saved, base)
		if err != nil {
			t.Fatalf("what Save wrote does not parse: %v\n%s", err, saved)
		}
		if p.Hash() != p2.Hash() {
			t.Fatalf("hash %s after Save and Parse, was %s\n%s", p2.Hash(), p.Hash(), saved)
		}
		for i, s := range p.sections {
			if s.key == "pact" || s.key == "scopes" {
				continue
			}
			j := sectionIndex(p2.sections, s.key)
			if j != i || !bytes.Equal(p2.sections[j].raw, s.raw) {
				t.Fatalf("section %q not kept as it was", s.key)
			}
		}
	})
}

func sectionIndex(ss []section, key string) int {
	for i, s := range ss {
		if s.key == key {
			return i
		}
	}
	return -1
}

// checkTree compares parseJSON with encoding/json: it reads a document exactly when that is
// UTF-8 JSON nested at most maxDepth deep, reports one problem per repeated key, and its
// members' keys and value spans are what encoding/json sees.
func checkTree(t *testing.T, data []byte) {
	t.Helper()
	root, problems := parseJSON(data)
	depth, dups, ok := jsonShape(data)
	want := ok && utf8.Valid(data) && depth <= maxDepth
	if (root != nil) != want {
		t.Fatalf("parseJSON read it: %v (problems %v); encoding/json: valid %v, UTF-8 %v, depth %d",
			root != nil, problems, ok, utf8.Valid(data), depth)
	}
	if root == nil {
		if len(problems) != 1 {
			t.Fatalf("a refused document has %d problems, want 1", len(problems))
		}
		return
	}
	if len(problems) != dups {
		t.Fatalf("%d duplicate-key problems, encoding/json sees %d repeated keys: %v", len(problems), dups, problems)
	}
	var walk func(n *node)
	walk = func(n *node) {
		if !json.Valid(data[n.start:n.end]) {
			t.Fatalf("value span %d:%d is not JSON: %q", n.start, n.end, data[n.start:n.end])
		}
		for _, m := range n.members {
			var key string
			if err := json.Unmarshal(data[m.keyStart:m.keyEnd], &key); err != nil || key != m.key {
				t.Fatalf("key %q at %d:%d, encoding/json reads %q (%v)", m.key, m.keyStart, m.keyEnd, key, err)
			}
			walk(m.val)
		}
		for _, e := range n.elems {
			walk(e)
		}
		if n.kind == kindString {
			var s string
			if err := json.Unmarshal(data[n.start:n.end], &s); err != nil || s != n.str {
				t.Fatalf("string %q, encoding/json reads %q", n.str, s)
			}
		}
	}
	walk(root)
}

// jsonShape reads data with encoding/json: whether it is one JSON value, how deep it nests,
// and how many object keys repeat an earlier key of their object.
func jsonShape(data []byte) (depth, dups int, ok bool) {
	if !json.Valid(data) {
		return 0, 0, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		obj, wantKey bool
		keys         map[string]bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return depth, dups, true
		}
		if err != nil {
			return depth, dups, false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if key, isStr := tok.(string); isStr && top != nil && top.obj && top.wantKey {
			if top.keys[key] {
				dups++
			}
			top.keys[key] = true
			top.wantKey = false
			continue
		}
		if top != nil && top.obj {
			top.wantKey = true
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			stack = append(stack, &frame{obj: tok == json.Delim('{'), wantKey: true, keys: map[string]bool{}})
			depth = max(depth, len(stack))
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}
