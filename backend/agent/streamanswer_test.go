package agent

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestStreamAnswers: a plain JSON-RPC error answering a streaming call reaches a2a-go's client
// as the stream's one event; any other answer passes as it came.
func TestStreamAnswers(t *testing.T) {
	const rpcErr = "{\n  \"jsonrpc\": \"2.0\", \"id\": 7,\n  \"error\": {\"code\": -32004, \"message\": \"the task is completed\"}\n}\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, rpcErr)
	}))
	defer srv.Close()
	call := func(accept string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader("{}"))
		req.Header.Set("Accept", accept)
		resp, err := (&http.Client{Transport: StreamAnswers(nil)}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	resp, body := call("text/event-stream")
	want := `data: {"jsonrpc":"2.0","id":7,"error":{"code":-32004,"message":"the task is completed"}}` + "\n\n"
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || body != want {
		t.Errorf("streaming call: %q %q, want %q", ct, body, want)
	}
	resp, body = call("application/json")
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" || body != rpcErr {
		t.Errorf("plain call: %q %q, want it as it came", ct, body)
	}
}
