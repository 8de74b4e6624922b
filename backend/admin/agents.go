package admin

import (
	"context"
	"net/http"
	"net/url"

	"github.com/aether/aether/backend/owner"
)

// The owner's agents and what they received (docs/admin-api.md, "My agents"). Listing, naming
// and turning agents off is the owner's, in the window and on the node API; minting an
// identity token and handing in a received receipt are the node API's only (docs/threats.md I1).

func (s *Server) getAgents(w http.ResponseWriter, r *http.Request) {
	out, err := s.b.MyAgents()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) postAgent(w http.ResponseWriter, r *http.Request) {
	var req owner.AgentRequest
	if !s.decode(w, r, &req) {
		return
	}
	a, err := s.b.AddAgent(req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

func (s *Server) postAgentSwitch(w http.ResponseWriter, r *http.Request) {
	var req owner.AgentSwitch
	if !s.decode(w, r, &req) {
		return
	}
	a, err := s.b.SetAgent(r.PathValue("name"), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

func (s *Server) postMint(w http.ResponseWriter, r *http.Request) {
	var req owner.MintRequest
	if !s.decode(w, r, &req) {
		return
	}
	t, err := s.b.MintIdentity(r.PathValue("name"), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (s *Server) getReceived(w http.ResponseWriter, r *http.Request) {
	out, err := s.b.Received(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) postReceived(w http.ResponseWriter, r *http.Request) {
	var req owner.ReceivedRequest
	if !s.decode(w, r, &req) {
		return
	}
	out, err := s.b.KeepReceived(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) exportReceived(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Content-Disposition", `attachment; filename="received-receipts.jsonl"`)
	ew := &exportWriter{w: w}
	if err := s.b.ExportReceived(r.Context(), ew); err != nil {
		if !ew.wrote {
			h.Del("Content-Disposition")
			s.fail(w, r, err)
			return
		}
		s.log.Error("admin: received receipts export failed midway", "err", err)
	}
}

// MyAgents is GET /v1/agents.
func (c *Client) MyAgents(ctx context.Context) (out owner.MyAgents, err error) {
	return out, c.call(ctx, "GET", "/v1/agents", nil, &out)
}

// AddAgent is POST /v1/agents.
func (c *Client) AddAgent(ctx context.Context, name string) (out owner.MyAgent, err error) {
	return out, c.call(ctx, "POST", "/v1/agents", owner.AgentRequest{Name: name}, &out)
}

// SetAgent is POST /v1/agents/{name}.
func (c *Client) SetAgent(ctx context.Context, name string, on bool) (out owner.MyAgent, err error) {
	return out, c.call(ctx, "POST", "/v1/agents/"+url.PathEscape(name), owner.AgentSwitch{On: &on}, &out)
}

// MintIdentity is POST /v1/agents/{name}/token: an identity JWT for one audience.
func (c *Client) MintIdentity(ctx context.Context, name, audience string) (out owner.IdentityToken, err error) {
	return out, c.call(ctx, "POST", "/v1/agents/"+url.PathEscape(name)+"/token", owner.MintRequest{Audience: audience}, &out)
}

// KeepReceived is POST /v1/received.
func (c *Client) KeepReceived(ctx context.Context, req owner.ReceivedRequest) (out owner.ReceivedReceipt, err error) {
	return out, c.call(ctx, "POST", "/v1/received", req, &out)
}

// Received is GET /v1/received.
func (c *Client) Received(ctx context.Context) (out owner.ReceivedList, err error) {
	return out, c.call(ctx, "GET", "/v1/received", nil, &out)
}
