package reach

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"tailscale.com/client/local"
	"tailscale.com/tailcfg"
)

// The owner's door on the tailnet: :443 of the device's ts.net name, for the tailnet's own
// peers only (tsnet's Listen, never the Funnel listener), and among them only the devices of
// the Tailscale user this node is logged in as. Tagged devices, devices shared in from other
// tailnets and other users' devices get 403 before the handler (docs/threats.md O4). What the
// handler is given of the caller is a Peer on the request's context.

// Peer is the tailnet device a request on the owner's door comes from.
type Peer struct {
	Node string // its stable node id: what a device session is bound to
	Name string // its name on the tailnet
	Host string // this node's own ts.net name, the Host the owner's pages answer to
}

type peerKey struct{}

// PeerOf is the calling device of a request served on the owner's door.
func PeerOf(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	return p, ok
}

// listenTailnet opens the owner's door and serves Config.Tailnet on it, once per run.
func (p *Publisher) listenTailnet(lc *local.Client, self tailcfg.UserID, host string) error {
	var ln net.Listener
	var err error
	if p.cfg.TLS != nil {
		if ln, err = p.srv.Listen("tcp", ":443"); err == nil {
			ln = tls.NewListener(ln, p.cfg.TLS)
		}
	} else {
		ln, err = p.srv.ListenTLS("tcp", ":443")
	}
	if err != nil {
		return err
	}
	hs := &http.Server{
		Handler:           ownerOnly(lc, self, host, p.cfg.Tailnet),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       2 * time.Minute,
	}
	p.mu.Lock()
	p.tailnet = hs
	p.mu.Unlock()
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.cfg.Logger.Error("the owner's tailnet listener stopped", "err", err)
		}
	}()
	return nil
}

// ownerOnly lets through requests from untagged devices of the user self, with their Peer.
func ownerOnly(lc *local.Client, self tailcfg.UserID, host string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, err := lc.WhoIs(r.Context(), r.RemoteAddr)
		switch {
		case err != nil || who.Node == nil:
			http.Error(w, "unknown tailnet device", http.StatusForbidden)
			return
		case who.Node.IsTagged():
			http.Error(w, "a tagged device is not the owner's", http.StatusForbidden)
			return
		case !who.Node.Sharer.IsZero():
			http.Error(w, "a device shared in from another tailnet is not the owner's", http.StatusForbidden)
			return
		case who.Node.User != self || who.UserProfile == nil || who.UserProfile.ID != self:
			http.Error(w, "only the devices of the Tailscale user this node is signed in as", http.StatusForbidden)
			return
		}
		r.Header.Del("Forwarded")
		r.Header.Del("X-Forwarded-For")
		ctx := context.WithValue(r.Context(), peerKey{}, Peer{Node: string(who.Node.StableID), Name: deviceName(who.Node), Host: host})
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// deviceName is a device's short name on the tailnet.
func deviceName(n *tailcfg.Node) string {
	if n.ComputedName != "" {
		return n.ComputedName
	}
	name, _, _ := strings.Cut(n.Name, ".")
	return name
}
