package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// holdFirstEvent holds what a2a-go writes of an event stream until its first event is whole:
// a stream whose first event is an error never started, so the error is the call's plain
// answer, as application/json (A2A 1.0 §11.6; docs/wire.md, "Streams"): a JSON-RPC error
// response in HTTP 200 with the request's id, or on HTTP+JSON the AIP-193 body with its HTTP
// status. Any other first event, a keep-alive included, starts the stream as it is. It
// returns ok false when p is not held back (no stream, or one that started), and otherwise
// what to send now: nil while the event is not whole or when the error went out instead.
func (w *refusingWriter) holdFirstEvent(p []byte) (send []byte, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent || w.refusal != nil || w.status != http.StatusOK ||
		!strings.HasPrefix(w.ResponseWriter.Header().Get("Content-Type"), "text/event-stream") {
		return nil, false
	}
	w.first = append(w.first, p...)
	end := bytes.Index(w.first, []byte("\n\n"))
	if end < 0 {
		return nil, true
	}
	held := w.first
	w.first = nil
	status, body := streamError(held[:end], w.b)
	if body == nil {
		return held, true
	}
	w.sent = true
	h := w.ResponseWriter.Header()
	for k := range h {
		delete(h, k) // a2a-go's stream headers
	}
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.ResponseWriter.WriteHeader(status)
	w.ResponseWriter.Write(append(body, '\n'))
	w.refusal = &wireError{} // sent with a refusal: send drops the rest of the stream, if any
	return nil, true
}

// streamError reads an SSE event: when its data is an error, the HTTP status and body that
// answer it instead (JSON-RPC: a response with an "error" member, in 200; HTTP+JSON: an
// AIP-193 {"error": {"code": <HTTP status>, …}}); body is nil for any other event.
func streamError(event []byte, b binding) (int, []byte) {
	var data []byte
	for line := range bytes.SplitSeq(event, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if data != nil {
				data = append(data, '\n') // an event's data lines are one value
			}
			data = append(data, bytes.TrimPrefix(d, []byte(" "))...)
		}
	}
	var v struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &v) != nil || v.Error == nil {
		return 0, nil
	}
	if b == bindingJSONRPC {
		return http.StatusOK, data
	}
	if v.Error.Code < 400 || v.Error.Code > 599 {
		return http.StatusInternalServerError, data
	}
	return v.Error.Code, data
}
