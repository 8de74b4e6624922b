package modelgw

import (
	"bytes"
	"encoding/json"
	"errors"
)

// held is what a turn's requests all ask for: the pass's model (the brand's, else the
// owner's), else the model of the turn's first request, and that request's reasoning effort
// and service tier. The first request is the root Codex's, started with the node's settings;
// a sub-agent's `spawn_agent` may name another model or effort, and the gateway holds it to
// these (docs/threats.md M14). A nil value is "not sent": the upstream's default.
type held struct {
	model, effort, tier json.RawMessage
}

// hold makes a request ask for what the turn holds, and says what it changed in the log. A
// body that is not a JSON object, or names its model other than as a string, is refused.
func (g *Gateway) hold(p *Pass, body []byte) ([]byte, error) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil || req == nil {
		return nil, errors.New("the request is not a JSON object")
	}
	var model string
	if m, ok := req["model"]; ok && json.Unmarshal(m, &model) != nil {
		return nil, errors.New(`the request's "model" is not a string`)
	}
	var reasoning map[string]json.RawMessage
	if r, ok := req["reasoning"]; ok && !isNull(r) && json.Unmarshal(r, &reasoning) != nil {
		return nil, errors.New(`the request's "reasoning" is not an object`)
	}
	g.mu.Lock()
	if p.held == nil {
		h := &held{model: req["model"], effort: reasoning["effort"], tier: req["service_tier"]}
		if p.Model != "" {
			h.model, _ = json.Marshal(p.Model)
		}
		p.held = h
	}
	h := *p.held
	g.mu.Unlock()

	changed := set(req, "model", h.model)
	if h.effort != nil && reasoning == nil {
		reasoning = map[string]json.RawMessage{}
	}
	if reasoning != nil && set(reasoning, "effort", h.effort) {
		req["reasoning"], _ = json.Marshal(reasoning)
		changed = true
	}
	if set(req, "service_tier", h.tier) {
		changed = true
	}
	if !changed {
		return body, nil
	}
	g.cfg.Logger.Info("model gateway held a request to its turn's model", "turn", p.bind.Turn, "grant", p.bind.Grant,
		"asked", model, "model", string(h.model), "effort", string(h.effort), "serviceTier", string(h.tier))
	return json.Marshal(req)
}

// set makes m[name] want (absent when want is nil) and says whether that changed it.
func set(m map[string]json.RawMessage, name string, want json.RawMessage) bool {
	got, ok := m[name]
	if want == nil {
		delete(m, name)
		return ok
	}
	m[name] = want
	return !ok || !bytes.Equal(compact(got), compact(want))
}

func compact(b json.RawMessage) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

func isNull(b json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(b), []byte("null")) }
