package app

import (
	"fmt"

	"github.com/aether/aether/backend/owner"
)

// tray is the status icon and its menu. Linux uses a StatusNotifierItem (fyne.io/systray);
// macOS has the Dock instead (Wails v2 and the systray libraries clash there), so its tray
// does nothing. A tray never fails the app: with no tray host the window and the
// notifications still work.
type tray interface {
	// start shows the icon; call it once the GTK loop runs (OnStartup).
	start()
	// stop removes the icon (OnShutdown).
	stop()
	// update shows the pending requests and the gateway and login-item states.
	update(trayState)
	// shown tells whether a tray host shows the icon now.
	shown() bool
}

// trayState is everything the tray shows.
type trayState struct {
	pending   []owner.ConsentRequest // oldest first
	paused    bool
	running   bool // false: the gateway is stopped (policy errors), Pause makes no sense
	failed    bool // the node could not start (the window says why)
	autostart bool
	// autostartOK is false where there is no login item to offer.
	autostartOK bool
	reach       string // reachLine: whether agents on the internet reach the gateway
}

// reachLine is the tray's reachability line (docs/deploy.md).
func reachLine(r owner.Reachability) string {
	switch {
	case r.Mode == owner.ReachFunnel && r.State == owner.ReachStatePublished && r.Probe == owner.ProbeUnreachable:
		return "Published, but not reachable from the internet"
	case r.Mode == owner.ReachFunnel && r.State == owner.ReachStatePublished && r.InUse,
		r.Mode == owner.ReachProxy && r.URL != "":
		return "Reachable at " + r.URL
	case r.Mode == owner.ReachProxy:
		return "Reachable through your own proxy"
	case r.Mode == owner.ReachFunnel && r.State == owner.ReachStatePublished:
		return "Published at " + r.URL + " (not in use yet)"
	case r.Mode == owner.ReachFunnel && r.State == "logging_in":
		return "Not reachable from the internet: sign in to Tailscale"
	}
	return "Not reachable from the internet"
}

// trayActions are what the tray's items do.
type trayActions struct {
	open        func()                // show the window
	openRequest func(userCode string) // show the window on one consent request
	togglePause func()
	openBrowser func() // the admin UI, signed in, in the default browser
	toggleLogin func()
	quit        func()
}

// maxTrayRequests is how many pending requests the menu lists; the rest are one
// "more" item that opens the Consent page.
const maxTrayRequests = 5

func trayTooltip(st trayState) string {
	switch n := len(st.pending); {
	case st.failed:
		return "Aether could not start: open the window to see why"
	case !st.running:
		return "Aether: the gateway is stopped (policy.json has errors)"
	case st.paused && n == 0:
		return "Aether: gateway paused"
	case n == 0:
		return "Aether: no requests waiting"
	case n == 1:
		return "Aether: 1 request waiting for you"
	default:
		return fmt.Sprintf("Aether: %d requests waiting for you", n)
	}
}

// requestLabel is one pending request in the menu: who (the same claim the notification and
// the pages show, its site never cut), for which brand, and the code the agent shows its user.
func requestLabel(r owner.ConsentRequest) string {
	return fmt.Sprintf("Agent %s → %s (%s)", r.Agent.Claim, shorten(clean(r.Brand.Name), 32), r.UserCode)
}

func pendingHeader(n int) string {
	switch n {
	case 0:
		return "No requests waiting"
	case 1:
		return "1 request waiting:"
	default:
		return fmt.Sprintf("%d requests waiting:", n)
	}
}

// noTray is the tray where there is none (no session bus, or macOS's Dock).
type noTray struct{}

func (noTray) start()           {}
func (noTray) stop()            {}
func (noTray) update(trayState) {}
func (noTray) shown() bool      { return false }
