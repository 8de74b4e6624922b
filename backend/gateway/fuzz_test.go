package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/identity"
	"github.com/aether/aether/backend/internal/fuzzseed"
)

// The fuzz targets of the request bodies (docs/threats.md, R1–R14) and the device-flow form
// (D1–D12). README.md, "Fuzzing", says how to run them.

const sendMessage = `{"jsonrpc":"2.0","id":"1","method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"review main.go"}]}}}`

func bodySeeds() []fuzzseed.Seed {
	const ct = "application/json"
	s := fuzzseed.S
	return []fuzzseed.Seed{
		s("valid-send-message", []byte(sendMessage), ct, "", false),
		s("valid-get-task-int-id", []byte(`{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"t1"}}`), ct, "", false),
		s("valid-id-max-safe", []byte(`{"jsonrpc":"2.0","id":9007199254740991,"method":"GetTask","params":{"id":"t1"}}`), "application/json; charset=utf-8", "", false),
		s("valid-rest-message", []byte(`{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}`), "application/a2a+json", "identity", true),
		s("valid-rest-empty-cancel", []byte{}, "", "", true),
		s("r1-r14-long-string", []byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"raw":"`+strings.Repeat("QUFB", 512)+`"}}`), ct, "", false),
		s("r2-gzip", []byte(sendMessage), ct, "gzip", false),
		s("r3-deep-nesting", []byte(strings.Repeat("[", 200)+strings.Repeat("]", 200)), ct, "", true),
		s("r3-depth-64", []byte(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":`+strings.Repeat(`{"a":`, 63)+`1`+strings.Repeat("}", 63)+`}`), ct, "", false),
		s("r3-depth-65", []byte(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":`+strings.Repeat(`{"a":`, 64)+`1`+strings.Repeat("}", 64)+`}`), ct, "", false),
		s("r4-invalid-utf8", []byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\",\"params\":{\"id\":\"\xff\xfe\"}}"), ct, "", false),
		s("r4-nul", []byte("{\"jsonrpc\":\"2.0\",\"id\":\"\\u0000\",\"method\":\"GetTask\x00\"}"), ct, "", false),
		s("r4-surrogate-escape", []byte(`{"jsonrpc":"2.0","id":"\ud800","method":"GetTask","params":{"id":"\udfff"}}`), ct, "", false),
		s("r5-truncated", []byte(sendMessage[:60]), ct, "", false),
		s("r5-trailing", []byte(sendMessage+` {"x":1}`), ct, "", false),
		s("r5-bom", append([]byte{0xEF, 0xBB, 0xBF}, sendMessage...), ct, "", false),
		s("r6-jsonrpc-1", []byte(`{"jsonrpc":"1.0","id":1,"method":"GetTask"}`), ct, "", false),
		s("r6-jsonrpc-number", []byte(`{"jsonrpc":2.0,"id":1,"method":"GetTask"}`), ct, "", false),
		s("r9-batch", []byte(`[`+sendMessage+`]`), ct, "", false),
		s("r9-empty-batch", []byte(`[]`), ct, "", false),
		s("r10-notification", []byte(`{"jsonrpc":"2.0","method":"SendMessage","params":{}}`), ct, "", false),
		s("r11-id-object", []byte(`{"jsonrpc":"2.0","id":{"a":1},"method":"GetTask"}`), ct, "", false),
		s("r11-id-float", []byte(`{"jsonrpc":"2.0","id":1.5,"method":"GetTask"}`), ct, "", false),
		s("r11-id-exponent", []byte(`{"jsonrpc":"2.0","id":1e3,"method":"GetTask"}`), ct, "", false),
		s("r11-id-huge", []byte(`{"jsonrpc":"2.0","id":1e400,"method":"GetTask"}`), ct, "", false),
		s("r11-id-int-overflow", []byte(`{"jsonrpc":"2.0","id":99999999999999999999,"method":"GetTask"}`), ct, "", false),
		s("r11-id-beyond-2-53", []byte(`{"jsonrpc":"2.0","id":9007199254740993,"method":"GetTask"}`), ct, "", false),
		s("r11-id-negative-zero", []byte(`{"jsonrpc":"2.0","id":-0,"method":"GetTask"}`), ct, "", false),
		s("r11-id-long", []byte(`{"jsonrpc":"2.0","id":"`+strings.Repeat("x", 300)+`","method":"GetTask"}`), ct, "", false),
		s("r12-duplicate-method", []byte(`{"jsonrpc":"2.0","id":1,"method":"GetTask","method":"CancelTask"}`), ct, "", false),
		s("r12-case-variant", []byte(`{"jsonrpc":"2.0","id":1,"method":"GetTask","Method":"CancelTask"}`), ct, "", false),
		s("r12-escaped-duplicate", []byte(`{"jsonrpc":"2.0","id":1,"method":"GetTask","\u006dethod":"CancelTask"}`), ct, "", false),
		s("r12-long-s-variant", []byte(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t1"},"param`+"\u017f"+`":{"id":"t2"}}`), ct, "", false),
		s("r12-long-s-variant-rest", []byte(`{"message":{"messageId":"m1","role":"ROLE_USER","parts":[]},"me`+"\u017f\u017f"+`age":{"messageId":"m2"}}`), ct, "", true),
		s("r12-kelvin-variant", []byte(`{"message":{"kind":"a","`+"\u212a"+`ind":"b"}}`), ct, "", true),
		s("r12-deep-duplicate", []byte(`{"message":{"parts":[{"text":"a","text":"b"}]}}`), ct, "", true),
		s("r12-metadata-keys-differ-in-case", []byte(`{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"data":{"k":[{"A":1,"a":2}]},"metadata":{"x":1,"X":2}}],"metadata":{"trace":"a","Trace":"b"}},"metadata":{"n":{"v":1,"V":2}}}`), ct, "", true),
		s("r12-metadata-exact-duplicate", []byte(`{"message":{"metadata":{"trace":"a","trace":"b"}}}`), ct, "", true),
		s("r12-metadata-case-variant-of-metadata", []byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":{"a":1},"METADATA":{"b":2}}}}`), ct, "", false),
		s("r13-text-plain", []byte(sendMessage), "text/plain", "", false),
		s("r13-bad-media-type", []byte(sendMessage), "application/json; =", "", false),
	}
}

// FuzzBodyGuard checks checkBody, the guard every A2A body passes before a2a-go: it refuses
// with the status and code of its threat row, or passes the body on unchanged, and then the
// body is one strict JSON value (checked here by an independent reading) that a2a-go decodes
// to a request it answers with the same id. What it accepts is exactly what the rules allow.
func FuzzBodyGuard(f *testing.F) {
	fuzzseed.Write(f, bodySeeds())
	f.Fuzz(func(t *testing.T, body []byte, contentType, encoding string, rest bool) {
		b := bindingJSONRPC
		if rest {
			b = bindingREST
		}
		r := httptest.NewRequest(http.MethodPost, "/a2a/acme", bytes.NewReader(body))
		r.Header.Set("Content-Type", contentType)
		r.Header.Set("Content-Encoding", encoding)
		got, echo, werr := checkBody(r, b)

		want := expectBody(body, contentType, encoding, rest)
		if werr == nil {
			if want != nil {
				t.Fatalf("accepted; want %d %d (%s)", want.HTTPStatus, want.RPCCode, want.Message)
			}
			if !bytes.Equal(got, body) {
				t.Fatalf("body changed: %q, want %q", got, body)
			}
			if !rest {
				checkSDKDecodes(t, body)
			}
			return
		}
		if want == nil {
			t.Fatalf("refused %d %d (%s); the rules accept it", werr.HTTPStatus, werr.RPCCode, werr.Message)
		}
		if werr.HTTPStatus != want.HTTPStatus || werr.RPCCode != want.RPCCode {
			t.Fatalf("refused %d %d (%s); want %d %d (%s)", werr.HTTPStatus, werr.RPCCode, werr.Message, want.HTTPStatus, want.RPCCode, want.Message)
		}
		checkErrorBody(t, b, *werr, echo)
	})
}

// expectBody is the rules of the R table read on their own: nil when the body must pass.
func expectBody(body []byte, contentType, encoding string, rest bool) *wireError {
	w := func(e wireError, msg string) *wireError { e.Message = msg; return &e }
	if encoding != "" && !strings.EqualFold(encoding, "identity") {
		return w(errContentType, "R2 encoding")
	}
	if len(body) > maxBodyBytes {
		return w(errTooLarge, "R1 size")
	}
	if len(body) == 0 && rest {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(contentType); err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return w(errContentType, "R13 content type")
	}
	switch strictProblem(body) {
	case "utf8", "syntax":
		return w(errParse, "R4/R5 not JSON")
	case "depth", "duplicate":
		return w(errInvalidRequest, "R3/R12")
	}
	if rest {
		return nil
	}
	if msg := envelopeProblem(body); msg != "" {
		return w(errInvalidRequest, msg)
	}
	return nil
}

// strictProblem reads body with a token stream of its own: "" when it is one JSON value of
// valid UTF-8, nested at most maxDepth deep, in whose objects no two keys are equal under the
// case folding encoding/json matches fields by (bytes.EqualFold).
func strictProblem(body []byte) string {
	if !utf8.Valid(body) {
		return "utf8"
	}
	if !json.Valid(body) {
		return "syntax"
	}
	type frame struct {
		obj     bool
		wantKey bool
		keys    []string
		key     string // the member whose value comes next
		free    bool   // inside a metadata or data member: keys are case-sensitive
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // 1e400 is valid JSON
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return ""
		}
		if err != nil {
			return "syntax"
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if key, ok := tok.(string); ok && top != nil && top.obj && top.wantKey {
			for _, k := range top.keys {
				if k == key || !top.free && strings.EqualFold(k, key) {
					return "duplicate"
				}
			}
			top.keys, top.key = append(top.keys, key), key
			top.wantKey = false
			continue
		}
		if top != nil && top.obj {
			top.wantKey = true // this token starts the member's value
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			free := top != nil && (top.free || top.obj && (strings.EqualFold(top.key, "metadata") || strings.EqualFold(top.key, "data")))
			stack = append(stack, &frame{obj: tok == json.Delim('{'), wantKey: true, free: free})
			if len(stack) > maxDepth {
				return "depth"
			}
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// envelopeProblem is the JSON-RPC rules (R6, R9, R10, R11) for a strict JSON body.
func envelopeProblem(body []byte) string {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return "R9 not an object"
	}
	field := func(name string) (json.RawMessage, bool) {
		for k, v := range top { // no two keys fold alike here (strictProblem)
			if strings.EqualFold(k, name) {
				return v, true
			}
		}
		return nil, false
	}
	if id, ok := field("id"); ok && string(id) != "null" {
		if len(id) > maxIDLen {
			return "R11 id too long"
		}
		var s string
		if json.Unmarshal(id, &s) != nil {
			if n, err := strconv.ParseInt(string(id), 10, 64); err != nil || n > 1<<53 || n < -1<<53 {
				return "R11 id type"
			}
		}
	} else {
		return "R10 notification"
	}
	if v, ok := field("jsonrpc"); !ok || string(v) != `"2.0"` && !decodesTo(v, "2.0") {
		return "R6 jsonrpc"
	}
	if v, ok := field("method"); !ok || string(v) == "null" || json.Unmarshal(v, new(string)) != nil {
		return "method"
	}
	return ""
}

func decodesTo(raw json.RawMessage, want string) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil && s == want
}

// sdkRequest mirrors what a2a-go's JSON-RPC handler decodes a request into.
type sdkRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
	ID      any             `json:"id"`
}

// checkSDKDecodes: a body the guard passed decodes as a2a-go decodes it, with a valid id that
// a2a-go's answer carries unchanged.
func checkSDKDecodes(t *testing.T, body []byte) {
	t.Helper()
	var req sdkRequest
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&req); err != nil {
		t.Fatalf("a2a-go cannot decode an accepted body: %v", err)
	}
	if req.JSONRPC != "2.0" {
		t.Fatalf("a2a-go sees jsonrpc %q", req.JSONRPC)
	}
	var raw struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	switch id := req.ID.(type) {
	case string:
	case float64:
		// a2a-go answers with the float64 it decoded: the answer's id must be the request's.
		echoed, _ := json.Marshal(id)
		if string(echoed) != string(raw.ID) {
			t.Fatalf("id %s comes back from a2a-go as %s", raw.ID, echoed)
		}
	default:
		t.Fatalf("a2a-go sees id %#v (%T): not a valid JSON-RPC id", req.ID, req.ID)
	}
}

// checkErrorBody: the answer to a refused body is well-formed JSON in the binding's shape, and
// a JSON-RPC answer echoes the request's id or null.
func checkErrorBody(t *testing.T, b binding, e wireError, echo json.RawMessage) {
	t.Helper()
	rec := httptest.NewRecorder()
	writeWireError(rec, b, e, echo)
	// JSON-RPC answers a refused request in HTTP 200; 413 and 415 stay (docs/wire.md).
	want := e.HTTPStatus
	if b == bindingJSONRPC && want == http.StatusBadRequest {
		want = http.StatusOK
	}
	if rec.Code != want {
		t.Fatalf("status %d, want %d", rec.Code, want)
	}
	var out struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Error == nil {
		t.Fatalf("error answer is not JSON (%v): %q", err, rec.Body.Bytes())
	}
	if b == bindingREST {
		return
	}
	if out.Error.Code != e.RPCCode {
		t.Fatalf("code %d, want %d", out.Error.Code, e.RPCCode)
	}
	if echo == nil {
		if string(out.ID) != "null" {
			t.Fatalf("id %s, want null", out.ID)
		}
		return
	}
	var a, w any
	if json.Unmarshal(out.ID, &a) != nil || json.Unmarshal(echo, &w) != nil || !reflect.DeepEqual(a, w) {
		t.Fatalf("id %s, want the request's %s", out.ID, echo)
	}
}

func formSeeds() []fuzzseed.Seed {
	const ct = "application/x-www-form-urlencoded"
	s := fuzzseed.S
	return []fuzzseed.Seed{
		s("valid-device-authorization", ct, []byte("scope=review%3Aread_only&brand=review")),
		s("valid-token-poll", ct, []byte("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code&device_code=AAAAAAAAAAAAAAAAAAAAAA")),
		s("valid-token-refresh", "application/x-www-form-urlencoded; charset=UTF-8", []byte("grant_type=urn%3Aaether%3Aparams%3Aoauth%3Agrant-type%3Apact-grant&brand=review")),
		s("d3-pact-fullwidth", ct, []byte("scope=%EF%BD%90%EF%BD%81%EF%BD%83%EF%BD%94")),
		s("d4-form-over-16k", ct, []byte("scope="+strings.Repeat("a", maxFormBytes))),
		s("d12-repeated-grant-type", ct, []byte("grant_type=a&grant_type=b")),
		s("d12-repeated-empty-key", ct, []byte("=&=")),
		s("semicolon", ct, []byte("grant_type=a;device_code=b")),
		s("bad-escape", ct, []byte("device_code=%zz")),
		s("invalid-utf8-and-nul", ct, []byte("scope=%FF%00&brand=\x00\xff")),
		s("json-body", "application/json", []byte(`{"grant_type":"x"}`)),
		s("media-type-suffix", "application/x-www-form-urlencodedX", []byte("grant_type=a")),
		s("media-type-broken", "application/x-www-form-urlencoded; =", []byte("grant_type=a")),
		s("multipart", "multipart/form-data; boundary=x", []byte("--x\r\nContent-Disposition: form-data; name=\"grant_type\"\r\n\r\na\r\n--x--\r\n")),
	}
}

// acceptAll stands in for the identity verifier: the form is what is fuzzed here.
type acceptAll struct{}

func (acceptAll) Verify(context.Context, string, string) (identity.Identity, error) {
	return identity.Identity{Agent: domain.Agent{Issuer: "https://issuer.example", Subject: "alice"}}, nil
}

// FuzzDeviceForm checks oauthIdentity's reading of a device-flow form: it either answers 400
// invalid_request in JSON, or hands on a form of at most 16 KiB in which no parameter repeats,
// exactly as url.ParseQuery reads it; and every form those rules allow is accepted.
func FuzzDeviceForm(f *testing.F) {
	fuzzseed.Write(f, formSeeds())
	g := &Gateway{cfg: Config{Identity: acceptAll{}, Logger: slog.New(slog.DiscardHandler)}, requests: newRequestSlots()}
	g.routes.Store(&routes{}) // no trusted proxies
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/pact/token", bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer a.b.c")
		r.Header.Set("Content-Type", contentType)
		rec := httptest.NewRecorder()
		_, release, ok := g.oauthIdentity(rec, r)
		if ok {
			release()
		}

		want, wantOK := expectForm(contentType, body)
		if !ok {
			if wantOK {
				t.Fatalf("refused a form the rules accept: %s", rec.Body.Bytes())
			}
			var out map[string]string
			if rec.Code != http.StatusBadRequest || rec.Header().Get("Cache-Control") != "no-store" ||
				json.Unmarshal(rec.Body.Bytes(), &out) != nil || out["error"] != "invalid_request" || out["error_description"] == "" {
				t.Fatalf("refusal is not a 400 invalid_request in JSON: %d %q", rec.Code, rec.Body.Bytes())
			}
			return
		}
		if !wantOK {
			t.Fatalf("accepted a form the rules refuse: %q", r.PostForm)
		}
		if rec.Body.Len() != 0 {
			t.Fatalf("accepted, but wrote %q", rec.Body.Bytes())
		}
		if len(r.PostForm) != len(want) {
			t.Fatalf("form %q, want %q", r.PostForm, want)
		}
		for k, v := range want {
			if got := r.PostForm[k]; len(got) != 1 || got[0] != v[0] {
				t.Fatalf("%q = %q, want %q", k, got, v)
			}
		}
	})
}

// expectForm is the rules of oauthIdentity read on their own: a form content type, a body of at
// most 16 KiB that url.ParseQuery reads without error, no parameter given twice.
func expectForm(contentType string, body []byte) (url.Values, bool) {
	if !strings.HasPrefix(strings.ToLower(contentType), "application/x-www-form-urlencoded") {
		return nil, false
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, false
	}
	if mt != "application/x-www-form-urlencoded" {
		return url.Values{}, true // not read as a form: nothing in it
	}
	if len(body) > maxFormBytes {
		return nil, false
	}
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, false
	}
	for _, vs := range v {
		if len(vs) > 1 {
			return nil, false
		}
	}
	return v, true
}
