// Package cardjson reads and writes an agent card in A2A 1.0's JSON.
//
// a2a-go v2.4.0 writes a security requirement's scopes as a bare array,
// {"schemes": {"pactAgent": []}}, and reads only that. A2A 1.0's
// SecurityRequirement.schemes is map<string, StringList>, whose ProtoJSON is
// {"schemes": {"pactAgent": {}, "pactDelegation": {"list": ["review:read_only"]}}}
// (an empty repeated field is left out). Marshal writes the spec's form;
// Unmarshal reads it, and the bare arrays a2a-go servers write
// (docs/wire.md, "Agent cards").
package cardjson

import (
	"encoding/json"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// stringList is the ProtoJSON of A2A 1.0's StringList.
type stringList struct {
	List []string `json:"list,omitempty"`
}

// requirement is one SecurityRequirement in either form: a2a-go's arrays
// (scopes) or the spec's StringList objects (lists).
type requirement[T any] struct {
	Schemes map[string]T `json:"schemes"`
}

// Marshal is the card's A2A 1.0 JSON: a2a-go's encoding with the scopes of
// every security requirement (the card's and each skill's) as StringList.
// Members come out in sorted order.
func Marshal(card *a2a.AgentCard) ([]byte, error) {
	body, err := json.Marshal(card)
	if err != nil {
		return nil, err
	}
	return rewrite(body, toSpec)
}

// Unmarshal reads an agent card in A2A 1.0 JSON into card. Scopes may be
// StringList objects or bare string arrays; anything else (null, a string,
// a StringList with members besides "list") is an error naming where.
func Unmarshal(data []byte, card *a2a.AgentCard) error {
	legacy, err := rewrite(data, fromSpec)
	if err != nil {
		return fmt.Errorf("agent card: %w", err)
	}
	return json.Unmarshal(legacy, card)
}

// rewrite applies f to the card's securityRequirements and to each skill's.
func rewrite(body []byte, f func(json.RawMessage, string) (json.RawMessage, error)) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, err
	}
	if err := rewriteMember(top, f, "securityRequirements"); err != nil {
		return nil, err
	}
	if raw, ok := top["skills"]; ok && string(raw) != "null" {
		var skills []map[string]json.RawMessage
		if err := json.Unmarshal(raw, &skills); err != nil {
			return nil, fmt.Errorf("skills: %w", err)
		}
		for i, sk := range skills {
			if err := rewriteMember(sk, f, fmt.Sprintf("skills[%d].securityRequirements", i)); err != nil {
				return nil, err
			}
		}
		out, err := json.Marshal(skills)
		if err != nil {
			return nil, err
		}
		top["skills"] = out
	}
	return json.Marshal(top)
}

func rewriteMember(obj map[string]json.RawMessage, f func(json.RawMessage, string) (json.RawMessage, error), where string) error {
	raw, ok := obj["securityRequirements"]
	if !ok {
		return nil
	}
	out, err := f(raw, where)
	if err != nil {
		return err
	}
	obj["securityRequirements"] = out
	return nil
}

// toSpec turns a2a-go's [{"schemes": {"x": [..]}}] into the StringList form.
func toSpec(raw json.RawMessage, where string) (json.RawMessage, error) {
	var reqs []requirement[[]string]
	if err := json.Unmarshal(raw, &reqs); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	out := make([]requirement[stringList], len(reqs))
	for i, r := range reqs {
		out[i].Schemes = make(map[string]stringList, len(r.Schemes))
		for name, scopes := range r.Schemes {
			out[i].Schemes[name] = stringList{List: scopes}
		}
	}
	return json.Marshal(out)
}

// fromSpec turns either form into a2a-go's arrays.
func fromSpec(raw json.RawMessage, where string) (json.RawMessage, error) {
	if string(raw) == "null" {
		return raw, nil
	}
	var reqs []requirement[json.RawMessage]
	if err := json.Unmarshal(raw, &reqs); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	out := make([]requirement[[]string], len(reqs))
	for i, r := range reqs {
		out[i].Schemes = make(map[string][]string, len(r.Schemes))
		for name, v := range r.Schemes {
			scopes, err := scopesOf(v)
			if err != nil {
				return nil, fmt.Errorf("%s[%d].schemes.%s: %w", where, i, name, err)
			}
			out[i].Schemes[name] = scopes
		}
	}
	return json.Marshal(out)
}

// scopesOf reads a StringList ({"list": [...]}, or {} for none) or a bare
// array of strings.
func scopesOf(v json.RawMessage) ([]string, error) {
	var scopes []string
	switch first(v) {
	case '[':
		if err := json.Unmarshal(v, &scopes); err != nil {
			return nil, fmt.Errorf("want an array of strings: %w", err)
		}
	case '{':
		var members map[string]json.RawMessage
		if err := json.Unmarshal(v, &members); err != nil {
			return nil, err
		}
		for k := range members {
			if k != "list" {
				return nil, fmt.Errorf("StringList has an unknown member %q", k)
			}
		}
		if l, ok := members["list"]; ok {
			if first(l) != '[' {
				return nil, fmt.Errorf(`"list" is not an array of strings`)
			}
			if err := json.Unmarshal(l, &scopes); err != nil {
				return nil, fmt.Errorf(`"list": %w`, err)
			}
		}
	default:
		return nil, fmt.Errorf(`want a StringList {"list": [...]}, got %.40s`, v)
	}
	if scopes == nil {
		scopes = []string{}
	}
	return scopes, nil
}

// first is the first byte of a JSON value past white space (a RawMessage
// keeps the bytes as they came).
func first(v json.RawMessage) byte {
	for _, c := range v {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}
