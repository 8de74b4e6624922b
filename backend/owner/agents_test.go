package owner

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aether/aether/backend/issuer"
)

// TestMyAgentsNeedHTTPS: without an https publicUrl the checklist's "My agents can call other
// nodes" and the My agents page say what is missing, and no token is minted; with one, both
// name the issuer and a token names the agent.
func TestMyAgentsNeedHTTPS(t *testing.T) {
	dir := t.TempDir()
	is, err := issuer.Open(filepath.Join(dir, "identity.key"), filepath.Join(dir, "agents.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{cfg: Config{Issuer: is}}
	if _, err := s.AddAgent(AgentRequest{Name: "claude-desktop"}); err != nil {
		t.Fatal(err)
	}
	step := func(publicURL string) SetupStep {
		for _, st := range setupSteps(Status{Gateway: GatewayStatus{PublicURL: publicURL}}) {
			if st.ID == StepAgents {
				return st
			}
		}
		t.Fatal("no agents step")
		return SetupStep{}
	}

	is.SetPublicURL("http://127.0.0.1:8080")
	if st := step("http://127.0.0.1:8080"); st.Done || !strings.Contains(st.Text, "https") {
		t.Errorf("checklist under http: %+v", st)
	}
	if v, _ := s.MyAgents(); v.Ready || !strings.Contains(v.Missing, "https") {
		t.Errorf("My agents under http: %+v", v)
	}
	if _, err := s.MintIdentity("claude-desktop", MintRequest{Audience: "https://friend.example"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("minted under http: %v", err)
	}

	is.SetPublicURL("https://aether.example.net")
	if st := step("https://aether.example.net"); !st.Done || !strings.Contains(st.Text, "https://aether.example.net/id") {
		t.Errorf("checklist under https: %+v", st)
	}
	tok, err := s.MintIdentity("claude-desktop", MintRequest{Audience: "https://friend.example"})
	if err != nil || tok.Issuer != "https://aether.example.net/id" || tok.Subject != "claude-desktop" {
		t.Fatalf("minted %+v, %v", tok, err)
	}
	if _, err := s.MintIdentity("nobody", MintRequest{Audience: "https://friend.example"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("an agent never named: %v", err)
	}
}
