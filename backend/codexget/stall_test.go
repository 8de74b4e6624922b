package codexget

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestStalledRegistry: a registry (or whoever sits on the way to it) that stops sending, after
// its headers or before them, would keep Get Codex "downloading" for ever (X12). The stall
// ends the download with the reason, nothing is left, and the next try works. The stall period
// is short here: the test waits for the stall itself, never for a time.
func TestStalledRegistry(t *testing.T) {
	data := goodPackage(t)
	for _, tc := range []struct {
		name    string
		headers bool
	}{
		{"X12 the registry stalls after its headers and a first part", true},
		{"X12 the registry stalls before its headers", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stall atomic.Bool
			stall.Store(true)
			g := &Getter{Dir: filepath.Join(t.TempDir(), "codex-bin"), Platform: pinFor(data), StallTimeout: 50 * time.Millisecond,
				Registry: registry(t, func(w http.ResponseWriter, r *http.Request) {
					if !stall.Load() {
						serveBytes(data)(w, r)
						return
					}
					if tc.headers {
						w.Header().Set("Content-Length", "1000000")
						w.Write(data[:1000])
						w.(http.Flusher).Flush()
					}
					<-r.Context().Done() // the client gave up
				})}
			bin, err := g.Get(context.Background(), nil)
			if !errors.Is(err, ErrStalled) || bin != "" || !strings.Contains(err.Error(), "sent nothing for 50ms") || !strings.Contains(err.Error(), "try again") {
				t.Fatalf("Get from a stalled registry: %q, %v; want %v with the reason", bin, err, ErrStalled)
			}
			nothingRunnable(t, g)
			stall.Store(false)
			g.StallTimeout = 0 // the registry answers now: no pause of a loaded machine may end the retry
			if bin, err := g.Get(context.Background(), nil); err != nil || bin == "" {
				t.Fatalf("trying again: %q, %v", bin, err)
			}
		})
	}
	t.Run("X12 the registry's status text is printed escaped", func(t *testing.T) {
		g := &Getter{Dir: filepath.Join(t.TempDir(), "codex-bin"), Platform: pinFor(data),
			Registry: registry(t, func(w http.ResponseWriter, r *http.Request) {
				// net/http writes the status line the handler gives; a raw one is the attack.
				conn, buf, err := w.(http.Hijacker).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				defer conn.Close()
				buf.WriteString("HTTP/1.1 503 \x1b]0;owned\x07\x1b[2J\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
				buf.Flush()
			})}
		_, err := g.Get(context.Background(), nil)
		if err == nil || strings.ContainsAny(err.Error(), "\x1b\x07") || !strings.Contains(err.Error(), `\x1b[2J`) {
			t.Fatalf("the error shows the registry's status as %q; want it escaped", err)
		}
	})
}
