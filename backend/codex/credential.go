package codex

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Credential kinds (Credential.Kind): how codex reaches its model, and whether the commands
// it runs could learn how (docs/confinement.md, W8).
const (
	CredentialAPIKeyEnv   = "api_key_env"   // CODEX_API_KEY given to the node
	CredentialAPIKeyLogin = "api_key_login" // `codex login --with-api-key` in the owner's CODEX_HOME
	CredentialChatGPT     = "chatgpt"       // a ChatGPT sign-in: refresh tokens codex must be able to rewrite
	CredentialUnreadable  = "unreadable"    // signed in, but not in a file Aether can read (e.g. the keyring)
	CredentialNone        = "none"
)

// Credential is codex's sign-in as the node finds it. The node's model gateway forwards with
// its key, and each turn's Codex gets a one-time token in its place (Request.Provider); a
// Runner without RequireProvider hands the key to codex, in its environment only.
type Credential struct {
	Kind    string
	Summary string // what the Status page says about it
	Problem string // when turns cannot run with it: why, and the safe way
}

// ErrCredential: codex has no credential that the commands it runs cannot read.
var ErrCredential = errors.New("codex credential cannot be protected")

// safeCredentialHint names the way that works.
const safeCredentialHint = "give Aether a dedicated, limited API key: on the Status page, or set CODEX_API_KEY for it, or run `codex login --with-api-key`"

// credential is how codex reaches its model, for the Status page: what the owner set in the
// window (Upstream), else codex's own sign-in.
func (r *Runner) credential() Credential {
	up, err := r.upstream()
	if err != nil {
		return Credential{Kind: CredentialUnreadable, Summary: "unreadable",
			Problem: "cannot read the model settings: " + err.Error()}
	}
	if c, ok := upstreamCredential(up); ok {
		return c
	}
	c, _ := r.SignIn()
	return c
}

// SignIn is codex's own credential and its key, the window's settings aside: CODEX_API_KEY
// among Runner.Env, else the owner's CODEX_HOME/auth.json. The node's model gateway forwards
// to OpenAI with it when the window holds no key (docs/model-gateway.md). A ChatGPT sign-in is
// refused: its tokens live in a file codex rewrites, and a file codex can read, the commands it
// runs can read too.
func (r *Runner) SignIn() (Credential, string) {
	// The last CODEX_API_KEY in Runner.Env, as a later entry overrides an earlier one there.
	env := r.extraEnv()
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, _ := strings.Cut(env[i], "="); k == "CODEX_API_KEY" && v != "" {
			return Credential{Kind: CredentialAPIKeyEnv,
				Summary: "API key from CODEX_API_KEY: the node's model gateway holds it; each turn's Codex gets a one-time token"}, v
		}
	}
	home := r.codexHome()
	path := filepath.Join(home, "auth.json")
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Credential{Kind: CredentialNone, Summary: "not signed in",
				Problem: "codex is not signed in: " + safeCredentialHint}, ""
		}
		return Credential{Kind: CredentialUnreadable, Summary: "unreadable",
			Problem: fmt.Sprintf("cannot read codex's sign-in %s (%v): %s", path, err, safeCredentialHint)}, ""
	}
	var auth struct {
		Mode   string          `json:"auth_mode"`
		Key    *string         `json:"OPENAI_API_KEY"`
		Tokens json.RawMessage `json:"tokens"`
	}
	if err := json.Unmarshal(data, &auth); err != nil {
		return Credential{Kind: CredentialUnreadable, Summary: "unreadable",
			Problem: fmt.Sprintf("codex's sign-in %s is not JSON (%v): %s", path, err, safeCredentialHint)}, ""
	}
	hasTokens := len(auth.Tokens) > 0 && string(auth.Tokens) != "null"
	if auth.Key != nil && *auth.Key != "" && !hasTokens {
		return Credential{Kind: CredentialAPIKeyLogin,
			Summary: "API key from `codex login --with-api-key`: the node's model gateway holds it; each turn's Codex gets a one-time token"}, *auth.Key
	}
	if hasTokens || auth.Mode == "chatgpt" {
		return Credential{Kind: CredentialChatGPT, Summary: "ChatGPT sign-in (cannot be protected)",
			Problem: "codex is signed in with a ChatGPT account, whose tokens the commands Codex runs could read; " + safeCredentialHint}, ""
	}
	return Credential{Kind: CredentialNone, Summary: "not signed in",
		Problem: "codex's sign-in " + path + " holds no API key: " + safeCredentialHint}, ""
}
