//go:build !darwin

package app

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"fyne.io/systray"
	"github.com/godbus/dbus/v5"

	"github.com/aether/aether/backend/owner"
)

// sniTray is a StatusNotifierItem with a com.canonical.dbusmenu menu (fyne.io/systray). It
// runs beside the GTK loop: RunWithExternalLoop before wails.Run, start in OnStartup, end in
// OnShutdown. Without a StatusNotifierWatcher systray logs and registers once one appears.
type sniTray struct {
	act   trayActions
	icons trayIcons
	log   *slog.Logger

	startFn, endFn func()

	mu      sync.Mutex
	started bool
	built   bool // the menu exists (systray's onReady ran)
	state   trayState
	badge   bool
	items   sniItems
	codes   [maxTrayRequests]string // user code behind each request item
}

type sniItems struct {
	open, reach, header, more, pause, browser, login, quit *systray.MenuItem
	requests                                               [maxTrayRequests]*systray.MenuItem
}

func newTray(act trayActions, log *slog.Logger) tray {
	// systray's end() panics when there was no session bus; only use it when there is one.
	if _, err := dbus.SessionBus(); err != nil {
		log.Info("no D-Bus session bus: no tray icon", "err", err)
		return noTray{}
	}
	t := &sniTray{act: act, icons: newTrayIcons(), log: log}
	// An icon set inside onReady can be lost: set icon, title and tooltip before start.
	systray.SetIcon(t.icons.plain)
	systray.SetTitle("Aether")
	systray.SetTooltip("Aether")
	systray.SetOnTapped(act.open)
	t.startFn, t.endFn = systray.RunWithExternalLoop(t.build, nil)
	return t
}

func (t *sniTray) start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.started {
		t.started = true
		t.startFn()
	}
}

func (t *sniTray) stop() {
	t.mu.Lock()
	started := t.started
	t.started = false
	t.mu.Unlock()
	if started {
		t.endFn()
	}
}

func (t *sniTray) shown() bool {
	conn, err := dbus.SessionBus()
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var has bool
	err = conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.NameHasOwner", 0, "org.kde.StatusNotifierWatcher").Store(&has)
	return err == nil && has
}

// build makes the menu (systray calls it once, on its own goroutine, after start).
func (t *sniTray) build() {
	it := sniItems{}
	it.open = systray.AddMenuItem("Open", "Show the Aether window")
	it.reach = systray.AddMenuItem(reachLine(owner.Reachability{}), "Whether agents on the internet reach this node")
	it.reach.Disable()
	systray.AddSeparator()
	it.header = systray.AddMenuItem(pendingHeader(0), "Requests from agents waiting for your decision")
	it.header.Disable()
	for i := range it.requests {
		it.requests[i] = systray.AddMenuItem("", "Open this request in the window")
		it.requests[i].Hide()
	}
	it.more = systray.AddMenuItem("More requests…", "Open the Consent page")
	it.more.Hide()
	systray.AddSeparator()
	it.pause = systray.AddMenuItem("Pause gateway", "Stop answering agents until you resume")
	it.browser = systray.AddMenuItem("Open in browser", "Open the admin pages, signed in, in your browser")
	it.login = systray.AddMenuItemCheckbox("Start at login", "Start Aether in the tray when you log in", false)
	systray.AddSeparator()
	it.quit = systray.AddMenuItem("Quit", "Stop the gateway and quit Aether")

	t.mu.Lock()
	t.items = it
	t.built = true
	t.apply()
	t.mu.Unlock()

	go t.forward(it.open, t.act.open)
	go t.forward(it.more, func() { t.act.openRequest("") })
	go t.forward(it.pause, t.act.togglePause)
	go t.forward(it.browser, t.act.openBrowser)
	go t.forward(it.login, t.act.toggleLogin)
	go t.forward(it.quit, t.act.quit)
	for i, item := range it.requests {
		go t.forward(item, func() {
			t.mu.Lock()
			code := t.codes[i]
			t.mu.Unlock()
			if code != "" {
				t.act.openRequest(code)
			}
		})
	}
}

func (t *sniTray) forward(item *systray.MenuItem, do func()) {
	for range item.ClickedCh {
		do()
	}
}

func (t *sniTray) update(st trayState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.state = st
	if t.built {
		t.apply()
	}
}

// apply shows t.state; t.mu is held.
func (t *sniTray) apply() {
	st, it := t.state, t.items
	if badge := len(st.pending) > 0; badge != t.badge {
		t.badge = badge
		if badge {
			systray.SetIcon(t.icons.badge)
		} else {
			systray.SetIcon(t.icons.plain)
		}
	}
	systray.SetTooltip(trayTooltip(st))
	it.header.SetTitle(pendingHeader(len(st.pending)))
	if st.reach != "" {
		it.reach.SetTitle(st.reach)
	}
	for i, item := range it.requests {
		if i < len(st.pending) {
			t.codes[i] = st.pending[i].UserCode
			item.SetTitle(requestLabel(st.pending[i]))
			item.Show()
		} else {
			t.codes[i] = ""
			item.Hide()
		}
	}
	if len(st.pending) > maxTrayRequests {
		it.more.Show()
	} else {
		it.more.Hide()
	}
	if st.paused {
		it.pause.SetTitle("Resume gateway")
	} else {
		it.pause.SetTitle("Pause gateway")
	}
	if st.running {
		it.pause.Enable()
	} else {
		it.pause.Disable()
	}
	if st.autostartOK {
		it.login.Show()
	} else {
		it.login.Hide()
	}
	if st.autostart {
		it.login.Check()
	} else {
		it.login.Uncheck()
	}
}
