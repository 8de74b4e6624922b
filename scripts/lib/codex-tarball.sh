# Sourced by gui-test.sh and package-test.sh: the real pinned Codex package, for a loopback
# stand-in of npm's registry (app/guitest/registry) to serve to the app's Get Codex.

# codex_tarball AETHER: prints the path of this machine's pinned platform package tarball,
# fetched once from npm's registry into <repo>/.cache/registry and fetched again when it does
# not match the pin. The pin is what `AETHER codex pin` prints: the app's own (backend/codexget),
# which checks the tarball again when it gets it.
codex_tarball() {
	local aether=$1 arch line url integrity file
	arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
	line=$("$aether" codex pin | awk -v a="linux/$arch" '$2 == a') || return 1
	url=$(awk '{print $4}' <<<"$line")
	integrity=$(awk '{print $5}' <<<"$line")
	[ -n "$url" ] || return 1
	file=$ROOT/.cache/registry/$(basename "$url")
	pinned() { [ "sha512-$(openssl dgst -sha512 -binary "$file" | base64 -w0)" = "$integrity" ]; }
	if [ ! -s "$file" ] || ! pinned; then
		mkdir -p "$(dirname "$file")"
		curl -sfL -o "$file.part" "$url" && mv "$file.part" "$file" || return 1
		pinned || return 1
	fi
	echo "$file"
}
