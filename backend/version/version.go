// Package version is the version of this build: what `aether --version` prints, what the
// Status page shows (GET /api/status, docs/admin-api.md) and what the .deb is named after.
package version

import (
	"runtime/debug"
	"strings"
)

// version is set at build time by the Makefile and scripts/package.sh (from scripts/version.sh):
//
//	go build -ldflags "-X github.com/aether/aether/backend/version.version=0.3.0" .
var version string

// String is the build's version: the one given at build time, else the module version Go
// recorded from the VCS (a plain `go build` in a checkout), else "dev".
func String() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return strings.TrimPrefix(v, "v")
		}
	}
	return "dev"
}
