#!/usr/bin/env bash
# Gets what `make run`, `make package` and `make test` need on a Debian/Ubuntu machine, and
# does nothing (quickly) when it is all there. Run again at will.
#
#   scripts/deps.sh run       the node: bubblewrap (every Codex turn runs inside it), the
#                             frontend's and interop/'s npm packages, the pinned codex
#   scripts/deps.sh desktop   run + the desktop app's build packages (GTK, WebKitGTK)
#   scripts/deps.sh package   desktop + what builds the .deb (dpkg-dev, ImageMagick,
#                             desktop-file-utils)
#   scripts/deps.sh test      package + what the tests use: Chromium, Xvfb, dunst, xdotool,
#                             D-Bus, caddy (the TLS proxy test), systemd-analyze, …
#
# Debian packages come from apt, through sudo when not root. Go (≥ 1.26, at /usr/local/go or
# on PATH) and Node.js (≥ 20, with npm) are not Debian 12's versions: they must be there.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

what=${1:-test}
run=(bubblewrap ca-certificates git)
desktop=(libgtk-3-dev libwebkit2gtk-4.1-dev pkg-config gcc libc6-dev)
package=(dpkg-dev imagemagick desktop-file-utils)
test=(
	# the desktop GUI tests (scripts/gui-test.sh, scripts/package-test.sh)
	xvfb xauth dunst x11-apps x11-utils xdotool libx11-dev dbus dbus-x11 libglib2.0-bin
	curl jq procps fonts-dejavu-core systemd make openssl
	# reads the screenshots' text (the key must never show: scripts/gui-test.sh)
	tesseract-ocr
	# the admin UI in a browser (backend/e2e/browser_test.go)
	chromium
	# the documented TLS proxy (backend/e2e/proxy_test.go)
	caddy
)
case $what in
run) want=("${run[@]}") ;;
desktop) want=("${run[@]}" "${desktop[@]}") ;;
package) want=("${run[@]}" "${desktop[@]}" "${package[@]}") ;;
test) want=("${run[@]}" "${desktop[@]}" "${package[@]}" "${test[@]}") ;;
*)
	echo "usage: scripts/deps.sh run|desktop|package|test" >&2
	exit 2
	;;
esac

fail() {
	echo "deps: $*" >&2
	exit 1
}

# Go and Node.js: checked, not installed.
command -v go >/dev/null || fail "Go 1.26 or newer is needed (https://go.dev/dl/; /usr/local/go/bin is searched too)"
gov=$(go env GOVERSION | sed -E 's/^go([0-9]+)\.([0-9]+).*/\1 \2/')
read -r gomaj gomin <<<"$gov"
[ "$gomaj" -gt 1 ] || [ "$gomin" -ge 26 ] || fail "Go 1.26 or newer is needed; this is $(go env GOVERSION)"
command -v node >/dev/null && command -v npm >/dev/null || fail "Node.js 20 or newer with npm is needed (https://nodejs.org/)"
[ "$(node -p 'process.versions.node.split(".")[0]')" -ge 20 ] || fail "Node.js 20 or newer is needed; this is $(node --version)"

# Debian packages: one dpkg-query for all of them.
command -v dpkg-query >/dev/null || fail "this is not a Debian/Ubuntu machine (no dpkg-query)"
missing=()
while read -r pkg status; do
	[ "$status" = installed ] || missing+=("$pkg")
done < <(for p in "${want[@]}"; do
	printf '%s %s\n' "$p" "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || echo missing)"
done)
if [ ${#missing[@]} -gt 0 ]; then
	sudo=()
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null || fail "these packages are missing and there is no sudo: as root, run apt-get install ${missing[*]}"
		sudo=(sudo)
	fi
	echo "== apt-get install ${missing[*]}"
	"${sudo[@]}" apt-get update -qq
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The frontend's npm packages, and interop/'s (the A2A JavaScript SDK that backend/e2e/jssdk_test.go
# drives, the MCP Inspector whose CLI backend/e2e/mcp_test.go runs), each when its package-lock.json is newer than what is installed.
for dir in frontend interop; do
	if [ ! -f $dir/node_modules/.package-lock.json ] || [ $dir/package-lock.json -nt $dir/node_modules/.package-lock.json ]; then
		echo "== npm ci ($dir)"
		(cd $dir && npm ci --no-audit --no-fund --loglevel=error)
	fi
done

# The pinned codex, in .cache/codex (scripts/install-codex.sh does nothing when it is there).
log=$(mktemp)
trap 'rm -f "$log"' EXIT
scripts/install-codex.sh >/dev/null 2>"$log" || {
	cat "$log" >&2
	fail "could not install the pinned codex (scripts/install-codex.sh)"
}
