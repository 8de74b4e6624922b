// Package admin is the owner's HTTP transport over owner.Service: the JSON API of
// docs/admin-api.md with the embedded UI, the node API for local tools, and the guards in front
// of them (docs/threats.md: C1–C12, V6, S8). Every service error becomes a status in one place
// (fail).
//
// Handler is for the HTTPS admin listener on 127.0.0.1. In front of everything it sets the
// security headers, then checks the Host (421, C3), then cross-origin requests (403, C1, C2,
// V6); /api/* then needs a session cookie (401, C4, S8) and, for every non-GET call, the
// session's CSRF token (403).
//
// DesktopHandler is for the Wails asset server. That is reachable only from the app's own
// webview (Wails checks the host itself), so it skips the Host and Origin checks and the owner is
// always signed in. It still requires the CSRF token on non-GET calls: the UI fetches it anyway,
// and a foreign page that somehow ended up in the window could send requests but cannot read
// /api/session (no CORS), so it cannot act blind.
//
// NodeHandler is for the node API listener on 127.0.0.1: the admin token as a bearer token
// instead of a session, and a loopback Host.
package admin

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aether/aether/backend/devices"
)

// Config configures a Server.
type Config struct {
	// Token is the admin token (see LoadOrCreateToken); an empty token never signs anyone in.
	Token string
	// TokenFile is where the token is kept (<data-dir>/admin.token): RotateToken writes the new
	// one there. Empty: the token cannot be rotated.
	TokenFile string
	// Addr is the admin listener's address as bound, with its port ("127.0.0.1:3000"). The
	// Host allow list and the allowed Origins are built from its port.
	Addr string
	// UI is the built frontend (frontend/dist); nil serves no pages.
	UI fs.FS
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// SessionTTL is how long a sign-in lasts; 0 means 12 hours.
	SessionTTL time.Duration
	// OnConsentLink, when set, is called with the user code when a browser opens
	// /pact/consent?user_code=… on the admin listener, signed in or not, so the desktop app can
	// bring its window forward. It only shows things, never decides; it must return quickly.
	OnConsentLink func(userCode string)
	// Log receives rejections and backend failures; nil means slog.Default().
	Log *slog.Logger
	// Devices is the owner's paired phones (devices.go); nil: none can be paired.
	Devices *devices.Store
	// TailnetPeer is the device a request on TailnetHandler comes from (the tailnet listener's
	// word); false refuses the request.
	TailnetPeer func(*http.Request) (TailnetPeer, bool)
	// TailnetHost is the node's ts.net name while it is on the tailnet, "" otherwise.
	TailnetHost func() string
}

const (
	defaultSessionTTL = 12 * time.Hour
	pingEvery         = 15 * time.Second
	maxBody           = 1 << 20

	csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)

// Server holds the admin state shared by Handler and DesktopHandler: sessions, the login
// limiter and the open event streams.
type Server struct {
	cfg      Config
	b        Backend
	log      *slog.Logger
	hosts    map[string]bool // allowed Host headers, lower case
	origins  map[string]bool // allowed Origin headers for non-GET requests
	cop      *http.CrossOriginProtection
	api      *http.ServeMux
	phoneAPI *http.ServeMux // the API a paired device may call (devices.go)
	sessions *sessions
	codes    signInCodes
	limiter  loginLimiter
	desktop  *session // the always-signed-in session of the desktop window

	tokenMu sync.RWMutex
	token   string // the admin token, replaced by RotateToken

	closing   context.Context // done when Close is called
	close     context.CancelFunc
	pingEvery time.Duration
}

// New builds a Server. An Addr without a valid port leaves the Host allow list empty, so
// Handler refuses every request (fail closed).
func New(cfg Config, b Backend) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = defaultSessionTTL
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	s := &Server{
		cfg:       cfg,
		b:         b,
		log:       log,
		hosts:     map[string]bool{},
		origins:   map[string]bool{},
		cop:       http.NewCrossOriginProtection(),
		sessions:  newSessions(),
		desktop:   &session{csrf: newSecret(), desktop: true},
		token:     cfg.Token,
		pingEvery: pingEvery,
	}
	s.closing, s.close = context.WithCancel(context.Background())
	if _, port, err := net.SplitHostPort(cfg.Addr); err == nil && port != "" && port != "0" {
		for _, h := range []string{"127.0.0.1", "localhost", "[::1]"} {
			s.hosts[h+":"+port] = true
			s.origins["https://"+h+":"+port] = true
			if port == "443" { // browsers leave the default port out of Host and Origin
				s.hosts[h] = true
				s.origins["https://"+h] = true
			}
		}
	} else {
		log.Error("admin: no port in the listen address; refusing every request", "addr", cfg.Addr)
	}
	s.api = s.routes()
	s.phoneAPI = s.phoneRoutes()
	return s
}

// SignInLink mints a one-time sign-in link, https://<Addr>/login?code=…: it starts one browser
// session, once, within five minutes (A1, A2). The admin token itself never goes in a URL.
// Hand it to the owner only (a browser, a terminal); never log it.
func (s *Server) SignInLink() string {
	return "https://" + s.cfg.Addr + "/login?code=" + s.codes.mint(s.cfg.Now())
}

// RotateToken replaces the admin token with a new one written to Config.TokenFile (atomically,
// mode 0600), and ends every browser session and unused sign-in link: whoever held the old
// token, a cookie or a link must sign in again (A6). The desktop window stays signed in.
func (s *Server) RotateToken() error {
	if s.cfg.TokenFile == "" {
		return errors.New("this node keeps no admin token file to rotate")
	}
	s.tokenMu.Lock()
	defer s.tokenMu.Unlock()
	tok, err := NewToken(s.cfg.TokenFile)
	if err != nil {
		return err
	}
	s.token = tok
	s.sessions.clear()
	s.codes.clear()
	if s.cfg.Devices != nil {
		if err := s.cfg.Devices.RevokeAll(); err != nil {
			return fmt.Errorf("the admin token was rotated, but the paired devices were not removed: %w", err)
		}
	}
	s.log.Info("admin token rotated; every admin session and paired device ended")
	return nil
}

// validToken reports whether got is the admin token (in constant time); no token is ever valid
// when none is set.
func (s *Server) validToken(got string) bool {
	s.tokenMu.RLock()
	defer s.tokenMu.RUnlock()
	return s.token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) == 1
}

// Handler serves the admin listener (HTTPS on 127.0.0.1).
func (s *Server) Handler() http.Handler { return &handler{s: s} }

// DesktopHandler serves the desktop window through the Wails asset server: always signed in,
// no Host or Origin checks, CSRF token still required on non-GET calls.
func (s *Server) DesktopHandler() http.Handler { return &handler{s: s, desktop: true} }

// Close ends every open event stream and refuses new ones, so that http.Server.Shutdown does
// not wait for them (register it with http.Server.RegisterOnShutdown).
func (s *Server) Close() { s.close() }

type handler struct {
	s       *Server
	desktop bool
	tailnet bool // the owner's tailnet door (devices.go)
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := h.s
	setSecurityHeaders(w.Header())
	if h.tailnet {
		s.serveTailnet(w, r)
		return
	}
	if !h.desktop {
		if !s.hosts[strings.ToLower(r.Host)] {
			s.reject(w, r, http.StatusMisdirectedRequest, "host", "unknown host")
			return
		}
		if reason := s.crossOrigin(r, func(o string) bool { return s.origins[o] }); reason != "" {
			s.reject(w, r, http.StatusForbidden, reason, "cross-origin request refused")
			return
		}
	}
	switch {
	case isAPI(r.URL.Path):
		s.serveAPI(w, r, h.desktop)
	case r.URL.Path == "/login" && !h.desktop:
		s.serveLogin(w, r)
	default:
		s.serveUI(w, r, !h.desktop, "index.html")
	}
}

func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store") // C12; immutable assets override it
}

// crossOrigin returns a reason code when r must be refused as cross-origin, "" otherwise; ours
// says which Origins are this listener's.
func (s *Server) crossOrigin(r *http.Request, ours func(origin string) bool) string {
	site := r.Header.Get("Sec-Fetch-Site")
	foreign := site == "cross-site" || site == "same-site"
	switch {
	case foreign && isAPI(r.URL.Path):
		// The API is only for the UI's own fetch() calls, whatever the method.
		return "sec-fetch-site"
	case foreign && (r.URL.Path == "/login" || r.URL.Path == "/pair") &&
		(r.Header.Get("Sec-Fetch-Mode") != "navigate" || r.Header.Get("Sec-Fetch-Dest") != "document"):
		// A sign-in or pairing link is followed by a top-level navigation; anything else from
		// another site is only there to burn the failed-login budget or a pairing code.
		return "sec-fetch-site"
	}
	if safeMethod(r.Method) {
		return ""
	}
	if err := s.cop.Check(r); err != nil {
		return "cross-origin"
	}
	// CrossOriginProtection compares only hosts and lets requests without Origin pass; only
	// https on our port is ours (C2). A request with no Origin at all is no browser's (every
	// browser sends one on non-GET requests): the API answers it 401 without a session (C4)
	// and refuses it after the session check (originRequired).
	if o := r.Header.Get("Origin"); o != "" && !ours(o) && !signInForm(r) {
		return "origin"
	}
	return ""
}

// signInForm is the sign-in page's own form post (A3). Under Referrer-Policy: no-referrer
// Chromium sends a form's Origin as "null"; Sec-Fetch-Site, which no page can set, says it came
// from this origin.
func signInForm(r *http.Request) bool {
	return r.URL.Path == "/login" && r.Header.Get("Origin") == "null" && r.Header.Get("Sec-Fetch-Site") == "same-origin"
}

// originRequired refuses a non-GET call with a session but without our Origin.
func (s *Server) originRequired(r *http.Request) bool {
	return !safeMethod(r.Method) && !s.origins[r.Header.Get("Origin")]
}

func safeMethod(m string) bool { return m == http.MethodGet || m == http.MethodHead }

func isAPI(p string) bool { return p == "/api" || strings.HasPrefix(p, "/api/") }

// reject logs a refused request with a reason code (never its query: /login carries a code)
// and answers it.
func (s *Server) reject(w http.ResponseWriter, r *http.Request, code int, reason, msg string) {
	s.log.Warn("admin request refused", "reason", reason, "status", code,
		"method", r.Method, "path", r.URL.Path, "host", r.Host, "origin", r.Header.Get("Origin"),
		"sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
	if isAPI(r.URL.Path) {
		writeError(w, code, errorBody{Error: msg})
		return
	}
	http.Error(w, msg, code)
}

var errClosed = errors.New("the admin server is shutting down")
