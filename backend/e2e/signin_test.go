package e2e

import (
	"bytes"
	"crypto/tls"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aether/aether/backend/cli"
	"github.com/aether/aether/backend/node"
)

// adminHTTP is a browser-less client of the admin listener that follows no redirects.
func adminHTTP() *http.Client {
	return &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, // the node's self-signed certificate
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// visit GETs u with the headers of a browser navigation from site ("none": typed or opened
// from outside a page; "cross-site": a link on another site).
func visit(t *testing.T, u, site string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Sec-Fetch-Site", site)
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	req.Header.Set("Sec-Fetch-Dest", "document")
	resp, err := adminHTTP().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func sessionCookie(resp *http.Response) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == "__Host-aether_session" {
			return c
		}
	}
	return nil
}

func adminToken(t *testing.T, dataDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// nodeAPI calls the node API with a bearer token and returns the status.
func nodeAPI(t *testing.T, n *node.Node, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+n.Addresses().API+"/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestOwnerSignIn: the admin token never travels in a URL or a log line; a sign-in link carries
// a one-time code; nobody else's guesses lock the owner out; `aether admin new-token` ends
// every session while the node runs (docs/threats.md, A1–A7).
func TestOwnerSignIn(t *testing.T) {
	t.Parallel()
	var log lockedBuffer
	e := newEnv(t, withNode(func(o *node.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}))
	token := adminToken(t, e.dataDir)
	first := token
	var codes []string // every code the node handed out

	link := func() string {
		l := e.n.SignInURL()
		u, err := url.Parse(l)
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, u.Query().Get("code"))
		return l
	}

	t.Run("A1 the sign-in link carries a one-time code, not the token", func(t *testing.T) {
		l := link()
		if strings.Contains(l, token) || !strings.HasPrefix(l, "https://"+e.n.Addresses().Admin+"/login?code=") {
			t.Fatalf("sign-in link %q", l)
		}
		if resp := visit(t, l, "none"); resp.StatusCode != http.StatusSeeOther || sessionCookie(resp) == nil {
			t.Fatalf("first use: %s", resp.Status)
		}
		if resp := visit(t, l, "none"); resp.StatusCode != http.StatusForbidden || sessionCookie(resp) != nil {
			t.Fatalf("second use: %s, want 403 without a session", resp.Status)
		}
	})

	t.Run("A3 the admin token in a GET query is refused", func(t *testing.T) {
		resp := visit(t, "https://"+e.n.Addresses().Admin+"/login?token="+url.QueryEscape(token), "none")
		if resp.StatusCode != http.StatusBadRequest || sessionCookie(resp) != nil {
			t.Fatalf("token in the URL: %s, want 400 without a session", resp.Status)
		}
	})

	t.Run("A5 ten cross-site navigations with wrong codes, then the owner's real link still signs in", func(t *testing.T) {
		base := "https://" + e.n.Addresses().Admin + "/login?code="
		for i := range 10 {
			if resp := visit(t, base+"wrong"+strings.Repeat("x", i), "cross-site"); resp.StatusCode != http.StatusForbidden {
				t.Fatalf("cross-site attempt %d: %s, want 403", i, resp.Status)
			}
		}
		// They used none of the budget: a local wrong code is still only wrong, not 429.
		if resp := visit(t, base+"local-guess", "none"); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("after the cross-site attempts a local guess got %s, want 403", resp.Status)
		}
		// Burn the budget from this machine; the owner's link still signs in, from anywhere.
		for range 10 {
			visit(t, base+"burn", "none")
		}
		if resp := visit(t, base+"one-more", "none"); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("over the budget: %s, want 429 with Retry-After", resp.Status)
		}
		for _, site := range []string{"cross-site", "none"} {
			if resp := visit(t, link(), site); resp.StatusCode != http.StatusSeeOther || sessionCookie(resp) == nil {
				t.Fatalf("the owner's link (%s) after the flood: %s", site, resp.Status)
			}
		}
	})

	t.Run("A6 aether admin new-token rotates the token and ends every session while the node runs", func(t *testing.T) {
		resp := visit(t, link(), "none")
		old := sessionCookie(resp)
		unused := link()
		if nodeAPI(t, e.n, token) != http.StatusOK {
			t.Fatal("the node API refuses the current token")
		}
		var out, errb bytes.Buffer
		if code := cli.Main([]string{"admin", "new-token", "--data-dir", e.dataDir}, cli.Env{Stdout: &out, Stderr: &errb}); code != 0 {
			t.Fatalf("aether admin new-token: %d %s%s", code, out.String(), errb.String())
		}
		fresh := adminToken(t, e.dataDir)
		if fresh == token || strings.Contains(out.String(), fresh) {
			t.Fatalf("new token: same as the old one, or printed: %q", out.String())
		}
		if fi, err := os.Stat(filepath.Join(e.dataDir, "admin.token")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("admin.token mode: %v %v", fi.Mode(), err)
		}
		req, _ := http.NewRequest("GET", "https://"+e.n.Addresses().Admin+"/api/session", nil)
		req.AddCookie(old)
		r, err := adminHTTP().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusUnauthorized {
			t.Fatalf("old session cookie after the rotation: %s, want 401", r.Status)
		}
		// Refused: 403, or 429 while A5's guesses still fill the budget (only a live code passes that).
		if resp := visit(t, unused, "none"); resp.StatusCode == http.StatusSeeOther || sessionCookie(resp) != nil {
			t.Fatalf("a link minted before the rotation signed in: %s", resp.Status)
		}
		if got := nodeAPI(t, e.n, token); got != http.StatusUnauthorized {
			t.Fatalf("old token on /v1: %d, want 401", got)
		}
		if got := nodeAPI(t, e.n, fresh); got != http.StatusOK {
			t.Fatalf("new token on /v1: %d, want 200", got)
		}
		adminClientAt(t, e.n.Addresses().Admin, fresh) // the sign-in form takes the new token
		token = fresh
	})

	t.Run("A7 aether admin link prints a working one-time link", func(t *testing.T) {
		var out, errb bytes.Buffer
		if code := cli.Main([]string{"admin", "link", "--data-dir", e.dataDir}, cli.Env{Stdout: &out, Stderr: &errb}); code != 0 {
			t.Fatalf("aether admin link: %d %s", code, errb.String())
		}
		l := strings.Fields(out.String())[0]
		u, _ := url.Parse(l)
		codes = append(codes, u.Query().Get("code"))
		if resp := visit(t, l, "none"); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("the printed link: %s", resp.Status)
		}
	})

	t.Run("A4 the node's log holds neither the admin token nor a sign-in code", func(t *testing.T) {
		link() // one more, never used: live while the log is read
		got := log.String()
		if !strings.Contains(got, "admin session started") {
			t.Fatalf("the log did not capture the sign-ins:\n%s", got)
		}
		for _, secret := range append([]string{first, adminToken(t, e.dataDir)}, codes...) {
			if secret == "" || strings.Contains(got, secret) {
				t.Fatalf("the log holds a secret %q (or a code was empty)", secret)
			}
		}
		// Nor any other code (one minted at start, say), nor a 256-bit secret in any form.
		if m := regexp.MustCompile(`code=|[A-Za-z0-9_-]{43}`).FindString(got); m != "" {
			t.Fatalf("the log holds %q:\n%s", m, got)
		}
	})
}
