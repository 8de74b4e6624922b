// Package mockmodel is a scripted stand-in for the OpenAI Responses API (streaming
// `POST /v1/responses`), enough for the real `codex exec` to run a whole turn with no
// network: point codex at it with ProviderArgs (as codex.Runner.ExtraArgs) and
// CODEX_API_KEY=dummy. Each request is answered by the next Step; the last one repeats.
package mockmodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Step is the model's reply to one request.
type Step struct {
	text    string
	command string
	status  int
	body    string
	header  http.Header
	spawn   map[string]string // spawn_agent's arguments
	stall   int               // stream this many bytes of text, then hold the answer open
	release <-chan struct{}   // Hold: the reply waits until it is closed
}

// Spawn replies with a call of codex's `spawn_agent` tool (the collaboration tools): a
// sub-agent named task gets message, and the model and reasoning effort asked for when set.
func Spawn(task, message, model, effort string) Step {
	args := map[string]string{"task_name": task, "message": message, "fork_turns": "none"}
	if model != "" {
		args["model"] = model
	}
	if effort != "" {
		args["reasoning_effort"] = effort
	}
	return Step{spawn: args}
}

// Stall streams the start of an answer, n bytes of text, and then holds it open until the
// request is cut: an answer that never reaches its usage.
func Stall(n int) Step { return Step{stall: n} }

// RateLimited is the API's passing rate limit, with Retry-After in seconds.
func RateLimited(retryAfter string) Step {
	return Step{status: http.StatusTooManyRequests, header: http.Header{"Retry-After": {retryAfter}},
		body: `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`}
}

// Message replies with a final assistant message.
func Message(text string) Step { return Step{text: text} }

// Shell replies with a call of codex's code-mode `exec` tool that runs cmd through
// exec_command; codex runs it in its sandbox and sends the output in the next request.
func Shell(cmd string) Step { return Step{command: cmd} }

// HTTPError replies with an HTTP error and a JSON body, as the API does for a bad key (401)
// or an exhausted quota (429 insufficient_quota).
func HTTPError(status int, body string) Step { return Step{status: status, body: body} }

// QuotaExceeded is the API's answer when the account has no quota left.
func QuotaExceeded() Step {
	return HTTPError(http.StatusTooManyRequests, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)
}

// Hold replies with step once release is closed: a turn waits on its test there, inside a
// model request, where none of codex's tool timeouts runs (a command that waited instead
// would be cut off by codex's exec yield on a slow machine). Meanwhile the stream carries a
// response.in_progress event every few seconds, which codex's stream idle timeout counts as
// life.
func Hold(release <-chan struct{}, step Step) Step {
	step.release = release
	return step
}

// Request is what the mock received.
type Request struct {
	Path   string
	Header http.Header
	Body   []byte
	// ToolOutput holds the outputs of earlier tool calls that codex sent back, as JSON.
	ToolOutput []string
}

// TurnMetadata decodes codex's X-Codex-Turn-Metadata header (it carries e.g. sandbox_mode).
func (r Request) TurnMetadata() map[string]any {
	var m map[string]any
	_ = json.Unmarshal([]byte(r.Header.Get("X-Codex-Turn-Metadata")), &m)
	return m
}

// Server serves the script on a loopback port.
type Server struct {
	srv      *httptest.Server
	mu       sync.Mutex
	main     *script
	agents   map[string]*script // by codex's agent_name (its turn metadata): sub-agents
	requests []Request
	arrived  *sync.Cond // on mu: a request arrived
}

type script struct {
	steps []Step
	next  int
}

// Agent scripts the requests of the codex agent named name (e.g. "/root/helper", a
// sub-agent), apart from the others, which play New's steps.
func (s *Server) Agent(name string, steps ...Step) {
	if len(steps) == 0 {
		steps = []Step{Message("ok")}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.agents == nil {
		s.agents = map[string]*script{}
	}
	s.agents[name] = &script{steps: steps}
}

// New starts a server that plays steps in order.
func New(steps ...Step) *Server {
	if len(steps) == 0 {
		steps = []Step{Message("ok")}
	}
	s := &Server{main: &script{steps: steps}}
	s.arrived = sync.NewCond(&s.mu)
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// BaseURL is the provider's base_url (ends in /v1).
func (s *Server) BaseURL() string { return s.srv.URL + "/v1" }

// ProviderArgs are the codex options that select this server as the model provider. codex
// sends it CODEX_API_KEY as a bearer token, as it would the real API.
func (s *Server) ProviderArgs() []string {
	return []string{
		"-c", "model_provider=mock",
		"-c", fmt.Sprintf(`model_providers.mock={name="mock",base_url=%q,wire_api="responses",env_key="CODEX_API_KEY"}`, s.BaseURL()),
	}
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// WaitRequests waits until n requests have arrived: codex has sent the outputs of the
// tool calls the first n-1 steps asked for.
func (s *Server) WaitRequests(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.requests) < n {
		s.arrived.Wait()
	}
}

// record keeps req and picks its step: the script of the codex agent that sent it (Agent),
// else the main one. n counts the requests so far, req included.
func (s *Server) record(req Request) (step Step, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := s.main
	if a, ok := s.agents[fmt.Sprint(req.TurnMetadata()["agent_name"])]; ok {
		sc = a
	}
	step = sc.steps[min(sc.next, len(sc.steps)-1)]
	sc.next++
	s.requests = append(s.requests, req)
	s.arrived.Broadcast()
	return step, len(s.requests)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		http.NotFound(w, r)
		return
	}
	req := Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	var in struct {
		Input []json.RawMessage `json:"input"`
	}
	_ = json.Unmarshal(body, &in)
	for _, raw := range in.Input {
		var it struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(raw, &it) == nil && strings.HasSuffix(it.Type, "_call_output") {
			req.ToolOutput = append(req.ToolOutput, string(raw))
		}
	}
	step, n := s.record(req)

	if step.status != 0 {
		for k, v := range step.header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(step.status)
		io.WriteString(w, step.body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	respID := fmt.Sprintf("resp_%d", n)
	send(w, "response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": respID}})
	if step.stall > 0 {
		send(w, "response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": fmt.Sprintf("msg_%d", n),
			"output_index": 0, "content_index": 0, "delta": strings.Repeat("x", step.stall)})
		<-r.Context().Done()
		return
	}
	if step.release != nil && !hold(w, r, step.release, respID) {
		return
	}
	var item map[string]any
	if step.spawn != nil {
		args, _ := json.Marshal(step.spawn)
		item = map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d", n), "call_id": fmt.Sprintf("call_%d", n),
			"namespace": "collaboration", "name": "spawn_agent", "arguments": string(args), "status": "completed"}
	} else if step.command != "" {
		cmd, _ := json.Marshal(step.command)
		item = map[string]any{
			"type": "custom_tool_call", "id": fmt.Sprintf("ctc_%d", n), "call_id": fmt.Sprintf("call_%d", n),
			"name": "exec", "status": "completed",
			"input": fmt.Sprintf("const r = await tools.exec_command({cmd: %s, login: false});\ntext(JSON.stringify(r));", cmd),
		}
	} else {
		item = map[string]any{
			"type": "message", "role": "assistant", "id": fmt.Sprintf("msg_%d", n),
			"content": []any{map[string]any{"type": "output_text", "text": step.text}},
		}
	}
	send(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "item": item})
	send(w, "response.completed", map[string]any{"type": "response.completed", "response": map[string]any{
		"id": respID,
		"usage": map[string]any{"input_tokens": 10, "input_tokens_details": nil, "output_tokens": 5,
			"output_tokens_details": nil, "total_tokens": 15},
	}})
}

func send(w http.ResponseWriter, name string, data any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// hold keeps the stream alive until release is closed; false: the client went away.
func hold(w http.ResponseWriter, r *http.Request, release <-chan struct{}, respID string) bool {
	alive := time.NewTicker(5 * time.Second)
	defer alive.Stop()
	for {
		select {
		case <-release:
			return true
		case <-r.Context().Done():
			return false
		case <-alive.C:
			send(w, "response.in_progress", map[string]any{"type": "response.in_progress", "response": map[string]any{"id": respID}})
		}
	}
}
