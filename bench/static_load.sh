#!/bin/sh
# Issue 3's benchmark: Zuul-like load against a static provider.
#   bench/static_load.sh [N requests] [C concurrency] [H static nodes]
# Starts a private ZooKeeper (TLS), one launcher with H static hosts
# (host-key-checking off: no host is contacted), runs bench/zuul_load, and
# stops everything it started, by pid. Prints throughput, latency and the
# launcher's peak RSS and CPU.
set -eu
N=${1:-500}
C=${2:-20}
H=${3:-20}
BUILD=${BUILD:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ -n "${BENCH_NOMAKE:-}" ] || make -s "$BUILD/bench/zuul_load" "$BUILD/bin/nodepool-launcher" >/dev/null
tmp=$(mktemp -d /tmp/nodepoold-bench.XXXXXX)
pid=""
cleanup() {
	# never give up half way: ZooKeeper must be stopped whatever failed
	set +e
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	[ -n "${BENCH_ZK_DIR:-}" ] || sh tests/zkfixture.sh stop "$tmp/zk"
	[ -n "${BENCH_KEEP_LOG:-}" ] && cp "$tmp/launcher.log" "$BENCH_KEEP_LOG"
	rm -rf "$tmp"
}
trap cleanup EXIT
[ -n "${BENCH_DEBUG:-}" ] && set -x
# BENCH_ZK_DIR: reuse a running fixture (a warm JVM) instead of starting one
if [ -n "${BENCH_ZK_DIR:-}" ]; then
	. "$BENCH_ZK_DIR/env"
else
	sh tests/zkfixture.sh start "$tmp/zk"
	. "$tmp/zk/env"
fi
port=${NP_TEST_ZK_TLS##*:}
chroot=/bench-$$
/usr/bin/python3 - "$NP_TEST_ZK_TLS" "$NP_TEST_CERTS" "$chroot" <<'PY'
import sys
from kazoo.client import KazooClient
c = sys.argv[2]
k = KazooClient(hosts=sys.argv[1], use_ssl=True, verify_certs=True, ca=c + "/ca.pem",
                certfile=c + "/client.pem", keyfile=c + "/client.key")
k.start(timeout=15)
k.ensure_path(sys.argv[3])
k.stop()
PY
# the launcher's web API (upstream's default is 0.0.0.0:8005): a free
# loopback port
webport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
{
	cat <<CFG
zookeeper-servers: [{host: 127.0.0.1, port: $port, chroot: $chroot}]
zookeeper-tls: {ca: $NP_TEST_CERTS/ca.pem, cert: $NP_TEST_CERTS/client.pem, key: $NP_TEST_CERTS/client.key}
webapp: {port: $webport, listen_address: 127.0.0.1}
labels: [{name: small}]
providers:
  - name: static-bench
    driver: static
    pools:
      - name: main
        nodes:
CFG
	i=0
	while [ $i -lt "$H" ]; do
		echo "          - {name: host$i.example, labels: [small], host-key-checking: false}"
		i=$((i + 1))
	done
} >"$tmp/nodepool.yaml"
NP_DEBUG=${NP_DEBUG:-} "$BUILD/bin/nodepool-launcher" -p static-bench -c "$tmp/nodepool.yaml" >"$tmp/launcher.log" 2>&1 &
pid=$!
# wait for H ready nodes
/usr/bin/python3 - "$NP_TEST_ZK_TLS$chroot" "$NP_TEST_CERTS" "$H" <<'PY'
import json, sys, time
from kazoo.client import KazooClient
c = sys.argv[2]
k = KazooClient(hosts=sys.argv[1], use_ssl=True, verify_certs=True, ca=c + "/ca.pem",
                certfile=c + "/client.pem", keyfile=c + "/client.key")
k.start(timeout=15)
end = time.time() + 30
while time.time() < end:
    n = 0
    if k.exists("/nodepool/nodes"):
        for ch in k.get_children("/nodepool/nodes"):
            d = k.get("/nodepool/nodes/" + ch)[0]
            if d and json.loads(d)["state"] == "ready":
                n += 1
    if n >= int(sys.argv[3]):
        break
    time.sleep(0.1)
k.stop()
PY
echo "load: $N requests, concurrency $C, $H static nodes"
"$BUILD/bench/zuul_load" -z "$NP_TEST_ZK_TLS$chroot" --ca "$NP_TEST_CERTS/ca.pem" \
	--cert "$NP_TEST_CERTS/client.pem" --key "$NP_TEST_CERTS/client.key" \
	-l small -n "$N" -c "$C" --pid "$pid" --idle 5 || { tail -30 "$tmp/launcher.log"; exit 1; }
