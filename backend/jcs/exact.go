package jcs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Exact decodes the JSON document data into v with encoding/json, and refuses it unless v then
// holds exactly what data says: v encoded again has the canonical form of data. encoding/json
// keeps the last of a repeated member, matches names without case (and folds "ſ" U+017F to "s",
// "K" U+212A to "k"), and drops members v has no field for, so one document can read one way to
// Go and another to jq, Python or a person; Exact refuses each of those, and a member of v that
// data lacks. The error names the first top-level member at fault where it can.
func Exact(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return err
	}
	got, err := Canonicalize(data)
	if err != nil {
		return err
	}
	want, err := Marshal(v)
	if err != nil {
		return err
	}
	if bytes.Equal(got, want) {
		return nil
	}
	return differs(got, want)
}

// differs says how the canonical document got, read into a value, fails to say what that value
// encodes to (want): a repeated or unknown member, a missing one, or a value that decodes to
// something else.
func differs(got, want []byte) error {
	var g, w map[string]json.RawMessage
	if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil {
		return errors.New("it does not decode to what it shows")
	}
	names := slices.Sorted(maps.Keys(w))
	for _, name := range slices.Sorted(maps.Keys(g)) {
		if _, ok := w[name]; !ok {
			return fmt.Errorf("member %q is not one of %q (a member repeated in another case, or unknown)", name, names)
		}
	}
	for _, name := range names {
		if _, ok := g[name]; !ok {
			return fmt.Errorf("member %q is missing", name)
		}
	}
	for _, name := range names {
		if !bytes.Equal(g[name], w[name]) {
			return fmt.Errorf("member %q does not decode to what it shows (a repeated, unknown or case-variant member inside it)", name)
		}
	}
	return errors.New("it does not decode to what it shows")
}
