package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// A small JSON parser of our own, because encoding/json stops at the first problem, accepts
// duplicate keys silently and cannot say where a value starts and ends. This one keeps every
// object's members in order with their byte offsets (Save copies unmanaged sections verbatim),
// reports duplicate keys at any depth, and turns syntax errors into line:column messages.

const maxDepth = 64

type kind uint8

const (
	kindObject kind = iota + 1
	kindArray
	kindString
	kindNumber
	kindBool
	kindNull
)

type node struct {
	kind       kind
	start, end int // byte offsets of the value in the source
	members    []member
	elems      []*node
	str        string // decoded string, or the literal of a number
	b          bool
}

type member struct {
	key              string
	keyStart, keyEnd int // byte offsets of the quoted key
	val              *node
}

// describe names a value for "found …" messages.
func (n *node) describe() string {
	switch n.kind {
	case kindObject:
		return "an object"
	case kindArray:
		return "an array"
	case kindString:
		return "a string " + clip(strconv.Quote(n.str))
	case kindNumber:
		return "the number " + clip(n.str)
	case kindBool:
		return strconv.FormatBool(n.b)
	default:
		return "null"
	}
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:37] + "…"
	}
	return s
}

type syntaxError struct {
	off int
	msg string
}

type parser struct {
	src   []byte
	pos   int
	depth int
	dups  []Problem
}

// parseJSON parses src as one JSON value. A nil node comes with a single fatal problem
// (encoding or syntax); otherwise the problems are duplicate keys, one per repeat.
func parseJSON(src []byte) (*node, []Problem) {
	if msg := encodingProblem(src); msg != "" {
		return nil, []Problem{{Message: msg}}
	}
	p := &parser{src: src}
	p.skipSpace()
	if p.pos == len(src) {
		return nil, []Problem{{Message: `is empty; it must hold a JSON object such as {"pact": {…}}`}}
	}
	root, err := p.value("")
	if err == nil {
		err = p.skipSpace()
	}
	if err == nil && p.pos < len(src) {
		err = p.fail(fmt.Sprintf("unexpected %s after the end of the JSON value; remove it", p.found()))
	}
	if err != nil {
		line, col := position(src, err.off)
		return nil, []Problem{{Message: fmt.Sprintf("line %d, column %d: %s", line, col, err.msg)}}
	}
	return root, p.dups
}

func encodingProblem(src []byte) string {
	switch {
	case bytes.HasPrefix(src, []byte{0xEF, 0xBB, 0xBF}):
		return "starts with a byte order mark (BOM); save it as UTF-8 without BOM"
	case bytes.HasPrefix(src, []byte{0xFE, 0xFF}), bytes.HasPrefix(src, []byte{0xFF, 0xFE}):
		return "is UTF-16 encoded; save it as UTF-8 without BOM"
	}
	if !utf8.Valid(src) {
		off := 0
		for off < len(src) {
			r, size := utf8.DecodeRune(src[off:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			off += size
		}
		line, col := position(src, off)
		return fmt.Sprintf("line %d, column %d: invalid UTF-8; save the file as UTF-8", line, col)
	}
	return ""
}

// position turns a byte offset into a 1-based line and column (in characters).
func position(src []byte, off int) (line, col int) {
	before := src[:min(off, len(src))]
	line = bytes.Count(before, []byte{'\n'}) + 1
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	return line, utf8.RuneCount(before[lineStart:]) + 1
}

func (p *parser) fail(msg string) *syntaxError { return &syntaxError{off: p.pos, msg: msg} }

// found names what sits at the current position, for error messages.
func (p *parser) found() string {
	if p.pos >= len(p.src) {
		return "end of file"
	}
	r, _ := utf8.DecodeRune(p.src[p.pos:])
	if r < 0x20 || r == 0x7f {
		return fmt.Sprintf("character U+%04X", r)
	}
	return strconv.QuoteRune(r)
}

func (p *parser) skipSpace() *syntaxError {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		case '/':
			if p.pos+1 < len(p.src) && (p.src[p.pos+1] == '/' || p.src[p.pos+1] == '*') {
				return p.fail("comments are not allowed in JSON; remove this comment")
			}
			return nil
		default:
			return nil
		}
	}
	return nil
}

func (p *parser) value(path string) (*node, *syntaxError) {
	if p.pos >= len(p.src) {
		return nil, p.fail("unexpected end of file; the file is cut short")
	}
	switch c := p.src[p.pos]; {
	case c == '{':
		return p.object(path)
	case c == '[':
		return p.array(path)
	case c == '"':
		start := p.pos
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return &node{kind: kindString, start: start, end: p.pos, str: s}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == '\'':
		return nil, p.fail("strings need double quotes, not single quotes")
	case isWordByte(c):
		return p.literal()
	default:
		return nil, p.fail(fmt.Sprintf("expected a value, found %s", p.found()))
	}
}

func (p *parser) enter() *syntaxError {
	p.depth++
	if p.depth > maxDepth {
		return p.fail(fmt.Sprintf("nested deeper than %d levels", maxDepth))
	}
	return nil
}

func (p *parser) object(path string) (*node, *syntaxError) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	n := &node{kind: kindObject, start: p.pos}
	p.pos++ // {
	first := map[string]int{}
	for {
		if err := p.skipSpace(); err != nil {
			return nil, err
		}
		if p.pos < len(p.src) && p.src[p.pos] == '}' {
			if len(n.members) > 0 {
				return nil, p.fail("trailing comma before }; remove it")
			}
			break
		}
		if p.pos >= len(p.src) {
			line, col := position(p.src, n.start)
			return nil, p.fail(fmt.Sprintf("unexpected end of file: the object opened at line %d, column %d is not closed", line, col))
		}
		if p.src[p.pos] != '"' {
			if p.src[p.pos] == '\'' {
				return nil, p.fail("keys need double quotes, not single quotes")
			}
			return nil, p.fail(fmt.Sprintf(`expected a "key" in double quotes, found %s`, p.found()))
		}
		m := member{keyStart: p.pos}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		m.key, m.keyEnd = key, p.pos
		if err := p.skipSpace(); err != nil {
			return nil, err
		}
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			return nil, p.fail(fmt.Sprintf("expected ':' after the key %q, found %s", key, p.found()))
		}
		p.pos++
		if err := p.skipSpace(); err != nil {
			return nil, err
		}
		childPath := keyPath(path, key)
		if m.val, err = p.value(childPath); err != nil {
			return nil, err
		}
		if i, dup := first[key]; dup {
			line, col := position(p.src, n.members[i].keyStart)
			p.dups = append(p.dups, Problem{Path: childPath,
				Message: fmt.Sprintf("duplicate key %q (first at line %d, column %d); keep only one", key, line, col)})
		} else {
			first[key] = len(n.members)
		}
		n.members = append(n.members, m)
		if err := p.skipSpace(); err != nil {
			return nil, err
		}
		if p.pos < len(p.src) && p.src[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.src) && p.src[p.pos] == '}' {
			break
		}
		hint := ""
		if p.pos < len(p.src) && p.src[p.pos] == '"' {
			hint = " (a comma is missing)"
		}
		return nil, p.fail(fmt.Sprintf("expected ',' or '}' after the value of %q, found %s%s", key, p.found(), hint))
	}
	p.pos++ // }
	n.end = p.pos
	p.depth--
	return n, nil
}

func (p *parser) array(path string) (*node, *syntaxError) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	n := &node{kind: kindArray, start: p.pos}
	p.pos++ // [
	for {
		if err := p.skipSpace(); err != nil {
			return nil, err
		}
		if p.pos < len(p.src) && p.src[p.pos] == ']' {
			if len(n.elems) > 0 {
				return nil, p.fail("trailing comma before ]; remove it")
			}
			break
		}
		if p.pos >= len(p.src) {
			line, col := position(p.src, n.start)
			return nil, p.fail(fmt.Sprintf("unexpected end of file: the array opened at line %d, column %d is not closed", line, col))
		}
		v, err := p.value(indexPath(path, len(n.elems)))
		if err != nil {
			return nil, err
		}
		n.elems = append(n.elems, v)
		if err := p.skipSpace(); err != nil {
			return nil, err
		}
		if p.pos < len(p.src) && p.src[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.src) && p.src[p.pos] == ']' {
			break
		}
		return nil, p.fail(fmt.Sprintf("expected ',' or ']' after an array element, found %s", p.found()))
	}
	p.pos++ // ]
	n.end = p.pos
	p.depth--
	return n, nil
}

// str scans a string literal by the JSON grammar and lets encoding/json decode the escapes.
func (p *parser) str() (string, *syntaxError) {
	start := p.pos
	p.pos++ // opening quote
	for {
		if p.pos >= len(p.src) {
			p.pos = start
			return "", p.fail("unterminated string; a closing \" is missing")
		}
		c := p.src[p.pos]
		switch {
		case c == '"':
			p.pos++
			var s string
			if err := json.Unmarshal(p.src[start:p.pos], &s); err != nil {
				p.pos = start
				return "", p.fail(fmt.Sprintf("invalid string: %v", err))
			}
			return s, nil
		case c < 0x20:
			return "", p.fail(fmt.Sprintf(`control character U+%04X inside a string; write it as an escape such as \n`, c))
		case c == '\\':
			p.pos++
			if p.pos >= len(p.src) {
				continue
			}
			switch e := p.src[p.pos]; e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.pos++
			case 'u':
				if p.pos+5 > len(p.src) || !isHex4(p.src[p.pos+1:p.pos+5]) {
					return "", p.fail(`invalid \u escape; it needs four hex digits`)
				}
				p.pos += 5
			default:
				p.pos--
				return "", p.fail(fmt.Sprintf(`invalid escape \%s in a string; write a backslash as \\`, p.foundAt(p.pos+1)))
			}
		default:
			p.pos++
		}
	}
}

func (p *parser) foundAt(off int) string {
	if off >= len(p.src) {
		return ""
	}
	r, _ := utf8.DecodeRune(p.src[off:])
	return string(r)
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

func (p *parser) number() (*node, *syntaxError) {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	bad := func() (*node, *syntaxError) {
		end := p.pos
		for end < len(p.src) && isWordByte(p.src[end]) {
			end++
		}
		lit := string(p.src[start:end])
		p.pos = start
		return nil, p.fail(fmt.Sprintf("invalid number %s", clip(strconv.Quote(lit))))
	}
	if p.src[p.pos] == '-' {
		p.pos++
	}
	intStart := p.pos
	if n := digits(); n == 0 || (n > 1 && p.src[intStart] == '0') {
		return bad()
	}
	if p.pos < len(p.src) && p.src[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return bad()
		}
	}
	if p.pos < len(p.src) && (p.src[p.pos] == 'e' || p.src[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.src) && (p.src[p.pos] == '+' || p.src[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return bad()
		}
	}
	if p.pos < len(p.src) && isWordByte(p.src[p.pos]) {
		return bad()
	}
	return &node{kind: kindNumber, start: start, end: p.pos, str: string(p.src[start:p.pos])}, nil
}

func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '$' || c == '.'
}

func (p *parser) literal() (*node, *syntaxError) {
	start := p.pos
	for p.pos < len(p.src) && isWordByte(p.src[p.pos]) {
		p.pos++
	}
	n := &node{start: start, end: p.pos}
	switch word := string(p.src[start:p.pos]); word {
	case "true", "false":
		n.kind, n.b = kindBool, word == "true"
	case "null":
		n.kind = kindNull
	default:
		p.pos = start
		return nil, p.fail(fmt.Sprintf(`%s is not a JSON value; use true, false, null, a number or a "string" in double quotes`, clip(strconv.Quote(word))))
	}
	return n, nil
}

// keyPath appends an object key to a JSON path: pact.brands, or ["odd key"] when the key
// is not a plain identifier.
func keyPath(parent, key string) string {
	plain := key != ""
	for i, r := range key {
		if !(r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9') {
			plain = false
			break
		}
	}
	switch {
	case !plain:
		q, _ := json.Marshal(key)
		return parent + "[" + string(q) + "]"
	case parent == "":
		return key
	default:
		return parent + "." + key
	}
}

func indexPath(parent string, i int) string { return fmt.Sprintf("%s[%d]", parent, i) }
