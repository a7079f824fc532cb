#!/bin/sh
# Issue 20's benchmark: Zuul-like load against the ibmvpc driver and the IBM
# Cloud VPC simulator (tests/sim/ibmvpc, HTTPS), i.e. the adapter's API
# economy.
#
#   bench/ibmvpc_load.sh [N requests] [C concurrency] [BOOT seconds] [RATE calls/s] [PUBLIC 0|1]
#
# Starts a private ZooKeeper (tests/zkfixture.sh), the simulator (its
# instances pending for BOOT seconds), one launcher serving an ibmvpc
# provider at `rate` RATE (calls per second per API, as upstream) whose pool
# gets a floating IP per node when PUBLIC is 1, and runs bench/zuul_load (N
# requests, C in flight; each fulfilled request's node is locked, used and
# released, then deleted). Stops everything it started, by pid. Prints
# throughput, latency, the launcher's peak RSS and CPU, and the simulator's
# API call counts: calls per launched node, by call.
#
# Environment: BENCH_WARMUP=M runs M requests first, unmeasured (0 skips,
# the default); BUILD picks the build.
set -eu
N=${1:-500}
C=${2:-50}
BOOT=${3:-1}
RATE=${4:-100}
PUBLIC=${5:-0}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init nodepoold-bench
bench_cleanup_hook() {
	sh tests/sim/ibmvpc/ibmvpcsim.sh stop "$tmp/ibm"
}
bench_zk_start
echo '{"boot_delay": '"$BOOT"', "delete_delay": 0.5, "page_size": 100, "subnets": [{"name": "sn-nodepool", "zone": "us-south-1", "cidr": "10.240.0.0/20"}]}' >"$tmp/ibm.json"
sh tests/sim/ibmvpc/ibmvpcsim.sh start "$tmp/ibm" --config "$tmp/ibm.json"
. "$tmp/ibm/env"
export REQUESTS_CA_BUNDLE
export HOME="$tmp" # no ~/ibm-credentials.env of the machine's
bench_zk_mkdir /bench
public=false
[ "$PUBLIC" = 1 ] && public=true
{
	bench_config_head
	cat <<CFG
labels: [{name: small}]
providers:
  - name: ibm-bench
    driver: ibmvpc
    vpc: nodepool
    region: us-south
    zone: us-south-1
    subnet: sn-nodepool
    rate: $RATE
    credentials-file: $tmp/ibm/ibm-credentials.env
    cloud-images:
      - {name: debian, username: zuul, keys: [testuser], image-name: ibm-debian-9-13-minimal-amd64-4}
    pools:
      - name: main
        max-servers: 1000
        public-ipv4: $public
        host-key-checking: false
        labels:
          - {name: small, cloud-image: debian, profile: cx2-2x4}
CFG
} >"$tmp/nodepool.yaml"
"$BUILD/bin/nodepool-launcher" -p ibm-bench -c "$tmp/nodepool.yaml" >"$tmp/launcher.log" 2>&1 &
pid=$!
bench_wait_pool
bench_warmup 0 "$C" small
bench_dump
curl -s -X DELETE "$IBMVPCSIM_CONTROL/calls" >/dev/null
echo "load: $N requests, concurrency $C, simulated VPC boot ${BOOT}s, rate ${RATE} calls/s per API, floating IPs: $public"
bench_zuul_load -l small -n "$N" -c "$C" --pid "$pid" --idle 2
bench_dump
bench_lag
# let the last deletes finish, then count the calls
i=0
while [ $i -lt 150 ]; do
	left=$(curl -s "$IBMVPCSIM_CONTROL/state" | /usr/bin/python3 -c 'import json,sys; s=json.load(sys.stdin); print(len(s["instances"]) + len(s["floating_ips"]))')
	[ "$left" = 0 ] && break
	i=$((i + 1))
	sleep 0.2
done
curl -s "$IBMVPCSIM_CONTROL/calls" | /usr/bin/python3 -c '
import json, sys
n = int(sys.argv[1])
c = json.load(sys.stdin)["calls"]
tot = sum(c.values())
print("IBM Cloud API calls: %d for %d nodes launched and deleted: %.2f per node" % (tot, n, tot / n))
for k, v in sorted(c.items(), key=lambda kv: -kv[1]):
    print("  %-70s %6d  %.3f/node" % (k, v, v / n))
' "$N"
