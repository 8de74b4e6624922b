package policy

import (
	"fmt"
	"net"
	"path/filepath"
)

// Limits tell Load the node's own places, which no workspace may show. Every Codex turn sees
// its brand's workspace and nothing else of the disk (docs/confinement.md), so a workspace that
// is, or contains, one of them would hand it to whichever agent the brand serves.
//
// Besides the rules of the package documentation, every workspace
//   - is not the root of the file system, the user's home folder (os.UserHomeDir) or the data
//     dir, and does not contain the home folder (docs/threats.md W10);
//   - does not contain the data dir or the policy file (resolved, should policy.json be a
//     symlink), whatever its access mode (W11);
//   - does not lie inside the data dir, whatever its access mode: its codex/ folder holds every
//     agent's Codex sessions and turn scratch (W12, W24);
//   - if read_write, does not overlap another brand's workspace: neither contains the other
//     nor are they the same folder (W12).
//
// The home, policy-file and overlap rules hold with the zero Limits too; the data-dir rules need
// DataDir. Paths are compared absolute, cleaned and with symlinks evaluated, a folder containing
// another when it is a prefix ending at a separator (/a/b contains /a/b/c, not /a/bc).
//
// Limits also say how the node exposes its gateway beyond policy.json, for the rule that a
// public gateway never accepts loopback issuers (see Public; docs/threats.md N4).
//
// A policy remembers the Limits it was loaded with: Validate and Save of it, or of its Clone,
// apply them again.
type Limits struct {
	// DataDir is the node's data dir: its signing key, admin token and pact.sqlite. It need not
	// exist yet. Empty skips the data-dir rules.
	DataDir string
	// Funnel: the node publishes the gateway with Tailscale Funnel whatever pact.funnel says
	// (node serve --funnel).
	Funnel bool
	// GatewayListen is the gateway listener's address (host:port). Empty: unknown.
	GatewayListen string
}

// Load reads and checks the policy file at path like the package-level Load, and also by l.
func (l Limits) Load(path string) (*Policy, error) { return load(path, l) }

// bounds are the resolved Limits and policy file a workspace is checked against; "" = unknown.
type bounds struct {
	dataDir    string
	policyFile string
	public     string // why the node makes the gateway public whatever the policy says; "" if it does not
}

func resolveBounds(l Limits, policyFile string) bounds {
	bd := bounds{dataDir: resolvePath(l.DataDir), policyFile: resolvePath(policyFile)}
	switch {
	case l.Funnel:
		bd.public = "the node publishes the gateway on the internet with Tailscale Funnel (--funnel)"
	case l.GatewayListen != "" && !listensOnLoopback(l.GatewayListen):
		bd.public = fmt.Sprintf("the gateway listens on %s, which other computers reach", l.GatewayListen)
	}
	return bd
}

// listensOnLoopback: a listen address (host:port) only this computer reaches. No host, or
// 0.0.0.0 or ::, is every address; a name other than localhost may be any.
func listensOnLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && isLoopback(host)
}

// resolvePath is p made absolute and clean, with the symlinks of its longest existing leading
// part evaluated (a data dir or a policy file about to be written need not exist yet); "" for "".
func resolvePath(p string) string {
	if p == "" {
		return ""
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	rest := ""
	for dir := abs; ; {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(real, rest)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return abs
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// overlapping reports how the folders a and b overlap: "is the same folder as", "contains",
// "lies inside", or "" when neither contains the other.
func overlapping(a, b string) string {
	switch {
	case samePath(a, b):
		return "is the same folder as"
	case inside(b, a):
		return "contains"
	case inside(a, b):
		return "lies inside"
	}
	return ""
}
