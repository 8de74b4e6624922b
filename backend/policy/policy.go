// Package policy reads, checks and writes policy.json, the file that says which brands this
// node offers to personal agents (its "pact" section) and which scopes it declares.
//
// Loading is strict and fails closed: every problem in the file is reported at once, each with
// the JSON path of the bad value (see Error). A policy that loaded is internally consistent and
// its workspaces were resolved on disk.
//
// A *Policy returned by Load, Parse or Starter is a snapshot: nothing in this package changes it
// afterwards, and holders must treat it as read-only (share the pointer, publish a new one on
// reload, e.g. through an atomic.Pointer). To edit, take Clone, change the copy, then Save it.
// A turn that keeps the *Policy it started with, and records Hash, is unaffected by reloads (P11).
//
// # The file
//
//	{
//	  "pact": {
//	    "publicUrl": "https://aether.example.com",
//	    "audience": "https://aether.example.com",
//	    "allowInsecureLocalIssuers": false,
//	    "brands": [{
//	      "id": "review", "name": "Code review", "description": "Reviews code in my workspace.",
//	      "capability": "review", "workspace": "workspace", "accessMode": "read_only",
//	      "scope": {"id": "review:read_only", "description": "Review code (read only)"}
//	    }]
//	  },
//	  "scopes": [{"id": "…", "description": "…"}]
//	}
//
// Top-level sections other than "pact" and "scopes" belong to other tools: they are accepted
// unread and Save keeps them byte for byte, in their order. Only a key that looks like a typo of
// "pact" or "scopes" ("Pact", "scope") is refused. Inside the managed sections every field is
// known and unknown fields are errors. Keys that differ only in case are errors at the top level
// and inside the managed sections; exact duplicate keys are errors at any depth, also inside
// other sections.
//
// Every brand field is required except "instructions". "allowInsecureLocalIssuers" (loopback
// issuers, for tests on this computer; refused while the gateway is public, see Limits) and
// "funnel" (publish with Tailscale Funnel, docs/deploy.md) default to false, "brands" and
// "scopes" to empty, "taskRetentionDays" (how many days a finished task is
// kept; receipts are kept for ever) to 30. A policy without a "pact" section is valid and offers
// nothing (Policy.Pact is nil).
//
// # Capabilities
//
// A brand's "capability" names the instructions Codex gets. It is either a built-in capability
// (see Capabilities), and then the brand has no "instructions", or a name of the owner's own
// (lowercase letters, digits and -), and then "instructions" holds the text.
//
// # Workspaces
//
// "workspace" is checked as written on every OS, so a policy means the same everywhere: no "..",
// no "~", no UNC or device paths (\\server\share, \\?\, \\.\), no drive-relative paths (C:x), no
// ":" other than a drive letter's (alternate data streams), no Windows-reserved names (CON, NUL,
// COM1, …) or names ending in a dot or space, no backslashes except on Windows.
//
//   - A relative workspace is joined to the policy's folder (with symlinks resolved); after
//     resolving its own symlinks it must still lie strictly inside that folder.
//   - An absolute workspace must resolve to exactly itself (no symlink anywhere on the path) and
//     lie strictly inside the policy's folder or the user's home folder (the allowed roots).
//   - Either way it must be an existing folder and must not be, or contain, the policy's folder,
//     so an agent can never read or rewrite policy.json.
//   - It must be something a turn may see in full: not the root, the home folder or the node's
//     data dir, not around the data dir or the policy file, and if read_write neither inside the
//     data dir nor overlapping another brand's workspace (see Limits).
//
// Paths are compared case-insensitively on Windows and macOS. Brand.WorkspaceDir holds the
// resolved folder; RecheckWorkspace resolves it again at the start of a turn.
//
// # Scopes
//
// Scope ids are printable ASCII without spaces, quotes or backslashes, unique (ignoring case)
// across "scopes" and all brands. The node adds the "pact" scope itself; declaring it is an error.
package policy

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"time"

	"github.com/aether/aether/backend/domain"
)

// PactScope is the scope the node adds whenever a policy has a pact section.
const PactScope = "pact"

// MaxSize caps the size of policy.json.
const MaxSize = 1 << 20

var accessModes = []string{string(domain.ReadOnly), string(domain.ReadWrite)}

// Policy is a loaded policy.json. See the package documentation for the rules it obeys and
// for why it must be treated as read-only.
type Policy struct {
	// Pact is the "pact" section, nil when the file has none.
	Pact *Pact `json:"pact,omitempty"`
	// Scopes are the scopes declared in the top-level "scopes" list.
	Scopes []Scope `json:"scopes,omitempty"`
	// BaseDir is the absolute folder relative workspaces were resolved against (the policy's folder).
	BaseDir string `json:"-"`

	// sections are the file's top-level members as read, for Save to keep the ones it does not manage.
	sections []section
	// limits and file are what it was loaded with (file absolute, "" from Parse), for Validate,
	// Save and RecheckWorkspace to check again.
	limits Limits
	file   string
}

// Pact is the "pact" section of policy.json.
type Pact struct {
	PublicURL                 string `json:"publicUrl"`
	Audience                  string `json:"audience"`
	AllowInsecureLocalIssuers bool   `json:"allowInsecureLocalIssuers"`
	// TrustedProxies are the CIDRs of the TLS proxies in front of the gateway: only a peer in
	// one of them may say, in Forwarded or X-Forwarded-For, whom it forwards (docs/deploy.md).
	TrustedProxies []string `json:"trustedProxies,omitempty"`
	// TaskRetentionDays is how long a finished task is kept after its last change, in days
	// (1–3650; 0, absent, means DefaultTaskRetentionDays). Receipts are never deleted.
	TaskRetentionDays int `json:"taskRetentionDays,omitempty"`
	// Funnel publishes the gateway on the internet with Tailscale Funnel (docs/deploy.md).
	Funnel bool `json:"funnel,omitempty"`
	// Tailnet joins the owner's tailnet for the owner's paired phones without publishing the
	// gateway (docs/deploy.md, "Your phone on the tailnet"); Funnel joins it anyway.
	Tailnet bool    `json:"tailnet,omitempty"`
	Brands  []Brand `json:"brands"`
}

// DefaultTaskRetentionDays is the task retention of a policy that sets none.
const DefaultTaskRetentionDays = 30

// MaxTaskRetentionDays bounds taskRetentionDays (ten years).
const MaxTaskRetentionDays = 3650

// TaskRetention is how long the node keeps a finished task.
func (pc *Pact) TaskRetention() time.Duration {
	days := pc.TaskRetentionDays
	if days == 0 {
		days = DefaultTaskRetentionDays
	}
	return time.Duration(days) * 24 * time.Hour
}

// Proxies parses TrustedProxies (Validate has checked them); a bare address is a prefix of one.
func (pc *Pact) Proxies() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range pc.TrustedProxies {
		if p, err := parseProxy(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func parseProxy(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	return p.Masked(), err
}

// Brand is one capability the owner offers to personal agents.
type Brand struct {
	ID          domain.BrandID `json:"id"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Capability  string         `json:"capability"`
	// Instructions is the text of an owner-defined capability; empty for built-in ones.
	Instructions string            `json:"instructions,omitempty"`
	Workspace    string            `json:"workspace"`
	AccessMode   domain.AccessMode `json:"accessMode"`
	Scope        Scope             `json:"scope"`
	// Model (modelName) names the model the brand's turns ask the node's one upstream for; "" = the
	// owner's (docs/model-gateway.md).
	Model string `json:"modelName,omitempty"`
	// TokensPerDay is each grant's budget of model tokens (input + output) a UTC day;
	// 0 = no limit.
	TokensPerDay int64 `json:"tokensPerDay,omitempty"`

	// WorkspaceDir is Workspace resolved: absolute, symlinks evaluated. Set by Load and Parse.
	WorkspaceDir string `json:"-"`
}

// Scope is an OAuth scope with the text shown to the owner and agents.
type Scope struct {
	ID          string `json:"id"`
	Description string `json:"description"`
}

// section is one top-level member of the file, kept verbatim.
type section struct {
	key    string
	rawKey []byte
	raw    []byte
}

// Starter is the policy for a first run of a gateway listening on listen (host:port): its
// publicUrl is the gateway's own loopback address, so agents on this machine can try it at
// once (http://127.0.0.1:8080 when listen names no port), and it has no brands yet. It does
// not set allowInsecureLocalIssuers: a gateway the owner publishes later must never keep it
// (docs/threats.md N4).
func Starter(listen string) *Policy {
	url := "http://127.0.0.1:8080"
	if _, port, err := net.SplitHostPort(listen); err == nil && port != "0" {
		url = "http://127.0.0.1:" + port
	}
	return &Policy{Pact: &Pact{PublicURL: url, Audience: url, Brands: []Brand{}}}
}

// Brand returns a copy of the brand with the given id.
func (p *Policy) Brand(id domain.BrandID) (Brand, bool) {
	if p == nil || p.Pact == nil {
		return Brand{}, false
	}
	for _, b := range p.Pact.Brands {
		if b.ID == id {
			return b, true
		}
	}
	return Brand{}, false
}

// Clone returns a deep copy that can be edited and saved without touching p.
func (p *Policy) Clone() *Policy {
	if p == nil {
		return nil
	}
	c := *p
	if p.Pact != nil {
		pc := *p.Pact
		pc.Brands = append([]Brand(nil), p.Pact.Brands...)
		c.Pact = &pc
	}
	c.Scopes = append([]Scope(nil), p.Scopes...)
	c.sections = append([]section(nil), p.sections...) // the byte slices inside are never written
	return &c
}

// InstructionText is the text Codex gets for this brand: its own instructions, or the
// built-in capability's.
func (b Brand) InstructionText() string {
	if b.Instructions != "" {
		return b.Instructions
	}
	return builtins[b.Capability]
}

// WorkspaceKey identifies the brand's workspace folder for per-workspace locks: two brands
// with the same key work in the same folder. Case is folded on Windows and macOS.
func (b Brand) WorkspaceKey() string { return pathKey(b.WorkspaceDir) }

// caseInsensitivePaths is true where the usual file systems ignore case.
var caseInsensitivePaths = runtime.GOOS == "windows" || runtime.GOOS == "darwin"

func pathKey(p string) string {
	if caseInsensitivePaths {
		return strings.ToLower(p)
	}
	return p
}

// RecheckWorkspace resolves the brand's workspace again and fails if it is no longer valid or
// now resolves elsewhere than at load (a folder swapped for a symlink since, P7). Call it at the
// start of a turn; it returns the folder to run in.
func (p *Policy) RecheckWorkspace(brandID domain.BrandID) (string, error) {
	b, ok := p.Brand(brandID)
	if !ok {
		return "", fmt.Errorf("recheck workspace: no brand %q", brandID)
	}
	base, err := resolveBase(p.BaseDir)
	if err != nil {
		return "", fmt.Errorf("recheck workspace of brand %s: %w", brandID, err)
	}
	dir, msg := resolveWorkspace(b.Workspace, base, homeDir(), b.AccessMode == domain.ReadWrite, resolveBounds(p.limits, p.file))
	if msg != "" {
		return "", fmt.Errorf("recheck workspace of brand %s: %s", brandID, msg)
	}
	if pathKey(dir) != pathKey(b.WorkspaceDir) {
		return "", fmt.Errorf("recheck workspace of brand %s: it now resolves to %s, not %s as when the policy was loaded; reload the policy", brandID, dir, b.WorkspaceDir)
	}
	return dir, nil
}
