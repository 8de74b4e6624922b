# Sourced by install-codex.sh, gui-test.sh and package-test.sh: the real pinned Codex package,
# downloaded once per machine and pin into a cache beside .cache/codex, laid out as the npm
# registry serves it (.cache/codex-registry/@openai/codex/-/codex-<version>-<platform>.tgz), so
# that the cache is itself a registry: `aether codex get --registry file://<cache>`, and the
# loopback stand-in of the GUI and package tests (app/guitest/registry).
#
# Beside the tarball, <tarball>.registry-ok holds the pinned integrity once npm's real registry
# has served these bytes: backend/codexget's TestRealRegistry reads it, and proves the registry
# again only for a new pin (it writes the same stamp when it downloads).

CODEX_CACHE=${CODEX_CACHE:-$ROOT/.cache/codex-registry}

# codex_tarball AETHER: prints the path of this machine's pinned platform package in the cache,
# downloading it from npm's registry when it is not there or does not match the pin (the
# sha512 is checked before every use). The pin is what `AETHER codex pin` prints: the app's own
# (backend/codexget), which checks the tarball again when it gets it.
codex_tarball() {
	local aether=$1 arch line url integrity file
	arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
	line=$("$aether" codex pin | awk -v a="linux/$arch" '$2 == a') || return 1
	url=$(awk '{print $4}' <<<"$line")
	integrity=$(awk '{print $5}' <<<"$line")
	[ -n "$url" ] || return 1
	file=$CODEX_CACHE/${url#https://registry.npmjs.org/}
	pinned() { [ "sha512-$(openssl dgst -sha512 -binary "$file" | base64 -w0)" = "$integrity" ]; }
	if [ ! -s "$file" ] || ! pinned; then
		mkdir -p "$(dirname "$file")"
		rm -f "$file.registry-ok"
		curl -sfL -o "$file.part" "$url" && mv "$file.part" "$file" || return 1
		pinned || return 1
		echo "$integrity" >"$file.registry-ok"
	fi
	echo "$file"
}
