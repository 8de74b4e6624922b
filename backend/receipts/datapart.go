package receipts

import (
	"encoding/json"
	"fmt"
	"strings"
)

// DataPart is what the receipt artifact's data part shows of a receipt: its
// signed claims, read from the JWS payload, with every member name in
// camelCase (pact_scope → pactScope, grant_revoked → grantRevoked,
// usage.input_tokens → usage.inputTokens, …), since JSON that A2A clients see
// is camelCase. The signed claims keep their JWT names, so receipts signed
// before and after read the same (docs/wire.md, "Receipts"). Nothing is
// checked here: VerifyOne does that.
func DataPart(jws string) (map[string]any, error) {
	payload, err := jwsPart(jws, 1)
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return nil, fmt.Errorf("receipt claims: %w", err)
	}
	out, err := camelKeys(claims, "")
	if err != nil {
		return nil, err
	}
	return out.(map[string]any), nil
}

// camelKeys renames the members of every object in v to camelCase; two names
// that become one are an error rather than a silent choice.
func camelKeys(v any, path string) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			name := camel(k)
			if _, dup := out[name]; dup {
				return nil, fmt.Errorf("receipt claims: %s%s and another member are both %q in camelCase", path, k, name)
			}
			y, err := camelKeys(x, path+k+".")
			if err != nil {
				return nil, err
			}
			out[name] = y
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			y, err := camelKeys(x, fmt.Sprintf("%s%d.", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = y
		}
		return out, nil
	}
	return v, nil
}

// camel is snake_case in camelCase: cached_input_tokens → cachedInputTokens.
func camel(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		if p := parts[i]; p != "" {
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, "")
}
