package admin

import (
	"net/http"
	"strings"
	"sync"
	"testing"
)

func TestStaticUI(t *testing.T) {
	var mu sync.Mutex
	var links []string
	e := newEnv(t, func(c *Config) {
		c.OnConsentLink = func(code string) {
			mu.Lock()
			defer mu.Unlock()
			links = append(links, code)
		}
	})
	index := string(testUI["index.html"].Data)

	t.Run("page routes answer index.html without a session", func(t *testing.T) {
		for _, p := range []string{"/", "/pact/consent", "/pact/consent?user_code=BCDF-GHJK", "/sharing", "/receipts?id=r1", "/brands", "/index.html", "/some/deep/route", "/assets"} {
			resp, body := e.call("GET", p, "", nil)
			wantStatus(t, resp, body, http.StatusOK)
			if body != index || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" || resp.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("%s: %q %q %q", p, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"), body)
			}
		}
		resp, body := e.call("HEAD", "/brands", "", nil)
		wantStatus(t, resp, body, http.StatusOK)
	})

	t.Run("hashed assets are immutable", func(t *testing.T) {
		resp, body := e.call("GET", "/assets/index-Ab12Cd.js", "", nil)
		wantStatus(t, resp, body, http.StatusOK)
		if body != "console.log('aether')" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") ||
			resp.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" {
			t.Fatalf("asset %q %q %q", resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"), body)
		}
		resp, body = e.call("GET", "/assets/index-Ef34Gh.css", "", nil)
		wantStatus(t, resp, body, http.StatusOK)
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/css") {
			t.Fatalf("css type %q", resp.Header.Get("Content-Type"))
		}
		resp, body = e.call("GET", "/favicon.svg", "", nil)
		wantStatus(t, resp, body, http.StatusOK)
		if resp.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("unhashed file Cache-Control %q", resp.Header.Get("Cache-Control"))
		}
	})

	t.Run("missing files are 404, not the page", func(t *testing.T) {
		for _, p := range []string{"/assets/index-zzz.js", "/favicon.ico", "/robots.txt", "/assets/../../go.mod"} {
			resp, body := e.call("GET", p, "", nil)
			wantStatus(t, resp, body, http.StatusNotFound)
		}
		resp, body := e.raw("GET /../../../../etc/passwd.txt HTTP/1.1\r\nHost: " + e.addr + "\r\nConnection: close\r\n\r\n")
		wantStatus(t, resp, body, http.StatusNotFound)
	})

	t.Run("pages take no other methods", func(t *testing.T) {
		resp, body := e.call("POST", "/pact/consent", "", map[string]string{"Origin": e.origin()})
		wantStatus(t, resp, body, http.StatusMethodNotAllowed)
	})

	t.Run("consent link tells the desktop", func(t *testing.T) {
		mu.Lock()
		links = nil
		mu.Unlock()
		for _, p := range []string{
			"/pact/consent?user_code=BCDF-GHJK",
			"/pact/consent?user_code=%3Cscript%3E", // not a code: ignored
			"/pact/consent",
			"/sharing?user_code=CDFG-HJKL",
		} {
			resp, body := e.call("GET", p, "", nil)
			wantStatus(t, resp, body, http.StatusOK)
		}
		resp, body := e.raw("GET /pact/consent?user_code=BCDF-GHJK HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
		wantStatus(t, resp, body, http.StatusMisdirectedRequest)
		mu.Lock()
		defer mu.Unlock()
		if len(links) != 1 || links[0] != "BCDF-GHJK" {
			t.Fatalf("OnConsentLink calls %q", links)
		}
	})
}

func TestNoUIBuilt(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.UI = nil })
	resp, body := e.call("GET", "/pact/consent", "", nil)
	wantStatus(t, resp, body, http.StatusNotFound)
}
