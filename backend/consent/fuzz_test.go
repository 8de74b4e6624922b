package consent

import (
	"strings"
	"testing"

	"github.com/aether/aether/backend/internal/fuzzseed"
)

// FuzzUserCode checks the user-code normaliser (docs/threats.md, D14, D15): it accepts exactly
// the codes of 8 letters of the alphabet, typed in any case with spaces, tabs and dashes, at
// most 32 bytes; what it returns is 8 letters of the alphabet, and normalising that again, or
// the way the page shows it (XXXX-XXXX), gives it back. README.md, "Fuzzing", says how to run it.
func FuzzUserCode(f *testing.F) {
	s := fuzzseed.S
	fuzzseed.Write(f, []fuzzseed.Seed{
		s("d14-plain", "BCDFGHJK"),
		s("d14-lower-space", "bcdf ghjk"),
		s("d14-dash", "BCDF-GHJK"),
		s("d14-tabs-and-dashes", "\tb-c-d-f g-h-j-k\t"),
		s("d15-vowel", "BCDFGHJA"),
		s("d15-zero-and-o", "BCDF0HJO"),
		s("d15-short", "BCDFGHJ"),
		s("d15-long", "BCDFGHJKL"),
		s("d15-33-bytes", strings.Repeat("-", 25)+"BCDFGHJK"),
		s("d15-fullwidth", "ＢＣＤＦＧＨＪＫ"),
		s("d15-cyrillic", "ВСDFGHJK"),
		s("d15-dotless-i-and-long-s", "BCDFGHJ\u0131\u017f"),
		s("nul", "BCDF\x00GHJK"),
		s("invalid-utf8", "BCDF\xffGHJK"),
		s("newline", "BCDF\nGHJK"),
	})
	f.Fuzz(func(t *testing.T, in string) {
		code, ok := normalizeUserCode(in)
		if ok != userCodeRule(in) {
			t.Fatalf("normalizeUserCode(%q) ok = %v, the rule says %v", in, ok, !ok)
		}
		if !ok {
			if code != "" {
				t.Fatalf("refused %q but returned %q", in, code)
			}
			return
		}
		if len(code) != userCodeLen || strings.Trim(code, userCodeAlphabet) != "" {
			t.Fatalf("normalizeUserCode(%q) = %q: not %d letters of %s", in, code, userCodeLen, userCodeAlphabet)
		}
		for _, again := range []string{code, FormatUserCode(code), strings.ToLower(FormatUserCode(code))} {
			if c2, ok2 := normalizeUserCode(again); !ok2 || c2 != code {
				t.Fatalf("normalizeUserCode(%q) = %q, %v; want %q", again, c2, ok2, code)
			}
		}
		if stripped := strings.Map(func(r rune) rune {
			if r == ' ' || r == '\t' || r == '-' {
				return -1
			}
			return r
		}, in); !strings.EqualFold(stripped, code) || strings.ToUpper(stripped) != code {
			t.Fatalf("normalizeUserCode(%q) = %q: not the letters typed", in, code)
		}
	})
}

// userCodeRule is D14 and D15 read on their own.
func userCodeRule(in string) bool {
	if len(in) > 4*userCodeLen {
		return false
	}
	n := 0
	for _, r := range in {
		if r == ' ' || r == '\t' || r == '-' {
			continue
		}
		if 'a' <= r && r <= 'z' {
			r -= 'a' - 'A'
		}
		if r >= 0x80 || !strings.ContainsRune(userCodeAlphabet, r) {
			return false
		}
		n++
	}
	return n == userCodeLen
}
