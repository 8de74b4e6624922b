package codex

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/aether/aether/backend/domain"
)

// Upstream is the model the owner chose in the window (backend/model): optionally an
// OpenAI-compatible Responses server and a model name, and whether a key is saved for that
// server. The key itself is the node's model gateway's alone (docs/model-gateway.md): a turn
// reaches a server or key set in the window only through it.
type Upstream struct {
	Host   string // the host of the server named in the window (model.Host); "" = OpenAI
	Model  string // "" = codex's default
	KeySet bool   // a key is saved in the window for this server
}

// Credential kinds of a key or server set in the window.
const (
	CredentialAPIKeyStored = "api_key_stored" // a key set in the window, for codex's own provider
	CredentialUpstreamKey  = "upstream_key"   // a server set in the window, with its key
	CredentialUpstreamOpen = "upstream_open"  // a server set in the window that takes no key
)

// upstreamProvider is the name the window's server gets among codex's model providers.
const upstreamProvider = "aether"

func (r *Runner) upstream() (Upstream, error) {
	if r.Upstream == nil {
		return Upstream{}, nil
	}
	return r.Upstream()
}

// upstreamCredential is the credential of the window's settings, if they give one, as the
// model gateway chooses it (docs/model-gateway.md): a server's key goes to that server alone;
// CODEX_API_KEY and codex's sign-in are for OpenAI, and are never sent to a server the owner
// named.
func upstreamCredential(up Upstream) (Credential, bool) {
	switch {
	case up.Host != "" && up.KeySet:
		return Credential{Kind: CredentialUpstreamKey,
			Summary: "API key set in Aether for " + up.Host + ": the node's model gateway holds it; each turn's Codex gets a one-time token"}, true
	case up.Host != "":
		return Credential{Kind: CredentialUpstreamOpen, Summary: "no key: " + up.Host + " is asked without one"}, true
	case up.KeySet:
		return Credential{Kind: CredentialAPIKeyStored,
			Summary: "API key set in Aether: the node's model gateway holds it; each turn's Codex gets a one-time token"}, true
	}
	return Credential{}, false
}

// upstreamArgs are the `-c` options that point codex at a turn's provider (the model gateway;
// none = codex's own) and model. They go through the same allow-list as Runner.ExtraArgs, and
// every value is a TOML string of printable ASCII without quotes or backslashes, so no setting
// can ride in on one.
func upstreamArgs(up Provider) ([]string, error) {
	var args []string
	if up.BaseURL != "" {
		base, err := tomlString(up.BaseURL)
		if err != nil {
			return nil, fmt.Errorf("base URL: %w", err)
		}
		provider := `{name="Aether upstream",base_url=` + base + `,wire_api="responses"`
		if up.Token != "" {
			provider += `,env_key="CODEX_API_KEY"`
		}
		args = append(args, "-c", `model_provider="`+upstreamProvider+`"`,
			"-c", "model_providers."+upstreamProvider+"="+provider+"}")
	}
	if up.Model != "" {
		m, err := tomlString(up.Model)
		if err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		args = append(args, "-c", "model="+m)
	}
	if err := checkExtraArgs(args); err != nil {
		return nil, err
	}
	return args, nil
}

// tomlString quotes s as a TOML basic string; it refuses what would need an escape.
func tomlString(s string) (string, error) {
	for _, r := range s {
		if r <= ' ' || r > '~' || r == '"' || r == '\\' {
			return "", fmt.Errorf("%q holds a space, a quote, a backslash or a character that is not printable ASCII", s)
		}
	}
	return `"` + s + `"`, nil
}

// ProbeTimeout bounds Probe: offline, codex retries forever.
const ProbeTimeout = 90 * time.Second

// ProbePrompt is the whole of Probe's turn.
const ProbePrompt = "Reply with the single word OK and nothing else. Do not run any command."

// Probe runs one tiny confined turn, read-only in an empty workspace made under dir and removed
// after, against the model as set now: what the Status page's Check shows. Its Result says
// completed, or why not, in the words a turn's receipt would.
func (r *Runner) Probe(ctx context.Context, dir string) (Result, error) {
	return r.probe(ctx, dir, nil)
}

func (r *Runner) probe(ctx context.Context, dir string, p *Provider) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Result{Status: StatusFailed, Reason: err.Error()}, err
	}
	ws, err := os.MkdirTemp(dir, "check-")
	if err != nil {
		return Result{Status: StatusFailed, Reason: err.Error()}, err
	}
	defer os.RemoveAll(ws)
	return r.Run(ctx, Request{Workspace: ws, AccessMode: domain.ReadOnly, Prompt: ProbePrompt,
		Conversation: "aether-check", Provider: p}, nil)
}

// ProbeAnswer is a short, one-line form of a probe's answer.
func ProbeAnswer(res Result) string {
	return oneLine(strings.TrimSpace(res.Answer), 80)
}
