#!/usr/bin/env bash
# Gets the pinned Codex CLI into a project-local folder and prints the path of its native
# binary. The version, the sha512 and the download are Aether's own (backend/codexget, the
# same as the Status page's Get Codex, `aether codex get`): no Node.js or npm needed.
#
# Usage: scripts/install-codex.sh [dir]   (default: <repo>/.cache/codex)
set -euo pipefail
export PATH="$PATH:/usr/local/go/bin"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$repo/.cache/codex}"
case "$dir" in /*) ;; *) dir="$PWD/$dir" ;; esac

# Get puts a codex at <dir>/<version>/bin/codex only once it is checked: when one is there,
# no build is needed to find it.
version=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' "$repo/backend/codexget/pin.go")
bin="$dir/$version/bin/codex"
if [ ! -x "$bin" ]; then
	bin=$(cd "$repo" && go run . codex get --dir "$dir")
fi
"$bin" --version >&2
echo "$bin"
