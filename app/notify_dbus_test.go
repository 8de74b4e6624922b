//go:build linux || freebsd || openbsd || netbsd

package app

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aether/aether/backend/owner"
	"github.com/godbus/dbus/v5"
)

// sessionBus starts a private dbus-daemon for the test and points the session bus
// address at it.
func sessionBus(t *testing.T) string {
	t.Helper()
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		t.Skip("dbus-daemon is not installed")
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "session.conf")
	os.WriteFile(conf, []byte(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>unix:dir=`+dir+`</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy>
</busconfig>`), 0o600)
	cmd := exec.Command(daemon, "--config-file="+conf, "--nofork", "--print-address=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("start dbus-daemon: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("dbus-daemon address: %v", err)
	}
	addr = strings.TrimSpace(addr)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", addr)
	return addr
}

type notifyCall struct {
	id      uint32
	summary string
	body    string
	actions []string
	hints   map[string]dbus.Variant
}

// fakeServer is org.freedesktop.Notifications as a test sees it. It keeps what is on screen:
// Notify with replaces_id of a shown notification updates it in place, as the spec says.
type fakeServer struct {
	conn   *dbus.Conn
	notify chan notifyCall
	closed chan uint32

	mu      sync.Mutex
	next    uint32
	screen  map[uint32]notifyCall // shown now
	most    int                   // the most shown at once
	updates int                   // Notify calls that replaced a shown notification
}

// onScreen returns what is shown now and the most that ever was at once.
func (s *fakeServer) onScreen() (map[uint32]notifyCall, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.screen), s.most
}

func (s *fakeServer) GetCapabilities() ([]string, *dbus.Error) {
	return []string{"actions", "body", "body-markup"}, nil
}

func (s *fakeServer) Notify(app string, replaces uint32, icon, summary, body string, actions []string, hints map[string]dbus.Variant, timeout int32) (uint32, *dbus.Error) {
	s.mu.Lock()
	id := replaces
	if _, shown := s.screen[id]; !shown {
		s.next++
		id = s.next
	} else {
		s.updates++
	}
	c := notifyCall{id: id, summary: summary, body: body, actions: actions, hints: hints}
	s.screen[id] = c
	s.most = max(s.most, len(s.screen))
	s.mu.Unlock()
	select {
	case s.notify <- c:
	default: // a flood test reads the screen, not every call
	}
	return id, nil
}

func (s *fakeServer) CloseNotification(id uint32) *dbus.Error {
	s.mu.Lock()
	delete(s.screen, id)
	s.mu.Unlock()
	select {
	case s.closed <- id:
	default:
	}
	return nil
}

func (s *fakeServer) GetServerInformation() (string, string, string, string, *dbus.Error) {
	return "fake", "aether", "1", "1.2", nil
}

// action emits ActionInvoked from conn (the server's own, or another process's).
func action(t *testing.T, conn *dbus.Conn, id uint32, key string) {
	t.Helper()
	if err := conn.Emit(notifyPath, notifyIface+".ActionInvoked", id, key); err != nil {
		t.Fatal(err)
	}
}

func startServer(t *testing.T) *fakeServer {
	t.Helper()
	conn, err := dbus.ConnectSessionBus()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s := &fakeServer{conn: conn, notify: make(chan notifyCall, 8), closed: make(chan uint32, 8), screen: map[uint32]notifyCall{}}
	if err := conn.Export(s, notifyPath, notifyIface); err != nil {
		t.Fatal(err)
	}
	if reply, err := conn.RequestName(notifyName, dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("own %s: %v %v", notifyName, reply, err)
	}
	return s
}

type decision struct {
	id    string
	allow bool
}

// denial is a burst's Deny all.
type denial struct{ site, name string }

// logLines is a log sink a test can wait on.
type logLines chan string

func (l logLines) Write(p []byte) (int, error) {
	select {
	case l <- string(p):
	default:
	}
	return len(p), nil
}

// waitLog waits for a log line containing s.
func (l logLines) waitLog(t *testing.T, s string) {
	t.Helper()
	for {
		if line := recv(t, l, "log line "+s); strings.Contains(line, s) {
			return
		}
	}
}

func startNotifier(t *testing.T) (notifier, chan decision, chan string, logLines) {
	n, decided, opened, _, logs := startNotifierWith(t)
	return n, decided, opened, logs
}

func startNotifierWith(t *testing.T) (notifier, chan decision, chan string, chan denial, logLines) {
	t.Helper()
	decided, opened, denied, logs := make(chan decision, 8), make(chan string, 8), make(chan denial, 8), make(logLines, 64)
	n := newNotifier(notifyActions{
		decide:   func(r owner.ConsentRequest, allow bool) { decided <- decision{r.ID, allow} },
		denySite: func(site, name string) { denied <- denial{site, name} },
		open:     func(code string) { opened <- code },
	}, slog.New(slog.NewTextHandler(logs, nil)))
	if _, ok := n.(*dbusNotifier); !ok {
		t.Fatalf("no D-Bus notifier: %T", n)
	}
	t.Cleanup(n.close)
	return n, decided, opened, denied, logs
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(3 * time.Minute): // a hang guard, never a speed check
		t.Fatalf("no %s", what)
		panic("unreachable")
	}
}

func testRequest(id, code string) owner.ConsentRequest {
	return requestFrom("https://agent.example", "alice", id, code)
}

func requestFrom(iss, sub, id, code string) owner.ConsentRequest {
	return owner.ConsentRequest{
		ID: id, UserCode: code, Agent: owner.AgentOf(iss, sub),
		Brand: owner.BrandRef{ID: "review", Name: "Code review"}, Scope: owner.Scope{ID: "review:read_only", Description: "Review code (read only)"},
		ExpiresAt: time.Now().Add(10 * time.Minute),
	}
}

func TestNotifier(t *testing.T) {
	sessionBus(t)
	srv := startServer(t)
	n, decided, opened, logs := startNotifier(t)
	other, err := dbus.ConnectSessionBus()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	t.Run("a request is a notification with Allow and Deny", func(t *testing.T) {
		n.request(testRequest("df_1", "BCDF-GHJK"))
		c := recv(t, srv.notify, "Notify")
		if want := []string{"allow", "Allow", "deny", "Deny", "default", "Open in Aether"}; strings.Join(c.actions, "|") != strings.Join(want, "|") {
			t.Errorf("actions = %q, want %q", c.actions, want)
		}
		for _, s := range []string{"says it is alice — issued by agent.example", "Code review", "review:read_only", "BCDF-GHJK"} {
			if !strings.Contains(c.body, s) {
				t.Errorf("body lacks %q:\n%s", s, c.body)
			}
		}
		if _, ok := c.hints["image-data"]; !ok {
			t.Error("no image-data hint")
		}
		n.withdraw("df_1")
		recv(t, srv.closed, "CloseNotification")
	})

	t.Run("C9 ActionInvoked from another process is ignored", func(t *testing.T) {
		n.request(testRequest("df_2", "CDFG-HJKL"))
		c := recv(t, srv.notify, "Notify")
		action(t, other, c.id, actionAllow) // forged: not the name's owner
		logs.waitLog(t, "ignored a notification action")
		// Had the forged Allow counted, it would have been the decision and the server's
		// Deny would have found nothing left to decide.
		action(t, srv.conn, c.id, actionDeny)
		if d := recv(t, decided, "decision"); d != (decision{"df_2", false}) {
			t.Fatalf("decision = %+v, want the server's deny of df_2", d)
		}
		if id := recv(t, srv.closed, "CloseNotification"); id != c.id {
			t.Errorf("closed %d, want %d", id, c.id)
		}
	})

	t.Run("C6 the default action opens the window; Allow twice decides once", func(t *testing.T) {
		n.request(testRequest("df_3", "DFGH-JKLM"))
		c := recv(t, srv.notify, "Notify")
		action(t, srv.conn, c.id, actionDefault)
		if code := recv(t, opened, "open"); code != "DFGH-JKLM" {
			t.Fatalf("opened %q", code)
		}
		action(t, srv.conn, c.id, actionAllow)
		action(t, srv.conn, c.id, actionAllow)
		if d := recv(t, decided, "decision"); d != (decision{"df_3", true}) {
			t.Fatalf("decision = %+v, want allow df_3", d)
		}
		if id := recv(t, srv.closed, "CloseNotification"); id != c.id {
			t.Errorf("closed %d, want %d", id, c.id)
		}
		// A later notification's default action is handled after both Allows.
		n.request(testRequest("df_4", "FGHJ-KLMN"))
		c4 := recv(t, srv.notify, "Notify")
		action(t, srv.conn, c4.id, actionDefault)
		recv(t, opened, "open")
		select {
		case d := <-decided:
			t.Fatalf("second decision %+v for one notification", d)
		default:
		}
		n.withdraw("df_4")
		recv(t, srv.closed, "CloseNotification")
	})

	t.Run("B6 a second request of an issuer updates its notification at once, a third within burstUpdate", func(t *testing.T) {
		n.request(requestFrom("https://id.burst.example", "one", "bu_1", "JKLM-NPQR"))
		first := recv(t, srv.notify, "Notify")
		time.Sleep(burstUpdate) // nothing has changed on screen for a while
		n.request(requestFrom("https://id.burst.example", "two", "bu_2", "KLMN-PQRS"))
		select { // shown before request returned
		case c := <-srv.notify:
			if c.id != first.id || !strings.Contains(c.body, "and 1 more from burst.example") {
				t.Fatalf("update %d %q, want notification %d with one more", c.id, c.body, first.id)
			}
		default:
			t.Fatal("the second request waited for the next update instead of being shown at once")
		}
		n.request(requestFrom("https://id.burst.example", "three", "bu_3", "LMNP-QRST"))
		select {
		case c := <-srv.notify:
			t.Fatalf("a third request right after the second changed the screen at once: %q", c.body)
		default:
		}
		if c := recv(t, srv.notify, "Notify"); !strings.Contains(c.body, "and 2 more from burst.example") {
			t.Fatalf("third update %q, want two more", c.body)
		}
		for _, id := range []string{"bu_1", "bu_2", "bu_3"} {
			n.withdraw(id)
		}
		recv(t, srv.closed, "CloseNotification")
	})

	t.Run("a request decided elsewhere withdraws its notification", func(t *testing.T) {
		n.request(testRequest("df_5", "GHJK-LMNP"))
		c := recv(t, srv.notify, "Notify")
		n.withdraw("df_5")
		if id := recv(t, srv.closed, "CloseNotification"); id != c.id {
			t.Errorf("closed %d, want %d", id, c.id)
		}
		action(t, srv.conn, c.id, actionAllow)
		action(t, srv.conn, c.id, actionDefault)
		n.request(testRequest("df_6", "HJKL-MNPQ"))
		c6 := recv(t, srv.notify, "Notify")
		action(t, srv.conn, c6.id, actionDefault)
		if code := recv(t, opened, "open"); code != "HJKL-MNPQ" {
			t.Fatalf("opened %q after the withdrawn notification's actions", code)
		}
		select {
		case d := <-decided:
			t.Fatalf("decision %+v from a withdrawn notification", d)
		default:
		}
	})
}

func TestNotifierWithoutServer(t *testing.T) {
	sessionBus(t)
	n, _, _, _ := startNotifier(t)
	// No org.freedesktop.Notifications on the bus: nothing to show, nothing fails.
	n.request(testRequest("df_1", "BCDF-GHJK"))
	n.tell("Allowed", "x")
	n.withdraw("df_1")
}

// TestNotifierFlood: one issuer's flood is one notification that counts the rest, and no more
// than a few notifications are ever on screen (C18).
func TestNotifierFlood(t *testing.T) {
	sessionBus(t)
	srv := startServer(t)
	n, decided, _, denied, _ := startNotifierWith(t)

	t.Run("C18 one issuer floods: one notification, and N more", func(t *testing.T) {
		const flood = 300
		for i := range flood {
			n.request(requestFrom(fmt.Sprintf("https://id-%d.evil.example", i%7), fmt.Sprintf("victim-%d@bank.example", i), fmt.Sprintf("ev_%d", i), "BCDF-GHJK"))
			if i == flood/2 {
				n.request(requestFrom("https://accounts.good.example", "carol", "good_1", "CDFG-HJKL"))
			}
		}
		// Other issuers beyond the few that get their own notification share one.
		for i := range 6 {
			n.request(requestFrom(fmt.Sprintf("https://site%d.example", i), "x", fmt.Sprintf("o_%d", i), "DFGH-JKLM"))
		}
		var evil, good, overflow notifyCall
		settled := func() bool {
			screen, _ := srv.onScreen()
			evil, good, overflow = notifyCall{}, notifyCall{}, notifyCall{}
			for _, c := range screen {
				switch {
				case strings.Contains(c.summary, "evil.example"):
					evil = c
				case strings.Contains(c.body, "good.example"):
					good = c
				case strings.Contains(c.summary, "other issuers"):
					overflow = c
				}
			}
			return strings.Contains(evil.body, fmt.Sprintf("and %d more from evil.example", flood-1)) && strings.Contains(overflow.summary, "5 more requests from 5 other issuers")
		}
		deadline := time.Now().Add(10 * time.Second)
		for !settled() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if !settled() {
			screen, _ := srv.onScreen()
			t.Fatalf("on screen: %+v", screen)
		}
		screen, most := srv.onScreen()
		if most > maxBursts+1 || len(screen) != maxBursts+1 {
			t.Errorf("%d notifications on screen, at most %d at once; want at most %d", len(screen), most, maxBursts+1)
		}
		if evil.summary != fmt.Sprintf("%d agents from evil.example ask to use your brands", flood) || !slices.Contains(evil.actions, actionDenyAll) || slices.Contains(evil.actions, actionAllow) {
			t.Errorf("the flood's notification: %q, actions %q; want Deny all and no Allow", evil.summary, evil.actions)
		}
		if !slices.Contains(good.actions, actionAllow) || !strings.Contains(good.body, "carol") {
			t.Errorf("the other issuer's notification: %q %q; want its own, with Allow", good.body, good.actions)
		}
		srv.mu.Lock()
		updates := srv.updates
		srv.mu.Unlock()
		t.Logf("%d requests: %d notifications on screen, %d in-place updates", flood+7, len(screen), updates)

		// Deny all on the flood's notification: one denial of its site, the others untouched.
		action(t, srv.conn, evil.id, actionDenyAll)
		action(t, srv.conn, evil.id, actionDenyAll)
		if d := recv(t, denied, "Deny all"); d != (denial{"evil.example", "evil.example"}) {
			t.Fatalf("Deny all = %+v", d)
		}
		action(t, srv.conn, good.id, actionAllow)
		if d := recv(t, decided, "decision"); d != (decision{"good_1", true}) {
			t.Fatalf("decision = %+v, want allow good_1", d)
		}
		select {
		case d := <-denied:
			t.Fatalf("a second Deny all %+v from one notification", d)
		default:
		}
	})
}
