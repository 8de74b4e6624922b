// Package codexget gets the pinned Codex CLI for this machine from the npm registry without
// Node.js or npm: it downloads the platform package of @openai/codex, checks it against the
// sha512 integrity pinned here, unpacks it beside the final folder and renames it into place,
// so that a tampered, truncated or hostile download never leaves anything runnable behind
// (docs/codex-get.md; docs/threats.md, X1…).
package codexget

import (
	"fmt"
	"runtime"
)

// Version is the Codex release Aether gets, and the one scripts/install-codex.sh installs
// (it reads it from `aether codex pin`, or from this file when no aether is built).
const Version = "0.171.0"

// DefaultRegistry is npm's public registry.
const DefaultRegistry = "https://registry.npmjs.org"

// Platform is one platform package of @openai/codex at Version: npm publishes the native
// binary as the version "<Version>-<Name>" of the same package.
type Platform struct {
	Name      string // npm's suffix, e.g. "linux-x64"
	Triple    string // the folder under vendor/ that holds bin/codex and its helpers
	Integrity string // the registry's dist.integrity of the tarball (sha512, base64)
	Size      int64  // the tarball's size in bytes; a longer download is refused
}

// pinned are the platform packages of Version, as `npm view @openai/codex@<Version>-<name> dist`
// gives them; the sizes are the registry's Content-Length.
var pinned = map[string]Platform{
	"linux/amd64": {Name: "linux-x64", Triple: "x86_64-unknown-linux-musl", Size: 172033439,
		Integrity: "sha512-l66NZkQgdk2C3pbcfULDz42yEUB581MVA6I+Y43Wp4OIqEy73HCdmZ0GTjeAHY2ycuH4N00d9VsLrwT1jxshTw=="},
	"linux/arm64": {Name: "linux-arm64", Triple: "aarch64-unknown-linux-musl", Size: 176542339,
		Integrity: "sha512-9z17t4bbUJ9UCIb49O4PoA+ki+45q3rd8nZ8PeH6sYnlKkBld/Xpo/OS3h3Ti954+foshX4o7k5TCU8N7zzqQA=="},
}

// ForThisMachine is the platform package for the running OS and architecture.
func ForThisMachine() (Platform, error) {
	return For(runtime.GOOS, runtime.GOARCH)
}

// For is the platform package for goos/goarch; only Linux has confinement, hence a package.
func For(goos, goarch string) (Platform, error) {
	p, ok := pinned[goos+"/"+goarch]
	if !ok {
		return Platform{}, fmt.Errorf("no pinned Codex package for %s/%s: Aether gets Codex for linux/amd64 and linux/arm64; elsewhere, install Codex %s yourself and give its path", goos, goarch, Version)
	}
	return p, nil
}

// Package is the npm spec of the platform package, e.g. "@openai/codex@0.171.0-linux-x64".
func (p Platform) Package() string { return "@openai/codex@" + Version + "-" + p.Name }

// TarballURL is where registry serves the platform package's tarball.
func (p Platform) TarballURL(registry string) string {
	return registry + "/@openai/codex/-/codex-" + Version + "-" + p.Name + ".tgz"
}
