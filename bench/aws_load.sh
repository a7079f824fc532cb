#!/bin/sh
# Issue 11's benchmark: Zuul-like load against the aws driver and the AWS
# simulator (tests/sim/aws), i.e. the adapter's API economy.
#
#   bench/aws_load.sh [N requests] [C concurrency] [BOOT seconds] [RATE calls/s]
#
# Starts a private ZooKeeper (tests/zkfixture.sh), the AWS simulator (its
# instances pending for BOOT seconds), one launcher serving an aws provider
# at `rate` RATE (mutating calls per second; describes at 10x, as upstream)
# and runs bench/zuul_load (N requests, C in flight; each fulfilled
# request's node is locked, used and released, then deleted). Stops
# everything it started, by pid. Prints throughput, latency, the launcher's
# peak RSS and CPU, and the simulator's API call counts: calls per launched
# node, by action.
#
# Environment: BENCH_WARMUP=M runs M requests first, unmeasured (0 skips,
# the default); BUILD picks the build.
set -eu
N=${1:-500}
C=${2:-50}
BOOT=${3:-1}
RATE=${4:-20}
BUILD=${BUILD:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ -n "${BENCH_NOMAKE:-}" ] || make -s "$BUILD/bench/zuul_load" "$BUILD/bin/nodepool-launcher" >/dev/null
tmp=$(mktemp -d /tmp/nodepoold-bench.XXXXXX)
pid=""
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	sh tests/sim/aws/awssim.sh stop "$tmp/aws"
	sh tests/zkfixture.sh stop "$tmp/zk"
	[ -n "${BENCH_KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
[ -n "${BENCH_DEBUG:-}" ] && set -x
sh tests/zkfixture.sh start "$tmp/zk" >/dev/null
echo '{"boot_delay": '"$BOOT"', "terminate_delay": 0.5, "regions": {"us-east-1": {}}}' >"$tmp/aws.json"
sh tests/sim/aws/awssim.sh start "$tmp/aws" --config "$tmp/aws.json"
. "$tmp/aws/env"
export HOME="$tmp" # no ~/.aws of the machine's
. "$tmp/zk/env"
if [ "${BENCH_ZK:-tls}" = plain ]; then
	port=${NP_TEST_ZK##*:}
	zkurl=$NP_TEST_ZK
	tlscfg=""
	tlsopt=""
else
	port=${NP_TEST_ZK_TLS##*:}
	zkurl=$NP_TEST_ZK_TLS
	tlscfg="zookeeper-tls: {ca: $NP_TEST_CERTS/ca.pem, cert: $NP_TEST_CERTS/client.pem, key: $NP_TEST_CERTS/client.key}"
	tlsopt="--ca $NP_TEST_CERTS/ca.pem --cert $NP_TEST_CERTS/client.pem --key $NP_TEST_CERTS/client.key"
fi
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
cat >"$tmp/nodepool.yaml" <<CFG
zookeeper-servers: [{host: 127.0.0.1, port: $port, chroot: /bench}]
$tlscfg
labels: [{name: small}]
providers:
  - name: aws-bench
    driver: aws
    region-name: us-east-1
    rate: $RATE
    cloud-images:
      - {name: debian, username: admin, image-id: ami-0sim0debian12}
    pools:
      - name: main
        max-servers: 1000
        host-key-checking: false
        labels:
          - {name: small, cloud-image: debian, instance-type: t3.small, key-name: zuul}
CFG
"$BUILD/bin/nodepool-launcher" -p aws-bench -c "$tmp/nodepool.yaml" >"$tmp/launcher.log" 2>&1 &
pid=$!
# wait for the pool to register
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
# A dump logs the loop lag and resets its window; wait for it in the log.
dump() {
	n=$(grep -c "event loop lag" "$tmp/launcher.log" || true)
	kill -USR2 "$pid"
	i=0
	while [ "$(grep -c "event loop lag" "$tmp/launcher.log" || true)" -le "$n" ]; do
		i=$((i + 1))
		[ $i -lt 100 ] || { echo "no dump from the launcher" >&2; exit 1; }
		sleep 0.05
	done
}
warm=${BENCH_WARMUP:-0}
if [ "$warm" -gt 0 ]; then
	# shellcheck disable=SC2086
	"$BUILD/bench/zuul_load" -z "$zkurl/bench" $tlsopt -l small -n "$warm" -c "$C" \
		>/dev/null || { tail -30 "$tmp/launcher.log"; exit 1; }
fi
dump
curl -s -X DELETE "$AWSSIM_CONTROL/calls" >/dev/null
echo "load: $N requests, concurrency $C, simulated EC2 boot ${BOOT}s, rate ${RATE} calls/s"
# shellcheck disable=SC2086 # tlsopt is a list of words
"$BUILD/bench/zuul_load" -z "$zkurl/bench" $tlsopt \
	-l small -n "$N" -c "$C" --pid "$pid" --idle 2 || { tail -30 "$tmp/launcher.log"; exit 1; }
dump
lag=$(grep "event loop lag" "$tmp/launcher.log" | tail -1 | sed 's/.*since start, //; s/ since the last dump//')
echo "worker event-loop lag during the load: max $lag"
# let the last deletes finish, then count the calls
i=0
while [ $i -lt 100 ]; do
	left=$(curl -s "$AWSSIM_CONTROL/state" | /usr/bin/python3 -c 'import json,sys; s=json.load(sys.stdin); print(sum(1 for i in s["us-east-1"]["instances"] if i["state"] in ("pending","running","shutting-down")))')
	[ "$left" = 0 ] && break
	i=$((i + 1))
	sleep 0.2
done
curl -s "$AWSSIM_CONTROL/calls" | /usr/bin/python3 -c '
import json, sys
n = int(sys.argv[1])
c = json.load(sys.stdin)["calls"]
tot = sum(c.values())
print("AWS API calls: %d for %d nodes launched and deleted: %.2f per node" % (tot, n, tot / n))
for k, v in sorted(c.items(), key=lambda kv: -kv[1]):
    print("  %-36s %6d  %.3f/node" % (k, v, v / n))
' "$N"
