package devices

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"
)

// Web Push (RFC 8030) with the payload encrypted for the device (RFC 8291) and the node
// identified by its VAPID key (RFC 8292): the push service sees the device's endpoint, the
// node's public key and ciphertext, never the notice (docs/threats.md O3).

// Subscription is a browser's push subscription (PushSubscription.toJSON()).
type Subscription struct {
	Endpoint string `json:"endpoint"`
	Keys     struct {
		P256dh string `json:"p256dh"`
		Auth   string `json:"auth"`
	} `json:"keys"`
}

// Notice is what a push says of a new consent request: enough to recognise it and open it,
// nothing an agent could use (no grant, no token, no link that decides).
type Notice struct {
	ID    string `json:"id"`    // the request, to open it
	Site  string `json:"site"`  // the agent's site
	Brand string `json:"brand"` // the brand's name
	Code  string `json:"code"`  // the user code the agent shows
}

// pushTTL is how long (seconds) a push service keeps a notice for a device that is off: about
// a device flow's life, after which the request has expired anyway.
const pushTTL = 15 * 60

type vapidKey struct {
	Public  string `json:"public"`
	Private string `json:"private"`
}

// Push sends notices to the subscribed devices of a Store.
type Push struct {
	Store *Store
	// Client sends to the push services; nil means publicClient. Tests set one that reaches
	// their push service on loopback.
	Client *http.Client
	// Subscriber is the VAPID "sub": a mailto: or https: address of the node.
	Subscriber string
}

// PublicKey is the node's VAPID public key (base64url, uncompressed P-256), which a browser
// subscribes with (applicationServerKey); made on first use and kept in the devices file.
func (s *Store) PublicKey() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, err := s.vapidLocked()
	if err != nil {
		return "", err
	}
	return k.Public, nil
}

func (s *Store) vapidLocked() (vapidKey, error) {
	if s.f.VAPID != nil {
		return *s.f.VAPID, nil
	}
	priv, pub, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		return vapidKey{}, err
	}
	s.f.VAPID = &vapidKey{Public: pub, Private: priv}
	if err := s.saveLocked(); err != nil {
		s.f.VAPID = nil
		return vapidKey{}, err
	}
	return *s.f.VAPID, nil
}

// Subscribe sets device id's push subscription (nil: none).
func (s *Store) Subscribe(id string, sub *Subscription) error {
	if sub != nil {
		if err := sub.check(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.findLocked(func(r *record) bool { return r.ID == id })
	if r == nil {
		return ErrNotFound
	}
	old := r.Sub
	r.Sub = sub
	if err := s.saveLocked(); err != nil {
		r.Sub = old
		return err
	}
	return nil
}

// ErrSubscription is a subscription the node cannot push to.
var ErrSubscription = errors.New("not a usable push subscription")

func (sub *Subscription) check() error {
	u, err := url.Parse(sub.Endpoint)
	if err != nil || u.Scheme != "https" || u.Host == "" || len(sub.Endpoint) > 2048 {
		return fmt.Errorf("%w: the endpoint must be an https:// URL", ErrSubscription)
	}
	p, err := base64.RawURLEncoding.DecodeString(sub.Keys.P256dh)
	if err != nil || len(p) != 65 || p[0] != 4 {
		return fmt.Errorf("%w: keys.p256dh must be an uncompressed P-256 point in base64url", ErrSubscription)
	}
	a, err := base64.RawURLEncoding.DecodeString(sub.Keys.Auth)
	if err != nil || len(a) != 16 {
		return fmt.Errorf("%w: keys.auth must be 16 bytes in base64url", ErrSubscription)
	}
	return nil
}

// Send pushes n to every subscribed device and returns how many push services took it. A
// subscription its push service says is gone (404, 410) is dropped.
func (p *Push) Send(ctx context.Context, n Notice) (int, error) {
	msg, err := json.Marshal(n)
	if err != nil {
		return 0, err
	}
	s := p.Store
	s.mu.Lock()
	key, err := s.vapidLocked()
	type target struct {
		id  string
		sub Subscription
	}
	var targets []target
	for _, r := range s.f.Devices {
		if r.Sub != nil {
			targets = append(targets, target{r.ID, *r.Sub})
		}
	}
	s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	client := p.Client
	if client == nil {
		client = publicClient()
	}
	sub := p.Subscriber
	if sub == "" {
		sub = "mailto:owner@aether.invalid"
	}
	sent := 0
	var errs []error
	for _, t := range targets {
		ws := &webpush.Subscription{Endpoint: t.sub.Endpoint, Keys: webpush.Keys{P256dh: t.sub.Keys.P256dh, Auth: t.sub.Keys.Auth}}
		resp, err := webpush.SendNotificationWithContext(ctx, msg, ws, &webpush.Options{
			HTTPClient: client, Subscriber: sub, TTL: pushTTL, Urgency: webpush.UrgencyHigh,
			VAPIDPublicKey: key.Public, VAPIDPrivateKey: key.Private,
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
			_ = s.Subscribe(t.id, nil)
			errs = append(errs, fmt.Errorf("device %s: its push subscription is gone (%s)", t.id, resp.Status))
		case resp.StatusCode/100 != 2:
			errs = append(errs, fmt.Errorf("device %s: the push service answered %s", t.id, resp.Status))
		default:
			sent++
		}
	}
	return sent, errors.Join(errs...)
}

// publicClient posts to push services, which are on the internet: a subscription's endpoint is
// a paired device's word, so the node connects to no address of this machine, its networks or
// the tailnet's, and follows no redirect (docs/threats.md O7).
func publicClient() *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, Control: refuseNonPublic}
	return &http.Client{
		Timeout:       30 * time.Second,
		Transport:     &http.Transport{DialContext: d.DialContext, TLSHandshakeTimeout: 10 * time.Second},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// cgnat holds the tailnet's addresses (Tailscale's 100.64.0.0/10).
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// refuseNonPublic refuses, at the moment of connecting (so a name that resolves, or rebinds,
// to such an address is refused too), every address that is not public unicast.
func refuseNonPublic(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return err
	}
	a := ap.Addr().Unmap()
	if !a.IsGlobalUnicast() || a.IsPrivate() || cgnat.Contains(a) {
		return fmt.Errorf("%w: its endpoint is at %s, not a public address", ErrSubscription, a)
	}
	return nil
}
