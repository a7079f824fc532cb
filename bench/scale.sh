#!/bin/sh
# Issue 13's scale benchmark: memory and start-up CPU with many nodes and
# many providers.
#   bench/scale.sh [N nodes (20000)] [M static providers (10)] [H hosts each (20)]
# Starts a dedicated ZooKeeper (tests/zkfixture.sh), fills it with N node
# records (bench/scale.py says how), starts nodepoold with M static
# providers, waits until every worker is running, prints per-process and
# total RSS and user+sys CPU, and stops everything it started, by pid.
# BENCH_ZK_DIR: reuse a running fixture instead of starting one.
#
# Measured (2-core shared VM, 2026-11-24): see MEASURED below.
# What a worker still holds per foreign node (20,000 nodes): the cache entry
# (72 B + name: a 96-byte malloc chunk) and its slot in the cache's table
# (11-21 B), no watch (one recursive watch per cache); its summary is
# shared with every equal unallocated node (0 B of its own) or 32 B with
# overhead when allocated (nodesum.h). nodepool-web holds 140-300 B per
# record for what its listings show (nodeview.h) beside the same entry.
set -eu
N=${1:-20000}
M=${2:-10}
H=${3:-20}
BUILD=${BUILD:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ -n "${BENCH_NOMAKE:-}" ] || make -s "$BUILD/bin/nodepoold" "$BUILD/bin/nodepool-launcher" \
	"$BUILD/bin/nodepoolctl" >/dev/null
tmp=$(mktemp -d /tmp/nodepoold-scale.XXXXXX)
cleanup() {
	set +e
	[ -n "${BENCH_ZK_DIR:-}" ] || sh tests/zkfixture.sh stop "$tmp/zk"
	rm -rf "$tmp"
}
trap cleanup EXIT
if [ -n "${BENCH_ZK_DIR:-}" ]; then
	. "$BENCH_ZK_DIR/env"
else
	# 10 sessions watching 20,000 nodes each: more than the tests need
	NP_TEST_ZK_HEAP=${NP_TEST_ZK_HEAP:-1g} sh tests/zkfixture.sh start "$tmp/zk" >/dev/null
	. "$tmp/zk/env"
fi
/usr/bin/python3 bench/scale.py "$top/$BUILD" "$N" "$M" "$H"
