package admin

import (
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/aether/aether/backend/owner"
)

// serveUI answers the pages and the built assets; index is the page of every client-side route
// (the phone's pages on the tailnet). Pages need no session: without one the UI shows only the
// sign-in explanation, because /api/session answers 401.
func (s *Server) serveUI(w http.ResponseWriter, r *http.Request, browser bool, index string) {
	if !safeMethod(r.Method) {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := path.Clean("/" + r.URL.Path)
	if last := path.Base(p); !strings.Contains(last, ".") || p == "/"+index {
		// A client-side route (/, /pact/consent, /sharing, …): the UI decides what to show.
		if browser && p == "/pact/consent" && r.Method == http.MethodGet && s.cfg.OnConsentLink != nil {
			if code := r.URL.Query().Get("user_code"); owner.PlausibleUserCode(code) {
				s.cfg.OnConsentLink(code)
			}
		}
		s.serveFile(w, r, index)
		return
	}
	s.serveFile(w, r, strings.TrimPrefix(p, "/"))
}

func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, name string) {
	if s.cfg.UI == nil || !fs.ValidPath(name) {
		http.NotFound(w, r)
		return
	}
	data, err := fs.ReadFile(s.cfg.UI, name)
	if err != nil {
		if name == "index.html" || name == "phone.html" {
			http.Error(w, "the admin UI is not built into this binary", http.StatusNotFound)
			return
		}
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	ctype := mime.TypeByExtension(path.Ext(name))
	if path.Ext(name) == ".webmanifest" { // the phone's web app manifest; not in every system's MIME table
		ctype = "application/manifest+json"
	}
	if ctype == "" {
		ctype = http.DetectContentType(data)
	}
	h.Set("Content-Type", ctype)
	h.Set("Content-Length", strconv.Itoa(len(data)))
	if strings.HasPrefix(name, "assets/") {
		// Vite puts a content hash in every name under assets/: they never change.
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	}
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(data)
	}
}
