#!/bin/sh
# Prints this checkout's version, in a form Debian accepts (the .deb's Version, what
# `aether --version` prints and the Status page shows), from `git describe`:
#
#   on tag v1.2.0                      1.2.0
#   3 commits after it, commit abc1234 1.2.0+git3.abc1234
#   no tag yet                         0.0.0~git20261129.abc1234 (the commit's date)
#   uncommitted changes                … +dirty (1.2.0+dirty, 1.2.0+git3.abc1234.dirty)
#   not a git checkout                 0.0.0~unknown
#
# Debian orders these as wanted: ~ sorts before anything, so the first tag is newer than
# every untagged build, and a build after a tag newer than the tag.
set -eu
cd "$(dirname "$0")/.."
if ! git rev-parse --git-dir >/dev/null 2>&1; then
	echo "0.0.0~unknown"
	exit 0
fi
dirty=""
git diff --quiet HEAD -- 2>/dev/null || dirty=dirty
if d=$(git describe --tags --match 'v[0-9]*' --abbrev=7 2>/dev/null); then
	d=${d#v}
	case $d in
	*-*-g*) # 1.2.0-3-gabc1234
		base=${d%-*-g*}
		rest=${d#"$base"-}
		v="$base+git${rest%%-g*}.${rest#*-g}"
		[ -n "$dirty" ] && v="$v.$dirty"
		;;
	*)
		v=$d
		[ -n "$dirty" ] && v="$v+$dirty"
		;;
	esac
else
	v="0.0.0~git$(git log -1 --format=%cd --date=format:%Y%m%d).$(git rev-parse --short=7 HEAD)"
	[ -n "$dirty" ] && v="$v.$dirty"
fi
# Debian allows letters, digits and . + ~ here (a tag may carry others: they become ~).
echo "$v" | tr -c 'A-Za-z0-9.+~\n' '~'
