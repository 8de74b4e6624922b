package e2e

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

const pactExtension = "urn:pact:extension:delegation:v1"

// TestExtensionActivation: A2A-Extensions as A2A 1.0 has it (§3.2.6, §4.6;
// docs/pact-extension.md), on both bindings of a real node. The answer names
// the PACT extension exactly when the request asked for it, in one header field
// or several, comma-separated, among other URIs; another version is not
// activated; the answer is the same either way but for that header. The
// AUTH_REQUIRED status message and the receipt artifact name the extension that
// contributed them.
func TestExtensionActivation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.agent("alice")
	calls := map[a2a.TransportProtocol]func(hdr http.Header) *http.Response{
		a2a.TransportProtocolJSONRPC: func(hdr http.Header) *http.Response {
			return alice.do(t, "POST", "/a2a/review", []byte(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`), hdr)
		},
		a2a.TransportProtocolHTTPJSON: func(hdr http.Header) *http.Response {
			return alice.do(t, "GET", "/a2a/review/tasks", nil, hdr)
		},
	}
	cases := []struct {
		name   string
		values []string
		active bool
	}{
		{"not asked for", nil, false},
		{"asked for", []string{pactExtension}, true},
		{"in a comma-separated list with spaces", []string{"https://example.com/ext/geo/v1 ,  " + pactExtension + ", https://example.com/ext/b/v2"}, true},
		{"in the second of two header fields", []string{"https://example.com/ext/geo/v1", pactExtension}, true},
		{"another version only", []string{"urn:pact:extension:delegation:v2"}, false},
		{"a prefix of the URI only", []string{"urn:pact:extension:delegation"}, false},
	}
	for _, b := range bothBindings {
		t.Run(string(b), func(t *testing.T) {
			var bodies [][]byte
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					hdr := http.Header{}
					for _, v := range c.values {
						hdr.Add("A2A-Extensions", v)
					}
					resp := calls[b](hdr)
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						t.Fatalf("ListTasks: %d %s", resp.StatusCode, body)
					}
					got := resp.Header.Values("A2A-Extensions")
					if c.active && !slices.Equal(got, []string{pactExtension}) || !c.active && len(got) != 0 {
						t.Errorf("A2A-Extensions in the answer %q; want %v", got, map[bool]string{true: pactExtension, false: "none"}[c.active])
					}
					if !slices.Contains(resp.Header.Values("Vary"), "A2A-Extensions") {
						t.Errorf("Vary %q does not name A2A-Extensions", resp.Header.Values("Vary"))
					}
					bodies = append(bodies, body)
				})
			}
			for i := 1; i < len(bodies); i++ {
				if !bytes.Equal(bodies[i], bodies[0]) {
					t.Errorf("the answer changed with A2A-Extensions:\n%s\n%s", bodies[0], bodies[i])
				}
			}

			t.Run("an error answer says it too", func(t *testing.T) {
				anon := e.agent("")
				resp := anon.do(t, "POST", "/a2a/review", []byte(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`),
					http.Header{"A2A-Extensions": {pactExtension}})
				resp.Body.Close()
				if resp.StatusCode != 401 || resp.Header.Get("A2A-Extensions") != pactExtension {
					t.Errorf("no identity: %d, A2A-Extensions %q", resp.StatusCode, resp.Header.Get("A2A-Extensions"))
				}
			})

			t.Run("a stream says it too", func(t *testing.T) {
				msg := `{"message":{"messageId":"m-` + string(b) + `","role":"ROLE_USER","parts":[{"text":"hi"}]}}`
				path, body := "/a2a/review/message:stream", msg
				if b == a2a.TransportProtocolJSONRPC {
					path, body = "/a2a/review", `{"jsonrpc":"2.0","id":2,"method":"SendStreamingMessage","params":`+msg+`}`
				}
				resp := alice.do(t, "POST", path, []byte(body), http.Header{"A2A-Extensions": {pactExtension}})
				events, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("A2A-Extensions") != pactExtension {
					t.Errorf("stream: %d %q, A2A-Extensions %q\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("A2A-Extensions"), events)
				}
			})

			t.Run("AUTH_REQUIRED and the receipt name the extension", func(t *testing.T) {
				bob := e.agent("bob-" + string(b))
				c := bob.client("review", b)
				waiting := bob.send(c, "", "Review main.go please")
				authData(t, waiting)
				if got := waiting.Status.Message.Extensions; !slices.Equal(got, []string{pactExtension}) {
					t.Errorf("AUTH_REQUIRED status message extensions %q", got)
				}
				bob.allow()
				done := bob.send(c, waiting.ID, "Review main.go please")
				var receipt *a2a.Artifact
				for _, a := range done.Artifacts {
					if a.Name == "receipt" {
						receipt = a
					}
				}
				if done.Status.State != a2a.TaskStateCompleted || receipt == nil || !slices.Equal(receipt.Extensions, []string{pactExtension}) {
					t.Errorf("delegated turn %s, receipt artifact %+v; want its extensions [%s]", done.Status.State, receipt, pactExtension)
				}
			})
		})
	}
}

// do sends one request with the agent's identity (none for an agent without
// a subject) and the given headers.
func (a *agent) do(t *testing.T, method, path string, body []byte, hdr http.Header) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, a.e.publicURL+path, bytes.NewReader(body))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.sub != "" {
		req.Header.Set("Authorization", "Bearer "+a.identityToken())
	}
	for k, vs := range hdr {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}
