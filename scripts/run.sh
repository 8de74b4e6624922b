#!/usr/bin/env bash
# `make run`: get what a fresh Debian/Ubuntu machine lacks (scripts/deps.sh) and start Aether
# on the example policy — the desktop app where there is a display, else the headless node
# (with the admin UI in a browser). Codex is the one on PATH, else the pinned one.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

headless=""
[ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] || headless=1
if [ -n "$headless" ]; then scripts/deps.sh run; else scripts/deps.sh desktop; fi

codex=${AETHER_CODEX:-$(command -v codex || scripts/install-codex.sh 2>/dev/null)}
ldflags="-X github.com/aether/aether/backend/version.version=$(scripts/version.sh)"
data="${AETHER_DATA_DIR:-$PWD/.aether/node}"
if [ -n "$headless" ]; then
	echo "No display here: starting the headless node instead of the desktop app."
	echo "Open the sign-in link it prints in a browser on this machine."
	exec go run -ldflags "$ldflags" . node serve --policy examples/policy.json --data-dir "$data" \
		--port 0 --admin-port 3000 --pact-listen 127.0.0.1:8080 --codex "$codex"
fi
echo "Building the admin UI…"
(cd frontend && npm run build --silent >/dev/null)
echo "Building the desktop app…"
mkdir -p bin
go build -tags desktop,production,webkit2_41 -ldflags "$ldflags" -o bin/aether-desktop .
AETHER_POLICY="$PWD/examples/policy.json" AETHER_DATA_DIR="$data" AETHER_CODEX="$codex" exec bin/aether-desktop
