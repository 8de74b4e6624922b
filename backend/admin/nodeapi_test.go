package admin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// nodeAPI is the node API on a plain HTTP loopback listener, as the node binds it.
func nodeAPI(t *testing.T) (*fakeBackend, *httptest.Server) {
	t.Helper()
	e := newEnv(t)
	ts := httptest.NewServer(e.srv.NodeHandler())
	t.Cleanup(ts.Close)
	return e.b, ts
}

func nodeCall(t *testing.T, ts *httptest.Server, method, path string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	r, err := http.NewRequest(method, ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			r.Host = v
			continue
		}
		r.Header.Set(k, v)
	}
	resp, err := ts.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, string(data)
}

func TestNodeAPI(t *testing.T) {
	b, ts := nodeAPI(t)
	bearer := map[string]string{"Authorization": "Bearer " + testToken}

	t.Run("S8 no token, a wrong one or a session cookie gets 401 on every route", func(t *testing.T) {
		for _, rt := range []struct{ method, path string }{
			{"GET", "/v1/status"}, {"GET", "/v1/consent"}, {"GET", "/v1/grants"}, {"POST", "/v1/grants/g1/revoke"},
			{"POST", "/v1/gateway/pause"}, {"POST", "/v1/gateway/resume"}, {"GET", "/v1/runtime"}, {"GET", "/v1/nope"},
		} {
			for name, hdr := range map[string]map[string]string{
				"none":   nil,
				"wrong":  {"Authorization": "Bearer " + strings.Repeat("A", len(testToken))},
				"basic":  {"Authorization": "Basic " + testToken},
				"cookie": {"Cookie": CookieName + "=" + testToken},
			} {
				resp, body := nodeCall(t, ts, rt.method, rt.path, hdr)
				if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" || jsonBody(t, body)["error"] == "" {
					t.Errorf("%s %s (%s): %d %s", rt.method, rt.path, name, resp.StatusCode, body)
				}
			}
		}
		for _, name := range []string{"Status", "Pending", "Grants", "Revoke", "SetPaused", "Runtime"} {
			if n := b.count(name); n != 0 {
				t.Errorf("backend %s called %d times", name, n)
			}
		}
	})

	t.Run("a Host that is not loopback is misdirected", func(t *testing.T) {
		for _, host := range []string{"evil.example", "evil.example:8080", "10.0.0.1:80"} {
			resp, body := nodeCall(t, ts, "GET", "/v1/status", map[string]string{"Authorization": bearer["Authorization"], "Host": host})
			if resp.StatusCode != http.StatusMisdirectedRequest {
				t.Errorf("Host %q: %d %s", host, resp.StatusCode, body)
			}
		}
		resp, body := nodeCall(t, ts, "GET", "/v1/status", map[string]string{"Authorization": bearer["Authorization"], "Host": "localhost:1"})
		wantStatus(t, resp, body, http.StatusOK)
	})

	t.Run("the routes answer as the admin API does", func(t *testing.T) {
		resp, body := nodeCall(t, ts, "GET", "/v1/status", bearer)
		wantStatus(t, resp, body, http.StatusOK)
		if m := jsonBody(t, body); m["pending"] != 1.0 || m["gateway"].(map[string]any)["running"] != true {
			t.Errorf("status %s", body)
		}
		resp, body = nodeCall(t, ts, "GET", "/v1/consent", bearer)
		wantStatus(t, resp, body, http.StatusOK)
		if rs := jsonBody(t, body)["requests"].([]any); len(rs) != 1 {
			t.Errorf("consent %s", body)
		}
		resp, body = nodeCall(t, ts, "GET", "/v1/grants", bearer)
		wantStatus(t, resp, body, http.StatusOK)
		if gs := jsonBody(t, body)["grants"].([]any); len(gs) != 1 {
			t.Errorf("grants %s", body)
		}
		resp, body = nodeCall(t, ts, "POST", "/v1/grants/g1/revoke", bearer)
		wantStatus(t, resp, body, http.StatusOK)
		if g := jsonBody(t, body)["grant"].(map[string]any); g["status"] != "revoked" {
			t.Errorf("revoke %s", body)
		}
		for path, want := range map[string]bool{"/v1/gateway/pause": true, "/v1/gateway/resume": false} {
			resp, body = nodeCall(t, ts, "POST", path, bearer)
			wantStatus(t, resp, body, http.StatusOK)
			if jsonBody(t, body)["paused"] != want {
				t.Errorf("%s: %s", path, body)
			}
		}
		resp, body = nodeCall(t, ts, "GET", "/v1/runtime", bearer)
		wantStatus(t, resp, body, http.StatusOK)
		if m := jsonBody(t, body); m["goroutines"] != 7.0 || m["heapBytes"] != float64(1<<20) {
			t.Errorf("runtime %s", body)
		}
	})

	t.Run("errors are the admin API's", func(t *testing.T) {
		for _, c := range []struct {
			method, path string
			code         int
		}{
			{"POST", "/v1/grants/nope/revoke", http.StatusNotFound},
			{"GET", "/v1/nope", http.StatusNotFound},
			{"DELETE", "/v1/status", http.StatusMethodNotAllowed},
			{"POST", "/v1/runtime", http.StatusMethodNotAllowed},
			{"GET", "/api/status", http.StatusNotFound}, // the admin API is not served here
		} {
			resp, body := nodeCall(t, ts, c.method, c.path, bearer)
			if resp.StatusCode != c.code || jsonBody(t, body)["error"] == "" {
				t.Errorf("%s %s: %d %s, want %d", c.method, c.path, resp.StatusCode, body, c.code)
			}
		}
		b.mu.Lock()
		b.noGateway = true
		b.mu.Unlock()
		resp, body := nodeCall(t, ts, "POST", "/v1/gateway/pause", bearer)
		if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(jsonBody(t, body)["error"].(string), "not running") {
			t.Errorf("pause without a gateway: %d %s", resp.StatusCode, body)
		}
	})
}
