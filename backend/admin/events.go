package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aether/aether/backend/owner"
)

// getEvents streams Backend events as server-sent events until the client goes, the backend
// closes the channel, a write fails (the desktop asset server has no request context) or Close
// is called.
func (s *Server) getEvents(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.closing, cancel)
	defer stop()
	if s.closing.Err() != nil {
		s.fail(w, r, errClosed)
		return
	}
	ch := s.b.Events(ctx)
	rc := http.NewResponseController(w)
	// A server-wide WriteTimeout would cut the stream; the pings keep dead clients detectable.
	_ = rc.SetWriteDeadline(time.Time{})
	flush := func() error {
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		return nil
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := io.WriteString(w, "retry: 3000\n\n"); err != nil || flush() != nil {
		return
	}
	ping := time.NewTicker(s.pingEvery)
	defer ping.Stop()
	for {
		var chunk string
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-ch:
			if !ok {
				return
			}
			c, err := sseChunk(ev)
			if err != nil {
				s.log.Error("admin: event dropped", "event", ev.Name, "err", err)
				continue
			}
			chunk = c
		case <-ping.C:
			chunk = ": ping\n\n"
		}
		if _, err := io.WriteString(w, chunk); err != nil || flush() != nil {
			return
		}
	}
}

func sseChunk(ev owner.Event) (string, error) {
	if ev.Name == "" || strings.ContainsAny(ev.Name, "\r\n:") {
		return "", fmt.Errorf("bad event name %q", ev.Name)
	}
	data := []byte("{}")
	if ev.Data != nil {
		var err error
		if data, err = json.Marshal(ev.Data); err != nil {
			return "", fmt.Errorf("encode %s event: %w", ev.Name, err)
		}
	}
	// json.Marshal never emits a raw newline, so the data is one "data:" line.
	return "event: " + ev.Name + "\ndata: " + string(data) + "\n\n", nil
}
