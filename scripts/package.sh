#!/usr/bin/env bash
# `make package`: builds the Debian package of the desktop app with Debian's own tools.
#
#   scripts/package.sh [OUT.deb]     (default dist/aether_<version>_<arch>.deb)
#   env: VERSION (default: scripts/version.sh)
#        AETHER_DESKTOP_BIN: the desktop binary, built already by scripts/build-desktop.sh
#        (make desktop-release); built here when unset
#
# Contents: /usr/bin/aether (scripts/build-desktop.sh: go build -tags
# desktop,production,webkit2_41), the desktop entry
# (build/linux/aether.desktop: also the handler of aether: consent links), the icon in the
# hicolor sizes (from build/appicon.png), the systemd user unit (build/linux/aether.service:
# `aether node serve` on the default data dir) and the deployment docs. Depends: the shared
# libraries the binary links (dpkg-shlibdeps) and bubblewrap, which confines every Codex turn.
# Needs: Go, libgtk-3-dev libwebkit2gtk-4.1-dev, dpkg-dev, imagemagick, desktop-file-utils
# (scripts/deps.sh package).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

version=${VERSION:-$(scripts/version.sh)}
arch=$(dpkg --print-architecture)
out=${1:-dist/aether_${version}_${arch}.deb}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
umask 022

mkdir -p "$root/usr/bin"
if [ -n "${AETHER_DESKTOP_BIN:-}" ]; then
	# Built already (make desktop-release): checked to be this checkout's release build.
	echo "== $AETHER_DESKTOP_BIN (aether $version)"
	VERSION=$version scripts/build-desktop.sh --check "$AETHER_DESKTOP_BIN"
	install -m 755 "$AETHER_DESKTOP_BIN" "$root/usr/bin/aether"
else
	VERSION=$version scripts/build-desktop.sh "$root/usr/bin/aether"
fi

echo "== desktop entry, icons, user unit, docs"
install -D -m 644 build/linux/aether.desktop "$root/usr/share/applications/aether.desktop"
desktop-file-validate "$root/usr/share/applications/aether.desktop"
for s in 16 22 24 32 48 64 128 256 512; do
	d=$root/usr/share/icons/hicolor/${s}x$s/apps
	mkdir -p "$d"
	/usr/bin/convert build/appicon.png -filter Lanczos -resize "${s}x$s" -depth 8 -strip "PNG32:$d/aether.png"
done
install -D -m 644 build/linux/aether.service "$root/usr/lib/systemd/user/aether.service"
doc=$root/usr/share/doc/aether
install -D -m 644 README.md "$doc/README.md"
install -D -m 644 docs/deploy.md "$doc/deploy.md"
install -D -m 644 docs/deploy/Caddyfile "$doc/examples/Caddyfile"
install -D -m 644 docs/deploy/nginx.conf "$doc/examples/nginx.conf"
install -D -m 644 examples/policy.json "$doc/examples/policy.json"

echo "== control"
# dpkg-shlibdeps wants a debian/control beside it; it is only asked about the binary.
mkdir -p "$work/src/debian"
printf 'Source: aether\n\nPackage: aether\nArchitecture: any\n' >"$work/src/debian/control"
shlibs=$(cd "$work/src" && dpkg-shlibdeps -O -e "$root/usr/bin/aether" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || {
	echo "package: dpkg-shlibdeps found no libraries" >&2
	exit 1
}
mkdir -p "$root/DEBIAN"
cat >"$root/DEBIAN/control" <<EOF
Package: aether
Version: $version
Architecture: $arch
Maintainer: Aether maintainers <maintainers@aether.invalid>
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $shlibs, bubblewrap
Recommends: xdg-utils
Section: net
Priority: optional
Description: share what your machine can do with other people's AI agents
 Aether lets other people's personal AI agents use capabilities you offer
 from your own machine (for example a read-only code review of a folder)
 without handing over any credential. Agents speak PACT 1.0 (A2A 1.0 with an
 identity JWT and an OAuth device flow); nothing runs until you approve an
 agent from a desktop notification or the consent page, and every answer
 comes back with a receipt signed by your node.
 .
 The desktop app lives in the tray; "aether node serve" runs the same node
 headless (a systemd user unit is included: systemctl --user enable aether).
EOF
(cd "$root" && find usr -type f -print0 | sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"

mkdir -p "$(dirname "$out")"
dpkg-deb --root-owner-group --build "$root" "$out" >/dev/null
echo "== $out ($(du -h "$out" | cut -f1))"
dpkg-deb --field "$out" Package Version Architecture Depends
