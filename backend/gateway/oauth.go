package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aether/aether/backend/consent"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/identity"
)

const (
	deviceCodeGrant = "urn:ietf:params:oauth:grant-type:device_code"
	// grantRefreshGrant mints a fresh delegation token from a live grant for the
	// calling identity, so an agent whose short-lived token expired need not ask
	// the owner again. The identity JWT is the only credential it takes.
	grantRefreshGrant = "urn:aether:params:oauth:grant-type:pact-grant"
	maxFormBytes      = 16 << 10
)

// deviceAuthorization is RFC 8628 §3.1–3.2, authenticated by the identity JWT.
func (g *Gateway) deviceAuthorization(w http.ResponseWriter, r *http.Request) {
	id, release, ok := g.oauthIdentity(w, r)
	if !ok {
		return
	}
	defer release()
	start, err := g.cfg.Consent.StartFlow(r.Context(), id.Agent, r.PostForm.Get("scope"), domain.BrandID(r.PostForm.Get("brand")), g.Policy())
	if err != nil {
		writeOAuthError(w, err)
		return
	}
	writeOAuthJSON(w, http.StatusOK, start)
}

// token is RFC 8628 §3.4–3.5 (and the grant refresh above).
func (g *Gateway) token(w http.ResponseWriter, r *http.Request) {
	id, release, ok := g.oauthIdentity(w, r)
	if !ok {
		return
	}
	defer release()
	agent := id.Agent
	var tok *consent.Token
	var err error
	switch gt := r.PostForm.Get("grant_type"); gt {
	case deviceCodeGrant:
		code := r.PostForm.Get("device_code")
		if code == "" {
			writeOAuthError(w, &consent.OAuthError{Code: consent.CodeInvalidRequest, Description: "device_code is required", Status: http.StatusBadRequest})
			return
		}
		tok, err = g.cfg.Consent.Poll(r.Context(), agent, code)
	case grantRefreshGrant:
		tok, err = g.cfg.Consent.Refresh(r.Context(), agent, domain.BrandID(r.PostForm.Get("brand")), g.Policy())
	case "":
		err = &consent.OAuthError{Code: consent.CodeInvalidRequest, Description: "grant_type is required", Status: http.StatusBadRequest}
	default:
		err = &consent.OAuthError{Code: consent.CodeUnsupportedGrantType, Description: "this node accepts " + deviceCodeGrant + " and " + grantRefreshGrant, Status: http.StatusBadRequest}
	}
	if err != nil {
		writeOAuthError(w, err)
		return
	}
	writeOAuthJSON(w, http.StatusOK, tok)
}

// oauthIdentity authenticates a device-flow request, holds its request slots (F8, F9) until
// release is called, and parses its form within the body deadline (F7).
func (g *Gateway) oauthIdentity(w http.ResponseWriter, r *http.Request) (id identity.Identity, release func(), ok bool) {
	id, werr := g.authenticate(w, r)
	if werr == nil {
		release, werr = g.requests.take(w, id)
	}
	if werr != nil {
		closeUnread(w)
		if werr.HTTPStatus == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pact", error="invalid_token", error_description="`+headerSafe(werr.Message)+`"`)
			writeOAuthJSON(w, http.StatusUnauthorized, map[string]string{"error": consent.CodeInvalidClient, "error_description": werr.Message})
		} else {
			writeOAuthJSON(w, werr.HTTPStatus, map[string]string{"error": consent.CodeSlowDown, "error_description": werr.Message})
		}
		return id, nil, false
	}
	fail := func(status int, desc string) (identity.Identity, func(), bool) {
		release()
		writeOAuthJSON(w, status, map[string]string{"error": consent.CodeInvalidRequest, "error_description": desc})
		return id, nil, false
	}
	ct := r.Header.Get("Content-Type")
	if !strings.HasPrefix(strings.ToLower(ct), "application/x-www-form-urlencoded") {
		closeUnread(w)
		return fail(http.StatusBadRequest, "send the parameters as application/x-www-form-urlencoded")
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); errors.Is(err, os.ErrDeadlineExceeded) {
		closeUnread(w)
		return fail(http.StatusRequestTimeout, fmt.Sprintf("the form did not arrive within %d s", int(bodyTimeout/time.Second)))
	} else if err != nil {
		closeUnread(w) // a form too large is not read whole
		return fail(http.StatusBadRequest, "the form could not be read (at most 16 KiB)")
	}
	liftBodyDeadline(w)
	for k, v := range r.PostForm {
		if len(v) > 1 {
			return fail(http.StatusBadRequest, "parameter "+quoteTrunc(k)+" is repeated")
		}
	}
	return id, release, true
}

func writeOAuthError(w http.ResponseWriter, err error) {
	var oe *consent.OAuthError
	if !errors.As(err, &oe) {
		writeOAuthJSON(w, http.StatusInternalServerError, map[string]string{"error": "server_error", "error_description": "the node could not answer; try again"})
		return
	}
	status := oe.Status
	if status == 0 {
		status = http.StatusBadRequest
	}
	setRetryAfter(w, oe.RetryAfter)
	writeOAuthJSON(w, status, map[string]string{"error": oe.Code, "error_description": oe.Description})
}

func writeOAuthJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
