//go:build linux || freebsd || openbsd || netbsd

package app

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aether/aether/backend/owner"
	"github.com/godbus/dbus/v5"
)

// The freedesktop notification service (Desktop Notifications Specification 1.2).
const (
	notifyName  = "org.freedesktop.Notifications"
	notifyPath  = dbus.ObjectPath("/org/freedesktop/Notifications")
	notifyIface = "org.freedesktop.Notifications"
)

// Action keys. "default" is what servers send for a click on the notification's body; a
// dismissal never sends an action at all (some toolkits report it as the default action).
const (
	actionAllow   = "allow"
	actionDeny    = "deny"
	actionDefault = "default"
)

// dbusNotifier talks to org.freedesktop.Notifications on its own private connection, so
// that it sees only the signals it asked for and can check each ActionInvoked's sender:
// any process on the session bus can emit that signal, only the name's owner is the
// server the owner clicked in.
type dbusNotifier struct {
	conn  *dbus.Conn
	log   *slog.Logger
	act   notifyActions
	image *notificationImage

	mu        sync.Mutex
	byID      map[uint32]owner.ConsentRequest // shown notification → its request
	byRequest map[string]uint32
	closing   bool
	warned    atomic.Bool // "no notification server" was logged
}

func newNotifier(act notifyActions, log *slog.Logger) notifier {
	conn, err := dbus.ConnectSessionBus()
	if err != nil {
		log.Info("no D-Bus session bus: no desktop notifications", "err", err)
		return noNotifier{}
	}
	for _, member := range []string{"ActionInvoked", "NotificationClosed"} {
		if err := conn.AddMatchSignal(dbus.WithMatchObjectPath(notifyPath), dbus.WithMatchInterface(notifyIface), dbus.WithMatchMember(member)); err != nil {
			conn.Close()
			log.Warn("cannot listen for notification actions: no desktop notifications", "err", err)
			return noNotifier{}
		}
	}
	n := &dbusNotifier{conn: conn, log: log, act: act, byID: map[uint32]owner.ConsentRequest{}, byRequest: map[string]uint32{}}
	if img, err := newNotificationImage(smallIcon); err == nil {
		n.image = &img
	}
	signals := make(chan *dbus.Signal, 16)
	conn.Signal(signals)
	go n.listen(signals)
	return n
}

func (n *dbusNotifier) call(ctx context.Context, method string, args ...any) *dbus.Call {
	return n.conn.Object(notifyName, notifyPath).CallWithContext(ctx, notifyIface+"."+method, 0, args...)
}

func (n *dbusNotifier) request(r owner.ConsentRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var caps []string
	if err := n.call(ctx, "GetCapabilities").Store(&caps); err != nil {
		n.noServer(err)
		return
	}
	markup := slices.Contains(caps, "body-markup")
	summary, body := notificationText(r, markup)
	var actions []string
	if slices.Contains(caps, "actions") {
		actions = []string{actionAllow, "Allow", actionDeny, "Deny", actionDefault, "Open in Aether"}
	} else {
		body += "\nOpen Aether to allow or deny."
	}
	hints := map[string]dbus.Variant{
		"urgency":       dbus.MakeVariant(byte(1)),
		"desktop-entry": dbus.MakeVariant("aether"),
		"category":      dbus.MakeVariant("im.received"),
	}
	if n.image != nil {
		hints["image-data"] = dbus.MakeVariant(*n.image)
	}
	// Shown until the request expires (then it could not be allowed anyway).
	timeout := time.Until(r.ExpiresAt)
	timeout = min(max(timeout, 5*time.Second), time.Hour)

	// Held across the call so that an action arriving at once finds its request.
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closing {
		return
	}
	var id uint32
	err := n.call(ctx, "Notify", "Aether", uint32(0), "", summary, body, actions, hints, int32(timeout/time.Millisecond)).Store(&id)
	if err != nil {
		n.noServer(err)
		return
	}
	n.byID[id] = r
	n.byRequest[r.ID] = id
	n.log.Info("notified a consent request", "request", r.ID, "notification", id, "actions", len(actions) > 0)
}

// noServer logs the first failure to reach a notification server; later ones are expected.
func (n *dbusNotifier) noServer(err error) {
	if !n.warned.Swap(true) {
		n.log.Info("no desktop notification server: requests show in the tray and on the Consent page", "err", err)
	}
}

func (n *dbusNotifier) withdraw(requestID string) {
	n.mu.Lock()
	id, ok := n.byRequest[requestID]
	if ok {
		delete(n.byRequest, requestID)
		delete(n.byID, id)
	}
	n.mu.Unlock()
	if ok {
		n.closeNotification(id)
	}
}

func (n *dbusNotifier) closeNotification(id uint32) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.call(ctx, "CloseNotification", id).Err; err != nil {
		n.log.Debug("close notification", "id", id, "err", err)
	}
}

func (n *dbusNotifier) tell(summary, body string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hints := map[string]dbus.Variant{"urgency": dbus.MakeVariant(byte(0)), "transient": dbus.MakeVariant(true), "desktop-entry": dbus.MakeVariant("aether")}
	if err := n.call(ctx, "Notify", "Aether", uint32(0), "", summary, escapeMarkup(body), []string{}, hints, int32(6000)).Err; err != nil {
		n.noServer(err)
	}
}

func (n *dbusNotifier) close() {
	n.mu.Lock()
	n.closing = true
	n.mu.Unlock()
	n.conn.Close()
}

// listen handles the server's signals until the connection closes.
func (n *dbusNotifier) listen(signals <-chan *dbus.Signal) {
	for sig := range signals {
		if sig.Path != notifyPath {
			continue
		}
		switch sig.Name {
		case notifyIface + ".ActionInvoked":
			var id uint32
			var key string
			if dbus.Store(sig.Body, &id, &key) != nil {
				continue
			}
			if !n.fromServer(sig.Sender) {
				n.log.Warn("ignored a notification action from a process that is not the notification server", "sender", sig.Sender, "action", key)
				continue
			}
			n.invoked(id, key)
		case notifyIface + ".NotificationClosed":
			var id, reason uint32
			if dbus.Store(sig.Body, &id, &reason) != nil || !n.fromServer(sig.Sender) {
				continue
			}
			n.forget(id)
		}
	}
	n.mu.Lock()
	closing := n.closing
	n.mu.Unlock()
	if !closing && n.act.lost != nil {
		n.log.Info("the session bus went away")
		n.act.lost()
	}
}

// fromServer tells whether sender (a unique name, set by the bus daemon, so it cannot be
// forged) currently owns org.freedesktop.Notifications.
func (n *dbusNotifier) fromServer(sender string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var owner string
	if err := n.conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.GetNameOwner", 0, notifyName).Store(&owner); err != nil {
		return false
	}
	return sender != "" && sender == owner
}

func (n *dbusNotifier) forget(id uint32) (owner.ConsentRequest, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r, ok := n.byID[id]
	if ok {
		delete(n.byID, id)
		delete(n.byRequest, r.ID)
	}
	return r, ok
}

// invoked acts on the server's action: one decision per notification at most, and only
// for the Allow and Deny buttons. Anything else (a click on the body) opens the window on
// the request and leaves the notification's buttons working.
func (n *dbusNotifier) invoked(id uint32, key string) {
	if key == actionAllow || key == actionDeny {
		if r, ok := n.forget(id); ok {
			// Servers differ in whether an action closes the notification (dunst's
			// context menu does not); its buttons are spent either way.
			go n.closeNotification(id)
			go n.act.decide(r, key == actionAllow)
		}
		return
	}
	n.mu.Lock()
	r, ok := n.byID[id]
	n.mu.Unlock()
	if ok {
		go n.act.open(r.UserCode)
	}
}
