#!/usr/bin/env bash
# The .deb as an owner gets it: installed with apt, started from its desktop entry, removed.
#
#   scripts/package-test.sh dist/aether_<version>_<arch>.deb      (make package-test)
#
# 1. `apt-get install ./…deb` (through sudo when not root); what it put on the system: the
#    binary and its --version, the desktop entry (desktop-file-validate), the icon in every
#    hicolor size, the aether: scheme handler, Depends (run-time packages only), the systemd
#    user unit (systemd-analyze verify).
# 2. On a virtual display and a private session bus (scripts/lib/xsession.sh, as gui-test.sh),
#    with dunst and a stand-in tray host (app/guitest/sni): the app started from its desktop
#    entry (gio launch) shows its window, registers its tray item with its menu, writes its
#    starter policy in the default data dir, reports its version on /api/status, and an
#    aether: consent link opened with `gio open` reaches it on that request. Tray Quit ends it.
# 2b. A new owner from the window, with no Node.js, npm or codex reachable (a PATH without them,
#    none in the data dir): Get Codex (the real pinned package, from a loopback stand-in of npm's
#    registry), a key and a server (a mock Responses server), Check, a brand, and an agent's
#    delegated turn approved by the owner, run by the Codex the app got, with a verified receipt.
#    The test drives the admin API the window's pages call; scripts/gui-test.sh clicks them.
# 3. The user unit's command (`aether node serve`, no flags) serves the policy in the default
#    data dir of another user home and says where both are. It binds ports 3000 and 8080.
# 4. `apt-get purge aether`: the files are gone, and both data dirs are exactly as they were.
#
# Prints PASS/FAIL lines and ends with "N passed, N failed"; exits non-zero on a failure.
# Screenshots go to test-results/package/. The package must not be installed already.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/xsession.sh
. "$ROOT/scripts/lib/xsession.sh"
PORT_BASE=29000 # free_port's ports (scripts/lib/xsession.sh)

pass() {
	echo "PASS $1" | tee -a "$WORK/results"
}
fail() {
	echo "FAIL $1${2:+ — $2}" | tee -a "$WORK/results"
}
check() { # check NAME CMD...
	local name=$1
	shift
	if "$@"; then pass "$name"; else fail "$name"; fi
}
# wait_for SECONDS CMD...: waits until CMD succeeds: the state the test waits for. SECONDS is what
# it takes on a quiet machine; the hang guard is ten times that, and a minute at least: a
# loaded machine is slow, not wrong (scripts/gui-test.sh waits the same way).
wait_for() {
	local end=$(($(date +%s) + ($1 * 10 < 60 ? 60 : $1 * 10)))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -ge $end ] && return 1
		sleep 0.2
	done
}
# snapshot DIR: every entry's type, mode, size, mtime and path, and every file's sha256.
snapshot() {
	(cd "$1" && find . -printf '%y %m %s %T@ %p\n' | sort && find . -type f -print0 | sort -z | xargs -0 sha256sum)
}
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if [ "${1:-}" != "--inside" ]; then
	DEB=${1:?usage: scripts/package-test.sh dist/aether_VERSION_ARCH.deb}
	WORK=$(mktemp -d /tmp/aether-pkg.XXXXXX)
	export WORK ROOT
	: >"$WORK/results"
	sudo=()
	[ "$(id -u)" -eq 0 ] || sudo=(sudo)
	apt() { "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "$@"; }
	installed() { [ "$(dpkg-query -W -f='${db:Status-Status}' aether 2>/dev/null)" = installed ]; }
	summary() {
		local p f
		p=$(grep -c '^PASS' "$WORK/results")
		f=$(grep -c '^FAIL' "$WORK/results")
		echo "$p passed, $f failed"
		[ "$f" -eq 0 ]
	}
	XVFB_PID=
	OURS=
	cleanup() {
		[ -n "$XVFB_PID" ] && kill "$XVFB_PID" 2>/dev/null
		if [ -n "$OURS" ] && installed; then apt purge -y -qq aether >/dev/null 2>&1 || "${sudo[@]}" dpkg --purge aether; fi
		if [ -n "${KEEP_WORK:-}" ]; then echo "# work dir kept: $WORK"; else rm -rf "$WORK"; fi
	}
	trap cleanup EXIT
	if [ ! -f "$DEB" ]; then
		fail "no package at $DEB (make package)"
		summary
		exit 1
	fi
	if installed; then
		fail "aether is installed on this machine already" "this test installs and removes it: apt-get remove aether first"
		summary
		exit 1
	fi
	VERSION=$(dpkg-deb -f "$DEB" Version)
	export VERSION
	echo "# $DEB: aether $VERSION, $(du -h "$DEB" | cut -f1)"
	mkdir -p "$WORK/bin" "$WORK/apt"
	(cd "$ROOT" && go build -o "$WORK/bin/sni" ./app/guitest/sni && go build -o "$WORK/bin/agent" ./app/guitest/agent &&
		go build -o "$WORK/bin/registry" ./app/guitest/registry && go build -o "$WORK/bin/mockmodel" ./app/guitest/mockmodel) || {
		fail "build the test helpers (tray host, agent, registry and model stand-ins)"
		summary
		exit 1
	}

	# ---- 1. install ------------------------------------------------------------------------
	# (apt's own user must be able to read the file)
	cp "$DEB" "$WORK/apt/" && chmod 755 "$WORK" "$WORK/apt" && chmod 644 "$WORK/apt/"*.deb
	OURS=1
	if apt install -y -qq --no-install-recommends "$WORK/apt/$(basename "$DEB")" >"$WORK/apt.log" 2>&1; then
		pass "apt-get install ./$(basename "$DEB")"
	else
		fail "apt-get install ./$(basename "$DEB")" "$(tail -3 "$WORK/apt.log")"
		summary
		exit 1
	fi
	check "dpkg knows aether $VERSION" test "$(dpkg-query -W -f='${Version}' aether)" = "$VERSION"
	check "aether on PATH is /usr/bin/aether" test "$(command -v aether)" = /usr/bin/aether
	check "aether --version prints aether $VERSION" test "$(aether --version)" = "aether $VERSION"
	check "desktop-file-validate accepts /usr/share/applications/aether.desktop" desktop-file-validate /usr/share/applications/aether.desktop
	icons() {
		local s
		for s in 16 22 24 32 48 64 128 256 512; do
			[ "$(identify -format %wx%h "/usr/share/icons/hicolor/${s}x$s/apps/aether.png" 2>/dev/null)" = "${s}x$s" ] || return 1
		done
	}
	check "the icon is in every hicolor size, 16 to 512 px" icons
	check "the desktop entry opens aether: links (gio mime x-scheme-handler/aether)" \
		bash -c 'gio mime x-scheme-handler/aether | grep -q "aether.desktop"'
	deps=$(dpkg-query -W -f='${Depends}' aether)
	echo "# Depends: $deps"
	runtime_deps() {
		local p
		for p in libwebkit2gtk-4.1-0 libgtk-3-0 bubblewrap; do
			grep -qE "(^|, )$p( |,|$)" <<<"$deps" || return 1
		done
		! grep -qE -- '-dev( |,|$)|golang|nodejs|npm' <<<"$deps"
	}
	check "Depends lists run-time packages (libwebkit2gtk-4.1-0, libgtk-3-0, bubblewrap), no build-time ones" runtime_deps
	UNIT=/usr/lib/systemd/user/aether.service
	mkdir -p "$WORK/run" && chmod 700 "$WORK/run"
	unit_ok() { XDG_RUNTIME_DIR=$WORK/run systemd-analyze --user verify "$UNIT" >"$WORK/unit.log" 2>&1 && ! [ -s "$WORK/unit.log" ]; }
	check "the systemd user unit verifies (systemd-analyze --user verify)" unit_ok
	[ -s "$WORK/unit.log" ] && sed 's/^/# /' "$WORK/unit.log"
	EXEC_START=$(sed -n 's/^ExecStart=//p' "$UNIT")
	export EXEC_START
	check "the unit runs \`aether node serve\` with no flags" test "$EXEC_START" = "/usr/bin/aether node serve"
	# The real pinned Codex package, as the installed aether pins it, for the registry stand-in.
	# shellcheck source=lib/codex-tarball.sh
	. "$ROOT/scripts/lib/codex-tarball.sh"
	if CODEX_TGZ=$(codex_tarball /usr/bin/aether); then
		pass "the pinned Codex package ($(basename "$CODEX_TGZ")) matches \`aether codex pin\`"
	else
		fail "the pinned Codex package could not be fetched from npm's registry into .cache/codex-registry"
	fi
	export CODEX_TGZ

	# ---- 2, 3. the installed app on a virtual display -------------------------------------
	if start_xvfb "$WORK"; then
		dbus-run-session --config-file="$WORK/session.conf" -- "$0" --inside 2> >(grep -v '^dbus-daemon' >&2)
	else
		fail "Xvfb did not start" "$(tail -3 "$WORK/xvfb.log")"
	fi

	# ---- 4. remove --------------------------------------------------------------------------
	if apt purge -y -qq aether >>"$WORK/apt.log" 2>&1; then
		pass "apt-get purge aether"
	else
		fail "apt-get purge aether" "$(tail -3 "$WORK/apt.log")"
	fi
	gone() { ! installed && ! [ -e /usr/bin/aether ] && ! [ -e /usr/share/applications/aether.desktop ] && ! [ -e "$UNIT" ] && ! [ -e /usr/share/icons/hicolor/256x256/apps/aether.png ]; }
	check "the binary, desktop entry, user unit and icons are gone" gone
	for d in desktop server; do
		if [ -s "$WORK/$d-data.txt" ]; then
			home=$WORK/home
			[ $d = server ] && home=$WORK/server-home
			snapshot "$home/.local/share/aether/node" >"$WORK/$d-after.txt" 2>/dev/null
			n=$(grep -c '^f ' "$WORK/$d-data.txt")
			if cmp -s "$WORK/$d-data.txt" "$WORK/$d-after.txt"; then
				pass "the $d owner's data dir is untouched by the removal ($n files: same modes, sizes, times, contents)"
			else
				fail "the $d owner's data dir is untouched by the removal" "$(diff "$WORK/$d-data.txt" "$WORK/$d-after.txt" | head -5 | tr '\n' ' ')"
			fi
		else
			fail "the $d owner's data dir was recorded before the removal"
		fi
	done
	OURS=
	summary
	exit $?
fi

# ---- inside the private session bus -----------------------------------------------------
SHOTS=$ROOT/test-results/package
mkdir -p "$SHOTS"
rm -f "$SHOTS"/*.png
PIDS=()
APP_PID=
SERVE_PID=
trap 'for p in "${PIDS[@]}" $APP_PID $SERVE_PID; do kill "$p" 2>/dev/null; done' EXIT
bg() { # bg LOG CMD...
	local log=$1
	shift
	"$@" >"$log" 2>&1 &
	PIDS+=($!)
}
shot() { import -window root "$SHOTS/$1.png" 2>/dev/null && echo "# screenshot test-results/package/$1.png"; }
colourful() { [ "$(/usr/bin/convert "$SHOTS/$1.png" -format %k info: 2>/dev/null || echo 0)" -ge 500 ]; }
visible() { [ -n "$(xdotool search --onlyvisible --name '^Aether$' 2>/dev/null)" ]; }
menu() { "$WORK/bin/sni" menu 2>/dev/null; }
in_menu() { menu | cut -f2 | grep -xF -- "$1" >/dev/null; }

# The owner's session: a fresh home, the XDG defaults (no XDG_DATA_HOME: the data dir is
# ~/.local/share/aether/node), the tray host and the notification daemon running.
export HOME=$WORK/home XDG_RUNTIME_DIR=$WORK/run
unset XDG_DATA_HOME XDG_CONFIG_HOME XDG_CACHE_HOME AETHER_DATA_DIR AETHER_POLICY AETHER_START_HIDDEN
mkdir -p "$HOME"
DATA=$HOME/.local/share/aether/node
bg "$WORK/dunst.log" dunst
bg "$WORK/sni.log" "$WORK/bin/sni" watch
wait_for 10 dunstctl is-paused || echo "# dunst did not answer"
wait_for 10 grep -q watching "$WORK/sni.log" || echo "# the tray host did not start"
GW_PORT=$(free_port)
export AETHER_ADMIN_PORT=0 AETHER_PACT_LISTEN=127.0.0.1:$GW_PORT

gio launch /usr/share/applications/aether.desktop >"$WORK/app.log" 2>&1
check "gio launch /usr/share/applications/aether.desktop" test $? = 0
wait_for 60 test -s "$DATA/node.json"
APP_PID=$(jq -r .pid "$DATA/node.json" 2>/dev/null)
check "the app started its node in the default data dir (~/.local/share/aether/node/node.json)" test -n "$APP_PID"
starter_policy() { jq -e '.pact.brands == []' "$DATA/policy.json" >/dev/null; }
check "…and wrote its starter policy there" starter_policy
check "the window is shown" wait_for 60 visible
# the UI loads and fetches its data: until then the screenshot is a blank window
rendered() { shot "$1" >/dev/null && colourful "$1"; }
check "the window rendered the admin UI (01-installed-window.png)" wait_for 10 rendered 01-installed-window
check "the tray item registered with the tray host" wait_for 20 grep -q registered "$WORK/sni.log"
tray_menu() { in_menu Open && in_menu Quit; }
check "the tray menu has Open and Quit" wait_for 10 tray_menu

ADMIN=$(jq -r .admin "$DATA/node.json")
JAR=$WORK/cookies
curl -sk -c "$JAR" -o /dev/null --data-urlencode "token=$(cat "$DATA/admin.token")" "https://$ADMIN/login" # the sign-in form
status_version=$(curl -sk -b "$JAR" "https://$ADMIN/api/status" | jq -r .version)
check "the Status page's /api/status says version $VERSION" test "$status_version" = "$VERSION"

LINK="aether://$ADMIN/pact/consent?user_code=BCDF-GHJK"
gio open "$LINK" >"$WORK/gio-open.log" 2>&1
linked() { grep -q 'a link asks for a consent request.*user_code=BCDF-GHJK' "$WORK/app.log"; }
check "gio open $LINK reaches the running app on that request" wait_for 20 linked
check "…with the window shown" wait_for 10 visible
# The Status page, with the version (its place in the window is where 01-installed-window.png
# shows the sidebar's first item).
xdotool mousemove --window "$(xdotool search --onlyvisible --name '^Aether$' | head -1)" 80 115 click 1
sleep 1.5
shot 02-status-page

"$WORK/bin/sni" click Quit
app_gone() { ! kill -0 "$APP_PID" 2>/dev/null; }
check "tray Quit ends the app" wait_for 30 app_gone
check "…cleanly (node.json removed, 'Aether stopped' logged)" bash -c "! test -e '$DATA/node.json' && grep -q 'Aether stopped' '$WORK/app.log'"

# ---- 2b. a new owner from the window: no Node.js, npm or codex reachable -------------------
# A PATH of links to the system's programs, without node, npm, npx, corepack or codex.
NOPATH=$WORK/path-without-node
mkdir -p "$NOPATH"
for d in /usr/local/bin /usr/bin /bin /usr/sbin /sbin; do
	for f in "$d"/*; do
		case $(basename "$f") in node | nodejs | npm | npx | corepack | codex) continue ;; esac
		[ -e "$NOPATH/$(basename "$f")" ] || ln -s "$f" "$NOPATH/$(basename "$f")"
	done
done
unreachable() { ! PATH=$NOPATH command -v node && ! PATH=$NOPATH command -v npm && ! PATH=$NOPATH command -v codex && ! [ -e "$DATA/codex-bin" ]; }
check "2b: no node, npm or codex on the app's PATH, no codex in its data dir" unreachable
if [ -n "${CODEX_TGZ:-}" ]; then
	bg "$WORK/registry.log" "$WORK/bin/registry" -tarball "$CODEX_TGZ" -addr-file "$WORK/registry.addr"
	bg "$WORK/model.log" "$WORK/bin/mockmodel" -answer "The README says: A small project." -addr-file "$WORK/model.addr"
	wait_for 10 test -s "$WORK/registry.addr"
	wait_for 10 test -s "$WORK/model.addr"
	GW_PORT=$(free_port)
	GW=http://127.0.0.1:$GW_PORT
	# The agent on this machine speaks from a loopback issuer: the policy admits it (as a test's).
	jq --arg u "$GW" '.pact.publicUrl = $u | .pact.audience = $u | .pact.allowInsecureLocalIssuers = true' "$DATA/policy.json" >"$DATA/policy.new" && mv "$DATA/policy.new" "$DATA/policy.json"
	PATH=$NOPATH AETHER_PACT_LISTEN=127.0.0.1:$GW_PORT AETHER_CODEX_REGISTRY=$(cat "$WORK/registry.addr") \
		gio launch /usr/share/applications/aether.desktop >"$WORK/app2.log" 2>&1
	wait_for 60 test -s "$DATA/node.json"
	APP_PID=$(jq -r .pid "$DATA/node.json" 2>/dev/null)
	ADMIN=$(jq -r .admin "$DATA/node.json")
	curl -sk -c "$JAR" -o /dev/null --data-urlencode "token=$(cat "$DATA/admin.token")" "https://$ADMIN/login"
	CSRF=$(curl -sk -b "$JAR" "https://$ADMIN/api/session" | jq -r .csrfToken)
	api() { # api METHOD PATH [BODY [CURL OPTIONS]]: as the window's pages call it
		local method=$1 path=$2 body=${3:-}
		shift $(($# < 3 ? $# : 3))
		curl -sk -b "$JAR" -X "$method" -H "Origin: https://$ADMIN" -H "X-CSRF-Token: $CSRF" -H 'Content-Type: application/json' ${body:+--data "$body"} "$@" "https://$ADMIN$path"
	}
	app_env_clean() { ! tr '\0' '\n' <"/proc/$APP_PID/environ" | grep -E '^PATH=' | grep -qF /usr/bin; }
	check "2b: the app runs with that PATH" app_env_clean
	api POST /api/codex/download >/dev/null
	installed() { api GET /api/status | jq -e '.download.state == "installed" and .codex.found and .codex.versionOk' >/dev/null; }
	check "2b: Get Codex installs the pinned Codex, checked against the pin" wait_for 180 installed
	check "2b: …in the data dir (codex-bin/<version>/bin/codex)" bash -c "test -x '$DATA'/codex-bin/*/bin/codex"
	KEY=sk-pkg-$(openssl rand -hex 12)
	api PUT /api/model "{\"key\":\"$KEY\",\"baseUrl\":\"$(cat "$WORK/model.addr")\",\"model\":\"mock-model\"}" >"$WORK/model-put.json"
	check "2b: a key and a server set (the answer says keySet, never the key)" bash -c "jq -e '.keySet' '$WORK/model-put.json' >/dev/null && ! grep -qF '$KEY' '$WORK/model-put.json'"
	api POST /api/model/check >"$WORK/check.json"
	check_ok() { jq -e '.ok' "$WORK/check.json" >/dev/null; }
	check "2b: Check against the mock server: OK" check_ok
	[ "$(jq -r .ok "$WORK/check.json")" = true ] || echo "# Check said: $(jq -r .error "$WORK/check.json")"
	mkdir -p "$HOME/project"
	echo "# A small project" >"$HOME/project/README.md"
	code=$(api PUT /api/brands/review "{\"id\":\"review\",\"name\":\"Code review\",\"description\":\"Reviews my project.\",\"capability\":\"review\",\"workspace\":\"$HOME/project\",\"accessMode\":\"read_only\",\"scope\":{\"id\":\"review:read_only\",\"description\":\"Review (read only)\"}}" -o /dev/null -w '%{http_code}')
	check "2b: a brand saved" test "$code" = 200
	bg "$WORK/agent.log" "$WORK/bin/agent" -gateway "$GW" -sub alice
	said() { grep -q "^$1" "$WORK/agent.log"; }
	wait_for 30 said USER_CODE
	UC=$(awk '/^USER_CODE/{print $2}' "$WORK/agent.log")
	RID=$(api GET /api/consent | jq -r --arg c "$UC" '.requests[] | select(.userCode == $c) | .id')
	api POST "/api/consent/$RID/decision" "{\"userCode\":\"$UC\",\"decision\":\"allow\",\"duration\":\"1d\"}" >/dev/null
	check "2b: the owner allowed the agent's request ($UC)" wait_for 20 said GRANTED
	check "2b: the delegated turn ran the Codex the app got and came back with a verified receipt" wait_for 120 said "RECEIPT id=.* verified"
	grep -E '^(TURN|RECEIPT|FAIL)' "$WORK/agent.log" | sed 's/^/# agent: /'
	key_sent() { grep -q "bearer-sha256=$(printf %s "$KEY" | sha256sum | cut -d' ' -f1)" "$WORK/model.log"; }
	check "2b: the model server got the key (its SHA-256 in the mock's log)" key_sent
	check "2b: the key is in no log of the app" bash -c "! grep -qF '$KEY' '$WORK/app2.log'"
	"$WORK/bin/sni" click Quit
	check "2b: tray Quit ends the app" wait_for 30 app_gone
fi
snapshot "$DATA" >"$WORK/desktop-data.txt"

# ---- the user unit's command on a server owner's home -------------------------------------
export HOME=$WORK/server-home
SDATA=$HOME/.local/share/aether/node
mkdir -p "$SDATA" "$HOME/project" && chmod 700 "$SDATA"
echo "# A small project" >"$HOME/project/README.md"
# The example policy, its workspace pointed at the folder to share (as docs/deploy.md says).
jq --arg w "$HOME/project" '.pact.brands[0].workspace = $w' /usr/share/doc/aether/examples/policy.json >"$SDATA/policy.json"
chmod 600 "$SDATA/policy.json"
if port_free 3000 && port_free 8080; then
	# shellcheck disable=SC2086 # the unit's command line, split as systemd splits it
	$EXEC_START >"$WORK/serve.log" 2>&1 &
	SERVE_PID=$!
	running() { grep -q 'is running' "$WORK/serve.log"; }
	check "\`$EXEC_START\` starts on the default data dir" wait_for 60 running
	says_where() { grep -qxF "  data dir:  $SDATA" "$WORK/serve.log" && grep -qxF "  policy:    $SDATA/policy.json" "$WORK/serve.log"; }
	check "…and says where the data dir and the policy are" says_where
	healthz() { [ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8080/healthz)" = 200 ]; }
	check "…and serves the policy's brand on 127.0.0.1:8080" bash -c 'curl -sf http://127.0.0.1:8080/a2a/review/.well-known/agent-card.json | jq -e ".name == \"Code review\"" >/dev/null'
	check "…and /healthz answers 200" healthz
	kill -TERM "$SERVE_PID"
	wait "$SERVE_PID"
	check "…and SIGTERM stops it with exit code 0" test $? = 0
	[ -s "$WORK/serve.log" ] && grep -E '^(Aether|aether|  )' "$WORK/serve.log" | sed 's/token=[^ ]*/token=…/; s/^/# serve: /'
else
	fail "\`$EXEC_START\` on the default data dir" "ports 3000 and 8080 must be free for it (something holds them)"
fi
snapshot "$SDATA" >"$WORK/server-data.txt"
