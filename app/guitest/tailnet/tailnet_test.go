// Package tailnet is the GUI test's tailnet (scripts/gui-test.sh): Tailscale's own test control
// server and DERP/STUN relay on loopback, with logins that wait for the test to complete them.
// It is a test binary because the relay needs a testing.TB: the script builds it with
// `go test -c` and runs TestServe with AETHER_GUI_TAILNET set to a folder, where it writes the
// control server's URL (control.url) and its own address (helper.addr); GET
// /complete?url=<login URL> on that address completes a login, as signing in would.
package tailnet

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"

	"tailscale.com/net/netns"
	"tailscale.com/tailcfg"
	"tailscale.com/tstest/integration"
	"tailscale.com/tstest/integration/testcontrol"
	"tailscale.com/types/logger"
)

func TestServe(t *testing.T) {
	dir := os.Getenv("AETHER_GUI_TAILNET")
	if dir == "" {
		t.Skip("the GUI test's tailnet: scripts/gui-test.sh runs it")
	}
	netns.SetEnabled(false)
	c := &testcontrol.Server{
		DERPMap: integration.RunDERPAndSTUN(t, logger.Discard, "127.0.0.1"), DNSConfig: &tailcfg.DNSConfig{Proxied: true},
		MagicDNSDomain: "tail-scale.ts.net", RequireAuth: true, Logf: logger.Discard,
	}
	c.HTTPTestServer = httptest.NewUnstartedServer(c)
	c.HTTPTestServer.Start()
	defer c.HTTPTestServer.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/complete" || !c.CompleteAuth(r.URL.Query().Get("url")) {
			http.Error(w, "no such login", http.StatusNotFound)
			return
		}
		w.Write([]byte("signed in\n"))
	}))
	for name, v := range map[string]string{"control.url": c.HTTPTestServer.URL, "helper.addr": ln.Addr().String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	<-stop
}
