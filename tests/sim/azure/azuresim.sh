#!/bin/sh
# The Azure simulator as a shell fixture (for tests/demo.sh, bench/):
#
#   sh tests/sim/azure/azuresim.sh start DIR [azuresim options...]
#   sh tests/sim/azure/azuresim.sh stop DIR    stop exactly the simulator started in DIR (by pid)
#
# start runs azuresim on a free loopback port (HTTPS, its CA made in
# DIR/azuresim-tls; options as `python3 tests/sim/azure --help`: --config
# sim.json, --boot-delay 1), waits for it and writes DIR/env:
#   AZURE_AUTH_LOCATION  the service principal's auth file (DIR/azure-auth.json),
#                        naming the simulator's token and ARM endpoints
#   REQUESTS_CA_BUNDLE   the simulator's CA (read by nodepoold and azure-cli)
#   AZURESIM_PID         the simulator's pid
#   AZURESIM_CONTROL     its control API, http://127.0.0.1:N/_sim
set -eu

cmd=$1
dir=$2
shift 2
# shellcheck source=tests/sim/simctl.sh
. "$(dirname "$0")/../simctl.sh"

case "$cmd" in
start)
	sim_start azuresim 30 "$dir" "$@"
	sim_write_env "$dir" AZURE_AUTH_LOCATION=auth_path REQUESTS_CA_BUNDLE=cacert \
		AZURESIM_PID=pid AZURESIM_CONTROL=control
	;;
stop)
	sim_stop "$dir"
	;;
*)
	sim_usage azuresim
	;;
esac
