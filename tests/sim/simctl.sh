# shellcheck shell=sh
# Shell functions the simulators' shell fixtures share (sourced by
# tests/sim/openstack/ossim.sh, tests/sim/kubernetes/kubesim.sh,
# tests/sim/aws/awssim.sh; POSIX sh, run under set -eu) as
#   . "$(dirname "$0")/../simctl.sh"
# Sets
#   here  the wrapper's directory, the simulator's (run as `python3 $here`)
#   py    the python3 to run it with
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
[ -x "$py" ] || py=python3

# sim_start NAME SECONDS DIR [simulator options...]
# Starts the simulator on free loopback ports with DIR/ready.json as its
# ready-file and its output in DIR/NAME.log, writes its pid to DIR/pid and
# waits up to SECONDS for the ready-file. Exits 1 (with the log on stderr)
# when it dies first or is not ready in time.
sim_start() {
	sim_name=$1
	sim_secs=$2
	sim_dir=$3
	shift 3
	mkdir -p "$sim_dir"
	rm -f "$sim_dir/ready.json"
	"$py" "$here" --ready-file "$sim_dir/ready.json" "$@" >"$sim_dir/$sim_name.log" 2>&1 &
	echo $! >"$sim_dir/pid"
	i=0
	while [ ! -s "$sim_dir/ready.json" ]; do
		if ! kill -0 "$(cat "$sim_dir/pid")" 2>/dev/null; then
			echo "$sim_name: failed to start:" >&2
			cat "$sim_dir/$sim_name.log" >&2
			exit 1
		fi
		i=$((i + 1))
		[ $i -lt $((sim_secs * 20)) ] || { echo "$sim_name: not ready after $sim_secs s" >&2; exit 1; }
		sleep 0.05
	done
}

# sim_write_env DIR VAR=KEY... [VAR:=VALUE...]
# Writes DIR/env: `export VAR=<ready.json's KEY>` for each VAR=KEY, and
# `export VAR=VALUE` for each VAR:=VALUE, in the order given.
sim_write_env() {
	"$py" - "$@" <<'PY'
import json, sys
d = sys.argv[1]
i = json.load(open(d + "/ready.json"))
with open(d + "/env", "w") as f:
    for a in sys.argv[2:]:
        var, sep, val = a.partition(":=")
        if not sep:
            var, _, key = a.partition("=")
            val = i[key]
        f.write("export %s=%s\n" % (var, val))
PY
}

# sim_stop DIR
# Stops exactly the simulator whose pid is in DIR/pid: SIGTERM, then SIGKILL
# after 5 s; removes DIR/pid. Nothing to do when DIR/pid is absent.
sim_stop() {
	[ -f "$1/pid" ] || return 0
	sim_pid=$(cat "$1/pid")
	if kill -0 "$sim_pid" 2>/dev/null; then
		kill "$sim_pid"
		i=0
		while kill -0 "$sim_pid" 2>/dev/null && [ $i -lt 100 ]; do
			sleep 0.05
			i=$((i + 1))
		done
		kill -0 "$sim_pid" 2>/dev/null && kill -9 "$sim_pid"
	fi
	rm -f "$1/pid"
}

# sim_usage NAME: the wrappers' usage message; exits 2.
sim_usage() {
	echo "usage: $0 start|stop DIR [$1 options]" >&2
	exit 2
}
