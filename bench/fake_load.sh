#!/bin/sh
# Issue 6's benchmark: Zuul-like load against the `fake` simulated cloud,
# i.e. the state-machine framework and the launcher around it.
#
#   bench/fake_load.sh [N requests] [C concurrency] [BOOT seconds] [API seconds]
#
# Starts a private ZooKeeper (TLS, tests/zkfixture.sh), one launcher serving
# a fake provider whose servers take BOOT seconds to boot (each cloud call
# API seconds to answer), runs bench/zuul_load (N requests, C in flight; each
# fulfilled request's node is locked, used and released, then deleted), and
# stops everything it started, by pid. Prints throughput, latency, the
# launcher's (first pid) and ZooKeeper's (second pid) peak RSS and CPU, and
# the worker's event-loop lag during the
# load (its 100 ms probe, read from two SIGUSR2 dumps: one before the load
# resets the window, the one after reports it).
#
# Environment: BENCH_WARMUP=M runs M requests first, unmeasured (1000: the
# ZooKeeper server's JVM compiles its hot paths; 0 skips); BENCH_ZK=plain talks to ZooKeeper without TLS (the server's
# TLS costs about half its CPU); NP_ZK_EXTRA_CFG=forceSync=no spares the
# server an fsync per write (tests/zkfixture.sh); BUILD picks the build.
set -eu
N=${1:-1000}
C=${2:-50}
BOOT=${3:-0}
API=${4:-0}
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
	sh tests/zkfixture.sh stop "$tmp/zk"
	[ -n "${BENCH_KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
[ -n "${BENCH_DEBUG:-}" ] && set -x
sh tests/zkfixture.sh start "$tmp/zk" >/dev/null
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
# the launcher's web API (upstream's default is 0.0.0.0:8005): a free
# loopback port
webport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$tmp/nodepool.yaml" <<CFG
zookeeper-servers: [{host: 127.0.0.1, port: $port, chroot: /bench}]
$tlscfg
webapp: {port: $webport, listen_address: 127.0.0.1}
labels: [{name: small}]
providers:
  - name: fake-bench
    driver: fake
    boot-delay: $BOOT
    api-delay: $API
    pools:
      - name: main
        labels: [{name: small, cores: 1, ram: 1024}]
CFG
"$BUILD/bin/nodepool-launcher" -p fake-bench -c "$tmp/nodepool.yaml" >"$tmp/launcher.log" 2>&1 &
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
warm=${BENCH_WARMUP:-1000}
if [ "$warm" -gt 0 ]; then
	# shellcheck disable=SC2086
	"$BUILD/bench/zuul_load" -z "$zkurl/bench" $tlsopt -l small -n "$warm" -c "$C" \
		>/dev/null || { tail -30 "$tmp/launcher.log"; exit 1; }
fi
dump
echo "load: $N requests, concurrency $C, fake cloud boot-delay ${BOOT}s api-delay ${API}s"
# shellcheck disable=SC2086 # tlsopt is a list of words
"$BUILD/bench/zuul_load" -z "$zkurl/bench" $tlsopt \
	-l small -n "$N" -c "$C" --pid "$pid" --pid "$(cat "$tmp/zk/zk.pid")" --idle 2 || { tail -30 "$tmp/launcher.log"; exit 1; }
dump
lag=$(grep "event loop lag" "$tmp/launcher.log" | tail -1 | sed 's/.*since start, //; s/ since the last dump//')
echo "worker event-loop lag during the load: max $lag"
grep -E "launches: ready|fake cloud:" "$tmp/launcher.log" | tail -2 | sed 's/^ *//'
