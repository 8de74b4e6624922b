package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// raw sends one request to the gateway and decodes a JSON answer.
func (a *agent) raw(method, path, contentType string, body []byte, hdr map[string]string) (*http.Response, map[string]any) {
	a.e.t.Helper()
	req, _ := http.NewRequest(method, a.e.publicURL+path, bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if a != nil && a.sub != "" {
		req.Header.Set("Authorization", "Bearer "+a.identityToken())
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var m map[string]any
	json.Unmarshal(data, &m)
	return resp, m
}

func rpcCode(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

const sendBody = `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`

func TestHostileBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.agent("alice")
	rpc := func(t *testing.T, body []byte, hdr map[string]string) (*http.Response, map[string]any) {
		t.Helper()
		return alice.raw("POST", "/a2a/review", "application/json", body, hdr)
	}
	wantRPC := func(t *testing.T, body string, code float64) map[string]any {
		t.Helper()
		resp, m := rpc(t, []byte(body), nil)
		// A refused JSON-RPC request is a JSON-RPC error in HTTP 200, the gateway's own as a2a-go's.
		if resp.StatusCode != http.StatusOK || rpcCode(m) != code {
			t.Fatalf("status %d code %v, want JSON-RPC %v in HTTP 200 (body %v)", resp.StatusCode, rpcCode(m), code, m)
		}
		return m
	}

	t.Run("R1 body over the limit", func(t *testing.T) {
		big := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"` + strings.Repeat("a", 5<<20) + `"}]}}}`
		resp, m := rpc(t, []byte(big), nil)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || rpcCode(m) != -32600 {
			t.Fatalf("status %d code %v", resp.StatusCode, rpcCode(m))
		}
	})
	t.Run("R2 gzip bomb", func(t *testing.T) {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(bytes.Repeat([]byte(" "), 50<<20))
		zw.Close()
		resp, _ := rpc(t, buf.Bytes(), map[string]string{"Content-Encoding": "gzip"})
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Fatalf("status %d, want 415 (never decompressed)", resp.StatusCode)
		}
	})
	t.Run("R3 nesting depth 5000", func(t *testing.T) {
		deep := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":` + strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000) + "}"
		wantRPC(t, deep, -32600)
	})
	t.Run("R4 invalid UTF-8", func(t *testing.T) {
		wantRPC(t, strings.Replace(sendBody, `"hi"`, "\"h\xffi\"", 1), -32700)
	})
	t.Run("R5 not JSON, truncated, trailing garbage", func(t *testing.T) {
		for _, b := range []string{"hello", sendBody[:40], sendBody + "garbage", sendBody + `{"x":1}`} {
			wantRPC(t, b, -32700)
		}
	})
	t.Run("R6 missing or wrong jsonrpc version", func(t *testing.T) {
		wantRPC(t, strings.Replace(sendBody, `"jsonrpc":"2.0",`, "", 1), -32600)
		wantRPC(t, strings.Replace(sendBody, `"2.0"`, `"1.0"`, 1), -32600)
	})
	t.Run("R7 unknown method", func(t *testing.T) {
		wantRPC(t, strings.Replace(sendBody, "SendMessage", "Exfiltrate", 1), -32601)
	})
	t.Run("R8 params of the wrong type or missing a field", func(t *testing.T) {
		wantRPC(t, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":[1,2]}`, -32602)
		wantRPC(t, `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"historyLength":"x"}}`, -32602)
	})
	t.Run("R9 batch", func(t *testing.T) {
		for _, b := range []string{"[" + sendBody + "," + sendBody + "]", "[]"} {
			m := wantRPC(t, b, -32600)
			if id, ok := m["id"]; !ok || id != nil {
				t.Errorf("batch error id = %v, want null", id)
			}
		}
	})
	t.Run("R10 notification runs nothing", func(t *testing.T) {
		wantRPC(t, strings.Replace(sendBody, `"id":1,`, "", 1), -32600)
		if n := e.codexRuns(); n != 0 {
			t.Fatalf("a notification ran codex %d times", n)
		}
	})
	t.Run("R11 id of the wrong type or too long", func(t *testing.T) {
		for _, id := range []string{`{"a":1}`, `[1]`, `1.5`, `"` + strings.Repeat("x", 1<<20) + `"`} {
			wantRPC(t, strings.Replace(sendBody, `"id":1`, `"id":`+id, 1), -32600)
		}
	})
	t.Run("R12 duplicate or case-variant keys", func(t *testing.T) {
		wantRPC(t, strings.Replace(sendBody, `"method":"SendMessage"`, `"method":"SendMessage","method":"GetTask"`, 1), -32600)
		wantRPC(t, strings.Replace(sendBody, `"method":"SendMessage"`, `"method":"SendMessage","Method":"GetTask"`, 1), -32600)
	})
	t.Run("R13 wrong content type", func(t *testing.T) {
		resp, m := alice.raw("POST", "/a2a/review", "text/plain", []byte(sendBody), nil)
		if resp.StatusCode != http.StatusUnsupportedMediaType || rpcCode(m) != -32005 {
			t.Fatalf("status %d code %v", resp.StatusCode, rpcCode(m))
		}
	})
	t.Run("R14 file part of 100 MB base64", func(t *testing.T) {
		// Refused by the body cap while reading, long before any base64 is decoded.
		pr, pw := io.Pipe()
		go func() {
			pw.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"raw":"`))
			chunk := bytes.Repeat([]byte("QUFB"), 1<<18)
			for i := 0; i < 100; i++ {
				if _, err := pw.Write(chunk); err != nil {
					return
				}
			}
			pw.Write([]byte(`"}]}}}`))
			pw.Close()
		}()
		req, _ := http.NewRequest("POST", e.publicURL+"/a2a/review", pr)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+alice.identityToken())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("the node did not answer: %v", err)
		}
		resp.Body.Close()
		pr.CloseWithError(io.EOF)
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d, want 413", resp.StatusCode)
		}
	})
	t.Run("REST bodies get the REST error shape", func(t *testing.T) {
		resp, m := alice.raw("POST", "/a2a/review/message:send", "application/json", []byte(`{"message":{"messageId":"m","messageId":"n"}}`), nil)
		errObj, _ := m["error"].(map[string]any)
		if resp.StatusCode != 400 || errObj["status"] != "INVALID_ARGUMENT" {
			t.Fatalf("status %d body %v", resp.StatusCode, m)
		}
	})
}

func TestIdentityRequired(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	anon := &agent{e: e}
	bad := e.agent("x")
	cases := []struct {
		name   string
		a      *agent
		hdr    map[string]string
		method string
		path   string
		body   string
		rest   bool
	}{
		{name: "JSON-RPC without a token", a: anon, method: "POST", path: "/a2a/review", body: sendBody},
		{name: "JSON-RPC with a bad token", a: anon, hdr: map[string]string{"Authorization": "Bearer not.a.jwt"}, method: "POST", path: "/a2a/review", body: sendBody},
		{name: "REST without a token", a: anon, method: "GET", path: "/a2a/review/tasks", rest: true},
		{name: "REST with a token for another audience", a: bad, method: "GET", path: "/a2a/review/tasks", rest: true},
		{name: "trailing slash JSON-RPC without a token", a: anon, method: "POST", path: "/a2a/review/", body: sendBody},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hdr := c.hdr
			if c.a == bad {
				hdr = map[string]string{"Authorization": "Bearer " + e.issuer.Token("x", "https://another.node.example")}
			}
			resp, m := c.a.raw(c.method, c.path, "application/json", []byte(c.body), hdr)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", resp.StatusCode)
			}
			www := resp.Header.Get("WWW-Authenticate")
			if !strings.HasPrefix(www, `Bearer realm="pact", error="invalid_token", error_description="`) {
				t.Errorf("WWW-Authenticate = %q", www)
			}
			if c.rest {
				if errObj, _ := m["error"].(map[string]any); errObj["status"] != "UNAUTHENTICATED" {
					t.Errorf("REST body %v", m)
				}
			} else if m["jsonrpc"] != "2.0" || rpcCode(m) != -31401 {
				t.Errorf("JSON-RPC body %v", m)
			}
		})
	}
	t.Run("D1 device authorization without identity JWT", func(t *testing.T) {
		resp, m := anon.raw("POST", "/pact/device_authorization", "application/x-www-form-urlencoded", []byte("scope=review:read_only"), nil)
		if resp.StatusCode != 401 || m["error"] != "invalid_client" || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("status %d body %v", resp.StatusCode, m)
		}
	})
	t.Run("J26 Authorization header of 1 MB", func(t *testing.T) {
		resp, _ := anon.raw("POST", "/a2a/review", "application/json", []byte(sendBody), map[string]string{"Authorization": "Bearer " + strings.Repeat(".", 1<<20)})
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge && resp.StatusCode != 401 {
			t.Fatalf("status %d, want 431 or 401", resp.StatusCode)
		}
	})
	t.Run("G9 delegation token used as identity", func(t *testing.T) {
		tok := e.delegate(t, e.agent("mallory"), "review")
		resp, _ := anon.raw("POST", "/a2a/review", "application/json", []byte(sendBody), map[string]string{"Authorization": "Bearer " + tok})
		if resp.StatusCode != 401 {
			t.Fatalf("status %d, want 401", resp.StatusCode)
		}
	})
	t.Run("unknown brand is 404", func(t *testing.T) {
		resp, _ := e.agent("alice").raw("POST", "/a2a/nope", "application/json", []byte(sendBody), nil)
		if resp.StatusCode != 404 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		resp, _ = anon.raw("GET", "/a2a/nope/.well-known/agent-card.json", "", nil, nil)
		if resp.StatusCode != 404 {
			t.Fatalf("card status %d", resp.StatusCode)
		}
	})
}

// delegate runs the device flow for an agent and the owner allows it; it
// returns the delegation token.
func (e *env) delegate(t *testing.T, a *agent, brand string) string {
	t.Helper()
	var scope string
	for _, s := range e.card(brand).SecuritySchemes {
		_ = s
	}
	scope = map[string]string{"review": "review:read_only"}[brand]
	if scope == "" {
		scope = brand + ":scope"
	}
	code, start := a.oauthForm(e.publicURL+"/pact/device_authorization", map[string][]string{"scope": {scope}, "brand": {brand}})
	if code != 200 {
		t.Fatalf("device authorization: %d %v", code, start)
	}
	if c, out := e.admin.decide(start["user_code"].(string), "allow"); c != 200 {
		t.Fatalf("allow: %d %v", c, out)
	}
	code, tok := a.oauthForm(e.publicURL+"/pact/token", map[string][]string{
		"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {start["device_code"].(string)}})
	if code != 200 {
		t.Fatalf("token: %d %v", code, tok)
	}
	return tok["access_token"].(string)
}

func TestCardCaching(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.publicURL + "/a2a/review/.well-known/agent-card.json"
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	if etag == "" || !strings.Contains(resp.Header.Get("Cache-Control"), "max-age=") {
		t.Fatalf("ETag %q Cache-Control %q", etag, resp.Header.Get("Cache-Control"))
	}
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("If-None-Match", etag)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match: %d, want 304", resp.StatusCode)
	}
	lastMod := resp.Header.Get("Last-Modified")
	if _, err := http.ParseTime(lastMod); err != nil {
		t.Fatalf("Last-Modified %q: %v", lastMod, err)
	}
	for name, h := range map[string][2]string{
		"If-Modified-Since":                 {"If-Modified-Since", lastMod},
		"If-None-Match wins (matching)":     {"If-None-Match", etag},
		"If-None-Match wins (not matching)": {"If-None-Match", `"other"`},
	} {
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set(h[0], h[1])
		req.Header.Set("If-Modified-Since", lastMod)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := http.StatusNotModified
		if h[1] == `"other"` {
			want = http.StatusOK
		}
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", name, resp.StatusCode, want)
		}
	}
	v1 := e.card("review").Version
	e.restart()
	if v2 := e.card("review").Version; v2 != v1 {
		t.Fatalf("card version changed across a restart with the same content: %s → %s", v1, v2)
	}
	if resp, err := http.Head(u); err != nil || resp.Header.Get("Last-Modified") != lastMod || resp.Header.Get("ETag") != etag {
		t.Fatalf("after a restart with the same content: Last-Modified %q ETag %q, want %q %q (%v)",
			resp.Header.Get("Last-Modified"), resp.Header.Get("ETag"), lastMod, etag, err)
	}
	// Editing the brand changes the card's content, so its version.
	var out map[string]any
	brand := map[string]any{"id": "review", "name": "Code review", "description": "Reviews code, now faster.", "capability": "review",
		"workspace": "workspace", "accessMode": "read_only", "scope": map[string]string{"id": "review:read_only", "description": "Review code (read only)"}}
	if code := e.admin.do("PUT", "/api/brands/review", brand, &out); code != 200 {
		t.Fatalf("PUT brand: %d %v", code, out)
	}
	c := e.card("review")
	if c.Version == v1 || c.Description != "Reviews code, now faster." {
		t.Fatalf("after the edit: version %s (was %s), description %q", c.Version, v1, c.Description)
	}

}

// TestFreeFormKeys: inside metadata and a part's data, which A2A 1.0 makes a
// google.protobuf.Struct or Value, keys that differ only in case are two keys
// and reach the turn as such, on both bindings; an exact repeat there, and a
// case variant of a member a2a-go decodes into a struct (metadata itself among
// them), are still refused (threats.md R12, R18).
func TestFreeFormKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, b := range bothBindings {
		t.Run(string(b), func(t *testing.T) {
			alice := e.agent("alice-" + strings.ToLower(strings.ReplaceAll(string(b), "+", "")))
			alice.allow()
			send := func(message string) (*http.Response, map[string]any) {
				hdr := map[string]string{"PACT-Delegation": alice.delegation}
				if b == a2a.TransportProtocolJSONRPC {
					return alice.raw("POST", "/a2a/review", "application/json",
						[]byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":`+message+`}}`), hdr)
				}
				return alice.raw("POST", "/a2a/review/message:send", "application/json", []byte(`{"message":`+message+`}`), hdr)
			}
			refused := func(t *testing.T, message string) {
				t.Helper()
				resp, m := send(message)
				if b == a2a.TransportProtocolJSONRPC && (resp.StatusCode != 200 || rpcCode(m) != -32600) ||
					b == a2a.TransportProtocolHTTPJSON && resp.StatusCode != 400 {
					t.Fatalf("status %d body %v; want it refused as R12", resp.StatusCode, m)
				}
			}

			t.Run("R18 keys that differ only in case inside metadata and data are two keys", func(t *testing.T) {
				marker := "free-form-" + alice.sub
				resp, m := send(`{"messageId":"m-` + marker + `","role":"ROLE_USER","metadata":{"trace":"a","Trace":"b"},
					"parts":[{"text":"` + marker + `"},{"data":{"k":1,"K":2},"metadata":{"p":1,"P":2}}]}`)
				if resp.StatusCode != 200 || m["error"] != nil {
					t.Fatalf("status %d body %v; want the turn to run", resp.StatusCode, m)
				}
				if prompt := e.codexStarted(marker).Prompt; !strings.Contains(prompt, "K:2") || !strings.Contains(prompt, "k:1") {
					t.Errorf("the turn's prompt %q lost one of the data keys k and K", prompt)
				}
			})
			t.Run("R18 a key repeated exactly inside metadata is refused", func(t *testing.T) {
				refused(t, `{"messageId":"m2","role":"ROLE_USER","metadata":{"trace":"a","trace":"b"},"parts":[{"text":"hi"}]}`)
			})
			t.Run("R18 a case variant of metadata itself is refused", func(t *testing.T) {
				refused(t, `{"messageId":"m3","role":"ROLE_USER","metadata":{"a":1},"Metadata":{"b":2},"parts":[{"text":"hi"}]}`)
			})
		})
	}
}
