package admin

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"mime"
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
// leaves the token file (and the sign-in page's form, A3).
type session struct {
	id      string
	csrf    string
	expires time.Time // zero: never (desktop)
	desktop bool
	device  string // a paired device's id (devices.go): its session lives in devices.Store
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

func (ss *sessions) clear() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	clear(ss.m)
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

// serveLogin starts a session and answers 303 to return_to (a path on this server): GET
// /login?code=… with the one-time code of a sign-in link (A1, A2), or POST /login with the admin
// token in a form body, as the sign-in page sends it. The token is never taken from a URL (A3).
func (s *Server) serveLogin(w http.ResponseWriter, r *http.Request) {
	now := s.cfg.Now()
	var ok bool
	var back, wrong string
	switch r.Method {
	case http.MethodGet:
		q := r.URL.Query()
		if q.Has("token") {
			// An old link, or someone's attempt: refused before anything else, never logged with it.
			s.reject(w, r, http.StatusBadRequest, "login-token-in-url", "the admin token is never accepted in a link: "+getLink)
			return
		}
		code := q.Get("code")
		if code == "" {
			http.Error(w, "the sign-in link has no code: "+getLink, http.StatusBadRequest)
			return
		}
		back, wrong = q.Get("return_to"), "this sign-in link was already used, has expired or is not valid: "+getLink
		ok = s.codes.redeem(code, now)
	case http.MethodPost:
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
			http.Error(w, "send the admin token as a form (application/x-www-form-urlencoded)", http.StatusUnsupportedMediaType)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
		if err := r.ParseForm(); err != nil || r.PostForm.Get("token") == "" {
			http.Error(w, "the form has no admin token", http.StatusBadRequest)
			return
		}
		back, wrong = r.PostForm.Get("return_to"), "this admin token is not valid: it is the one in admin.token in the node's data dir"
		ok = s.validToken(r.PostForm.Get("token"))
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	// The right code or token always signs in: nobody else's wrong guesses can lock the owner
	// out (A5), and 256 random bits leave a guesser nothing to learn from that.
	if !ok {
		if d := s.limiter.wait(now); d > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int((d+time.Second-1)/time.Second)))
			s.reject(w, r, http.StatusTooManyRequests, "login-rate", "too many failed sign-ins; try again in a minute")
			return
		}
		// A web page can send the owner's browser here with any code; only guesses made on
		// this machine, not from another site, use up the budget.
		if r.Header.Get("Sec-Fetch-Site") != "cross-site" {
			s.limiter.fail(now)
		}
		s.reject(w, r, http.StatusForbidden, "login-failed", wrong)
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
	via := "sign-in link"
	if r.Method == http.MethodPost {
		via = "admin token"
	}
	s.log.Info("admin session started", "via", via)
	w.Header().Set("Location", returnTo(back))
	w.WriteHeader(http.StatusSeeOther)
}

const getLink = "get a new one with `aether admin link`, or paste the admin token on the sign-in page"

// A sign-in code is what a sign-in link carries instead of the admin token (A1): 256 random
// bits that start one session, once, within signInCodeTTL. Only their SHA-256 is kept, in
// memory; at most maxSignInCodes are live (minting more forgets the oldest).
const (
	signInCodeTTL  = 5 * time.Minute
	maxSignInCodes = 16
)

type signInCodes struct {
	mu    sync.Mutex
	m     map[[32]byte]time.Time // when each expires
	order [][32]byte             // in the order minted; may name used ones
}

func (c *signInCodes) mint(now time.Time) string {
	code := newSecret()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[[32]byte]time.Time{}
	}
	live := c.order[:0]
	for _, h := range c.order {
		if exp, ok := c.m[h]; ok && now.Before(exp) {
			live = append(live, h)
		} else {
			delete(c.m, h)
		}
	}
	c.order = live
	if len(c.order) >= maxSignInCodes {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	h := sha256.Sum256([]byte(code))
	c.m[h] = now.Add(signInCodeTTL)
	c.order = append(c.order, h)
	return code
}

// redeem reports whether code is live, and makes it used.
func (c *signInCodes) redeem(code string, now time.Time) bool {
	h := sha256.Sum256([]byte(code))
	c.mu.Lock()
	defer c.mu.Unlock()
	exp, ok := c.m[h]
	delete(c.m, h)
	return ok && now.Before(exp)
}

func (c *signInCodes) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
	c.order = nil
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
