package admin

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aether/aether/backend/devices"
)

const tailnetHost = "aether.tail-scale.ts.net"

// phoneEnv is a Server with both doors: the admin listener (env) and the tailnet door on a
// TLS listener of its own, whose calling device the test names (the tailnet's word, which
// reach gives in the node).
type phoneEnv struct {
	*env
	tailnet *httptest.Server
	mu      sync.Mutex
	peer    *TailnetPeer // nil: not a device of the owner's user
}

func newPhoneEnv(t *testing.T) *phoneEnv {
	t.Helper()
	store, err := devices.Open(filepath.Join(t.TempDir(), "devices.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &phoneEnv{}
	p.env = newEnv(t, func(c *Config) {
		c.Devices = store
		c.TailnetHost = func() string { return tailnetHost }
		c.TailnetPeer = func(*http.Request) (TailnetPeer, bool) {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.peer == nil {
				return TailnetPeer{}, false
			}
			return *p.peer, true
		}
		c.TokenFile = filepath.Join(t.TempDir(), "admin.token")
	})
	p.tailnet = httptest.NewTLSServer(p.srv.TailnetHandler())
	t.Cleanup(p.tailnet.Close)
	p.from("nodePhone", "pixel")
	return p
}

// from makes the next tailnet requests come from the device node.
func (p *phoneEnv) from(node, name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if node == "" {
		p.peer = nil
		return
	}
	p.peer = &TailnetPeer{Node: node, Name: name, Host: tailnetHost}
}

// phone sends a request on the tailnet door with the Host of the node's ts.net name.
func (p *phoneEnv) phone(method, path, body string, hdr map[string]string) (*http.Response, string) {
	p.t.Helper()
	r := p.req(method, path, body, hdr)
	r.URL.Host = strings.TrimPrefix(p.tailnet.URL, "https://")
	if r.Host == p.addr {
		r.Host = tailnetHost
	}
	return p.do(r)
}

// pairingLink asks for "Add a phone" in the window and returns the link's path and query.
func (p *phoneEnv) pairingLink() string {
	p.t.Helper()
	cookie, csrf := p.signIn()
	resp, body := p.call("POST", "/api/devices/pair", "", p.fetchHeaders(cookie, csrf))
	wantStatus(p.t, resp, body, http.StatusOK)
	var pr Pairing
	if err := json.Unmarshal([]byte(body), &pr); err != nil {
		p.t.Fatal(err)
	}
	if !strings.HasPrefix(pr.Link, "https://"+tailnetHost+"/pair?code=") || !strings.HasPrefix(pr.QR, "data:image/png;base64,iVBORw0KGgo") {
		p.t.Fatalf("pairing %+v", pr)
	}
	return strings.TrimPrefix(pr.Link, "https://"+tailnetHost)
}

// pair opens a pairing link on the phone and returns its device cookie and CSRF token.
func (p *phoneEnv) pair(link string) (cookie, csrf string) {
	p.t.Helper()
	resp, body := p.phone("GET", link, "", nil)
	wantStatus(p.t, resp, body, http.StatusSeeOther)
	for _, c := range resp.Cookies() {
		if c.Name == DeviceCookie && c.Secure && c.HttpOnly && c.SameSite == http.SameSiteStrictMode {
			cookie = DeviceCookie + "=" + c.Value
		}
	}
	if cookie == "" || resp.Header.Get("Location") != "/phone" {
		p.t.Fatalf("pairing answered %v, cookies %v", resp.Header, resp.Cookies())
	}
	resp, body = p.phone("GET", "/api/session", "", map[string]string{"Cookie": cookie})
	wantStatus(p.t, resp, body, http.StatusOK)
	m := jsonBody(p.t, body)
	if m["device"] == "" || m["pushKey"] == "" {
		p.t.Fatalf("device session %s", body)
	}
	return cookie, m["csrfToken"].(string)
}

func (p *phoneEnv) phoneHeaders(cookie, csrf string) map[string]string {
	return map[string]string{
		"Cookie": cookie, "X-CSRF-Token": csrf, "Origin": "https://" + tailnetHost,
		"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors", "Content-Type": "application/json",
	}
}

func TestPhone(t *testing.T) {
	p := newPhoneEnv(t)
	link := p.pairingLink()

	t.Run("O1 a pairing link opened on the admin listener pairs nothing", func(t *testing.T) {
		resp, body := p.call("GET", link, "", nil)
		wantStatus(t, resp, body, http.StatusOK) // the window's page, the code untouched
		for _, c := range resp.Cookies() {
			if c.Name == DeviceCookie {
				t.Fatal("the admin listener paired a device")
			}
		}
	})
	cookie, csrf := p.pair(link)

	t.Run("O1 a stolen pairing link, used again, pairs nothing", func(t *testing.T) {
		p.from("nodeThief", "thief")
		defer p.from("nodePhone", "pixel")
		resp, body := p.phone("GET", link, "", nil)
		wantStatus(t, resp, body, http.StatusForbidden)
		if len(resp.Cookies()) != 0 {
			t.Fatal("a used link set a cookie")
		}
	})
	t.Run("the phone reads the pending requests and decides one", func(t *testing.T) {
		resp, body := p.phone("GET", "/api/consent", "", map[string]string{"Cookie": cookie})
		wantStatus(t, resp, body, http.StatusOK)
		resp, body = p.phone("POST", "/api/consent/req1/decision", decisionBody, p.phoneHeaders(cookie, csrf))
		wantStatus(t, resp, body, http.StatusOK)
		if p.b.count("Decide") != 1 {
			t.Fatal("the decision never reached the owner's service")
		}
	})
	t.Run("a decision without the CSRF token or from another origin is refused", func(t *testing.T) {
		resp, body := p.phone("POST", "/api/consent/req1/decision", decisionBody, with(p.phoneHeaders(cookie, csrf), "X-CSRF-Token", ""))
		wantStatus(t, resp, body, http.StatusForbidden)
		resp, body = p.phone("POST", "/api/consent/req1/decision", decisionBody, with(p.phoneHeaders(cookie, csrf), "Origin", "https://evil.example"))
		wantStatus(t, resp, body, http.StatusForbidden)
		resp, body = p.phone("POST", "/api/consent/req1/decision", decisionBody, with(p.phoneHeaders(cookie, csrf), "Origin", p.origin()))
		wantStatus(t, resp, body, http.StatusForbidden)
	})
	t.Run("O2 a phone reaches nothing of the owner's API but consent", func(t *testing.T) {
		for _, c := range []struct{ method, path string }{
			{"GET", "/api/grants"}, {"POST", "/api/grants/g1/revoke"}, {"GET", "/api/brands"}, {"PUT", "/api/brands/docs"},
			{"GET", "/api/receipts"}, {"GET", "/api/model"}, {"POST", "/api/reachability/funnel"}, {"GET", "/api/devices"},
			{"POST", "/api/devices/pair"}, {"GET", "/api/events"}, {"GET", "/api/status"},
		} {
			resp, body := p.phone(c.method, c.path, "{}", p.phoneHeaders(cookie, csrf))
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s %s from a phone: %d %s", c.method, c.path, resp.StatusCode, body)
			}
		}
	})
	t.Run("O5 the device session replayed from another device is refused", func(t *testing.T) {
		p.from("nodeLaptop", "laptop")
		defer p.from("nodePhone", "pixel")
		resp, body := p.phone("GET", "/api/consent", "", map[string]string{"Cookie": cookie})
		wantStatus(t, resp, body, http.StatusForbidden)
		resp, body = p.phone("POST", "/api/consent/req1/decision", decisionBody, p.phoneHeaders(cookie, csrf))
		wantStatus(t, resp, body, http.StatusForbidden)
	})
	t.Run("O4 a request the tailnet does not vouch for is refused", func(t *testing.T) {
		p.from("", "")
		defer p.from("nodePhone", "pixel")
		resp, body := p.phone("GET", "/api/consent", "", map[string]string{"Cookie": cookie})
		wantStatus(t, resp, body, http.StatusForbidden)
		resp, body = p.phone("GET", "/phone", "", nil)
		wantStatus(t, resp, body, http.StatusForbidden)
	})
	t.Run("the tailnet door answers only the node's ts.net name", func(t *testing.T) {
		resp, body := p.phone("GET", "/api/consent", "", map[string]string{"Cookie": cookie, "Host": "evil.example"})
		wantStatus(t, resp, body, http.StatusMisdirectedRequest)
	})
	t.Run("the owner sees the phone under Devices", func(t *testing.T) {
		oc, _ := p.signIn()
		resp, body := p.call("GET", "/api/devices", "", map[string]string{"Cookie": oc})
		wantStatus(t, resp, body, http.StatusOK)
		var l DeviceList
		if err := json.Unmarshal([]byte(body), &l); err != nil || len(l.Devices) != 1 || l.Devices[0].Name != "pixel" || l.URL != "https://"+tailnetHost {
			t.Fatalf("devices %s (%v)", body, err)
		}
	})
	t.Run("O2 a lost phone the owner removed is refused", func(t *testing.T) {
		oc, ocsrf := p.signIn()
		id := p.srv.cfg.Devices.List()[0].ID
		resp, body := p.call("POST", "/api/devices/"+id+"/revoke", "", p.fetchHeaders(oc, ocsrf))
		wantStatus(t, resp, body, http.StatusNoContent)
		resp, body = p.phone("GET", "/api/consent", "", map[string]string{"Cookie": cookie})
		wantStatus(t, resp, body, http.StatusUnauthorized)
		resp, body = p.phone("POST", "/api/consent/req1/decision", decisionBody, p.phoneHeaders(cookie, csrf))
		wantStatus(t, resp, body, http.StatusUnauthorized)
	})
	t.Run("A6 a new admin token ends every paired device", func(t *testing.T) {
		c2, _ := p.pair(p.pairingLink())
		if err := p.srv.RotateToken(); err != nil {
			t.Fatal(err)
		}
		resp, body := p.phone("GET", "/api/consent", "", map[string]string{"Cookie": c2})
		wantStatus(t, resp, body, http.StatusUnauthorized)
	})
	t.Run("the phone's pages are phone.html, with the same security headers", func(t *testing.T) {
		resp, body := p.phone("GET", "/phone", "", nil)
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "not built") { // testUI has no phone.html
			t.Fatalf("/phone: %d %s", resp.StatusCode, body)
		}
		if resp.Header.Get("Content-Security-Policy") != csp || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Fatalf("headers %v", resp.Header)
		}
	})
}

func TestPairNeedsTheTailnet(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		s, _ := devices.Open(filepath.Join(t.TempDir(), "devices.json"), nil)
		c.Devices = s
		c.TailnetHost = func() string { return "" }
	})
	cookie, csrf := e.signIn()
	resp, body := e.call("POST", "/api/devices/pair", "", e.fetchHeaders(cookie, csrf))
	wantStatus(t, resp, body, http.StatusConflict)
}
