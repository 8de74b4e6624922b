package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/aether/aether/backend/identity"
	"github.com/aether/aether/backend/limit"
)

// maxTokenBytes bounds an Authorization header before any parsing (J26).
const maxTokenBytes = 8 << 10

type agentKey struct{}

// withAgent and agentFrom carry the verified identity from the HTTP layer to
// the call interceptor: the transports build a fresh CallContext, but keep the
// request's context.
func withAgent(ctx context.Context, id identity.Identity) context.Context {
	return context.WithValue(ctx, agentKey{}, id)
}

func agentFrom(ctx context.Context) (identity.Identity, bool) {
	id, ok := ctx.Value(agentKey{}).(identity.Identity)
	return id, ok
}

// ownerFromContext names a task's owner for the task store: the agent identity
// pair the interceptor put on the call.
func ownerFromContext(ctx context.Context) (string, error) {
	if cc, ok := a2asrv.CallContextFrom(ctx); ok && cc.User != nil && cc.User.Authenticated {
		return cc.User.Name, nil
	}
	if id, ok := agentFrom(ctx); ok {
		return id.Key(), nil
	}
	return "", errors.New("no authenticated agent on the call")
}

// guard checks everything that must hold before the SDK sees a request: the
// gateway is not paused, the identity JWT is valid (a real 401 on both
// bindings; the SDK would answer JSON-RPC auth errors inside a 200), and the
// body is one bounded, strict JSON value.
func (g *Gateway) guard(br *brandRoute, b binding, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.paused.Load() {
			w.Header().Set("Retry-After", "30")
			closeUnread(w)
			writeWireError(w, b, wireError{http.StatusServiceUnavailable, -32000, "UNAVAILABLE", "SERVER_ERROR", "the node owner has paused this gateway"}, nil)
			return
		}
		id, werr := g.authenticate(w, r)
		if werr != nil {
			if werr.HTTPStatus == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="pact", error="invalid_token", error_description="`+headerSafe(werr.Message)+`"`)
			}
			closeUnread(w)
			writeWireError(w, b, *werr, nil)
			return
		}
		release, werr := g.requests.take(w, id)
		if werr != nil {
			writeWireError(w, b, *werr, nil)
			return
		}
		defer release()
		var body, rpcID []byte
		if r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
			var werr *wireError
			body, rpcID, werr = checkBody(r, b)
			if werr != nil {
				closeUnread(w) // some refusals come before the body is read whole (415, 413, 408)
				writeWireError(w, b, *werr, rpcID)
				return
			}
			liftBodyDeadline(w)
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			if b == bindingJSONRPC {
				if get, rid, ok := listTasksRPC(body); ok {
					if err := checkListTasks(get); err != nil {
						writeWireError(w, b, errInvalidParams.with(err.Error()), rid)
						return
					}
				}
			}
		}
		if b == bindingREST && r.Method == http.MethodGet && r.URL.Path == "/tasks" {
			if err := checkListTasks(listTasksQuery(r.URL.Query())); err != nil {
				writeWireError(w, b, errInvalidParams.with(err.Error()), nil)
				return
			}
		}
		rw := &refusingWriter{ResponseWriter: w, b: b, id: rpcID}
		next.ServeHTTP(rw, r.WithContext(withRefusals(withAgent(r.Context(), id), rw)))
		rw.finish()
	})
}

// authenticate verifies the identity JWT. A refusal for a limit (J18, F5, F6) sets
// Retry-After on w; the caller writes the error in its own shape.
func (g *Gateway) authenticate(w http.ResponseWriter, r *http.Request) (identity.Identity, *wireError) {
	raw := r.Header.Get("Authorization")
	if raw == "" {
		e := errUnauthenticated.with("an identity JWT is required: Authorization: Bearer <JWT>")
		return identity.Identity{}, &e
	}
	if len(raw) > maxTokenBytes+len("Bearer ") {
		e := errUnauthenticated.with("the identity token is too large")
		return identity.Identity{}, &e
	}
	scheme, tok, ok := strings.Cut(raw, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		e := errUnauthenticated.with("use the Bearer scheme for the identity JWT")
		return identity.Identity{}, &e
	}
	id, err := g.cfg.Identity.Verify(r.Context(), strings.TrimSpace(tok), g.clientIP(r))
	if err != nil {
		var ie *identity.Error
		desc := "the identity token is not valid"
		code := "invalid"
		var wait time.Duration
		if errors.As(err, &ie) {
			desc, code, wait = ie.Description, ie.Code, ie.RetryAfter
		}
		if errors.Is(err, identity.ErrRateLimited) {
			wait = max(wait, time.Second)
			setRetryAfter(w, wait)
			e := errRateLimited.with(fmt.Sprintf("%s; retry in %d s", desc, limit.RetryAfter(wait)))
			return identity.Identity{}, &e
		}
		g.cfg.Logger.Info("identity rejected", "reason", code, "client", g.clientIP(r))
		e := errUnauthenticated.with(desc)
		return identity.Identity{}, &e
	}
	return id, nil
}

// checkBody reads and validates a request body for the binding. It returns the JSON-RPC
// request's id too, for an error in its place (null when there is none to read).
func checkBody(r *http.Request, b binding) ([]byte, []byte, *wireError) {
	if enc := r.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		e := errContentType.with("Content-Encoding " + quoteTrunc(enc) + " is not accepted; send the body uncompressed")
		return nil, nil, &e
	}
	body, err := readBody(r.Body)
	if err != nil {
		return nil, nil, toWire(err)
	}
	if len(body) == 0 && b == bindingREST {
		return body, nil, nil // e.g. POST /tasks/{id}:cancel carries nothing
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		e := errContentType.with("Content-Type must be application/json")
		return nil, nil, &e
	}
	if err := checkJSON(body); err != nil {
		return nil, nil, toWire(err)
	}
	if b == bindingJSONRPC {
		id, err := checkEnvelope(body)
		if err != nil {
			return nil, id, toWire(err)
		}
		return body, id, nil
	}
	return body, nil, nil
}

func toWire(err error) *wireError {
	var be *bodyError
	e := errParse.with(err.Error())
	if errors.As(err, &be) {
		switch be.kind {
		case kindInvalid:
			e = errInvalidRequest.with(be.detail)
		case kindTooLarge:
			e = errTooLarge.with(be.detail)
		case kindTimeout:
			e = errBodyTimeout.with(be.detail)
		}
	}
	return &e
}

// clientIP is the agent's address as the trusted proxies tell it (clientaddr.go).
func (g *Gateway) clientIP(r *http.Request) string {
	return clientAddr(r, g.routes.Load().proxies)
}

// headerSafe keeps a description inside a quoted header parameter.
func headerSafe(s string) string {
	var b strings.Builder
	for _, c := range s {
		if c == '"' || c == '\\' || c < 0x20 || c > 0x7e {
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}
