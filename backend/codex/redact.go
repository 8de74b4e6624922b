package codex

import (
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu    sync.Mutex
	max   int
	buf   []byte
	total int64
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += int64(len(p))
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return len(p), nil
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

// String returns the tail, starting at a line boundary when the head was cut.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	cut := int64(len(b)) < t.total
	if len(b) > t.max {
		b, cut = b[len(b)-t.max:], true
	}
	s := string(b)
	if cut {
		if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
			s = s[i+1:]
		}
	}
	return strings.ToValidUTF8(s, "")
}

// secretPatterns match things that look like credentials in codex's messages.
var secretPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}`),
	regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*`),
	regexp.MustCompile(`\b(sk|pk|rk|sess|org|proj)-[A-Za-z0-9_-]{12,}`),
	regexp.MustCompile(`(?i)\b([a-z0-9_-]*(api[_-]?key|token|secret|password|passwd|credential)[a-z0-9_-]*)("?\s*[:=]\s*"?)[^\s",;}]{4,}`),
	regexp.MustCompile(`\b[A-Fa-f0-9]{32,}\b`),
}

// longToken matches base64-like runs; only those mixing digits and both cases are taken for
// keys, so that paths and words survive.
var longToken = regexp.MustCompile(`[A-Za-z0-9+_-]{32,}={0,2}`)

// redactor removes credential-looking text and the literal values of the extra environment
// variables handed to codex (CODEX_API_KEY=… would otherwise show up if codex echoed it).
type redactor struct {
	literals []string
}

func newRedactor(env []string) redactor {
	var r redactor
	for _, kv := range env {
		if _, v, ok := strings.Cut(kv, "="); ok && len(v) >= 6 {
			r.literals = append(r.literals, v)
		}
	}
	return r
}

func (r redactor) redact(s string) string {
	for _, lit := range r.literals {
		s = strings.ReplaceAll(s, lit, "[redacted]")
	}
	for i, re := range secretPatterns {
		if i == 3 {
			s = re.ReplaceAllString(s, "${1}${3}[redacted]")
			continue
		}
		s = re.ReplaceAllString(s, "[redacted]")
	}
	return longToken.ReplaceAllStringFunc(s, func(tok string) string {
		if strings.ContainsAny(tok, "0123456789") && strings.ToLower(tok) != tok && strings.ToUpper(tok) != tok {
			return "[redacted]"
		}
		return tok
	})
}

// oneLine makes text safe to show in a status line: no control or bidi characters (S10), at
// most max runes.
func oneLine(s string, max int) string {
	s = ansiEscape.ReplaceAllString(s, "")
	var b strings.Builder
	n := 0
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = n > 0
			continue
		}
		if unsafeRune(r) {
			continue
		}
		if space {
			b.WriteByte(' ')
			n++
			space = false
		}
		if n >= max {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// cleanLines keeps newlines and tabs but drops other control characters (ANSI escapes
// included) and bidi overrides.
func cleanLines(s string) string {
	s = ansiEscape.ReplaceAllString(s, "")
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if unsafeRune(r) {
			return -1
		}
		return r
	}, s)
}

var ansiEscape = regexp.MustCompile(`\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-Z\\-_])`)

func unsafeRune(r rune) bool {
	return r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}
