package owner_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/aether/aether/backend/work"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/aether/aether/backend/admin"
	"github.com/aether/aether/backend/owner"
)

// The edges' copies of owner's JSON shapes (docs/admin-api.md): frontend/src/api.ts and
// events.ts, which the UI is type-checked against, and the UI's mock API
// (frontend/scripts/mock-api.mjs), which the screenshots walk. Both are written by hand; these
// tests fail when a field is added, renamed or retyped on one side only.

// tsAnswers pairs each answer interface of api.ts with the owner type it is the JSON of.
var tsAnswers = map[string]any{
	"Agent": owner.Agent{}, "Scope": owner.Scope{}, "Brand": owner.Brand{}, "CodeLookup": owner.CodeLookup{},
	"ConsentRequest": owner.ConsentRequest{}, "Grant": owner.Grant{}, "ReceiptSummary": owner.ReceiptSummary{},
	"Problem": owner.Problem{}, "PolicyError": owner.PolicyError{}, "Status": owner.Status{}, "SetupStep": owner.SetupStep{},
	"CodexDownload": owner.CodexDownload{}, "ModelCheck": owner.ModelCheck{}, "ModelStatus": owner.ModelStatus{}, "ModelGateway": owner.ModelGateway{},
	"Reachability": owner.Reachability{}, "ReceiptDetail": owner.ReceiptDetail{}, "BrandsAnswer": owner.BrandsView{},
	"FieldError": owner.FieldError{}, "ErrorBody": owner.ErrorBody{}, "DecisionAnswer": owner.DecisionResult{},
	"ConsentList": owner.ConsentList{}, "GrantList": owner.GrantList{}, "GrantAnswer": owner.GrantAnswer{},
	"BrandList": owner.BrandList{}, "ReceiptPage": owner.ReceiptPage{}, "DenyIssuerResult": owner.DenyIssuerResult{},
	"ConsentEvent": owner.ConsentEvent{}, "ReceiptLog": owner.ReceiptLog{}, "AgentWitnesses": owner.AgentWitnesses{},
	"MyAgent": owner.MyAgent{}, "MyAgents": owner.MyAgents{}, "ReceivedReceipt": owner.ReceivedReceipt{}, "ReceivedList": owner.ReceivedList{},
	// A receipt's signed claim `work` (docs/wire.md); its names are the claims'.
	"ReceiptWork": work.Work{}, "ReceiptWorkCommand": work.Command{}, "ReceiptWorkFile": work.File{}, "ReceiptWorkPatch": work.Patch{},
	"ReceiptCommandList": work.List[work.Command]{}, "ReceiptFileList": work.List[work.File]{}, "ReceiptPatchList": work.List[work.Patch]{},
}

// tsBodies pairs each request body interface of api.ts with owner's type.
var tsBodies = map[string]any{
	"DecisionRequest": owner.DecisionRequest{}, "DenyIssuerRequest": owner.DenyIssuerRequest{},
	"CodexPathRequest": owner.CodexPathRequest{}, "FunnelRequest": owner.FunnelRequest{}, "ModelRequest": owner.ModelRequest{},
	"AgentRequest": owner.AgentRequest{}, "AgentSwitch": owner.AgentSwitch{},
}

// tsOnly is what api.ts has beyond owner's types, and why.
var tsOnly = map[string]string{
	"DecisionAnswer.error": "409 and 410 answer an ErrorBody, which requestAllowing hands back as the answer",
}

// eventData is owner's event names (EventMap's keys in events.ts) and their data.
var eventData = map[string]any{
	owner.EventConsent: owner.ConsentEvent{}, owner.EventGrant: owner.Grant{},
	owner.EventReceipt: owner.ReceiptSummary{}, owner.EventReachability: owner.Reachability{},
}

func readRepo(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", path))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestAPITSMatchesOwner: every interface of api.ts and events.ts is the JSON of an owner type,
// field for field; every answer the API client asks for is one of them; and every answer of
// admin.Backend has its interface.
func TestAPITSMatchesOwner(t *testing.T) {
	src := readRepo(t, "frontend/src/api.ts")
	f := parseTS(src + "\n" + readRepo(t, "frontend/src/events.ts"))
	var problems []string
	for _, name := range f.names {
		g, answer := tsAnswers[name], true
		if g == nil {
			g, answer = tsBodies[name], false
		}
		switch {
		case name == "EventMap":
			problems = append(problems, eventMapProblems(f)...)
			continue
		case g == nil:
			problems = append(problems, name+": api.ts declares it, but it is paired with no owner type (tsAnswers or tsBodies)")
			continue
		}
		ts, err := f.shapeOf(name)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		problems = append(problems, compareTS(name, goShape(reflect.TypeOf(g)), ts, answer)...)
	}
	for _, m := range regexp.MustCompile(`\brequest(?:Allowing)?<(.+?)>\(\s*"`).FindAllStringSubmatch(src, -1) {
		if tsAnswers[m[1]] == nil {
			problems = append(problems, fmt.Sprintf("api.ts asks for %s: not an interface paired with an owner answer", m[1]))
		}
	}
	problems = append(problems, uncoveredAnswers()...)
	for _, p := range problems {
		if name, _, _ := strings.Cut(p, ":"); tsOnly[name] == "" {
			t.Error(p)
		}
	}
}

// eventMapProblems checks events.ts's EventMap against owner's event names and data.
func eventMapProblems(f tsFile) []string {
	em, err := f.shapeOf("EventMap")
	if err != nil {
		return []string{"EventMap: " + err.Error()}
	}
	var out []string
	for name, data := range eventData {
		m := em.fields[name]
		if m == nil {
			out = append(out, fmt.Sprintf("EventMap.%s: owner sends the event, events.ts has no data type for it", name))
			continue
		}
		out = append(out, compareTS("EventMap."+name, goShape(reflect.TypeOf(data)), m.s, true)...)
	}
	return out
}

// uncoveredAnswers: owner types that admin.Backend returns (hence the API sends) without an
// api.ts interface. Runtime is the node API's alone (make soak).
func uncoveredAnswers() []string {
	covered := map[reflect.Type]bool{reflect.TypeFor[owner.Runtime](): true}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || covered[t] {
			return
		}
		covered[t] = true
		for f := range t.Fields() {
			walk(f.Type)
		}
	}
	for _, v := range tsAnswers {
		walk(reflect.TypeOf(v))
	}
	var out []string
	for m := range reflect.TypeFor[admin.Backend]().Methods() {
		for r := range m.Type.Outs() {
			for r.Kind() == reflect.Slice {
				r = r.Elem()
			}
			if r.Kind() == reflect.Struct && r.PkgPath() == reflect.TypeFor[owner.Status]().PkgPath() && !covered[r] {
				out = append(out, fmt.Sprintf("%s: admin.Backend.%s returns it, api.ts has no interface for it", r, m.Name))
			}
		}
	}
	return out
}

// mockAPI runs the UI's mock API (with a broken policy, so that its error has a sample too)
// and returns its address.
func mockAPI(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is required to run the UI's mock API (make deps):", err)
	}
	cmd := exec.Command(node, filepath.Join("..", "..", "frontend", "scripts", "mock-api.mjs"), "--port", "0", "--policy-error")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	m := regexp.MustCompile(`http://127\.0\.0\.1:\d+`).FindString(line)
	if m == "" {
		t.Fatalf("the mock API did not say where it listens: %q, %v", line, err)
	}
	return m
}

// TestMockAPIMatchesOwner: every answer of the UI's mock API that the UI reads has owner's
// shape: no field owner lacks, none missing that owner always sends, each of owner's kind
// (times in RFC 3339), null only where owner sends null.
func TestMockAPIMatchesOwner(t *testing.T) {
	base := mockAPI(t)
	var session struct{ CSRFToken string }
	call := func(method, path string, body, want any, code int) map[string]any {
		t.Helper()
		var rd io.Reader
		if body != nil {
			data, _ := json.Marshal(body)
			rd = bytes.NewReader(data)
		}
		req, _ := http.NewRequest(method, base+path, rd)
		req.Header.Set("X-CSRF-Token", session.CSRFToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != code {
			t.Fatalf("%s %s: %d, %v; want %d", method, path, resp.StatusCode, err, code)
		}
		if want != nil {
			for _, p := range checkObject(method+" "+path, goShape(reflect.TypeOf(want)), v) {
				t.Error("mock-api.mjs: " + p)
			}
		}
		return v
	}
	data := call("GET", "/api/session", nil, nil, 200)
	session.CSRFToken, _ = data["csrfToken"].(string)

	call("GET", "/api/status", nil, owner.Status{}, 200)
	first := call("GET", "/api/consent", nil, owner.ConsentList{}, 200)["requests"].([]any)[0].(map[string]any)
	decide := "/api/consent/" + first["id"].(string) + "/decision"
	allow := owner.DecisionRequest{UserCode: first["userCode"].(string), Decision: owner.DecisionAllow, Duration: owner.Duration30Days}
	call("POST", decide, allow, owner.DecisionResult{}, 200)
	call("POST", decide, allow, owner.ErrorBody{}, 409)
	grant := call("GET", "/api/grants", nil, owner.GrantList{}, 200)["grants"].([]any)[0].(map[string]any)
	call("POST", "/api/grants/"+grant["id"].(string)+"/revoke", nil, owner.GrantAnswer{}, 200)
	rec := call("GET", "/api/receipts", nil, owner.ReceiptPage{}, 200)["receipts"].([]any)[0].(map[string]any)
	call("GET", "/api/receipts/"+rec["id"].(string), nil, owner.ReceiptDetail{}, 200)
	brand := call("GET", "/api/brands", nil, owner.BrandsView{}, 200)["brands"].([]any)[0].(map[string]any)
	call("PUT", "/api/brands/"+brand["id"].(string), brand, owner.BrandList{}, 200)
	call("POST", "/mock/consent", nil, owner.ConsentRequest{}, 200)
	call("POST", "/mock/receipt", nil, owner.ReceiptSummary{}, 200)
	call("GET", "/api/nope", nil, owner.ErrorBody{}, 404)
}
