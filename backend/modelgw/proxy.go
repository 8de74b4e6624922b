package modelgw

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// responsesPath is the one path forwarded: Codex posts every turn to base_url + /responses
// (wire_api "responses"). Nothing else of the upstream, nor of any other host, is reachable.
const responsesPath = "/v1/responses"

// maxErrorBody caps what is read of an upstream's error answer.
const maxErrorBody = 64 << 10

// forwardedHeaders are the request headers Codex sends that the upstream may see; the rest
// (Cookie, Forwarded, Proxy-*, Accept-Encoding, the token itself) stay here.
var forwardedHeaders = []string{"Content-Type", "Accept", "User-Agent", "Openai-Beta", "Originator",
	"Session_id", "Conversation_id", "Version"}

// droppedResponseHeaders never go back to Codex.
var droppedResponseHeaders = map[string]bool{"Set-Cookie": true, "Connection": true, "Keep-Alive": true,
	"Transfer-Encoding": true, "Content-Length": true, "Proxy-Authenticate": true, "Trailer": true, "Upgrade": true}

// ServeHTTP checks the turn's token and forwards POST /v1/responses; everything else is refused.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.cfg.Logger.Debug("model gateway request", "method", r.Method, "path", r.URL.Path, "upgrade", r.Header.Get("Upgrade"))
	if r.Header.Get("Upgrade") != "" {
		// Codex then falls back to HTTPS (docs/model-gateway.md, "WebSocket").
		apiError(w, http.StatusUpgradeRequired, "invalid_request_error", "websocket_unsupported", "this gateway speaks HTTPS only")
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != responsesPath || r.URL.RawQuery != "" {
		apiError(w, http.StatusNotFound, "invalid_request_error", "not_found", "only POST "+responsesPath+" is served here")
		return
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	p := (*Pass)(nil)
	if ok {
		p = g.lookup(token)
	}
	if p == nil {
		apiError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "this turn's token is not valid (unknown, ended or expired)")
		return
	}
	if err := p.Err(); err != nil {
		apiError(w, http.StatusTooManyRequests, "insufficient_quota", "budget_exhausted", err.Error())
		return
	}
	g.forward(w, r, p)
}

// forward sends the request on with the owner's credential and streams the answer back, a
// chunk at a time, counting the usage the upstream reports.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, p *Pass) {
	body := http.MaxBytesReader(w, r.Body, g.cfg.MaxBody)
	out, err := http.NewRequestWithContext(r.Context(), http.MethodPost, baseOf(p.up)+"/responses", body)
	if err != nil {
		apiError(w, http.StatusBadGateway, "server_error", "bad_upstream", err.Error())
		return
	}
	out.ContentLength = r.ContentLength
	for _, h := range forwardedHeaders {
		if v := r.Header.Values(h); len(v) > 0 {
			out.Header[http.CanonicalHeaderKey(h)] = v
		}
	}
	for h, v := range r.Header {
		if strings.HasPrefix(h, "X-Codex-") || strings.HasPrefix(h, "X-Openai-") {
			out.Header[h] = v
		}
	}
	if p.up.Key != "" {
		out.Header.Set("Authorization", "Bearer "+p.up.Key)
	}
	resp, err := g.cfg.Client.Do(out)
	if err != nil {
		if _, big := errors.AsType[*http.MaxBytesError](err); big {
			apiError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "body_too_large",
				fmt.Sprintf("the request is over %d MiB", g.cfg.MaxBody>>20))
			return
		}
		if r.Context().Err() != nil {
			return // Codex went away (the turn ended)
		}
		reason := "the model server " + hostOf(baseOf(p.up)) + " cannot be reached: " + err.Error()
		g.fail(p, reason)
		apiError(w, http.StatusBadGateway, "server_error", "upstream_unreachable", reason)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		g.relayError(w, p, resp)
		return
	}
	for h, v := range resp.Header {
		if !droppedResponseHeaders[h] {
			w.Header()[h] = v
		}
	}
	w.WriteHeader(resp.StatusCode)
	g.stream(w, p, resp.Body)
}

// stream copies the answer as it comes, flushing each chunk, and counts its usage events.
func (g *Gateway) stream(w http.ResponseWriter, p *Pass, body io.Reader) {
	flush := http.NewResponseController(w).Flush
	sc := usageScanner{}
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = flush()
			for _, u := range sc.feed(buf[:n]) {
				g.count(p, u)
			}
			if sc.overflow {
				g.fail(p, fmt.Sprintf("the model server sent an event over %d MiB; its usage cannot be counted", maxEventLine>>20))
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// relayError passes an upstream's error to Codex as it came, and ends the turn for the errors
// a retry will not mend, with the reason in the owner's words.
func (g *Gateway) relayError(w http.ResponseWriter, p *Pass, resp *http.Response) {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if p.up.Key != "" { // a server that echoes the key hands it to no turn (M8)
		msg = bytes.ReplaceAll(msg, []byte(p.up.Key), []byte("[the owner's key]"))
	}
	reason := ownerReason(hostOf(baseOf(p.up)), resp.StatusCode, msg)
	if resp.StatusCode < 500 {
		g.fail(p, reason)
	} else {
		g.mu.Lock()
		g.lastErr, g.lastAt = reason, g.cfg.Now()
		g.mu.Unlock()
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(msg)
}

// ownerReason says what an upstream's error means for the owner.
func ownerReason(host string, status int, body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Code    any    `json:"code"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	detail := e.Error.Message
	if detail == "" {
		detail = strings.TrimSpace(string(body))
	}
	if len(detail) > 200 {
		detail = detail[:200] + "…"
	}
	code := fmt.Sprint(e.Error.Code) + " " + e.Error.Type
	var what string
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		what = "refused the owner's key (set another on the Status page)"
	case status == http.StatusTooManyRequests && strings.Contains(code, "insufficient_quota"):
		what = "says the owner's quota is used up"
	case status == http.StatusTooManyRequests:
		what = "is rate-limiting the owner's key"
	case status == http.StatusNotFound && strings.Contains(strings.ToLower(detail), "model"):
		what = "does not have the model asked for"
	case status >= 500:
		what = "failed"
	default:
		what = "refused the request"
	}
	return fmt.Sprintf("the model server %s %s (HTTP %d: %s)", host, what, status, detail)
}

// apiError answers in the Responses API's error shape, which Codex shows.
func apiError(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}})
}
