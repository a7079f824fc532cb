#!/bin/sh
# The GCE simulator as a shell fixture (for tests/demo.sh, bench/):
#
#   sh tests/sim/gce/gcesim.sh start DIR [gcesim options...]
#   sh tests/sim/gce/gcesim.sh stop DIR    stop exactly the simulator started in DIR (by pid)
#
# start runs gcesim on a free loopback port (options as `python3 tests/sim/gce
# --help`: --config sim.json, --boot-delay 1), waits for it and writes DIR/env:
#   GOOGLE_APPLICATION_CREDENTIALS          its service account key (token_uri: the simulator)
#   CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE its Compute API root
#   CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE      the CA of its HTTPS certificate
#   GCESIM_PID, GCESIM_CONTROL              its pid, its control API (http://127.0.0.1:N/_sim)
#   GCESIM_PROJECT                          its project
set -eu

cmd=$1
dir=$2
shift 2
# shellcheck source=tests/sim/simctl.sh
. "$(dirname "$0")/../simctl.sh"

case "$cmd" in
start)
	sim_start gcesim 30 "$dir" "$@"
	sim_write_env "$dir" GOOGLE_APPLICATION_CREDENTIALS=credentials \
		CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE=endpoint \
		CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE=cacert GCESIM_PID=pid GCESIM_CONTROL=control \
		GCESIM_PROJECT=project
	;;
stop)
	sim_stop "$dir"
	;;
*)
	sim_usage gcesim
	;;
esac
