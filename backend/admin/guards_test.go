package admin

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The consent-UI rows of docs/threats.md (C1–C12), V6 and S8, each against a real TLS listener.
func TestConsentUIGuards(t *testing.T) {
	t.Run("C1 cross-site form POST approve", func(t *testing.T) {
		e := newEnv(t)
		cookie, csrf := e.signIn()
		form := "userCode=BCDF-GHJK&decision=allow&duration=forever"
		for name, hdr := range map[string]map[string]string{
			// Even holding the cookie and the CSRF token the request is refused for its origin.
			"fetch metadata": with(e.fetchHeaders(cookie, csrf), "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site",
				"Sec-Fetch-Mode", "navigate", "Content-Type", "application/x-www-form-urlencoded"),
			"old browser, Origin only": with(e.fetchHeaders(cookie, csrf), "Origin", "https://evil.example", "Sec-Fetch-Site", "",
				"Content-Type", "application/x-www-form-urlencoded"),
			"opaque origin":           with(e.fetchHeaders(cookie, csrf), "Origin", "null", "Sec-Fetch-Site", ""),
			"evil origin on our port": with(e.fetchHeaders(cookie, csrf), "Origin", "https://evil.example:"+e.port, "Sec-Fetch-Site", ""),
		} {
			resp, body := e.call("POST", "/api/consent/req1/decision", form, hdr)
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s: status %d, want 403; %s", name, resp.StatusCode, body)
			}
		}
		if n := e.b.count("Decide"); n != 0 {
			t.Fatalf("Decide called %d times", n)
		}
		// The same call from the UI itself goes through.
		resp, body := e.call("POST", "/api/consent/req1/decision", decisionBody, e.fetchHeaders(cookie, csrf))
		wantStatus(t, resp, body, http.StatusOK)
	})

	t.Run("C2 other local app same-site", func(t *testing.T) {
		e := newEnv(t)
		cookie, csrf := e.signIn()
		base := e.fetchHeaders(cookie, csrf)
		for name, hdr := range map[string]map[string]string{
			// CrossOriginProtection alone compares hosts only and would let this one through.
			"http on our port":        with(base, "Origin", "http://"+e.addr, "Sec-Fetch-Site", ""),
			"other port":              with(base, "Origin", "https://127.0.0.1:3001", "Sec-Fetch-Site", ""),
			"same-site fetch":         with(base, "Origin", "http://127.0.0.1:3000", "Sec-Fetch-Site", "same-site"),
			"same-site, right origin": with(base, "Sec-Fetch-Site", "same-site"),
			"no Origin at all":        with(base, "Origin", "", "Sec-Fetch-Site", ""),
		} {
			resp, body := e.call("POST", "/api/grants/g1/revoke", "", hdr)
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s: status %d, want 403; %s", name, resp.StatusCode, body)
			}
		}
		// Reads from another site are refused too, whatever the cookie does.
		resp, body := e.call("GET", "/api/grants", "", map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "same-site"})
		wantStatus(t, resp, body, http.StatusForbidden)
		if n := e.b.count("Revoke") + e.b.count("Grants"); n != 0 {
			t.Fatalf("backend called %d times", n)
		}
	})

	t.Run("C3 DNS rebinding Host", func(t *testing.T) {
		e := newEnv(t)
		for _, host := range []string{
			"evil.example:" + e.port,
			"evil.example",
			"127.0.0.1",            // no port
			"127.0.0.1:1",          // another port
			"localhost.:" + e.port, // trailing dot
			"127.0.0.1.nip.io:" + e.port,
			"",
		} {
			for _, path := range []string{"/", "/pact/consent", "/api/session", "/api/consent", e.link()} {
				resp, body := e.raw("GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n")
				if resp.StatusCode != http.StatusMisdirectedRequest && !(host == "" && resp.StatusCode == http.StatusBadRequest) {
					t.Errorf("Host %q %s: status %d, want 421; %s", host, path, resp.StatusCode, body)
				}
				if len(resp.Cookies()) != 0 {
					t.Errorf("Host %q %s: set a cookie", host, path)
				}
			}
		}
		for _, host := range []string{"127.0.0.1:" + e.port, "localhost:" + e.port, "[::1]:" + e.port, "LocalHost:" + e.port} {
			resp, body := e.raw("GET / HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n")
			wantStatus(t, resp, body, http.StatusOK)
		}
		if n := e.b.count("Pending"); n != 0 {
			t.Fatalf("Pending called %d times", n)
		}
	})

	t.Run("C4 local process without session", func(t *testing.T) {
		e := newEnv(t)
		e.signIn() // a session exists, the process just does not have it
		for name, hdr := range map[string]map[string]string{
			"no cookie":       with(e.fetchHeaders("", "forged"), "Cookie", ""),
			"forged cookie":   e.fetchHeaders(CookieName+"=forged", "forged"),
			"token as cookie": e.fetchHeaders(CookieName+"="+testToken, "forged"),
		} {
			resp, body := e.call("POST", "/api/consent/req1/decision", decisionBody, hdr)
			if resp.StatusCode != http.StatusUnauthorized || jsonBody(t, body)["error"] != "sign in required" {
				t.Errorf("%s: %d %s, want 401 sign in required", name, resp.StatusCode, body)
			}
		}
		if n := e.b.count("Decide"); n != 0 {
			t.Fatalf("Decide called %d times", n)
		}
	})

	t.Run("C5 framing blocked", func(t *testing.T) {
		e := newEnv(t)
		cookie, _ := e.signIn()
		check := func(what string, resp *http.Response) {
			t.Helper()
			h := resp.Header
			if h.Get("X-Frame-Options") != "DENY" {
				t.Errorf("%s: X-Frame-Options %q", what, h.Get("X-Frame-Options"))
			}
			want := "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
			if h.Get("Content-Security-Policy") != want {
				t.Errorf("%s: CSP %q", what, h.Get("Content-Security-Policy"))
			}
			if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
				t.Errorf("%s: nosniff %q, referrer %q", what, h.Get("X-Content-Type-Options"), h.Get("Referrer-Policy"))
			}
		}
		for _, p := range []string{"/", "/pact/consent?user_code=BCDF-GHJK", "/sharing", "/assets/index-Ab12Cd.js", "/nope.png", "/api/session", "/login?code=wrong"} {
			resp, _ := e.call("GET", p, "", nil)
			check(p, resp)
		}
		resp, _ := e.call("GET", "/api/status", "", map[string]string{"Cookie": cookie})
		check("signed-in API", resp)
		resp, _ = e.raw("GET / HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
		check("421", resp)
	})

	t.Run("C11 open redirect via return_to", func(t *testing.T) {
		e := newEnv(t)
		for rt, want := range map[string]string{
			"":                      "/pact/consent",
			"/sharing":              "/sharing",
			"/receipts?id=r1":       "/receipts?id=r1",
			"https://evil.example/": "/pact/consent",
			"//evil.example":        "/pact/consent",
			"/\\evil.example":       "/pact/consent",
			"\\\\evil.example":      "/pact/consent",
			"/\t/evil.example":      "/pact/consent",
			"/\n/evil.example":      "/pact/consent",
			"javascript:alert(1)":   "/pact/consent",
			"evil.example":          "/pact/consent",
			"https:/evil.example":   "/pact/consent",
			"/%2F/evil.example":     "/%2F/evil.example", // stays a path on this server
			"///evil.example":       "/pact/consent",
		} {
			resp, body := e.call("GET", e.link()+"&return_to="+urlQueryEscape(rt), "", nil)
			wantStatus(t, resp, body, http.StatusSeeOther)
			if got := resp.Header.Get("Location"); got != want {
				t.Errorf("return_to %q: Location %q, want %q", rt, got, want)
			}
		}
	})

	t.Run("C12 no-store and re-submit after back", func(t *testing.T) {
		e := newEnv(t)
		cookie, csrf := e.signIn()
		for _, p := range []string{"/", "/pact/consent", "/sharing", "/receipts", "/brands", "/index.html"} {
			resp, _ := e.call("GET", p, "", nil)
			if resp.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("%s: Cache-Control %q", p, resp.Header.Get("Cache-Control"))
			}
		}
		for _, p := range []string{"/api/session", "/api/consent", "/api/status", "/api/grants", "/api/receipts"} {
			resp, _ := e.call("GET", p, "", map[string]string{"Cookie": cookie})
			if resp.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("%s: Cache-Control %q", p, resp.Header.Get("Cache-Control"))
			}
		}
		resp, body := e.call("POST", "/api/consent/req1/decision", decisionBody, e.fetchHeaders(cookie, csrf))
		wantStatus(t, resp, body, http.StatusOK)
		if m := jsonBody(t, body); m["status"] != "allowed" || m["grant"] == nil {
			t.Fatalf("decision answer %s", body)
		}
		resp, body = e.call("POST", "/api/consent/req1/decision", decisionBody, e.fetchHeaders(cookie, csrf))
		wantStatus(t, resp, body, http.StatusConflict)
		if m := jsonBody(t, body); m["status"] != "already_decided" || m["error"] == "" {
			t.Fatalf("re-submit answer %s", body)
		}
		if resp.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("409 Cache-Control %q", resp.Header.Get("Cache-Control"))
		}
	})

	t.Run("V6 revoke replayed cross-origin", func(t *testing.T) {
		e := newEnv(t)
		cookie, csrf := e.signIn()
		base := e.fetchHeaders(cookie, csrf)
		for name, hdr := range map[string]map[string]string{
			"cross-site":          with(base, "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"),
			"old browser":         with(base, "Origin", "https://evil.example", "Sec-Fetch-Site", ""),
			"same-site":           with(base, "Sec-Fetch-Site", "same-site"),
			"replay without CSRF": with(base, "X-CSRF-Token", ""),
			"stale CSRF":          with(base, "X-CSRF-Token", "bm90LXRoZS10b2tlbg"),
		} {
			resp, body := e.call("POST", "/api/grants/g1/revoke", "", hdr)
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s: status %d, want 403; %s", name, resp.StatusCode, body)
			}
		}
		if n := e.b.count("Revoke"); n != 0 {
			t.Fatalf("Revoke called %d times", n)
		}
		resp, body := e.call("POST", "/api/grants/g1/revoke", "", base)
		wantStatus(t, resp, body, http.StatusOK)
	})
}

func urlQueryEscape(s string) string {
	r := strings.NewReplacer("%", "%25", "&", "%26", "+", "%2B", " ", "%20", "#", "%23", "?", "%3F", "\t", "%09", "\n", "%0A", "\\", "%5C")
	return r.Replace(s)
}

// TestDenyIssuerGuards: "Deny all from this issuer" is a decision like any other, behind the
// same guards (C1–C4).
func TestDenyIssuerGuards(t *testing.T) {
	t.Run("C20 deny all from an issuer cross-site, same-site, rebound or without a session", func(t *testing.T) {
		e := newEnv(t)
		cookie, csrf := e.signIn()
		base := e.fetchHeaders(cookie, csrf)
		for name, hdr := range map[string]map[string]string{
			"C1 cross-site form":     with(base, "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site", "Content-Type", "application/x-www-form-urlencoded"),
			"C1 opaque origin":       with(base, "Origin", "null", "Sec-Fetch-Site", ""),
			"C2 other local app":     with(base, "Origin", "https://127.0.0.1:3001", "Sec-Fetch-Site", ""),
			"C2 same-site fetch":     with(base, "Sec-Fetch-Site", "same-site"),
			"C4 no cookie":           with(e.fetchHeaders("", "forged"), "Cookie", ""),
			"C4 token as the cookie": e.fetchHeaders(CookieName+"="+testToken, "forged"),
		} {
			resp, body := e.call("POST", "/api/consent/deny-issuer", denyIssuerBody, hdr)
			if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s: status %d, want 403 or 401; %s", name, resp.StatusCode, body)
			}
		}
		resp, body := e.raw("POST /api/consent/deny-issuer HTTP/1.1\r\nHost: evil.example:" + e.port + "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		if resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("C3 rebound Host: status %d, want 421; %s", resp.StatusCode, body)
		}
		if n := e.b.count("DenyIssuer"); n != 0 {
			t.Fatalf("DenyIssuer called %d times", n)
		}
		resp, body = e.call("POST", "/api/consent/deny-issuer", denyIssuerBody, base)
		wantStatus(t, resp, body, http.StatusOK)
		if e.b.count("DenyIssuer") != 1 || jsonBody(t, body)["site"] != "evil.example" {
			t.Fatalf("the UI's own call: %s", body)
		}
	})
}

const denyIssuerBody = `{"site":"evil.example"}`

// apiRoutes is every route of admin-api.md.
var apiRoutes = []struct{ method, path string }{
	{"GET", "/api/session"},
	{"GET", "/api/status"},
	{"GET", "/api/consent"},
	{"POST", "/api/consent/req1/decision"},
	{"POST", "/api/consent/deny-issuer"},
	{"GET", "/api/grants"},
	{"POST", "/api/grants/g1/revoke"},
	{"GET", "/api/receipts"},
	{"GET", "/api/receipts/r1"},
	{"GET", "/api/receipts/export"},
	{"GET", "/api/brands"},
	{"PUT", "/api/brands/docs"},
	{"DELETE", "/api/brands/docs"},
	{"GET", "/api/events"},
	{"GET", "/api/codex/download"},
	{"POST", "/api/codex/download"},
	{"PUT", "/api/codex/path"},
	{"GET", "/api/model"},
	{"PUT", "/api/model"},
	{"POST", "/api/model/check"},
	{"GET", "/api/no-such-thing"},
}

func TestAdminAPINeedsSession(t *testing.T) {
	t.Run("S8 no session or token gets 401 on every API route", func(t *testing.T) {
		e := newEnv(t)
		e.signIn()
		for _, rt := range apiRoutes {
			for name, hdr := range map[string]map[string]string{
				"nothing":          {},
				"bearer token":     {"Authorization": "Bearer " + testToken},
				"token as cookie":  {"Cookie": CookieName + "=" + testToken},
				"CSRF header only": {"X-CSRF-Token": testToken},
			} {
				if rt.method != "GET" {
					hdr = with(hdr, "Origin", e.origin(), "Content-Type", "application/json")
				}
				path := rt.path
				if name == "nothing" {
					path += "?token=" + testToken // the token in the query is no credential either
				}
				resp, body := e.call(rt.method, path, "{}", hdr)
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("%s %s (%s): status %d, want 401; %s", rt.method, rt.path, name, resp.StatusCode, body)
					continue
				}
				if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || jsonBody(t, body)["error"] != "sign in required" {
					t.Errorf("%s %s (%s): body %s", rt.method, rt.path, name, body)
				}
			}
		}
		e.b.mu.Lock()
		defer e.b.mu.Unlock()
		for name, n := range e.b.calls {
			t.Errorf("backend %s called %d times", name, n)
		}
	})
}

func TestLogin(t *testing.T) {
	t.Run("cookie attributes and landing page", func(t *testing.T) {
		e := newEnv(t)
		resp, body := e.call("GET", e.link(), "", map[string]string{"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"})
		wantStatus(t, resp, body, http.StatusSeeOther)
		if got := resp.Header.Get("Location"); got != "/pact/consent" {
			t.Fatalf("Location %q", got)
		}
		if resp.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("Cache-Control %q", resp.Header.Get("Cache-Control"))
		}
		sc := resp.Header.Values("Set-Cookie")
		if len(sc) != 1 {
			t.Fatalf("Set-Cookie %q", sc)
		}
		attrs := strings.Split(sc[0], "; ")
		name, value, _ := strings.Cut(attrs[0], "=")
		if name != "__Host-aether_session" || len(value) != 43 || value == testToken || strings.Contains(value, testToken) {
			t.Fatalf("cookie %q", attrs[0])
		}
		got := map[string]bool{}
		for _, a := range attrs[1:] {
			got[a] = true
			if strings.HasPrefix(strings.ToLower(a), "domain") {
				t.Fatalf("__Host- cookie with %q", a)
			}
		}
		for _, a := range []string{"Path=/", "Max-Age=43200", "HttpOnly", "Secure", "SameSite=Strict"} {
			if !got[a] {
				t.Errorf("cookie lacks %s: %q", a, sc[0])
			}
		}
	})

	t.Run("A1 a sign-in link carries a one-time code, never the token", func(t *testing.T) {
		e := newEnv(t)
		link := e.srv.SignInLink()
		if strings.Contains(link, testToken) || !strings.HasPrefix(link, "https://"+e.addr+"/login?code=") {
			t.Fatalf("link %q", link)
		}
		path := e.link()
		resp, body := e.call("GET", path, "", nil)
		wantStatus(t, resp, body, http.StatusSeeOther)
		resp, body = e.call("GET", path, "", nil)
		wantStatus(t, resp, body, http.StatusForbidden)
		if len(resp.Cookies()) != 0 || !strings.Contains(body, "already used") {
			t.Fatalf("second use of a code: %s", body)
		}
		// Minting more links than are kept forgets the oldest one.
		first := e.link()
		for range maxSignInCodes {
			e.link()
		}
		resp, body = e.call("GET", first, "", nil)
		wantStatus(t, resp, body, http.StatusForbidden)
	})

	t.Run("A2 a sign-in code expires after five minutes", func(t *testing.T) {
		e := newEnv(t)
		soon, late := e.link(), e.link()
		e.clock.Advance(signInCodeTTL - time.Second)
		resp, body := e.call("GET", soon, "", nil)
		wantStatus(t, resp, body, http.StatusSeeOther)
		e.clock.Advance(time.Second)
		resp, body = e.call("GET", late, "", nil)
		wantStatus(t, resp, body, http.StatusForbidden)
	})

	t.Run("A3 the admin token in a URL is refused; in the sign-in form it signs in", func(t *testing.T) {
		e := newEnv(t)
		for _, p := range []string{"/login?token=" + testToken, "/login?token=" + testToken + "&code=" + strings.TrimPrefix(e.link(), "/login?code=")} {
			resp, body := e.call("GET", p, "", nil)
			wantStatus(t, resp, body, http.StatusBadRequest)
			if len(resp.Cookies()) != 0 {
				t.Fatalf("%s set a cookie", p)
			}
		}
		form := map[string]string{"Origin": e.origin(), "Content-Type": "application/x-www-form-urlencoded"}
		resp, body := e.call("POST", "/login", "token="+testToken+"&return_to=%2Fsharing", form)
		wantStatus(t, resp, body, http.StatusSeeOther)
		if resp.Header.Get("Location") != "/sharing" || len(resp.Cookies()) != 1 {
			t.Fatalf("form sign-in: %v %v", resp.Header, resp.Cookies())
		}
		resp, body = e.call("POST", "/login", "token="+strings.Repeat("A", 43), form)
		wantStatus(t, resp, body, http.StatusForbidden)
		// Chromium posts the page's form with Origin "null" (Referrer-Policy: no-referrer).
		nav := with(form, "Origin", "null", "Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document")
		resp, body = e.call("POST", "/login", "token="+testToken, nav)
		wantStatus(t, resp, body, http.StatusSeeOther)
		resp, body = e.call("POST", "/login", "token="+testToken, with(nav, "Sec-Fetch-Site", "cross-site"))
		wantStatus(t, resp, body, http.StatusForbidden)
		// Another site cannot post the form, even with the right token.
		resp, body = e.call("POST", "/login", "token="+testToken, with(form, "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"))
		wantStatus(t, resp, body, http.StatusForbidden)
		resp, body = e.call("POST", "/login", `{"token":"`+testToken+`"}`, with(form, "Content-Type", "application/json"))
		wantStatus(t, resp, body, http.StatusUnsupportedMediaType)
	})

	t.Run("A6 a new token ends every session and link, and the old token", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "admin.token")
		tok, err := LoadOrCreateToken(path)
		if err != nil {
			t.Fatal(err)
		}
		e := newEnv(t, func(c *Config) { c.Token, c.TokenFile = tok, path })
		cookie, _ := e.signIn()
		link := e.link()
		if err := e.srv.RotateToken(); err != nil {
			t.Fatal(err)
		}
		fresh, err := LoadOrCreateToken(path)
		if err != nil || fresh == tok {
			t.Fatalf("token file after rotation: %v", err)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Fatalf("token file mode %v", fi.Mode())
		}
		resp, body := e.call("GET", "/api/session", "", map[string]string{"Cookie": cookie})
		wantStatus(t, resp, body, http.StatusUnauthorized)
		resp, body = e.call("GET", link, "", nil)
		wantStatus(t, resp, body, http.StatusForbidden)
		form := map[string]string{"Origin": e.origin(), "Content-Type": "application/x-www-form-urlencoded"}
		resp, body = e.call("POST", "/login", "token="+tok, form)
		wantStatus(t, resp, body, http.StatusForbidden)
		resp, body = e.call("POST", "/login", "token="+fresh, form)
		wantStatus(t, resp, body, http.StatusSeeOther)
		if err := New(Config{Addr: e.addr}, e.b).RotateToken(); err == nil {
			t.Fatal("rotated a token without a file")
		}
	})

	t.Run("A1 wrong or missing code, and a link preview that does not use a code up", func(t *testing.T) {
		e := newEnv(t)
		resp, body := e.call("GET", "/login?code="+strings.Repeat("A", 43), "", nil)
		wantStatus(t, resp, body, http.StatusForbidden)
		if len(resp.Cookies()) != 0 {
			t.Fatal("failed login set a cookie")
		}
		resp, body = e.call("GET", "/login", "", nil)
		wantStatus(t, resp, body, http.StatusBadRequest)
		resp, body = e.call("HEAD", e.link(), "", nil) // a link preview does not use the code up
		wantStatus(t, resp, body, http.StatusMethodNotAllowed)
	})

	t.Run("empty configured token signs nobody in", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.Token = "" })
		form := map[string]string{"Origin": e.origin(), "Content-Type": "application/x-www-form-urlencoded"}
		resp, body := e.call("POST", "/login", "token=", form)
		wantStatus(t, resp, body, http.StatusBadRequest)
		resp, body = e.call("POST", "/login", "token=x", form)
		wantStatus(t, resp, body, http.StatusForbidden)
	})

	t.Run("A5 failed sign-ins are rate limited, the right code never", func(t *testing.T) {
		e := newEnv(t)
		for i := 0; i < loginMaxFails; i++ {
			resp, body := e.call("GET", fmt.Sprintf("/login?code=guess%d", i), "", nil)
			wantStatus(t, resp, body, http.StatusForbidden)
			e.clock.Advance(time.Second)
		}
		resp, body := e.call("GET", "/login?code=one-more-guess", "", nil)
		wantStatus(t, resp, body, http.StatusTooManyRequests)
		if resp.Header.Get("Retry-After") != "50" { // the oldest failure leaves the window then
			t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
		}
		// The owner's own link is never refused, whoever burnt the budget; nor is the token.
		resp, body = e.call("GET", e.link(), "", nil)
		wantStatus(t, resp, body, http.StatusSeeOther)
		resp, body = e.call("POST", "/login", "token="+testToken, map[string]string{"Origin": e.origin(), "Content-Type": "application/x-www-form-urlencoded"})
		wantStatus(t, resp, body, http.StatusSeeOther)
		e.clock.Advance(50 * time.Second)
		resp, body = e.call("GET", "/login?code=guess-again", "", nil)
		wantStatus(t, resp, body, http.StatusForbidden)
	})

	t.Run("A5 cross-site sign-in navigations with wrong codes do not count", func(t *testing.T) {
		e := newEnv(t)
		nav := map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
		for i := 0; i < loginMaxFails+5; i++ {
			resp, body := e.call("GET", fmt.Sprintf("/login?code=guess%d", i), "", nav)
			wantStatus(t, resp, body, http.StatusForbidden)
		}
		resp, body := e.call("GET", "/login?code=local-guess", "", nil)
		wantStatus(t, resp, body, http.StatusForbidden) // not 429: the budget is untouched
	})

	t.Run("A5 other sites cannot burn the login budget", func(t *testing.T) {
		e := newEnv(t)
		sub := map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}
		for i := 0; i < loginMaxFails+2; i++ {
			resp, body := e.call("GET", "/login?code=guess", "", sub)
			wantStatus(t, resp, body, http.StatusForbidden)
		}
		// A sign-in link clicked on another site is a top-level navigation: allowed.
		nav := map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
		resp, body := e.call("GET", e.link(), "", nav)
		wantStatus(t, resp, body, http.StatusSeeOther)
	})
}

func TestCSRF(t *testing.T) {
	e := newEnv(t)
	cookie, csrf := e.signIn()
	_, otherCSRF := e.signIn()
	if otherCSRF == csrf {
		t.Fatal("two sessions share a CSRF token")
	}
	base := e.fetchHeaders(cookie, csrf)
	for name, hdr := range map[string]map[string]string{
		"missing":             with(base, "X-CSRF-Token", ""),
		"wrong":               with(base, "X-CSRF-Token", "wrong"),
		"other session's":     with(base, "X-CSRF-Token", otherCSRF),
		"admin token instead": with(base, "X-CSRF-Token", testToken),
	} {
		for _, rt := range []struct{ method, path, body string }{
			{"POST", "/api/consent/req1/decision", decisionBody},
			{"POST", "/api/consent/deny-issuer", denyIssuerBody},
			{"POST", "/api/grants/g1/revoke", ""},
			{"PUT", "/api/brands/docs", `{"id":"docs","workspace":"/w"}`},
			{"DELETE", "/api/brands/docs", ""},
		} {
			resp, body := e.call(rt.method, rt.path, rt.body, hdr)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "CSRF") {
				t.Errorf("%s CSRF, %s %s: %d %s", name, rt.method, rt.path, resp.StatusCode, body)
			}
		}
	}
	if n := e.b.count("Decide") + e.b.count("DenyIssuer") + e.b.count("Revoke") + e.b.count("PutBrand") + e.b.count("DeleteBrand"); n != 0 {
		t.Fatalf("backend called %d times", n)
	}
	resp, body := e.call("DELETE", "/api/brands/docs", "", base)
	wantStatus(t, resp, body, http.StatusOK)
}

func TestSessionExpiry(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SessionTTL = time.Hour })
	cookie, _ := e.signIn()
	get := func() int {
		resp, _ := e.call("GET", "/api/status", "", map[string]string{"Cookie": cookie})
		return resp.StatusCode
	}
	e.clock.Advance(time.Hour - time.Second)
	if got := get(); got != http.StatusOK {
		t.Fatalf("before expiry: %d", got)
	}
	e.clock.Advance(time.Second)
	if got := get(); got != http.StatusUnauthorized {
		t.Fatalf("at expiry: %d", got)
	}
	// Signing in again works.
	cookie, _ = e.signIn()
	if got := get(); got != http.StatusOK {
		t.Fatalf("after new sign-in: %d", got)
	}
}

func TestDefaultSessionTTL(t *testing.T) {
	e := newEnv(t)
	cookie, _ := e.signIn()
	e.clock.Advance(12 * time.Hour)
	resp, _ := e.call("GET", "/api/session", "", map[string]string{"Cookie": cookie})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after 12 h: %d", resp.StatusCode)
	}
}
