package devices

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
)

// TestPushGoesOnlyToPublicAddresses: a paired device (or whoever holds its session, O2)
// subscribes with an endpoint on this machine, hoping to make the node post to its services
// (docs/threats.md O7). The node never connects there.
func TestPushGoesOnlyToPublicAddresses(t *testing.T) {
	var hits atomic.Int32
	local := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	var conns atomic.Int32
	local.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	local.StartTLS()
	defer local.Close()

	port := strconv.Itoa(local.Listener.Addr().(*net.TCPAddr).Port)
	for name, endpoint := range map[string]string{
		"O7 an endpoint at 127.0.0.1": "https://127.0.0.1:" + port + "/push",
		"O7 an endpoint at localhost": "https://localhost:" + port + "/push",
	} {
		t.Run(name, func(t *testing.T) {
			s, _, _ := open(t)
			code, _ := s.NewPairing()
			x, _, err := s.Pair(code, "nodeA", "pixel")
			if err != nil {
				t.Fatal(err)
			}
			_, sub := newBrowser(endpoint)
			if err := s.Subscribe(x.Device.ID, sub); err != nil {
				t.Fatal(err)
			}
			p := &Push{Store: s}
			sent, err := p.Send(context.Background(), Notice{ID: "req-1", Site: "example.com", Brand: "b", Code: "WDJB-MJHT"})
			if sent != 0 || !errors.Is(err, ErrSubscription) {
				t.Fatalf("sent %d, %v; want none, refused as not public", sent, err)
			}
			if n := conns.Load(); n != 0 {
				t.Fatalf("the node connected %d times to a service on this machine", n)
			}
		})
	}
	if hits.Load() != 0 {
		t.Fatalf("the local service got %d pushes", hits.Load())
	}
}
