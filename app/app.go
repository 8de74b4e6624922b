// Package app is the desktop shell of Aether: a Wails v2 window over the same admin UI the
// browser gets, a tray icon with the pending requests, desktop notifications with Allow and
// Deny, consent links that bring the window forward, and the single-instance hand-off. It
// starts the same node as `aether node serve`. It is the only package that imports Wails,
// systray or godbus.
package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	goruntime "runtime"
	"sync"
	"syscall"
	"time"

	"github.com/aether/aether/backend/datadir"
	"github.com/aether/aether/backend/node"
	"github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/reach"
	"github.com/wailsapp/wails/v2"
	"github.com/wailsapp/wails/v2/pkg/logger"
	"github.com/wailsapp/wails/v2/pkg/menu"
	"github.com/wailsapp/wails/v2/pkg/menu/keys"
	"github.com/wailsapp/wails/v2/pkg/options"
	"github.com/wailsapp/wails/v2/pkg/options/assetserver"
	"github.com/wailsapp/wails/v2/pkg/options/linux"
	"github.com/wailsapp/wails/v2/pkg/runtime"
)

// uniqueID names the single-instance lock (Wails' SingleInstanceLock and the hand-off).
const uniqueID = "io.aether.desktop"

// Run is the desktop app (cli.DesktopFunc): args are the program's arguments (none, or a
// consent link), ui is frontend/dist. It returns the exit code.
func Run(args []string, ui fs.FS) int {
	if generatingBindings {
		// `wails build` runs the program once to list the bound methods: start nothing.
		err := wails.Run(&options.App{Title: "Aether", Bind: []any{&Shell{}}, AssetServer: &assetserver.Options{Assets: ui}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if handOff(args, log) {
		return 0
	}
	cfg, err := configFromEnv()
	if err != nil {
		return showFailure(log, err)
	}
	a := &App{cfg: cfg, log: log, ready: make(chan struct{})}
	a.shell = &Shell{ctx: a.context}
	return a.run(args, ui)
}

// App is the running desktop app.
type App struct {
	cfg   config
	log   *slog.Logger
	tray  tray
	login *loginItem // nil where there is no login item to offer
	shell *Shell

	// The node starts while GTK and WebKit start (it takes as long as they do); the window's
	// first request waits for it. node, notes and startErr are set before started closes.
	started  chan struct{}
	node     *node.Node // nil when it could not start
	startErr error
	notes    notifier
	stopped  chan struct{} // closed when the consent watcher ended
	unwatch  context.CancelFunc

	ready chan struct{} // closed once Wails' context is known
	ctx   context.Context

	mu       sync.Mutex
	domReady bool   // the UI is loaded: navigation can go straight to it
	nav      string // the page to show once the UI is loaded
	showSoon bool   // show the window once the UI is loaded
	quiet    bool   // …without taking the focus: only links asked for it (C17)
	quitOnce sync.Once
}

func (a *App) run(args []string, ui fs.FS) int {
	// What the window opens on: a consent link it was started with; the Brands page while
	// nothing is shared (see startNode); otherwise the status page, unless it starts in
	// the tray.
	show := !a.cfg.hidden
	code := userCodeFromArgs(args)
	if code != "" {
		a.nav, show = consentPage(code), true
	}
	if isFreedesktop() {
		if li, err := newLoginItem(); err == nil {
			a.login = &li
		} else {
			a.log.Warn("no Start at login item", "err", err)
		}
	}
	a.tray = newTray(trayActions{
		open:        func() { a.show("") },
		openRequest: a.showRequest,
		togglePause: a.togglePause,
		openBrowser: a.openBrowser,
		toggleLogin: a.toggleLogin,
		quit:        a.quit,
	}, a.log)
	a.started = make(chan struct{})
	go a.startNode(ui, code == "")
	hup := make(chan os.Signal, 1)
	// Wails itself turns SIGINT and SIGTERM into a clean quit; a hang-up (the session
	// ending under a terminal) does the same here.
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		if _, ok := <-hup; ok {
			a.log.Info("hang-up: quitting")
			a.quit()
		}
	}()

	err := wails.Run(a.windowOptions(show))
	signal.Stop(hup)
	close(hup)
	<-a.started
	if err != nil {
		a.log.Error("the window failed", "err", err)
	}
	if a.node == nil {
		return 1
	}
	a.unwatch()
	<-a.stopped
	a.notes.close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if serr := a.node.Stop(ctx); serr != nil {
		a.log.Error("stop", "err", serr)
		return 1
	}
	a.log.Info("Aether stopped")
	if err != nil {
		return 1
	}
	return 0
}

// startNode starts the same node as `aether node serve`, then what depends on it:
// notifications, the consent watcher, the tray's contents, and the Brands page while
// nothing is shared (the first run writes a starter policy with no brands) or the policy
// has errors.
func (a *App) startNode(ui fs.FS, brandsIfEmpty bool) {
	defer close(a.started)
	n, err := node.Start(context.Background(), node.Options{
		PolicyPath:    a.cfg.policyPath,
		DataDir:       a.cfg.dataDir,
		AdminPort:     a.cfg.adminPort,
		PactListen:    a.cfg.pactListen,
		CodexPath:     a.cfg.codex,
		CodexRegistry: a.cfg.registry,
		Reach:         reach.Config{ControlURL: a.cfg.controlURL},
		UI:            ui,
		Logger:        a.log,
		Desktop:       true,
		StarterPolicy: true,
		OnConsentLink: a.linkRequest,
	})
	if err != nil {
		if errors.Is(err, datadir.ErrLocked) {
			err = fmt.Errorf("%w: stop the other one (`aether node serve`?) first", err)
		}
		a.log.Error("Aether could not start", "err", err)
		a.startErr = err
		a.tray.update(trayState{failed: true})
		a.show("")
		return
	}
	a.node = n
	a.notes = newNotifier(notifyActions{decide: a.decide, denySite: a.denySite, open: a.showRequest, lost: a.quit}, a.log)
	watch, unwatch := context.WithCancel(context.Background())
	events := n.Owner().Events(watch)
	a.unwatch, a.stopped = unwatch, make(chan struct{})
	go func() {
		defer close(a.stopped)
		a.watchConsent(events)
	}()
	if st := n.Owner().DesktopState(); brandsIfEmpty && (st.Brands == 0 || st.PolicyError != nil) {
		a.show(pageBrands)
	}
}

// windowOptions is the window Wails opens: hidden at start unless show.
func (a *App) windowOptions(show bool) *options.App {
	return &options.App{
		Title:             windowTitle,
		Width:             1180,
		Height:            800,
		MinWidth:          760,
		MinHeight:         520,
		StartHidden:       !show,
		HideWindowOnClose: true, // closing hides; the gateway keeps serving
		BackgroundColour:  options.NewRGB(0xf5, 0xf6, 0xf8),
		AssetServer:       &assetserver.Options{Handler: http.HandlerFunc(a.serveWindow)},
		Menu:              a.menu(),
		OnStartup:         a.startup,
		OnDomReady:        a.domLoaded,
		OnShutdown:        a.shutdown,
		Bind:              []any{a.shell},
		SingleInstanceLock: &options.SingleInstanceLock{
			UniqueId:               uniqueID,
			OnSecondInstanceLaunch: a.secondLaunch,
		},
		// The UI is a few pages of text: accelerated compositing bought nothing but about
		// 100 MB in WebKit's web process (B5), and is a common cause of blank windows.
		Linux:              &linux.Options{Icon: appIcon, ProgramName: "aether", WebviewGpuPolicy: linux.WebviewGpuPolicyNever},
		Logger:             wailsLogger{a.log},
		LogLevel:           logger.WARNING,
		LogLevelProduction: logger.WARNING,
	}
}

// running returns the node once it started; nil when it could not.
func (a *App) running() *node.Node {
	<-a.started
	return a.node
}

// serveWindow is the window's asset server: the admin UI, always signed in.
func (a *App) serveWindow(w http.ResponseWriter, r *http.Request) {
	n := a.running()
	if n == nil {
		failurePage(a.startErr, "Quit (Ctrl+Q, or Quit in the tray menu)").ServeHTTP(w, r)
		return
	}
	n.Admin().DesktopHandler().ServeHTTP(w, r)
}

func isFreedesktop() bool {
	switch goruntime.GOOS {
	case "linux", "freebsd", "openbsd", "netbsd":
		return true
	}
	return false
}

// menu is the window's menu: the way to quit when there is no tray host.
func (a *App) menu() *menu.Menu {
	m := menu.NewMenu()
	sub := m.AddSubmenu("Aether")
	sub.AddText("Open in browser", nil, func(*menu.CallbackData) { a.openBrowser() })
	sub.AddSeparator()
	sub.AddText("Hide window", keys.CmdOrCtrl("w"), func(*menu.CallbackData) { a.withContext(runtime.WindowHide) })
	sub.AddText("Quit", keys.CmdOrCtrl("q"), func(*menu.CallbackData) { a.quit() })
	return m
}

// startup runs once the window exists (on a goroutine of Wails').
func (a *App) startup(ctx context.Context) {
	a.ctx = ctx
	close(a.ready)
	a.tray.start()
	go a.refresh()
	if a.cfg.hidden {
		go a.showUnlessTray()
	}
}

// showUnlessTray shows the window of an app started in the tray when no tray host shows
// up within a few seconds (at login the panel may start after the app): without a tray
// icon the window is the only way in.
func (a *App) showUnlessTray() {
	for range 10 {
		if a.tray.shown() {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	a.log.Info("no tray host: showing the window")
	a.show("")
}

// domLoaded runs whenever the UI finished loading: what was asked for before goes now.
func (a *App) domLoaded(ctx context.Context) {
	a.mu.Lock()
	a.domReady = true
	nav, show, quiet := a.nav, a.showSoon, a.quiet
	a.nav, a.showSoon, a.quiet = "", false, false
	a.mu.Unlock()
	if nav != "" {
		runtime.WindowExecJS(ctx, navigateJS(nav))
	}
	switch {
	case show && quiet:
		requestAttention(ctx, windowTitle)
	case show:
		runtime.WindowUnminimise(ctx)
		runtime.WindowShow(ctx)
	}
}

func (a *App) shutdown(context.Context) {
	a.tray.stop()
}

// context is Wails' context, or nil before the window exists.
func (a *App) context() context.Context {
	select {
	case <-a.ready:
		return a.ctx
	default:
		return nil
	}
}

// withContext runs do with Wails' context once the window exists.
func (a *App) withContext(do func(ctx context.Context)) {
	<-a.ready
	do(a.ctx)
}

// windowTitle is the main window's title, by which requestAttention finds it.
const windowTitle = "Aether"

// show brings the window forward, focused, on page if given: the owner asked for it (the
// tray, a notification, a launch). Until the UI has loaded it only remembers to: a window
// started hidden is hidden once more when the GTK loop starts, which would undo an earlier
// show.
func (a *App) show(page string) { a.bring(page, false) }

// bring shows page; quiet leaves the focus where it is and sets the window's urgency hint
// instead (C17). Either way the page's buttons take no click for a second (C16).
func (a *App) bring(page string, quiet bool) {
	go a.withContext(func(ctx context.Context) {
		a.mu.Lock()
		loaded := a.domReady
		if !loaded {
			if page != "" {
				a.nav = page
			}
			a.quiet = quiet && (!a.showSoon || a.quiet) // one focused show wins
			a.showSoon = true
		}
		a.mu.Unlock()
		if !loaded {
			return
		}
		if page != "" {
			runtime.WindowExecJS(ctx, navigateJS(page))
		}
		if quiet {
			requestAttention(ctx, windowTitle)
			return
		}
		runtime.WindowUnminimise(ctx)
		runtime.WindowShow(ctx)
	})
}

// showRequest shows the window on one consent request ("" : the Consent page) for the
// owner: a notification's body, the tray's menu.
func (a *App) showRequest(userCode string) {
	a.log.Info("showing the window on a consent request", "user_code", userCode)
	a.show(requestPage(userCode))
}

// linkRequest shows the window on a request a link named: a browser opening the consent link
// on the admin port (OnConsentLink, so it returns at once) or a second launch with one. Any
// web page can do that, and time it, so the window does not take the focus (C17).
func (a *App) linkRequest(userCode string) {
	a.log.Info("a link asks for a consent request: showing it without taking the focus", "user_code", userCode)
	a.bring(requestPage(userCode), true)
}

func requestPage(userCode string) string {
	if userCode == "" {
		return pageConsent
	}
	return consentPage(userCode)
}

// secondLaunch: another launch handed its arguments over (Wails' lock or handOff).
func (a *App) secondLaunch(d options.SecondInstanceData) {
	if code := userCodeFromArgs(d.Args); code != "" {
		a.linkRequest(code)
		return
	}
	a.show("")
}

func (a *App) quit() {
	a.quitOnce.Do(func() {
		a.log.Info("quitting")
		go a.withContext(runtime.Quit)
	})
}

func (a *App) togglePause() {
	n := a.running()
	if n == nil {
		return
	}
	if err := n.Owner().SetPaused(!n.Owner().DesktopState().Paused); err != nil {
		a.log.Warn("pause", "err", err)
	}
	a.refresh()
}

func (a *App) openBrowser() {
	n := a.running()
	if n == nil {
		return
	}
	if err := openSignedIn(n.SignInURL()); err != nil {
		a.log.Warn("open in browser", "err", err)
	}
}

func (a *App) toggleLogin() {
	if a.login != nil {
		on := !a.login.enabled()
		if err := a.login.set(on); err != nil {
			a.log.Warn("start at login", "err", err)
		} else {
			a.log.Info("start at login", "enabled", on, "file", a.login.path)
		}
	}
	a.refresh()
}

// refresh shows the current requests and states in the tray.
func (a *App) refresh() {
	n := a.running()
	if n == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pending, err := n.Owner().Pending(ctx)
	if err != nil {
		a.log.Warn("list pending requests", "err", err)
	}
	st := n.Owner().DesktopState()
	ts := trayState{pending: pending, paused: st.Paused, running: st.Running, reach: reachLine(n.Owner().Reachability())}
	if a.login != nil {
		ts.autostartOK, ts.autostart = true, a.login.enabled()
	}
	a.tray.update(ts)
}

// watchConsent raises a notification for every new request (an event, never a poll) and
// keeps the tray current, until the subscription ends.
func (a *App) watchConsent(events <-chan owner.Event) {
	// Requests still waiting from before a restart are news too.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if pending, err := a.node.Owner().Pending(ctx); err == nil {
		for _, r := range pending {
			a.notes.request(r)
		}
	}
	cancel()
	var login string
	for ev := range events {
		if r, ok := ev.Data.(owner.Reachability); ok {
			login = a.reachChanged(r, login)
			continue
		}
		ce, ok := ev.Data.(owner.ConsentEvent)
		if !ok {
			continue
		}
		switch ce.Kind {
		case owner.ConsentAdded:
			if ce.Request != nil {
				a.notes.request(*ce.Request)
			}
		case owner.ConsentDecided, owner.ConsentExpired:
			if ce.Request != nil {
				a.notes.withdraw(ce.Request.ID)
			}
		default:
			continue
		}
		a.refresh()
	}
}

// reachChanged updates the tray's reachability line and opens a new Tailscale login link in the
// browser once (opened is the last one opened); it returns the link opened last.
func (a *App) reachChanged(r owner.Reachability, opened string) string {
	a.refresh()
	if r.LoginURL == "" || r.LoginURL == opened {
		return opened
	}
	// Through a page only this user can read: the link is not for other local users' eyes (ps).
	if err := openSignedIn(r.LoginURL); err != nil {
		a.log.Warn("could not open the Tailscale login link: it is on the Status page", "err", err)
	}
	return r.LoginURL
}

// decide is a notification's Allow or Deny: the same decision as the Consent page's
// buttons (request id and its user code), with the default duration. Two decisions on one
// request cannot both win: the decision is a single conditional update.
func (a *App) decide(r owner.ConsentRequest, allow bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := owner.DecisionRequest{UserCode: r.UserCode, Decision: owner.DecisionDeny}
	if allow {
		req.Decision, req.Duration = owner.DecisionAllow, owner.Duration30Days // the default
	}
	d, err := a.node.Owner().Decide(ctx, r.ID, req)
	who, brand := "The agent that "+r.Agent.Claim, clean(r.Brand.Name)
	switch {
	case err == nil && d.Status == owner.OutcomeAllowed:
		a.log.Info("allowed from a notification", "request", r.ID, "grant", d.Grant.ID)
		until := "until you revoke it"
		if d.Grant.ExpiresAt != nil {
			until = "until " + d.Grant.ExpiresAt.Local().Format("2 Jan 2006")
		}
		a.notes.tell("Allowed", who+" can use "+brand+" "+until+". Revoke it on the Sharing page.")
	case err == nil:
		a.log.Info("denied from a notification", "request", r.ID)
		a.notes.tell("Denied", who+" cannot use "+brand+".")
	case errors.Is(err, owner.ErrAlreadyDecided), errors.Is(err, owner.ErrExpired), errors.Is(err, owner.ErrNotFound):
		a.log.Info("notification decision refused", "request", r.ID, "err", err)
		a.notes.tell("Not changed", fmt.Sprint(err))
	default:
		a.log.Error("notification decision failed", "request", r.ID, "err", err)
		a.showRequest(r.UserCode)
	}
}

// denySite is a burst notification's Deny all: every pending request of that issuer, as the
// Consent page's "Deny all from this issuer" does.
func (a *App) denySite(site, siteName string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := a.node.Owner().DenyIssuer(ctx, owner.DenyIssuerRequest{Site: site})
	if err != nil {
		a.log.Error("deny all from a notification failed", "site", site, "err", err)
		a.showRequest("")
		return
	}
	a.log.Info("denied all from a notification", "site", site, "requests", res.Denied)
	a.notes.tell("Denied", fmt.Sprintf("%d requests from %s were denied.", res.Denied, siteName))
}

// showFailure shows why the app could not start, in a window (a desktop app started from
// a menu has nowhere else to say it), and returns the exit code.
func showFailure(log *slog.Logger, cause error) int {
	log.Error("Aether could not start", "err", cause)
	err := wails.Run(&options.App{
		Title:       "Aether",
		Width:       640,
		Height:      300,
		AssetServer: &assetserver.Options{Handler: failurePage(cause, "Close this window")},
		Linux:       &linux.Options{Icon: appIcon, ProgramName: "aether"},
		Logger:      wailsLogger{log},
	})
	if err != nil {
		log.Error("no window either", "err", err)
	}
	return 1
}
