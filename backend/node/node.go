// Package node is the composition root: it opens the data dir, builds the services, the
// owner's service over them and the gateway from flags and policy.json, binds the listeners
// with their handlers, and starts and stops all of it. The CLI and the desktop app are thin
// shells over it; the offline CLI verbs open the data dir through it (datadir.go).
package node

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aether/aether/backend/admin"
	"github.com/aether/aether/backend/codex"
	"github.com/aether/aether/backend/consent"
	"github.com/aether/aether/backend/fsutil"
	"github.com/aether/aether/backend/gateway"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/modelgw"
	"github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/receipts"
	"github.com/aether/aether/backend/store"
)

// Options are the flags of `aether node serve`.
type Options struct {
	PolicyPath string // policy.json; "" = the desktop default (last used, else <data>/policy.json)
	DataDir    string // "" = DefaultDataDir()
	Port       int    // node API on 127.0.0.1; 0 = a free port
	AdminPort  int    // admin UI on 127.0.0.1; 0 = a free port
	PactListen string // gateway address, e.g. 127.0.0.1:8080
	CodexPath  string // codex binary; "" = codex on PATH
	CodexHome  string // CODEX_HOME for codex; "" = $CODEX_HOME, else ~/.codex
	// CodexRegistry is where Get Codex downloads the pinned package; "" = npm's registry
	// (tests and the package test point it at a loopback stand-in).
	CodexRegistry string
	// CodexArgs and CodexEnv are passed to every codex run (tests point codex at a local model).
	CodexArgs []string
	CodexEnv  []string
	// CodexTestMounts are host folders bound read-write into every turn's view: only test
	// harnesses set them (the fake codex's record).
	CodexTestMounts []string
	// Runner replaces Codex with another coding agent (benchmarks use an instant stand-in).
	Runner gateway.Runner
	UI     fs.FS // frontend/dist
	Logger *slog.Logger
	// Desktop keeps the node running on a broken policy (the window shows the
	// error on the Brands page, gateway stopped) instead of failing to start.
	Desktop bool
	// StarterPolicy writes a starter policy (no brands) when PolicyPath does not exist.
	StarterPolicy bool
	// OnConsentLink is called when a browser opens a consent link (the desktop brings its window forward).
	OnConsentLink func(userCode string)
	// PruneEvery is how often expired and retired tasks are deleted; 0 means every 30 s.
	PruneEvery time.Duration
	// Funnel publishes the gateway with Tailscale Funnel whatever pact.funnel says
	// (`node serve --funnel`); Reach configures it.
	Funnel bool
	Reach  ReachOptions
	// Listen opens the node's listeners; nil is net.Listen. Tests wrap it to see what
	// reaches the node.
	Listen func(network, address string) (net.Listener, error)
}

func (o Options) listen(address string) (net.Listener, error) {
	if o.Listen != nil {
		return o.Listen("tcp", address)
	}
	return net.Listen("tcp", address)
}

func (o Options) pruneEvery() time.Duration {
	if o.PruneEvery > 0 {
		return o.PruneEvery
	}
	return 30 * time.Second
}

// Node is a running node.
type Node struct {
	opts    Options
	log     *slog.Logger
	dataDir string
	lock    *os.File
	ring    *keys.Ring   // the signing key and the keys it replaced
	history keys.History // the ring for verifiers: each retired key bounded by its rotation (T13)
	key     *keys.Key    // ring.Current
	db      *store.DB
	token   string
	consent *consent.Service
	ledger  *receipts.Ledger
	head    *receipts.HeadFile // receipts.head
	runner  *codex.Runner
	models  *modelgw.Gateway // the model gateway every turn reaches its model through
	setup   *codexSetup      // Get Codex and the model settings (the Status page)
	turns   gateway.Runner
	owner   *owner.Service
	admin   *admin.Server
	// gw is nil until a policy first loads. Its routes are the one served policy: consent and
	// the owner read the brands from there (served).
	gw atomic.Pointer[gateway.Gateway]
	// ids checks identities for the served publicUrl and audience; funnel publishes the gateway.
	ids    identities
	funnel funnel

	applyMu    sync.Mutex // one policy applied at a time
	mu         sync.Mutex // the policy file's state
	polErr     error      // the current file's problem, if any
	polPath    string
	polModTime time.Time

	servers  []*http.Server
	lns      []net.Listener
	addrs    Addresses
	bgCtx    context.Context // ends when the node stops
	stop     context.CancelFunc
	bg       sync.WaitGroup
	health   codex.Health
	healthMu sync.Mutex
}

// Addresses are the listeners as bound, written to <data-dir>/node.json for local tools.
type Addresses struct {
	Gateway   string `json:"gateway"`
	Admin     string `json:"admin"`
	API       string `json:"api"`
	PublicURL string `json:"publicUrl"`
	PID       int    `json:"pid"`
}

// Start opens the data dir, loads the policy and starts every listener.
func Start(ctx context.Context, o Options) (n *Node, err error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	n = &Node{opts: o, log: o.Logger}
	n.bgCtx, n.stop = context.WithCancel(context.Background())
	started := n // the named result is nil by the time a failure is returned
	defer func() {
		if err != nil {
			started.close()
		}
	}()
	if n.dataDir = o.DataDir; n.dataDir == "" {
		if n.dataDir, err = DefaultDataDir(); err != nil {
			return nil, err
		}
	}
	if n.dataDir, err = filepath.Abs(n.dataDir); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err = prepareDataDir(n.dataDir); err != nil {
		return nil, err
	}
	if n.lock, err = lockDataDir(n.path(fileLock)); err != nil {
		return nil, err
	}
	if n.ring, err = keys.LoadRing(n.dataDir); err != nil {
		return nil, err
	}
	n.key = n.ring.Current
	// The JWKS carries each retired key's rotation statement, so they must check out (T13).
	if n.history, err = n.ring.VerifyRotations(n.dataDir); err != nil {
		return nil, fmt.Errorf("key rotations in %s: %w", n.dataDir, err)
	}
	if n.token, err = admin.LoadOrCreateToken(n.path(fileToken)); err != nil {
		return nil, err
	}
	cert, err := keys.LoadOrCreateTLS(n.path(fileTLSCert), n.path(fileTLSKey), time.Now())
	if err != nil {
		return nil, err
	}
	if n.db, err = store.Open(n.path(fileDB)); err != nil {
		return nil, err
	}
	pol, err := n.loadPolicy()
	if err != nil && !o.Desktop {
		return nil, err
	}
	n.setup = newCodexSetup(n, o.CodexRegistry)
	n.runner = &codex.Runner{Path: o.CodexPath, Find: n.setup.find, Upstream: n.setup.upstream, Home: o.CodexHome, StateDir: n.path(dirCodex),
		ExtraArgs: o.CodexArgs, Env: append([]string{"CODEX_API_KEY", turnTag}, o.CodexEnv...), TestMounts: o.CodexTestMounts, Logger: n.log}
	if err = n.startModels(); err != nil {
		return nil, err
	}
	n.turns = n.runner
	if o.Runner != nil {
		n.turns = o.Runner
	}

	// Listeners first: the consent URL and the node API address are only known once bound.
	adminLn, err := o.listenLoopback(o.AdminPort, "admin")
	if err != nil {
		return nil, err
	}
	apiLn, err := o.listenLoopback(o.Port, "node API")
	if err != nil {
		adminLn.Close()
		return nil, err
	}
	gwAddr := o.PactListen
	if gwAddr == "" {
		gwAddr = "127.0.0.1:8080"
	}
	gwLn, err := o.listen(gwAddr)
	if err != nil {
		adminLn.Close()
		apiLn.Close()
		return nil, fmt.Errorf("gateway: listen on %s: %w (is another program using it? choose another with --pact-listen)", gwAddr, err)
	}
	n.lns = []net.Listener{gwLn, adminLn, apiLn}
	n.addrs = Addresses{Gateway: gwLn.Addr().String(), Admin: adminLn.Addr().String(), API: apiLn.Addr().String(), PID: os.Getpid()}
	consentURL := "https://" + n.addrs.Admin + "/pact/consent"

	publicURL := "http://" + n.addrs.Gateway
	if pol != nil {
		publicURL = pol.Pact.PublicURL
	}
	n.addrs.PublicURL = publicURL
	n.consent = consent.New(n.db, n.key, consent.Config{
		PublicURL: publicURL, ConsentURL: consentURL, Brands: n.consentBrands, Logger: n.log,
	})
	n.ledger = receipts.NewLedger(n.db, n.key, publicURL, time.Now)
	n.owner = owner.New(owner.Config{
		Consent: n.consent, Ledger: n.ledger, Keys: n.history, Node: ownerNode{n},
		Listen: n.addrs.Gateway, PublicURL: publicURL, AdminURL: "https://" + n.addrs.Admin, Setup: n.setup,
		TokensToday: n.models.Used,
	})
	n.head = &receipts.HeadFile{Path: n.path(fileHead)}
	if err = n.head.Check(ctx, n.ledger); err != nil {
		return nil, err
	}
	// From here on, no receipt is handed out before receipts.head holds it (T14).
	n.db.SetHeadMark(n.head.Mark)
	if err = n.recover(ctx); err != nil {
		return nil, err
	}
	if err = n.head.Save(ctx, n.ledger); err != nil {
		return nil, err
	}
	if pol != nil {
		if err = n.startGateway(pol, publicURL, consentURL); err != nil && !o.Desktop {
			return nil, err
		}
	}

	n.admin = admin.New(admin.Config{Token: n.token, TokenFile: n.path(fileToken), Addr: n.addrs.Admin, UI: o.UI, Log: n.log, OnConsentLink: o.OnConsentLink}, n.owner)
	// No ReadTimeout: net/http keeps reading after the body to notice a client that goes away,
	// and would end streaming turns with it. The gateway gives each body its own deadline
	// (docs/wire.md, "Limits").
	gwSrv := &http.Server{Handler: http.HandlerFunc(n.serveGateway), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10, IdleTimeout: 2 * time.Minute}
	// Browsers that do not trust the self-signed certificate yet fail handshakes: debug noise.
	quiet := slog.NewLogLogger(n.log.Handler(), slog.LevelDebug)
	adminSrv := &http.Server{Handler: n.admin.Handler(), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10, ErrorLog: quiet,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	apiSrv := &http.Server{Handler: n.admin.NodeHandler(), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	n.servers = []*http.Server{gwSrv, adminSrv, apiSrv}
	go n.serve(gwSrv, gwLn, false)
	go n.serve(adminSrv, adminLn, true)
	go n.serve(apiSrv, apiLn, false)

	if err = n.writeAddresses(); err != nil {
		return nil, err
	}
	bgCtx := n.bgCtx
	for _, job := range []func(context.Context){n.consent.EndWaitingTasks, n.owner.Forward} {
		n.bg.Add(1)
		go func() {
			defer n.bg.Done()
			job(bgCtx)
		}()
	}
	n.every(bgCtx, 2*time.Second, n.sweep)
	n.every(bgCtx, 2*time.Second, n.watchPolicy)
	n.every(bgCtx, n.opts.pruneEvery(), n.pruneTasks)
	n.every(bgCtx, 5*time.Minute, n.checkCodex)

	n.syncFunnel(pol)
	n.log.Info("gateway listening", "addr", n.addrs.Gateway, "publicUrl", publicURL)
	n.log.Info("admin UI listening", "addr", "https://"+n.addrs.Admin)
	n.log.Info("node API listening", "addr", "http://"+n.addrs.API)
	// Never the link: it carries a live sign-in code (A4). `node serve` shows one on a terminal.
	n.log.Info("admin UI: sign in with a link from `aether admin link`", "url", "https://"+n.addrs.Admin)
	return n, nil
}

func (n *Node) path(name string) string { return filepath.Join(n.dataDir, name) }

// DataDir is the folder everything is kept in.
func (n *Node) DataDir() string { return n.dataDir }

// PolicyPath is the policy file the node serves (Options.PolicyPath, else the data dir's).
func (n *Node) PolicyPath() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.polPath
}

// Addresses are the bound listeners.
func (n *Node) Addresses() Addresses {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.addrs
}

// SignInURL mints a one-time admin sign-in link (admin.Server.SignInLink): it works once,
// within five minutes. Show it to the owner; never log it.
func (n *Node) SignInURL() string { return n.admin.SignInLink() }

// Admin is the admin UI server (the desktop serves its DesktopHandler in the window).
func (n *Node) Admin() *admin.Server { return n.admin }

// Owner is the owner's service: the desktop's tray and notifications act through it.
func (n *Node) Owner() *owner.Service { return n.owner }

func (o Options) listenLoopback(port int, what string) (net.Listener, error) {
	ln, err := o.listen(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("%s: listen on 127.0.0.1:%d: %w", what, port, err)
	}
	return ln, nil
}

func (n *Node) serve(srv *http.Server, ln net.Listener, useTLS bool) {
	var err error
	if useTLS {
		err = srv.ServeTLS(ln, "", "")
	} else {
		err = srv.Serve(ln)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		n.log.Error("listener stopped", "addr", ln.Addr().String(), "err", err)
	}
}

func (n *Node) writeAddresses() error {
	data, err := json.MarshalIndent(n.Addresses(), "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(n.path(fileAddresses), append(data, '\n'), 0o600)
}

// recover ends what a crash left running: turns get a failed receipt, tasks end FAILED.
func (n *Node) recover(ctx context.Context) error {
	const why = "the node stopped while the turn was running"
	turns, err := n.ledger.Recover(ctx)
	if err != nil {
		return fmt.Errorf("recover interrupted turns: %w", err)
	}
	tasks, err := n.db.FailInterrupted(ctx, why)
	if err != nil {
		return fmt.Errorf("recover interrupted tasks: %w", err)
	}
	if turns+tasks > 0 {
		n.log.Warn("ended work interrupted by the last stop", "turns", turns, "tasks", tasks)
	}
	ended, err := n.runner.RemoveLeftovers()
	if ended > 0 {
		n.log.Warn("ended what interrupted turns left running (docs/threats.md, W20)", "processes", ended)
	}
	if err != nil {
		n.log.Warn("could not remove the scratch folders of interrupted turns", "err", err)
	}
	return nil
}

// Stop shuts down gracefully: listeners stop accepting, in-flight requests
// finish (up to ctx), the receipt ledger drains, the database closes.
func (n *Node) Stop(ctx context.Context) error {
	if n.stop != nil {
		n.stop()
	}
	if n.admin != nil {
		n.admin.Close()
	}
	var errs []error
	// Turns first: a streaming request stays open until its turn ends.
	if gw := n.gw.Load(); gw != nil {
		gw.Pause() // no new turns while the running ones end
		if err := gw.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop running turns: %w", err))
		}
	}
	n.funnel.mu.Lock()
	if err := n.stopFunnel(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stop Tailscale Funnel: %w", err))
	}
	n.funnel.mu.Unlock()
	for _, s := range n.servers {
		if err := s.Shutdown(ctx); err != nil {
			errs = append(errs, err)
			s.Close()
		}
	}
	n.bg.Wait()
	n.runner.Wait()
	if n.ledger != nil {
		// Drain the last receipts (each commit has marked receipts.head).
		errs = append(errs, n.ledger.Close())
		n.ledger = nil
	}
	errs = append(errs, n.close())
	return errors.Join(errs...)
}

func (n *Node) close() error {
	n.stop() // a failed start's context too
	var errs []error
	for _, srv := range n.servers {
		srv.Close() // after Shutdown this is a no-op; after a failed start it stops serving
	}
	for _, ln := range n.lns {
		ln.Close()
	}
	if n.models != nil {
		n.models.Close()
	}
	if n.ledger != nil {
		errs = append(errs, n.ledger.Close())
	}
	if n.db != nil {
		errs = append(errs, n.db.Close())
	}
	if n.head != nil {
		errs = append(errs, n.head.Close()) // after the store: its last commits mark it
	}
	if n.lock != nil {
		n.lock.Close()
		os.Remove(n.path(fileAddresses))
	}
	return errors.Join(errs...)
}
