// Package issuer makes the node the identity issuer of its owner's agents (docs/assistants.md):
// an Ed25519 key of its own (identity.key: not the receipts key, so a leaked identity key forges
// no receipt and rotating one leaves the other alone), the agents the owner named (agents.json),
// the issuer's discovery document and JWKS at <publicUrl>/id on the gateway listener, exactly as
// docs/wire.md's identity rules fetch them, and identity JWTs minted for a named agent that is
// on, for one audience, living IdentityTTL. Who may ask for a token is the caller's business: the
// node serves minting only on the node API, behind the admin token (docs/threats.md I1).
package issuer

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/aether/aether/backend/fsutil"
	"github.com/aether/aether/backend/keys"
)

// IdentityTTL is the lifetime of a minted identity JWT: an agent turned off, or a token taken,
// is good for at most this long (docs/threats.md I2, I4).
const IdentityTTL = 5 * time.Minute

// PathPrefix is where the issuer lives under the node's publicUrl: its iss is <publicUrl>/id,
// never the publicUrl itself, which nodes refuse as an issuer (docs/wire.md, rule 3).
const PathPrefix = "/id"

// The documents served under PathPrefix (docs/wire.md, "The identity JWT", rule 5).
const (
	discoveryPath = "/.well-known/openid-configuration"
	metadataPath  = "/.well-known/oauth-authorization-server"
	jwksPath      = "/.well-known/jwks.json"
)

// MaxAgents bounds the agents one node names.
const MaxAgents = 100

// Errors the owner's service maps onto its own kinds.
var (
	ErrNoAgent     = errors.New("no such agent")
	ErrAgentOff    = errors.New("the agent is turned off")
	ErrAgentExists = errors.New("an agent with that name exists")
	ErrBadName     = errors.New(`an agent's name is 1 to 64 characters: lowercase letters, digits, ".", "_" and "-", starting with a letter or digit (e.g. "claude-desktop")`)
	ErrNotHTTPS    = errors.New("the node's publicUrl is not https: other nodes fetch an agent's issuer over https only")
	ErrTooMany     = fmt.Errorf("at most %d agents", MaxAgents)
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// Agent is one agent the owner named: its name is the sub of its tokens.
type Agent struct {
	Name    string    `json:"name"`
	On      bool      `json:"on"`
	Created time.Time `json:"created"`
}

// Token is a minted identity JWT and what it says.
type Token struct {
	Token     string    `json:"token"`
	Issuer    string    `json:"issuer"`
	Subject   string    `json:"subject"`
	Audience  string    `json:"audience"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// Issuer is the node's issuer. Safe for concurrent use.
type Issuer struct {
	key        *keys.Key
	agentsPath string
	handler    http.Handler
	now        func() time.Time

	mu        sync.Mutex
	publicURL string
	agents    []Agent
}

// Open loads (or makes) the identity key at keyPath and the agents kept at agentsPath.
func Open(keyPath, agentsPath string, now func() time.Time) (*Issuer, error) {
	if now == nil {
		now = time.Now
	}
	k, err := keys.LoadOrCreate(keyPath)
	if err != nil {
		return nil, fmt.Errorf("identity key: %w", err)
	}
	is := &Issuer{key: k, agentsPath: agentsPath, now: now}
	is.handler = is.newHandler()
	data, err := os.ReadFile(agentsPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		is.agents = []Agent{}
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", agentsPath, err)
	default:
		var f agentsFile
		if err := json.Unmarshal(data, &f); err != nil {
			return nil, fmt.Errorf("%s: %w", agentsPath, err)
		}
		for _, a := range f.Agents {
			if !nameRE.MatchString(a.Name) {
				return nil, fmt.Errorf("%s: agent %q: %w", agentsPath, a.Name, ErrBadName)
			}
		}
		is.agents = f.Agents
	}
	return is, nil
}

type agentsFile struct {
	Agents []Agent `json:"agents"`
}

// KeyID is the identity key's kid.
func (is *Issuer) KeyID() string { return is.key.ID() }

// SetPublicURL follows the node's publicUrl: the issuer is <publicUrl>/id.
func (is *Issuer) SetPublicURL(u string) {
	is.mu.Lock()
	is.publicURL = strings.TrimRight(u, "/")
	is.mu.Unlock()
}

// URL is the issuer identifier, the iss of its tokens: <publicUrl>/id.
func (is *Issuer) URL() string {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.publicURL + PathPrefix
}

// Ready says why no token can be minted (nil: it can): the publicUrl must be https.
func (is *Issuer) Ready() error {
	u, err := url.Parse(is.URL())
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return ErrNotHTTPS
	}
	return nil
}

// Agents lists the named agents, oldest first.
func (is *Issuer) Agents() []Agent {
	is.mu.Lock()
	defer is.mu.Unlock()
	return slices.Clone(is.agents)
}

// Add names a new agent, on.
func (is *Issuer) Add(name string) (Agent, error) {
	if !nameRE.MatchString(name) {
		return Agent{}, ErrBadName
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	if slices.ContainsFunc(is.agents, func(a Agent) bool { return a.Name == name }) {
		return Agent{}, ErrAgentExists
	}
	if len(is.agents) >= MaxAgents {
		return Agent{}, ErrTooMany
	}
	a := Agent{Name: name, On: true, Created: is.now().UTC().Truncate(time.Second)}
	next := append(slices.Clone(is.agents), a)
	if err := is.save(next); err != nil {
		return Agent{}, err
	}
	is.agents = next
	return a, nil
}

// Set turns an agent on or off; an agent off gets no new token.
func (is *Issuer) Set(name string, on bool) (Agent, error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	i := slices.IndexFunc(is.agents, func(a Agent) bool { return a.Name == name })
	if i < 0 {
		return Agent{}, ErrNoAgent
	}
	next := slices.Clone(is.agents)
	next[i].On = on
	if err := is.save(next); err != nil {
		return Agent{}, err
	}
	is.agents = next
	return next[i], nil
}

func (is *Issuer) save(agents []Agent) error {
	data, err := json.MarshalIndent(agentsFile{Agents: agents}, "", "  ")
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(is.agentsPath, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("save the agents: %w", err)
	}
	return nil
}

// Mint returns an identity JWT for the named agent, which must be on, for one audience (the
// other node's audience, an absolute URL), valid for IdentityTTL.
func (is *Issuer) Mint(name, audience string) (Token, error) {
	if err := is.Ready(); err != nil {
		return Token{}, err
	}
	if a, err := url.Parse(audience); err != nil || a.Scheme == "" || a.Host == "" {
		return Token{}, fmt.Errorf("the audience %q is not an absolute URL (the other node's audience, usually its publicUrl)", audience)
	}
	is.mu.Lock()
	i := slices.IndexFunc(is.agents, func(a Agent) bool { return a.Name == name })
	on := i >= 0 && is.agents[i].On
	is.mu.Unlock()
	switch {
	case i < 0:
		return Token{}, ErrNoAgent
	case !on:
		return Token{}, ErrAgentOff
	}
	now := is.now()
	var jti [12]byte
	rand.Read(jti[:])
	t := Token{Issuer: is.URL(), Subject: name, Audience: audience, ExpiresAt: now.Add(IdentityTTL).UTC().Truncate(time.Second)}
	tok, err := is.key.Sign("JWT", jwt.RegisteredClaims{
		Issuer: t.Issuer, Subject: name, Audience: jwt.ClaimStrings{audience},
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(t.ExpiresAt), ID: hex.EncodeToString(jti[:]),
	})
	t.Token = tok
	return t, err
}

// Handler serves the issuer's discovery document (under both names docs/wire.md tries) and its
// JWKS, on paths under PathPrefix, to anyone: they are public.
func (is *Issuer) Handler() http.Handler { return is.handler }

func (is *Issuer) newHandler() http.Handler {
	jwks, _ := json.Marshal(is.key.Set().JWKS())
	serve := func(body func() []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "public, max-age=300")
			w.Write(body())
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+PathPrefix+discoveryPath, serve(is.discovery))
	mux.Handle("GET "+PathPrefix+metadataPath, serve(is.discovery))
	mux.Handle("GET "+PathPrefix+jwksPath, serve(func() []byte { return jwks }))
	return mux
}

func (is *Issuer) discovery() []byte {
	iss := is.URL()
	doc, _ := json.Marshal(map[string]any{
		"issuer":                                iss,
		"jwks_uri":                              iss + jwksPath,
		"id_token_signing_alg_values_supported": []string{"EdDSA"},
		"subject_types_supported":               []string{"public"},
		"response_types_supported":              []string{"id_token"},
	})
	return doc
}
