package node

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aether/aether/backend/admin"
)

// apiHandler is the node API on 127.0.0.1:<port> for local tools (`aether
// status`, `aether grants …`). Every call needs the admin token as a bearer
// token; a loopback Host is required so a rebinding page cannot reach it.
func (n *Node) apiHandler() http.Handler {
	b := &backend{n: n}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		st, err := b.Status(r.Context())
		reply(w, st, err)
	})
	mux.HandleFunc("GET /v1/consent", func(w http.ResponseWriter, r *http.Request) {
		reqs, err := b.Pending(r.Context())
		reply(w, map[string]any{"requests": reqs}, err)
	})
	mux.HandleFunc("GET /v1/grants", func(w http.ResponseWriter, r *http.Request) {
		gs, err := b.Grants(r.Context())
		reply(w, map[string]any{"grants": gs}, err)
	})
	mux.HandleFunc("POST /v1/grants/{id}/revoke", func(w http.ResponseWriter, r *http.Request) {
		g, err := b.Revoke(r.Context(), r.PathValue("id"))
		reply(w, map[string]any{"grant": g}, err)
	})
	mux.HandleFunc("POST /v1/gateway/pause", func(w http.ResponseWriter, r *http.Request) {
		reply(w, map[string]any{"paused": true}, n.SetPaused(true))
	})
	mux.HandleFunc("POST /v1/gateway/resume", func(w http.ResponseWriter, r *http.Request) {
		reply(w, map[string]any{"paused": false}, n.SetPaused(false))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" {
			http.Error(w, "misdirected request", http.StatusMisdirectedRequest)
			return
		}
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(n.token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="aether-node"`)
			reply(w, nil, errUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

var errUnauthorized = errors.New("the admin token is required (Authorization: Bearer <token from admin.token>)")

func reply(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		status := http.StatusInternalServerError
		switch {
		case errors.Is(err, errUnauthorized):
			status = http.StatusUnauthorized
		case errors.Is(err, admin.ErrNotFound):
			status = http.StatusNotFound
		case errors.Is(err, admin.ErrInvalid):
			status = http.StatusBadRequest
		}
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	json.NewEncoder(w).Encode(v)
}

// SetPaused pauses or resumes the gateway (tray menu, node API).
func (n *Node) SetPaused(paused bool) error {
	n.mu.Lock()
	gw := n.gw
	n.mu.Unlock()
	if gw == nil {
		return errors.New("the gateway is not running: policy.json has errors")
	}
	if paused {
		gw.Pause()
	} else {
		gw.Resume()
	}
	n.log.Info("gateway", "paused", paused, "at", time.Now().Format(time.RFC3339))
	return nil
}
