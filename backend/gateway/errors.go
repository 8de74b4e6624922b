package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/errordetails"

	"github.com/aether/aether/backend/limit"
)

// binding is the A2A HTTP binding a request came in on; errors answered before
// the SDK runs must take that binding's own shape.
type binding int

const (
	bindingJSONRPC binding = iota
	bindingREST
)

// wireError is an error the gateway answers itself, outside the SDK.
type wireError struct {
	HTTPStatus int
	RPCCode    int    // JSON-RPC code
	GRPCStatus string // REST status name
	Reason     string // ErrorInfo reason
	Message    string
}

var (
	errUnauthenticated = wireError{http.StatusUnauthorized, -31401, "UNAUTHENTICATED", "UNAUTHENTICATED", ""}
	errRateLimited     = wireError{http.StatusTooManyRequests, -31401, "RESOURCE_EXHAUSTED", "UNAUTHENTICATED", ""}
	errParse           = wireError{http.StatusBadRequest, -32700, "INVALID_ARGUMENT", "PARSE_ERROR", ""}
	errInvalidRequest  = wireError{http.StatusBadRequest, -32600, "INVALID_ARGUMENT", "INVALID_REQUEST", ""}
	errTooLarge        = wireError{http.StatusRequestEntityTooLarge, -32600, "INVALID_ARGUMENT", "INVALID_REQUEST", ""}
	errContentType     = wireError{http.StatusUnsupportedMediaType, -32005, "INVALID_ARGUMENT", "UNSUPPORTED_CONTENT_TYPE", ""}
	errBrandNotFound   = wireError{http.StatusNotFound, -32601, "NOT_FOUND", "NOT_FOUND", ""}
	// errNotRecorded replaces a turn's answer whose receipt could not be committed (holdAnswer).
	errNotRecorded = wireError{http.StatusInternalServerError, -32603, "INTERNAL", "RECEIPT_NOT_RECORDED",
		"the node could not record this turn's receipt, so its answer is withheld; the turn is ended with a failed receipt when the node restarts"}
)

func (e wireError) with(msg string) wireError { e.Message = msg; return e }

// writeWireError answers in the binding's error shape. On JSON-RPC a request
// the gateway read and refused (malformed envelope, params, the body guard's
// JSON checks), or could not answer (a receipt not recorded), is a JSON-RPC
// error in HTTP 200, as a2a-go answers its own errors; only transport-level
// refusals keep a real HTTP status: 401 and 429 (authentication), 413 (a body
// the node refuses to read), 415 (a body it cannot read as JSON), 503
// (paused), 404 (no such endpoint). See docs/wire.md, "Error shapes and statuses".
func writeWireError(w http.ResponseWriter, b binding, e wireError, id json.RawMessage) {
	status := e.HTTPStatus
	if b == bindingJSONRPC && (status == http.StatusBadRequest || status == http.StatusInternalServerError) {
		status = http.StatusOK
	}
	info := errordetails.NewErrorInfo(e.Reason, a2a.ProtocolDomain, map[string]string{"timestamp": time.Now().UTC().Format(time.RFC3339)})
	var body any
	if b == bindingJSONRPC {
		if id == nil {
			id = json.RawMessage("null")
		}
		body = map[string]any{
			"jsonrpc": "2.0",
			"id":      id,
			"error":   map[string]any{"code": e.RPCCode, "message": e.Message, "data": []any{info}},
		}
	} else {
		body = map[string]any{"error": map[string]any{
			"code": e.HTTPStatus, "status": e.GRPCStatus, "message": e.Message, "details": []any{info},
		}}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

// setRetryAfter sends a wait as Retry-After, in whole seconds rounded up (none when d is 0).
func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	if d > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(limit.RetryAfter(d)))
	}
}
