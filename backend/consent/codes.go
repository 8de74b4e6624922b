package consent

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/aether/aether/backend/domain"
	"github.com/aether/aether/backend/policy"
)

// userCodeAlphabet has no vowels (no words) and no look-alike digits: base 20.
const userCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"

const (
	userCodeLen   = 8
	deviceCodeLen = 22 // 16 random bytes, base64url without padding
)

// randomToken is n random bytes, base64url. crypto/rand.Read never fails.
func randomToken(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// newUserCode draws 8 letters uniformly (bytes ≥ 240 are rejected so that
// byte % 20 carries no bias).
func newUserCode() string {
	out := make([]byte, 0, userCodeLen)
	var buf [16]byte
	for len(out) < userCodeLen {
		rand.Read(buf[:])
		for _, c := range buf {
			if c < 240 && len(out) < userCodeLen {
				out = append(out, userCodeAlphabet[c%20])
			}
		}
	}
	return string(out)
}

// FormatUserCode shows a normalised user code as XXXX-XXXX.
func FormatUserCode(code string) string {
	if len(code) != userCodeLen {
		return code
	}
	return code[:4] + "-" + code[4:]
}

// normalizeUserCode accepts a user code typed with any case, spaces and dashes
// (D14) and refuses anything else — other characters or another length —
// before any lookup (D15).
func normalizeUserCode(s string) (string, bool) {
	if len(s) > 4*userCodeLen {
		return "", false
	}
	out := make([]byte, 0, userCodeLen)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '-' || c == '\t':
			continue
		case 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		}
		if strings.IndexByte(userCodeAlphabet, c) < 0 {
			return "", false
		}
		out = append(out, c)
	}
	if len(out) != userCodeLen {
		return "", false
	}
	return string(out), true
}

// hashDeviceCode is what the store keeps of a device code.
func hashDeviceCode(code string) string {
	sum := sha256.Sum256([]byte(code))
	return hex.EncodeToString(sum[:])
}

// validDeviceCode checks the shape of a device code, so a malformed one is
// refused without a lookup.
func validDeviceCode(code string) bool {
	if len(code) != deviceCodeLen {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(code)
	return err == nil && len(b) == 16
}

// lookalikes maps Cyrillic and Greek letters that render like p, a, c, t.
var lookalikes = map[rune]rune{
	'р': 'p', 'ρ': 'p', 'а': 'a', 'α': 'a', 'с': 'c', 'ϲ': 'c', 'т': 't', 'τ': 't',
}

// asksForPact reports whether a scope string names the node's own pact scope
// in any disguise: case, white space, invisible format characters,
// compatibility forms such as full-width ｐａｃｔ (NFKC) or Cyrillic look-alikes
// (D3, G10). The node adds pact itself; an agent asking for it is refused.
func asksForPact(scope string) bool {
	n := norm.NFKC.String(scope)
	if foldScope(n) == "pact" {
		return true
	}
	for _, tok := range strings.FieldsFunc(n, func(r rune) bool { return unicode.IsSpace(r) || r == ',' }) {
		if foldScope(tok) == "pact" {
			return true
		}
	}
	return false
}

func foldScope(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) {
			continue
		}
		if m, ok := lookalikes[r]; ok {
			r = m
		}
		b.WriteRune(r)
	}
	return b.String()
}

// resolveScope maps a requested scope (and optional brand) to exactly one
// brand: the scope must be that brand's scope id, byte for byte.
func resolveScope(scope string, brand domain.BrandID, p *policy.Policy) (policy.Brand, *OAuthError) {
	if len(scope) > maxScopeLen {
		return policy.Brand{}, oauthError(CodeInvalidScope, "scope is too long")
	}
	if !utf8.ValidString(scope) {
		return policy.Brand{}, oauthError(CodeInvalidScope, "scope is not valid UTF-8")
	}
	if asksForPact(scope) {
		return policy.Brand{}, oauthError(CodeInvalidScope, "the node adds the pact scope; do not ask for it")
	}
	fields := strings.Fields(scope)
	if brand != "" {
		b, ok := p.Brand(brand)
		if !ok {
			return policy.Brand{}, oauthError(CodeInvalidRequest, "unknown brand")
		}
		if len(fields) == 0 { // RFC 6749 §3.3: a missing scope takes the default, here the brand's
			return b, nil
		}
		if len(fields) != 1 || fields[0] != b.Scope.ID {
			return policy.Brand{}, oauthError(CodeInvalidScope, "brand "+string(b.ID)+" takes exactly the scope "+b.Scope.ID)
		}
		return b, nil
	}
	if len(fields) != 1 {
		return policy.Brand{}, oauthError(CodeInvalidScope, "ask for exactly one brand scope")
	}
	var found []policy.Brand
	for _, b := range brandsOf(p) {
		if b.Scope.ID == fields[0] {
			found = append(found, b)
		}
	}
	switch len(found) {
	case 0:
		return policy.Brand{}, oauthError(CodeInvalidScope, "unknown scope")
	case 1:
		return found[0], nil
	default:
		return policy.Brand{}, oauthError(CodeInvalidRequest, "several brands use this scope: name the brand")
	}
}
