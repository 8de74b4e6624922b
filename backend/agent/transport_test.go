package agent

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// countingIdentity hands out tok-1, tok-2, … so tests see each request ask anew.
type countingIdentity struct {
	mu sync.Mutex
	n  int
}

func (c *countingIdentity) IdentityToken(context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return fmt.Sprintf("tok-%d", c.n), nil
}

func TestBearerTransportAddsAFreshIdentityToEachRequest(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	defer srv.Close()
	hc := &http.Client{Transport: &BearerTransport{Identity: &countingIdentity{}}}
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
		req.Header.Set("Authorization", "Basic Og==") // x/oauth2's client auth must not win
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if len(seen) != 2 || seen[0] != "Bearer tok-1" || seen[1] != "Bearer tok-2" {
		t.Fatalf("Authorization headers %q", seen)
	}
}

func TestBearerTransportFailsWithoutIdentity(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("a request went out without an identity")
	}))
	defer srv.Close()
	hc := &http.Client{Transport: &BearerTransport{Identity: StaticIdentity("")}}
	if _, err := hc.Get(srv.URL); err == nil {
		t.Fatal("no error")
	}
}

func TestRejectingTransportKeepsTheNodesReason(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="pact", error="invalid_token", error_description="the token's \"aud\" is not this node"`)
		http.Error(w, `{"error":"x"}`, http.StatusUnauthorized)
	}))
	defer srv.Close()
	hc := &http.Client{Transport: rejectingTransport{}}
	_, err := hc.Get(srv.URL)
	var rej *IdentityRejectedError
	if !errors.As(err, &rej) || rej.Description != `the token's "aud" is not this node` {
		t.Fatalf("err = %v, want IdentityRejectedError with the description", err)
	}
}

func TestAuthParam(t *testing.T) {
	h := `Bearer realm="pact", error=invalid_token, error_description="a, \"quoted\" reason"`
	for name, want := range map[string]string{"realm": "pact", "error": "invalid_token", "error_description": `a, "quoted" reason`, "scope": ""} {
		if got := authParam(h, name); got != want {
			t.Errorf("authParam(%s) = %q, want %q", name, got, want)
		}
	}
	if got := authParam(`Bearer error_description="unterminated`, "error_description"); got != "unterminated" {
		t.Errorf("unterminated quote: %q", got)
	}
}

func TestCheckEndpoint(t *testing.T) {
	for _, c := range []struct {
		raw, public string
		ok          bool
	}{
		{"https://node.example/pact/token", "https://node.example", true},
		{"http://127.0.0.1:8080/pact/token", "http://127.0.0.1:8080", true},
		{"http://localhost:8080/a2a/x", "http://localhost:8080", true},
		{"https://evil.example/pact/token", "https://node.example", false},
		{"https://node.example:8443/pact/token", "https://node.example", false},
		{"http://node.example/pact/token", "https://node.example", false},
		{"http://node.example/pact/token", "http://node.example", false}, // plain http off loopback
		{"/pact/token", "https://node.example", false},
		{"ftp://node.example/x", "ftp://node.example", false},
	} {
		err := checkEndpoint("tokenUrl", c.raw, c.public)
		if (err == nil) != c.ok {
			t.Errorf("checkEndpoint(%s, %s) = %v, want ok=%v", c.raw, c.public, err, c.ok)
		}
	}
}
