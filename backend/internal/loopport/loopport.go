// Package loopport hands out loopback ports for tests whose node must bind a port again after
// a restart, or be told its port before it binds it. The ports lie below the kernel's ephemeral
// range (32768 and up), where no outgoing connection or port-0 listener can take one in between,
// and each range hands a port out once per test binary, so tests running side by side never race
// for one. make test gives each user its own range (Makefile, test): backend/agent 16000–19999,
// backend/e2e 20000–25999, the GUI and package tests 26000–31999 (scripts/lib/xsession.sh).
package loopport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
)

// Range is the ports [lo, lo+n).
type Range struct {
	lo, n int
	mu    sync.Mutex
	given map[int]bool
}

// New is the range of the n ports from lo.
func New(lo, n int) *Range { return &Range{lo: lo, n: n, given: map[int]bool{}} }

// Listen listens on a port of r not handed out before.
func (r *Range) Listen(t testing.TB) net.Listener {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for range 100 {
		p := r.lo + rand.IntN(r.n)
		if r.given[p] {
			continue
		}
		if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			r.given[p] = true
			return ln
		}
	}
	t.Fatalf("no free port in %d–%d", r.lo, r.lo+r.n-1)
	return nil
}

// Port is a port of r not handed out before, free as it is returned.
func (r *Range) Port(t testing.TB) int {
	t.Helper()
	ln := r.Listen(t)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
