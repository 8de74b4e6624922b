// Package node is the composition root: it opens the data dir, builds the services, the
// owner's service over them and the gateway from flags and policy.json, binds the listeners
// with their handlers, and starts and stops all of it. The CLI and the desktop app are thin
// shells over it; the offline CLI verbs open the data dir through backend/datadir.
package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aether/aether/backend/admin"
	"github.com/aether/aether/backend/codex"
	"github.com/aether/aether/backend/codexget"
	"github.com/aether/aether/backend/codexsetup"
	"github.com/aether/aether/backend/consent"
	"github.com/aether/aether/backend/datadir"
	"github.com/aether/aether/backend/devices"
	"github.com/aether/aether/backend/gateway"
	"github.com/aether/aether/backend/identity"
	"github.com/aether/aether/backend/issuer"
	"github.com/aether/aether/backend/keys"
	"github.com/aether/aether/backend/model"
	"github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/policy"
	"github.com/aether/aether/backend/reach"
	"github.com/aether/aether/backend/receipts"
	"github.com/aether/aether/backend/store"
	"github.com/aether/aether/backend/turn"
)

// turnTag, set in the node's environment, is passed to every turn's Codex: a value that is no
// secret by which a process of the node's turns can be found from outside (the kill tests do).
// The key is no such mark any more: Codex gets a one-time token in its place.
const turnTag = "AETHER_TURN_TAG"

// Options are the flags of `aether node serve`.
type Options struct {
	PolicyPath string // policy.json; "" = the desktop default (last used, else <data>/policy.json)
	DataDir    string // "" = datadir.Default()
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
	Runner turn.Runner
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
	// (`node serve --funnel`). Reach configures it: its device name, and tests' own control
	// server; the node sets where it keeps its state, what it serves and whom it tells.
	Funnel bool
	Reach  reach.Config
	// PushClient sends the paired phones' pushes; nil is a client with a 30 s timeout. Tests
	// give one that trusts their own push service.
	PushClient *http.Client
	// Listen opens the node's listeners; nil is net.Listen. Tests wrap it to see what
	// reaches the node.
	Listen func(network, address string) (net.Listener, error)
	// IssuerNet, set by tests only, changes how identity checks reach issuers (a resolver, a
	// dialer and root CAs that put an issuer with a public name and address on loopback), so
	// a public gateway is tested with public issuers (docs/threats.md N4), and roots of their
	// own CA.
	IssuerNet func(*identity.Config)
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
	dir     *datadir.Dir
	ring    *keys.Ring   // the signing key and the keys it replaced
	history keys.History // the ring for verifiers: each retired key bounded by its rotation (T13)
	key     *keys.Key    // ring.Current
	cert    tls.Certificate
	db      *store.DB
	token   string
	policy  *policy.File // policy.json: its one owner
	consent *consent.Service
	ledger  *receipts.Ledger
	head    *receipts.HeadFile // receipts.head
	runner  *codex.Runner
	setup   *codexsetup.Setup // Codex's health, Get Codex and the model settings (the Status page)
	runs    turn.Runner       // Codex, or the stand-in the options give
	turns   *turn.Service
	owner   *owner.Service
	admin   *admin.Server
	devices *devices.Store // the owner's paired phones (devices.json)
	phones  http.Handler   // the owner's door on the tailnet: admin.Server.TailnetHandler
	// gw is nil until a policy first loads. Its routes are the served policy, which the gateway
	// passes to consent with every check.
	gw atomic.Pointer[gateway.Gateway]
	// ids checks identities for the served publicUrl and audience; funnel publishes the gateway.
	ids    identity.Current
	funnel *reach.Switch
	// issuer is the owner's agents' identity issuer, at <publicUrl>/id (docs/assistants.md).
	issuer *issuer.Issuer

	mu      sync.Mutex        // addrs
	addrs   datadir.Addresses // node.json
	servers []*http.Server
	lns     []net.Listener
	bgCtx   context.Context // ends when the node stops
	stop    context.CancelFunc
	bg      sync.WaitGroup
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
	if err = n.openDataDir(); err != nil {
		return nil, err
	}
	if err = n.openPolicy(); err != nil {
		return nil, err
	}
	if perr := n.policy.Current().Err; perr != nil && !o.Desktop {
		return nil, perr
	}
	n.newRunner()
	if err = n.setup.StartModels(n.db); err != nil {
		return nil, err
	}
	// Listeners first: the consent URL and the node API address are only known once bound.
	if err = n.bind(); err != nil {
		return nil, err
	}
	if err = n.newServices(ctx); err != nil {
		return nil, err
	}
	if s := n.policy.Current(); s.Policy != nil {
		if err = n.startGateway(s); err != nil && !o.Desktop {
			return nil, err
		}
	}
	n.policy.Subscribe(policy.Subscriber{Serve: n.servePolicy, Changed: func(s policy.Snapshot) { n.syncFunnel(s.Policy) }})
	n.serveAll()
	if err = n.writeAddresses(); err != nil {
		return nil, err
	}
	n.startBackground()
	n.syncFunnel(n.policy.Current().Policy)
	n.log.Info("gateway listening", "addr", n.addrs.Gateway, "publicUrl", n.addrs.PublicURL)
	n.log.Info("admin UI listening", "addr", "https://"+n.addrs.Admin)
	n.log.Info("node API listening", "addr", "http://"+n.addrs.API)
	// Never the link: it carries a live sign-in code (A4). `node serve` shows one on a terminal.
	n.log.Info("admin UI: sign in with a link from `aether admin link`", "url", "https://"+n.addrs.Admin)
	return n, nil
}

// openDataDir takes the data dir's lock and opens what is kept there: the key ring, the admin
// token, the admin listener's certificate, pact.sqlite.
func (n *Node) openDataDir() (err error) {
	if n.dir, err = datadir.Open(n.opts.DataDir); err != nil {
		return err
	}
	if n.ring, err = keys.LoadRing(n.dir.Path); err != nil {
		return err
	}
	n.key = n.ring.Current
	// The JWKS carries each retired key's rotation statement, so they must check out (T13).
	if n.history, err = n.ring.VerifyRotations(n.dir.Path); err != nil {
		return fmt.Errorf("key rotations in %s: %w", n.dir.Path, err)
	}
	if n.token, err = admin.LoadOrCreateToken(n.path(datadir.TokenFile)); err != nil {
		return err
	}
	if n.issuer, err = issuer.Open(n.path(datadir.IdentityKeyFile), n.path(datadir.AgentsFile), time.Now); err != nil {
		return err
	}
	if n.cert, err = keys.LoadOrCreateTLS(n.path(datadir.TLSCertFile), n.path(datadir.TLSKeyFile), time.Now()); err != nil {
		return err
	}
	if n.devices, err = devices.Open(n.path(datadir.DevicesFile), nil); err != nil {
		return err
	}
	n.db, err = store.Open(n.path(datadir.DBFile))
	return err
}

// newRunner builds Codex's runner and its setup (which Codex, which model), or takes the
// stand-in the options give.
func (n *Node) newRunner() {
	o := n.opts
	n.runner = &codex.Runner{Path: o.CodexPath, Home: o.CodexHome, StateDir: n.path(datadir.CodexDir),
		ExtraArgs: o.CodexArgs, Env: append([]string{"CODEX_API_KEY", turnTag}, o.CodexEnv...), TestMounts: o.CodexTestMounts, Logger: n.log}
	n.setup = codexsetup.New(codexsetup.Config{Runner: n.runner, Models: &model.Store{Dir: n.dir.Path},
		Getter: &codexget.Getter{Dir: n.path(datadir.CodexBinDir), Registry: o.CodexRegistry}, ProbeDir: n.path(datadir.CodexDir), Logger: n.log})
	n.runs = n.runner
	if o.Runner != nil {
		n.runs = o.Runner
	}
}

// bind opens the gateway, admin and node API listeners.
func (n *Node) bind() error {
	o := n.opts
	gwAddr := o.PactListen
	if gwAddr == "" {
		gwAddr = "127.0.0.1:8080"
	}
	// What is bound is in n.lns at once: a failed start closes it.
	for _, l := range []struct {
		what string
		port int
	}{{"admin", o.AdminPort}, {"node API", o.Port}} {
		ln, err := o.listen(net.JoinHostPort("127.0.0.1", strconv.Itoa(l.port)))
		if err != nil {
			return fmt.Errorf("%s: listen on 127.0.0.1:%d: %w", l.what, l.port, err)
		}
		n.lns = append(n.lns, ln)
	}
	gwLn, err := o.listen(gwAddr)
	if err != nil {
		return fmt.Errorf("gateway: listen on %s: %w (is another program using it? choose another with --pact-listen)", gwAddr, err)
	}
	n.lns = []net.Listener{gwLn, n.lns[0], n.lns[1]}
	n.addrs = datadir.Addresses{Gateway: gwLn.Addr().String(), Admin: n.lns[1].Addr().String(), API: n.lns[2].Addr().String(), PID: os.Getpid()}
	n.addrs.PublicURL = "http://" + n.addrs.Gateway
	if p := n.policy.Current().Policy; p != nil {
		n.addrs.PublicURL = p.Pact.PublicURL
	}
	return nil
}

func (n *Node) consentURL() string { return "https://" + n.addrs.Admin + "/pact/consent" }

// newServices builds consent, the receipt ledger and the owner's service, checks
// receipts.head and ends what the last stop left running.
func (n *Node) newServices(ctx context.Context) error {
	publicURL := n.addrs.PublicURL
	n.issuer.SetPublicURL(publicURL)
	n.consent = consent.New(n.db, n.key, consent.Config{
		PublicURL: publicURL, ConsentURL: n.consentURL(), Logger: n.log,
	})
	n.ledger = receipts.NewLedger(n.db, n.key, publicURL, time.Now)
	n.owner = owner.New(owner.Config{
		Consent: n.consent, Ledger: n.ledger, Keys: n.history, Node: ownerNode{n}, Policy: n.policy,
		Listen: n.addrs.Gateway, PublicURL: publicURL, AdminURL: "https://" + n.addrs.Admin, Setup: n.setup,
		TokensToday: n.setup.TokensToday, Issuer: n.issuer, Received: n.db,
	})
	n.turns = turn.New(turn.Config{Ledger: n.ledger, Runner: n.runs, Consent: n.consent,
		Served: func() *policy.Policy { return n.policy.Current().Policy }, OnReceipt: n.owner.ReceiptAdded,
		Models: n.setup.OpenPass, Logger: n.log})
	n.funnel = n.newFunnel()
	n.head = &receipts.HeadFile{Path: n.path(datadir.HeadFile)}
	if err := n.head.Check(ctx, n.ledger); err != nil {
		return err
	}
	// From here on, no receipt is handed out before receipts.head holds it (T14).
	n.ledger.KeepHead(n.head)
	if err := n.recover(ctx); err != nil {
		return err
	}
	return n.head.Save(ctx, n.ledger)
}

// serveAll serves the three listeners: the gateway, the admin UI, the node API.
func (n *Node) serveAll() {
	n.admin = admin.New(admin.Config{Token: n.token, TokenFile: n.path(datadir.TokenFile), Addr: n.addrs.Admin, UI: n.opts.UI, Log: n.log, OnConsentLink: n.opts.OnConsentLink,
		Devices: n.devices, TailnetPeer: tailnetPeer, TailnetHost: n.tailnetHost}, n.owner)
	n.phones = n.admin.TailnetHandler()
	// No ReadTimeout: net/http keeps reading after the body to notice a client that goes away,
	// and would end streaming turns with it. The gateway gives each body its own deadline
	// (docs/wire.md, "Limits").
	gwSrv := &http.Server{Handler: http.HandlerFunc(n.serveGateway), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10, IdleTimeout: 2 * time.Minute}
	// Browsers that do not trust the self-signed certificate yet fail handshakes: debug noise.
	quiet := slog.NewLogLogger(n.log.Handler(), slog.LevelDebug)
	adminSrv := &http.Server{Handler: n.admin.Handler(), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10, ErrorLog: quiet,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{n.cert}, MinVersion: tls.VersionTLS12}}
	apiSrv := &http.Server{Handler: n.admin.NodeHandler(), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	n.servers = []*http.Server{gwSrv, adminSrv, apiSrv}
	go n.serve(gwSrv, n.lns[0], false)
	go n.serve(adminSrv, n.lns[1], true)
	go n.serve(apiSrv, n.lns[2], false)
}

// startBackground starts the services' background jobs; they end with the node.
func (n *Node) startBackground() {
	bgCtx := n.bgCtx
	for _, job := range []func(context.Context){n.consent.EndWaitingTasks, n.owner.Forward, n.watchPolicy, n.pushRequests} {
		n.bg.Add(1)
		go func() {
			defer n.bg.Done()
			job(bgCtx)
		}()
	}
	n.every(bgCtx, 2*time.Second, n.sweep)
	n.every(bgCtx, n.opts.pruneEvery(), n.pruneTasks)
	n.every(bgCtx, 5*time.Minute, n.setup.CheckHealth)
}

// watchPolicy notices hand edits of policy.json (a cheap stat every 2 s).
func (n *Node) watchPolicy(ctx context.Context) { n.policy.Watch(ctx, 2*time.Second) }

func (n *Node) path(name string) string { return n.dir.File(name) }

// DataDir is the folder everything is kept in.
func (n *Node) DataDir() string { return n.dir.Path }

// PolicyPath is the policy file the node serves (Options.PolicyPath, else the data dir's).
func (n *Node) PolicyPath() string { return n.policy.Path() }

// Addresses are the bound listeners.
func (n *Node) Addresses() datadir.Addresses {
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

func (n *Node) writeAddresses() error { return n.dir.WriteAddresses(n.Addresses()) }

// recover ends what a crash left running: turns get a failed receipt, tasks end FAILED.
func (n *Node) recover(ctx context.Context) error {
	turns, err := n.ledger.Recover(ctx)
	if err != nil {
		return fmt.Errorf("recover interrupted turns: %w", err)
	}
	tasks, err := n.db.FailInterrupted(ctx, receipts.ReasonNodeStopped)
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
	n.stop()
	n.admin.Close()
	var errs []error
	// Turns first: a streaming request stays open until its turn ends.
	if gw := n.gw.Load(); gw != nil {
		gw.Pause() // no new turns while the running ones end
		if err := gw.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop running turns: %w", err))
		}
	}
	if err := n.funnel.Stop(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stop Tailscale Funnel: %w", err))
	}
	for _, s := range n.servers {
		if err := s.Shutdown(ctx); err != nil {
			errs = append(errs, err)
			s.Close()
		}
	}
	n.bg.Wait()
	n.runner.Wait()
	if n.ledger != nil {
		// Drain the last receipts (each append has marked receipts.head).
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
	if n.setup != nil {
		n.setup.Close() // a download under way, and the model gateway once no turn runs
	}
	if n.ledger != nil {
		errs = append(errs, n.ledger.Close())
	}
	if n.db != nil {
		errs = append(errs, n.db.Close())
	}
	if n.head != nil {
		errs = append(errs, n.head.Close()) // after the ledger: its last appends mark it
	}
	if n.dir != nil {
		n.dir.Close()
	}
	return errors.Join(errs...)
}
