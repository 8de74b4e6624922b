package work

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Cut ends a text that Text cut short. A backslash in the text itself is always written
// twice, so the marker cannot be mistaken for text.
const Cut = `\…`

// Text is s as a receipt shows it (docs/wire.md, "What the turn did"): a backslash is `\\`,
// a byte that is not UTF-8 and an ASCII control character are `\xHH`, and every other
// control, format (bidirectional overrides, zero-width characters) or line-separating
// character is `\u{H…}`, so that a command line or a path reads as one line, in the order of
// its bytes, wherever it is shown. A text longer than max bytes once escaped is cut at max,
// between two characters, and ends with Cut.
func Text(s string, max int) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		piece := escape(r, n, s[i])
		if b.Len()+len(piece) > max {
			b.WriteString(Cut)
			break
		}
		b.WriteString(piece)
		i += n
	}
	return b.String()
}

// escape is how Text writes the character r, n bytes long, that begins with byte c.
func escape(r rune, n int, c byte) string {
	switch {
	case r == utf8.RuneError && n == 1:
		return fmt.Sprintf(`\x%02x`, c)
	case r == '\\':
		return `\\`
	case r < 0x80 && (r < 0x20 || r == 0x7f):
		return fmt.Sprintf(`\x%02x`, r)
	case hidden(r):
		return fmt.Sprintf(`\u{%x}`, r)
	}
	return string(r)
}

// hidden: characters that change how text around them reads, or break it into lines.
func hidden(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

// Shown reports whether s is a text as Text writes it with max: what a verifier checks of a
// signed receipt, whose texts must not carry what Text escapes.
func Shown(s string, max int) bool {
	body, _ := strings.CutSuffix(s, Cut)
	if len(body) > max || !utf8.ValidString(body) {
		return false
	}
	for i := 0; i < len(body); {
		r, n := utf8.DecodeRuneInString(body[i:])
		switch {
		case r == '\\':
			m := escapeLen(body[i:])
			if m == 0 {
				return false
			}
			i += m
			continue
		case escape(r, n, body[i]) != string(r):
			return false
		}
		i += n
	}
	return true
}

// escapeLen is the length of the escape sequence s begins with, 0 when it is none.
func escapeLen(s string) int {
	switch {
	case strings.HasPrefix(s, `\\`):
		return 2
	case len(s) >= 4 && s[1] == 'x' && isHex(s[2:4]):
		return 4
	case strings.HasPrefix(s, `\u{`):
		end := strings.IndexByte(s, '}')
		if end > 3 && end <= 9 && isHex(s[3:end]) {
			return end + 1
		}
	}
	return 0
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune("0123456789abcdef", rune(s[i])) {
			return false
		}
	}
	return s != ""
}
