package admin

import (
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aether/aether/backend/owner"
)

// NodeHandler serves the node API, on its own listener on 127.0.0.1, for local tools (`aether
// status`, `aether grants …`): the same operations, answers and errors as /api/*, under /v1/
// (docs/admin-api.md). Every call needs the admin token as a bearer token; no cookie counts, so
// there is no CSRF token. A loopback Host is required so that a rebinding page cannot reach it.
func (s *Server) NodeHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/status", get(s.getStatus))
	mux.HandleFunc("/v1/consent", get(s.getConsent))
	mux.HandleFunc("/v1/grants", get(s.getGrants))
	mux.HandleFunc("/v1/grants/{id}/revoke", post(s.postRevoke))
	mux.HandleFunc("/v1/gateway/pause", post(s.setPaused(true)))
	mux.HandleFunc("/v1/gateway/resume", post(s.setPaused(false)))
	mux.HandleFunc("/v1/admin/token", post(s.postRotateToken))
	mux.HandleFunc("/v1/admin/sign-in-link", post(s.postSignInLink))
	mux.HandleFunc("/v1/reachability/funnel", post(s.postFunnel))
	mux.HandleFunc("/v1/reachability/use", post(s.postUseFunnelURL))
	mux.HandleFunc("/v1/agents", methods(map[string]http.HandlerFunc{"GET": s.getAgents, "POST": s.postAgent}))
	mux.HandleFunc("/v1/agents/{name}", post(s.postAgentSwitch))
	mux.HandleFunc("/v1/agents/{name}/token", post(s.postMint))
	mux.HandleFunc("/v1/received", methods(map[string]http.HandlerFunc{"GET": s.getReceived, "POST": s.postReceived}))
	mux.HandleFunc("/v1/runtime", get(func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, s.b.Runtime()) }))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, errorBody{Error: "no such API: " + r.URL.Path})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" {
			http.Error(w, "misdirected request", http.StatusMisdirectedRequest)
			return
		}
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !s.validToken(tok) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="aether-node"`)
			writeError(w, http.StatusUnauthorized, errorBody{Error: "the admin token is required (Authorization: Bearer <token from admin.token>)"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		mux.ServeHTTP(w, r)
	})
}

func (s *Server) setPaused(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := s.b.SetPaused(paused); err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, owner.PauseAnswer{Paused: paused})
	}
}

// postRotateToken is `aether admin new-token` against a running node: a new token in the file,
// every session ended (A6). The answer never carries the token.
func (s *Server) postRotateToken(w http.ResponseWriter, r *http.Request) {
	if err := s.RotateToken(); err != nil {
		s.log.Error("admin token not rotated", "err", err)
		writeError(w, http.StatusInternalServerError, errorBody{Error: "the admin token was not rotated: " + err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, owner.TokenRotated{Rotated: true, SessionsEnded: true})
}

// postSignInLink is `aether admin link`: a fresh one-time sign-in link for the caller, who holds
// the token already (A1).
func (s *Server) postSignInLink(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, owner.SignInLink{Link: s.SignInLink(), ExpiresIn: int(signInCodeTTL / time.Second)})
}
