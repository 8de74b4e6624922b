package identity

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"unicode/utf8"
)

// maxMembers caps the top-level members of the header and the payload, which also bounds the
// quadratic duplicate check below.
const maxMembers = 100

var (
	headerNames = []string{"alg", "kid", "typ", "cty", "crit", "jku", "jwk", "x5u", "x5c", "x5t", "x5t#S256"}
	claimNames  = []string{"iss", "sub", "aud", "exp", "nbf", "iat", "jti"}
	strictB64   = base64.RawURLEncoding.Strict()
)

// prepass runs before golang-jwt sees the token. It refuses anything but three canonical
// base64url segments (J27: no padding, no whitespace, which Go's decoder would skip), and
// header or payload members whose names repeat or differ only by case (J28): encoding/json
// keeps the last duplicate and matches struct fields case-insensitively, so "SUB" would
// silently become the subject.
func prepass(raw string) *Error {
	dots := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '.':
			dots++
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return errMalformed
		}
	}
	if dots != 2 {
		return errMalformed
	}
	h := raw[:indexByte(raw, '.')]
	p := raw[len(h)+1:]
	p = p[:indexByte(p, '.')]
	if err := checkSegment(h, headerNames); err != nil {
		return err
	}
	return checkSegment(p, claimNames)
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func checkSegment(seg string, registered []string) *Error {
	var stack [1024]byte
	buf := stack[:0]
	if n := strictB64.DecodedLen(len(seg)); n > len(stack) {
		buf = make([]byte, 0, n)
	}
	buf, err := strictB64.AppendDecode(buf, []byte(seg))
	if err != nil {
		return errMalformed
	}
	return checkMembers(buf, registered)
}

// checkMembers scans the top-level object of a JSON document and refuses duplicate or
// case-variant member names, and case variants of the registered names. It only needs to find
// the top-level names correctly for valid JSON: invalid JSON is refused by json.Unmarshal later.
func checkMembers(b []byte, registered []string) *Error {
	s := scanner{b: b}
	s.ws()
	if !s.eat('{') {
		return errMalformed
	}
	var names [maxMembers][]byte
	n := 0
	s.ws()
	if s.eat('}') {
		return nil
	}
	for {
		s.ws()
		name, ok := s.str(true)
		if !ok {
			return errMalformed
		}
		if n == maxMembers {
			return errMalformed
		}
		for _, r := range registered {
			// No length test: "ſub" (U+017F) is longer than "sub" and still folds to it.
			if string(name) != r && bytes.EqualFold(name, []byte(r)) {
				return errDuplicate
			}
		}
		for _, prev := range names[:n] {
			if bytes.EqualFold(prev, name) {
				return errDuplicate
			}
		}
		names[n] = name
		n++
		s.ws()
		if !s.eat(':') || !s.value() {
			return errMalformed
		}
		s.ws()
		if s.eat('}') {
			return nil
		}
		if !s.eat(',') {
			return errMalformed
		}
	}
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a JSON string. With decode set it returns the decoded bytes: escaped names
// ("\u0073ub") are decoded so they compare like the names encoding/json will see, and invalid
// UTF-8 is refused because encoding/json folds different byte strings into the same U+FFFD name.
func (s *scanner) str(decode bool) ([]byte, bool) {
	if !s.eat('"') {
		return nil, false
	}
	start := s.i
	escaped := false
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			escaped = true
			s.i += 2
			continue
		case '"':
			raw := s.b[start:s.i]
			s.i++
			if !decode {
				return nil, true
			}
			if !utf8.Valid(raw) {
				return nil, false
			}
			if !escaped {
				return raw, true
			}
			// Copy so the decoder never holds on to the caller's (stack) buffer.
			quoted := append([]byte(nil), s.b[start-1:s.i]...)
			var out string
			if err := json.Unmarshal(quoted, &out); err != nil {
				return nil, false
			}
			return []byte(out), true
		}
		s.i++
	}
	return nil, false
}

// value skips one JSON value, tracking nesting and strings.
func (s *scanner) value() bool {
	s.ws()
	depth := 0
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '"':
			if _, ok := s.str(false); !ok {
				return false
			}
			if depth == 0 {
				return true
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return true // end of the enclosing object; the caller checks it
			}
			depth--
			if depth == 0 {
				s.i++
				return true
			}
		case ',':
			if depth == 0 {
				return true
			}
		}
		s.i++
	}
	return depth == 0
}
