#!/bin/sh
# The AWS simulator as a shell fixture (for tests/demo.sh, bench/):
#
#   sh tests/sim/aws/awssim.sh start DIR [awssim options...]
#   sh tests/sim/aws/awssim.sh stop DIR    stop exactly the simulator started in DIR (by pid)
#
# start runs awssim on a free loopback port (options as `python3 tests/sim/aws
# --help`: --config sim.json, --boot-delay 1, --regions a,b), waits for it
# and writes DIR/env:
#   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY   the simulator's key pair
#   AWS_ENDPOINT_URL     its endpoint (EC2, S3 and Service Quotas on one port)
#   AWSSIM_PID           the simulator's pid
#   AWSSIM_CONTROL       its control API, http://127.0.0.1:N/_sim
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
	"$py" "$here" --ready-file "$dir/ready.json" "$@" >"$dir/awssim.log" 2>&1 &
	echo $! >"$dir/pid"
	i=0
	while [ ! -s "$dir/ready.json" ]; do
		if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
			echo "awssim: failed to start:" >&2
			cat "$dir/awssim.log" >&2
			exit 1
		fi
		i=$((i + 1))
		[ $i -lt 400 ] || { echo "awssim: not ready after 20 s" >&2; exit 1; }
		sleep 0.05
	done
	"$py" - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
i = json.load(open(d + "/ready.json"))
with open(d + "/env", "w") as f:
    f.write("export AWS_ACCESS_KEY_ID=%s\n" % i["access_key_id"])
    f.write("export AWS_SECRET_ACCESS_KEY=%s\n" % i["secret_access_key"])
    f.write("export AWS_ENDPOINT_URL=%s\n" % i["endpoint"])
    f.write("export AWSSIM_PID=%d\n" % i["pid"])
    f.write("export AWSSIM_CONTROL=%s\n" % i["control"])
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
	echo "usage: $0 start|stop DIR [awssim options]" >&2
	exit 2
	;;
esac
