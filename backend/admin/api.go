package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/version"
)

type ctxKey struct{}

// errorBody is every error answer of the API.
type errorBody struct {
	Error  string             `json:"error"`
	Status string             `json:"status,omitempty"`
	Fields []owner.FieldError `json:"fields,omitempty"`
}

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/session", get(s.getSession))
	mux.HandleFunc("/api/status", get(s.getStatus))
	mux.HandleFunc("/api/consent", get(s.getConsent))
	mux.HandleFunc("/api/consent/{id}/decision", post(s.postDecision))
	mux.HandleFunc("/api/consent/deny-issuer", post(s.postDenyIssuer))
	mux.HandleFunc("/api/grants", get(s.getGrants))
	mux.HandleFunc("/api/grants/{id}/revoke", post(s.postRevoke))
	mux.HandleFunc("/api/receipts", get(s.getReceipts))
	mux.HandleFunc("/api/receipts/export", get(s.exportReceipts))
	mux.HandleFunc("/api/receipts/{id}", get(s.getReceipt))
	mux.HandleFunc("/api/brands", get(s.getBrands))
	mux.HandleFunc("/api/brands/{id}", methods(map[string]http.HandlerFunc{"PUT": s.putBrand, "DELETE": s.deleteBrand}))
	mux.HandleFunc("/api/events", get(s.getEvents))
	mux.HandleFunc("/api/codex/download", methods(map[string]http.HandlerFunc{"GET": s.getCodexDownload, "POST": s.postCodexDownload}))
	mux.HandleFunc("/api/codex/path", methods(map[string]http.HandlerFunc{"PUT": s.putCodexPath}))
	mux.HandleFunc("/api/model", methods(map[string]http.HandlerFunc{"GET": s.getModel, "PUT": s.putModel}))
	mux.HandleFunc("/api/model/check", post(s.postModelCheck))
	mux.HandleFunc("/api/reachability/funnel", post(s.postFunnel))
	mux.HandleFunc("/api/reachability/use", post(s.postUseFunnelURL))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, errorBody{Error: "no such API: " + r.URL.Path})
	})
	return mux
}

// get and post route one method; others get a JSON 405.
func get(h http.HandlerFunc) http.HandlerFunc { return methods(map[string]http.HandlerFunc{"GET": h}) }
func post(h http.HandlerFunc) http.HandlerFunc {
	return methods(map[string]http.HandlerFunc{"POST": h})
}

// methods dispatches on the method and answers others with a JSON 405.
func methods(hs map[string]http.HandlerFunc) http.HandlerFunc {
	allow := make([]string, 0, len(hs))
	for m := range hs {
		allow = append(allow, m)
	}
	slices.Sort(allow)
	return func(w http.ResponseWriter, r *http.Request) {
		if h := hs[r.Method]; h != nil {
			h(w, r)
			return
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, errorBody{Error: "method not allowed"})
	}
}

// serveAPI checks the session (401) and, for non-GET calls, its CSRF token (403) before routing,
// so that nothing about the API is visible without a session.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, desktop bool) {
	x := s.sessionFor(r, desktop)
	if x == nil {
		s.reject(w, r, http.StatusUnauthorized, "no-session", "sign in required")
		return
	}
	if !desktop && s.originRequired(r) {
		s.reject(w, r, http.StatusForbidden, "origin", "cross-origin request refused")
		return
	}
	if !safeMethod(r.Method) && !validCSRF(r, x) {
		s.reject(w, r, http.StatusForbidden, "csrf", "missing or invalid CSRF token")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	s.api.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, x)))
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	x := r.Context().Value(ctxKey{}).(*session)
	writeJSON(w, http.StatusOK, struct {
		CSRFToken string `json:"csrfToken"`
		Desktop   bool   `json:"desktop"`
	}{x.csrf, x.desktop})
}

func (s *Server) getStatus(w http.ResponseWriter, r *http.Request) {
	st, err := s.b.Status(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if st.Admin.URL == "" && len(s.hosts) > 0 {
		st.Admin.URL = "https://" + s.cfg.Addr
	}
	if st.Version == "" {
		st.Version = version.String()
	}
	st.Brands = nonNil(st.Brands)
	st.LastReceipts = nonNil(st.LastReceipts)
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) getConsent(w http.ResponseWriter, r *http.Request) {
	reqs, err := s.b.Pending(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := map[string]any{"requests": nonNil(reqs)}
	if code := r.URL.Query().Get("user_code"); code != "" {
		lookup, err := s.b.LookupCode(r.Context(), code)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out["lookup"] = lookup
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) postDecision(w http.ResponseWriter, r *http.Request) {
	var req owner.DecisionRequest
	if !s.decode(w, r, &req) {
		return
	}
	if msg := checkDecision(req); msg != "" {
		writeError(w, http.StatusBadRequest, errorBody{Error: msg})
		return
	}
	res, err := s.b.Decide(r.Context(), r.PathValue("id"), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) postDenyIssuer(w http.ResponseWriter, r *http.Request) {
	var req owner.DenyIssuerRequest
	if !s.decode(w, r, &req) {
		return
	}
	res, err := s.b.DenyIssuer(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func checkDecision(req owner.DecisionRequest) string {
	durationOK := req.Duration == owner.Duration1Day || req.Duration == owner.Duration30Days || req.Duration == owner.DurationForever
	switch {
	case req.UserCode == "" || len(req.UserCode) > 32:
		return "userCode is required (XXXX-XXXX)"
	case req.Decision != owner.DecisionAllow && req.Decision != owner.DecisionDeny:
		return `decision must be "allow" or "deny"`
	case req.Decision == owner.DecisionAllow && !durationOK, req.Decision == owner.DecisionDeny && req.Duration != "" && !durationOK:
		return `duration must be "1d", "30d" or "forever"`
	}
	return ""
}

func (s *Server) getGrants(w http.ResponseWriter, r *http.Request) {
	gs, err := s.b.Grants(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"grants": nonNil(gs)})
}

func (s *Server) postRevoke(w http.ResponseWriter, r *http.Request) {
	g, err := s.b.Revoke(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"grant": g})
}

func (s *Server) getReceipts(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r, owner.DefaultReceiptLimit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := s.b.Receipts(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page.Receipts = nonNil(page.Receipts)
	writeJSON(w, http.StatusOK, page)
}

func (s *Server) getReceipt(w http.ResponseWriter, r *http.Request) {
	d, err := s.b.Receipt(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) exportReceipts(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r, 0)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Content-Disposition", `attachment; filename="receipts.jsonl"`)
	ew := &exportWriter{w: w}
	if err := s.b.ExportReceipts(r.Context(), f, ew); err != nil {
		if !ew.wrote {
			h.Del("Content-Disposition")
			s.fail(w, r, err)
			return
		}
		// The status is already sent; the download ends short and the log says why.
		s.log.Error("admin: receipt export failed midway", "err", err)
	}
}

// exportWriter notes whether the export has started, so a failure before the first byte still
// gets a proper error answer.
type exportWriter struct {
	w     io.Writer
	wrote bool
}

func (e *exportWriter) Write(p []byte) (int, error) {
	e.wrote = true
	return e.w.Write(p)
}

// parseFilter reads the receipt query; limit is used when the query gives none.
func parseFilter(r *http.Request, limit int) (owner.ReceiptFilter, error) {
	q := r.URL.Query()
	f := owner.ReceiptFilter{Agent: q.Get("agent"), Brand: q.Get("brand"), Status: q.Get("status"), Cursor: q.Get("cursor"), Limit: limit}
	for name, v := range map[string]string{"agent": f.Agent, "brand": f.Brand, "status": f.Status, "cursor": f.Cursor} {
		if len(v) > 512 {
			return f, fmt.Errorf("%s is too long: %w", name, owner.ErrInvalid)
		}
	}
	for name, dst := range map[string]*time.Time{"from": &f.From, "to": &f.To} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return f, fmt.Errorf("%s must be an RFC 3339 time: %w", name, owner.ErrInvalid)
			}
			*dst = t
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > owner.MaxReceiptLimit {
			return f, fmt.Errorf("limit must be 1 to %d: %w", owner.MaxReceiptLimit, owner.ErrInvalid)
		}
		f.Limit = n
	}
	return f, nil
}

func (s *Server) getBrands(w http.ResponseWriter, r *http.Request) {
	v, err := s.b.Brands(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v.Brands = nonNil(v.Brands)
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) putBrand(w http.ResponseWriter, r *http.Request) {
	var b owner.Brand
	if !s.decode(w, r, &b) {
		return
	}
	id := r.PathValue("id")
	if string(b.ID) != id {
		s.fail(w, r, &owner.FieldErrors{Fields: []owner.FieldError{{Field: "id", Message: fmt.Sprintf("must be %q, the brand in the address", id)}}})
		return
	}
	bs, err := s.b.PutBrand(r.Context(), id, b)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"brands": nonNil(bs)})
}

func (s *Server) deleteBrand(w http.ResponseWriter, r *http.Request) {
	bs, err := s.b.DeleteBrand(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"brands": nonNil(bs)})
}

// decode reads a JSON body strictly: application/json, at most maxBody bytes (413), valid
// UTF-8, one object with known fields only and nothing after it (400).
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, errorBody{Error: "the body must be application/json"})
		return false
	}
	data, err := io.ReadAll(r.Body) // r.Body is capped in serveAPI
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, errorBody{Error: fmt.Sprintf("the body is larger than %d bytes", maxBody)})
			return false
		}
		writeError(w, http.StatusBadRequest, errorBody{Error: "cannot read the body"})
		return false
	}
	if !utf8.Valid(data) {
		writeError(w, http.StatusBadRequest, errorBody{Error: "the body is not valid UTF-8"})
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, errorBody{Error: "invalid JSON body: " + err.Error()})
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeError(w, http.StatusBadRequest, errorBody{Error: "invalid JSON body: data after the object"})
		return false
	}
	return true
}

// fail answers a Backend (or validation) error with its status: the one mapping of owner's
// error kinds, for the admin API and the node API alike.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var fe *owner.FieldErrors
	switch {
	case errors.As(err, &fe):
		msg := fe.Message
		if msg == "" {
			msg = "the brand is not valid"
		}
		writeError(w, http.StatusUnprocessableEntity, errorBody{Error: msg, Fields: nonNil(fe.Fields)})
	case errors.Is(err, owner.ErrAlreadyDecided):
		writeError(w, http.StatusConflict, errorBody{Error: err.Error(), Status: "already_decided"})
	case errors.Is(err, owner.ErrExpired):
		writeError(w, http.StatusGone, errorBody{Error: err.Error(), Status: "expired"})
	case errors.Is(err, owner.ErrCodeMismatch), errors.Is(err, owner.ErrInvalid):
		writeError(w, http.StatusBadRequest, errorBody{Error: err.Error()})
	case errors.Is(err, owner.ErrNotFound):
		writeError(w, http.StatusNotFound, errorBody{Error: err.Error()})
	case errors.Is(err, errClosed):
		writeError(w, http.StatusServiceUnavailable, errorBody{Error: err.Error()})
	default:
		// Only the signed-in owner reads this, and the precise cause is what helps them.
		s.log.Error("admin API call failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, errorBody{Error: err.Error()})
	}
}

func writeError(w http.ResponseWriter, code int, body errorBody) { writeJSON(w, code, body) }

func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		data = []byte(`{"error":"cannot encode the answer"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)+1))
	w.WriteHeader(code)
	_, _ = w.Write(append(data, '\n'))
}

// nonNil makes empty lists [] rather than null in JSON.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// FunnelRequest is the body of POST /api/reachability/funnel.
type FunnelRequest struct {
	On *bool `json:"on"`
}

// postFunnel turns publishing with Tailscale Funnel on or off (pact.funnel).
func (s *Server) postFunnel(w http.ResponseWriter, r *http.Request) {
	var req FunnelRequest
	if !s.decode(w, r, &req) {
		return
	}
	if req.On == nil {
		writeError(w, http.StatusBadRequest, errorBody{Error: `"on" (true or false) is required`})
		return
	}
	res, err := s.b.SetFunnel(r.Context(), *req.On)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// postUseFunnelURL makes the published Funnel address the publicUrl, the owner having
// confirmed it.
func (s *Server) postUseFunnelURL(w http.ResponseWriter, r *http.Request) {
	res, err := s.b.UseFunnelURL(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
