#!/usr/bin/env bash
# Gets the pinned Codex CLI into a project-local folder and prints the path of its native
# binary. The version, the sha512 and the unpacking are Aether's own (backend/codexget, the
# same as the Status page's Get Codex, `aether codex get`): no Node.js or npm needed. The
# package is downloaded once per machine and pin, into .cache/codex-registry
# (scripts/lib/codex-tarball.sh), which the GUI and package tests use too.
#
# Usage: scripts/install-codex.sh [dir]   (default: <repo>/.cache/codex)
set -euo pipefail
export PATH="$PATH:/usr/local/go/bin"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$ROOT/.cache/codex}"
case "$dir" in /*) ;; *) dir="$PWD/$dir" ;; esac

# Get puts a codex at <dir>/<version>/bin/codex only once it is checked: when one is there,
# no build is needed to find it.
version=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' "$ROOT/backend/codexget/pin.go")
bin="$dir/$version/bin/codex"
if [ ! -x "$bin" ]; then
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	(cd "$ROOT" && go build -o "$work/aether" .)
	# shellcheck source=lib/codex-tarball.sh
	. "$ROOT/scripts/lib/codex-tarball.sh"
	codex_tarball "$work/aether" >/dev/null || {
		echo "install-codex: could not download the pinned Codex package from npm's registry" >&2
		exit 1
	}
	bin=$("$work/aether" codex get --dir "$dir" --registry "file://$CODEX_CACHE")
fi
"$bin" --version >&2
echo "$bin"
