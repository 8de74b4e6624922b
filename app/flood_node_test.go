//go:build linux || freebsd || openbsd || netbsd

package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether/aether/backend/identity/identitytest"
	"github.com/aether/aether/backend/node"
)

// TestNotifierFromNode: a real node receives a flood of device flows from one issuer; the
// app's consent watcher turns the node's events into a bounded number of notifications, one
// of which counts the flood (C18), and another issuer's request still gets its own.
func TestNotifierFromNode(t *testing.T) {
	sessionBus(t)
	srv := startServer(t)
	notes, _, _, _, _ := startNotifierWith(t)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gw := "http://" + ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.json")
	os.MkdirAll(filepath.Join(dir, "workspace"), 0o755)
	os.WriteFile(policy, []byte(fmt.Sprintf(`{"pact":{"publicUrl":%q,"audience":%q,"allowInsecureLocalIssuers":true,"brands":[
		{"id":"review","name":"Code review","description":"Reviews code.","capability":"review","workspace":"workspace","accessMode":"read_only","scope":{"id":"review:read_only","description":"Review code (read only)"}}]}}`, gw, gw)), 0o600)
	n, err := node.Start(context.Background(), node.Options{
		PolicyPath: policy, DataDir: filepath.Join(dir, "data"), PactListen: strings.TrimPrefix(gw, "http://"),
		CodexPath: filepath.Join(dir, "no-codex"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { n.Stop(context.Background()) })
	a := &App{log: slog.New(slog.NewTextHandler(io.Discard, nil)), node: n, notes: notes, tray: noTray{}, started: make(chan struct{})}
	close(a.started)
	watch, stop := context.WithCancel(context.Background())
	defer stop()
	go a.watchConsent(n.Owner().Events(watch))

	evil := identitytest.NewIssuer(t) // 127.0.0.1
	good := identitytest.NewIssuer(t)
	good.URL = strings.Replace(good.URL, "127.0.0.1", "localhost", 1)
	ask := func(is *identitytest.Issuer, sub string) bool {
		req, _ := http.NewRequest("POST", gw+"/pact/device_authorization", strings.NewReader(url.Values{"scope": {"review:read_only"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+is.Token(sub, gw))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}

	t.Run("C18 one issuer floods a real node", func(t *testing.T) {
		flood := 0
		for i := range 60 {
			if ask(evil, fmt.Sprintf("victim-%d@bank.example", i)) {
				flood++
			}
		}
		if flood < 2 {
			t.Fatalf("only %d of the flood's requests got in", flood)
		}
		if !ask(good, "carol") {
			t.Fatal("the other issuer's request was refused")
		}
		want := fmt.Sprintf("and %d more from 127.0.0.1", flood-1)
		var seen map[uint32]notifyCall
		counted := func() bool {
			seen, _ = srv.onScreen()
			var burst, carol bool
			for _, c := range seen {
				burst = burst || strings.Contains(c.body, want)
				carol = carol || strings.Contains(c.body, "says it is carol — issued by localhost")
			}
			return burst && carol
		}
		for deadline := time.Now().Add(3 * time.Minute); !counted() && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		if !counted() {
			t.Fatalf("no notification says %q beside carol's own; on screen: %+v", want, seen)
		}
		if _, most := srv.onScreen(); most > 2 {
			t.Errorf("%d notifications were on screen at once for two issuers; want 2", most)
		}
		t.Logf("%d flood requests in, %d notifications on screen", flood, len(seen))
	})
}
