package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"tailscale.com/ipn/store/mem"
	"tailscale.com/tailcfg"
	"tailscale.com/tsnet"
	"tailscale.com/types/logger"

	agentpkg "github.com/aether/aether/backend/agent"
	"github.com/aether/aether/backend/codex/codextest"
	"github.com/aether/aether/backend/devices/pushtest"
	"github.com/aether/aether/backend/node"
	ownerpkg "github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/reach"
)

// tailnetDevice is another device on the test tailnet, with a browser-like client (a cookie
// jar) for the node's tailnet address.
type tailnetDevice struct {
	t   *testing.T
	srv *tsnet.Server
	ip  string
	hc  *http.Client
}

// joinTailnet brings up a device named name; owner, when set, makes it a device of the node
// owner's Tailscale user (the control server makes each device a user of its own), tags tags it.
func joinTailnet(t *testing.T, tn *tailnet, name string, owner *tsnet.Server, tags ...string) *tailnetDevice {
	t.Helper()
	s := &tsnet.Server{Dir: t.TempDir(), ControlURL: tn.url, Hostname: name, Store: new(mem.Store), Ephemeral: true, Logf: logger.Discard, UserLogf: logger.Discard}
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	st, err := s.Up(ctx)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	d := &tailnetDevice{t: t, srv: s, ip: st.TailscaleIPs[0].String()}
	if owner != nil || len(tags) > 0 {
		n := tn.control.Node(st.Self.PublicKey).Clone()
		if owner != nil {
			ost, err := owner.Up(ctx)
			if err != nil {
				t.Fatal(err)
			}
			n.User = ost.Self.UserID
		}
		n.Tags = tags
		tn.control.UpdateNode(n)
	}
	jar, _ := cookiejar.New(nil)
	d.hc = &http.Client{Jar: jar, Timeout: 60 * time.Second,
		Transport:     &http.Transport{DialContext: s.Dial, TLSClientConfig: &tls.Config{RootCAs: tn.ca.pool()}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return d
}

// seenAs waits until the published node's tailnet sees d as the user (and tags) the control
// server gave it.
func (d *tailnetDevice) seenAs(target *tsnet.Server, user tailcfg.UserID, tagged bool) {
	d.t.Helper()
	lc, err := target.LocalClient()
	if err != nil {
		d.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(d.t.Context(), 60*time.Second)
	defer cancel()
	for {
		who, err := lc.WhoIs(ctx, d.ip)
		if err == nil && who.Node.User == user && who.Node.IsTagged() == tagged {
			return
		}
		if ctx.Err() != nil {
			d.t.Fatalf("the node never saw %s as user %d (tagged %v): %v", d.ip, user, tagged, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// call sends a request to the node's tailnet address as this device's browser would.
func (d *tailnetDevice) call(method, path string, body any, csrf string, out any) (int, string) {
	d.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, funnelURL+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method != "GET" {
		req.Header.Set("Origin", funnelURL)
		req.Header.Set("X-CSRF-Token", csrf)
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(raw, out); err != nil {
			d.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, string(raw)
}

// stamp records when the agent asks for a device code (the request the push is about).
type stamp struct {
	mu sync.Mutex
	at time.Time
}

func (s *stamp) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/device_authorization") {
		s.mu.Lock()
		s.at = time.Now()
		s.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestPhoneOnTheTailnet proves the owner's phone on a real tailnet stack (the Funnel tests'
// control server): two devices of the owner's Tailscale user (one paired, one not), a tagged
// one and one of another user. The phone pairs, subscribes to pushes, gets the encrypted push
// of an agent's request from a push service on loopback, decides the request, and the agent's
// turn runs. Everyone else is refused, and the Funnel and gateway addresses serve no owner route.
func TestPhoneOnTheTailnet(t *testing.T) {
	t.Parallel()
	tn := newTailnet(t, nil, false)
	ps := pushtest.NewService()
	defer ps.Close()
	e := newEnv(t, withFunnel(tn), withNode(func(o *node.Options) { o.PushClient = ps.Client() }))
	waitReach(t, e, "published", func(r ownerpkg.Reachability) bool { return r.State == ownerpkg.ReachStatePublished })
	self := e.n.FunnelTailnet().Tailnet()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	st, err := self.Up(ctx)
	if err != nil {
		t.Fatal(err)
	}
	phone := joinTailnet(t, tn, "pixel", self)
	laptop := joinTailnet(t, tn, "laptop", self)
	tagged := joinTailnet(t, tn, "server", self, "tag:server")
	other := joinTailnet(t, tn, "someone", nil)
	for _, d := range []*tailnetDevice{phone, laptop} {
		d.seenAs(self, st.Self.UserID, false)
	}
	tagged.seenAs(self, st.Self.UserID, true)

	// The owner adds a phone in the window.
	var pr struct{ Link string }
	if code := e.admin.do("POST", "/api/devices/pair", nil, &pr); code != http.StatusOK || !strings.HasPrefix(pr.Link, funnelURL+"/pair?code=") {
		t.Fatalf("add a phone: %d %+v", code, pr)
	}
	link := strings.TrimPrefix(pr.Link, funnelURL)

	t.Run("O4 another user's and a tagged device cannot use the pairing link", func(t *testing.T) {
		for _, d := range []*tailnetDevice{other, tagged} {
			if code, body := d.call("GET", link, nil, "", nil); code != http.StatusForbidden {
				t.Errorf("%s opened the pairing link: %d %s", d.srv.Hostname, code, body)
			}
		}
	})
	if code, body := phone.call("GET", link, nil, "", nil); code != http.StatusSeeOther {
		t.Fatalf("pairing: %d %s", code, body)
	}
	t.Run("O1 the pairing link is spent", func(t *testing.T) {
		if code, body := laptop.call("GET", link, nil, "", nil); code != http.StatusForbidden {
			t.Errorf("a second device paired with the same link: %d %s", code, body)
		}
	})
	var sess struct{ CSRFToken, Device, PushKey string }
	if code, body := phone.call("GET", "/api/session", nil, "", &sess); code != http.StatusOK || sess.PushKey == "" {
		t.Fatalf("the phone's session: %d %s", code, body)
	}
	br := pushtest.NewBrowser()
	sub := map[string]any{"endpoint": ps.URL + "/push/pixel", "keys": map[string]string{"p256dh": br.P256dh(), "auth": br.Auth()}}
	if code, body := phone.call("PUT", "/api/device/push", sub, sess.CSRFToken, nil); code != http.StatusNoContent {
		t.Fatalf("subscribe: %d %s", code, body)
	}

	t.Run("the phone decides an agent's request from its push, and the turn runs", func(t *testing.T) {
		asked := &stamp{}
		var pushed time.Duration
		decide := func(code, _ string) {
			m := <-ps.Messages
			asked.mu.Lock()
			pushed = m.At.Sub(asked.at)
			asked.mu.Unlock()
			plain, err := br.Decrypt(m.Body)
			if err != nil {
				t.Errorf("the push: %v", err)
				return
			}
			var n struct{ ID, Site, Brand, Code string }
			if err := json.Unmarshal(plain, &n); err != nil || n.Code != code || n.Brand == "" || n.ID == "" {
				t.Errorf("the push says %s (%v); want the request with code %s", plain, err, code)
				return
			}
			if c, body := phone.call("POST", "/api/consent/"+n.ID+"/decision", map[string]string{"userCode": code, "decision": "allow", "duration": "1d"}, sess.CSRFToken, nil); c != http.StatusOK {
				t.Errorf("the phone's decision: %d %s", c, body)
			}
		}
		res, err := agentpkg.Run(ctx, agentpkg.Options{Card: e.publicURL, Brand: "review", Message: "from the phone", Dir: t.TempDir(),
			HTTPClient: &http.Client{Transport: asked}, OnUserCode: decide, IdentityToken: e.issuer.Token("phone-agent", e.publicURL)})
		if err != nil {
			t.Fatalf("the agent: %v", err)
		}
		if !res.Consented || res.Answer != codextest.DefaultAnswer || res.Receipt == nil {
			t.Fatalf("consented %v answer %q receipt %v", res.Consented, res.Answer, res.Receipt)
		}
		t.Logf("from the agent's device request to the push at the push service: %s", pushed)
	})

	t.Run("O4 and O5 the unpaired device, another user, a tagged device and a replayed cookie are refused", func(t *testing.T) {
		if code, body := laptop.call("GET", "/api/consent", nil, "", nil); code != http.StatusUnauthorized {
			t.Errorf("the unpaired laptop: %d %s", code, body)
		}
		for _, d := range []*tailnetDevice{other, tagged} {
			if code, body := d.call("GET", "/api/consent", nil, "", nil); code != http.StatusForbidden {
				t.Errorf("%s: %d %s", d.srv.Hostname, code, body)
			}
		}
		u, _ := url.Parse(funnelURL)
		laptop.hc.Jar.SetCookies(u, phone.hc.Jar.Cookies(u))
		if code, body := laptop.call("GET", "/api/consent", nil, "", nil); code != http.StatusForbidden {
			t.Errorf("the phone's cookie on the laptop: %d %s", code, body)
		}
	})

	t.Run("O2 the revoked phone is refused", func(t *testing.T) {
		if code := e.admin.do("POST", "/api/devices/"+sess.Device+"/revoke", nil, nil); code != http.StatusNoContent {
			t.Fatalf("revoke: %d", code)
		}
		if code, body := phone.call("GET", "/api/consent", nil, "", nil); code != http.StatusUnauthorized {
			t.Errorf("the revoked phone: %d %s", code, body)
		}
	})

	t.Run("O6 the Funnel and the gateway serve no owner route", func(t *testing.T) {
		in := newIngress(t, tn, self)
		routes := []string{"/pair?code=x", "/phone", "/sw.js", "/manifest.webmanifest", "/api/session", "/api/consent", "/api/consent/x/decision",
			"/api/device/push", "/api/devices", "/api/devices/pair", "/api/devices/x/revoke"}
		gw := "http://" + e.n.Addresses().Gateway
		for _, base := range []struct {
			url string
			hc  *http.Client
		}{{funnelURL, in.client()}, {gw, http.DefaultClient}} {
			for _, route := range routes {
				for _, method := range []string{"GET", "POST", "PUT", "DELETE"} {
					req, _ := http.NewRequest(method, base.url+route, strings.NewReader("{}"))
					req.Header.Set("Content-Type", "application/json")
					resp, err := base.hc.Do(req)
					if err != nil {
						t.Fatalf("%s %s%s: %v", method, base.url, route, err)
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusNotFound {
						t.Errorf("%s %s%s: %d; want 404", method, base.url, route, resp.StatusCode)
					}
				}
			}
		}
	})
}

// TestPhoneTailnetOnly: an owner who does not publish chooses "Tailnet only" on the
// Reachability card: the node joins the tailnet without a Funnel listener, and the owner's
// phone pairs and reads the requests there.
func TestPhoneTailnetOnly(t *testing.T) {
	t.Parallel()
	tn := newTailnet(t, nil, false)
	e := newEnv(t, withNode(func(o *node.Options) {
		o.Reach = reach.Config{ControlURL: tn.url, Ephemeral: true, TLS: tn.ca.tlsConfig(), Hostname: "aether"}
	}))
	var r ownerpkg.Reachability
	if code := e.admin.do("POST", "/api/reachability/tailnet", map[string]bool{"on": true}, &r); code != http.StatusOK {
		t.Fatalf("tailnet only: %d", code)
	}
	r = waitReach(t, e, "on the tailnet", func(r ownerpkg.Reachability) bool { return r.State == string(reach.OnTailnet) })
	if r.Mode != ownerpkg.ReachTailnet || r.URL != funnelURL || r.InUse {
		t.Fatalf("tailnet only: %+v", r)
	}
	self := e.n.FunnelTailnet().Tailnet()
	st, err := self.Up(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	phone := joinTailnet(t, tn, "pixel", self)
	phone.seenAs(self, st.Self.UserID, false)
	var pr struct{ Link string }
	if code := e.admin.do("POST", "/api/devices/pair", nil, &pr); code != http.StatusOK {
		t.Fatalf("add a phone: %d", code)
	}
	if code, body := phone.call("GET", strings.TrimPrefix(pr.Link, funnelURL), nil, "", nil); code != http.StatusSeeOther {
		t.Fatalf("pairing: %d %s", code, body)
	}
	if code, body := phone.call("GET", "/api/consent", nil, "", nil); code != http.StatusOK {
		t.Fatalf("the phone's requests: %d %s", code, body)
	}
}
