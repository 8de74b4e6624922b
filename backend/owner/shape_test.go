package owner_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"
)

// A shape is a JSON value's form: what the edges (frontend/src/api.ts, the UI's mock API) must
// agree on with owner's types. Go types, TypeScript types and sample values are each read into
// one and compared.
type shape struct {
	kind     string // "string", "time" (an RFC 3339 string), "number", "boolean", "object", "array", "any"
	fields   map[string]*member
	open     bool // an object that admits other keys (a TypeScript index signature)
	elem     *shape
	nullable bool
}

type member struct {
	s        *shape
	optional bool // Go: omitempty; TypeScript: "?"
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// goShape is what encoding/json makes of t.
func goShape(t reflect.Type) *shape {
	switch {
	case t == timeType:
		return &shape{kind: "time"}
	case t == rawType:
		return &shape{kind: "any", nullable: true}
	}
	switch t.Kind() {
	case reflect.Pointer:
		s := *goShape(t.Elem())
		s.nullable = true
		return &s
	case reflect.String:
		return &shape{kind: "string"}
	case reflect.Bool:
		return &shape{kind: "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8,
		reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return &shape{kind: "number"}
	case reflect.Slice, reflect.Array:
		return &shape{kind: "array", elem: goShape(t.Elem())}
	case reflect.Struct:
		s := &shape{kind: "object", fields: map[string]*member{}}
		for f := range t.Fields() {
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			m := &member{s: goShape(f.Type), optional: strings.Contains(opts, "omitempty")}
			if m.optional && f.Type.Kind() == reflect.Pointer {
				m.s.nullable = false // a nil pointer is left out, never null
			}
			s.fields[name] = m
		}
		return s
	}
	return &shape{kind: "any", nullable: true} // maps, interfaces
}

// tsFile is the exported interfaces and type aliases of a TypeScript file, parsed simply: the
// subset api.ts is written in (object types, unions, string literals, arrays, Record<…>).
type tsFile struct {
	types map[string]string // name → its type's source
	names []string          // the interfaces, in file order
}

var (
	tsComment = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
	tsDecl    = regexp.MustCompile(`export (interface|type) (\w+)(?: =)?\s*`)
)

func parseTS(src string) tsFile {
	src = tsComment.ReplaceAllString(src, "")
	f := tsFile{types: map[string]string{}}
	for _, m := range tsDecl.FindAllStringSubmatchIndex(src, -1) {
		kind, name, rest := src[m[2]:m[3]], src[m[4]:m[5]], src[m[1]:]
		end := strings.Index(rest, ";")
		if kind == "interface" {
			end = matching(rest, 0) + 1
			f.names = append(f.names, name)
		}
		f.types[name] = rest[:end]
	}
	return f
}

// matching is the index of the bracket that closes the one at i.
func matching(s string, i int) int {
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '{', '[', '<', '(':
			depth++
		case '}', ']', '>', ')':
			if depth--; depth == 0 {
				return j
			}
		}
	}
	panic("unbalanced brackets in: " + s)
}

// splitTop splits s at sep outside brackets and string literals.
func splitTop(s string, sep byte) []string {
	var parts []string
	depth, start, quoted := 0, 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '{' || c == '[' || c == '<' || c == '(':
			depth++
		case c == '}' || c == ']' || c == '>' || c == ')':
			depth--
		case c == sep && depth == 0:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// shapeOf reads a TypeScript type expression.
func (f tsFile) shapeOf(src string) (*shape, error) {
	src = strings.TrimSpace(src)
	var out *shape
	nullable := false
	for _, part := range splitTop(src, '|') {
		part = strings.TrimSpace(part)
		if part == "null" {
			nullable = true
			continue
		}
		s, err := f.primary(part)
		if err != nil {
			return nil, err
		}
		switch {
		case out == nil:
			out = s
		case out.kind != s.kind || out.kind == "object" || out.kind == "array":
			return nil, fmt.Errorf("%q: a union of %s and %s", src, out.kind, s.kind)
		}
	}
	if out == nil {
		return &shape{kind: "any", nullable: nullable}, nil // null alone
	}
	cp := *out
	cp.nullable = cp.nullable || nullable
	return &cp, nil
}

func (f tsFile) primary(src string) (*shape, error) {
	switch {
	case strings.HasSuffix(src, "[]"):
		elem, err := f.shapeOf(strings.TrimSuffix(src, "[]"))
		return &shape{kind: "array", elem: elem}, err
	case strings.HasPrefix(src, "{"):
		return f.object(src[1:matching(src, 0)])
	case strings.HasPrefix(src, `"`), src == "string":
		return &shape{kind: "string"}, nil
	case src == "number", src == "boolean":
		return &shape{kind: src}, nil
	case src == "unknown", src == "any", strings.HasPrefix(src, "Record<"):
		return &shape{kind: "any", nullable: true}, nil
	}
	def, ok := f.types[src]
	if !ok {
		return nil, fmt.Errorf("unknown type %q", src)
	}
	return f.shapeOf(def)
}

// object reads the members of an object type: `name?: type;` and index signatures.
func (f tsFile) object(body string) (*shape, error) {
	s := &shape{kind: "object", fields: map[string]*member{}}
	for _, decl := range splitTop(strings.ReplaceAll(body, ";", ","), ',') {
		decl = strings.TrimSpace(decl)
		if decl == "" {
			continue
		}
		if strings.HasPrefix(decl, "[") {
			s.open = true
			continue
		}
		parts := splitTop(decl, ':')
		if len(parts) != 2 {
			return nil, fmt.Errorf("member %q", decl)
		}
		name := strings.TrimSpace(parts[0])
		opt := strings.HasSuffix(name, "?")
		ms, err := f.shapeOf(parts[1])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		s.fields[strings.TrimSuffix(name, "?")] = &member{s: ms, optional: opt}
	}
	return s, nil
}

// compareTS lists where the TypeScript type ts says other than owner's go: a field missing or
// extra on either side, or of another kind. For an answer (the node writes, the UI reads) also
// null where Go never sends it or the other way, and required where Go may leave it out; a "?"
// on a field Go always sends is allowed. For a body (the UI writes) only a null Go cannot take.
func compareTS(path string, g, ts *shape, answer bool) []string {
	if g.kind == "any" {
		return nil
	}
	var out []string
	if gk, tk := strings.Replace(g.kind, "time", "string", 1), ts.kind; gk != tk {
		return []string{fmt.Sprintf("%s: api.ts says %s, owner's type is %s", path, tk, gk)}
	}
	if g.nullable != ts.nullable && (answer || ts.nullable) {
		out = append(out, fmt.Sprintf("%s: api.ts nullable=%v, owner's type nullable=%v (a Go pointer is null)", path, ts.nullable, g.nullable))
	}
	switch g.kind {
	case "array":
		out = append(out, compareTS(path+"[]", g.elem, ts.elem, answer)...)
	case "object":
		for _, name := range sortedKeys(g.fields) {
			gm, tm := g.fields[name], ts.fields[name]
			switch {
			case tm == nil:
				out = append(out, fmt.Sprintf("%s.%s: owner's type has it, api.ts has not", path, name))
			case answer && gm.optional && !tm.optional:
				out = append(out, fmt.Sprintf("%s.%s: owner may leave it out (omitempty), api.ts requires it", path, name))
			default:
				out = append(out, compareTS(path+"."+name, gm.s, tm.s, answer)...)
			}
		}
		for _, name := range sortedKeys(ts.fields) {
			if g.fields[name] == nil {
				out = append(out, fmt.Sprintf("%s.%s: api.ts has it, owner's type has not", path, name))
			}
		}
	}
	return out
}

// checkValue lists where the JSON value v does not fit owner's shape g.
func checkValue(path string, g *shape, v any) []string {
	if v == nil {
		if g.nullable {
			return nil
		}
		return []string{path + ": null, which owner's type never sends"}
	}
	bad := func() []string { return []string{fmt.Sprintf("%s: %T %.60v, owner's type is %s", path, v, v, g.kind)} }
	switch g.kind {
	case "any":
		return nil
	case "string":
		if _, ok := v.(string); !ok {
			return bad()
		}
	case "time":
		if s, ok := v.(string); !ok {
			return bad()
		} else if _, err := time.Parse(time.RFC3339, s); err != nil {
			return []string{fmt.Sprintf("%s: %q is not an RFC 3339 time", path, s)}
		}
	case "number":
		if _, ok := v.(float64); !ok {
			return bad()
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return bad()
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return bad()
		}
		var out []string
		for _, e := range a {
			for _, p := range checkValue(path+"[]", g.elem, e) {
				if !slices.Contains(out, p) { // said once for all the elements
					out = append(out, p)
				}
			}
		}
		return out
	case "object":
		o, ok := v.(map[string]any)
		if !ok {
			return bad()
		}
		return checkObject(path, g, o)
	}
	return nil
}

func checkObject(path string, g *shape, o map[string]any) []string {
	var out []string
	for _, name := range sortedKeys(g.fields) {
		m := g.fields[name]
		if v, ok := o[name]; ok {
			out = append(out, checkValue(path+"."+name, m.s, v)...)
		} else if !m.optional {
			out = append(out, fmt.Sprintf("%s.%s: owner's type always sends it, the sample has not", path, name))
		}
	}
	for _, name := range sortedKeys(o) {
		if g.fields[name] == nil {
			out = append(out, fmt.Sprintf("%s.%s: the sample has it, owner's type has not", path, name))
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
