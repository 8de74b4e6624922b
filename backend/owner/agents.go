package owner

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aether/aether/backend/issuer"
)

// The owner's own agents (docs/assistants.md): the node is their identity issuer. The owner
// names them and turns them off; tokens are minted for the node API only (docs/threats.md I1).

// MyAgent is one agent the owner named; its name is the sub of its identity tokens.
type MyAgent struct {
	Name    string    `json:"name"`
	On      bool      `json:"on"`
	Created time.Time `json:"created"`
}

// MyAgents is GET /api/agents: the agents, the issuer they are known by (iss), and whether
// tokens can be minted (Ready), else what is missing.
type MyAgents struct {
	Agents  []MyAgent `json:"agents"`
	Issuer  string    `json:"issuer"`
	Ready   bool      `json:"ready"`
	Missing string    `json:"missing"`
}

// AgentRequest names a new agent (POST /api/agents).
type AgentRequest struct {
	Name string `json:"name"`
}

// AgentSwitch turns an agent on or off (POST /api/agents/{name}).
type AgentSwitch struct {
	On *bool `json:"on"`
}

// MintRequest asks for an identity token for one audience (POST /v1/agents/{name}/token).
type MintRequest struct {
	Audience string `json:"audience"`
}

// IdentityToken is a minted identity JWT with what it says.
type IdentityToken = issuer.Token

func (s *Service) issuer() (*issuer.Issuer, error) {
	if s.cfg.Issuer == nil {
		return nil, fmt.Errorf("%w: this node issues no identities", ErrInvalid)
	}
	return s.cfg.Issuer, nil
}

// MyAgents lists the owner's agents.
func (s *Service) MyAgents() (MyAgents, error) {
	is, err := s.issuer()
	if err != nil {
		return MyAgents{}, err
	}
	out := MyAgents{Agents: []MyAgent{}, Issuer: is.URL(), Ready: true}
	if err := is.Ready(); err != nil {
		out.Ready, out.Missing = false, agentsMissing(publicURLOf(is))
	}
	for _, a := range is.Agents() {
		out.Agents = append(out.Agents, MyAgent(a))
	}
	return out, nil
}

// AddAgent names a new agent, on.
func (s *Service) AddAgent(req AgentRequest) (MyAgent, error) {
	is, err := s.issuer()
	if err != nil {
		return MyAgent{}, err
	}
	a, err := is.Add(req.Name)
	return MyAgent(a), agentErr(err, req.Name)
}

// SetAgent turns an agent on or off.
func (s *Service) SetAgent(name string, req AgentSwitch) (MyAgent, error) {
	is, err := s.issuer()
	if err != nil {
		return MyAgent{}, err
	}
	if req.On == nil {
		return MyAgent{}, fmt.Errorf("%w: say \"on\": true or false", ErrInvalid)
	}
	a, err := is.Set(name, *req.On)
	return MyAgent(a), agentErr(err, name)
}

// MintIdentity mints an identity token for the agent name, for one audience.
func (s *Service) MintIdentity(name string, req MintRequest) (IdentityToken, error) {
	is, err := s.issuer()
	if err != nil {
		return IdentityToken{}, err
	}
	t, err := is.Mint(name, req.Audience)
	if errors.Is(err, issuer.ErrNotHTTPS) {
		return t, fmt.Errorf("%w: %s", ErrInvalid, agentsMissing(publicURLOf(is)))
	}
	return t, agentErr(err, name)
}

// agentErr maps the issuer's errors onto the service's kinds.
func agentErr(err error, name string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, issuer.ErrNoAgent):
		return fmt.Errorf("%w: no agent %q: name it on the My agents page first", ErrNotFound, name)
	case errors.Is(err, issuer.ErrAgentOff):
		return fmt.Errorf("%w: the agent %q is turned off", ErrInvalid, name)
	case errors.Is(err, issuer.ErrBadName), errors.Is(err, issuer.ErrAgentExists), errors.Is(err, issuer.ErrTooMany):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return err
}

// publicURLOf is the publicUrl the issuer follows.
func publicURLOf(is *issuer.Issuer) string { return strings.TrimSuffix(is.URL(), issuer.PathPrefix) }

// agentsMissing says what the owner's agents need to call other nodes.
func agentsMissing(publicURL string) string {
	return "other nodes fetch your agents' issuer at <publicUrl>/id over https, and the publicUrl is " + publicURL +
		": publish this node with Funnel or behind your https proxy"
}
