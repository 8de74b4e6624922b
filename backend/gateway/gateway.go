// Package gateway is the PACT provider on the wire: per-brand agent cards, A2A
// 1.0 on both HTTP bindings through a2a-go, the identity and delegation gates,
// the executor that runs a turn, and the device-flow, metadata and JWKS endpoints.
package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/aether/aether/backend/consent"
	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/identity"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/limit"
	"github.com/aether/aether/backend/policy"
	"github.com/aether/aether/backend/receipts"
	"github.com/aether/aether/backend/turn"
)

// Runner runs one coding-agent turn (codex.Runner in production).
// Turns runs the delegated turns the gateway maps onto A2A (turn.Service; the node builds it).
type Turns interface {
	Run(ctx context.Context, req turn.Request, w turn.Watcher) (*turn.Finished, error)
	Running(taskID string) bool
	Cancel(ctx context.Context, taskID string) (*receipts.Receipt, error)
	Shutdown(ctx context.Context) error
}

// Identities verifies identity JWTs (identity.Verifier in production).
type Identities interface {
	Verify(ctx context.Context, raw, clientIP string) (identity.Identity, error)
}

// Tasks is the node's task table (store.DB in production): a brand's a2a-go task
// store, private to each caller, and who owns a task, which the gate checks
// before a call reaches the SDK.
type Tasks interface {
	TaskStore(brand string, owner func(ctx context.Context) (string, error)) taskstore.Store
	TaskOwner(ctx context.Context, id a2a.TaskID) (owner, brand string, state a2a.TaskState, err error)
	// SaveWaiting stores a task waiting for consent: new when prev is TaskVersionMissing, within
	// caps whose error has a RetryAfter() time.Duration method (docs/wire.md). site is the
	// issuer's registrable domain.
	SaveWaiting(ctx context.Context, brand, owner, site string, task *a2a.Task, prev taskstore.TaskVersion) (taskstore.TaskVersion, error)
}

// Config is everything the gateway needs; the node builds it.
type Config struct {
	ConsentURL string // https://127.0.0.1:<admin-port>/pact/consent
	Identity   Identities
	Consent    *consent.Service
	Tasks      Tasks
	Ledger     *receipts.Ledger
	Turns      Turns
	Keys       keys.History // published at /.well-known/jwks.json, with each retired key's rotation (T13)
	Logger     *slog.Logger

	// Signer signs the agent cards (A2A 1.0 §8.4); nil serves them unsigned.
	Signer *keys.Key
	// CardsModified is the Last-Modified of the cards built by New (the
	// policy file's mtime); zero means now. Cards rebuilt by a later Reload
	// take the time of that reload.
	CardsModified time.Time
}

// Gateway serves the PACT provider. It swaps its brand routes atomically when
// the policy changes; in-flight turns finish on the policy they started with.
type Gateway struct {
	cfg    Config
	routes atomic.Pointer[routes]
	paused atomic.Bool
	turns  Turns
	// requests in progress per agent and per issuer site (F8, F9)
	requests requestSlots
	logs     *limit.Slots // log requests in progress per client address (log.go)

	mu      sync.Mutex // serialises Reload
	brands  map[domain.BrandID]*brandRoute
	handler http.Handler
}

// New builds a gateway serving s's policy (which must have a pact section).
func New(cfg Config, s policy.Snapshot) (*Gateway, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	g := &Gateway{cfg: cfg, turns: cfg.Turns, requests: newRequestSlots(), logs: limit.NewSlots(maxLogRequestsPerClient), brands: map[domain.BrandID]*brandRoute{}}
	if err := g.Reload(s); err != nil {
		return nil, err
	}
	g.handler = withBodyDeadline(g.routesHandler())
	return g, nil
}

// Pause makes every A2A call and device-flow request answer 503 until Resume.
func (g *Gateway) Pause()  { g.paused.Store(true) }
func (g *Gateway) Resume() { g.paused.Store(false) }

// Shutdown stops the running turns (Codex is interrupted; each turn ends
// FAILED with a receipt) and waits for them up to ctx. The node calls it when
// it stops, after the listeners stopped taking requests.
func (g *Gateway) Shutdown(ctx context.Context) error {
	return g.turns.Shutdown(ctx)
}

// Paused reports whether the gateway is paused.
func (g *Gateway) Paused() bool { return g.paused.Load() }

// Handler is the gateway listener's root handler.
func (g *Gateway) Handler() http.Handler { return g.handler }

func (g *Gateway) routesHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /.well-known/jwks.json", func(w http.ResponseWriter, r *http.Request) { g.routes.Load().jwks.ServeHTTP(w, r) })
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) { g.routes.Load().metadata.ServeHTTP(w, r) })
	mux.HandleFunc("GET /.well-known/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
		rt := g.routes.Load()
		if rt.single == nil {
			http.Error(w, "this node serves several brands: read /a2a/<brand>/.well-known/agent-card.json", http.StatusNotFound)
			return
		}
		rt.single.card.ServeHTTP(w, r)
	})
	mux.Handle("POST /pact/device_authorization", g.unlessPaused(http.HandlerFunc(g.deviceAuthorization)))
	mux.Handle("POST /pact/token", g.unlessPaused(http.HandlerFunc(g.token)))
	mux.Handle("/a2a/", http.HandlerFunc(g.serveA2A))
	mux.HandleFunc("GET /log/", g.serveLog)
	return mux
}

func (g *Gateway) unlessPaused(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.paused.Load() {
			w.Header().Set("Retry-After", "30")
			http.Error(w, "the node owner has paused this gateway", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// serveA2A routes /a2a/<brand>[/...]: the card, JSON-RPC on the path itself (or
// with a trailing slash), REST below it.
func (g *Gateway) serveA2A(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/a2a/")
	id, sub, _ := strings.Cut(rest, "/")
	br := g.routes.Load().brands[domain.BrandID(id)]
	if br == nil {
		b := bindingREST
		if sub == "" {
			b = bindingJSONRPC
		}
		writeWireError(w, b, errBrandNotFound.with("no brand "+quoteTrunc(id)+" on this node"), nil)
		return
	}
	if sub == ".well-known/agent-card.json" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		br.card.ServeHTTP(w, r)
		return
	}
	activateExtensions(w, r)
	if sub == "" { // "/a2a/<brand>" and "/a2a/<brand>/" alike: several clients append the slash
		g.guard(br, bindingJSONRPC, br.jsonrpc).ServeHTTP(w, r)
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/" + sub
	r2.URL.RawPath = ""
	g.guard(br, bindingREST, br.rest).ServeHTTP(w, r2)
}

func quoteTrunc(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return `"` + s + `"`
}

// routes is one immutable snapshot of what the gateway serves.
type routes struct {
	policy   *policy.Policy
	hash     string
	brands   map[domain.BrandID]*brandRoute
	single   *brandRoute // set when exactly one brand is configured
	jwks     http.Handler
	metadata http.Handler
	proxies  []netip.Prefix // pact.trustedProxies
}

// brandRoute is one brand's card and A2A handlers.
type brandRoute struct {
	brand    policy.Brand
	brandURL string
	card     http.Handler
	jsonrpc  http.Handler
	rest     http.Handler
}
