#!/bin/sh
# Issue 14's benchmark: Zuul-like load against the OpenStack simulator
# (tests/sim/openstack), i.e. the openstack adapter, lib/net/http and the
# state-machine framework around them, over real HTTP.
#
#   bench/openstack_load.sh [N requests] [C concurrency] [BOOT seconds] [RATE seconds]
#
# Starts a private ZooKeeper (TLS, tests/zkfixture.sh), the simulator
# (tests/sim/openstack/ossim.sh; servers ACTIVE BOOT seconds after create,
# one region, limits far above the load), one launcher serving an openstack
# provider (rate RATE: seconds between API calls, per API; 0 none), runs
# bench/zuul_load (N requests, C in flight; each fulfilled request's node
# is locked, used and released, then deleted), and stops everything it
# started, by pid. Prints throughput and latency (zuul_load), the launcher's
# peak RSS and CPU, and the API calls the simulator served per launched
# node, by route.
#
# Measured (2-core shared VM, 2026-11-24, defaults 500 requests, concurrency
# 50, 1 s boot, no rate): 25.3 requests/s, request->fulfilled p50 1.93 s,
# p99 1.99 s, 2.04 API calls per launched node (create, delete, and one
# shared server listing a second), worker peak RSS 16.6 MiB. With rate
# 0.01 s: 20.7 requests/s, p50 1.99 s, p99 3.17 s, 2.05 calls per node.
#
# Environment: BENCH_WARMUP=M runs M requests first, unmeasured (default
# 0); BUILD picks the build; BENCH_KEEP keeps the temporary directory.
set -eu
N=${1:-500}
C=${2:-50}
BOOT=${3:-1}
RATE=${4:-0}
BUILD=${BUILD:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ -n "${BENCH_NOMAKE:-}" ] || make -s "$BUILD/bench/zuul_load" "$BUILD/bin/nodepool-launcher" >/dev/null
tmp=$(mktemp -d /tmp/nodepoold-osbench.XXXXXX)
pid=""
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	sh tests/sim/openstack/ossim.sh stop "$tmp/sim" || true
	sh tests/zkfixture.sh stop "$tmp/zk"
	[ -n "${BENCH_KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
[ -n "${BENCH_DEBUG:-}" ] && set -x
sh tests/zkfixture.sh start "$tmp/zk" >/dev/null
. "$tmp/zk/env"
port=${NP_TEST_ZK_TLS##*:}
zkurl=$NP_TEST_ZK_TLS
tlsopt="--ca $NP_TEST_CERTS/ca.pem --cert $NP_TEST_CERTS/client.pem --key $NP_TEST_CERTS/client.key"
kz() {
	/usr/bin/python3 - "$NP_TEST_ZK_TLS" "$NP_TEST_CERTS" "$@"
}
kz <<'PY'
import sys
from kazoo.client import KazooClient
c = sys.argv[2]
k = KazooClient(hosts=sys.argv[1], use_ssl=True, verify_certs=True, ca=c + "/ca.pem",
                certfile=c + "/client.pem", keyfile=c + "/client.key")
k.start(timeout=15)
k.ensure_path("/bench")
k.stop()
PY
mkdir -p "$tmp/sim"
cat >"$tmp/sim/sim.json" <<SIM
{"clouds": {"bench": {"regions": {"RegionOne": {
  "boot_delay": $BOOT,
  "flavors": [{"name": "small", "ram": 1024, "vcpus": 1}],
  "images": [{"name": "debian"}],
  "compute_limits": {"maxTotalInstances": 100000, "maxTotalCores": 100000,
                     "maxTotalRAMSize": 1000000000}}}}},
 "call_log": 10}
SIM
sh tests/sim/openstack/ossim.sh start "$tmp/sim" --config "$tmp/sim/sim.json"
. "$tmp/sim/env"
cat >"$tmp/nodepool.yaml" <<CFG
zookeeper-servers: [{host: 127.0.0.1, port: $port, chroot: /bench}]
zookeeper-tls: {ca: $NP_TEST_CERTS/ca.pem, cert: $NP_TEST_CERTS/client.pem, key: $NP_TEST_CERTS/client.key}
labels: [{name: small}]
providers:
  - name: os-bench
    cloud: bench
    region-name: RegionOne
    rate: $RATE
    cloud-images: [{name: debian}]
    pools:
      - name: main
        host-key-checking: false
        labels: [{name: small, cloud-image: debian, flavor-name: small}]
CFG
OS_CLIENT_CONFIG_FILE=$tmp/sim/clouds.yaml \
	"$BUILD/bin/nodepool-launcher" -p os-bench -c "$tmp/nodepool.yaml" >"$tmp/launcher.log" 2>&1 &
pid=$!
kz <<'PY'
import sys, time
from kazoo.client import KazooClient
c = sys.argv[2]
k = KazooClient(hosts=sys.argv[1] + "/bench", use_ssl=True, verify_certs=True,
                ca=c + "/ca.pem", certfile=c + "/client.pem", keyfile=c + "/client.key")
k.start(timeout=15)
end = time.time() + 30
while time.time() < end:
    if k.exists("/nodepool/components/pool") and k.get_children("/nodepool/components/pool"):
        break
    time.sleep(0.1)
else:
    sys.exit("the launcher did not register its pool")
k.stop()
PY
warm=${BENCH_WARMUP:-0}
if [ "$warm" -gt 0 ]; then
	# shellcheck disable=SC2086
	"$BUILD/bench/zuul_load" -z "$zkurl/bench" $tlsopt -l small -n "$warm" -c "$C" \
		>/dev/null || { tail -30 "$tmp/launcher.log"; exit 1; }
fi
/usr/bin/python3 -c "import urllib.request as u; u.urlopen(u.Request('$OSSIM_CONTROL/calls', method='DELETE'))"
echo "load: $N requests, concurrency $C, simulated OpenStack boot ${BOOT}s, rate ${RATE}s between calls"
# shellcheck disable=SC2086 # tlsopt is a list of words
"$BUILD/bench/zuul_load" -z "$zkurl/bench" $tlsopt \
	-l small -n "$N" -c "$C" --pid "$pid" --idle 2 || { tail -30 "$tmp/launcher.log"; exit 1; }
/usr/bin/python3 - "$OSSIM_CONTROL" "$N" <<'PY'
import json, sys, urllib.request
calls = json.load(urllib.request.urlopen(sys.argv[1] + "/calls"))
n = int(sys.argv[2])
print("API calls served by the simulator during the load: %d, %.2f per launched node"
      % (calls["total"], calls["total"] / n))
for c in sorted(calls["calls"], key=lambda c: -c["count"]):
    print("  %6d  %-8s %-6s %s" % (c["count"], c["service"], c["method"], c["route"]))
PY
