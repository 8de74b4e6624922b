package identity

import (
	"context"
	"crypto/x509"
	"log/slog"
	"net"
	"net/netip"
	"time"
)

// DefaultDelegationType is the JWS "typ" of the node's delegation tokens. A token carrying it is
// never accepted as an identity (J25); the package that mints delegation tokens must use it.
const DefaultDelegationType = "pact-delegation+jwt"

// Config configures a Verifier. Only Audience is required; every zero limit takes its default.
type Config struct {
	// Audience is this gateway's publicUrl; a token's aud must contain it exactly.
	Audience string
	// NodeIssuer is the node's own publicUrl: tokens it issued (delegation tokens) are refused
	// as identities (J25, G9).
	NodeIssuer string
	// DelegationType is the refused "typ" header. Default DefaultDelegationType.
	DelegationType string
	// AllowInsecureLocalIssuers admits issuers on loopback (localhost, 127.0.0.0/8, ::1) over
	// http or https, for local tests. It never admits other private ranges.
	AllowInsecureLocalIssuers bool
	// OwnListeners are the node's own listeners as bound: no issuer fetch (discovery, jwks_uri,
	// redirect) connects to one (J31). A listener on loopback or on every address covers its
	// port on every loopback address.
	OwnListeners []netip.AddrPort

	// Leeway for exp, nbf and iat. Default 60s.
	Leeway time.Duration
	// MaxLifetime caps exp-iat. Default 1h.
	MaxLifetime time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time

	// LookupIP resolves issuer host names. Default net.DefaultResolver.LookupIP(ctx, "ip", host).
	LookupIP func(ctx context.Context, host string) ([]net.IP, error)
	// RootCAs verifies issuer TLS certificates. Default: the system roots.
	RootCAs *x509.CertPool
	// Dial connects to an address that passed every check (its scope, the node's own
	// listeners). Default: a net.Dialer. Tests route a public address to an issuer of theirs on
	// loopback, so a public issuer is tested without the loopback flag.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Logger receives key-fetch failures (with reason codes, never tokens). Default slog.Default().
	Logger *slog.Logger

	// MaxTokenBytes rejects longer tokens before parsing (J26). Default 8 KiB.
	MaxTokenBytes int
	// MaxKIDBytes caps the kid header (J6). Default 256.
	MaxKIDBytes int
	// FetchTimeout bounds one whole discovery + JWKS fetch (J15). Default 10s.
	FetchTimeout time.Duration
	// MaxBodyBytes caps each fetched document (J14). Default 512 KiB.
	MaxBodyBytes int64
	// MaxKeys caps the keys in one JWKS (J16). Default 100.
	MaxKeys int
	// MaxRedirects per request (J11). Default 3.
	MaxRedirects int
	// RefreshInterval: keys older than this are refreshed in the background while still used.
	// Default 1h.
	RefreshInterval time.Duration
	// MaxStaleness: keys older than this are no longer used when the issuer cannot be reached
	// (J29). Default 24h.
	MaxStaleness time.Duration
	// NegativeTTL: a failed fetch is not retried for this long (J9, J14). Default 1m.
	NegativeTTL time.Duration
	// UnknownKIDInterval: an unknown kid refreshes an issuer's keys at most once per interval,
	// counted from the last fetch (J5). Default 30s.
	UnknownKIDInterval time.Duration
	// UnknownKIDWait: how long a request with an unknown kid waits for that refresh (J5).
	// Default 2s.
	UnknownKIDWait time.Duration
	// MaxIssuers bounds the issuer cache; the least recently used entry is evicted. Default 1000.
	MaxIssuers int
	// NewIssuerBurst and NewIssuerEvery: per client IP (IPv6 per /64) token bucket for issuers
	// not yet cached (J18). The client is the real one, as the gateway resolves it through the
	// trusted proxies, so someone else's throwaway issuers never use up its budget (F5).
	// Default 10 and one per 6s.
	NewIssuerBurst int
	NewIssuerEvery time.Duration
	// MaxConcurrentFetches: global cap on fetches in flight; beyond it new issuers get
	// ErrRateLimited at once (J18). One client may hold a quarter of them (at least one), so
	// its slow issuers never take every slot (F6). Default 16.
	MaxConcurrentFetches int
}

func (c Config) withDefaults() Config {
	setDur := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	setInt := func(n *int, def int) {
		if *n <= 0 {
			*n = def
		}
	}
	if c.DelegationType == "" {
		c.DelegationType = DefaultDelegationType
	}
	setDur(&c.Leeway, 60*time.Second)
	setDur(&c.MaxLifetime, time.Hour)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.LookupIP == nil {
		c.LookupIP = func(ctx context.Context, host string) ([]net.IP, error) {
			return net.DefaultResolver.LookupIP(ctx, "ip", host)
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	setInt(&c.MaxTokenBytes, 8<<10)
	setInt(&c.MaxKIDBytes, 256)
	setDur(&c.FetchTimeout, 10*time.Second)
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 512 << 10
	}
	setInt(&c.MaxKeys, 100)
	setInt(&c.MaxRedirects, 3)
	setDur(&c.RefreshInterval, time.Hour)
	setDur(&c.MaxStaleness, 24*time.Hour)
	setDur(&c.NegativeTTL, time.Minute)
	setDur(&c.UnknownKIDInterval, 30*time.Second)
	setDur(&c.UnknownKIDWait, 2*time.Second)
	setInt(&c.MaxIssuers, 1000)
	setInt(&c.NewIssuerBurst, 10)
	setDur(&c.NewIssuerEvery, 6*time.Second)
	setInt(&c.MaxConcurrentFetches, 16)
	return c
}
