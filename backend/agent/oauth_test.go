package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// fakeAS is an RFC 8628 authorization server whose token endpoint answers
// each poll with the next of answers (the last one repeats).
type fakeAS struct {
	srv *httptest.Server

	mu        sync.Mutex
	answers   []string // OAuth error codes; "ok" issues a token
	auth      []string // Authorization header of every request
	forms     []url.Values
	polls     int
	lastPoll  time.Time
	slowDowns int
	expiresIn int
}

func newFakeAS(t *testing.T, answers ...string) *fakeAS {
	as := &fakeAS{answers: answers, expiresIn: 600}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /pact/device_authorization", func(w http.ResponseWriter, r *http.Request) {
		as.record(r)
		writeJSON(w, http.StatusOK, map[string]any{
			"device_code": "dc-1", "user_code": "BCDF-GHJK",
			"verification_uri":          "https://127.0.0.1:3000/pact/consent",
			"verification_uri_complete": "https://127.0.0.1:3000/pact/consent?user_code=BCDF-GHJK",
			"expires_in":                as.expiresIn, "interval": 1,
		})
	})
	mux.HandleFunc("POST /pact/token", func(w http.ResponseWriter, r *http.Request) {
		form := as.record(r)
		as.mu.Lock()
		answer := as.answers[min(as.polls, len(as.answers)-1)]
		as.polls++
		// A poll on the heels of the previous one is the back-to-back retry
		// of x/oauth2's auth-style probe, not a poll at the interval (1 s).
		if form.Get("grant_type") != GrantTypePactGrant {
			if now := time.Now(); !as.lastPoll.IsZero() && now.Sub(as.lastPoll) < 250*time.Millisecond {
				answer = "slow_down"
				as.slowDowns++
			}
			as.lastPoll = time.Now()
		}
		as.mu.Unlock()
		if form.Get("grant_type") == GrantTypePactGrant && form.Get("brand") == "" {
			answer = "invalid_request"
		}
		if answer == "ok" {
			writeJSON(w, http.StatusOK, map[string]any{"access_token": "deleg-1", "token_type": "Bearer", "expires_in": 3600, "scope": "review:read_only"})
			return
		}
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": answer, "error_description": "said " + answer})
	})
	as.srv = httptest.NewServer(mux)
	t.Cleanup(as.srv.Close)
	return as
}

func (as *fakeAS) record(r *http.Request) url.Values {
	r.ParseForm()
	as.mu.Lock()
	defer as.mu.Unlock()
	as.auth = append(as.auth, r.Header.Get("Authorization"))
	as.forms = append(as.forms, r.PostForm)
	return r.PostForm
}

func (as *fakeAS) request() DeviceRequest {
	return DeviceRequest{DeviceAuthorizationURL: as.srv.URL + "/pact/device_authorization", TokenURL: as.srv.URL + "/pact/token", Scope: "review:read_only", Brand: "review"}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func TestDeviceFlow(t *testing.T) {
	t.Parallel()
	as := newFakeAS(t, "authorization_pending", "ok")
	c := &Client{Identity: StaticIdentity("id-jwt")}
	var code, link string
	tok, err := c.DeviceFlow(context.Background(), as.request(), func(c, l string) { code, link = c, l })
	if err != nil {
		t.Fatal(err)
	}
	if tok.AccessToken != "deleg-1" || tok.Scope != "review:read_only" || tok.ExpiresAt.IsZero() {
		t.Fatalf("token = %+v", tok)
	}
	if code != "BCDF-GHJK" || link != "https://127.0.0.1:3000/pact/consent?user_code=BCDF-GHJK" {
		t.Fatalf("told %q %q", code, link)
	}
	as.mu.Lock()
	defer as.mu.Unlock()
	// One request per poll: x/oauth2's auth-style probe would send each failed
	// poll twice, and a node answers the second one slow_down (D5).
	if as.polls != 2 || as.slowDowns != 0 {
		t.Fatalf("%d token requests, %d answered slow_down; want 2 (pending, then the token) and none", as.polls, as.slowDowns)
	}
	for i, a := range as.auth {
		if a != "Bearer id-jwt" {
			t.Fatalf("request %d Authorization %q, want the identity JWT", i, a)
		}
	}
	first := as.forms[0]
	if first.Get("scope") != "review:read_only" || first.Get("brand") != "review" {
		t.Fatalf("device authorization form %v", first)
	}
	if g := as.forms[1].Get("grant_type"); g != "urn:ietf:params:oauth:grant-type:device_code" || as.forms[1].Get("device_code") != "dc-1" {
		t.Fatalf("token form %v", as.forms[1])
	}
}

func TestDeviceFlowEndings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		answer string
		want   error
	}{
		{"D7 owner denied", "access_denied", ErrDenied},
		{"D8 request expired", "expired_token", ErrExpired},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			as := newFakeAS(t, c.answer)
			_, err := (&Client{Identity: StaticIdentity("id-jwt")}).DeviceFlow(context.Background(), as.request(), nil)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
	t.Run("expires_in runs out while pending", func(t *testing.T) {
		t.Parallel()
		as := newFakeAS(t, "authorization_pending")
		as.expiresIn = 1
		_, err := (&Client{Identity: StaticIdentity("id-jwt")}).DeviceFlow(context.Background(), as.request(), nil)
		if !errors.Is(err, ErrExpired) {
			t.Fatalf("err = %v, want ErrExpired", err)
		}
	})
	t.Run("D10 invalid_grant", func(t *testing.T) {
		t.Parallel()
		as := newFakeAS(t, "invalid_grant")
		_, err := (&Client{Identity: StaticIdentity("id-jwt")}).DeviceFlow(context.Background(), as.request(), nil)
		var re *oauth2.RetrieveError
		if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" || errors.Is(err, ErrDenied) {
			t.Fatalf("err = %v, want the invalid_grant RetrieveError", err)
		}
	})
}

func TestRefresh(t *testing.T) {
	t.Parallel()
	as := newFakeAS(t, "ok", "invalid_grant")
	c := &Client{Identity: StaticIdentity("id-jwt")}
	tok, err := c.Refresh(context.Background(), as.request().TokenURL, "review")
	if err != nil || tok.AccessToken != "deleg-1" || tok.ExpiresAt.IsZero() {
		t.Fatalf("Refresh = %+v, %v", tok, err)
	}
	as.mu.Lock()
	form, auth := as.forms[0], as.auth[0]
	as.mu.Unlock()
	if form.Get("grant_type") != GrantTypePactGrant || form.Get("brand") != "review" || auth != "Bearer id-jwt" {
		t.Fatalf("refresh request: form %v, Authorization %q", form, auth)
	}
	_, err = c.Refresh(context.Background(), as.request().TokenURL, "review")
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" {
		t.Fatalf("err = %v, want invalid_grant", err)
	}
}
