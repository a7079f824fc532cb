#!/bin/sh
# Issue 20's benchmark: Zuul-like load against the azure driver and the
# Azure simulator (tests/sim/azure), i.e. the adapter's API economy.
#
#   bench/azure_load.sh [N requests] [C concurrency] [BOOT seconds] [RATE calls/s]
#
# Starts a private ZooKeeper (tests/zkfixture.sh), the Azure simulator (HTTPS;
# its VMs Creating for BOOT seconds), one launcher serving an azure provider
# at `rate` RATE (ARM calls per second) and runs bench/zuul_load (N
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
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init nodepoold-bench
bench_cleanup_hook() {
	sh tests/sim/azure/azuresim.sh stop "$tmp/azure"
}
bench_zk_start
echo '{"boot_delay": '"$BOOT"', "delete_delay": 0.5}' >"$tmp/azure.json"
sh tests/sim/azure/azuresim.sh start "$tmp/azure" --config "$tmp/azure.json"
. "$tmp/azure/env"
export REQUESTS_CA_BUNDLE
bench_zk_mkdir /bench
{
	bench_config_head
	cat <<CFG
labels: [{name: small}]
providers:
  - name: azure-bench
    driver: azure
    auth-path: $AZURE_AUTH_LOCATION
    location: centralus
    resource-group: nodepool
    resource-group-location: centralus
    subnet-id: /subscriptions/c35cf7df-ed75-4c85-be00-535409a85120/resourceGroups/nodepool/providers/Microsoft.Network/virtualNetworks/NodePool/subnets/default
    rate: $RATE
    cloud-images:
      - name: jammy
        username: zuul
        image-reference: {publisher: Canonical, offer: 0001-com-ubuntu-server-jammy, sku: 22_04-lts-gen2, version: latest}
    pools:
      - name: main
        max-servers: 1000
        host-key-checking: false
        labels:
          - {name: small, cloud-image: jammy, hardware-profile: {vm-size: Standard_B1s}}
CFG
} >"$tmp/nodepool.yaml"
"$BUILD/bin/nodepool-launcher" -p azure-bench -c "$tmp/nodepool.yaml" >"$tmp/launcher.log" 2>&1 &
pid=$!
bench_wait_pool
bench_warmup 0 "$C" small
bench_dump
curl -s -X DELETE "$AZURESIM_CONTROL/calls" >/dev/null
echo "load: $N requests, concurrency $C, simulated VM boot ${BOOT}s, rate ${RATE} calls/s"
bench_zuul_load -l small -n "$N" -c "$C" --pid "$pid" --idle 2
bench_dump
bench_lag
# let the last deletes finish, then count the calls
i=0
while [ $i -lt 150 ]; do
	left=$(curl -s "$AZURESIM_CONTROL/state" | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["virtualMachines"]))')
	[ "$left" = 0 ] && break
	i=$((i + 1))
	sleep 0.2
done
curl -s "$AZURESIM_CONTROL/calls" | /usr/bin/python3 -c '
import json, sys
n = int(sys.argv[1])
c = json.load(sys.stdin)["calls"]
tot = sum(c.values())
print("Azure API calls: %d for %d nodes launched and deleted: %.2f per node" % (tot, n, tot / n))
for k, v in sorted(c.items(), key=lambda kv: -kv[1]):
    print("  %-36s %6d  %.3f/node" % (k, v, v / n))
' "$N"
