package identity

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aether/aether/backend/identity/identitytest"
)

var b64 = base64.RawURLEncoding.EncodeToString

func hs256(key []byte, header, payload string) string {
	input := b64([]byte(header)) + "." + b64([]byte(payload))
	m := hmac.New(sha256.New, key)
	m.Write([]byte(input))
	return input + "." + b64(m.Sum(nil))
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func totalHits(is *identitytest.Issuer) int {
	return is.Hits(identitytest.DiscoveryPath) + is.Hits(identitytest.OAuthMetadataPath) + is.Hits(identitytest.JWKSPath)
}

// TestHostileInputs covers the identity rows of docs/threats.md (J1–J30), one subtest per row.
func TestHostileInputs(t *testing.T) {
	t.Run("J1 alg none", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk)
		v := newVerifier(t, clk)
		for _, alg := range []string{"none", "None", "NONE"} {
			tok := b64([]byte(`{"alg":"`+alg+`","typ":"JWT"}`)) + "." + b64([]byte(mustJSON(t, is.Claims("alice", testAud)))) + "."
			wantReject(t, v, tok, CodeAlgNotAllowed)
		}
		if n := totalHits(is); n != 0 {
			t.Fatalf("issuer was contacted %d times; alg none must never reach the key lookup", n)
		}
	})

	t.Run("J2 HS256 signed with the issuer's RSA public key", func(t *testing.T) {
		clk := newClock()
		rsaKey := identitytest.NewRSAKey("rsa-1", 2048)
		is := newIssuer(t, clk, identitytest.WithKeys(rsaKey))
		v := newVerifier(t, clk)
		der, err := x509.MarshalPKIXPublicKey(rsaKey.Public())
		if err != nil {
			t.Fatal(err)
		}
		pemBytes := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
		payload := mustJSON(t, is.Claims("alice", testAud))
		for _, secret := range [][]byte{pemBytes, der} {
			for _, alg := range []string{"HS256", "HS384", "HS512"} {
				wantReject(t, v, hs256(secret, `{"alg":"`+alg+`","kid":"rsa-1"}`, payload), CodeAlgNotAllowed)
			}
		}
		if n := totalHits(is); n != 0 {
			t.Fatalf("issuer contacted %d times for an HMAC token", n)
		}
		// The same issuer's genuine RS256 tokens still pass.
		wantOK(t, v, is.Token("alice", testAud))
	})

	t.Run("J3 JWKS with an oct key", func(t *testing.T) {
		clk := newClock()
		ed := identitytest.NewEdDSAKey("ed-1")
		is := newIssuer(t, clk, identitytest.WithKeys(ed))
		secret := []byte("attacker-chosen-secret")
		jwks := map[string]any{"keys": []any{
			map[string]any{"kty": "oct", "kid": "h1", "k": b64(secret), "alg": "HS256"},
			ed.JWK(),
		}}
		is.SetJWKS([]byte(mustJSON(t, jwks)))
		v := newVerifier(t, clk)
		wantReject(t, v, hs256(secret, `{"alg":"HS256","kid":"h1"}`, mustJSON(t, is.Claims("alice", testAud))), CodeAlgNotAllowed)
		// A set carrying a symmetric key is refused whole, even for a genuine EdDSA token.
		wantReject(t, v, is.Token("alice", testAud), CodeKeySymmetric)
	})

	t.Run("J4 no kid", func(t *testing.T) {
		clk := newClock()
		one := newIssuer(t, clk)
		two := newIssuer(t, clk, identitytest.WithKeys(identitytest.NewEdDSAKey("a"), identitytest.NewEdDSAKey("b")))
		v := newVerifier(t, clk)
		noKID := map[string]any{"kid": nil}
		id := wantOK(t, v, one.Keys()[0].Sign(noKID, one.Claims("alice", testAud)))
		if id.Issuer != one.URL || id.Subject != "alice" {
			t.Fatalf("identity = %+v", id)
		}
		wantReject(t, v, two.Keys()[0].Sign(noKID, two.Claims("alice", testAud)), CodeKIDRequired)
		// Signed by issuer one's only key but claiming issuer two: never tried against one's key.
		wantReject(t, v, one.Keys()[0].Sign(noKID, two.Claims("alice", testAud)), CodeKIDRequired)
		three := newIssuer(t, clk)
		wantReject(t, v, one.Keys()[0].Sign(noKID, three.Claims("alice", testAud)), CodeSignatureInvalid)
	})

	t.Run("J5 unknown kid flood", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk)
		v := newVerifier(t, clk)
		wantOK(t, v, is.Token("alice", testAud))
		if n := is.Hits(identitytest.JWKSPath); n != 1 {
			t.Fatalf("JWKS fetched %d times, want 1", n)
		}
		flood := func() {
			t.Helper()
			rogue := identitytest.NewEdDSAKey("")
			toks := make([]string, 10000)
			for i := range toks {
				toks[i] = rogue.Sign(map[string]any{"kid": "rnd-" + strconv.Itoa(i)}, is.Claims("alice", testAud))
			}
			var wg sync.WaitGroup
			var bad atomic.Int64
			for w := range 8 {
				wg.Go(func() {
					for i := w; i < len(toks); i += 8 {
						if _, err := verify(v, toks[i]); err == nil || err.(*Error).Code != CodeKIDUnknown {
							bad.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if bad.Load() != 0 {
				t.Fatalf("%d unknown-kid tokens were not refused with kid_unknown", bad.Load())
			}
		}
		// Within the window after the first fetch: no refresh at all.
		flood()
		if n := is.Hits(identitytest.JWKSPath); n != 1 {
			t.Fatalf("JWKS fetched %d times during the window, want 1", n)
		}
		// After the window: 10k unknown kids cause exactly one refresh.
		clk.Advance(31 * time.Second)
		flood()
		if n := is.Hits(identitytest.JWKSPath); n != 2 {
			t.Fatalf("JWKS fetched %d times, want 2 (one refresh for 10k unknown kids)", n)
		}

		t.Run("rotation is picked up by the next window's refresh", func(t *testing.T) {
			next := identitytest.NewEdDSAKey("ed-2")
			is.SetKeys(append(is.Keys(), next)...)
			tok := next.Sign(nil, is.Claims("alice", testAud))
			wantReject(t, v, tok, CodeKIDUnknown)
			clk.Advance(31 * time.Second)
			wantOK(t, v, next.Sign(nil, is.Claims("alice", testAud)))
		})
	})

	t.Run("J6 hostile kid", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk)
		v := newVerifier(t, clk)
		k := is.Keys()[0]
		claims := is.Claims("alice", testAud)
		for _, kid := range []string{"../../etc/passwd", "' OR 1=1; --", "ed-1\x00", "ED-1"} {
			wantReject(t, v, k.Sign(map[string]any{"kid": kid}, claims), CodeKIDUnknown)
		}
		for _, kid := range []any{strings.Repeat("k", 5000), "", 7, []string{"ed-1"}} {
			wantReject(t, v, k.Sign(map[string]any{"kid": kid}, claims), CodeKIDInvalid)
		}
		wantReject(t, v, k.Sign(map[string]any{"kid": strings.Repeat("k", 10<<10)}, claims), CodeTokenTooLarge)
		wantOK(t, v, k.Sign(nil, claims))
	})

	t.Run("J7 jku x5u jwk headers are ignored", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk)
		attacker := identitytest.NewEdDSAKey("attacker")
		var attackerHits atomic.Int64
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			attackerHits.Add(1)
			_ = json.NewEncoder(w).Encode(map[string]any{"keys": []any{attacker.JWK()}})
		}))
		defer evil.Close()
		v := newVerifier(t, clk)
		hostile := map[string]any{"jku": evil.URL + "/jwks", "x5u": evil.URL + "/cert", "jwk": attacker.JWK()}
		wantReject(t, v, attacker.Sign(hostile, is.Claims("alice", testAud)), CodeKIDUnknown)
		hostile["kid"] = "ed-1" // the issuer's kid, attacker's signature
		wantReject(t, v, attacker.Sign(hostile, is.Claims("alice", testAud)), CodeSignatureInvalid)
		// A genuine token that happens to carry the headers verifies with the discovered key.
		wantOK(t, v, is.Keys()[0].Sign(map[string]any{"jku": evil.URL, "x5u": evil.URL, "jwk": attacker.JWK()}, is.Claims("alice", testAud)))
		if n := attackerHits.Load(); n != 0 {
			t.Fatalf("attacker server contacted %d times", n)
		}
	})

	t.Run("J8 http issuer", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk)
		k := identitytest.NewEdDSAKey("x")
		for _, insecure := range []bool{false, true} {
			v := newVerifier(t, clk, func(c *Config) { c.AllowInsecureLocalIssuers = insecure })
			wantReject(t, v, k.Sign(nil, claimsFor(clk, "http://evil.example")), CodeIssuerInvalid)
			wantReject(t, v, k.Sign(nil, claimsFor(clk, "ftp://evil.example")), CodeIssuerInvalid)
			wantReject(t, v, k.Sign(nil, claimsFor(clk, "evil.example")), CodeIssuerInvalid)
			// LAN ranges are never "local" issuers.
			wantReject(t, v, k.Sign(nil, claimsFor(clk, "http://192.168.1.10")), CodeIssuerBlocked)
			wantReject(t, v, k.Sign(nil, claimsFor(clk, "http://10.0.0.5:8080")), CodeIssuerBlocked)
		}
		strict := newVerifier(t, clk, func(c *Config) { c.AllowInsecureLocalIssuers = false })
		wantReject(t, strict, is.Token("alice", testAud), CodeIssuerBlocked)
		if n := totalHits(is); n != 0 {
			t.Fatalf("loopback issuer contacted %d times without allowInsecureLocalIssuers", n)
		}
		wantOK(t, newVerifier(t, clk), is.Token("alice", testAud))
	})

	t.Run("J9 issuer at a private or odd address", func(t *testing.T) {
		clk := newClock()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cl := &countingListener{Listener: ln}
		srv := httptest.NewUnstartedServer(http.NotFoundHandler())
		srv.Listener = cl
		srv.StartTLS()
		defer srv.Close()
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		res := &lookupCounter{}
		v := newVerifier(t, clk, func(c *Config) {
			c.AllowInsecureLocalIssuers = false
			c.LookupIP = res.LookupIP
			c.NewIssuerBurst = 1
		})
		k := identitytest.NewEdDSAKey("x")
		for _, tc := range []struct{ iss, code string }{
			{"https://127.0.0.1:" + port, CodeIssuerBlocked},
			{"https://127.0.0.2:" + port, CodeIssuerBlocked},
			{"https://[::1]:" + port, CodeIssuerBlocked},
			{"https://10.1.2.3", CodeIssuerBlocked},
			{"https://169.254.169.254", CodeIssuerBlocked},
			{"https://100.64.0.1", CodeIssuerBlocked},
			{"https://[fe80::1]", CodeIssuerBlocked},
			{"https://[fd00::1]", CodeIssuerBlocked},
			{"https://0.0.0.0", CodeIssuerBlocked},
			{"https://[::ffff:7f00:1]", CodeIssuerInvalid},
			{"https://[::ffff:127.0.0.1]:" + port, CodeIssuerInvalid},
			{"https://2130706433", CodeIssuerInvalid},
			{"https://0x7f000001", CodeIssuerInvalid},
			{"https://0177.0.0.1", CodeIssuerInvalid},
			{"https://127.1", CodeIssuerInvalid},
			{"https://localhost:" + port, CodeIssuerBlocked},
			{"https://intranet", CodeIssuerInvalid},
		} {
			for range 3 { // repeated: refused the same way, and never charged to the client
				wantReject(t, v, k.Sign(nil, claimsFor(clk, tc.iss)), tc.code)
			}
		}
		if n := cl.accepted.Load(); n != 0 {
			t.Fatalf("%d connections were made to a blocked address", n)
		}
		if n := res.calls.Load(); n != 0 {
			t.Fatalf("resolver called %d times for address literals", n)
		}
		// The client's single new-issuer token is still unspent: refusals cost nothing.
		res.table = map[string][]net.IP{"issuer.test": {net.ParseIP("10.9.9.9")}}
		wantReject(t, v, k.Sign(nil, claimsFor(clk, "https://issuer.test")), CodeIssuerBlocked)
	})

	t.Run("J10 public name resolving to a private address", func(t *testing.T) {
		clk := newClock()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cl := &countingListener{Listener: ln}
		srv := httptest.NewUnstartedServer(http.NotFoundHandler())
		srv.Listener = cl
		srv.StartTLS()
		defer srv.Close()
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		res := &lookupCounter{table: map[string][]net.IP{
			"issuer.test":  {net.ParseIP("127.0.0.1")},
			"rebind.test":  {net.ParseIP("93.184.216.34"), net.ParseIP("10.0.0.1")},
			"mapped.test":  {net.ParseIP("::ffff:127.0.0.1")},
			"linklc.test":  {net.ParseIP("169.254.169.254")},
			"private.test": {net.ParseIP("fd12:3456::1")},
		}}
		for _, insecure := range []bool{false, true} {
			v := newVerifier(t, clk, func(c *Config) {
				c.AllowInsecureLocalIssuers = insecure
				c.LookupIP = res.LookupIP
				c.RootCAs = x509.NewCertPool()
			})
			k := identitytest.NewEdDSAKey("x")
			for _, host := range []string{"issuer.test", "rebind.test", "mapped.test", "linklc.test", "private.test"} {
				before := res.calls.Load()
				tok := k.Sign(nil, claimsFor(clk, "https://"+host+":"+port))
				wantReject(t, v, tok, CodeIssuerBlocked)
				wantReject(t, v, tok, CodeIssuerBlocked) // negative-cached: no second lookup
				if n := res.calls.Load() - before; n != 1 {
					t.Fatalf("%s resolved %d times, want 1", host, n)
				}
			}
		}
		if n := cl.accepted.Load(); n != 0 {
			t.Fatalf("%d connections were made to a name that resolved to loopback", n)
		}
	})

	t.Run("J11 discovery redirect to metadata address", func(t *testing.T) {
		clk := newClock()
		for _, target := range []string{
			"http://169.254.169.254/latest/meta-data/",
			"https://169.254.169.254/latest/meta-data/",
			"http://10.0.0.1/.well-known/openid-configuration",
			"http://example.com/.well-known/openid-configuration",
		} {
			is := newIssuer(t, clk)
			is.Handle(identitytest.DiscoveryPath, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target, http.StatusFound)
			})
			wantReject(t, newVerifier(t, clk), is.Token("alice", testAud), CodeIssuerBlocked)
		}

		t.Run("redirects within the issuer are followed, at most 3", func(t *testing.T) {
			is := newIssuer(t, clk)
			is.Handle(identitytest.DiscoveryPath, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/hop1", http.StatusFound)
			})
			is.Handle("/hop1", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/hop2", http.StatusFound) })
			is.Handle("/hop2", func(w http.ResponseWriter, r *http.Request) {
				_ = json.NewEncoder(w).Encode(map[string]string{"issuer": is.URL, "jwks_uri": is.URL + identitytest.JWKSPath})
			})
			wantOK(t, newVerifier(t, clk), is.Token("alice", testAud))

			loop := newIssuer(t, clk)
			loop.Handle(identitytest.DiscoveryPath, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, identitytest.DiscoveryPath, http.StatusFound)
			})
			_, err := verify(newVerifier(t, clk), loop.Token("alice", testAud))
			wantCode(t, err, CodeIssuerUnavailable)
			if n := loop.Hits(identitytest.DiscoveryPath); n != 4 {
				t.Fatalf("redirect loop followed %d requests, want 4 (1 + 3 redirects)", n)
			}
		})
	})

	t.Run("J12 discovery issuer differs from iss", func(t *testing.T) {
		clk := newClock()
		for name, mangle := range map[string]func(string) string{
			"trailing slash": func(u string) string { return u + "/" },
			"case":           func(u string) string { return strings.ToUpper(u[:4]) + u[4:] },
			"other host":     func(u string) string { return strings.Replace(u, "127.0.0.1", "localhost", 1) },
		} {
			is := newIssuer(t, clk)
			is.Handle(identitytest.DiscoveryPath, func(w http.ResponseWriter, r *http.Request) {
				_ = json.NewEncoder(w).Encode(map[string]string{"issuer": mangle(is.URL), "jwks_uri": is.URL + identitytest.JWKSPath})
			})
			_, err := verify(newVerifier(t, clk), is.Token("alice", testAud))
			if e, ok := errors.AsType[*Error](err); !ok || e.Code != CodeIssuerMismatch {
				t.Fatalf("%s: err = %v, want %s", name, err, CodeIssuerMismatch)
			}
		}
		// The token's iss with a trailing slash against a document without it.
		is := newIssuer(t, clk)
		c := is.Claims("alice", testAud)
		c["iss"] = is.URL + "/"
		wantReject(t, newVerifier(t, clk), is.Sign(c), CodeIssuerMismatch)
	})

	t.Run("J13 jwks_uri at a private address or over http", func(t *testing.T) {
		clk := newClock()
		for _, jwksURI := range []string{
			"http://169.254.169.254/jwks",
			"https://10.0.0.1/jwks",
			"https://example.com/jwks", // leaves the loopback issuer's scope
			"file:///etc/passwd",
			"http://user:pw@127.0.0.1/jwks",
		} {
			is := newIssuer(t, clk)
			is.Handle(identitytest.DiscoveryPath, func(w http.ResponseWriter, r *http.Request) {
				_ = json.NewEncoder(w).Encode(map[string]string{"issuer": is.URL, "jwks_uri": jwksURI})
			})
			_, err := verify(newVerifier(t, clk), is.Token("alice", testAud))
			if e, ok := errors.AsType[*Error](err); !ok || e.Code != CodeJWKSURIInvalid {
				t.Fatalf("jwks_uri %s: err = %v, want %s", jwksURI, err, CodeJWKSURIInvalid)
			}
		}
		// For a public issuer: https and a public host only.
		for _, tc := range []struct {
			u  string
			ok bool
		}{
			{"https://issuer.example/jwks", true},
			{"http://issuer.example/jwks", false},
			{"https://127.0.0.1/jwks", false},
			{"https://localhost/jwks", false},
			{"https://[::ffff:a00:1]/jwks", false},
			{"https://192.168.0.1/jwks", false},
		} {
			u := mustParseURL(t, tc.u)
			if err := checkFetchURL(u, scopePublic); (err == nil) != tc.ok {
				t.Fatalf("checkFetchURL(%s) = %v, want ok=%v", tc.u, err, tc.ok)
			}
		}
	})

	t.Run("J14 oversized JWKS", func(t *testing.T) {
		clk := newClock()
		huge := newIssuer(t, clk)
		huge.Handle(identitytest.JWKSPath, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(50<<20))
			_, _ = w.Write([]byte(`{"keys":[`))
		})
		endless := newIssuer(t, clk)
		endless.Handle(identitytest.JWKSPath, func(w http.ResponseWriter, r *http.Request) {
			chunk := []byte(strings.Repeat(" ", 32<<10))
			_, _ = w.Write([]byte(`{"keys":[`))
			for {
				if _, err := w.Write(chunk); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		})
		v := newVerifier(t, clk)
		for _, is := range []*identitytest.Issuer{huge, endless} {
			wantReject(t, v, is.Token("alice", testAud), CodeJWKSTooLarge)
			wantReject(t, v, is.Token("alice", testAud), CodeJWKSTooLarge)
			if n := is.Hits(identitytest.JWKSPath); n != 1 {
				t.Fatalf("JWKS fetched %d times, want 1 (negative-cached)", n)
			}
		}
		clk.Advance(2 * time.Minute) // past the negative TTL: one new attempt
		wantReject(t, v, huge.Token("alice", testAud), CodeJWKSTooLarge)
		if n := huge.Hits(identitytest.JWKSPath); n != 2 {
			t.Fatalf("JWKS fetched %d times after the negative TTL, want 2", n)
		}
	})

	t.Run("J15 slow issuer", func(t *testing.T) {
		clk := newClock()
		slow := newIssuer(t, clk)
		release := make(chan struct{})
		slow.Handle(identitytest.DiscoveryPath, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]string{"issuer": slow.URL, "jwks_uri": slow.URL + identitytest.JWKSPath})
		})
		fast := newIssuer(t, clk)
		v := newVerifier(t, clk)
		var wg sync.WaitGroup
		var failed atomic.Int64
		for range 20 {
			wg.Go(func() {
				if _, err := verify(v, slow.Token("alice", testAud)); err != nil {
					failed.Add(1)
				}
			})
		}
		for slow.Hits(identitytest.DiscoveryPath) == 0 {
			time.Sleep(time.Millisecond)
		}
		// The slow issuer's fetch is in flight; another issuer is not held up by it.
		wantOK(t, v, fast.Token("bob", testAud))
		close(release)
		wg.Wait()
		if failed.Load() != 0 {
			t.Fatalf("%d waiters failed", failed.Load())
		}
		if n := slow.Hits(identitytest.DiscoveryPath); n != 1 {
			t.Fatalf("slow issuer's discovery fetched %d times, want 1 (single flight)", n)
		}

		t.Run("trickling JWKS hits the whole-fetch deadline", func(t *testing.T) {
			trickle := newIssuer(t, clk)
			trickle.Handle(identitytest.JWKSPath, func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write([]byte("{"))
				for {
					w.(http.Flusher).Flush()
					select {
					case <-r.Context().Done():
						return
					case <-time.After(20 * time.Millisecond):
						_, _ = w.Write([]byte(" "))
					}
				}
			})
			v := newVerifier(t, clk, func(c *Config) { c.FetchTimeout = 300 * time.Millisecond })
			wantReject(t, v, trickle.Token("alice", testAud), CodeFetchTimeout)
		})
	})

	t.Run("J16 JWKS with too many keys or a malformed key", func(t *testing.T) {
		clk := newClock()
		many := newIssuer(t, clk)
		many.SetJWKS([]byte(`{"keys":[` + strings.TrimSuffix(strings.Repeat(`{},`, 10000), ",") + `]}`))
		v := newVerifier(t, clk)
		wantReject(t, v, many.Token("alice", testAud), CodeJWKSInvalid)

		is := newIssuer(t, clk)
		wantOK(t, v, is.Token("alice", testAud))
		next := identitytest.NewEdDSAKey("ed-2")
		malformed := map[string]any{"kty": "EC", "crv": "P-256", "kid": "bad", "x": b64([]byte{1}), "y": b64([]byte{2})}
		is.SetJWKS([]byte(mustJSON(t, map[string]any{"keys": []any{is.Keys()[0].JWK(), next.JWK(), malformed}})))
		clk.Advance(31 * time.Second)
		wantReject(t, v, next.Sign(nil, is.Claims("alice", testAud)), CodeKIDUnknown)
		if n := is.Hits(identitytest.JWKSPath); n != 2 {
			t.Fatalf("JWKS fetched %d times, want 2", n)
		}
		// The refresh failed as a whole; the old keys are kept.
		wantOK(t, v, is.Token("alice", testAud))
	})

	t.Run("J17 RSA key under 2048 bits", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk, identitytest.WithKeys(identitytest.NewRSAKey("rsa-weak", 1024)))
		wantReject(t, newVerifier(t, clk), is.Token("alice", testAud), CodeKeyTooWeak)
	})

	t.Run("J18 new issuer flood from one IP", func(t *testing.T) {
		clk := newClock()
		key := identitytest.NewEdDSAKey("k")
		var discoveries atomic.Int64
		var base string
		// One server hosting issuers base/t/0 … base/t/999.
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tenant, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/t/"), "/")
			iss := base + "/t/" + tenant
			switch "/" + rest {
			case identitytest.DiscoveryPath:
				discoveries.Add(1)
				_ = json.NewEncoder(w).Encode(map[string]string{"issuer": iss, "jwks_uri": iss + "/jwks"})
			case "/jwks":
				_ = json.NewEncoder(w).Encode(map[string]any{"keys": []any{key.JWK()}})
			default:
				http.NotFound(w, r)
			}
		}))
		defer srv.Close()
		base = srv.URL
		v := newVerifier(t, clk)
		tokenFor := func(i int) string { return key.Sign(nil, claimsFor(clk, fmt.Sprintf("%s/t/%d", base, i))) }
		ok, limited := 0, 0
		for i := range 1000 {
			_, err := v.Verify(context.Background(), tokenFor(i), "198.51.100.7")
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrRateLimited):
				limited++
			default:
				t.Fatalf("token %d: %v", i, err)
			}
		}
		if ok != 10 || limited != 990 || discoveries.Load() != 10 {
			t.Fatalf("ok=%d limited=%d discoveries=%d, want 10/990/10", ok, limited, discoveries.Load())
		}
		// Known issuers are not charged; another client has its own budget; one IPv6 /64 is one client.
		if _, err := v.Verify(context.Background(), tokenFor(0), "198.51.100.7"); err != nil {
			t.Fatalf("known issuer: %v", err)
		}
		if _, err := v.Verify(context.Background(), tokenFor(1000), "198.51.100.8"); err != nil {
			t.Fatalf("other client: %v", err)
		}
		for i := range 10 {
			if _, err := v.Verify(context.Background(), tokenFor(2000+i), fmt.Sprintf("2001:db8::%x", i+1)); err != nil {
				t.Fatalf("v6 client %d: %v", i, err)
			}
		}
		if _, err := v.Verify(context.Background(), tokenFor(2010), "2001:db8::ffff"); !errors.Is(err, ErrRateLimited) {
			t.Fatalf("same /64: err = %v, want ErrRateLimited", err)
		}
		if _, err := v.Verify(context.Background(), tokenFor(2012), "198.51.100.7:40000"); !errors.Is(err, ErrRateLimited) {
			t.Fatalf("same IP with a port: err = %v, want ErrRateLimited", err)
		}
		clk.Advance(6 * time.Second) // one token refilled
		if _, err := v.Verify(context.Background(), tokenFor(2011), "198.51.100.7"); err != nil {
			t.Fatalf("after refill: %v", err)
		}

		t.Run("global fetch limit", func(t *testing.T) {
			slow := newIssuer(t, clk)
			release := make(chan struct{})
			slow.Handle(identitytest.DiscoveryPath, func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-release:
				case <-r.Context().Done():
				}
				http.NotFound(w, r)
			})
			v := newVerifier(t, clk, func(c *Config) { c.MaxConcurrentFetches = 1 })
			done := make(chan error, 1)
			go func() { _, err := verify(v, slow.Token("alice", testAud)); done <- err }()
			for slow.Hits(identitytest.DiscoveryPath) == 0 {
				time.Sleep(time.Millisecond)
			}
			other := newIssuer(t, clk)
			_, err := v.Verify(context.Background(), other.Token("bob", testAud), "203.0.113.9")
			if !errors.Is(err, ErrRateLimited) {
				t.Fatalf("err = %v, want ErrRateLimited while the fetch slots are taken", err)
			}
			if totalHits(other) != 0 {
				t.Fatal("a fetch ran beyond the global limit")
			}
			close(release)
			<-done
		})

		t.Run("issuer cache stays bounded", func(t *testing.T) {
			v := newVerifier(t, clk, func(c *Config) { c.MaxIssuers = 3 })
			for i := range 8 {
				if _, err := v.Verify(context.Background(), tokenFor(3000+i), "203.0.113.10"); err != nil {
					t.Fatal(err)
				}
				clk.Advance(time.Second)
			}
			v.mu.RLock()
			n := len(v.issuers)
			v.mu.RUnlock()
			if n != 3 {
				t.Fatalf("cache holds %d issuers, want 3", n)
			}
		})
	})

	t.Run("J19 kid collision across issuers", func(t *testing.T) {
		clk := newClock()
		a := newIssuer(t, clk, identitytest.WithKeys(identitytest.NewEdDSAKey("k1")))
		b := newIssuer(t, clk, identitytest.WithKeys(identitytest.NewEdDSAKey("k1")))
		v := newVerifier(t, clk)
		wantReject(t, v, a.Sign(b.Claims("alice", testAud)), CodeSignatureInvalid)
		if n := totalHits(a); n != 0 {
			t.Fatalf("issuer A contacted %d times for a token naming B", n)
		}
		// A's keys, once cached, are still never consulted for B.
		wantOK(t, v, a.Token("alice", testAud))
		wantReject(t, v, a.Sign(b.Claims("alice", testAud)), CodeSignatureInvalid)
	})

	t.Run("J20 missing exp", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk)
		c := is.Claims("alice", testAud)
		delete(c, "exp")
		wantReject(t, newVerifier(t, clk), is.Sign(c), CodeExpMissing)
		c = is.Claims("alice", testAud)
		delete(c, "iat")
		wantReject(t, newVerifier(t, clk), is.Sign(c), CodeIatMissing)
		c = is.Claims("alice", testAud)
		c["exp"] = "tomorrow"
		wantReject(t, newVerifier(t, clk), is.Sign(c), CodeMalformed)
		if n := totalHits(is); n != 0 {
			t.Fatalf("issuer contacted %d times for tokens that cannot pass", n)
		}
	})

	t.Run("J21 lifetime too long", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk)
		v := newVerifier(t, clk)
		now := clk.Now()
		c := is.Claims("alice", testAud)
		c["exp"] = now.AddDate(10, 0, 0).Unix()
		wantReject(t, v, is.Sign(c), CodeLifetimeTooLong)
		c["exp"], c["iat"] = now.Add(90*time.Minute).Unix(), now.Add(-30*time.Minute).Unix()
		wantReject(t, v, is.Sign(c), CodeLifetimeTooLong)
		c["exp"], c["iat"] = now.Add(time.Hour).Unix(), now.Unix()
		wantOK(t, v, is.Sign(c))
	})

	t.Run("J22 nbf or iat in the future", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk)
		v := newVerifier(t, clk)
		now := clk.Now()
		c := is.Claims("alice", testAud)
		c["nbf"] = now.Add(5 * time.Minute).Unix()
		wantReject(t, v, is.Sign(c), CodeNotYetValid)
		c = is.Claims("alice", testAud)
		c["iat"] = now.Add(5 * time.Minute).Unix()
		c["exp"] = now.Add(10 * time.Minute).Unix()
		wantReject(t, v, is.Sign(c), CodeIatInFuture)
		c["iat"], c["nbf"] = now.Add(30*time.Second).Unix(), now.Add(30*time.Second).Unix() // within leeway
		wantOK(t, v, is.Sign(c))
	})

	t.Run("J23 audience", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk)
		v := newVerifier(t, clk)
		for _, aud := range []any{nil, "", "https://other-node.example", []string{"https://a.example", "https://node.example/"}, []string{}} {
			c := is.Claims("alice", testAud)
			if aud == nil {
				delete(c, "aud")
			} else {
				c["aud"] = aud
			}
			wantReject(t, v, is.Sign(c), CodeAudience)
		}
		c := is.Claims("alice", testAud)
		c["aud"] = []string{"https://other-node.example", testAud}
		wantOK(t, v, is.Sign(c))
	})

	t.Run("J24 expired token replayed", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk)
		v := newVerifier(t, clk)
		tok := is.Token("alice", testAud)
		wantOK(t, v, tok)
		clk.Advance(5*time.Minute + 59*time.Second) // inside the 60 s leeway
		wantOK(t, v, tok)
		clk.Advance(2 * time.Second)
		wantReject(t, v, tok, CodeExpired)
	})

	t.Run("J25 delegation token presented as identity", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk)
		v := newVerifier(t, clk)
		k := is.Keys()[0]
		for _, typ := range []string{DefaultDelegationType, "application/pact-delegation+jwt", "PACT-DELEGATION+JWT"} {
			wantReject(t, v, k.Sign(map[string]any{"typ": typ}, is.Claims("alice", testAud)), CodeDelegationToken)
		}
		node := newVerifier(t, clk, func(c *Config) { c.NodeIssuer = is.URL })
		wantReject(t, node, is.Token("alice", testAud), CodeDelegationToken)
		c := is.Claims("alice", testAud)
		c["iss"] = is.URL + "/"
		wantReject(t, node, is.Sign(c), CodeDelegationToken)
		if n := totalHits(is); n != 0 {
			t.Fatalf("issuer contacted %d times", n)
		}
	})

	t.Run("J26 huge bearer token", func(t *testing.T) {
		clk := newClock()
		v := newVerifier(t, clk)
		wantReject(t, v, strings.Repeat(".", 1<<20), CodeTokenTooLarge)
		is := newIssuer(t, clk)
		c := is.Claims("alice", testAud)
		c["pad"] = strings.Repeat("x", 8<<10)
		wantReject(t, v, is.Sign(c), CodeTokenTooLarge)
		wantReject(t, v, "a.b.c.d.e", CodeMalformed)
		wantReject(t, v, "", CodeMalformed)
	})

	t.Run("J27 non-canonical base64", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk)
		v := newVerifier(t, clk)
		tok := is.Token("alice", testAud)
		parts := strings.Split(tok, ".")
		variants := []string{
			parts[0] + "==." + parts[1] + "." + parts[2],
			parts[0] + "." + parts[1] + "=." + parts[2],
			parts[0] + "." + parts[1] + "." + parts[2] + "==",
			parts[0] + "." + parts[1] + "\n." + parts[2],
			" " + tok,
			parts[0] + "." + parts[1] + ".+" + parts[2][1:],
			parts[0] + "." + parts[1] + "." + nonCanonical(t, parts[2]),
		}
		for _, p := range parts[:2] {
			if nc, ok := tryNonCanonical(p); ok {
				variants = append(variants, strings.Replace(tok, p, nc, 1))
			}
		}
		for i, bad := range variants {
			if _, err := verify(v, bad); err == nil {
				t.Fatalf("variant %d accepted", i)
			} else {
				wantCode(t, err, CodeMalformed)
			}
		}
		wantOK(t, v, tok)
	})

	t.Run("J28 duplicate or case-variant claims", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk)
		v := newVerifier(t, clk)
		k := is.Keys()[0]
		now := clk.Now().Unix()
		common := fmt.Sprintf(`"iss":%q,"aud":%q,"iat":%d,"exp":%d`, is.URL, testAud, now, now+300)
		header := `{"alg":"EdDSA","kid":"ed-1"}`
		for _, payload := range []string{
			`{` + common + `,"sub":"alice","sub":"admin"}`,
			`{` + common + `,"sub":"alice","SUB":"admin"}`,
			`{` + common + `,"SUB":"admin"}`,
			`{` + common + `,"Sub":"admin"}`,
			`{` + common + `,"sub":"alice","\u0073ub":"admin"}`,
			`{` + common + `,"sub":"alice","\u0053UB":"admin"}`,
			`{` + common + `,"sub":"alice","ſub":"admin"}`,
			`{` + common + `,"sub":"alice","iss":"https://evil.example"}`,
			`{` + common + `,"sub":"alice","x":1,"X":2}`,
		} {
			wantReject(t, v, k.SignRaw([]byte(header), []byte(payload)), CodeDuplicateClaim)
		}
		payload := `{` + common + `,"sub":"alice"}`
		for _, h := range []string{
			`{"alg":"EdDSA","kid":"ed-1","alg":"none"}`,
			`{"alg":"EdDSA","kid":"ed-1","KID":"other"}`,
			`{"alg":"EdDSA","Kid":"ed-1"}`,
		} {
			wantReject(t, v, k.SignRaw([]byte(h), []byte(payload)), CodeDuplicateClaim)
		}
		// Look-alikes inside values and nested objects are not member names.
		tricky := `{` + common + `,"sub":"alice","note":"\"sub\":\"admin\", }{","ext":{"sub":1,"SUB":[2,{"a":"}"}]}}`
		id := wantOK(t, v, k.SignRaw([]byte(header), []byte(tricky)))
		if id.Subject != "alice" {
			t.Fatalf("subject = %q", id.Subject)
		}
		wantReject(t, v, k.SignRaw([]byte(header), []byte(`{`+common+`,"sub":"alice","s\xffb":1,"s\xfeb":2}`)), CodeMalformed)
		wantReject(t, v, k.SignRaw([]byte(header), []byte(`[`+common+`]`)), CodeMalformed)
	})

	t.Run("J29 issuer unreachable with keys cached", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk)
		v := newVerifier(t, clk)
		wantOK(t, v, is.Token("alice", testAud))
		is.Close()
		clk.Advance(2 * time.Hour) // past the refresh interval: refresh fails in the background
		wantOK(t, v, is.Token("alice", testAud))
		v.fetches.Wait()
		clk.Advance(20 * time.Hour)
		wantOK(t, v, is.Token("alice", testAud))
		v.fetches.Wait()
		clk.Advance(3 * time.Hour) // keys now 25 h old: past max staleness
		wantReject(t, v, is.Token("alice", testAud), CodeIssuerUnavailable)
		wantReject(t, v, is.Token("alice", testAud), CodeIssuerUnavailable)
	})

	t.Run("J30 riding on a remembered check: a token changed by one byte, or whose key the issuer dropped", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk, identitytest.WithKeys(identitytest.NewEdDSAKey("old")))
		v := newVerifier(t, clk)
		tok := is.Token("alice", testAud)
		wantOK(t, v, tok)
		wantOK(t, v, tok) // remembered
		// Another token is checked in full, however close to a remembered one.
		sig, other := strings.LastIndexByte(tok, '.')+1, "A"
		if tok[sig] == 'A' {
			other = "B"
		}
		wantReject(t, v, tok[:sig]+other+tok[sig+1:], CodeSignatureInvalid)
		// The issuer rotates its key; a token under the new one makes the node refresh.
		is.SetKeys(identitytest.NewEdDSAKey("new"))
		clk.Advance(31 * time.Second)
		wantOK(t, v, is.Token("alice", testAud))
		wantReject(t, v, tok, CodeKIDUnknown)
	})
}

// nonCanonical flips the unused low bits of a segment's last character.
func nonCanonical(t *testing.T, seg string) string {
	t.Helper()
	nc, ok := tryNonCanonical(seg)
	if !ok {
		t.Fatalf("segment of length %d has no spare bits", len(seg))
	}
	return nc
}

func tryNonCanonical(seg string) (string, bool) {
	if len(seg)%4 == 0 {
		return "", false
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, seg[len(seg)-1])
	return seg[:len(seg)-1] + string(alphabet[last|1]), last|1 != last
}
