package modelgw

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/model"
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
	var p *Pass
	var spent error
	if ok {
		p, spent = g.admit(token)
	}
	if spent != nil {
		apiError(w, http.StatusTooManyRequests, "insufficient_quota", "budget_exhausted", spent.Error())
		return
	}
	if p == nil {
		apiError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "this turn's token is not valid (unknown, ended or expired)")
		return
	}
	defer p.inflight.Done()
	g.forward(w, r, p)
}

// meter is what one request sent and got back, for the estimate a request is charged when
// no usage event counts it (docs/model-gateway.md, "Usage and budgets").
type meter struct {
	sent, got int64 // bytes of the request body, bytes of the answer streamed back
	charge    bool  // the upstream may have spent tokens on it
	counted   bool  // a usage event counted it
}

// estimate is a request's tokens from its bytes: one token for every 4 bytes sent and every
// 4 bytes streamed back, which errs high (JSON and the stream's framing count as text).
func (m meter) estimate() domain.Usage {
	return domain.Usage{InputTokens: (m.sent + 3) / 4, OutputTokens: (m.got + 3) / 4}
}

// settle charges a request that ended without its usage event (cut, dropped by Codex, ended
// by the gateway, or an upstream that reports none) what it sent and got back (M11, M19).
func (g *Gateway) settle(p *Pass, m *meter) {
	if m.charge && !m.counted {
		g.count(p, m.estimate())
	}
}

// forward holds the request to the turn's model, sends it on with the owner's credential and
// streams the answer back, a chunk at a time, counting the usage the upstream reports. The
// upstream request ends with Codex's, and when the pass ends.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, p *Pass) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.cfg.MaxBody))
	if err != nil {
		if _, big := errors.AsType[*http.MaxBytesError](err); big {
			apiError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "body_too_large",
				fmt.Sprintf("the request is over %d MiB", g.cfg.MaxBody>>20))
		}
		return // else Codex went away mid-body
	}
	if body, err = g.hold(p, body); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", err.Error())
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-p.ended:
			cancel()
		case <-ctx.Done():
		}
	}()
	key, err := g.key(p.up)
	if err != nil {
		g.fail(p, "the owner's model key cannot be read", err.Error())
		apiError(w, http.StatusBadGateway, "server_error", "bad_upstream", "the owner's model key cannot be read")
		return
	}
	out, err := http.NewRequestWithContext(ctx, http.MethodPost, p.up.Server()+"/responses", bytes.NewReader(body))
	if err != nil {
		apiError(w, http.StatusBadGateway, "server_error", "bad_upstream", err.Error())
		return
	}
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
	if key != "" {
		out.Header.Set("Authorization", "Bearer "+key)
	}
	m := &meter{sent: int64(len(body)), charge: true}
	defer g.settle(p, m)
	resp, err := g.cfg.Client.Do(out)
	if err != nil {
		if ctx.Err() != nil {
			return // Codex went away, or the pass ended: the upstream may have the request
		}
		m.charge = false
		g.fail(p, "the owner's model server cannot be reached",
			"the model server "+model.Host(p.up.Server())+" cannot be reached: "+redact(err.Error(), key))
		apiError(w, http.StatusBadGateway, "server_error", "upstream_unreachable", "the owner's model server cannot be reached")
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		m.charge = false
		g.refused(w, p, resp, key)
		return
	}
	for h, v := range resp.Header {
		if !droppedResponseHeaders[h] {
			w.Header()[h] = v
		}
	}
	w.WriteHeader(resp.StatusCode)
	g.stream(w, p, resp.Body, m)
}

// stream copies the answer as it comes, flushing each chunk, and counts its usage events.
func (g *Gateway) stream(w http.ResponseWriter, p *Pass, body io.Reader, m *meter) {
	flush := http.NewResponseController(w).Flush
	sc := usageScanner{}
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			m.got += int64(n)
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = flush()
			for _, u := range sc.feed(buf[:n]) {
				if !m.counted {
					m.counted = true
					// What went before is counted by the upstream's own usage, what
					// follows by the estimate (m.got starts again).
					m.sent, m.got = 0, 0
				}
				g.count(p, u)
			}
			if sc.overflow {
				g.fail(p, "the owner's model server sent an answer whose usage cannot be counted",
					fmt.Sprintf("the model server sent an event over %d MiB; its usage cannot be counted", maxEventLine>>20))
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				g.reported(m.counted)
			}
			return
		}
	}
}

// refused answers an upstream's error or redirect. Codex gets the status and a fixed text, never
// the upstream's words (they may name the owner's account, or echo the key); the owner's
// Status page gets those words, the key taken out after decoding (M15). A rate limit is
// Codex's to retry (M18); a 5xx too; anything else ends the turn.
func (g *Gateway) refused(w http.ResponseWriter, p *Pass, resp *http.Response, key string) {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	host := model.Host(p.up.Server())
	words := upstreamWords(msg, key)
	e := classify(resp.StatusCode, msg)
	owner := fmt.Sprintf("the model server %s %s (HTTP %d: %s)", host, e.owner, resp.StatusCode, words)
	if resp.StatusCode < 400 {
		owner = fmt.Sprintf("the model server %s %s (HTTP %d to %s)", host, e.owner, resp.StatusCode,
			redact(resp.Header.Get("Location"), key))
	}
	agent := fmt.Sprintf("the owner's model server %s (HTTP %d)", e.agent, resp.StatusCode)
	if e.retry {
		g.seen(owner)
	} else {
		g.fail(p, agent, owner)
	}
	if ra := resp.Header.Get("Retry-After"); e.retry && isSeconds(ra) {
		w.Header().Set("Retry-After", ra)
	}
	status := resp.StatusCode
	if status < 400 {
		status = http.StatusBadGateway
	}
	apiError(w, status, e.typ, e.code, agent)
}

// upstreamError is what an upstream's error answer means, in the owner's words and in the
// fixed words of the agent, with the error type and code Codex acts on (it retries a rate
// limit and a server error, and stops on a quota).
type upstreamError struct {
	owner, agent string
	typ, code    string
	retry        bool
}

func classify(status int, body []byte) upstreamError {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Code    any    `json:"code"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	code := fmt.Sprint(e.Error.Code) + " " + e.Error.Type
	refused := upstreamError{owner: "refused the request", agent: "refused the request", typ: "invalid_request_error", code: "upstream_refused"}
	switch {
	case status < 400:
		return upstreamError{owner: "answered with a redirect, which the gateway does not follow",
			agent: "answered with a redirect", typ: "server_error", code: "upstream_redirect"}
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		refused.owner = "refused the owner's key (set another on the Status page)"
		return refused
	case status == http.StatusTooManyRequests && strings.Contains(code, "insufficient_quota"):
		return upstreamError{owner: "says the owner's quota is used up", agent: "says the owner's quota is used up",
			typ: "insufficient_quota", code: "insufficient_quota"}
	case status == http.StatusTooManyRequests:
		return upstreamError{owner: "is rate-limiting the owner's key", agent: "is rate-limiting the owner's key",
			typ: "requests", code: "rate_limit_exceeded", retry: true}
	case status == http.StatusNotFound && strings.Contains(strings.ToLower(e.Error.Message+code), "model"):
		return upstreamError{owner: "does not have the model asked for", agent: "does not have the model asked for",
			typ: "invalid_request_error", code: "model_not_found"}
	case status >= 500:
		return upstreamError{owner: "failed", agent: "failed", typ: "server_error", code: "upstream_error", retry: true}
	}
	return refused
}

// upstreamWords is the upstream's error message for the owner: the JSON's message, else the
// text, decoded before the key is taken out (an upstream that echoes the key JSON-escaped,
// `sk-a\/b` or `\u0073k-…`, gets no further than one that echoes it plainly), and cut short.
func upstreamWords(body []byte, key string) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	words := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		words = e.Error.Message
	} else {
		words = unescape(words) // escapes in text that is not JSON still spell the key
	}
	words = redact(words, key)
	if r := []rune(words); len(r) > 200 {
		words = string(r[:200]) + "…"
	}
	return words
}

// unescape decodes the JSON string escapes a key can be spelled with (`\/`, `\"`, `\\`,
// `\uXXXX`; a key is printable ASCII) in s, leaving any other backslash as it is.
func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch c := s[i+1]; c {
		case '"', '\\', '/':
			b.WriteByte(c)
			i++
		case 'u':
			if i+6 > len(s) {
				b.WriteByte(s[i])
				break
			}
			if n, err := strconv.ParseUint(s[i+2:i+6], 16, 16); err == nil {
				b.WriteRune(rune(n))
				i += 5
			} else {
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// redact takes the owner's key out of a text meant for the owner's eyes or log.
func redact(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[the owner's key]")
}

// isSeconds admits a Retry-After of whole seconds (what the API sends), up to a day.
func isSeconds(v string) bool {
	n, err := strconv.Atoi(v)
	return err == nil && n >= 0 && n <= 86400
}

// apiError answers in the Responses API's error shape, which Codex shows.
func apiError(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}})
}
