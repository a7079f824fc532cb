#!/bin/sh
# The Kubernetes API server simulator as a shell fixture (demo, bench/):
#
#   sh tests/sim/kubernetes/kubesim.sh start DIR [kubesim options...]
#   sh tests/sim/kubernetes/kubesim.sh stop DIR    stop exactly the simulator started in DIR (by pid)
#
# start runs kubesim on free loopback ports (options as `python3
# tests/sim/kubernetes --help`, e.g. --pod-delay 0.5, --config sim.json),
# waits for it and writes DIR/env:
#   KUBECONFIG       DIR/kubeconfig (contexts kubesim: token, kubesim-cert: client cert)
#   KUBESIM_PID      the simulator's pid
#   KUBESIM_URL      its API server URL (https)
#   KUBESIM_CA       its CA (PEM file)
#   KUBESIM_TOKEN    the admin bearer token
#   KUBESIM_CONTROL  its control API (plain HTTP), e.g. http://127.0.0.1:N/_sim
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
	"$py" "$here" --ready-file "$dir/ready.json" "$@" >"$dir/kubesim.log" 2>&1 &
	echo $! >"$dir/pid"
	i=0
	while [ ! -s "$dir/ready.json" ]; do
		if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
			echo "kubesim: failed to start:" >&2
			cat "$dir/kubesim.log" >&2
			exit 1
		fi
		i=$((i + 1))
		[ $i -lt 600 ] || { echo "kubesim: not ready after 30 s" >&2; exit 1; }
		sleep 0.05
	done
	"$py" - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
i = json.load(open(d + "/ready.json"))
with open(d + "/env", "w") as f:
    f.write("export KUBECONFIG=%s\n" % i["kubeconfig"])
    f.write("export KUBESIM_PID=%d\n" % i["pid"])
    f.write("export KUBESIM_URL=%s\n" % i["server"])
    f.write("export KUBESIM_CA=%s\n" % i["ca"])
    f.write("export KUBESIM_TOKEN=%s\n" % i["token"])
    f.write("export KUBESIM_CONTROL=%s\n" % i["control"])
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
	echo "usage: $0 start|stop DIR [kubesim options]" >&2
	exit 2
	;;
esac
