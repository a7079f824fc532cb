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
bench_static_setup "/bench-$$" "$H"
NP_DEBUG=${NP_DEBUG:-} "$BUILD/bin/nodepool-launcher" -p static-bench -c "$tmp/nodepool.yaml" >"$tmp/launcher.log" 2>&1 &
pid=$!
bench_wait_static_ready "$H" 30
echo "load: $N requests, concurrency $C, $H static nodes"
bench_zuul_load -l small -n "$N" -c "$C" --pid "$pid" --idle 5
