#!/bin/sh
# Issue 10's benchmark: Zuul-like load of pod requests against the
# Kubernetes API server simulator (tests/sim/kubernetes), through the
# kubernetes driver.
#
#   bench/k8s_load.sh [N requests] [C concurrency] [DELAY pod start seconds] [TYPE pod|namespace]
#
# Starts a private ZooKeeper (tests/zkfixture.sh), kubesim with pods
# Running DELAY seconds after their create, one launcher serving a
# kubernetes provider with one label of TYPE, runs bench/zuul_load (N
# requests, C in flight; each fulfilled node is locked, used, released and
# deleted), and stops everything it started, by pid. Prints throughput,
# latency (request to fulfilled), the launcher's and ZooKeeper's peak RSS
# and CPU, and the API calls the simulator served per node (create to
# delete: namespace, service account, token secret and its reads, role,
# binding, pod, pod reads, namespace delete and its reads).
set -eu
N=${1:-500}
C=${2:-50}
DELAY=${3:-0.5}
TYPE=${4:-pod}
BUILD=${BUILD:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ -n "${BENCH_NOMAKE:-}" ] || make -s "$BUILD/bench/zuul_load" "$BUILD/bin/nodepool-launcher" >/dev/null
tmp=$(mktemp -d /tmp/nodepoold-k8sbench.XXXXXX)
pid=""
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	sh tests/sim/kubernetes/kubesim.sh stop "$tmp/sim"
	sh tests/zkfixture.sh stop "$tmp/zk"
	[ -n "${BENCH_KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
sh tests/zkfixture.sh start "$tmp/zk" >/dev/null
. "$tmp/zk/env"
sh tests/sim/kubernetes/kubesim.sh start "$tmp/sim" --pod-delay "$DELAY"
. "$tmp/sim/env"
port=${NP_TEST_ZK_TLS##*:}
tlsopt="--ca $NP_TEST_CERTS/ca.pem --cert $NP_TEST_CERTS/client.pem --key $NP_TEST_CERTS/client.key"
/usr/bin/python3 - "$NP_TEST_ZK_TLS" "$NP_TEST_CERTS" <<'PY'
import sys
from kazoo.client import KazooClient
c = sys.argv[2]
k = KazooClient(hosts=sys.argv[1], use_ssl=True, verify_certs=True, ca=c + "/ca.pem",
                certfile=c + "/client.pem", keyfile=c + "/client.key")
k.start(timeout=15)
k.ensure_path("/bench")
k.stop()
PY
if [ "$TYPE" = pod ]; then
	label="{name: pod, type: pod, image: docker.io/fedora:40, cpu: 1, memory: 512}"
else
	label="{name: pod, type: namespace}"
fi
# the launcher's web API (upstream's default is 0.0.0.0:8005): a free
# loopback port
webport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$tmp/nodepool.yaml" <<CFG
zookeeper-servers: [{host: 127.0.0.1, port: $port, chroot: /bench}]
zookeeper-tls: {ca: $NP_TEST_CERTS/ca.pem, cert: $NP_TEST_CERTS/client.pem, key: $NP_TEST_CERTS/client.key}
webapp: {port: $webport, listen_address: 127.0.0.1}
labels: [{name: pod}]
providers:
  - name: k8s-bench
    driver: kubernetes
    context: kubesim
    pools:
      - name: main
        labels: [$label]
CFG
"$BUILD/bin/nodepool-launcher" -p k8s-bench -c "$tmp/nodepool.yaml" >"$tmp/launcher.log" 2>&1 &
pid=$!
curl -s -X DELETE "$KUBESIM_CONTROL/calls" >/dev/null
echo "load: $N $TYPE requests, concurrency $C, pod start delay ${DELAY}s (kubesim)"
# shellcheck disable=SC2086 # tlsopt is a list of words
"$BUILD/bench/zuul_load" -z "$NP_TEST_ZK_TLS/bench" $tlsopt -l pod -n "$N" -c "$C" \
	--pid "$pid" --pid "$(cat "$tmp/zk/zk.pid")" --idle 2 || { tail -30 "$tmp/launcher.log"; exit 1; }
# every node deleted (namespaces gone) before counting calls
i=0
while :; do
	left=$(curl -s "$KUBESIM_CONTROL/namespaces" | /usr/bin/python3 -c \
		'import json,sys; print(sum(1 for n in json.load(sys.stdin) if "nodepool_node_id" in (n["metadata"].get("labels") or {})))')
	[ "$left" = 0 ] && break
	i=$((i + 1))
	[ $i -lt 600 ] || { echo "namespaces left: $left" >&2; break; }
	sleep 0.1
done
curl -s "$KUBESIM_CONTROL/calls" | /usr/bin/python3 -c '
import json, sys
n = int(sys.argv[1])
c = json.load(sys.stdin)
print("API calls: %d in all, %.1f per node" % (c["total"], c["total"] / n))
for x in sorted(c["calls"], key=lambda x: -x["count"]):
    print("  %6d  %s %s" % (x["count"], x["method"], x["route"]))
' "$N"
