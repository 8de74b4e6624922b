#!/usr/bin/env bash
# `make run`: get what a fresh Debian/Ubuntu machine lacks and start Aether on
# the example policy — the desktop app where there is a display, else the
# headless node (with the admin UI in a browser).
set -euo pipefail
cd "$(dirname "$0")/.."

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
need=()
for p in libgtk-3-dev libwebkit2gtk-4.1-dev pkg-config; do
	dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
command -v go >/dev/null || { echo "Go 1.26 or newer is required: https://go.dev/dl/" >&2; exit 1; }

data="${AETHER_DATA_DIR:-$PWD/.aether/node}"
if [ -z "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
	echo "No display here: starting the headless node instead of the desktop app."
	echo "Open the sign-in link it prints in a browser on this machine."
	exec go run . node serve --policy examples/policy.json --data-dir "$data" --port 0 --admin-port 3000 --pact-listen 127.0.0.1:8080
fi
if [ ${#need[@]} -gt 0 ]; then
	echo "Installing ${need[*]} (the desktop app's build dependencies)…"
	$sudo apt-get update -qq
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
if command -v npm >/dev/null; then
	echo "Building the admin UI…"
	(cd frontend && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error; } && npm run build --silent >/dev/null)
else
	echo "npm not found: using the admin UI already built in frontend/dist."
fi
echo "Building the desktop app…"
mkdir -p bin
go build -tags desktop,production,webkit2_41 -o bin/aether-desktop .
AETHER_POLICY="$PWD/examples/policy.json" AETHER_DATA_DIR="$data" exec bin/aether-desktop
