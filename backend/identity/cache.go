package identity

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// issuer is the cache entry of one exact iss string. Keys are read lock-free on the warm path;
// mu guards the fetch state.
type issuer struct {
	name     string
	scope    scope
	keys     atomic.Pointer[keySet]
	lastUsed atomic.Int64 // unix nanos, for eviction

	mu          sync.Mutex
	flight      *flight   // the one fetch in progress (single flight, J15)
	failUntil   time.Time // negative cache (J9, J14)
	failErr     *Error
	lastAttempt time.Time // last fetch started, for the unknown-kid window (J5)
}

type flight struct {
	done   chan struct{}
	client string // whose fetch slot it holds
	err    *Error // set before done is closed
}

// issuerFor returns the cache entry for iss, creating it for a new issuer when the client's
// budget and the cache allow (J18, F5).
func (v *Verifier) issuerFor(iss, client string, now time.Time) (*issuer, *Error) {
	v.mu.RLock()
	is := v.issuers[iss]
	v.mu.RUnlock()
	if is != nil {
		is.lastUsed.Store(now.UnixNano())
		return is, nil
	}
	sc, err := issuerScope(iss, v.cfg.AllowInsecureLocalIssuers)
	if err != nil {
		return nil, err
	}
	if ok, wait := v.newIssuers.Take(client, now); !ok {
		return nil, rateLimited(fmt.Sprintf("this client presented more than %d new issuers (one more every %d s)",
			v.cfg.NewIssuerBurst, int(v.cfg.NewIssuerEvery/time.Second)), wait)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if is = v.issuers[iss]; is == nil {
		if len(v.issuers) >= v.cfg.MaxIssuers {
			v.evictLocked()
		}
		is = &issuer{name: iss, scope: sc}
		v.issuers[iss] = is
	}
	is.lastUsed.Store(now.UnixNano())
	return is, nil
}

// evictLocked drops the least recently used issuer. A linear scan is fine: it only runs when
// a new issuer arrives, which is rate limited.
func (v *Verifier) evictLocked() {
	var oldest *issuer
	for _, is := range v.issuers {
		if oldest == nil || is.lastUsed.Load() < oldest.lastUsed.Load() {
			oldest = is
		}
	}
	if oldest != nil {
		delete(v.issuers, oldest.name)
	}
}

// startFetch joins the issuer's fetch in flight or starts one for client. It fails at once
// while the issuer is negative-cached, or when the global fetch limit or the client's share of
// it is reached (F6), so it never blocks. A slot frees within FetchTimeout.
func (v *Verifier) startFetch(is *issuer, client string, now time.Time) (*flight, *Error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.flight != nil {
		return is.flight, nil
	}
	if now.Before(is.failUntil) {
		return nil, is.failErr
	}
	if !v.clientSlot.Take(client) {
		return nil, rateLimited(fmt.Sprintf("this client has %d issuer key fetches in progress, its most", v.clientSlot.Max()), v.cfg.FetchTimeout)
	}
	select {
	case v.fetchSlots <- struct{}{}:
	default:
		v.clientSlot.Release(client)
		return nil, rateLimited("too many issuer key fetches in progress", v.cfg.FetchTimeout)
	}
	fl := &flight{done: make(chan struct{}), client: client}
	is.flight = fl
	is.lastAttempt = now
	v.fetches.Add(1)
	go v.runFetch(is, fl)
	return fl, nil
}

// runFetch runs detached from any request: its deadline is the whole-fetch timeout, and every
// waiter gives up on its own terms while the fetch finishes for the next request.
func (v *Verifier) runFetch(is *issuer, fl *flight) {
	defer v.fetches.Done()
	ctx, cancel := context.WithTimeout(context.Background(), v.cfg.FetchTimeout)
	ks, err := v.fetchKeys(ctx, is)
	cancel()
	<-v.fetchSlots
	v.clientSlot.Release(fl.client)

	is.mu.Lock()
	if err != nil {
		// Old keys stay in place: they remain usable until MaxStaleness (J16, J29).
		is.failUntil = v.cfg.Now().Add(v.cfg.NegativeTTL)
		is.failErr = err
	} else {
		is.keys.Store(ks)
		is.failUntil = time.Time{}
		is.failErr = nil
	}
	is.flight = nil
	fl.err = err
	is.mu.Unlock()
	close(fl.done)
	if err != nil {
		v.cfg.Logger.Warn("identity: issuer key fetch failed", slog.String("issuer", is.name),
			slog.String("reason", err.Code), slog.Any("error", err.Unwrap()))
	}
}

// wait blocks until the flight ends, ctx ends, or max passes (max 0: no limit of its own).
func wait(ctx context.Context, fl *flight, max time.Duration) *Error {
	var timeout <-chan time.Time
	if max > 0 {
		t := time.NewTimer(max)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-fl.done:
		return fl.err
	case <-ctx.Done():
		return newErr(CodeCanceled, "the request ended while the issuer's keys were fetched", ctx.Err())
	case <-timeout:
		return errKIDUnknown
	}
}

// clientKey is what a client is counted under: its IP, IPv6 per /64 so that one host cannot
// rotate through its own prefix, and a host:port (an unparsed RemoteAddr) as its host so that
// every connection does not get its own budget.
func clientKey(clientIP string) string {
	a, err := netip.ParseAddr(clientIP)
	if err != nil {
		ap, perr := netip.ParseAddrPort(clientIP)
		a, err = ap.Addr(), perr
	}
	if err != nil {
		return clientIP
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		a = netip.PrefixFrom(a, 64).Masked().Addr()
	}
	return a.String()
}
