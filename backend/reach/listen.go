package reach

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"time"

	"tailscale.com/ipn"
	"tailscale.com/tsnet"
)

// listen opens the Funnel listener on :443 and serves the handler on it. FunnelOnly: the
// tailnet's own peers do not get this door either, only the Funnel ingress.
func (p *Publisher) listen() error {
	opts := []tsnet.FunnelOption{tsnet.FunnelOnly()}
	if p.cfg.TLS != nil {
		opts = append(opts, tsnet.FunnelTLSConfig(p.cfg.TLS))
	}
	ln, err := p.srv.ListenFunnel("tcp", ":443", opts...)
	if err != nil {
		return err
	}
	// As the gateway listener (node.Start): no ReadTimeout, the gateway gives each body its own
	// deadline and streams stay open while their turn runs.
	hs := &http.Server{
		Handler:           fromFunnel(p.cfg.Handler),
		ConnContext:       funnelSource,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       2 * time.Minute,
	}
	p.mu.Lock()
	p.http = hs
	p.mu.Unlock()
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.cfg.Logger.Error("the Funnel listener stopped", "err", err)
		}
	}()
	return nil
}

type srcKey struct{}

// funnelSource keeps the agent's own address, which the Funnel ingress reports with each
// connection (ipn.FunnelConn.Src); the TCP peer is the ingress node.
func funnelSource(ctx context.Context, c net.Conn) context.Context {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return ctx
	}
	if fc, ok := tc.NetConn().(*ipn.FunnelConn); ok && fc.Src.IsValid() {
		return context.WithValue(ctx, srcKey{}, fc.Src)
	}
	return ctx
}

// fromFunnel gives the handler the agent's address as the request's peer, so per-client
// limits count each agent under its own (docs/wire.md, "Limits"), and drops forwarding
// headers: the ingress is the only hop and it said who the client is. A connection without a
// reported source is refused.
func fromFunnel(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		src, ok := r.Context().Value(srcKey{}).(netip.AddrPort)
		if !ok {
			http.Error(w, "not a Funnel connection", http.StatusForbidden)
			return
		}
		r.RemoteAddr = src.String()
		r.Header.Del("Forwarded")
		r.Header.Del("X-Forwarded-For")
		h.ServeHTTP(w, r)
	})
}
