package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aether/aether/backend/identity/identitytest"
)

// issuer is an agent platform: an identity issuer on a loopback address of its own (its own
// issuer site, as the node counts them), with OpenID discovery and a JWKS whose one Ed25519
// key signs its agents' identity JWTs, and the agents' connections to the node, which come
// from that address too (the node's limits per client address are per platform).
type issuer struct {
	url    string
	key    *identitytest.Key
	agents *http.Transport
}

func startIssuer(host string) (*issuer, error) {
	ln, err := net.Listen("tcp", host+":0")
	if err != nil {
		return nil, err
	}
	from := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(host)}, Timeout: 10 * time.Second}
	is := &issuer{url: "http://" + ln.Addr().String(), key: identitytest.NewEdDSAKey("soak-1"),
		agents: &http.Transport{DialContext: from.DialContext, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}}
	mux := http.NewServeMux()
	discovery := func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"issuer": is.url, "jwks_uri": is.url + identitytest.JWKSPath})
	}
	mux.HandleFunc(identitytest.DiscoveryPath, discovery)
	mux.HandleFunc(identitytest.OAuthMetadataPath, discovery)
	mux.HandleFunc(identitytest.JWKSPath, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"keys": []any{is.key.JWK()}})
	})
	srv := &http.Server{Handler: mux}
	// No connection of the node's key fetches stays open: the node's goroutines then do not
	// depend on when it last fetched.
	srv.SetKeepAlivesEnabled(false)
	go srv.Serve(ln)
	return is, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// token is an identity JWT for sub and aud, issued at iat and valid until exp.
func (is *issuer) token(sub, aud string, iat, exp time.Time) string {
	return is.key.Sign(nil, map[string]any{"iss": is.url, "sub": sub, "aud": aud, "iat": iat.Unix(), "exp": exp.Unix()})
}

// owner is the node's owner, signed in to the admin API with the admin token as the sign-in
// page does it: a session cookie and the CSRF token.
type owner struct {
	base string
	hc   *http.Client
	csrf string
}

func signIn(dataDir string) (*owner, error) {
	var addrs struct {
		Admin string `json:"admin"`
	}
	data, err := os.ReadFile(filepath.Join(dataDir, "node.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &addrs); err != nil {
		return nil, err
	}
	tok, err := os.ReadFile(filepath.Join(dataDir, "admin.token"))
	if err != nil {
		return nil, err
	}
	jar, _ := cookiejar.New(nil)
	o := &owner{base: "https://" + addrs.Admin, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, // the node's self-signed admin certificate
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	// As the sign-in page sends it: the token in a form, never in a URL.
	req, _ := http.NewRequest("POST", o.base+"/login", strings.NewReader(url.Values{"token": {strings.TrimSpace(string(tok))}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", o.base)
	resp, err := o.hc.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return nil, fmt.Errorf("sign in: %s", resp.Status)
	}
	var s struct{ CSRFToken string }
	if _, err := o.do("GET", "/api/session", nil, &s); err != nil {
		return nil, err
	}
	o.csrf = s.CSRFToken
	return o, nil
}

func (o *owner) do(method, path string, body, out any) (int, error) {
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, o.base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method != "GET" {
		req.Header.Set("Origin", o.base)
		req.Header.Set("X-CSRF-Token", o.csrf)
	}
	resp, err := o.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode, nil
}

// allow finds the pending consent request with userCode and allows it for a day.
func (o *owner) allow(userCode string) error {
	var list struct {
		Requests []struct{ ID, UserCode string }
	}
	if code, err := o.do("GET", "/api/consent", nil, &list); err != nil || code != http.StatusOK {
		return fmt.Errorf("list consent requests: %d %v", code, err)
	}
	for _, r := range list.Requests {
		if r.UserCode != userCode {
			continue
		}
		var out map[string]any
		code, err := o.do("POST", "/api/consent/"+r.ID+"/decision",
			map[string]string{"userCode": userCode, "decision": "allow", "duration": "1d"}, &out)
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("allow %s: %d %v %v", userCode, code, out, err)
		}
		return nil
	}
	return fmt.Errorf("no pending consent request with code %s", userCode)
}

// deviceFlow runs the OAuth device flow for an agent on scope with the owner allowing it,
// and returns the delegation token. A 429 slow_down is waited out as its Retry-After says.
func deviceFlow(hc *http.Client, publicURL, scope string, identity func() string, o *owner) (string, error) {
	start, err := oauthForm(hc, publicURL+"/pact/device_authorization", url.Values{"scope": {scope}}, identity)
	if err != nil {
		return "", err
	}
	userCode, _ := start["user_code"].(string)
	deviceCode, _ := start["device_code"].(string)
	if err := o.allow(userCode); err != nil {
		return "", err
	}
	tok, err := oauthForm(hc, publicURL+"/pact/token", url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"},
		"device_code": {deviceCode}}, identity)
	if err != nil {
		return "", err
	}
	access, _ := tok["access_token"].(string)
	if access == "" {
		return "", fmt.Errorf("token endpoint answered no access_token: %v", tok)
	}
	return access, nil
}

// oauthForm posts form with the agent's identity and returns the JSON answer of a 200.
func oauthForm(hc *http.Client, endpoint string, form url.Values, identity func() string) (map[string]any, error) {
	for attempt := 0; ; attempt++ {
		req, _ := http.NewRequest("POST", endpoint, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+identity())
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests && attempt < 20 {
			retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			time.Sleep(time.Duration(max(retry, 1)) * time.Second)
			continue
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s: %d %v", endpoint, resp.StatusCode, body)
		}
		return body, nil
	}
}
