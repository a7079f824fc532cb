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
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init nodepoold-bench
bench_cleanup_hook() {
	[ -z "${BENCH_KEEP_LOG:-}" ] || cp "$tmp/launcher.log" "$BENCH_KEEP_LOG"
}
# BENCH_ZK_DIR: reuse a running fixture (a warm JVM) instead of starting one
if [ -n "${BENCH_ZK_DIR:-}" ]; then
	. "$BENCH_ZK_DIR/env"
	bench_zk_vars
else
	bench_zk_start
fi
chroot=/bench-$$
bench_chroot=$chroot
bench_zk_mkdir "$chroot"
{
	bench_config_head
	cat <<CFG
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
bench_kz "$NP_TEST_ZK_TLS$chroot" "$H" <<'PY'
import json, time
k = bench_kz_client(sys.argv[1], sys.argv[2])
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
bench_zuul_load -l small -n "$N" -c "$C" --pid "$pid" --idle 5
