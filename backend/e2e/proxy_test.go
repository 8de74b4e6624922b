package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	agentpkg "github.com/aether/aether/backend/agent"
	"github.com/aether/aether/backend/codex/codextest"
)

// TestTLSProxy is the deployment the README and docs/deploy.md describe: the gateway speaks
// plain HTTP and a TLS proxy serving publicUrl sits in front of it. Debian's caddy runs
// docs/deploy/Caddyfile, as shipped, at https://127.0.0.1:<port> with its own CA, in front of a
// node whose publicUrl is that https:// address. The reference agent, trusting that CA and
// nothing else, walks the whole flow through it: the card, AUTH_REQUIRED, the device flow (the
// owner allows on the admin API), the turn, and the receipt verified with the JWKS fetched
// through the proxy; a second run gets its answer with the saved token. Every request went to
// the proxy, every URL in every answer the node gave is an https:// one, and the forwarding
// headers an agent sends itself never reach the gateway. (TestTLSProxyTrustedProxies shows
// the node seeing the agent's own address through it.)
func TestTLSProxy(t *testing.T) {
	caddy := caddyBinary(t)
	t.Parallel()
	public := fmt.Sprintf("https://127.0.0.1:%d", freePort(t))
	e := newEnv(t, withPublicURL(public))
	// Between caddy and the gateway, a tap that passes everything on and keeps the headers
	// that name the client, as the gateway gets them.
	tap := &headerTap{}
	gw := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: e.opts.PactListen})
	tapSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tap.keep(r)
		gw.ServeHTTP(w, r)
	}))
	defer tapSrv.Close()
	roots := startCaddy(t, caddy, public, strings.TrimPrefix(tapSrv.URL, "http://"))
	rec := &recorder{base: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}}
	hc := &http.Client{Transport: rec}
	dir := t.TempDir()

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var codes []string
	res, err := agentpkg.Run(ctx, agentpkg.Options{
		Card: public, Brand: "review", Message: "Review main.go please", Dir: dir, HTTPClient: hc,
		OnUserCode: func(code, link string) {
			codes = append(codes, code)
			if !strings.HasPrefix(link, "https://") {
				t.Errorf("the consent link %q is not https", link)
			}
			if st, out := e.admin.decide(code, "allow"); st != http.StatusOK {
				t.Errorf("allow %s: %d %v", code, st, out)
			}
		},
	})
	if err != nil {
		t.Fatalf("the agent through the proxy: %v", err)
	}
	if res.Card.PublicURL != public || !strings.HasPrefix(res.Interface.URL, public+"/a2a/review") {
		t.Errorf("card publicUrl %q, interface %q; want them at %s", res.Card.PublicURL, res.Interface.URL, public)
	}
	for name, u := range map[string]string{"deviceAuthorizationUrl": res.Card.DeviceAuthorizationURL, "tokenUrl": res.Card.TokenURL} {
		if !strings.HasPrefix(u, public+"/") {
			t.Errorf("the card's %s %q is not under %s", name, u, public)
		}
	}
	if res.AuthRequired == nil || res.AuthRequired.Reason != "missing" {
		t.Fatalf("the first turn was not AUTH_REQUIRED (missing): %+v", res.AuthRequired)
	}
	if !res.Consented || len(codes) != 1 {
		t.Errorf("consented %v with codes %v; want one device flow", res.Consented, codes)
	}
	if res.Answer != codextest.DefaultAnswer {
		t.Errorf("answer %q", res.Answer)
	}
	if res.Receipt == nil || res.Receipt.Issuer != public || res.Receipt.Status != "completed" {
		t.Fatalf("receipt %+v; want a verified one issued by %s", res.Receipt, public)
	}

	// Again, with the token the first run saved: no consent, an answer.
	again, err := agentpkg.Run(ctx, agentpkg.Options{Card: public, Brand: "review", Message: "And now?", Dir: dir, HTTPClient: hc,
		OnUserCode: func(code, _ string) { t.Errorf("the second run asked for consent (%s)", code) }})
	if err != nil || again.Answer != codextest.DefaultAnswer || again.Receipt == nil {
		t.Fatalf("second run: %v (answer %q)", err, again.Answer)
	}

	// The node's other public documents, as an agent or a library reads them.
	var meta struct {
		Issuer                      string `json:"issuer"`
		DeviceAuthorizationEndpoint string `json:"device_authorization_endpoint"`
		TokenEndpoint               string `json:"token_endpoint"`
		JwksURI                     string `json:"jwks_uri"`
	}
	getJSONVia(t, hc, public+"/.well-known/oauth-authorization-server", &meta)
	if meta.Issuer != public || meta.JwksURI != public+"/.well-known/jwks.json" ||
		!strings.HasPrefix(meta.DeviceAuthorizationEndpoint, public+"/") || !strings.HasPrefix(meta.TokenEndpoint, public+"/") {
		t.Errorf("authorization server metadata %+v; want everything at %s", meta, public)
	}
	var card map[string]any
	getJSONVia(t, hc, public+"/.well-known/agent-card.json", &card)

	// An agent's own forwarding headers do not get through: the gateway sees the proxy's.
	spoof, _ := http.NewRequest("GET", public+"/healthz", nil)
	spoof.Header.Set("X-Forwarded-For", "203.0.113.9")
	spoof.Header.Set("Forwarded", "for=203.0.113.9;proto=https")
	spoof.Header.Set("X-Forwarded-Host", "evil.example")
	if resp, err := hc.Do(spoof); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	if h := tap.last("/healthz"); h.Get("X-Forwarded-For") != "127.0.0.1" || h.Get("Forwarded") != "" ||
		h.Get("X-Forwarded-Proto") != "https" || h.Get("X-Forwarded-Host") != strings.TrimPrefix(public, "https://") {
		t.Errorf("behind the proxy the gateway got X-Forwarded-For %q, Forwarded %q, X-Forwarded-Proto %q, X-Forwarded-Host %q",
			h.Get("X-Forwarded-For"), h.Get("Forwarded"), h.Get("X-Forwarded-Proto"), h.Get("X-Forwarded-Host"))
	}

	// What went over the wire.
	exchanges := rec.all()
	var jwks bool
	for _, x := range exchanges {
		if !strings.HasPrefix(x.url, public+"/") {
			t.Errorf("a request went to %s, not through the proxy at %s", x.url, public)
		}
		jwks = jwks || x.url == public+"/.well-known/jwks.json"
	}
	if !jwks {
		t.Error("the agent never fetched the JWKS through the proxy")
	}
	urlRE := regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>\\]+`)
	seen := map[string]bool{}
	for _, x := range exchanges {
		for _, u := range urlRE.FindAllString(x.body, -1) {
			if strings.HasPrefix(u, res.Agent.Issuer) {
				continue // the agent's own issuer, echoed back (it is not the node's)
			}
			seen[u] = true
			if !strings.HasPrefix(u, "https://") {
				t.Errorf("the node handed out %q (in the answer to %s)", u, x.url)
			}
		}
	}
	if len(seen) < 5 {
		t.Errorf("only %d URLs in the node's answers: %v", len(seen), seen)
	}
}

// caddyBinary is Debian's caddy, or a skip (a failure with AETHER_REQUIRE_CADDY=1, as in CI).
func caddyBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("caddy")
	if err != nil {
		msg := "the TLS proxy test needs caddy (apt-get install caddy; make test installs it)"
		if os.Getenv("AETHER_REQUIRE_CADDY") == "1" {
			t.Fatal(msg + " (AETHER_REQUIRE_CADDY=1)")
		}
		t.Skip(msg + "; set AETHER_REQUIRE_CADDY=1 to make this a failure")
	}
	return p
}

// startCaddy runs docs/deploy/Caddyfile as it is shipped, with its placeholders set for site
// (https://127.0.0.1:<port>, Caddy's own CA) in front of upstream, and returns that CA's root
// once the node answers /healthz through it. Caddy keeps its state in a temporary folder.
func startCaddy(t *testing.T, bin, site, upstream string) *x509.CertPool {
	t.Helper()
	caddyfile, err := filepath.Abs(filepath.Join("..", "..", "docs", "deploy", "Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logPath := filepath.Join(dir, "caddy.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "run", "--config", caddyfile, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(),
		"HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"AETHER_SITE="+site, "AETHER_TLS=internal", "AETHER_UPSTREAM="+upstream,
		"AETHER_CADDY_ADMIN=off", fmt.Sprintf("AETHER_CADDY_HTTP_PORT=%d", freePort(t)))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start caddy: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(waitLimit):
			cmd.Process.Kill()
			<-exited
		}
	})
	caddyLog := func() string { b, _ := os.ReadFile(logPath); return string(b) }

	rootPath := filepath.Join(dir, "data", "caddy", "pki", "authorities", "local", "root.crt")
	deadline := time.Now().Add(waitLimit)
	for {
		select {
		case err := <-exited:
			t.Fatalf("caddy exited: %v\n%s", err, caddyLog())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("caddy did not serve %s/healthz\n%s", site, caddyLog())
		}
		if pem, err := os.ReadFile(rootPath); err == nil {
			roots := x509.NewCertPool()
			if roots.AppendCertsFromPEM(pem) {
				hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
				if resp, err := hc.Get(site + "/healthz"); err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						return roots
					}
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func getJSONVia(t *testing.T, hc *http.Client, u string, out any) {
	t.Helper()
	resp, err := hc.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// headerTap keeps, per path, the client-naming headers of the last request.
type headerTap struct {
	mu  sync.Mutex
	got map[string]http.Header
}

func (h *headerTap) keep(r *http.Request) {
	kept := http.Header{}
	for _, k := range []string{"X-Forwarded-For", "Forwarded", "X-Forwarded-Proto", "X-Forwarded-Host"} {
		if v := r.Header.Values(k); len(v) > 0 {
			kept[k] = v
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.got == nil {
		h.got = map[string]http.Header{}
	}
	h.got[r.URL.Path] = kept
}

func (h *headerTap) last(path string) http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got[path]
}

// recorder is an http.RoundTripper that keeps every request's URL and answer's body.
type recorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	log  []exchange
}

type exchange struct{ url, body string }

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	r.log = append(r.log, exchange{url: req.URL.String(), body: string(body)})
	r.mu.Unlock()
	return resp, nil
}

func (r *recorder) all() []exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]exchange(nil), r.log...)
}

// TestTLSProxyTrustedProxies: with the proxy's address in pact.trustedProxies the node counts
// an agent under its own address, as the proxy forwards it, not the proxy's; without it, under
// the proxy's. The agent connects from 127.0.0.2; the node logs the address of a refused
// identity.
func TestTLSProxyTrustedProxies(t *testing.T) {
	caddy := caddyBinary(t)
	t.Parallel()
	for _, tc := range []struct {
		name    string
		proxies []string
		want    string
	}{
		{"trusted", []string{"127.0.0.1/32"}, "client=127.0.0.2"},
		{"not trusted", nil, "client=127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			public := fmt.Sprintf("https://127.0.0.1:%d", freePort(t))
			var log lockedBuffer
			e := newEnv(t, withPublicURL(public), withTrustedProxies(tc.proxies...), withLog(&log))
			roots := startCaddy(t, caddy, public, strings.TrimPrefix(e.opts.PactListen, "http://"))
			dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, DialContext: dialer.DialContext}}
			req, _ := http.NewRequest("POST", public+"/a2a/review", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer not.a.jwt")
			req.Header.Set("X-Forwarded-For", "203.0.113.9") // the agent's own claim never counts
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("a bad identity through the proxy: %d", resp.StatusCode)
			}
			var line string
			for _, l := range strings.Split(log.String(), "\n") {
				if strings.Contains(l, "identity rejected") {
					line = l
				}
			}
			if !strings.Contains(line, tc.want) {
				t.Fatalf("the node logged %q; want %s", line, tc.want)
			}
		})
	}
}
