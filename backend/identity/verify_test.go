package identity

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/identity/identitytest"
)

func TestVerify(t *testing.T) {
	t.Run("EdDSA over http loopback", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk)
		id := wantOK(t, newVerifier(t, clk), is.Token("alice", testAud))
		want := Identity{Agent: domain.Agent{Issuer: is.URL, Subject: "alice"}, ExpiresAt: clk.Now().Add(5 * time.Minute)}
		if id != want {
			t.Fatalf("identity = %+v, want %+v", id, want)
		}
	})

	t.Run("ES256 and RS256 over https with the issuer's roots", func(t *testing.T) {
		clk := newClock()
		es, rs := identitytest.NewES256Key("es-1"), identitytest.NewRSAKey("rs-1", 2048)
		is := newIssuer(t, clk, identitytest.WithTLS(), identitytest.WithKeys(es, rs))
		v := newVerifier(t, clk, func(c *Config) { c.RootCAs = is.RootCAs() })
		wantOK(t, v, es.Sign(nil, is.Claims("alice", testAud)))
		wantOK(t, v, rs.Sign(nil, is.Claims("alice", testAud)))
		// A key is only used with its own algorithm family.
		wantReject(t, v, es.Sign(map[string]any{"kid": "rs-1"}, is.Claims("alice", testAud)), CodeKeyAlgMismatch)
		// Without the issuer's roots the TLS handshake fails.
		wantReject(t, newVerifier(t, clk), is.Token("alice", testAud), CodeIssuerUnavailable)
	})

	t.Run("kid lookup stays within the key type and the JWK's alg", func(t *testing.T) {
		clk := newClock()
		// One kid for keys of two types (RFC 7517 §4.5): each token finds the key its alg needs.
		ed, es := identitytest.NewEdDSAKey("shared"), identitytest.NewES256Key("shared")
		is := newIssuer(t, clk, identitytest.WithKeys(ed, es))
		v := newVerifier(t, clk)
		wantOK(t, v, ed.Sign(nil, is.Claims("alice", testAud)))
		wantOK(t, v, es.Sign(nil, is.Claims("alice", testAud)))

		// An RSA key published for PS256 only is not used for RS256, with or without a kid.
		rs := identitytest.NewRSAKey("rs-1", 2048)
		ps := newIssuer(t, clk, identitytest.WithKeys(rs))
		jwk := rs.JWK()
		jwk["alg"] = "PS256"
		ps.SetJWKS([]byte(mustJSON(t, map[string]any{"keys": []any{jwk}})))
		wantReject(t, v, rs.Sign(nil, ps.Claims("alice", testAud)), CodeKeyAlgMismatch)
		wantReject(t, v, rs.Sign(map[string]any{"kid": nil}, ps.Claims("alice", testAud)), CodeKeyAlgMismatch)
	})

	t.Run("falls back to OAuth metadata", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk)
		is.Handle(identitytest.DiscoveryPath, http.NotFound)
		wantOK(t, newVerifier(t, clk), is.Token("alice", testAud))
		if is.Hits(identitytest.OAuthMetadataPath) != 1 {
			t.Fatal("OAuth metadata document not used")
		}
	})

	t.Run("same subject at two issuers is two agents", func(t *testing.T) {
		clk := newClock()
		a, b := newIssuer(t, clk), newIssuer(t, clk)
		v := newVerifier(t, clk)
		ia, ib := wantOK(t, v, a.Token("alice", testAud)), wantOK(t, v, b.Token("alice", testAud))
		if ia.Key() == ib.Key() {
			t.Fatal("identities of different issuers share a key")
		}
	})

	t.Run("keys refresh in the background after the refresh interval", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk)
		v := newVerifier(t, clk)
		old := is.Token("alice", testAud)
		wantOK(t, v, old)
		next := identitytest.NewEdDSAKey("ed-2")
		is.SetKeys(next)
		clk.Advance(61 * time.Minute)
		wantOK(t, v, is.Token("alice", testAud)) // the cached key still serves this call
		v.fetches.Wait()
		if n := is.Hits(identitytest.JWKSPath); n != 2 {
			t.Fatalf("JWKS fetched %d times, want 2", n)
		}
		wantOK(t, v, next.Sign(nil, is.Claims("alice", testAud)))
		wantReject(t, v, identitytest.NewEdDSAKey("ed-1").Sign(nil, is.Claims("alice", testAud)), CodeKIDUnknown)
	})

	t.Run("a canceled request stops waiting", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk)
		release := make(chan struct{})
		is.Handle(identitytest.DiscoveryPath, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			http.NotFound(w, r)
		})
		defer close(release)
		v := newVerifier(t, clk)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := v.Verify(ctx, is.Token("alice", testAud), "192.0.2.1")
		wantCode(t, err, CodeCanceled)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want it to wrap context.Canceled", err)
		}
	})

	t.Run("crit header refused", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk)
		tok := is.Keys()[0].Sign(map[string]any{"crit": []string{"b64"}, "b64": false}, is.Claims("alice", testAud))
		wantReject(t, newVerifier(t, clk), tok, CodeCritUnsupported)
	})

	t.Run("errors never carry the token", func(t *testing.T) {
		clk := newClock()
		is := newIssuer(t, clk)
		v := newVerifier(t, clk)
		c := is.Claims("alice", "https://elsewhere.example")
		tok := is.Sign(c)
		_, err := verify(v, tok)
		for _, part := range []string{tok, "alice", "elsewhere"} {
			if strings.Contains(err.Error(), part) {
				t.Fatalf("error %q contains %q", err, part)
			}
		}
	})
}

func TestNewPanicsWithoutAudience(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New accepted an empty Audience")
		}
	}()
	New(Config{})
}
