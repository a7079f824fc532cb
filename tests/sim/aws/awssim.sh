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
# shellcheck source=tests/sim/simctl.sh
. "$(dirname "$0")/../simctl.sh"

case "$cmd" in
start)
	sim_start awssim 20 "$dir" "$@"
	sim_write_env "$dir" AWS_ACCESS_KEY_ID=access_key_id AWS_SECRET_ACCESS_KEY=secret_access_key \
		AWS_ENDPOINT_URL=endpoint AWSSIM_PID=pid AWSSIM_CONTROL=control
	;;
stop)
	sim_stop "$dir"
	;;
*)
	sim_usage awssim
	;;
esac
