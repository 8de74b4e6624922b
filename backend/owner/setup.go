package owner

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// CodexSetup is what the owner does in the window so that Codex runs without a terminal: get
// the pinned Codex or name one installed, and set how it reaches its model. The node
// implements it (docs/admin-api.md, "Codex and its model").
type CodexSetup interface {
	// GetCodex starts getting the pinned Codex in the background; CodexDownload follows it.
	GetCodex() error
	// CancelCodex stops the download under way.
	CancelCodex() error
	CodexDownload() CodexDownload
	// UseCodex names a Codex the owner installed ("" forgets it).
	UseCodex(path string) error
	// Model is how Codex reaches its model, never with the key itself.
	Model() (ModelStatus, error)
	// SetModel changes the key, the server or the model; the errors are ErrInvalid's.
	SetModel(req ModelRequest) (ModelStatus, error)
	// CheckModel runs one tiny confined turn against the model as set now.
	CheckModel(ctx context.Context) ModelCheck
}

// Download states (CodexDownload.State).
const (
	DownloadIdle        = "idle"
	DownloadRunning     = "downloading"
	DownloadInstalled   = "installed"
	DownloadFailed      = "failed"
	DownloadUnavailable = "unavailable" // no pinned package for this machine
)

// CodexDownload is the Get Codex button's state: GET /api/codex/download.
type CodexDownload struct {
	Version string `json:"version"` // the pinned version
	Package string `json:"package"` // e.g. @openai/codex@0.169.0-linux-x64
	State   string `json:"state"`
	Done    int64  `json:"done"`  // bytes so far
	Total   int64  `json:"total"` // bytes in all
	Path    string `json:"path"`  // the installed binary
	Error   string `json:"error"` // why the last try failed
}

// ModelStatus is GET /api/model: whether a key is set, never the key.
type ModelStatus struct {
	KeySet bool `json:"keySet"`
	// KeyFor, when set, is the server the saved key belongs to, which is not the one set now:
	// that server gets no key (docs/threats.md M16).
	KeyFor    string      `json:"keyFor,omitempty"`
	BaseURL   string      `json:"baseUrl"`
	Model     string      `json:"model"`
	CodexPath string      `json:"codexPath"` // a Codex the owner named; "" = none
	Check     *ModelCheck `json:"check"`     // the last Check of these settings, null before one
	// Gateway is the node's model gateway as it forwards now (docs/model-gateway.md).
	Gateway *ModelGateway `json:"gateway"`
}

// ModelGateway is what the Status page shows of the model gateway: never the key.
type ModelGateway struct {
	Upstream    string     `json:"upstream"`              // the server it forwards to
	KeyPresent  bool       `json:"keyPresent"`            // it has a key to forward with, from any source
	LastError   string     `json:"lastError,omitempty"`   // the model's last failure, in the owner's words
	LastErrorAt *time.Time `json:"lastErrorAt,omitempty"` // when
	// NoUsage: the server's last answer reported no usage; budgets count the gateway's estimate.
	NoUsage bool `json:"noUsage,omitempty"`
}

// ModelRequest is PUT /api/model: each field given changes that one; Key replaces the key.
type ModelRequest struct {
	Key       *string `json:"key,omitempty"`
	RemoveKey bool    `json:"removeKey,omitempty"`
	BaseURL   *string `json:"baseUrl,omitempty"`
	Model     *string `json:"model,omitempty"`
}

// ModelCheck is what Check found: OK with the model's answer, or the turn's exact error.
type ModelCheck struct {
	OK     bool      `json:"ok"`
	Answer string    `json:"answer,omitempty"`
	Error  string    `json:"error,omitempty"`
	At     time.Time `json:"at"`
}

// SetupStep is one line of the Status page's first-run checklist.
type SetupStep struct {
	ID   string `json:"id"` // codex, model, brand, reachable, ready, agents
	Done bool   `json:"done"`
	Text string `json:"text"` // what is there, or what is missing
	Link string `json:"link"` // where the step is done
}

// Setup steps, in order.
const (
	StepCodex     = "codex"
	StepModel     = "model"
	StepBrand     = "brand"
	StepReachable = "reachable"
	StepReady     = "ready"
	StepAgents    = "agents" // the owner's own agents can call other nodes (docs/assistants.md)
)

func (s *Service) setup() (CodexSetup, error) {
	if s.cfg.Setup == nil {
		return nil, fmt.Errorf("%w: this node has no Codex setup", ErrInvalid)
	}
	return s.cfg.Setup, nil
}

// GetCodex starts getting the pinned Codex (POST /api/codex/download).
func (s *Service) GetCodex() (CodexDownload, error) {
	cs, err := s.setup()
	if err != nil {
		return CodexDownload{}, err
	}
	if err := cs.GetCodex(); err != nil {
		return cs.CodexDownload(), err
	}
	return cs.CodexDownload(), nil
}

// CancelCodex stops getting Codex (DELETE /api/codex/download).
func (s *Service) CancelCodex() (CodexDownload, error) {
	cs, err := s.setup()
	if err != nil {
		return CodexDownload{}, err
	}
	if err := cs.CancelCodex(); err != nil {
		return cs.CodexDownload(), err
	}
	return cs.CodexDownload(), nil
}

// CodexDownload is the download's state (GET /api/codex/download).
func (s *Service) CodexDownload() (CodexDownload, error) {
	cs, err := s.setup()
	if err != nil {
		return CodexDownload{}, err
	}
	return cs.CodexDownload(), nil
}

// UseCodex names a Codex the owner installed (PUT /api/codex/path).
func (s *Service) UseCodex(path string) (ModelStatus, error) {
	cs, err := s.setup()
	if err != nil {
		return ModelStatus{}, err
	}
	if err := cs.UseCodex(path); err != nil {
		return ModelStatus{}, err
	}
	return cs.Model()
}

// Model is GET /api/model.
func (s *Service) Model() (ModelStatus, error) {
	cs, err := s.setup()
	if err != nil {
		return ModelStatus{}, err
	}
	return cs.Model()
}

// SetModel is PUT /api/model.
func (s *Service) SetModel(req ModelRequest) (ModelStatus, error) {
	cs, err := s.setup()
	if err != nil {
		return ModelStatus{}, err
	}
	return cs.SetModel(req)
}

// CheckModel is POST /api/model/check.
func (s *Service) CheckModel(ctx context.Context) (ModelCheck, error) {
	cs, err := s.setup()
	if err != nil {
		return ModelCheck{}, err
	}
	return cs.CheckModel(ctx), nil
}

// setupSteps is the first-run checklist: Codex ready → a model → a brand → reachable →
// ready for agents, each with where it is done (the Status page's cards, the Brands page).
func setupSteps(st Status) []SetupStep {
	c := st.Codex
	codex := SetupStep{ID: StepCodex, Link: "#codex", Done: c.Found && c.VersionOK && st.Confinement.Available}
	switch {
	case !c.Found:
		codex.Text = "Codex is not on this machine: get it"
	case !c.VersionOK:
		codex.Text = "Codex " + c.Version + " is too old: get the pinned one"
	case !st.Confinement.Available:
		codex.Text = st.Confinement.Text
	default:
		codex.Text = "Codex " + c.Version + " is ready"
	}
	m := SetupStep{ID: StepModel, Link: "#model"}
	check := st.Model.Check
	switch {
	case c.Credential.Problem != "":
		m.Text = c.Credential.Problem
	case check != nil && !check.OK:
		m.Text = "the last check failed: " + check.Error
	case check != nil:
		m.Done, m.Text = true, "checked: the model answered"
	default:
		m.Done, m.Text = true, c.Credential.Summary+" (not checked yet)"
	}
	brand := SetupStep{ID: StepBrand, Link: "/brands", Done: len(st.Brands) > 0}
	brand.Text = fmt.Sprintf("%d brand(s) offered", len(st.Brands))
	if !brand.Done {
		brand.Text = "no brand yet: offer something to agents"
	}
	reach := SetupStep{ID: StepReachable, Link: "#reachability"}
	reach.Done, reach.Text = Reachable(st.Gateway.PublicURL)
	ready := SetupStep{ID: StepReady, Done: codex.Done && m.Done && brand.Done && reach.Done && st.Gateway.Running}
	ready.Text = "Ready for agents"
	if !ready.Done {
		ready.Text = "not ready for agents yet"
		if codex.Done && m.Done && brand.Done && reach.Done {
			ready.Text = "the gateway is not serving"
		}
	}
	agents := SetupStep{ID: StepAgents, Link: "/agents"}
	if ok, _ := Reachable(st.Gateway.PublicURL); ok {
		agents.Done, agents.Text = true, "My agents can call other nodes: their issuer is "+strings.TrimRight(st.Gateway.PublicURL, "/")+"/id"
	} else {
		agents.Text = "My agents cannot call other nodes yet: " + agentsMissing(st.Gateway.PublicURL)
	}
	return []SetupStep{codex, m, brand, reach, ready, agents}
}

// Reachable says whether agents elsewhere can reach the gateway at publicURL: an https address
// that is not this machine's loopback. (The reachability work adds its tunnel's state here.)
func Reachable(publicURL string) (bool, string) {
	u, err := url.Parse(publicURL)
	if err != nil || u.Host == "" {
		return false, "no public URL: agents cannot reach this node"
	}
	if u.Scheme != "https" {
		return false, "the public URL " + publicURL + " is not https: agents elsewhere need https"
	}
	host := strings.ToLower(u.Hostname())
	if ip := net.ParseIP(host); host == "localhost" || strings.HasSuffix(host, ".localhost") || (ip != nil && ip.IsLoopback()) {
		return false, "the public URL " + publicURL + " is this machine only"
	}
	return true, "agents reach this node at " + publicURL
}
