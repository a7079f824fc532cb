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
# shellcheck source=tests/sim/simctl.sh
. "$(dirname "$0")/../simctl.sh"

case "$cmd" in
start)
	sim_start kubesim 30 "$dir" "$@"
	sim_write_env "$dir" KUBECONFIG=kubeconfig KUBESIM_PID=pid KUBESIM_URL=server \
		KUBESIM_CA=ca KUBESIM_TOKEN=token KUBESIM_CONTROL=control
	;;
stop)
	sim_stop "$dir"
	;;
*)
	sim_usage kubesim
	;;
esac
