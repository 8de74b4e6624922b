package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"time"

	"github.com/aether/aether/backend/owner"
)

// maxAnswer caps what the client reads of one answer; a status with many brands is far below.
const maxAnswer = 8 << 20

// Client is the node API's client (docs/admin-api.md, "Node API"), the one the CLI uses: it
// sends the admin token as a bearer token and reads owner's types back. Every error names
// the call (method and path); an answer that does not decode also names the field at fault.
type Client struct {
	base  string // http://<addr>
	token string
	http  *http.Client
}

// NewClient talks to the node API at addr (host:port, node.json's "api") with the admin token.
func NewClient(addr, token string) *Client {
	return &Client{base: "http://" + addr, token: token, http: &http.Client{Timeout: 15 * time.Second}}
}

// Status is GET /v1/status.
func (c *Client) Status(ctx context.Context) (st owner.Status, err error) {
	return st, c.call(ctx, "GET", "/v1/status", nil, &st)
}

// Grants is GET /v1/grants.
func (c *Client) Grants(ctx context.Context) ([]owner.Grant, error) {
	var out owner.GrantList
	return out.Grants, c.call(ctx, "GET", "/v1/grants", nil, &out)
}

// Revoke is POST /v1/grants/{id}/revoke.
func (c *Client) Revoke(ctx context.Context, id string) (owner.Grant, error) {
	var out owner.GrantAnswer
	return out.Grant, c.call(ctx, "POST", "/v1/grants/"+url.PathEscape(id)+"/revoke", nil, &out)
}

// RotateToken is POST /v1/admin/token: a new token in admin.token, every session ended.
func (c *Client) RotateToken(ctx context.Context) (out owner.TokenRotated, err error) {
	return out, c.call(ctx, "POST", "/v1/admin/token", nil, &out)
}

// SignInLink is POST /v1/admin/sign-in-link.
func (c *Client) SignInLink(ctx context.Context) (out owner.SignInLink, err error) {
	return out, c.call(ctx, "POST", "/v1/admin/sign-in-link", nil, &out)
}

// SetFunnel is POST /v1/reachability/funnel.
func (c *Client) SetFunnel(ctx context.Context, on bool) (r owner.Reachability, err error) {
	return r, c.call(ctx, "POST", "/v1/reachability/funnel", owner.FunnelRequest{On: &on}, &r)
}

// UseFunnelURL is POST /v1/reachability/use.
func (c *Client) UseFunnelURL(ctx context.Context) (r owner.Reachability, err error) {
	return r, c.call(ctx, "POST", "/v1/reachability/use", nil, &r)
}

// call sends in (when not nil) as the JSON body and decodes a 200 answer into out; any other
// status is an error carrying the node's owner.ErrorBody.
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	where := method + " " + path
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s: the node at %s does not answer (is it running?): %w", where, c.base, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	switch {
	case err != nil:
		return fmt.Errorf("%s: %s: reading the answer: %w", where, resp.Status, err)
	case len(answer) > maxAnswer:
		return fmt.Errorf("%s: %s: the answer is larger than %d bytes", where, resp.Status, maxAnswer)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return fmt.Errorf("%s: %s: the answer is %q, not JSON: %.200q", where, resp.Status, resp.Header.Get("Content-Type"), answer)
	}
	if resp.StatusCode != http.StatusOK {
		var e owner.ErrorBody
		if err := decodeAnswer(answer, &e); err != nil || e.Error == "" {
			return fmt.Errorf("%s: %s, with an error answer that does not decode: %.200q", where, resp.Status, answer)
		}
		return fmt.Errorf("%s: %s: %s", where, resp.Status, e.Error)
	}
	if err := decodeAnswer(answer, out); err != nil {
		return fmt.Errorf("%s: the answer does not decode as %s: %w", where, reflect.TypeOf(out).Elem(), err)
	}
	return nil
}

// decodeAnswer decodes one JSON value with known fields only, and names where it went wrong:
// the field and the byte offset.
func decodeAnswer(data []byte, out any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(out)
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return fmt.Errorf("field %q is a JSON %s, not %s (byte %d)", te.Field, te.Value, jsonType(te.Type), te.Offset)
	case errors.As(err, &se):
		return fmt.Errorf("not JSON at byte %d: %w", se.Offset, err)
	case err != nil:
		return err // "unknown field", or the answer ends early
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("data after the answer, at byte %d", dec.InputOffset())
	}
	return nil
}

// jsonType names what a field wants: its kind for a named string, number or bool (an id,
// a status: "string"), the Go type otherwise.
func jsonType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Float64:
		return t.Kind().String()
	}
	return t.String()
}
