package gateway

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckJSON(t *testing.T) {
	cases := []struct {
		body string
		want bodyErrorKind
		ok   bool
	}{
		{body: `{"a":[1,{"b":null}],"c":"é"}`, ok: true},
		{body: "{\"a\":\"\xff\"}", want: kindParse},
		{body: `{"a":1} x`, want: kindParse},
		{body: `{"a":1}{"b":2}`, want: kindParse},
		{body: `{"a":`, want: kindParse},
		{body: `{"a":1,"a":2}`, want: kindInvalid},
		{body: `{"a":1,"A":2}`, want: kindInvalid},
		{body: `{"x":{"a":1,"a":2}}`, want: kindInvalid},
		{body: strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth), ok: true},
		{body: strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1), want: kindInvalid},
	}
	for _, c := range cases {
		err := checkJSON([]byte(c.body))
		if c.ok {
			if err != nil {
				t.Errorf("%.40q: %v", c.body, err)
			}
			continue
		}
		var be *bodyError
		if !errors.As(err, &be) || be.kind != c.want {
			t.Errorf("%.40q: err %v, want kind %d", c.body, err, c.want)
		}
	}
}

func TestCheckEnvelope(t *testing.T) {
	good := `{"jsonrpc":"2.0","id":"a","method":"SendMessage","params":{}}`
	if id, err := checkEnvelope([]byte(good)); err != nil || string(id) != `"a"` {
		t.Fatalf("good envelope: %s %v", id, err)
	}
	for _, bad := range []string{
		`[` + good + `]`, `[]`, `"x"`,
		`{"jsonrpc":"1.0","id":1,"method":"m"}`, `{"id":1,"method":"m"}`, `{"jsonrpc":"2.0","id":1}`,
		`{"jsonrpc":"2.0","method":"m"}`, `{"jsonrpc":"2.0","id":{},"method":"m"}`, `{"jsonrpc":"2.0","id":1.5,"method":"m"}`,
		`{"jsonrpc":"2.0","id":"` + strings.Repeat("x", maxIDLen) + `","method":"m"}`,
	} {
		if _, err := checkEnvelope([]byte(bad)); err == nil {
			t.Errorf("%.50q accepted", bad)
		}
	}
}
