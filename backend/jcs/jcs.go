// Package jcs writes the JSON Canonicalization Scheme of RFC 8785: the one byte sequence a JSON
// value has for signing. Object members are sorted by the UTF-16 code units of their names,
// numbers are written as ECMAScript writes an IEEE 754 double, strings with the fewest escapes,
// and no white space. Signed agent cards sign this form (docs/wire.md).
package jcs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Canonicalize returns the canonical form of the JSON document data. It refuses what RFC 8785
// leaves undefined: invalid UTF-8, duplicate member names, numbers out of double range.
func Canonicalize(data []byte) ([]byte, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("jcs: not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var b bytes.Buffer
	if err := value(dec, &b); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("jcs: data after the JSON value")
	}
	return b.Bytes(), nil
}

// Marshal is Canonicalize of v's encoding/json form.
func Marshal(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Canonicalize(data)
}

func value(dec *json.Decoder, b *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("jcs: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			return array(dec, b)
		}
		return object(dec, b)
	case string:
		writeString(b, t)
	case json.Number:
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil || math.IsInf(f, 0) {
			return fmt.Errorf("jcs: number %s is not an IEEE 754 double", t)
		}
		b.WriteString(Number(f))
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case nil:
		b.WriteString("null")
	}
	return nil
}

func array(dec *json.Decoder, b *bytes.Buffer) error {
	b.WriteByte('[')
	for i := 0; dec.More(); i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := value(dec, b); err != nil {
			return err
		}
	}
	_, err := dec.Token() // ]
	b.WriteByte(']')
	return err
}

func object(dec *json.Decoder, b *bytes.Buffer) error {
	type member struct {
		name  string
		key   []uint16
		value []byte
	}
	var members []member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("jcs: %w", err)
		}
		name := tok.(string)
		if seen[name] {
			return fmt.Errorf("jcs: duplicate member %q", name)
		}
		seen[name] = true
		var v bytes.Buffer
		if err := value(dec, &v); err != nil {
			return err
		}
		members = append(members, member{name: name, key: utf16.Encode([]rune(name)), value: v.Bytes()})
	}
	if _, err := dec.Token(); err != nil { // }
		return fmt.Errorf("jcs: %w", err)
	}
	slices.SortFunc(members, func(x, y member) int { return slices.Compare(x.key, y.key) })
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(b, m.name)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return nil
}

// writeString escapes only what JSON requires: the quote, the backslash and control characters
// (the five with short forms use them, the rest \u00xx in lower case).
func writeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// Number writes f as ECMAScript's Number.prototype.toString does (RFC 8785 §3.2.2.3): the
// shortest digits that read back as f, in plain notation from 1e-6 up to 1e21, else with an
// exponent. -0 is 0. f must be finite.
func Number(f float64) string {
	if f == 0 {
		return "0"
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	// Shortest round-trip digits d1.d2…dk and exponent e: f = 0.d1…dk × 10^n with n = e+1.
	mant, exp, _ := strings.Cut(strconv.FormatFloat(f, 'e', -1, 64), "e")
	digits := strings.Replace(mant, ".", "", 1)
	e, _ := strconv.Atoi(exp)
	k, n := len(digits), e+1
	switch {
	case k <= n && n <= 21:
		return sign + digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return sign + digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return sign + "0." + strings.Repeat("0", -n) + digits
	}
	out := digits[:1]
	if k > 1 {
		out += "." + digits[1:]
	}
	if n-1 >= 0 {
		return sign + out + "e+" + strconv.Itoa(n-1)
	}
	return sign + out + "e" + strconv.Itoa(n-1)
}
