package admin

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"rsc.io/qr"

	"github.com/aether/aether/backend/devices"
)

// The owner's paired phones (docs/admin-api.md, "Phones"). On the admin listener and in the
// window the owner adds and removes them; on the tailnet (TailnetHandler) a paired phone sees
// only the consent pages and decides requests, with the same guards as the window: the Host,
// cross-origin checks, a session (here a device session, bound to its tailnet device) and
// CSRF on every change (docs/threats.md O1–O5).

// DeviceCookie carries a paired device's session secret; __Host- as CookieName.
const DeviceCookie = "__Host-aether_device"

// deviceCookieAge: a device stays paired until the owner removes it or rotates the admin
// token; browsers cap a cookie's life at 400 days.
const deviceCookieAge = 400 * 24 * time.Hour

// TailnetPeer is the tailnet device a request on the owner's tailnet door comes from, as the
// tailnet listener (reach) vouched for it: a device of the owner's own Tailscale user.
type TailnetPeer struct {
	Node string // stable node id: a device session is good only from its own node
	Name string // name on the tailnet, the paired device's name
	Host string // the node's own ts.net name: the only Host and Origin its pages answer
}

// TailnetHandler serves the owner's tailnet door: the pairing link, the phone's pages and the
// device API. Every request needs Config.TailnetPeer's word on its device.
func (s *Server) TailnetHandler() http.Handler { return &handler{s: s, tailnet: true} }

func (s *Server) serveTailnet(w http.ResponseWriter, r *http.Request) {
	var peer TailnetPeer
	ok := s.cfg.TailnetPeer != nil && s.cfg.Devices != nil
	if ok {
		peer, ok = s.cfg.TailnetPeer(r)
	}
	if !ok {
		s.reject(w, r, http.StatusForbidden, "tailnet-peer", "not a device of the owner's tailnet")
		return
	}
	if peer.Host == "" || !strings.EqualFold(r.Host, peer.Host) {
		s.reject(w, r, http.StatusMisdirectedRequest, "host", "unknown host")
		return
	}
	origin := "https://" + strings.ToLower(peer.Host)
	if reason := s.crossOrigin(r, func(o string) bool { return o == origin }); reason != "" {
		s.reject(w, r, http.StatusForbidden, reason, "cross-origin request refused")
		return
	}
	switch {
	case isAPI(r.URL.Path):
		s.serveDeviceAPI(w, r, peer, origin)
	case r.URL.Path == "/pair":
		s.servePair(w, r, peer)
	default:
		s.serveUI(w, r, false, "phone.html")
	}
}

// servePair redeems a pairing link (GET /pair?code=…): the device it is opened on, over the
// tailnet, becomes a paired device and gets its session cookie (O1).
func (s *Server) servePair(w http.ResponseWriter, r *http.Request, peer TailnetPeer) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	x, secret, err := s.cfg.Devices.Pair(r.URL.Query().Get("code"), peer.Node, peer.Name)
	if err != nil {
		s.reject(w, r, http.StatusForbidden, "pairing", err.Error())
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: DeviceCookie, Value: secret, Path: "/", MaxAge: int(deviceCookieAge / time.Second),
		Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode,
	})
	s.log.Info("a device was paired", "device", x.Device.Name, "id", x.Device.ID)
	w.Header().Set("Location", "/phone")
	w.WriteHeader(http.StatusSeeOther)
}

// serveDeviceAPI is the API a paired device may call: its session, the pending requests and
// decisions (and "Deny all from this issuer"), its push subscription. Nothing else of the owner's API is on the tailnet (O2).
func (s *Server) serveDeviceAPI(w http.ResponseWriter, r *http.Request, peer TailnetPeer, origin string) {
	c, err := r.Cookie(DeviceCookie)
	if err != nil || c.Value == "" {
		s.reject(w, r, http.StatusUnauthorized, "no-session", "this device is not paired: add it from the Aether window")
		return
	}
	x, err := s.cfg.Devices.Session(c.Value, peer.Node)
	switch {
	case errors.Is(err, devices.ErrOtherDevice):
		s.log.Warn("a device session was presented by another device (O5)", "device", peer.Name)
		s.reject(w, r, http.StatusForbidden, "other-device", err.Error())
		return
	case err != nil:
		s.reject(w, r, http.StatusUnauthorized, "no-session", err.Error())
		return
	}
	if !safeMethod(r.Method) && r.Header.Get("Origin") != origin {
		s.reject(w, r, http.StatusForbidden, "origin", "cross-origin request refused")
		return
	}
	sess := &session{csrf: x.CSRF, device: x.Device.ID}
	if !safeMethod(r.Method) && !validCSRF(r, sess) {
		s.reject(w, r, http.StatusForbidden, "csrf", "missing or invalid CSRF token")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	s.phoneAPI.ServeHTTP(w, r.WithContext(withSession(r.Context(), sess)))
}

func (s *Server) phoneRoutes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/session", get(s.getSession))
	mux.HandleFunc("/api/consent", get(s.getConsent))
	mux.HandleFunc("/api/consent/{id}/decision", post(s.postDecision))
	mux.HandleFunc("/api/consent/deny-issuer", post(s.postDenyIssuer))
	mux.HandleFunc("/api/device/push", methods(map[string]http.HandlerFunc{"PUT": s.putPush, "DELETE": s.deletePush}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, errorBody{Error: "no such API on a phone: " + r.URL.Path})
	})
	return mux
}

func (s *Server) putPush(w http.ResponseWriter, r *http.Request) {
	var sub devices.Subscription
	if !s.decode(w, r, &sub) {
		return
	}
	if err := s.cfg.Devices.Subscribe(sessionOf(r).device, &sub); err != nil {
		s.failDevice(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) deletePush(w http.ResponseWriter, r *http.Request) {
	if err := s.cfg.Devices.Subscribe(sessionOf(r).device, nil); err != nil {
		s.failDevice(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Pairing is the answer to "Add a phone": the link, as a QR code too, and until when it works.
type Pairing struct {
	Link      string    `json:"link"`
	QR        string    `json:"qr"` // data:image/png;base64,…
	ExpiresAt time.Time `json:"expiresAt"`
}

// DeviceList is the owner's paired devices and where the phone's pages are.
type DeviceList struct {
	Devices []devices.Device `json:"devices"`
	URL     string           `json:"url"` // https://<node>.<tailnet>.ts.net, "" while not on the tailnet
}

func (s *Server) tailnetHost() string {
	if s.cfg.TailnetHost == nil {
		return ""
	}
	return s.cfg.TailnetHost()
}

func (s *Server) getDevices(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Devices == nil {
		writeJSON(w, http.StatusOK, DeviceList{Devices: []devices.Device{}})
		return
	}
	out := DeviceList{Devices: s.cfg.Devices.List()}
	if h := s.tailnetHost(); h != "" {
		out.URL = "https://" + h
	}
	writeJSON(w, http.StatusOK, out)
}

// postPair mints a pairing link for the tailnet address; it needs the node on the tailnet.
func (s *Server) postPair(w http.ResponseWriter, r *http.Request) {
	host := s.tailnetHost()
	if s.cfg.Devices == nil || host == "" {
		writeError(w, http.StatusConflict, errorBody{Error: "the node is not on your tailnet: turn on Tailscale Funnel or tailnet access on the Status page first"})
		return
	}
	code, exp := s.cfg.Devices.NewPairing()
	link := (&url.URL{Scheme: "https", Host: host, Path: "/pair", RawQuery: "code=" + code}).String()
	img, err := qr.Encode(link, qr.M)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, Pairing{Link: link, QR: "data:image/png;base64," + base64.StdEncoding.EncodeToString(img.PNG()), ExpiresAt: exp})
}

func (s *Server) postRevokeDevice(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Devices == nil {
		s.failDevice(w, r, devices.ErrNotFound)
		return
	}
	if err := s.cfg.Devices.Revoke(r.PathValue("id")); err != nil {
		s.failDevice(w, r, err)
		return
	}
	s.log.Info("a paired device was removed", "id", r.PathValue("id"))
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) failDevice(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, devices.ErrNotFound):
		writeError(w, http.StatusNotFound, errorBody{Error: err.Error()})
	case errors.Is(err, devices.ErrSubscription):
		writeError(w, http.StatusBadRequest, errorBody{Error: err.Error()})
	default:
		s.fail(w, r, err)
	}
}
