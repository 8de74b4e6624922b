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
	actionDenyAll = "deny-all" // a burst's: every pending request of its issuer
	actionDefault = "default"
)

// dbusNotifier talks to org.freedesktop.Notifications on its own private connection, so
// that it sees only the signals it asked for and can check each ActionInvoked's sender:
// any process on the session bus can emit that signal, only the name's owner is the
// server the owner clicked in.
//
// A flood cannot bury the owner in notifications (C18): the requests of one issuer (its
// registrable domain, owner.Agent.Site) share one notification, its burst, which says "and
// 12 more from evil.example" and offers Deny all; at most maxBursts issuers have their own,
// the rest share one more. A burst's notification is updated in place (replaces_id), at
// most once per burstUpdate; it ends when it is closed or decided.
type dbusNotifier struct {
	conn  *dbus.Conn
	log   *slog.Logger
	act   notifyActions
	image *notificationImage

	mu       sync.Mutex
	bursts   map[string]*burst // by site; overflowKey for the rest
	byID     map[uint32]*burst // by the notification showing it
	burstOf  map[string]string // request id → its burst's key
	flushing bool              // a flush of the changed bursts is scheduled
	shownAt  time.Time         // the last notification shown or changed
	closing  bool
	warned   atomic.Bool // "no notification server" was logged
}

// maxBursts is how many issuers get a notification of their own; burstUpdate how often a
// shown burst's notification may change.
const (
	maxBursts   = 3
	burstUpdate = time.Second
	overflowKey = "\x00overflow" // no site is empty or holds a NUL
)

// burst is the pending requests of one issuer (or the overflow) and its notification.
type burst struct {
	key   string
	reqs  []owner.ConsentRequest // oldest first
	id    uint32                 // the notification showing it; 0: none yet
	dirty bool                   // reqs changed since it was shown
	// single is the request whose Allow and Deny the notification shows, nil when it shows
	// the burst: its buttons act on what the owner read, never on a request added since.
	single *owner.ConsentRequest
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
	n := &dbusNotifier{conn: conn, log: log, act: act, bursts: map[string]*burst{}, byID: map[uint32]*burst{}, burstOf: map[string]string{}}
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

// request adds a new device authorization request to its issuer's burst. The first request
// of a burst is shown at once (B6); a later one updates the burst's notification at once too
// when nothing changed on screen for burstUpdate, else when that is over.
func (n *dbusNotifier) request(r owner.ConsentRequest) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closing {
		return
	}
	if _, dup := n.burstOf[r.ID]; dup {
		return
	}
	key := r.Agent.Site
	b := n.bursts[key]
	if b == nil && n.ownBursts() >= maxBursts {
		key, b = overflowKey, n.bursts[overflowKey]
	}
	if b == nil {
		b = &burst{key: key}
		n.bursts[key] = b
	}
	b.reqs = append(b.reqs, r)
	n.burstOf[r.ID] = key
	if len(b.reqs) == 1 {
		n.show(b)
		return
	}
	n.changed(b)
}

// ownBursts counts the issuers with a notification of their own.
func (n *dbusNotifier) ownBursts() int {
	c := len(n.bursts)
	if n.bursts[overflowKey] != nil {
		c--
	}
	return c
}

// changed schedules b's notification to be shown again with its current requests.
func (n *dbusNotifier) changed(b *burst) {
	b.dirty = true
	if n.flushing {
		return
	}
	if wait := burstUpdate - time.Since(n.shownAt); wait > 0 {
		n.flushing = true
		time.AfterFunc(wait, n.flush)
		return
	}
	n.show(b)
}

func (n *dbusNotifier) flush() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.flushing = false
	if n.closing {
		return
	}
	for _, b := range n.bursts {
		if b.dirty {
			n.show(b)
		}
	}
}

// show puts b on screen, replacing its notification if it has one. The lock is held across
// the call so that an action arriving at once finds its burst.
func (n *dbusNotifier) show(b *burst) {
	b.dirty, n.shownAt = false, time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var caps []string
	if err := n.call(ctx, "GetCapabilities").Store(&caps); err != nil {
		n.noServer(err)
		return
	}
	markup, buttons := slices.Contains(caps, "body-markup"), slices.Contains(caps, "actions")
	var summary, body string
	var actions []string
	b.single = nil
	switch {
	case b.key == overflowKey:
		sites := map[string]bool{}
		for _, r := range b.reqs {
			sites[r.Agent.Site] = true
		}
		summary, body = overflowText(len(b.reqs), len(sites))
		actions = []string{actionDefault, "Open in Aether"}
	case len(b.reqs) == 1:
		r := b.reqs[0]
		b.single = &r
		summary, body = notificationText(r, markup)
		actions = []string{actionAllow, "Allow", actionDeny, "Deny", actionDefault, "Open in Aether"}
	default:
		summary, body = burstText(b.reqs, markup)
		actions = []string{actionDenyAll, "Deny all from " + shorten(b.reqs[0].Agent.SiteName, 60), actionDefault, "Open in Aether"}
	}
	if !buttons {
		actions = []string{}
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
	// Shown until its last request expires (then none could be allowed anyway).
	timeout := time.Until(b.reqs[len(b.reqs)-1].ExpiresAt)
	timeout = min(max(timeout, 5*time.Second), time.Hour)
	var id uint32
	err := n.call(ctx, "Notify", "Aether", b.id, "", summary, body, actions, hints, int32(timeout/time.Millisecond)).Store(&id)
	if err != nil {
		n.noServer(err)
		return
	}
	if id != b.id {
		delete(n.byID, b.id)
		n.byID[id] = b
		b.id = id
	}
	n.log.Info("notified consent requests", "site", b.key, "requests", len(b.reqs), "notification", id, "actions", len(actions) > 0)
}

// noServer logs the first failure to reach a notification server; later ones are expected.
func (n *dbusNotifier) noServer(err error) {
	if !n.warned.Swap(true) {
		n.log.Info("no desktop notification server: requests show in the tray and on the Consent page", "err", err)
	}
}

// withdraw drops a request decided or expired elsewhere from its burst; a burst left empty
// closes its notification.
func (n *dbusNotifier) withdraw(requestID string) {
	n.mu.Lock()
	key, ok := n.burstOf[requestID]
	var closeID uint32
	if ok {
		delete(n.burstOf, requestID)
		b := n.bursts[key]
		b.reqs = slices.DeleteFunc(b.reqs, func(r owner.ConsentRequest) bool { return r.ID == requestID })
		if len(b.reqs) == 0 {
			closeID = b.id
			n.end(b)
		} else {
			n.changed(b)
		}
	}
	n.mu.Unlock()
	if closeID != 0 {
		n.closeNotification(closeID)
	}
}

// end forgets burst b and its requests (n.mu held).
func (n *dbusNotifier) end(b *burst) {
	for _, r := range b.reqs {
		delete(n.burstOf, r.ID)
	}
	delete(n.bursts, b.key)
	delete(n.byID, b.id)
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

// forget ends the burst shown by notification id: the server closed it (dismissed, timed
// out). Its requests stay on the Consent page and in the tray; the issuer's next request
// starts a new burst.
func (n *dbusNotifier) forget(id uint32) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if b, ok := n.byID[id]; ok {
		n.end(b)
	}
}

// invoked acts on the server's action. Allow and Deny decide the one request the
// notification shows, at most once; Deny all denies every pending request of a burst's
// issuer, at most once. Anything else (a click on the body) opens the window on the request,
// or on the Consent page for a burst, and leaves the notification's buttons working.
func (n *dbusNotifier) invoked(id uint32, key string) {
	n.mu.Lock()
	b, ok := n.byID[id]
	if !ok {
		n.mu.Unlock()
		return
	}
	switch {
	case (key == actionAllow || key == actionDeny) && b.single != nil:
		r := *b.single
		// Its buttons are spent: the burst ends with this notification, and whatever came
		// in since it was drawn is shown afresh.
		rest := slices.DeleteFunc(slices.Clone(b.reqs), func(o owner.ConsentRequest) bool { return o.ID == r.ID })
		n.end(b)
		n.mu.Unlock()
		// Servers differ in whether an action closes the notification (dunst's context
		// menu does not); close it either way.
		go n.closeNotification(id)
		go n.act.decide(r, key == actionAllow)
		for _, o := range rest {
			n.request(o)
		}
	case key == actionDenyAll && b.single == nil && b.key != overflowKey:
		site, name := b.key, b.reqs[0].Agent.SiteName
		n.end(b)
		n.mu.Unlock()
		go n.closeNotification(id)
		go n.act.denySite(site, name)
	case key == actionAllow || key == actionDeny || key == actionDenyAll:
		n.mu.Unlock() // a button the notification no longer shows
	default:
		code := ""
		if b.single != nil {
			code = b.single.UserCode
		}
		n.mu.Unlock()
		go n.act.open(code)
	}
}
