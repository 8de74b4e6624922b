package admin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/version"
)

func TestAPIAnswers(t *testing.T) {
	e := newEnv(t)
	cookie, csrf := e.signIn()
	get := func(path string) (*http.Response, string) {
		return e.call("GET", path, "", map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "same-origin"})
	}
	send := func(method, path, body string) (*http.Response, string) {
		return e.call(method, path, body, e.fetchHeaders(cookie, csrf))
	}

	t.Run("unknown API path is a JSON 404", func(t *testing.T) {
		for _, p := range []string{"/api/nope", "/api", "/api/consent/req1", "/api/grants/g1"} {
			resp, body := get(p)
			wantStatus(t, resp, body, http.StatusNotFound)
			if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || jsonBody(t, body)["error"] == "" {
				t.Fatalf("%s: %q %s", p, resp.Header.Get("Content-Type"), body)
			}
		}
	})

	t.Run("wrong method is a JSON 405", func(t *testing.T) {
		resp, body := send("DELETE", "/api/status", "")
		wantStatus(t, resp, body, http.StatusMethodNotAllowed)
		if resp.Header.Get("Allow") != "GET" {
			t.Fatalf("Allow %q", resp.Header.Get("Allow"))
		}
		resp, body = send("POST", "/api/brands/docs", "{}")
		wantStatus(t, resp, body, http.StatusMethodNotAllowed)
		if resp.Header.Get("Allow") != "DELETE, PUT" {
			t.Fatalf("Allow %q", resp.Header.Get("Allow"))
		}
	})

	t.Run("status fills the admin URL and the version", func(t *testing.T) {
		resp, body := get("/api/status")
		wantStatus(t, resp, body, http.StatusOK)
		m := jsonBody(t, body)
		if m["admin"].(map[string]any)["url"] != "https://"+e.addr || m["pending"] != 1.0 {
			t.Fatalf("status %s", body)
		}
		if m["version"] != version.String() || m["version"] == "" {
			t.Fatalf("status version %v, want %q", m["version"], version.String())
		}
		if _, ok := m["lastReceipts"].([]any); !ok {
			t.Fatalf("lastReceipts not a list: %s", body)
		}
	})

	t.Run("decision outcomes", func(t *testing.T) {
		for _, c := range []struct {
			path, body string
			code       int
			status     string
		}{
			{"/api/consent/req1/decision", `{"userCode":"CDFG-HJKL","decision":"allow","duration":"1d"}`, http.StatusBadRequest, ""},
			{"/api/consent/old/decision", decisionBody, http.StatusGone, "expired"},
			{"/api/consent/nope/decision", decisionBody, http.StatusNotFound, ""},
			{"/api/consent/req1/decision", `{"userCode":"BCDF-GHJK","decision":"maybe","duration":"1d"}`, http.StatusBadRequest, ""},
			{"/api/consent/req1/decision", `{"userCode":"BCDF-GHJK","decision":"allow"}`, http.StatusBadRequest, ""},
			{"/api/consent/req1/decision", `{"userCode":"","decision":"deny"}`, http.StatusBadRequest, ""},
			{"/api/consent/req1/decision", `{"userCode":"BCDF-GHJK","decision":"deny"}`, http.StatusOK, "denied"},
			{"/api/consent/req1/decision", decisionBody, http.StatusConflict, "already_decided"},
		} {
			resp, body := send("POST", c.path, c.body)
			if resp.StatusCode != c.code {
				t.Errorf("%s %s: %d, want %d; %s", c.path, c.body, resp.StatusCode, c.code, body)
				continue
			}
			if m := jsonBody(t, body); c.status != "" && m["status"] != c.status || c.code != http.StatusOK && m["error"] == "" {
				t.Errorf("%s %s: body %s", c.path, c.body, body)
			}
		}
	})

	t.Run("JSON body caps and strict decoding", func(t *testing.T) {
		big := `{"userCode":"` + strings.Repeat("A", 2<<20) + `","decision":"allow","duration":"1d"}`
		for _, c := range []struct {
			name, ctype, body string
			code              int
		}{
			{"2 MiB body", "application/json", big, http.StatusRequestEntityTooLarge},
			{"unknown field", "application/json", `{"userCode":"BCDF-GHJK","decision":"allow","duration":"1d","grant":"forever"}`, http.StatusBadRequest},
			{"trailing data", "application/json", decisionBody + `{"decision":"deny"}`, http.StatusBadRequest},
			{"not JSON", "application/json", `userCode=BCDF-GHJK`, http.StatusBadRequest},
			{"array", "application/json", `[` + decisionBody + `]`, http.StatusBadRequest},
			{"invalid UTF-8", "application/json", "{\"userCode\":\"BCDF-GHJK\xff\",\"decision\":\"allow\",\"duration\":\"1d\"}", http.StatusBadRequest},
			{"form content type", "application/x-www-form-urlencoded", decisionBody, http.StatusUnsupportedMediaType},
			{"no content type", "", decisionBody, http.StatusUnsupportedMediaType},
		} {
			resp, body := e.call("POST", "/api/consent/req1/decision", c.body, with(e.fetchHeaders(cookie, csrf), "Content-Type", c.ctype))
			if resp.StatusCode != c.code {
				t.Errorf("%s: %d, want %d; %.200s", c.name, resp.StatusCode, c.code, body)
			}
		}
		if n := e.b.count("Decide"); n != 5 { // only the five of "decision outcomes" that passed validation
			t.Fatalf("Decide called %d times", n)
		}
	})

	t.Run("grants and revoke", func(t *testing.T) {
		resp, body := get("/api/grants")
		wantStatus(t, resp, body, http.StatusOK)
		if gs := jsonBody(t, body)["grants"].([]any); len(gs) != 1 {
			t.Fatalf("grants %s", body)
		}
		for i := 0; i < 2; i++ { // revoking twice answers the same
			resp, body = send("POST", "/api/grants/g1/revoke", "")
			wantStatus(t, resp, body, http.StatusOK)
			if g := jsonBody(t, body)["grant"].(map[string]any); g["status"] != "revoked" || g["expiresAt"] != nil {
				t.Fatalf("revoke %s", body)
			}
		}
		resp, body = send("POST", "/api/grants/nope/revoke", "")
		wantStatus(t, resp, body, http.StatusNotFound)
	})

	t.Run("receipts filters, detail and export", func(t *testing.T) {
		resp, body := get("/api/receipts?agent=alice&brand=docs&status=failed&from=2026-03-01T00:00:00Z&to=2026-03-02T00:00:00%2B01:00&cursor=c1")
		wantStatus(t, resp, body, http.StatusOK)
		if m := jsonBody(t, body); m["nextCursor"] != "c2" || len(m["receipts"].([]any)) != 1 {
			t.Fatalf("receipts %s", body)
		}
		want := owner.ReceiptFilter{Agent: "alice", Brand: "docs", Status: "failed", Cursor: "c1", Limit: owner.DefaultReceiptLimit,
			From: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 3, 1, 23, 0, 0, 0, time.UTC)}
		got := e.b.filter()
		if got.Agent != want.Agent || got.Brand != want.Brand || got.Status != want.Status || got.Cursor != want.Cursor ||
			got.Limit != want.Limit || !got.From.Equal(want.From) || !got.To.Equal(want.To) {
			t.Fatalf("filter %+v, want %+v", got, want)
		}
		for _, q := range []string{"from=yesterday", "to=2026-03-01", "limit=0", "limit=501", "limit=x", "cursor=bad", "agent=" + strings.Repeat("a", 600)} {
			resp, body := get("/api/receipts?" + q)
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s: %d %s", q, resp.StatusCode, body)
			}
		}
		resp, body = get("/api/receipts/r1")
		wantStatus(t, resp, body, http.StatusOK)
		if m := jsonBody(t, body); m["jws"] != "a.b.c" || m["claims"].(map[string]any)["seq"] != 1.0 || m["verify"].(map[string]any)["ok"] != true {
			t.Fatalf("receipt %s", body)
		}
		resp, body = get("/api/receipts/r9")
		wantStatus(t, resp, body, http.StatusNotFound)

		resp, body = get("/api/receipts/export?brand=docs")
		wantStatus(t, resp, body, http.StatusOK)
		if resp.Header.Get("Content-Type") != "application/x-ndjson" ||
			resp.Header.Get("Content-Disposition") != `attachment; filename="receipts.jsonl"` ||
			body != "{\"id\":\"r2\"}\n{\"id\":\"r1\"}\n" {
			t.Fatalf("export %q %q %q", resp.Header.Get("Content-Type"), resp.Header.Get("Content-Disposition"), body)
		}
		if f := e.b.filter(); f.Limit != 0 || f.Brand != "docs" {
			t.Fatalf("export filter %+v", f)
		}
		e.b.failExports()
		resp, body = get("/api/receipts/export")
		wantStatus(t, resp, body, http.StatusInternalServerError)
		if resp.Header.Get("Content-Disposition") != "" || !strings.Contains(jsonBody(t, body)["error"].(string), "disk on fire") {
			t.Fatalf("failed export %q %s", resp.Header.Get("Content-Disposition"), body)
		}
	})

	t.Run("brands", func(t *testing.T) {
		resp, body := get("/api/brands")
		wantStatus(t, resp, body, http.StatusOK)
		if m := jsonBody(t, body); m["policyPath"] != "/data/policy.json" || m["error"] != nil {
			t.Fatalf("brands %s", body)
		}
		nb := `{"id":"site","name":"Site","description":"","capability":"","workspace":"/srv/site","accessMode":"read_write","scope":{"id":"site.write","description":""},"cardUrl":""}`
		resp, body = send("PUT", "/api/brands/site", nb)
		wantStatus(t, resp, body, http.StatusOK)
		if bs := jsonBody(t, body)["brands"].([]any); len(bs) != 2 {
			t.Fatalf("after PUT %s", body)
		}
		resp, body = send("PUT", "/api/brands/site", `{"id":"site","name":"Site","workspace":""}`)
		wantStatus(t, resp, body, http.StatusUnprocessableEntity)
		m := jsonBody(t, body)
		fields := m["fields"].([]any)
		if m["error"] == "" || len(fields) != 1 || fields[0].(map[string]any)["field"] != "workspace" {
			t.Fatalf("422 %s", body)
		}
		resp, body = send("PUT", "/api/brands/site", `{"id":"other","workspace":"/w"}`)
		wantStatus(t, resp, body, http.StatusUnprocessableEntity)
		if f := jsonBody(t, body)["fields"].([]any)[0].(map[string]any); f["field"] != "id" {
			t.Fatalf("id mismatch %s", body)
		}
		resp, body = send("DELETE", "/api/brands/site", "")
		wantStatus(t, resp, body, http.StatusOK)
		resp, body = send("DELETE", "/api/brands/site", "")
		wantStatus(t, resp, body, http.StatusNotFound)
	})
}

func TestEmptyListsAreArrays(t *testing.T) {
	e := newEnv(t)
	e.b.nilLists = true
	cookie, _ := e.signIn()
	for path, key := range map[string]string{"/api/consent": "requests", "/api/grants": "grants", "/api/receipts": "receipts", "/api/brands": "brands", "/api/status": "brands"} {
		resp, body := e.call("GET", path, "", map[string]string{"Cookie": cookie})
		wantStatus(t, resp, body, http.StatusOK)
		if l, ok := jsonBody(t, body)[key].([]any); !ok || len(l) != 0 {
			t.Errorf("%s: %s is not []: %s", path, key, body)
		}
	}
}

func TestDesktopHandler(t *testing.T) {
	b := newFakeBackend()
	srv := New(Config{Token: testToken, Addr: "127.0.0.1:3000", UI: testUI}, b)
	defer srv.Close()
	// The Wails asset server calls the handler in process; a loopback server with its host
	// stands in for it.
	ts := httptest.NewServer(srv.DesktopHandler())
	defer ts.Close()
	call := func(method, path string, hdr map[string]string) (*http.Response, string) {
		r, err := http.NewRequest(method, ts.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Host = "wails"
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		resp, err := ts.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(data)
	}
	resp, body := call("GET", "/api/session", nil)
	wantStatus(t, resp, body, http.StatusOK)
	m := jsonBody(t, body)
	csrf, _ := m["csrfToken"].(string)
	if m["desktop"] != true || csrf == "" {
		t.Fatalf("desktop session %s", body)
	}
	if resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("Content-Security-Policy") == "" {
		t.Fatal("desktop answers lack the security headers")
	}
	resp, body = call("POST", "/api/grants/g1/revoke", map[string]string{"Origin": "wails://wails"})
	wantStatus(t, resp, body, http.StatusForbidden)
	resp, body = call("POST", "/api/grants/g1/revoke", map[string]string{"Origin": "wails://wails", "X-CSRF-Token": csrf})
	wantStatus(t, resp, body, http.StatusOK)
	// No sign-in inside the window: /login is just a page there (the asset server follows no redirects).
	resp, body = call("GET", "/login", nil)
	wantStatus(t, resp, body, http.StatusOK)
	if !strings.Contains(body, "<title>Aether</title>") {
		t.Fatalf("/login in the window: %s", body)
	}
}
