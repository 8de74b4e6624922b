package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits on request bodies. The SDK decodes with encoding/json, which accepts
// trailing data, duplicate keys, invalid UTF-8 (silently U+FFFD) and nesting up
// to 10,000 levels, so every body is checked here before the SDK sees it.
const (
	maxBodyBytes = 4 << 20
	maxDepth     = 64
	maxIDLen     = 256
	maxIntID     = 1 << 53
)

// bodyError says which standard error a bad body gets.
type bodyError struct {
	kind   bodyErrorKind
	detail string
}

type bodyErrorKind int

const (
	kindParse    bodyErrorKind = iota // -32700
	kindInvalid                       // -32600
	kindTooLarge                      // 413
	kindTimeout                       // 408: the body did not arrive within bodyTimeout
)

func (e *bodyError) Error() string { return e.detail }

// checkJSON validates a whole body: valid UTF-8, one JSON value and nothing
// after it, bounded depth, no key given twice in any object, and no two keys
// that differ only in case where a2a-go decodes the object into a struct
// (threats.md R12).
func checkJSON(body []byte) error {
	if !utf8.Valid(body) {
		return &bodyError{kindParse, "body is not valid UTF-8"}
	}
	// Not JSON is a parse error whatever else is wrong before the cut (R5 before R3, R12).
	if !json.Valid(body) {
		err := json.Unmarshal(body, new(any)) // the syntax error, for the message
		return &bodyError{kindParse, "malformed JSON: " + err.Error()}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := walk(dec, 0, false); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return &bodyError{kindParse, "unexpected data after the JSON value"}
	}
	return nil
}

// walk checks one value. free is set inside the value of a member named
// metadata or data (in any case, as encoding/json matches it): A2A 1.0 makes
// those a google.protobuf.Struct or Value, whose keys are case-sensitive, and
// a2a-go decodes them into map[string]any, so "trace" and "Trace" are two keys
// there and only an exact repeat is refused.
func walk(dec *json.Decoder, depth int, free bool) error {
	tok, err := dec.Token()
	if err != nil {
		return &bodyError{kindParse, "malformed JSON: " + err.Error()}
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth+1 > maxDepth {
		return &bodyError{kindInvalid, fmt.Sprintf("JSON nested deeper than %d levels", maxDepth)}
	}
	switch d {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return &bodyError{kindParse, "malformed JSON: " + err.Error()}
			}
			key, _ := kt.(string)
			folded := foldKey(key)
			name := folded
			if free {
				name = key
			}
			if seen[name] {
				return &bodyError{kindInvalid, fmt.Sprintf("duplicate key %q", key)}
			}
			seen[name] = true
			if err := walk(dec, depth+1, free || freeForm[folded]); err != nil {
				return err
			}
		}
	case '[':
		for dec.More() {
			if err := walk(dec, depth+1, free); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return &bodyError{kindParse, "malformed JSON: " + err.Error()}
	}
	return nil
}

// freeForm are the (folded) member names whose values are free-form JSON in
// every A2A request: metadata (a Struct) and a part's data (a Value).
var freeForm = map[string]bool{"metadata": true, "data": true}

// foldKey folds a key the way encoding/json matches it to a struct field, so that keys equal
// under bytes.EqualFold fold alike (R12): ToLower alone misses "ſ" (U+017F), which a2a-go
// reads as "s". A rune becomes the smallest of its case-folding orbit, ASCII letters lower case.
func foldKey(k string) string {
	return strings.Map(func(r rune) rune {
		if r >= utf8.RuneSelf {
			least := r
			for o := unicode.SimpleFold(r); o != r; o = unicode.SimpleFold(o) {
				least = min(least, o)
			}
			r = least
		}
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r
	}, k)
}

// envelope is the part of a JSON-RPC request checked before dispatch.
type envelope struct {
	JSONRPC *string          `json:"jsonrpc"`
	ID      json.RawMessage  `json:"id"`
	Method  *string          `json:"method"`
	Params  *json.RawMessage `json:"params"`
}

// checkEnvelope applies JSON-RPC 2.0 rules the SDK is lax about: batches are
// not supported, ids are strings or integers of bounded size, notifications
// (no id) are refused rather than run silently. It returns the id to echo.
func checkEnvelope(body []byte) (json.RawMessage, error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		return nil, &bodyError{kindInvalid, "batch requests are not supported"}
	}
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, &bodyError{kindInvalid, "the request must be a JSON object"}
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, &bodyError{kindInvalid, "invalid request: " + err.Error()}
	}
	id, err := checkID(env.ID)
	if err != nil {
		return nil, err
	}
	if env.JSONRPC == nil || *env.JSONRPC != "2.0" {
		return id, &bodyError{kindInvalid, `"jsonrpc" must be "2.0"`}
	}
	if env.Method == nil {
		return id, &bodyError{kindInvalid, `"method" is required`}
	}
	if id == nil {
		return nil, &bodyError{kindInvalid, "notifications (requests without an id) are not supported"}
	}
	return id, nil
}

func checkID(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if len(raw) > maxIDLen {
		return nil, &bodyError{kindInvalid, "id is too long"}
	}
	switch raw[0] {
	case '"':
		return raw, nil
	case '{', '[':
		return nil, &bodyError{kindInvalid, "id must be a string or an integer"}
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, &bodyError{kindInvalid, "id must be a string or an integer"}
	}
	// a2a-go decodes a number id as a float64 and answers with that: past 2^53 it would
	// answer another id than it was sent (R11).
	if v, err := n.Int64(); err != nil || v > maxIntID || v < -maxIntID {
		return nil, &bodyError{kindInvalid, "id must be a string or an integer of at most 2^53"}
	}
	return raw, nil
}

// readBody reads at most maxBodyBytes; a larger body is an error without reading on.
func readBody(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxBodyBytes+1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, &bodyError{kindTimeout, fmt.Sprintf("the request body did not arrive within %d s", int(bodyTimeout/time.Second))}
	}
	if err != nil {
		return nil, &bodyError{kindParse, "reading body: " + err.Error()}
	}
	if len(data) > maxBodyBytes {
		return nil, &bodyError{kindTooLarge, fmt.Sprintf("request body larger than %d bytes", maxBodyBytes)}
	}
	return data, nil
}
