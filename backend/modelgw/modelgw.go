// Package modelgw is the node's model gateway: a loopback server that speaks the Responses API
// to the Codex of each turn, and forwards it to the owner's model with the owner's credential.
// A turn's Codex holds a one-time token bound to that turn, never the key (docs/model-gateway.md).
package modelgw

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/model"
)

// DefaultMaxBody caps a request body Codex sends (its whole conversation, every turn).
const DefaultMaxBody = 32 << 20

// Binding is what a token is minted for; the gateway forwards for it alone.
type Binding struct {
	Turn, Grant, Brand string
	Agent              string // the agent's key (domain.Agent.Key)
	Model              string // the brand's model; "" = the owner's
	// Budget is the grant's tokens per day; 0 = no limit.
	Budget int64
}

// total is the tokens of u a budget counts.
func total(u domain.Usage) int64 { return u.InputTokens + u.OutputTokens }

// Config is the gateway's.
type Config struct {
	// Models is the model the owner set in the window: its server and model, read at every
	// Open, and its key, read as each request is forwarded (key).
	Models *model.Store
	// SignIn is Codex's own sign-in (backend/codex: CODEX_API_KEY given to the node, or `codex
	// login --with-api-key`), for OpenAI when the window holds no key for it: its key, or why it
	// cannot be used (e.g. a ChatGPT sign-in), in the owner's words. nil = none.
	SignIn func() (key, problem string)
	// Client reaches the upstream; default a client with no overall timeout (streams are long).
	Client  *http.Client
	MaxBody int64 // default DefaultMaxBody
	Now     func() time.Time
	Logger  *slog.Logger
	// Ledger keeps the grants' daily counts across restarts; nil = in memory only.
	Ledger Ledger
}

// Ledger is where the gateway keeps each grant's tokens a UTC day (pact.sqlite): a restart
// gives no grant its budget back (docs/threats.md M10). Day is YYYY-MM-DD.
type Ledger interface {
	ModelUse(ctx context.Context, grant domain.GrantID, day string) (int64, error)
	AddModelUse(ctx context.Context, grant domain.GrantID, day string, tokens int64) error
}

var (
	// ErrBudget: the grant has used its tokens for today.
	ErrBudget = errors.New("budget_exhausted")
	// ErrUpstream: the model server failed the turn (down, refused the key, no such model…).
	ErrUpstream = errors.New("model_unavailable")
	errClosed   = errors.New("the turn has ended")
)

// Gateway serves turns' Codex on loopback.
type Gateway struct {
	cfg     Config
	ln      net.Listener
	srv     *http.Server
	mu      sync.Mutex
	passes  map[[32]byte]*Pass
	used    map[string]int64 // grant + "\x00" + UTC day → tokens
	lastErr string
	lastAt  time.Time
	noUsage bool // the upstream's last whole answer carried no usage: budgets count estimates
}

// Start listens on 127.0.0.1 (a free port) and serves until Close.
func Start(cfg Config) (*Gateway, error) {
	if cfg.Models == nil {
		return nil, errors.New("modelgw: no model settings")
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: &http.Transport{Proxy: nil, ForceAttemptHTTP2: true,
			MaxIdleConnsPerHost: 8, IdleConnTimeout: 90 * time.Second, ResponseHeaderTimeout: 5 * time.Minute,
			TLSHandshakeTimeout: 10 * time.Second, DisableCompression: true}}
	}
	// A redirect would carry the owner's key to wherever it points: none is followed, and the
	// turn fails instead (docs/threats.md M17).
	client := *cfg.Client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cfg.Client = &client
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("modelgw: listen on loopback: %w", err)
	}
	g := &Gateway{cfg: cfg, ln: ln, passes: map[[32]byte]*Pass{}, used: map[string]int64{}}
	g.srv = &http.Server{Handler: g, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	go g.srv.Serve(ln)
	return g, nil
}

// BaseURL is the provider's base_url Codex is given.
func (g *Gateway) BaseURL() string { return "http://" + g.ln.Addr().String() + "/v1" }

// Close stops serving and ends every pass.
func (g *Gateway) Close() error {
	g.mu.Lock()
	for _, p := range g.passes {
		p.end(errClosed)
	}
	g.mu.Unlock()
	return g.srv.Close()
}

// Status is what the Status page shows of the model; never the key.
type Status struct {
	Upstream    string    // the server's address
	KeyPresent  bool      // the owner's credential is set
	LastError   string    // the last upstream failure, in the owner's words
	LastErrorAt time.Time // when
	// NoUsage: the upstream's last whole answer reported no usage, so budgets count the
	// gateway's estimate (docs/model-gateway.md, "Usage and budgets").
	NoUsage bool
}

// Status reads the upstream as set now and the last failure seen.
func (g *Gateway) Status() Status {
	up, err := g.cfg.Models.Settings()
	var key string
	if err == nil {
		key, err = g.key(up)
	}
	st := Status{Upstream: model.Host(up.Server()), KeyPresent: key != ""}
	g.mu.Lock()
	st.LastError, st.LastErrorAt, st.NoUsage = g.lastErr, g.lastAt, g.noUsage
	g.mu.Unlock()
	if err != nil {
		st.LastError = "cannot read the model settings: " + err.Error()
	}
	return st
}

// Pass is one turn's way to the model: Codex gets its token; the key stays here.
type Pass struct {
	Token   string // Codex's env_key value
	BaseURL string // Codex's provider base_url
	Model   string // the model Codex asks for; "" = Codex's default

	g        *Gateway
	hash     [32]byte
	bind     Binding
	up       model.Settings // the server the pass forwards to, as the window set it at Open
	deadline time.Time
	ended    chan struct{}
	usage    domain.Usage     // what the upstream reported using, summed over the turn's requests
	spent    map[string]int64 // UTC day → tokens counted, for the ledger at Close
	why      error            // set once, when ended
	said     string           // the upstream failure that ended the pass, in the owner's words
	held     *held            // what the turn's first request chose, which every later one keeps
	inflight sync.WaitGroup   // requests being forwarded; Close waits for their count
}

// Open mints a turn's token, dead after deadline or Close. It refuses a grant whose budget is
// used up for today (ErrBudget), one whose use it cannot read, and an upstream whose
// credential cannot be used (ErrUpstream).
func (g *Gateway) Open(b Binding, deadline time.Time) (*Pass, error) {
	up, err := g.cfg.Models.Settings()
	if err != nil {
		return nil, fmt.Errorf("%w: cannot read the model settings: %v", ErrUpstream, err)
	}
	if _, err := g.key(up); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUpstream, err)
	}
	if _, err := url.Parse(up.Server()); err != nil {
		return nil, fmt.Errorf("%w: the model server's address %q: %v", ErrUpstream, up.BaseURL, err)
	}
	if err := g.load(b.Grant); err != nil {
		return nil, err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	token := "aether-turn-" + base64.RawURLEncoding.EncodeToString(raw[:])
	p := &Pass{Token: token, BaseURL: g.BaseURL(), Model: up.Model, g: g, hash: sha256.Sum256([]byte(token)),
		bind: b, up: up, deadline: deadline, ended: make(chan struct{}), spent: map[string]int64{}}
	if b.Model != "" {
		p.Model = b.Model
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if used := g.used[g.dayKey(b.Grant)]; b.Budget > 0 && used >= b.Budget {
		return nil, fmt.Errorf("%w: this grant has used %d of its %d tokens for today", ErrBudget, used, b.Budget)
	}
	g.passes[p.hash] = p
	return p, nil
}

// Ended is closed when the gateway ends the turn's pass itself: the grant's budget crossed,
// or the upstream failed it. Err says why.
func (p *Pass) Ended() <-chan struct{} { return p.ended }

// Err is why the gateway ended the pass; nil while it stands or after a plain Close.
func (p *Pass) Err() error {
	p.g.mu.Lock()
	defer p.g.mu.Unlock()
	if errors.Is(p.why, errClosed) {
		return nil
	}
	return p.why
}

// OwnerErr is Err in the owner's words: an upstream failure with the upstream's own (the
// Status page's Check, never a turn's).
func (p *Pass) OwnerErr() error {
	p.g.mu.Lock()
	said := p.said
	p.g.mu.Unlock()
	if said != "" {
		return fmt.Errorf("%w: %s", ErrUpstream, said)
	}
	return p.Err()
}

// Close kills the token (a replay gets 401), waits for the requests under way to be counted
// (ending the pass cuts them), writes what the turn used to the ledger, and returns it.
func (p *Pass) Close() domain.Usage {
	p.g.mu.Lock()
	p.end(errClosed)
	p.g.mu.Unlock()
	p.inflight.Wait() // no request starts once the pass has ended (admit)
	p.g.mu.Lock()
	usage, spent := p.usage, p.spent
	p.spent = map[string]int64{}
	p.g.mu.Unlock()
	p.g.record(p.bind, spent)
	return usage
}

// record adds a closed pass's tokens to its grant's days in the ledger. A failed write is
// logged: the count in memory still holds the grant to its budget until the node restarts.
func (g *Gateway) record(b Binding, spent map[string]int64) {
	if g.cfg.Ledger == nil || b.Grant == "" {
		return
	}
	for day, n := range spent {
		if n == 0 {
			continue
		}
		if err := g.cfg.Ledger.AddModelUse(context.Background(), domain.GrantID(b.Grant), day, n); err != nil {
			g.cfg.Logger.Error("model gateway could not record a turn's tokens", "turn", b.Turn, "grant", b.Grant,
				"day", day, "tokens", n, "err", err)
		}
	}
}

// load reads the grant's use today from the ledger, unless this gateway already counts it.
// The days before today are forgotten: the memory holds one day per grant.
func (g *Gateway) load(grant string) error {
	if g.cfg.Ledger == nil || grant == "" {
		return nil
	}
	day := g.day()
	key := grant + "\x00" + day
	g.mu.Lock()
	_, ok := g.used[key]
	g.mu.Unlock()
	if ok {
		return nil
	}
	n, err := g.cfg.Ledger.ModelUse(context.Background(), domain.GrantID(grant), day)
	if err != nil {
		return fmt.Errorf("cannot read grant %s's use of the model today: %w", grant, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.used[key]; !ok {
		for k := range g.used {
			if !strings.HasSuffix(k, "\x00"+day) {
				delete(g.used, k)
			}
		}
		g.used[key] = n
	}
	return nil
}

// end removes the pass from the gateway; g.mu must be held. The first reason stands; one the
// gateway gave itself is logged with what the pass was bound to (never its token).
func (p *Pass) end(why error) {
	if p.why != nil {
		return
	}
	p.why = why
	delete(p.g.passes, p.hash)
	close(p.ended)
	if !errors.Is(why, errClosed) {
		p.g.cfg.Logger.Warn("model gateway ended a turn's pass", "turn", p.bind.Turn, "grant", p.bind.Grant,
			"brand", p.bind.Brand, "agent", p.bind.Agent, "reason", why.Error())
	}
}

// Used is the tokens a grant has used today, as the gateway and the ledger counted them.
func (g *Gateway) Used(grant string) (int64, error) {
	if err := g.load(grant); err != nil {
		return 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.used[g.dayKey(grant)], nil
}

func (g *Gateway) dayKey(grant string) string { return grant + "\x00" + g.day() }

func (g *Gateway) day() string { return g.cfg.Now().UTC().Format(time.DateOnly) }

// admit finds the live pass of a bearer token and counts the request as under way (the
// caller calls p.inflight.Done). A pass whose grant has used its budget today takes no new
// request, whenever it opened (M13): it is ended, and ErrBudget says why.
func (g *Gateway) admit(token string) (*Pass, error) {
	h := sha256.Sum256([]byte(token))
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.passes[h]
	if p == nil {
		return nil, nil
	}
	if !g.cfg.Now().Before(p.deadline) {
		p.end(errors.New("the turn's deadline passed"))
		return nil, nil
	}
	if used := g.used[g.dayKey(p.bind.Grant)]; p.bind.Budget > 0 && used >= p.bind.Budget {
		err := fmt.Errorf("%w: this grant has used %d of its %d tokens for today", ErrBudget, used, p.bind.Budget)
		p.end(err)
		return nil, err
	}
	p.inflight.Add(1)
	return p, nil
}

// count adds one response's usage to its pass and grant. When the grant's budget is crossed
// it ends every pass of the grant (each turn is then ended by its owner, backend/turn), which
// cuts their requests under way.
func (g *Gateway) count(p *Pass, u domain.Usage) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p.usage.InputTokens += u.InputTokens
	p.usage.CachedInputTokens += u.CachedInputTokens
	p.usage.OutputTokens += u.OutputTokens
	key := g.dayKey(p.bind.Grant)
	g.used[key] += total(u)
	p.spent[g.day()] += total(u)
	crossed := func(o *Pass) bool { return o.bind.Budget > 0 && g.used[key] >= o.bind.Budget }
	if crossed(p) {
		p.end(fmt.Errorf("%w: this grant's %d tokens for today ran out during the turn (%d used)", ErrBudget, p.bind.Budget, g.used[key]))
	}
	for _, o := range g.passes {
		if o.bind.Grant == p.bind.Grant && o.bind.Grant != "" && crossed(o) {
			o.end(fmt.Errorf("%w: this grant's %d tokens for today ran out during another of its turns (%d used)", ErrBudget, o.bind.Budget, g.used[key]))
		}
	}
}

// fail ends the turn's pass for an upstream failure: agent is the fixed reason the turn, its
// receipt and the agent get; owner, with the upstream's own words, is for the Status page
// alone (docs/threats.md M15).
func (g *Gateway) fail(p *Pass, agent, owner string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lastErr, g.lastAt = owner, g.cfg.Now()
	if p.why == nil {
		p.said = owner
	}
	p.end(fmt.Errorf("%w: %s", ErrUpstream, agent))
}

// seen records a failure the turn outlives (a rate limit, a server error Codex retries) for
// the Status page.
func (g *Gateway) seen(owner string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lastErr, g.lastAt = owner, g.cfg.Now()
}

// reported notes whether the upstream's last whole answer carried its usage (the Status
// page says when it does not: budgets then count estimates, M19).
func (g *Gateway) reported(usage bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.noUsage == usage {
		g.noUsage = !usage
		if !usage {
			g.cfg.Logger.Warn("the model server reports no usage: the gateway counts an estimate against the grants' budgets")
		}
	}
}

// key is what the gateway forwards to up's server with, read from the window's settings as
// it forwards, never held: the key the owner saved there for that server (a key belongs to the
// server it was saved with, docs/threats.md M16), else, for OpenAI when the window names no
// server, Codex's own sign-in; a server the owner named gets its own key or none (X10). ""
// = the server is asked without one.
func (g *Gateway) key(up model.Settings) (string, error) {
	key, err := g.cfg.Models.KeyFor(up.Server())
	if err != nil {
		return "", fmt.Errorf("cannot read the model key: %v", err)
	}
	if key != "" || up.BaseURL != "" || g.cfg.SignIn == nil {
		return key, nil
	}
	key, problem := g.cfg.SignIn()
	if problem != "" {
		return "", errors.New(problem)
	}
	return key, nil
}
