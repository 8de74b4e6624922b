#!/usr/bin/env bash
# `make test` after deps: ui-check first, then the parts that share no resource side by side
# (the Makefile says which and why):
#
#   go       make lint go-test
#   desktop  make desktop-release (the desktop binary, once), then beside go:
#   gui      make gui-test           that binary (AETHER_DESKTOP_BIN)
#   package  make package-test       that binary in the .deb
#
# Each part writes test-results/<part>.log, printed whole when the part ends (one part at a
# time, never interleaved) with its wall and CPU time (user+sys of all it ran). Exits non-zero when a part failed, and
# says which.
set -uo pipefail
cd "$(dirname "$0")/.."
make=(${MAKE:-make} --no-print-directory)
mkdir -p test-results
rcs=$(mktemp -d)
trap 'rm -rf "$rcs"' EXIT
TIMEFORMAT="%0R s wall, %0U+%0S s CPU"

say() { # say: prints its input in one piece, never inside another part's
	{
		flock 9
		cat
	} 9>"$rcs/print.lock"
}

part() { # part NAME CMD...: CMD's output into test-results/NAME.log, printed when it ends
	local name=$1 log=test-results/$1.log rc took
	shift
	echo "======== $name started: $* (into $log)" | say
	took=$({ time "$@" >"$log" 2>&1; } 2>&1)
	rc=$?
	echo "$rc" >"$rcs/$name"
	{
		echo "======== $name ($log)"
		cat "$log"
		if [ "$rc" -eq 0 ]; then echo "======== $name passed: $took"; else echo "======== $name FAILED: $took"; fi
	} | say
	return "$rc"
}

part ui-check "${make[@]}" ui-check || exit 1
part go "${make[@]}" lint go-test &
if part desktop "${make[@]}" desktop-release; then
	export AETHER_DESKTOP_BIN=$PWD/${DESKTOP_BIN:?the Makefile gives it}
	part gui "${make[@]}" gui-test &
	part package "${make[@]}" package-test &
fi
wait

failed=()
for p in go desktop gui package; do
	case $(cat "$rcs/$p" 2>/dev/null) in
	0) ;;
	"") failed+=("$p (not run)") ;;
	*) failed+=("$p") ;;
	esac
done
if [ ${#failed[@]} -gt 0 ]; then
	echo "make test: FAILED: $(IFS=,; echo "${failed[*]}" | sed 's/,/, /g') (test-results/<part>.log)"
	exit 1
fi
echo "make test: every part passed"
