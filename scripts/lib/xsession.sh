# Sourced by gui-test.sh and bench-desktop.sh: a virtual display and a private
# session bus for the desktop app.

# start_xvfb WORK: starts Xvfb on a free display, exports DISPLAY, sets XVFB_PID
# and writes WORK/session.conf for dbus-run-session: a session bus that starts
# nothing by itself (no service directories), so only what the script starts is
# on it. Returns non-zero when Xvfb does not come up (its log is WORK/xvfb.log).
start_xvfb() {
	local work=$1
	cat >"$work/session.conf" <<-'CONF'
		<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
		 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
		<busconfig>
		  <type>session</type>
		  <keep_umask/>
		  <listen>unix:tmpdir=/tmp</listen>
		  <auth>EXTERNAL</auth>
		  <policy context="default">
		    <allow send_destination="*" eavesdrop="true"/>
		    <allow eavesdrop="true"/>
		    <allow own="*"/>
		  </policy>
		</busconfig>
	CONF
	Xvfb -displayfd 5 -screen 0 1400x900x24 -nolisten tcp 5>"$work/display" 2>"$work/xvfb.log" &
	XVFB_PID=$!
	for _ in $(seq 100); do [ -s "$work/display" ] && break; sleep 0.1; done
	[ -s "$work/display" ] || return 1
	DISPLAY=:$(head -1 "$work/display")
	export DISPLAY
}

# free_port picks a port below the kernel's ephemeral range, where no outgoing
# connection can be holding it by the time the app binds it. `make test` runs the Go
# tests (backend/e2e freePort: 20000–25999), gui-test.sh and package-test.sh side by
# side: each script sets PORT_BASE to its own 3000 ports (26000, 29000), so no two
# of them can pick one port between its check and its bind.
free_port() {
	local p
	while :; do
		p=$((${PORT_BASE:?} + RANDOM % 3000))
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || {
			echo "$p"
			return
		}
	done
}
