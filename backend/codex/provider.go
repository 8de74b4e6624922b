package codex

import (
	"context"
	"errors"
	"fmt"
)

// Provider is the node's model gateway for one turn (backend/modelgw, docs/model-gateway.md):
// Codex's base_url and the turn's one-time token, given to Codex in place of any key.
type Provider struct {
	BaseURL string // the gateway's, on loopback, ending in /v1
	Token   string // dead once the turn ends
	Model   string // "" = Codex's default
}

// ErrNoProvider: the runner requires the model gateway, and the turn came without its pass.
var ErrNoProvider = errors.New("the turn has no pass to the node's model gateway")

// route is how a turn reaches its model: the `-c` options and the value of CODEX_API_KEY.
// With a Provider that is the gateway and the turn's token, and the owner's key stays out of
// the view; else codex's own sign-in and provider, with the window's model. A server or key
// set in the window is reached through the gateway alone. reason is set when it fails.
func (r *Runner) route(req Request) (key string, args []string, reason string, err error) {
	if req.Provider != nil {
		args, err = upstreamArgs(*req.Provider)
		if err != nil {
			return "", nil, "the model gateway's settings are refused: " + err.Error(), err
		}
		return req.Provider.Token, args, "", nil
	}
	if r.RequireProvider {
		return "", nil, ErrNoProvider.Error(), ErrNoProvider
	}
	up, err := r.upstream()
	if err != nil {
		return "", nil, "cannot read the model settings: " + err.Error(), err
	}
	if up.Host != "" || up.KeySet {
		return "", nil, ErrNoProvider.Error() + ", which alone reaches the model set in the window", ErrNoProvider
	}
	cred, key := r.SignIn()
	if cred.Problem != "" {
		return "", nil, cred.Problem, fmt.Errorf("%w: %s", ErrCredential, cred.Problem)
	}
	if args, err = upstreamArgs(Provider{Model: up.Model}); err != nil {
		return "", nil, "the model settings are refused: " + err.Error(), err
	}
	return key, args, "", nil
}

// ProbeVia is Probe through the node's model gateway.
func (r *Runner) ProbeVia(ctx context.Context, dir string, p *Provider) (Result, error) {
	return r.probe(ctx, dir, p)
}
