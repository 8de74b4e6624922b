package policy

import (
	"fmt"
	"strings"
)

// Describe is what `aether policy check` prints: the effective brands with their resolved
// workspaces, and the scopes, including the one the node adds.
func Describe(p *Policy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "policy %s\n", p.Hash())
	if p.BaseDir != "" {
		fmt.Fprintf(&b, "folder: %s\n", p.BaseDir)
	}
	if p.Pact == nil {
		b.WriteString("no pact section: the gateway offers no brands\n")
	} else {
		pc := p.Pact
		fmt.Fprintf(&b, "publicUrl: %s\naudience: %s\n", pc.PublicURL, pc.Audience)
		if pc.AllowInsecureLocalIssuers {
			b.WriteString("allowInsecureLocalIssuers: true (http loopback issuers accepted; for local tests only)\n")
		}
		fmt.Fprintf(&b, "scope added by the node: %s\n", PactScope)
		if len(pc.Brands) == 0 {
			b.WriteString("brands: none yet\n")
		} else {
			fmt.Fprintf(&b, "brands (%d):\n", len(pc.Brands))
		}
		for _, br := range pc.Brands {
			capability := br.Capability + " (built in)"
			if br.Instructions != "" {
				capability = br.Capability + " (own instructions)"
			}
			workspace := br.WorkspaceDir
			if workspace == "" {
				workspace = br.Workspace + " (not resolved)"
			}
			fmt.Fprintf(&b, "  %s: %s\n", br.ID, br.Name)
			fmt.Fprintf(&b, "    scope:       %s (%s)\n", br.Scope.ID, br.Scope.Description)
			fmt.Fprintf(&b, "    access mode: %s\n", br.AccessMode)
			fmt.Fprintf(&b, "    capability:  %s\n", capability)
			fmt.Fprintf(&b, "    workspace:   %s\n", workspace)
			fmt.Fprintf(&b, "    agent card:  %s/a2a/%s/.well-known/agent-card.json\n", pc.PublicURL, br.ID)
		}
	}
	if len(p.Scopes) > 0 {
		b.WriteString("declared scopes:\n")
		for _, s := range p.Scopes {
			fmt.Fprintf(&b, "  %s (%s)\n", s.ID, s.Description)
		}
	}
	return b.String()
}
