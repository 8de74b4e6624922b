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
	"unicode/utf8"

	"github.com/aether/aether/backend/owner"
	"github.com/aether/aether/backend/version"
)

type ctxKey struct{}

// errorBody is every error answer of the API.
type errorBody = owner.ErrorBody

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
	mux.HandleFunc("/api/receipts/received", get(s.getReceived))
	mux.HandleFunc("/api/receipts/received/export", get(s.exportReceived))
	mux.HandleFunc("/api/agents", methods(map[string]http.HandlerFunc{"GET": s.getAgents, "POST": s.postAgent}))
	mux.HandleFunc("/api/agents/{name}", post(s.postAgentSwitch))
	mux.HandleFunc("/api/receipts/{id}", get(s.getReceipt))
	mux.HandleFunc("/api/brands", get(s.getBrands))
	mux.HandleFunc("/api/brands/{id}", methods(map[string]http.HandlerFunc{"PUT": s.putBrand, "DELETE": s.deleteBrand}))
	mux.HandleFunc("/api/events", get(s.getEvents))
	mux.HandleFunc("/api/codex/download", methods(map[string]http.HandlerFunc{"GET": s.getCodexDownload, "POST": s.postCodexDownload, "DELETE": s.deleteCodexDownload}))
	mux.HandleFunc("/api/codex/path", methods(map[string]http.HandlerFunc{"PUT": s.putCodexPath}))
	mux.HandleFunc("/api/model", methods(map[string]http.HandlerFunc{"GET": s.getModel, "PUT": s.putModel}))
	mux.HandleFunc("/api/model/check", post(s.postModelCheck))
	mux.HandleFunc("/api/reachability/funnel", post(s.postFunnel))
	mux.HandleFunc("/api/reachability/use", post(s.postUseFunnelURL))
	mux.HandleFunc("/api/reachability/check", post(s.postCheckReachability))
	mux.HandleFunc("/api/reachability/tailnet", post(s.postTailnet))
	mux.HandleFunc("/api/devices", get(s.getDevices))
	mux.HandleFunc("/api/devices/pair", post(s.postPair))
	mux.HandleFunc("/api/devices/{id}/revoke", post(s.postRevokeDevice))
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
	s.api.ServeHTTP(w, r.WithContext(withSession(r.Context(), x)))
}

func withSession(ctx context.Context, x *session) context.Context {
	return context.WithValue(ctx, ctxKey{}, x)
}

// sessionOf is the session serveAPI or serveDeviceAPI checked.
func sessionOf(r *http.Request) *session { return r.Context().Value(ctxKey{}).(*session) }

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	x := sessionOf(r)
	out := struct {
		CSRFToken string `json:"csrfToken"`
		Desktop   bool   `json:"desktop"`
		// A paired device's: its id and the node's VAPID key to subscribe to pushes with.
		Device  string `json:"device,omitempty"`
		PushKey string `json:"pushKey,omitempty"`
	}{CSRFToken: x.csrf, Desktop: x.desktop, Device: x.device}
	if x.device != "" {
		key, err := s.cfg.Devices.PublicKey()
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out.PushKey = key
	}
	writeJSON(w, http.StatusOK, out)
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
	out := owner.ConsentList{Requests: nonNil(reqs)}
	if code := r.URL.Query().Get("user_code"); code != "" {
		lookup, err := s.b.LookupCode(r.Context(), code)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out.Lookup = &lookup
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) postDecision(w http.ResponseWriter, r *http.Request) {
	var req owner.DecisionRequest
	if !s.decode(w, r, &req) {
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

func (s *Server) getGrants(w http.ResponseWriter, r *http.Request) {
	gs, err := s.b.Grants(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, owner.GrantList{Grants: nonNil(gs)})
}

func (s *Server) postRevoke(w http.ResponseWriter, r *http.Request) {
	g, err := s.b.Revoke(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, owner.GrantAnswer{Grant: g})
}

func (s *Server) getReceipts(w http.ResponseWriter, r *http.Request) {
	f, err := owner.ParseReceiptQuery(r.URL.Query(), owner.DefaultReceiptLimit)
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
	f, err := owner.ParseReceiptQuery(r.URL.Query(), 0)
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
	bs, err := s.b.PutBrand(r.Context(), r.PathValue("id"), b)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, owner.BrandList{Brands: nonNil(bs)})
}

func (s *Server) deleteBrand(w http.ResponseWriter, r *http.Request) {
	bs, err := s.b.DeleteBrand(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, owner.BrandList{Brands: nonNil(bs)})
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

// postFunnel turns publishing with Tailscale Funnel on or off (pact.funnel).
func (s *Server) postFunnel(w http.ResponseWriter, r *http.Request) {
	s.postSwitch(w, r, s.b.SetFunnel)
}

// postTailnet is the Reachability card's "Tailnet only": {"on": true|false}.
func (s *Server) postTailnet(w http.ResponseWriter, r *http.Request) {
	s.postSwitch(w, r, s.b.SetTailnet)
}

// postSwitch answers a Reachability switch's {"on": true|false} with set's Reachability.
func (s *Server) postSwitch(w http.ResponseWriter, r *http.Request, set func(context.Context, bool) (owner.Reachability, error)) {
	var req owner.FunnelRequest
	if !s.decode(w, r, &req) {
		return
	}
	if err := req.Validate(); err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := set(r.Context(), *req.On)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// postCheckReachability asks the published address again (the card's "Check again").
func (s *Server) postCheckReachability(w http.ResponseWriter, r *http.Request) {
	res, err := s.b.CheckReachability(r.Context())
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
