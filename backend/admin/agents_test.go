package admin

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// mint asks the node API for an identity token with the given headers.
func mint(t *testing.T, ts *httptest.Server, hdr map[string]string) *http.Response {
	t.Helper()
	r, _ := http.NewRequest("POST", ts.URL+"/v1/agents/claude-desktop/token", strings.NewReader(`{"audience":"https://other.example"}`))
	r.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	resp, err := ts.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestMintOnlyWithTheAdminToken(t *testing.T) {
	t.Run("I1 no admin token, a session or the admin UI mints nothing", func(t *testing.T) {
		e := newEnv(t)
		ts := httptest.NewServer(e.srv.NodeHandler())
		defer ts.Close()
		cookie, csrf := e.signIn()
		for name, hdr := range map[string]map[string]string{
			"none":    nil,
			"wrong":   {"Authorization": "Bearer " + strings.Repeat("A", len(testToken))},
			"session": {"Cookie": cookie, "X-CSRF-Token": csrf},
		} {
			if resp := mint(t, ts, hdr); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("node API, %s: %d", name, resp.StatusCode)
			}
		}
		// The admin UI has no minting route, even for the signed-in owner: a page the owner
		// opens cannot mint an identity (a token in a browser is a token anyone scripting it has).
		for _, path := range []string{"/api/agents/claude-desktop/token", "/v1/agents/claude-desktop/token"} {
			resp, body := e.call("POST", path, `{"audience":"https://other.example"}`,
				map[string]string{"Cookie": cookie, "X-CSRF-Token": csrf, "Content-Type": "application/json", "Origin": e.origin()})
			if resp.StatusCode == http.StatusOK {
				t.Errorf("admin UI %s minted: %s", path, body)
			}
		}
		if n := e.b.count("MintIdentity"); n != 0 {
			t.Fatalf("the backend minted %d time(s)", n)
		}
		if resp := mint(t, ts, map[string]string{"Authorization": "Bearer " + testToken}); resp.StatusCode != http.StatusOK || e.b.count("MintIdentity") != 1 {
			t.Fatalf("with the admin token: %d", resp.StatusCode)
		}
	})

	t.Run("I3 a stolen node API token mints nothing once the owner makes a new one", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "admin.token")
		tok, err := LoadOrCreateToken(path)
		if err != nil {
			t.Fatal(err)
		}
		e := newEnv(t, func(c *Config) { c.Token, c.TokenFile = tok, path })
		ts := httptest.NewServer(e.srv.NodeHandler())
		defer ts.Close()
		stolen := map[string]string{"Authorization": "Bearer " + tok}
		if resp := mint(t, ts, stolen); resp.StatusCode != http.StatusOK {
			t.Fatalf("before: %d", resp.StatusCode)
		}
		if err := e.srv.RotateToken(); err != nil {
			t.Fatal(err)
		}
		if resp := mint(t, ts, stolen); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("the old token still mints: %d", resp.StatusCode)
		}
	})
}
