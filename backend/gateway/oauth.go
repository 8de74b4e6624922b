package gateway

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/aether/aether/backend/consent"
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
	id, ok := g.oauthIdentity(w, r)
	if !ok {
		return
	}
	start, err := g.cfg.Consent.StartFlow(r.Context(), id.Agent, r.PostForm.Get("scope"), r.PostForm.Get("brand"))
	if err != nil {
		writeOAuthError(w, err)
		return
	}
	writeOAuthJSON(w, http.StatusOK, start)
}

// token is RFC 8628 §3.4–3.5 (and the grant refresh above).
func (g *Gateway) token(w http.ResponseWriter, r *http.Request) {
	id, ok := g.oauthIdentity(w, r)
	if !ok {
		return
	}
	agent := id.Agent
	var tok *consent.Token
	var err error
	switch gt := r.PostForm.Get("grant_type"); gt {
	case deviceCodeGrant:
		code := r.PostForm.Get("device_code")
		if code == "" {
			writeOAuthError(w, &consent.OAuthError{Code: "invalid_request", Description: "device_code is required", Status: http.StatusBadRequest})
			return
		}
		tok, err = g.cfg.Consent.Poll(r.Context(), agent, code)
	case grantRefreshGrant:
		tok, err = g.cfg.Consent.Refresh(r.Context(), agent, r.PostForm.Get("brand"))
	case "":
		err = &consent.OAuthError{Code: "invalid_request", Description: "grant_type is required", Status: http.StatusBadRequest}
	default:
		err = &consent.OAuthError{Code: "unsupported_grant_type", Description: "this node accepts " + deviceCodeGrant + " and " + grantRefreshGrant, Status: http.StatusBadRequest}
	}
	if err != nil {
		writeOAuthError(w, err)
		return
	}
	writeOAuthJSON(w, http.StatusOK, tok)
}

// oauthIdentity authenticates a device-flow request and parses its form.
func (g *Gateway) oauthIdentity(w http.ResponseWriter, r *http.Request) (identity.Identity, bool) {
	id, werr := g.authenticate(w, r)
	if werr != nil {
		if werr.HTTPStatus == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pact", error="invalid_token", error_description="`+headerSafe(werr.Message)+`"`)
			writeOAuthJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client", "error_description": werr.Message})
		} else {
			writeOAuthJSON(w, werr.HTTPStatus, map[string]string{"error": "slow_down", "error_description": werr.Message})
		}
		return id, false
	}
	ct := r.Header.Get("Content-Type")
	if !strings.HasPrefix(strings.ToLower(ct), "application/x-www-form-urlencoded") {
		writeOAuthJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": "send the parameters as application/x-www-form-urlencoded"})
		return id, false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		writeOAuthJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": "the form could not be read (at most 16 KiB)"})
		return id, false
	}
	for k, v := range r.PostForm {
		if len(v) > 1 {
			writeOAuthJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": "parameter " + quoteTrunc(k) + " is repeated"})
			return id, false
		}
	}
	return id, true
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
