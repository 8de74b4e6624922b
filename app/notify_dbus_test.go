//go:build linux || freebsd || openbsd || netbsd

package app

import (
	"bufio"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// fakeServer is org.freedesktop.Notifications as a test sees it.
type fakeServer struct {
	conn   *dbus.Conn
	next   uint32
	notify chan notifyCall
	closed chan uint32
}

func (s *fakeServer) GetCapabilities() ([]string, *dbus.Error) {
	return []string{"actions", "body", "body-markup"}, nil
}

func (s *fakeServer) Notify(app string, replaces uint32, icon, summary, body string, actions []string, hints map[string]dbus.Variant, timeout int32) (uint32, *dbus.Error) {
	s.next++
	s.notify <- notifyCall{id: s.next, summary: summary, body: body, actions: actions, hints: hints}
	return s.next, nil
}

func (s *fakeServer) CloseNotification(id uint32) *dbus.Error {
	s.closed <- id
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
	s := &fakeServer{conn: conn, notify: make(chan notifyCall, 8), closed: make(chan uint32, 8)}
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
	t.Helper()
	decided, opened, logs := make(chan decision, 8), make(chan string, 8), make(logLines, 64)
	n := newNotifier(notifyActions{
		decide: func(r owner.ConsentRequest, allow bool) { decided <- decision{r.ID, allow} },
		open:   func(code string) { opened <- code },
	}, slog.New(slog.NewTextHandler(logs, nil)))
	if _, ok := n.(*dbusNotifier); !ok {
		t.Fatalf("no D-Bus notifier: %T", n)
	}
	t.Cleanup(n.close)
	return n, decided, opened, logs
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
		panic("unreachable")
	}
}

func testRequest(id, code string) owner.ConsentRequest {
	return owner.ConsentRequest{
		ID: id, UserCode: code, Agent: owner.Agent{Issuer: "https://agent.example", Subject: "alice"},
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
		for _, s := range []string{"alice", "https://agent.example", "Code review", "review:read_only", "BCDF-GHJK"} {
			if !strings.Contains(c.body, s) {
				t.Errorf("body lacks %q:\n%s", s, c.body)
			}
		}
		if _, ok := c.hints["image-data"]; !ok {
			t.Error("no image-data hint")
		}
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
