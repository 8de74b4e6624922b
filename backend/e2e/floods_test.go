package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/aether/aether/backend/identity/identitytest"
)

// Floods and limits on a real node (docs/threats.md, F1–F9).

// formCall posts a device-flow form with token as the identity JWT through hc, with extra
// headers, and decodes the answer.
func formCall(t *testing.T, hc *http.Client, endpoint, token string, form url.Values, hdr map[string]string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", endpoint, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Errorf("POST %s: %v", endpoint, err)
		return nil, nil
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp, out
}

// wantLimit checks a limit's answer: 429, OAuth's slow_down naming what was hit, Retry-After.
func wantLimit(t *testing.T, resp *http.Response, out map[string]any, hit string) int {
	t.Helper()
	if resp == nil {
		return 0
	}
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	desc, _ := out["error_description"].(string)
	if resp.StatusCode != http.StatusTooManyRequests || out["error"] != "slow_down" || !strings.Contains(desc, hit) || err != nil || ra < 1 {
		t.Errorf("got %d %v (Retry-After %q), want 429 slow_down saying %q with Retry-After", resp.StatusCode, out, resp.Header.Get("Retry-After"), hit)
	}
	return ra
}

// TestConsentFlood replays the flood of the issue: one issuer with 200 made-up subjects opens
// 1,000 device flows as fast as it can.
func TestConsentFlood(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	evil := identitytest.NewIssuer(t, identitytest.WithAddr("127.0.0.2:0")) // site 127.0.0.2; the env's issuer is 127.0.0.1

	t.Run("F1 one issuer with 200 made-up subjects opens 1000 device flows", func(t *testing.T) {
		var (
			mu              sync.Mutex
			opened, limited int
			retry           = map[int]int{}
		)
		jobs := make(chan int)
		var wg sync.WaitGroup
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range jobs {
					resp, out := formCall(t, http.DefaultClient, e.publicURL+"/pact/device_authorization",
						evil.Token(fmt.Sprintf("made-up-%d", i%200), e.publicURL), url.Values{"scope": {"review:read_only"}}, nil)
					if resp == nil {
						continue
					}
					mu.Lock()
					if resp.StatusCode == http.StatusOK {
						opened++
					} else {
						limited++
						retry[wantLimit(t, resp, out, "issuer site 127.0.0.2")]++
					}
					mu.Unlock()
				}
			}()
		}
		for i := range 1000 {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
		t.Logf("the flood opened %d requests; %d refused (Retry-After seconds: count %v)", opened, limited, retry)
		if opened+limited != 1000 || opened < 1 || opened > 100 {
			t.Fatalf("opened %d, refused %d: want at most 100 (the site's share of the node's 1000) opened and the rest refused", opened, limited)
		}

		// An agent of another issuer still gets its device code, the owner allows it, its turn runs.
		alice := e.agent("alice")
		alice.allow()
		task := alice.send(alice.client("review", a2a.TransportProtocolJSONRPC), "", "Review main.go")
		if task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("alice's turn ended %s", task.Status.State)
		}

		// The owner's list holds the flood's share and nothing more.
		var list struct{ Requests []consentRequest }
		e.admin.do("GET", "/api/consent", nil, &list)
		fromEvil := 0
		for _, r := range list.Requests {
			if r.Agent.Issuer == evil.URL {
				fromEvil++
			}
		}
		if fromEvil != opened {
			t.Fatalf("the consent page lists %d requests of the flood, want the %d it opened", fromEvil, opened)
		}
	})
}

// TestUnknownDeviceCodes: made-up device codes are counted per agent identity, so one agent's
// guesses never refuse another agent's own code, whether they connect directly or through a
// trusted proxy that forwards them for one address.
func TestUnknownDeviceCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		proxies []string
		hdr     map[string]string
	}{
		{"direct", nil, nil},
		{"behind a trusted proxy", []string{"127.0.0.1/32"}, map[string]string{"X-Forwarded-For": "198.51.100.20"}},
	} {
		t.Run("F4 ten made-up device codes from one agent/"+tc.name, func(t *testing.T) {
			e := newEnv(t, withTrustedProxies(tc.proxies...))
			token := e.publicURL + "/pact/token"
			bob := e.agent("bob")
			resp, start := formCall(t, http.DefaultClient, e.publicURL+"/pact/device_authorization", bob.identityToken(), url.Values{"scope": {"review:read_only"}}, tc.hdr)
			if resp == nil || resp.StatusCode != 200 {
				t.Fatalf("bob's device authorization: %v", start)
			}
			if code, out := e.admin.decide(start["user_code"].(string), "allow"); code != 200 {
				t.Fatalf("allow: %d %v", code, out)
			}
			// Made-up codes until the budget (10, then one every 6 s) refuses one.
			mallory := e.agent("mallory")
			refused := false
			for i := 0; !refused; i++ {
				resp, out := formCall(t, http.DefaultClient, token, mallory.identityToken(), url.Values{
					"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {fmt.Sprintf("MadeUpDeviceCode%06d", i)}}, tc.hdr)
				switch {
				case resp != nil && resp.StatusCode == http.StatusTooManyRequests:
					if i < 10 {
						t.Fatalf("refused after %d made-up codes, want 10 first", i)
					}
					wantLimit(t, resp, out, "this agent sent more than 10 unknown device codes")
					refused = true
				case resp == nil || resp.StatusCode != 400 || out["error"] != "invalid_grant":
					t.Fatalf("made-up code %d: %v, want 400 invalid_grant", i, out)
				case i == 100:
					t.Fatal("100 made-up codes and none refused")
				}
			}
			resp, tok := formCall(t, http.DefaultClient, token, bob.identityToken(), url.Values{
				"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {start["device_code"].(string)}}, tc.hdr)
			if resp == nil || resp.StatusCode != 200 || tok["access_token"] == nil {
				t.Fatalf("bob's poll of his approved code after mallory's guesses: %v", tok)
			}
		})
	}
}

// TestThrowawayIssuers: the budget for issuers the node has not seen is the real client's,
// so ten throwaway issuers of one client never make another client's new issuer wait,
// whether they connect directly or through a trusted proxy.
func TestThrowawayIssuers(t *testing.T) {
	t.Parallel()
	// Issuers nothing answers for: a closed port.
	ln, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	key := identitytest.NewEdDSAKey("k")
	fromAddr := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}, Timeout: time.Minute}
	}
	for _, tc := range []struct {
		name              string
		proxies           []string
		attacker, visitor *http.Client
		attackerHdr, hdr  map[string]string
	}{
		{name: "direct", attacker: fromAddr("127.0.0.2"), visitor: fromAddr("127.0.0.1")},
		{name: "behind a trusted proxy", proxies: []string{"127.0.0.1/32"}, attacker: http.DefaultClient, visitor: http.DefaultClient,
			attackerHdr: map[string]string{"X-Forwarded-For": "203.0.113.9"}, hdr: map[string]string{"X-Forwarded-For": "203.0.113.10"}},
	} {
		t.Run("F5 ten throwaway issuers from one client/"+tc.name, func(t *testing.T) {
			e := newEnv(t, withTrustedProxies(tc.proxies...))
			authz := e.publicURL + "/pact/device_authorization"
			scope := url.Values{"scope": {"review:read_only"}}
			throwaway := func(i int) string {
				now := time.Now()
				return key.Sign(nil, map[string]any{"iss": fmt.Sprintf("%s/throwaway/%d", dead, i), "sub": "x", "aud": e.publicURL,
					"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix()})
			}
			// Throwaway issuers until the budget (10, then one every 6 s) refuses one.
			for i := 0; ; i++ {
				resp, out := formCall(t, tc.attacker, authz, throwaway(i), scope, tc.attackerHdr)
				if resp != nil && resp.StatusCode == http.StatusTooManyRequests {
					if i < 10 {
						t.Fatalf("refused after %d throwaway issuers, want 10 first", i)
					}
					if ra := wantLimit(t, resp, out, "this client presented more than 10 new issuers"); ra < 1 || ra > 6 {
						t.Errorf("Retry-After %d, want at most 6 (one new issuer every 6 s)", ra)
					}
					break
				}
				if resp == nil || resp.StatusCode != 401 {
					t.Fatalf("throwaway issuer %d: %v, want 401 (its keys cannot be fetched)", i, out)
				}
				if i == 100 {
					t.Fatal("100 throwaway issuers and none refused")
				}
			}
			// A new, real issuer from another client is fetched and its agent served.
			real := identitytest.NewIssuer(t, identitytest.WithAddr("127.0.0.4:0"))
			resp, out := formCall(t, tc.visitor, authz, real.Token("alice", e.publicURL), scope, tc.hdr)
			if resp == nil || resp.StatusCode != 200 || out["device_code"] == nil {
				t.Fatalf("a new legitimate issuer from another client: %v", out)
			}
		})
	}
}

// trickler is one connection that sends its headers at once and its body a byte at a time.
type trickler struct {
	what     string
	path     string
	answered chan struct{} // closed once an answer was read, or the connection ended without one
	status   int           // of the answer (0: none arrived), set before answered is closed
	body     string
	done     chan struct{} // closed once the connection ended
	closed   bool          // the node closed it; set before done is closed
	err      string
}

// trickle opens a connection to the gateway, sends a request for path whose body would be
// 4096 bytes, then one byte every 500 ms until the node stops it, and records what the node
// did. A connection still open a minute after its headers fails the test: the body deadline
// must have closed it long before.
func trickle(what, addr, path, contentType, token string) *trickler {
	tr := &trickler{what: what, path: path, answered: make(chan struct{}), done: make(chan struct{})}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		tr.err = err.Error()
		close(tr.answered)
		close(tr.done)
		return tr
	}
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Type: %s\r\nContent-Length: 4096\r\n\r\n{", path, addr, auth, contentType)
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tr.done:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	go func() {
		defer close(tr.done)
		defer conn.Close()
		conn.SetReadDeadline(time.Now().Add(time.Minute))
		br := bufio.NewReader(conn)
		if resp, err := http.ReadResponse(br, nil); err == nil {
			b, _ := io.ReadAll(resp.Body)
			tr.status, tr.body = resp.StatusCode, string(b)
		}
		close(tr.answered)
		_, err := io.Copy(io.Discard, br) // until the node closes (EOF, or a reset)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			tr.err = "still open a minute after its headers"
		} else {
			tr.closed = true
		}
	}()
	return tr
}

// timeoutShape reports whether a 408 body is the body deadline's error in the shape of the
// endpoint: OAuth's, JSON-RPC's or HTTP+JSON's.
func timeoutShape(path, body string) bool {
	var out struct {
		Error            json.RawMessage `json:"error"`
		ErrorDescription string          `json:"error_description"`
	}
	if json.Unmarshal([]byte(body), &out) != nil {
		return false
	}
	const said = "did not arrive within 30 s"
	var e struct {
		Code    any    `json:"code"`
		Status  string `json:"status"`
		Message string `json:"message"`
	}
	switch {
	case strings.HasPrefix(path, "/pact/"):
		return string(out.Error) == `"invalid_request"` && strings.Contains(out.ErrorDescription, said)
	case json.Unmarshal(out.Error, &e) != nil || !strings.Contains(e.Message, said):
		return false
	case path == "/a2a/review": // JSON-RPC
		return e.Code == float64(-32600)
	default: // HTTP+JSON
		return e.Code == float64(408) && e.Status == "DEADLINE_EXCEEDED"
	}
}

// firstAnswer waits for the first of ts to be answered and returns it. The node takes a
// request's slot after its headers, which the client cannot see; of more trickles than a cap,
// the one refused at once is the one answered first.
func firstAnswer(t *testing.T, ts []*trickler) *trickler {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		for _, tr := range ts {
			select {
			case <-tr.answered:
				return tr
			default:
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("none of the trickles was answered")
	return nil
}

// TestSlowBodies: clients with valid identities that trickle their bodies are cut off at the
// body deadline and their connections closed, one agent or one issuer site holds only its share
// of the requests in progress, and meanwhile another agent's full turn succeeds.
func TestSlowBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	other := identitytest.NewIssuer(t, identitytest.WithAddr("127.0.0.2:0")) // another issuer site
	addr := e.opts.PactListen
	rpcGet := func(token string) (*http.Response, map[string]any) {
		req, _ := http.NewRequest("POST", e.publicURL+"/a2a/review", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"no-such-task"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp, out
	}
	rpcMessage := func(body string) string {
		var out struct{ Error struct{ Message string } }
		json.Unmarshal([]byte(body), &out)
		return out.Error.Message
	}

	var all []*trickler
	want := map[*trickler]int{} // the status each must be answered with
	// F7: twenty agents of the env's issuer, each trickling on one of the endpoints that read a body.
	endpoints := []struct{ path, ctype string }{
		{"/a2a/review", "application/json"}, {"/a2a/review/message:send", "application/json"},
		{"/pact/device_authorization", "application/x-www-form-urlencoded"}, {"/pact/token", "application/x-www-form-urlencoded"},
	}
	for i := range 20 {
		ep := endpoints[i%len(endpoints)]
		tr := trickle(fmt.Sprintf("slow-%d on %s", i, ep.path), addr, ep.path, ep.ctype, e.issuer.Token(fmt.Sprintf("slow-%d", i), e.publicURL))
		all, want[tr] = append(all, tr), http.StatusRequestTimeout
	}
	// A trickle without an identity gets its 401 at once; its body is never read, and the
	// deadline closes the connection all the same.
	tr := trickle("no identity", addr, "/a2a/review", "application/json", "")
	all, want[tr] = append(all, tr), http.StatusUnauthorized

	// overCap opens n+1 trickles of one cap's holders and checks that the one refused at
	// once got 429 saying what was hit, with Retry-After 2; the other n hold the cap.
	overCap := func(t *testing.T, n int, name string, token func(i int) string, hit string) {
		var ts []*trickler
		for i := range n + 1 {
			tr := trickle(fmt.Sprintf("%s %d", name, i), addr, "/a2a/review", "application/json", token(i))
			ts, want[tr] = append(ts, tr), http.StatusRequestTimeout
		}
		all = append(all, ts...)
		refused := firstAnswer(t, ts)
		want[refused] = http.StatusTooManyRequests
		if refused.status != http.StatusTooManyRequests || !strings.Contains(rpcMessage(refused.body), hit) {
			t.Fatalf("%s: the first answer is %d %s, want 429 saying %q", refused.what, refused.status, refused.body, hit)
		}
	}

	t.Run("F8 one agent opens more requests than its share", func(t *testing.T) {
		hog := func(int) string { return e.issuer.Token("hog", e.publicURL) }
		overCap(t, 16, "hog", hog, "this agent has 16 requests in progress, the most one agent may have")
		// While the sixteen hold on, every binding refuses the agent in its own shape.
		resp, out := rpcGet(hog(0))
		rpcErr, _ := out["error"].(map[string]any)
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" || rpcErr["code"] != float64(-32000) {
			t.Fatalf("the hog's JSON-RPC call: %d %v (Retry-After %q), want 429 -32000 with Retry-After 2", resp.StatusCode, out, resp.Header.Get("Retry-After"))
		}
		req, _ := http.NewRequest("GET", e.publicURL+"/a2a/review/tasks/no-such-task", nil)
		req.Header.Set("Authorization", "Bearer "+hog(0))
		rresp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var rest struct {
			Error struct {
				Code   int
				Status string
			}
		}
		json.NewDecoder(rresp.Body).Decode(&rest)
		rresp.Body.Close()
		if rresp.StatusCode != 429 || rresp.Header.Get("Retry-After") != "2" || rest.Error.Status != "RESOURCE_EXHAUSTED" || rest.Error.Code != 429 {
			t.Fatalf("the hog's HTTP+JSON call: %d %+v, want 429 RESOURCE_EXHAUSTED with Retry-After 2", rresp.StatusCode, rest)
		}
		oresp, oout := formCall(t, http.DefaultClient, e.publicURL+"/pact/device_authorization", hog(0), url.Values{"scope": {"review:read_only"}}, nil)
		if ra := wantLimit(t, oresp, oout, "this agent has 16 requests in progress"); ra != 2 {
			t.Errorf("OAuth Retry-After %d, want 2", ra)
		}
		// Another agent of the same issuer is not refused.
		if resp, out := rpcGet(e.issuer.Token("not-the-hog", e.publicURL)); resp.StatusCode != 200 || rpcCode(out) != -32001 {
			t.Fatalf("another agent's call: %d %v, want TaskNotFound", resp.StatusCode, out)
		}
	})

	t.Run("F9 made-up subjects of one site open more requests than its share", func(t *testing.T) {
		made := func(i int) string { return other.Token(fmt.Sprintf("s%d", i), e.publicURL) }
		overCap(t, 64, "site 127.0.0.2 subject", made, "the agents of issuer site 127.0.0.2 have 64 requests in progress")
		if resp, out := rpcGet(other.Token("one-more", e.publicURL)); resp.StatusCode != 429 {
			t.Fatalf("a new subject of the full site: %d %v, want 429", resp.StatusCode, out)
		}
		// The env's issuer (site 127.0.0.1) is not refused.
		if resp, out := rpcGet(e.issuer.Token("not-the-hog", e.publicURL)); resp.StatusCode != 200 || rpcCode(out) != -32001 {
			t.Fatalf("an agent of another site: %d %v, want TaskNotFound", resp.StatusCode, out)
		}
	})

	t.Run("F7 twenty valid identities trickle their bodies", func(t *testing.T) {
		// Meanwhile another agent's whole turn: device flow, the owner's allow, the turn.
		alice := e.agent("alice")
		alice.allow()
		task := alice.send(alice.client("review", a2a.TransportProtocolHTTPJSON), "", "Review main.go")
		if task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("alice's turn ended %s while the slow clients held on", task.Status.State)
		}
		answered := 0
		for _, tr := range all {
			<-tr.done
			switch {
			case !tr.closed:
				t.Errorf("%s: %s", tr.what, tr.err)
			case tr.status != 0 && tr.status != want[tr]:
				t.Errorf("%s: answered %d %s, want %d", tr.what, tr.status, tr.body, want[tr])
			case tr.status == http.StatusRequestTimeout && !timeoutShape(tr.path, tr.body):
				t.Errorf("%s: the 408 is not in the endpoint's error shape: %s", tr.what, tr.body)
			case tr.status != 0:
				answered++
			}
		}
		t.Logf("%d slow connections closed by the node, %d of them with an answer first", len(all), answered)
		// Their slots are free again.
		if resp, out := rpcGet(e.issuer.Token("hog", e.publicURL)); resp.StatusCode == 429 {
			t.Fatalf("the hog is still refused after its slow requests ended: %v", out)
		}
		if resp, out := rpcGet(other.Token("one-more", e.publicURL)); resp.StatusCode == 429 {
			t.Fatalf("site 127.0.0.2 is still refused after its slow requests ended: %v", out)
		}
	})
}
