package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Hash identifies what the policy makes the node do, for receipts (P11): "sha256:" and the hex
// SHA-256 of canonical JSON (object keys sorted, no spaces, no HTML escaping) of the pact section
// with each brand's resolved workspace and effective instructions, and the declared scopes.
// Sections Aether does not manage, and formatting, do not change it.
func (p *Policy) Hash() string {
	doc := map[string]any{"scopes": scopesCanon(p.Scopes)}
	if p.Pact != nil {
		brands := make([]any, 0, len(p.Pact.Brands))
		for _, b := range p.Pact.Brands {
			brands = append(brands, map[string]any{
				"id":           b.ID,
				"name":         b.Name,
				"description":  b.Description,
				"capability":   b.Capability,
				"instructions": b.InstructionText(),
				"workspace":    b.Workspace,
				"workspaceDir": b.WorkspaceDir,
				"accessMode":   string(b.AccessMode),
				"scope":        map[string]any{"id": b.Scope.ID, "description": b.Scope.Description},
			})
		}
		pact := map[string]any{
			"publicUrl":                 p.Pact.PublicURL,
			"audience":                  p.Pact.Audience,
			"allowInsecureLocalIssuers": p.Pact.AllowInsecureLocalIssuers,
			"brands":                    brands,
		}
		if len(p.Pact.TrustedProxies) > 0 { // absent, the hash of every earlier policy stands
			pact["trustedProxies"] = p.Pact.TrustedProxies
		}
		doc["pact"] = pact
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		panic("policy: hash: " + err.Error()) // only strings, bools, maps and slices: cannot fail
	}
	sum := sha256.Sum256(bytes.TrimRight(b.Bytes(), "\n"))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func scopesCanon(scopes []Scope) []any {
	out := make([]any, 0, len(scopes))
	for _, s := range scopes {
		out = append(out, map[string]any{"id": s.ID, "description": s.Description})
	}
	return out
}
