package admin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aether/aether/backend/owner"
)

// TestClient: the CLI's client against the real node API on a loopback listener reads owner's
// types back, carries the token, and says which call failed and why.
func TestClient(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.TokenFile = filepath.Join(t.TempDir(), "admin.token") })
	ts := httptest.NewServer(e.srv.NodeHandler())
	t.Cleanup(ts.Close)
	addr := strings.TrimPrefix(ts.URL, "http://")
	c := NewClient(addr, testToken)
	ctx := context.Background()

	st, err := c.Status(ctx)
	if err != nil || st.Pending != 1 || !st.Gateway.Running || len(st.Brands) != 1 || st.Brands[0].ID != "docs" {
		t.Fatalf("Status: %+v, %v", st, err)
	}
	gs, err := c.Grants(ctx)
	if err != nil || len(gs) != 1 || gs[0].ID != "g1" || gs[0].Agent.Subject != "alice" {
		t.Fatalf("Grants: %+v, %v", gs, err)
	}
	g, err := c.Revoke(ctx, "g1")
	if err != nil || g.ID != "g1" || g.Status != "revoked" {
		t.Fatalf("Revoke: %+v, %v", g, err)
	}
	if _, err := c.Revoke(ctx, "nope"); err == nil || !strings.Contains(err.Error(), "POST /v1/grants/nope/revoke: 404 Not Found: ") {
		t.Fatalf("Revoke(nope): %v", err)
	}
	r, err := c.SetFunnel(ctx, true)
	if err != nil || r.Mode != owner.ReachFunnel {
		t.Fatalf("SetFunnel: %+v, %v", r, err)
	}
	if _, err := c.UseFunnelURL(ctx); err == nil || !strings.Contains(err.Error(), "POST /v1/reachability/use: 400 Bad Request: invalid request: not published") {
		t.Fatalf("UseFunnelURL: %v", err)
	}
	link, err := c.SignInLink(ctx)
	if err != nil || !strings.HasPrefix(link.Link, "https://"+e.addr+"/login?code=") || link.ExpiresIn != 300 {
		t.Fatalf("SignInLink: %+v, %v", link, err)
	}
	rot, err := c.RotateToken(ctx)
	if err != nil || !rot.Rotated || !rot.SessionsEnded {
		t.Fatalf("RotateToken: %+v, %v", rot, err)
	}
	// The token it carried is the old one now.
	if _, err := c.Status(ctx); err == nil || !strings.Contains(err.Error(), "GET /v1/status: 401 Unauthorized: the admin token is required") {
		t.Fatalf("Status with the rotated-away token: %v", err)
	}
}

// TestClientBadAnswers: an answer that is not owner's shape is an error naming the call and,
// where the decoder knows it, the field; never a zero value taken for the node's word.
func TestClientBadAnswers(t *testing.T) {
	for _, c := range []struct {
		name, ctype, body string
		code              int
		call              func(*Client) error
		want              []string
	}{
		{"a field of the wrong type", "application/json", `{"grants":[{"id":7}]}`, 200, grantsCall,
			[]string{"GET /v1/grants: the answer does not decode as owner.GrantList", `field "grants.id" is a JSON number, not string`}},
		{"a nested field of the wrong type", "application/json", `{"gateway":{"paused":"yes"}}`, 200, statusCall,
			[]string{"GET /v1/status: the answer does not decode as owner.Status", `field "gateway.paused" is a JSON string, not bool`}},
		{"a field owner has not", "application/json", `{"grants":[],"grant":{}}`, 200, grantsCall,
			[]string{"GET /v1/grants: the answer does not decode as owner.GrantList", `unknown field "grant"`}},
		{"cut short", "application/json", `{"grants":[`, 200, grantsCall,
			[]string{"GET /v1/grants: the answer does not decode as owner.GrantList", "unexpected EOF"}},
		{"two values", "application/json", `{"grants":[]}{"grants":[]}`, 200, grantsCall,
			[]string{"GET /v1/grants: the answer does not decode as owner.GrantList", "data after the answer"}},
		{"not JSON", "application/json", `<html>`, 200, statusCall,
			[]string{"GET /v1/status: the answer does not decode as owner.Status", "not JSON at byte 1"}},
		{"an HTML page", "text/html", `<html>`, 200, statusCall,
			[]string{"GET /v1/status: 200 OK: the answer is \"text/html\", not JSON"}},
		{"an error answer that is not owner.ErrorBody", "application/json", `{"message":"boom"}`, 500, statusCall,
			[]string{"GET /v1/status: 500 Internal Server Error, with an error answer that does not decode"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer "+testToken {
					http.Error(w, "no token", http.StatusUnauthorized)
					return
				}
				w.Header().Set("Content-Type", c.ctype)
				w.WriteHeader(c.code)
				_, _ = w.Write([]byte(c.body))
			}))
			defer ts.Close()
			err := c.call(NewClient(strings.TrimPrefix(ts.URL, "http://"), testToken))
			if err == nil {
				t.Fatalf("%s: no error", c.body)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func grantsCall(c *Client) error { _, err := c.Grants(context.Background()); return err }
func statusCall(c *Client) error { _, err := c.Status(context.Background()); return err }
