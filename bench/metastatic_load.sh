#!/bin/sh
# Issue 20's benchmark: Zuul-like load served by a metastatic provider whose
# backing nodes come from a `fake` provider with a boot delay.
#
#   bench/metastatic_load.sh [N requests] [C concurrency] [BOOT seconds]
#                            [MPJ max-parallel-jobs] [GRACE seconds]
#
# Starts a private ZooKeeper (TLS, tests/zkfixture.sh), one launcher serving
# the fake backing provider (servers boot in BOOT seconds) and one serving
# the metastatic provider (label `slice`, backing label `big`, MPJ slices per
# backing node, kept GRACE seconds after the last), runs bench/zuul_load
# against `slice` (N requests, C in flight; each fulfilled request's node is
# locked, used and released, then deleted), and stops everything it started,
# by pid. Prints throughput, latency, the peak RSS and CPU of the metastatic
# worker (first pid), the fake worker (second) and ZooKeeper (third), the
# metastatic worker's event-loop lag during the load, and its counters
# (backing requests made, backing nodes taken and returned).
#
# Environment: BENCH_WARMUP=M runs M requests first, unmeasured (default
# 200; 0 skips); BENCH_ZK=plain talks to ZooKeeper without TLS; BUILD picks
# the build.
set -eu
N=${1:-500}
C=${2:-50}
BOOT=${3:-1}
MPJ=${4:-4}
GRACE=${5:-2}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init nodepoold-bench
back=""
bench_cleanup_hook() {
	if [ -n "$back" ]; then
		kill "$back" 2>/dev/null
		wait "$back" 2>/dev/null
	fi
}
bench_zk_start
bench_zk_mkdir /bench
{
	bench_config_head
	cat <<CFG
labels: [{name: big}, {name: slice}]
providers:
  - name: back
    driver: fake
    boot-delay: $BOOT
    pools:
      - name: main
        labels: [{name: big, cores: 4, ram: 8192}]
  - name: meta
    driver: metastatic
    pools:
      - name: main
        labels:
          - {name: slice, backing-label: big, max-parallel-jobs: $MPJ, grace-time: $GRACE}
CFG
} >"$tmp/nodepool.yaml"
"$BUILD/bin/nodepool-launcher" -p back -c "$tmp/nodepool.yaml" >"$tmp/back.log" 2>&1 &
back=$!
"$BUILD/bin/nodepool-launcher" -p meta -c "$tmp/nodepool.yaml" >"$tmp/launcher.log" 2>&1 &
pid=$!
bench_wait_pool
bench_warmup 200 "$C" slice
bench_dump
echo "load: $N requests, concurrency $C, metastatic max-parallel-jobs $MPJ grace-time ${GRACE}s" \
	"over a fake cloud with boot-delay ${BOOT}s"
bench_zuul_load -l slice -n "$N" -c "$C" --pid "$pid" --pid "$back" \
	--pid "$(cat "$tmp/zk/zk.pid")" --idle 2
bench_dump
bench_lag
grep -E "metastatic: [0-9]+ backing requests" "$tmp/launcher.log" | tail -1 | sed 's/^ *//'
