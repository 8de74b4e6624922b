package admin

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// CookieName is the admin session cookie. The __Host- prefix makes browsers insist on Secure,
// Path=/ and no Domain, so no other host or path can set or shadow it.
const CookieName = "__Host-aether_session"

const (
	maxSessions     = 64 // sign-ins beyond this push out the oldest
	loginFailWindow = time.Minute
	loginMaxFails   = 10
	defaultReturnTo = "/pact/consent"
)

// session is a signed-in owner. The cookie carries only the random id; the admin token never
// leaves the token file and the sign-in link.
type session struct {
	id      string
	csrf    string
	expires time.Time // zero: never (desktop)
	desktop bool
}

type sessions struct {
	mu sync.Mutex
	m  map[string]*session
}

func newSessions() *sessions { return &sessions{m: map[string]*session{}} }

func (ss *sessions) start(now time.Time, ttl time.Duration) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var oldest *session
	for id, x := range ss.m {
		if !now.Before(x.expires) {
			delete(ss.m, id)
		} else if oldest == nil || x.expires.Before(oldest.expires) {
			oldest = x
		}
	}
	if len(ss.m) >= maxSessions && oldest != nil {
		delete(ss.m, oldest.id)
	}
	x := &session{id: newSecret(), csrf: newSecret(), expires: now.Add(ttl)}
	ss.m[x.id] = x
	return x
}

func (ss *sessions) get(id string, now time.Time) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	x := ss.m[id]
	if x == nil {
		return nil
	}
	if !now.Before(x.expires) {
		delete(ss.m, id)
		return nil
	}
	return x
}

// newSecret returns 32 random bytes, base64url without padding.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand crashes the program instead)
	return base64.RawURLEncoding.EncodeToString(b)
}

// loginLimiter caps failed sign-ins for the whole listener (everyone is 127.0.0.1). While it is
// full, wrong tokens get 429; the right one still signs in.
type loginLimiter struct {
	mu    sync.Mutex
	fails []time.Time
}

// wait returns how long sign-ins are refused; 0 when they are allowed.
func (l *loginLimiter) wait(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	keep := l.fails[:0]
	for _, t := range l.fails {
		if now.Sub(t) < loginFailWindow {
			keep = append(keep, t)
		}
	}
	l.fails = keep
	if len(l.fails) < loginMaxFails {
		return 0
	}
	return l.fails[0].Add(loginFailWindow).Sub(now)
}

func (l *loginLimiter) fail(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fails = append(l.fails, now)
}

// serveLogin answers GET /login?token=…[&return_to=/path]: a new session and 303 to the page.
func (s *Server) serveLogin(w http.ResponseWriter, r *http.Request) {
	if !safeMethod(r.Method) {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	now := s.cfg.Now()
	q := r.URL.Query()
	token := q.Get("token")
	if token == "" {
		http.Error(w, "the sign-in link has no token: open the link printed by `aether node serve`", http.StatusBadRequest)
		return
	}
	// The right token always signs in: nobody else's wrong guesses can lock the owner out, and
	// a 256-bit token leaves a guesser nothing to learn from that.
	if s.cfg.Token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.Token)) != 1 {
		if d := s.limiter.wait(now); d > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int((d+time.Second-1)/time.Second)))
			s.reject(w, r, http.StatusTooManyRequests, "login-rate", "too many failed sign-ins; try again in a minute")
			return
		}
		// A web page can send the owner's browser here with any token; only guesses made on
		// this machine, not from another site, use up the budget.
		if r.Header.Get("Sec-Fetch-Site") != "cross-site" {
			s.limiter.fail(now)
		}
		s.reject(w, r, http.StatusForbidden, "login-token", "this sign-in token is not valid: open the link printed by `aether node serve`")
		return
	}
	x := s.sessions.start(now, s.cfg.SessionTTL)
	http.SetCookie(w, &http.Cookie{
		Name:     CookieName,
		Value:    x.id,
		Path:     "/",
		MaxAge:   int(s.cfg.SessionTTL / time.Second),
		Secure:   true,
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
	})
	s.log.Info("admin session started")
	w.Header().Set("Location", returnTo(q.Get("return_to")))
	w.WriteHeader(http.StatusSeeOther)
}

// returnTo accepts only a path on this server (C11); anything else lands on the consent page.
func returnTo(v string) string {
	if v == "" || v[0] != '/' || len(v) > 2048 {
		return defaultReturnTo
	}
	for i := 0; i < len(v); i++ {
		// Browsers drop tabs and newlines inside URLs ("/\t/evil" becomes "//evil") and treat
		// "\" like "/" ("/\evil"): refuse them all, not just the leading pair.
		if c := v[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return defaultReturnTo
		}
	}
	if len(v) > 1 && v[1] == '/' {
		return defaultReturnTo
	}
	u, err := url.Parse(v)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return defaultReturnTo
	}
	return v
}

// sessionFor returns the request's session, or nil.
func (s *Server) sessionFor(r *http.Request, desktop bool) *session {
	if desktop {
		return s.desktop
	}
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return nil
	}
	return s.sessions.get(c.Value, s.cfg.Now())
}

func validCSRF(r *http.Request, x *session) bool {
	got := r.Header.Get("X-CSRF-Token")
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(x.csrf)) == 1
}
