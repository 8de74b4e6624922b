package admin

import (
	"net/http"

	"github.com/aether/aether/backend/owner"
)

// The Status page's Codex and model cards (docs/admin-api.md, "Codex and its model"). No answer
// ever holds the key: ModelStatus says only whether one is set.

func (s *Server) getCodexDownload(w http.ResponseWriter, r *http.Request) {
	d, err := s.b.CodexDownload()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) postCodexDownload(w http.ResponseWriter, r *http.Request) {
	d, err := s.b.GetCodex()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, d)
}

func (s *Server) deleteCodexDownload(w http.ResponseWriter, r *http.Request) {
	d, err := s.b.CancelCodex()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) putCodexPath(w http.ResponseWriter, r *http.Request) {
	var req owner.CodexPathRequest
	if !s.decode(w, r, &req) {
		return
	}
	m, err := s.b.UseCodex(req.Path)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	m, err := s.b.Model()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) putModel(w http.ResponseWriter, r *http.Request) {
	var req owner.ModelRequest
	if !s.decode(w, r, &req) {
		return
	}
	m, err := s.b.SetModel(req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) postModelCheck(w http.ResponseWriter, r *http.Request) {
	c, err := s.b.CheckModel(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}
