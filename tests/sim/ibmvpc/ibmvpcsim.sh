#!/bin/sh
# The IBM Cloud VPC simulator as a shell fixture (for tests/demo.sh, bench/):
#
#   sh tests/sim/ibmvpc/ibmvpcsim.sh start DIR [ibmvpcsim options...]
#   sh tests/sim/ibmvpc/ibmvpcsim.sh stop DIR   stop exactly the simulator started in DIR (by pid)
#
# start runs ibmvpcsim on a free loopback port (HTTPS, its CA made in DIR/tls;
# options as `python3 tests/sim/ibmvpc --help`: --config sim.json,
# --boot-delay 1), waits for it and writes
#   DIR/ibm-credentials.env   VPC_AUTH_TYPE=iam, VPC_APIKEY, VPC_AUTH_URL, VPC_URL,
#                             RESOURCE_MANAGER_URL, RESOURCE_CONTROLLER_URL: the file a
#                             provider's `credentials-file:` names
#   DIR/env                   REQUESTS_CA_BUNDLE (the simulator's CA), IBMVPCSIM_PID,
#                             IBMVPCSIM_CONTROL (its control API, plain HTTP)
set -eu

cmd=$1
dir=$2
shift 2
# shellcheck source=tests/sim/simctl.sh
. "$(dirname "$0")/../simctl.sh"

case "$cmd" in
start)
	sim_start ibmvpcsim 30 "$dir" --tls-dir "$dir/tls" "$@"
	sim_write_env "$dir" REQUESTS_CA_BUNDLE=cacert IBMVPCSIM_PID=pid IBMVPCSIM_CONTROL=control
	"$py" - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
i = json.load(open(d + "/ready.json"))
with open(d + "/ibm-credentials.env", "w") as f:
    f.write("VPC_AUTH_TYPE=iam\nVPC_APIKEY=%s\nVPC_AUTH_URL=%s\nVPC_URL=%s\n"
            "RESOURCE_MANAGER_URL=%s\nRESOURCE_CONTROLLER_URL=%s\n"
            % (i["apikey"], i["auth_url"], i["vpc_url"], i["resource_url"], i["resource_url"]))
PY
	;;
stop)
	sim_stop "$dir"
	;;
*)
	sim_usage ibmvpcsim
	;;
esac
