#!/usr/bin/env bash
# Moves the pinned Codex to VERSION in one command: reads each platform package's
# dist.integrity from npm's registry and its tarball's size (the registry's Content-Length),
# rewrites backend/codexget/pin.go, gets that Codex as the app does (`aether codex get`,
# through scripts/install-codex.sh, which checks it against the new pin), and runs the
# real-Codex contract tests on it (backend/codex: the contract, the confinement attacks, what
# Codex reads by itself; backend/codexget: TestRealRegistry). Review `git diff` and what Codex
# changed since the last pin (docs/codex-get.md, "Moving the pin") before committing.
#
# Usage: scripts/pin-codex.sh VERSION   e.g. scripts/pin-codex.sh 0.172.0
set -euo pipefail
export PATH="$PATH:/usr/local/go/bin"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
version=${1:-}
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || {
	echo "usage: scripts/pin-codex.sh VERSION (X.Y.Z, e.g. 0.172.0)" >&2
	exit 2
}
command -v npm >/dev/null || { echo "pin-codex: npm is needed to read the registry" >&2; exit 1; }
pin=backend/codexget/pin.go

for name in linux-x64 linux-arm64; do
	spec="@openai/codex@$version-$name"
	integrity=$(npm view "$spec" dist.integrity) || { echo "pin-codex: npm has no $spec" >&2; exit 1; }
	url=$(npm view "$spec" dist.tarball)
	[[ $integrity == sha512-* && $url == https://registry.npmjs.org/* ]] || {
		echo "pin-codex: $spec: integrity '$integrity', tarball '$url'" >&2
		exit 1
	}
	size=$(curl -sfIL "$url" | tr -d '\r' | awk 'tolower($1) == "content-length:" {n = $2} END {print n}')
	[[ $size =~ ^[0-9]+$ ]] || { echo "pin-codex: no size for $url" >&2; exit 1; }
	echo "$spec $size $integrity"
	NAME=$name SIZE=$size INTEGRITY=$integrity perl -0pi -e \
		's/(Name: "\Q$ENV{NAME}\E", Triple: "[^"]+", Size: )\d+(,\s*Integrity: ")[^"]+(")/${1}$ENV{SIZE}${2}$ENV{INTEGRITY}${3}/ or die "no $ENV{NAME} in pin.go\n"' "$pin"
done
VERSION=$version perl -pi -e 's/^const Version = "[^"]*"$/const Version = "$ENV{VERSION}"/' "$pin"
sed -i -E "s/(e\.g\. \"@openai\/codex@)[0-9.]+(-linux-x64\")/\1$version\2/" "$pin"
gofmt -l "$pin" | grep . && { echo "pin-codex: $pin is not gofmt'd" >&2; exit 1; }
git --no-pager diff --stat -- "$pin"

bin=$(scripts/install-codex.sh)
echo "== the real-Codex contract tests on $bin"
AETHER_REAL_CODEX="$bin" go test -count=1 ./backend/codexget/ ./backend/codex/...
echo "pin-codex: Codex $version is pinned and passes the contract tests; commit $pin"
