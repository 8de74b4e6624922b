package gateway

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
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
		// Inside metadata and a part's data, keys are case-sensitive (R12 narrowed to
		// what a2a-go decodes into structs); an exact repeat is refused there too.
		{body: `{"message":{"metadata":{"trace":"a","Trace":"b"}}}`, ok: true},
		{body: `{"message":{"parts":[{"data":{"v":[{"k":1,"K":2}]}}]}}`, ok: true},
		{body: `{"message":{"Metadata":{"trace":"a","TRACE":"b"}}}`, ok: true},
		{body: `{"message":{"metadata":{"trace":"a","trace":"b"}}}`, want: kindInvalid},
		{body: `{"message":{"metadata":{},"Metadata":{}}}`, want: kindInvalid},
		{body: `{"message":{"messageId":"a","MessageId":"b","metadata":{}}}`, want: kindInvalid},
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

// What the narrowing of R12 rests on: a2a-go decodes metadata and a part's
// data into maps, where keys that differ in case stay two keys, and every
// field of the request types named metadata or data (in any case) is a map
// or an interface, never a struct that encoding/json would match by case.
func TestFreeFormMembersAreMaps(t *testing.T) {
	var req a2a.SendMessageRequest
	body := `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"data":{"k":1,"K":2},"metadata":{"p":1,"P":2}}],"metadata":{"t":1,"T":2}},"metadata":{"r":1,"R":2}}`
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	data, _ := req.Message.Parts[0].Data().(map[string]any)
	for what, m := range map[string]map[string]any{"data": data, "part metadata": req.Message.Parts[0].Metadata,
		"message metadata": req.Message.Metadata, "request metadata": req.Metadata} {
		if len(m) != 2 {
			t.Errorf("%s decoded to %v: want both keys", what, m)
		}
	}
	seen := map[reflect.Type]bool{}
	var check func(reflect.Type, string)
	check = func(typ reflect.Type, path string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] {
			return
		}
		seen[typ] = true
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				name = f.Name
			}
			if freeForm[foldKey(name)] && f.Type.Kind() != reflect.Map && f.Type.Kind() != reflect.Interface &&
				!(f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Interface) {
				t.Errorf("%s.%s is a %s: the guard treats %q as free-form", path, f.Name, f.Type, name)
			}
			check(f.Type, path+"."+f.Name)
		}
	}
	for _, v := range []any{a2a.SendMessageRequest{}, a2a.GetTaskRequest{}, a2a.ListTasksRequest{}, a2a.CancelTaskRequest{},
		a2a.SubscribeToTaskRequest{}, a2a.GetTaskPushConfigRequest{}, a2a.ListTaskPushConfigRequest{}, a2a.DeleteTaskPushConfigRequest{}} {
		check(reflect.TypeOf(v), reflect.TypeOf(v).Name())
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
