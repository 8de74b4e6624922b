#!/usr/bin/env bash
# Installs the pinned @openai/codex npm package into a project-local prefix and prints the
# path of the native codex binary (the npm launcher is a Node script that can orphan its
# child when killed; the runner should be given the native binary).
#
# Usage: scripts/install-codex.sh [prefix]   (default: <repo>/.cache/codex)
# Env:   CODEX_VERSION (default 0.169.0)
set -euo pipefail

version="${CODEX_VERSION:-0.169.0}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="${1:-$repo/.cache/codex}"

case "$(uname -s)-$(uname -m)" in
Linux-x86_64) triple=x86_64-unknown-linux-musl ;;
Linux-aarch64 | Linux-arm64) triple=aarch64-unknown-linux-musl ;;
Darwin-x86_64) triple=x86_64-apple-darwin ;;
Darwin-arm64) triple=aarch64-apple-darwin ;;
*)
	echo "install-codex: unsupported platform $(uname -s)-$(uname -m)" >&2
	exit 1
	;;
esac

pkg="$prefix/lib/node_modules/@openai/codex"
installed="$(node -p "require('$pkg/package.json').version" 2>/dev/null || true)"
if [ "$installed" != "$version" ]; then
	mkdir -p "$prefix"
	npm install --global --prefix "$prefix" --no-audit --no-fund --loglevel=error \
		"@openai/codex@$version" >&2
fi

# The native binary ships in a platform package (an optional dependency); its location moved
# between releases, so search for it instead of hard-coding one path.
bin="$(find "$pkg" -type f -name codex -path "*$triple*" -print -quit 2>/dev/null || true)"
if [ -z "$bin" ]; then
	bin="$prefix/bin/codex" # fall back to the npm launcher
fi
if [ ! -x "$bin" ]; then
	echo "install-codex: codex binary not found under $prefix" >&2
	exit 1
fi
"$bin" --version >&2
echo "$bin"
