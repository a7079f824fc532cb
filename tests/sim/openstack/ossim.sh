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
# shellcheck source=tests/sim/simctl.sh
. "$(dirname "$0")/../simctl.sh"

case "$cmd" in
start)
	sim_start ossim 20 "$dir" --data-dir "$dir/images" "$@"
	"$py" "$here/clouds_yaml.py" --ready-file "$dir/ready.json" --per-region \
		-o "$dir/clouds.yaml"
	sim_write_env "$dir" "OS_CLIENT_CONFIG_FILE:=$dir/clouds.yaml" OSSIM_PID=pid \
		OSSIM_URL=base OSSIM_CONTROL=control
	;;
stop)
	sim_stop "$dir"
	;;
*)
	sim_usage ossim
	;;
esac
