#!/usr/bin/env bash
# The desktop app as the .deb ships it: the version stamped, -trimpath, stripped.
#
#   scripts/build-desktop.sh OUT        env: VERSION (default: scripts/version.sh)
#   scripts/build-desktop.sh --check BIN
#
# `make test` builds it once (make desktop-release): the GUI test runs it and `make package`
# puts that same file in the .deb. --check says whether BIN is such a build of this checkout:
# its --version (the commit, and +dirty for uncommitted changes: scripts/version.sh), and the
# tags and -trimpath Go recorded in it (go version -m; it leaves -ldflags out under -trimpath).
# Needs: Go, libgtk-3-dev libwebkit2gtk-4.1-dev (scripts/deps.sh desktop).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

version=${VERSION:-$(scripts/version.sh)}
tags=desktop,production,webkit2_41
ldflags="-s -w -X github.com/aether/aether/backend/version.version=$version"

check() { # check BIN: it is this build, or it says how it differs
	local bin=$1 got info want
	got=$("$bin" --version) || return 1
	[ "$got" = "aether $version" ] || {
		echo "build-desktop: $bin says \"$got\", want \"aether $version\"" >&2
		return 1
	}
	info=$(go version -m "$bin") || return 1
	for want in "-tags=$tags" "-trimpath=true"; do
		grep -qxF "	build	$want" <<<"$info" || {
			echo "build-desktop: $bin was not built with $want" >&2
			return 1
		}
	done
}

if [ "${1:-}" = --check ]; then
	check "${2:?usage: scripts/build-desktop.sh --check BIN}"
	exit
fi
out=${1:?usage: scripts/build-desktop.sh OUT}
echo "== go build -tags $tags (aether $version)"
mkdir -p "$(dirname "$out")"
go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$out" .
check "$out"
