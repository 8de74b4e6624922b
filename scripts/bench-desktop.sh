#!/usr/bin/env bash
# Desktop benchmarks B5 and B6, on a virtual display and a private session bus:
#
#   B5-memory ours=<MB> baseline=<MB> ratio=<x>   resident memory (RSS) of the whole process
#                                                 tree (app + WebKit's processes), idle with
#                                                 the window shown
#   B5-launch ours=<ms> baseline=<ms> ratio=<x>   launch to window mapped (median of RUNS)
#   B6 ours=<ms>ms                                device authorization request → Notify on
#                                                 the session bus (median of RUNS)
#
# The baseline is app/guitest/hello, the smallest Wails app, built with the same tags.
# Environment: RUNS (default 5), SETTLE seconds before measuring memory (default 10).
# Needs what scripts/gui-test.sh needs.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/xsession.sh
. "$ROOT/scripts/lib/xsession.sh"
TAGS=desktop,production,webkit2_41
RUNS=${RUNS:-5}
SETTLE=${SETTLE:-10}

if [ "${1:-}" != "--inside" ]; then
	WORK=$(mktemp -d /tmp/aether-bench.XXXXXX)
	export WORK ROOT RUNS SETTLE
	XVFB_PID=
	trap '[ -n "$XVFB_PID" ] && kill "$XVFB_PID" 2>/dev/null; rm -rf "$WORK"' EXIT
	mkdir -p "$WORK/bin"
	echo "# building with -tags $TAGS" >&2
	(
		cd "$ROOT" &&
			go build -tags "$TAGS" -o "$WORK/bin/aether" . &&
			go build -tags "$TAGS" -o "$WORK/bin/hello" ./app/guitest/hello &&
			go build -o "$WORK/bin/agent" ./app/guitest/agent &&
			go build -o "$WORK/bin/codex" ./backend/codex/testdata/fakecodex
	) || exit 1
	start_xvfb "$WORK" || {
		echo "Xvfb did not start" >&2
		exit 1
	}
	dbus-run-session --config-file="$WORK/session.conf" -- "$0" --inside 2> >(grep -v '^dbus-daemon' >&2)
	exit $?
fi

BIN=$WORK/bin
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done' EXIT
now_ms() { echo $(($(date +%s%N) / 1000000)); }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }'; }
tree() { # tree PID: the process and all its descendants
	local p=$1 c
	echo "$p"
	for c in $(ps -o pid= --ppid "$p"); do tree "$c"; done
}
rss_mb() { # rss_mb PID: resident memory of the tree, MB
	local kb=0 p v
	for p in $(tree "$1"); do
		v=$(awk '/^VmRSS:/{print $2}' "/proc/$p/status" 2>/dev/null)
		kb=$((kb + ${v:-0}))
	done
	echo $((kb / 1024))
}
pss_mb() {
	local kb=0 p v
	for p in $(tree "$1"); do
		v=$(awk '/^Pss:/{print $2}' "/proc/$p/smaps_rollup" 2>/dev/null)
		kb=$((kb + ${v:-0}))
	done
	echo $((kb / 1024))
}
stop() { # stop PID: SIGTERM and wait
	kill -TERM "$1" 2>/dev/null
	for _ in $(seq 150); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}
# launch TITLE CMD...: starts CMD and waits for its window titled TITLE to be mapped; sets
# LPID (the process) and LMS (milliseconds from start to mapped window).
launch() {
	local title=$1 t0
	shift
	t0=$(now_ms)
	"$@" >>"$WORK/launch.log" 2>&1 &
	LPID=$!
	# (xdotool's own --sync polls every half second: too coarse)
	local end=$((t0 + 60000))
	until xdotool search --onlyvisible --name "^$title\$" >/dev/null 2>&1 || [ "$(now_ms)" -ge $end ]; do sleep 0.01; done
	LMS=$(($(now_ms) - t0))
}

export HOME=$WORK/home XDG_CONFIG_HOME=$WORK/home/.config XDG_DATA_HOME=$WORK/home/.local/share
export XDG_CACHE_HOME=$WORK/home/.cache XDG_RUNTIME_DIR=$WORK/run
mkdir -p "$HOME" "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
DATA=$XDG_DATA_HOME/aether/node
mkdir -p "$DATA" "$HOME/project" && chmod 700 "$DATA" # the workspace is never inside the data dir (W24)
echo "# bench" >"$HOME/project/README.md"
PORT=$((20000 + RANDOM % 12000)) # below the ephemeral range
GW=http://127.0.0.1:$PORT
export AETHER_ADMIN_PORT=0 AETHER_PACT_LISTEN=127.0.0.1:$PORT AETHER_CODEX=$BIN/codex
cat >"$DATA/policy.json" <<EOF
{"pact": {"publicUrl": "$GW", "audience": "$GW", "allowInsecureLocalIssuers": true, "brands": [{
  "id": "review", "name": "Code review", "description": "Reviews code.", "capability": "review",
  "workspace": "$HOME/project", "accessMode": "read_only",
  "scope": {"id": "review:read_only", "description": "Review code (read only)"}}]}}
EOF

# Warm-up runs (first start creates keys and the database; page cache), not counted.
launch Aether "$BIN/aether"
stop "$LPID"
launch Hello "$BIN/hello"
stop "$LPID"

ours=()
base=()
for _ in $(seq "$RUNS"); do
	launch Aether "$BIN/aether"
	ours+=("$LMS")
	stop "$LPID"
	launch Hello "$BIN/hello"
	base+=("$LMS")
	stop "$LPID"
done
launch_ours=$(printf '%s\n' "${ours[@]}" | median)
launch_base=$(printf '%s\n' "${base[@]}" | median)

# Memory: idle, window shown, after SETTLE seconds.
launch Aether "$BIN/aether"
sleep "$SETTLE"
mem_ours=$(rss_mb "$LPID")
for p in $(tree "$LPID"); do echo "# ours $(ps -o rss=,comm= -p "$p")"; done
pss_ours=$(pss_mb "$LPID")
procs_ours=$(tree "$LPID" | wc -l)
stop "$LPID"
launch Hello "$BIN/hello"
sleep "$SETTLE"
mem_base=$(rss_mb "$LPID")
for p in $(tree "$LPID"); do echo "# baseline $(ps -o rss=,comm= -p "$p")"; done
pss_base=$(pss_mb "$LPID")
procs_base=$(tree "$LPID" | wc -l)
stop "$LPID"

echo "B5-memory ours=${mem_ours}MB baseline=${mem_base}MB ratio=$(ratio "$mem_ours" "$mem_base")"
echo "# B5-memory PSS ours=${pss_ours}MB baseline=${pss_base}MB; processes ours=$procs_ours baseline=$procs_base"
echo "B5-launch ours=${launch_ours}ms baseline=${launch_base}ms ratio=$(ratio "$launch_ours" "$launch_base")"
echo "# B5-launch runs ours=${ours[*]} baseline=${base[*]}"

# B6: device authorization request → Notify on the bus, with dunst as the server.
dunst >"$WORK/dunst.log" 2>&1 &
PIDS+=($!)
dbus-monitor "interface='org.freedesktop.Notifications',member='Notify'" >"$WORK/bus.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do dunstctl is-paused >/dev/null 2>&1 && break; sleep 0.1; done
"$BIN/aether" >"$WORK/app.log" 2>&1 &
APP=$!
for _ in $(seq 300); do [ -s "$DATA/node.json" ] && break; sleep 0.1; done
b6=()
for i in $(seq "$RUNS"); do
	before=$(grep -c 'member=Notify' "$WORK/bus.log")
	"$BIN/agent" -gateway "$GW" -sub "bench$i" -request-only >"$WORK/agent$i.log" 2>&1
	sent=$(awk '/^DEVICE_REQUEST/{print $2}' "$WORK/agent$i.log")
	for _ in $(seq 50); do [ "$(grep -c 'member=Notify' "$WORK/bus.log")" -gt "$before" ] && break; sleep 0.1; done
	seen=$(grep 'member=Notify' "$WORK/bus.log" | sed -n "$((before + 1))p" | sed -E 's/.*time=([0-9]+)\.([0-9]{3}).*/\1\2/')
	if [ -n "$sent" ] && [ -n "$seen" ]; then b6+=($((seen - sent))); fi
done
stop "$APP"
if [ ${#b6[@]} -gt 0 ]; then
	echo "B6 ours=$(printf '%s\n' "${b6[@]}" | median)ms"
	echo "# B6 runs=${b6[*]} (ms)"
else
	echo "B6 ours=NAms"
	exit 1
fi
