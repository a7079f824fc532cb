#!/bin/sh
# The OpenStack simulator as a shell fixture (for tests/demo.sh, bench/):
#
#   sh tests/sim/openstack/ossim.sh start DIR [ossim options...]
#   sh tests/sim/openstack/ossim.sh stop DIR     stop exactly the simulator started in DIR (by pid)
#
# start runs ossim on a free loopback port (options as `python3
# tests/sim/openstack --help`, e.g. --regions RegionOne,RegionTwo,
# --config sim.json, --boot-delay 1, --floating-ips, --tls-dir DIR/tls),
# waits for it, writes DIR/clouds.yaml (one entry per cloud with its
# regions, plus "<cloud>-<region>" entries) and DIR/env:
#   OS_CLIENT_CONFIG_FILE  DIR/clouds.yaml
#   OSSIM_PID              the simulator's pid
#   OSSIM_URL              its base URL (http or https)
#   OSSIM_CONTROL          its control API (plain HTTP), e.g. http://127.0.0.1:N/_sim
set -eu

cmd=$1
dir=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
[ -x "$py" ] || py=python3

case "$cmd" in
start)
	mkdir -p "$dir"
	rm -f "$dir/ready.json"
	"$py" "$here" --ready-file "$dir/ready.json" --data-dir "$dir/images" "$@" \
		>"$dir/ossim.log" 2>&1 &
	echo $! >"$dir/pid"
	i=0
	while [ ! -s "$dir/ready.json" ]; do
		if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
			echo "ossim: failed to start:" >&2
			cat "$dir/ossim.log" >&2
			exit 1
		fi
		i=$((i + 1))
		[ $i -lt 400 ] || { echo "ossim: not ready after 20 s" >&2; exit 1; }
		sleep 0.05
	done
	"$py" "$here/clouds_yaml.py" --ready-file "$dir/ready.json" --per-region \
		-o "$dir/clouds.yaml"
	"$py" - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
i = json.load(open(d + "/ready.json"))
with open(d + "/env", "w") as f:
    f.write("export OS_CLIENT_CONFIG_FILE=%s/clouds.yaml\n" % d)
    f.write("export OSSIM_PID=%d\n" % i["pid"])
    f.write("export OSSIM_URL=%s\n" % i["base"])
    f.write("export OSSIM_CONTROL=%s\n" % i["control"])
PY
	;;
stop)
	[ -f "$dir/pid" ] || exit 0
	pid=$(cat "$dir/pid")
	if kill -0 "$pid" 2>/dev/null; then
		kill "$pid"
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
			sleep 0.05
			i=$((i + 1))
		done
		kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
	fi
	rm -f "$dir/pid"
	;;
*)
	echo "usage: $0 start|stop DIR [ossim options]" >&2
	exit 2
	;;
esac
