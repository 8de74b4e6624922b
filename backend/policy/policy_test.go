package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether/aether/backend/domain"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const goodBrand = `{"id": "review", "name": "Code review", "description": "Reviews code in my workspace.",
  "capability": "review", "workspace": "workspace", "accessMode": "read_only",
  "scope": {"id": "review:read_only", "description": "Review code (read only)"}}`

// brandWith is goodBrand with one piece of text replaced.
func brandWith(old, new string) string {
	if !strings.Contains(goodBrand, old) {
		panic("brandWith: " + old + " not in goodBrand")
	}
	return strings.Replace(goodBrand, old, new, 1)
}

// doc is a policy with the given brands behind https://aether.example.com.
func doc(brands ...string) string {
	return `{"pact": {"publicUrl": "https://aether.example.com", "audience": "https://aether.example.com",
  "brands": [` + strings.Join(brands, ",\n") + `]}}`
}

// policyDir makes a folder holding a "workspace" folder, the layout doc expects.
func policyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writePolicy writes data as dir/policy.json with mode 0600 and returns its path.
func writePolicy(t *testing.T, dir, data string) string {
	t.Helper()
	path := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// wantProblems checks that err is an *Error with exactly the given paths, in order, and that
// each message contains the wanted text.
func wantProblems(t *testing.T, err error, want ...Problem) {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("error = %v (%T), want *Error", err, err)
	}
	var gotPaths, wantPaths []string
	for _, p := range pe.Problems {
		gotPaths = append(gotPaths, p.Path)
	}
	for _, p := range want {
		wantPaths = append(wantPaths, p.Path)
	}
	if diff := cmp.Diff(wantPaths, gotPaths); diff != "" {
		t.Fatalf("problem paths (-want +got):\n%s\nerror:\n%v", diff, err)
	}
	for i, w := range want {
		if !strings.Contains(pe.Problems[i].Message, w.Message) {
			t.Errorf("problem %d at %q:\n got  %q\n want it to contain %q", i, w.Path, pe.Problems[i].Message, w.Message)
		}
	}
}

func parseIn(t *testing.T, dir, data string) (*Policy, error) {
	t.Helper()
	return Parse([]byte(data), dir)
}

func TestParseValid(t *testing.T) {
	dir := policyDir(t)
	p, err := parseIn(t, dir, doc(goodBrand))
	if err != nil {
		t.Fatal(err)
	}
	realDir, _ := filepath.EvalSymlinks(dir)
	want := &Policy{
		Pact: &Pact{
			PublicURL: "https://aether.example.com",
			Audience:  "https://aether.example.com",
			Brands: []Brand{{
				ID: "review", Name: "Code review", Description: "Reviews code in my workspace.",
				Capability: "review", Workspace: "workspace", AccessMode: domain.ReadOnly,
				Scope:        Scope{ID: "review:read_only", Description: "Review code (read only)"},
				WorkspaceDir: filepath.Join(realDir, "workspace"),
			}},
		},
		BaseDir: dir,
	}
	if diff := cmp.Diff(want, p, cmpopts.IgnoreUnexported(Policy{})); diff != "" {
		t.Errorf("policy (-want +got):\n%s", diff)
	}
	b, ok := p.Brand("review")
	if !ok || b.InstructionText() != builtins["review"] {
		t.Errorf("Brand(review) = %+v, %v; want the built-in review instructions", b, ok)
	}
	if _, ok := p.Brand("nope"); ok {
		t.Error("Brand(nope) found")
	}
}

func TestExamplePolicy(t *testing.T) {
	dir := filepath.Join("..", "..", "examples")
	data, err := os.ReadFile(filepath.Join(dir, "policy.json"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(data, dir)
	if err != nil {
		t.Fatal(err)
	}
	b, ok := p.Brand("review")
	if !ok || b.AccessMode != domain.ReadOnly || b.Scope.ID != "review:read_only" || b.Capability != "review" {
		t.Fatalf("example brand = %+v", b)
	}
	if _, err := os.Stat(filepath.Join(b.WorkspaceDir, "README.md")); err != nil {
		t.Errorf("example workspace: %v", err)
	}
	if !p.Pact.AllowInsecureLocalIssuers || p.Pact.PublicURL != "http://127.0.0.1:8080" {
		t.Errorf("example pact = %+v; want a local http gateway", p.Pact)
	}
}

func TestProblems(t *testing.T) {
	tests := []struct {
		name string
		data string
		want []Problem
	}{
		// P1: missing required fields.
		{"P1 missing brand id", doc(brandWith(`"id": "review", `, "")),
			[]Problem{{"pact.brands[0].id", `is required: a short lowercase name such as "review"`}}},
		{"P1 missing workspace", doc(brandWith(`"workspace": "workspace", `, "")),
			[]Problem{{"pact.brands[0].workspace", "is required: the folder Codex works in"}}},
		{"P1 missing access mode", doc(brandWith(`, "accessMode": "read_only"`, "")),
			[]Problem{{"pact.brands[0].accessMode", "is required: read_only or read_write"}}},
		{"P1 missing scope", doc(brandWith(`,
  "scope": {"id": "review:read_only", "description": "Review code (read only)"}`, "")),
			[]Problem{{"pact.brands[0].scope", "is required"}}},
		{"P1 missing name, description and capability together", doc(`{"id": "review", "workspace": "workspace", "accessMode": "read_only",
  "scope": {"id": "review:read_only", "description": "Review code (read only)"}}`),
			[]Problem{
				{"pact.brands[0].name", "is required"},
				{"pact.brands[0].description", "is required"},
				{"pact.brands[0].capability", "is required: a built-in capability (explain, review)"},
			}},
		{"P1 missing publicUrl and audience", `{"pact": {"brands": []}}`,
			[]Problem{
				{"pact.publicUrl", "is required: the URL agents use to reach this node"},
				{"pact.audience", "is required"},
			}},
		{"P1 empty brand object", doc(`{}`),
			[]Problem{
				{"pact.brands[0].id", "is required"},
				{"pact.brands[0].name", "is required"},
				{"pact.brands[0].description", "is required"},
				{"pact.brands[0].capability", "is required"},
				{"pact.brands[0].accessMode", "is required"},
				{"pact.brands[0].scope", "is required"},
				{"pact.brands[0].workspace", "is required"},
			}},

		// P2: duplicate brand ids.
		{"P2 duplicate brand ids", doc(goodBrand, brandWith(`"review:read_only"`, `"review2:read_only"`)),
			[]Problem{{"pact.brands[1].id", `"review" is already the id of pact.brands[0]; brand ids must be unique`}}},

		// P3: duplicate keys and case variants.
		{"P3 duplicate key in brand", doc(brandWith(`"id": "review", `, `"id": "review", "id": "other", `)),
			[]Problem{{"pact.brands[0].id", `duplicate key "id" (first at line 2, column 15); keep only one`}}},
		{"P3 case variant Mode", doc(brandWith(`"accessMode": "read_only"`, `"accessMode": "read_only", "AccessMode": "read_write"`)),
			[]Problem{{"pact.brands[0].AccessMode", `"AccessMode" differs from "accessMode" only in case; JSON keys are case-sensitive, keep only "accessMode"`}}},
		{"P3 case variant before the real key", doc(brandWith(`"accessMode": "read_only"`, `"ACCESSMODE": "read_write", "accessMode": "read_only"`)),
			[]Problem{{"pact.brands[0].ACCESSMODE", `differs from "accessMode" only in case`}}},
		{"P3 top-level pact twice", `{"pact": {}, "pact": {}}`,
			[]Problem{
				{"pact", "duplicate key \"pact\""},
				{"pact.publicUrl", "is required"},
				{"pact.audience", "is required"},
			}},
		{"P3 duplicate key deep in another section", `{"other": {"a": [{"b": 1, "b": 2}]}}`,
			[]Problem{{"other.a[0].b", `duplicate key "b"`}}},

		// P4: unknown fields.
		{"P4 unknown field read_onyl", doc(brandWith(`"accessMode": "read_only"`, `"accessMode": "read_only", "read_onyl": true`)),
			[]Problem{{"pact.brands[0].read_onyl", `unknown field "read_onyl"; the fields here are id, name, description, capability, instructions, workspace, accessMode, scope`}}},
		{"P4 misspelt field suggests the right one", doc(brandWith(`"accessMode"`, `"acessMode"`)),
			[]Problem{{"pact.brands[0].acessMode", `unknown field "acessMode"; did you mean "accessMode"?`}}},
		{"negative tokensPerDay", doc(brandWith(`"accessMode"`, `"tokensPerDay": -5, "accessMode"`)),
			[]Problem{{"pact.brands[0].tokensPerDay", `must be 0 (no limit) or a whole number of tokens a day`}}},
		{"X8 a modelName that would smuggle a Codex setting", doc(brandWith(`"accessMode"`, `"modelName": "gpt\",sandbox_mode=\"danger-full-access", "accessMode"`)),
			[]Problem{{"pact.brands[0].modelName", `must be a model name of at most 200 printable ASCII characters`}}},
		{"P4 mode suggests accessMode", doc(brandWith(`"accessMode"`, `"mode"`)),
			[]Problem{{"pact.brands[0].mode", `did you mean "accessMode"?`}}},
		{"P4 wrong case alone", doc(brandWith(`"accessMode"`, `"AccessMode"`)),
			[]Problem{{"pact.brands[0].AccessMode", `unknown field "AccessMode"; did you mean "accessMode"? (keys are case-sensitive)`}}},
		{"P4 snake case in pact", `{"pact": {"public_url": "https://a.example", "audience": "https://a.example"}}`,
			[]Problem{{"pact.public_url", `did you mean "publicUrl"?`}}},
		{"P4 unknown field in scope", doc(brandWith(`"description": "Review code (read only)"`, `"description": "Review code (read only)", "title": "x"`)),
			[]Problem{{"pact.brands[0].scope.title", `unknown field "title"; the fields here are id, description`}}},
		{"P4 top-level typo of pact", `{"Pact": {}}`,
			[]Problem{{"Pact", `unknown section "Pact"; did you mean "pact"? (keys are case-sensitive)`}}},
		{"P4 top-level scope for scopes", `{"scope": []}`,
			[]Problem{{"scope", `unknown section "scope"; did you mean "scopes"?`}}},
		{"P4 odd key quoted in path", doc(brandWith(`"accessMode": "read_only"`, `"accessMode": "read_only", "a b": 1`)),
			[]Problem{{`pact.brands[0]["a b"]`, `unknown field "a b"`}}},

		// P5: invalid enum values and other bad values.
		{"P5 accessMode readonly", doc(brandWith(`"read_only"`, `"readonly"`)),
			[]Problem{{"pact.brands[0].accessMode", `"readonly" is not one of read_only, read_write; did you mean read_only?`}}},
		{"P5 accessMode read_onyl", doc(brandWith(`"read_only"`, `"read_onyl"`)),
			[]Problem{{"pact.brands[0].accessMode", `"read_onyl" is not one of read_only, read_write; did you mean read_only?`}}},
		{"P5 accessMode wrong type", doc(brandWith(`"read_only"`, `1`)),
			[]Problem{{"pact.brands[0].accessMode", "must be a string, found the number 1"}}},
		{"P5 unknown capability", doc(brandWith(`"capability": "review"`, `"capability": "reveiw"`)),
			[]Problem{{"pact.brands[0].capability", `"reveiw" is not a built-in capability (built in: explain, review); did you mean "review"?; to define your own, keep the name and add "instructions"`}}},
		{"P5 built-in capability with instructions", doc(brandWith(`"capability": "review"`, `"capability": "review", "instructions": "Be nice."`)),
			[]Problem{{"pact.brands[0].instructions", `capability "review" is built in and brings its own instructions`}}},
		{"P5 brand id with capitals", doc(brandWith(`"id": "review"`, `"id": "Review"`)),
			[]Problem{{"pact.brands[0].id", `"Review" contains 'R'; use lowercase letters, digits and - only (it becomes the URL path /a2a/<id>); did you mean "review"?`}}},
		{"P5 brand id with a slash", doc(brandWith(`"id": "review"`, `"id": "../admin"`)),
			[]Problem{{"pact.brands[0].id", `"../admin" contains '.'`}}},
		{"P5 brand id too long", doc(brandWith(`"id": "review"`, `"id": "`+strings.Repeat("a", 65)+`"`)),
			[]Problem{{"pact.brands[0].id", "is 65 characters long; use at most 64"}}},
		{"P5 allowInsecureLocalIssuers not a bool", `{"pact": {"publicUrl": "https://a.example", "audience": "https://a.example", "allowInsecureLocalIssuers": "yes"}}`,
			[]Problem{{"pact.allowInsecureLocalIssuers", `must be true or false, found a string "yes"`}}},
		{"P5 brands not an array", `{"pact": {"publicUrl": "https://a.example", "audience": "https://a.example", "brands": {}}}`,
			[]Problem{{"pact.brands", "must be an array of brands, found an object"}}},
		// K6: the task retention is a whole number of days.
		{"K6 taskRetentionDays as a string", `{"pact": {"publicUrl": "https://a.example", "audience": "https://a.example", "taskRetentionDays": "30"}}`,
			[]Problem{{"pact.taskRetentionDays", `must be a whole number of days from 1 to 3650, found a string "30"`}}},
		{"K6 taskRetentionDays zero", `{"pact": {"publicUrl": "https://a.example", "audience": "https://a.example", "taskRetentionDays": 0}}`,
			[]Problem{{"pact.taskRetentionDays", `must be a whole number of days from 1 to 3650, found the number 0`}}},
		{"K6 taskRetentionDays fractional", `{"pact": {"publicUrl": "https://a.example", "audience": "https://a.example", "taskRetentionDays": 1.5}}`,
			[]Problem{{"pact.taskRetentionDays", `must be a whole number of days from 1 to 3650, found the number 1.5`}}},
		{"K6 taskRetentionDays too large", `{"pact": {"publicUrl": "https://a.example", "audience": "https://a.example", "taskRetentionDays": 3651}}`,
			[]Problem{{"pact.taskRetentionDays", `must be a whole number of days from 1 to 3650, found the number 3651`}}},
		{"P5 http publicUrl on a public host", `{"pact": {"publicUrl": "http://aether.example.com", "audience": "http://localhost:8080"}}`,
			[]Problem{{"pact.publicUrl", `"http://aether.example.com" uses http with a host that is not loopback; use https (put a TLS proxy in front of the gateway): http is only for localhost, 127.0.0.1 or [::1]`}}},
		{"P5 http publicUrl on a LAN host", `{"pact": {"publicUrl": "http://192.168.1.5:8080", "audience": "http://localhost:8080"}}`,
			[]Problem{{"pact.publicUrl", "host that is not loopback"}}},
		{"P5 relative publicUrl", `{"pact": {"publicUrl": "aether.example.com", "audience": "https://a.example"}}`,
			[]Problem{{"pact.publicUrl", `"aether.example.com" is not an absolute URL`}}},
		{"P5 publicUrl with trailing slash", `{"pact": {"publicUrl": "https://a.example/", "audience": "https://a.example"}}`,
			[]Problem{{"pact.publicUrl", "ends with /; remove it"}}},
		{"P5 audience with query and uppercase publicUrl", `{"pact": {"publicUrl": "HTTPS://A.example", "audience": "https://a.example?x=1"}}`,
			[]Problem{
				{"pact.publicUrl", "lowercase"},
				{"pact.audience", "has a query or fragment"},
			}},
		{"P5 ftp audience", `{"pact": {"publicUrl": "https://a.example", "audience": "ftp://a.example"}}`,
			[]Problem{{"pact.audience", `has the scheme "ftp"; use https`}}},
		{"P5 top level not an object", `[1, 2]`,
			[]Problem{{"", `must be a JSON object such as {"pact": {…}}, found an array`}}},
		{"P5 name with a bidi override", doc(brandWith(`"Code review"`, `"Code \u202ereview"`)),
			[]Problem{{"pact.brands[0].name", "control character U+202E"}}},
		{"P5 duplicate scope across brands", doc(goodBrand, brandWith(`"id": "review"`, `"id": "review-two"`)),
			[]Problem{{"pact.brands[1].scope.id", `scope "review:read_only" is already declared at pact.brands[0].scope.id`}}},
		{"P5 scope declared at top level and in a brand", `{"scopes": [{"id": "Review:Read_Only", "description": "x"}], "pact": ` + doc(goodBrand)[len(`{"pact": `):],
			[]Problem{{"pact.brands[0].scope.id", `already declared at scopes[0].id`}}},
		{"P5 scope id with a space", doc(brandWith(`"review:read_only"`, `"review read_only"`)),
			[]Problem{{"pact.brands[0].scope.id", `contains ' '; a scope id is printable ASCII`}}},

		// P9: the pact scope is the node's.
		{"P9 pact in scopes", `{"scopes": [{"id": "pact", "description": "everything"}]}`,
			[]Problem{{"scopes[0].id", "the node adds the pact scope; do not declare it"}}},
		{"P9 pact as a brand scope", doc(brandWith(`"review:read_only"`, `"pact"`)),
			[]Problem{{"pact.brands[0].scope.id", "the node adds the pact scope; do not declare it"}}},
		{"P9 PACT in another case", `{"scopes": [{"id": "PACT", "description": "everything"}]}`,
			[]Problem{{"scopes[0].id", "the node adds the pact scope; do not declare it"}}},

		// P10: the file itself.
		{"P10 byte order mark", "\uFEFF" + doc(goodBrand),
			[]Problem{{"", "starts with a byte order mark (BOM); save it as UTF-8 without BOM"}}},
		{"P10 UTF-16", "\xff\xfe{\x00}\x00",
			[]Problem{{"", "is UTF-16 encoded"}}},
		{"P10 line comment", "{\n  // my brands\n  \"pact\": {}\n}",
			[]Problem{{"", "line 2, column 3: comments are not allowed in JSON; remove this comment"}}},
		{"P10 block comment", "{\"pact\": /* later */ {}}",
			[]Problem{{"", "line 1, column 10: comments are not allowed in JSON"}}},
		{"P10 trailing comma", "{\"pact\": {\n  \"publicUrl\": \"https://a.example\",\n}}",
			[]Problem{{"", "line 3, column 1: trailing comma before }; remove it"}}},
		{"P10 missing comma", "{\"a\": 1\n \"b\": 2}",
			[]Problem{{"", `line 2, column 2: expected ',' or '}' after the value of "a", found '"' (a comma is missing)`}}},
		{"P10 truncated", "{\"pact\": {\"brands\": [",
			[]Problem{{"", "line 1, column 22: unexpected end of file: the array opened at line 1, column 21 is not closed"}}},
		{"P10 single quotes", "{'pact': {}}",
			[]Problem{{"", "line 1, column 2: keys need double quotes"}}},
		{"P10 bare word", `{"pact": {"allowInsecureLocalIssuers": True}}`,
			[]Problem{{"", `line 1, column 40: "True" is not a JSON value`}}},
		{"P10 trailing garbage", `{} x`,
			[]Problem{{"", `line 1, column 4: unexpected 'x' after the end of the JSON value`}}},
		{"P10 invalid UTF-8", "{\"a\": \"\xff\"}",
			[]Problem{{"", "line 1, column 8: invalid UTF-8"}}},
		{"P10 empty", "  \n",
			[]Problem{{"", "is empty"}}},
		{"P10 deep nesting", strings.Repeat("[", 100) + strings.Repeat("]", 100),
			[]Problem{{"", "nested deeper than 64 levels"}}},
		{"P10 raw newline in string", "{\"a\": \"x\ny\"}",
			[]Problem{{"", "line 1, column 9: control character U+000A inside a string"}}},
		{"P10 leading zero", `{"a": 01}`,
			[]Problem{{"", `line 1, column 7: invalid number "01"`}}},
		{"P10 too large", `{"x": "` + strings.Repeat("a", MaxSize) + `"}`,
			[]Problem{{"", "is larger than 1048576 bytes (1 MiB)"}}},

		// All problems at once: structure (field names, types) first, then values, each in file order.
		{"every problem is reported", doc(
			brandWith(`"read_only"`, `"readonly"`),
			brandWith(`"workspace": "workspace"`, `"workspace": "../../etc", "Workspace": "x"`)),
			[]Problem{
				{"pact.brands[1].Workspace", "differs from \"workspace\" only in case"},
				{"pact.brands[0].accessMode", `"readonly" is not one of read_only, read_write`},
				{"pact.brands[1].id", "already the id of pact.brands[0]"},
				{"pact.brands[1].scope.id", "already declared"},
				{"pact.brands[1].workspace", `contains ".."`},
			}},
	}
	dir := policyDir(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := parseIn(t, dir, tt.data)
			if p != nil {
				t.Errorf("Parse returned a policy along with the error")
			}
			wantProblems(t, err, tt.want...)
		})
	}
}

func TestOtherSectionsAccepted(t *testing.T) {
	dir := policyDir(t)
	p, err := parseIn(t, dir, `{"agents": {"Pact": 1, "pact": 2, "anything": [true, null]}, "rules": [], "pactish": {}, `+doc(goodBrand)[1:])
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Pact.Brands) != 1 {
		t.Fatalf("brands = %+v", p.Pact.Brands)
	}
}

func TestNoPactSection(t *testing.T) {
	p, err := Parse([]byte(`{"scopes": [{"id": "files:read", "description": "Read files"}]}`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if p.Pact != nil {
		t.Fatalf("Pact = %+v, want nil", p.Pact)
	}
	if got := Describe(p); !strings.Contains(got, "no pact section") || !strings.Contains(got, "files:read (Read files)") {
		t.Errorf("Describe:\n%s", got)
	}
}

func TestOwnCapability(t *testing.T) {
	dir := policyDir(t)
	b := brandWith(`"capability": "review"`, `"capability": "summarize", "instructions": "Summarize the code <briefly>."`)
	p, err := parseIn(t, dir, doc(b))
	if err != nil {
		t.Fatal(err)
	}
	br, _ := p.Brand("review")
	if got := br.InstructionText(); got != "Summarize the code <briefly>." {
		t.Errorf("InstructionText = %q", got)
	}
	_, err = parseIn(t, dir, doc(brandWith(`"capability": "review"`, `"capability": "Sum up", "instructions": "x"`)))
	wantProblems(t, err, Problem{"pact.brands[0].capability", `"Sum up" contains 'S'`})
}

func TestCapabilities(t *testing.T) {
	caps := Capabilities()
	if !strings.Contains(caps["review"], "read-only review") {
		t.Errorf("review instructions = %q", caps["review"])
	}
	caps["review"] = "changed"
	if text, ok := CapabilityText("review"); !ok || text == "changed" {
		t.Error("Capabilities returned the package's own map")
	}
}

func TestDescribe(t *testing.T) {
	dir := policyDir(t)
	p, err := parseIn(t, dir, doc(goodBrand))
	if err != nil {
		t.Fatal(err)
	}
	got := Describe(p)
	for _, want := range []string{
		"policy " + p.Hash(),
		"publicUrl: https://aether.example.com",
		"scope added by the node: pact",
		"brands (1):",
		"  review: Code review",
		"scope:       review:read_only (Review code (read only))",
		"access mode: read_only",
		"capability:  review (built in)",
		"workspace:   " + p.Pact.Brands[0].WorkspaceDir,
		"agent card:  https://aether.example.com/a2a/review/.well-known/agent-card.json",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Describe lacks %q:\n%s", want, got)
		}
	}
}

func TestP11Snapshot(t *testing.T) {
	dir := policyDir(t)
	p, err := parseIn(t, dir, doc(goodBrand))
	if err != nil {
		t.Fatal(err)
	}
	h := p.Hash()
	if !strings.HasPrefix(h, "sha256:") || len(h) != len("sha256:")+64 {
		t.Fatalf("Hash = %q", h)
	}
	t.Run("P11 hash ignores formatting and other sections", func(t *testing.T) {
		q, err := parseIn(t, dir, `{"other": {"x": 1},
		  "pact": {"brands": [`+goodBrand+`], "audience": "https://aether.example.com", "publicUrl": "https://aether.example.com"}}`)
		if err != nil {
			t.Fatal(err)
		}
		if q.Hash() != h {
			t.Errorf("hash differs: %s vs %s", q.Hash(), h)
		}
	})
	t.Run("P11 hash follows what the node does", func(t *testing.T) {
		q, err := parseIn(t, dir, doc(brandWith(`"Code review"`, `"Code review!"`)))
		if err != nil {
			t.Fatal(err)
		}
		if q.Hash() == h {
			t.Error("hash did not change with the brand name")
		}
	})
	t.Run("P11 edits happen on a clone", func(t *testing.T) {
		c := p.Clone()
		c.Pact.Brands[0].Name = "changed"
		c.Pact.PublicURL = "https://other.example"
		c.Scopes = append(c.Scopes, Scope{ID: "x", Description: "y"})
		if p.Pact.Brands[0].Name != "Code review" || p.Pact.PublicURL != "https://aether.example.com" || len(p.Scopes) != 0 || p.Hash() != h {
			t.Errorf("editing the clone changed the snapshot: %+v", p.Pact)
		}
		b, _ := p.Brand("review")
		b.Name = "changed"
		if p.Pact.Brands[0].Name != "Code review" {
			t.Error("Brand returned a reference into the snapshot")
		}
	})
}

func TestValidate(t *testing.T) {
	dir := policyDir(t)
	p := Starter("")
	if err := Validate(p, dir); err != nil {
		t.Fatalf("Starter: %v", err)
	}
	p.Pact.Brands = append(p.Pact.Brands, Brand{
		ID: "review", Name: "Code review", Description: "Reviews code.", Capability: "review",
		Workspace: "workspace", AccessMode: "readonly", Scope: Scope{ID: PactScope, Description: "x"},
	})
	err := Validate(p, dir)
	wantProblems(t, err,
		Problem{"pact.brands[0].accessMode", `"readonly" is not one of read_only, read_write`},
		Problem{"pact.brands[0].scope.id", "the node adds the pact scope; do not declare it"},
	)
	if p.Pact.Brands[0].WorkspaceDir != "" {
		t.Error("Validate changed the policy")
	}
	want := "policy.json: pact.brands[0].accessMode: \"readonly\" is not one of read_only, read_write; did you mean read_only?\n" +
		"policy.json: pact.brands[0].scope.id: the node adds the pact scope; do not declare it"
	if err.Error() != want {
		t.Errorf("Error() =\n%s\nwant\n%s", err, want)
	}
}

func TestLoad(t *testing.T) {
	dir := policyDir(t)
	path := writePolicy(t, dir, doc(goodBrand))
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := p.Brand("review"); b.WorkspaceDir == "" {
		t.Errorf("workspace not resolved: %+v", b)
	}
	t.Run("missing file", func(t *testing.T) {
		_, err := Load(filepath.Join(dir, "none.json"))
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("err = %v, want ErrNotExist", err)
		}
	})
	t.Run("P10 huge file is not read", func(t *testing.T) {
		big := filepath.Join(dir, "big.json")
		if err := os.WriteFile(big, make([]byte, MaxSize+1), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(big)
		wantProblems(t, err, Problem{"", "is 1048577 bytes; a policy may be at most 1048576 bytes (1 MiB)"})
		if !strings.HasPrefix(err.Error(), big+": is 1048577 bytes") {
			t.Errorf("Error() = %q; want it to start with the file name", err)
		}
	})
	t.Run("a folder", func(t *testing.T) {
		_, err := Load(filepath.Join(dir, "workspace"))
		wantProblems(t, err, Problem{"", "is not a regular file"})
	})
	t.Run("problems carry the file name", func(t *testing.T) {
		bad := writePolicy(t, t.TempDir(), `{"pact": {"publicUrl": "https://a.example"}}`)
		_, err := Load(bad)
		if want := bad + ": pact.audience: is required"; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Error() = %q, want prefix %q", err, want)
		}
	})
}

func TestTaskRetention(t *testing.T) {
	t.Run("K6 default and set", func(t *testing.T) {
		p, err := Parse([]byte(`{"pact": {"publicUrl": "https://a.example", "audience": "https://a.example"}}`), t.TempDir())
		if err != nil || p.Pact.TaskRetention() != DefaultTaskRetentionDays*24*time.Hour {
			t.Fatalf("default: %v %v", p, err)
		}
		dir := t.TempDir()
		p, err = Parse([]byte(`{"pact": {"publicUrl": "https://a.example", "audience": "https://a.example", "taskRetentionDays": 7}}`), dir)
		if err != nil || p.Pact.TaskRetention() != 7*24*time.Hour {
			t.Fatalf("7 days: %v %v", p, err)
		}
		path := filepath.Join(dir, "policy.json")
		if err := Save(path, p); err != nil {
			t.Fatal(err)
		}
		back, err := Load(path)
		if err != nil || back.Pact.TaskRetentionDays != 7 {
			t.Fatalf("saved and loaded: %v %v", back, err)
		}
	})
}
