package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// GrantTypePactGrant is the Aether token request that mints a fresh delegation
// token from a live grant, with the identity JWT as the only credential and
// the brand as a form field (no owner involved).
const GrantTypePactGrant = "urn:aether:params:oauth:grant-type:pact-grant"

// Errors of the device flow.
var (
	// ErrDenied: the owner denied the request (or revoked the grant before the token was collected).
	ErrDenied = errors.New("the node owner denied the request")
	// ErrExpired: the request expired (or was locked) before the owner approved it.
	ErrExpired = errors.New("the request expired before the node owner approved it")
)

// Token is a delegation token and what it covers.
type Token struct {
	AccessToken string
	Scope       string
	ExpiresAt   time.Time // zero when the node did not say
}

// DeviceRequest says where and for what to run the device flow.
type DeviceRequest struct {
	DeviceAuthorizationURL string
	TokenURL               string
	Scope                  string
	Brand                  string // sent as the brand form field when set
}

// DeviceFlow runs the RFC 8628 device authorization grant with
// golang.org/x/oauth2, the identity JWT on every request. onCode (when not
// nil) is told the user code and the link the owner approves it at, before
// polling starts. Polling honours interval, authorization_pending and
// slow_down (+5 s); access_denied is ErrDenied, expired_token and the end of
// expires_in are ErrExpired.
func (c *Client) DeviceFlow(ctx context.Context, r DeviceRequest, onCode func(userCode, verificationURI string)) (*Token, error) {
	if c.Identity == nil {
		return nil, errors.New("device flow: the client has no identity")
	}
	cfg := &oauth2.Config{Endpoint: oauth2.Endpoint{
		DeviceAuthURL: r.DeviceAuthorizationURL,
		TokenURL:      r.TokenURL,
		// Not auto-detect: its probe re-sends every failed poll at once in
		// another style, and the node answers that second poll slow_down.
		AuthStyle: oauth2.AuthStyleInParams,
	}}
	if r.Scope != "" {
		cfg.Scopes = []string{r.Scope}
	}
	octx := context.WithValue(ctx, oauth2.HTTPClient, c.oauthClient())
	var opts []oauth2.AuthCodeOption
	if r.Brand != "" {
		opts = append(opts, oauth2.SetAuthURLParam("brand", r.Brand))
	}
	da, err := cfg.DeviceAuth(octx, opts...)
	if err != nil {
		return nil, fmt.Errorf("device authorization at %s: %w", r.DeviceAuthorizationURL, oauthErr(err))
	}
	if da.DeviceCode == "" || da.UserCode == "" {
		return nil, fmt.Errorf("device authorization at %s: the answer has no device_code or user_code", r.DeviceAuthorizationURL)
	}
	if onCode != nil {
		link := da.VerificationURIComplete
		if link == "" {
			link = da.VerificationURI
		}
		onCode(da.UserCode, link)
	}
	tok, err := cfg.DeviceAccessToken(octx, da)
	if err != nil {
		var re *oauth2.RetrieveError
		switch {
		case errors.As(err, &re) && re.ErrorCode == "access_denied":
			return nil, withDescription(ErrDenied, re.ErrorDescription)
		case errors.As(err, &re) && re.ErrorCode == "expired_token":
			return nil, withDescription(ErrExpired, re.ErrorDescription)
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			// x/oauth2 stops polling at expires_in with the context's error.
			return nil, ErrExpired
		}
		return nil, fmt.Errorf("device flow token at %s: %w", r.TokenURL, oauthErr(err))
	}
	return tokenFromOAuth(tok)
}

// Refresh asks the token endpoint for a fresh delegation token from the
// agent's live grant for brand (GrantTypePactGrant). It fails with an
// *oauth2.RetrieveError (invalid_grant) when there is none: run the device flow.
func (c *Client) Refresh(ctx context.Context, tokenURL, brand string) (*Token, error) {
	if c.Identity == nil {
		return nil, errors.New("refresh: the client has no identity")
	}
	form := url.Values{"grant_type": {GrantTypePactGrant}, "brand": {brand}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("refresh: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := c.oauthClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("refresh at %s: %w", tokenURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("refresh at %s: %w", tokenURL, err)
	}
	var tj struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int64  `json:"expires_in"`
		Scope       string `json:"scope"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	jerr := json.Unmarshal(body, &tj)
	if resp.StatusCode != http.StatusOK || tj.Error != "" || jerr != nil {
		return nil, fmt.Errorf("refresh at %s: %w", tokenURL, oauthErr(&oauth2.RetrieveError{
			Response: resp, Body: body, ErrorCode: tj.Error, ErrorDescription: tj.Description,
		}))
	}
	if tj.AccessToken == "" || !strings.EqualFold(tj.TokenType, "Bearer") {
		return nil, fmt.Errorf("refresh at %s: the answer has no Bearer access_token", tokenURL)
	}
	t := &Token{AccessToken: tj.AccessToken, Scope: tj.Scope}
	if tj.ExpiresIn > 0 {
		t.ExpiresAt = time.Now().Add(time.Duration(tj.ExpiresIn) * time.Second)
	}
	return t, nil
}

func tokenFromOAuth(t *oauth2.Token) (*Token, error) {
	if t.AccessToken == "" {
		return nil, errors.New("device flow: the token answer has no access_token")
	}
	if t.TokenType != "" && !strings.EqualFold(t.TokenType, "Bearer") {
		return nil, fmt.Errorf("device flow: token_type %q, want Bearer", t.TokenType)
	}
	out := &Token{AccessToken: t.AccessToken, ExpiresAt: t.Expiry}
	if s, ok := t.Extra("scope").(string); ok {
		out.Scope = s
	}
	return out, nil
}

// oauthErr shows an OAuth error as "code: description" (x/oauth2 quotes
// both, or dumps the body); errors.As still finds the *oauth2.RetrieveError.
func oauthErr(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.ErrorCode != "" {
		return readableOAuthError{re}
	}
	return err
}

type readableOAuthError struct{ re *oauth2.RetrieveError }

func (e readableOAuthError) Error() string {
	if e.re.ErrorDescription == "" {
		return e.re.ErrorCode
	}
	return e.re.ErrorCode + ": " + e.re.ErrorDescription
}

func (e readableOAuthError) Unwrap() error { return e.re }

func withDescription(sentinel error, desc string) error {
	if desc == "" {
		return sentinel
	}
	return fmt.Errorf("%w (%s)", sentinel, desc)
}
