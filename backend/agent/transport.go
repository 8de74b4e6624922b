package agent

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// BearerTransport adds "Authorization: Bearer <identity JWT>" to every request
// it carries; the device-flow endpoints of a PACT node require it.
type BearerTransport struct {
	Identity IdentitySource
	Base     http.RoundTripper // nil: http.DefaultTransport
}

// RoundTrip implements http.RoundTripper.
func (t *BearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.Identity.IdentityToken(req.Context())
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("identity token: %w", err)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return base(t.Base).RoundTrip(r)
}

// IdentityRejectedError is the node's 401 answer to an A2A call: the identity
// JWT was missing or not accepted. Description is the node's reason, from its
// WWW-Authenticate header.
type IdentityRejectedError struct {
	Description string
}

func (e *IdentityRejectedError) Error() string {
	if e.Description == "" {
		return "the node refused the agent's identity token (HTTP 401)"
	}
	return "the node refused the agent's identity token: " + e.Description
}

// rejectingTransport carries A2A calls. It turns a 401 into an
// *IdentityRejectedError (the A2A client reports only "unexpected HTTP status"
// and loses the reason), and caps every answer at maxAnswerBytes: a2a-go decodes
// an answer, and gathers an SSE event's data lines, without a limit (docs/threats.md, R19).
type rejectingTransport struct{ base http.RoundTripper }

// maxAnswerBytes caps one A2A answer, a whole event stream included: far above what a node
// sends (an answer of at most 16 MiB from Codex, the message of at most 4 MiB it answers).
const maxAnswerBytes = 64 << 20

// ErrAnswerTooLarge is a node's A2A answer (or event stream) over maxAnswerBytes.
var ErrAnswerTooLarge = fmt.Errorf("the node's A2A answer is larger than %d MiB: refused", maxAnswerBytes>>20)

func (t rejectingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := base(t.base).RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if resp.StatusCode != http.StatusUnauthorized {
		resp.Body = &cappedBody{rc: resp.Body, left: maxAnswerBytes}
		return resp, nil
	}
	desc := authParam(resp.Header.Get("WWW-Authenticate"), "error_description")
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return nil, &IdentityRejectedError{Description: desc}
}

// cappedBody reads an answer of at most left bytes; a byte more fails it with
// ErrAnswerTooLarge, and closing it drops the connection.
type cappedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	if b.left -= int64(n); b.left < 0 {
		return 0, ErrAnswerTooLarge
	}
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

func base(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		return http.DefaultTransport
	}
	return rt
}

// authParam reads one auth-param of a WWW-Authenticate challenge (RFC 9110
// §11.2): name=token or name="quoted string".
func authParam(header, name string) string {
	s := header
	if i := strings.IndexByte(s, ' '); i >= 0 {
		s = s[i+1:] // skip the scheme
	}
	for s != "" {
		s = strings.TrimLeft(s, " ,\t")
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return ""
		}
		key := strings.TrimSpace(s[:eq])
		s = strings.TrimLeft(s[eq+1:], " \t")
		var val string
		if strings.HasPrefix(s, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				b.WriteByte(s[i])
			}
			val, s = b.String(), s[min(i+1, len(s)):]
		} else {
			end := strings.IndexByte(s, ',')
			if end < 0 {
				end = len(s)
			}
			val, s = strings.TrimSpace(s[:end]), s[end:]
		}
		if strings.EqualFold(key, name) {
			return val
		}
	}
	return ""
}

// noRedirect keeps credentials on the host they were meant for: PACT endpoints
// do not redirect, and a redirect would carry PACT-Delegation along.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// checkEndpoint refuses a URL the agent would send credentials to unless it
// is on the node's own origin (scheme, host and port of publicUrl), and
// refuses plain http except on loopback.
func checkEndpoint(what, raw, publicURL string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%s %q is not an absolute URL", what, raw)
	}
	p, err := url.Parse(publicURL)
	if err != nil || p.Host == "" {
		return fmt.Errorf("the node's publicUrl %q is not an absolute URL", publicURL)
	}
	if !strings.EqualFold(u.Scheme, p.Scheme) || !strings.EqualFold(u.Host, p.Host) {
		return fmt.Errorf("%s %s is not on the node's origin %s://%s: refusing to send credentials there", what, raw, p.Scheme, p.Host)
	}
	return checkScheme(u)
}

func checkScheme(u *url.URL) error {
	switch strings.ToLower(u.Scheme) {
	case "https":
		return nil
	case "http":
		if isLoopbackHost(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("refusing to send credentials over plain http to %s: use the node's https publicUrl", u.Host)
	}
	return fmt.Errorf("unsupported URL scheme %q", u.Scheme)
}

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
