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
# Measured (2-core shared VM, 2026-11-24; RSS counts the shared library and
# binary pages, about 12 MiB, in every process, PSS shares them out):
#   10 x 20,000   main a9b3c9e: RSS 692 MiB (workers 59-62, nodepool-web 80),
#                 PSS 565 MiB, CPU 18.3 s, all running after 47 s.
#                 i13-memory2: RSS 314 MiB (workers 26-28, of which 14-15
#                 anonymous; nodepool-web 33), PSS 186 MiB, CPU 15.9 s,
#                 all running after 24 s.
#                 i13-compact (foreign summaries shared, web keeps views):
#                 RSS 288 MiB (workers 24-26, anonymous 12-13; nodepool-web
#                 27, anonymous 20), PSS 161 MiB.
#   1 x 1,000     main: RSS 35.5 MiB, PSS 16.3; i13-memory2: RSS 31.7, PSS 11.2;
#                 i13-compact: RSS 31.6, PSS 10.7.
#   i13-slim (libcurl, libxml2, libssh loaded on first use; nodepoold
#   without OpenSSL), measured before the merge of i13-compact:
#   10 x 20,000   RSS 246 MiB (main a02abb6: 305-315): nodepoold 3.2 (7.1),
#                 workers 20-21.3 of which 7.0 file-backed (12.4), nodepool-web
#                 32.7 (6.9 file-backed, unchanged); PSS 173 MiB.
#   1 x 1,000     RSS 21.6 MiB (32.0), PSS 8.8 (17.0); worker 9.3 (15.6).
#   i13-slim merged with i13-compact (main fcfaf20): 10 x 20,000 RSS 223 MiB
#                 (workers 18-19.5, 7.0 file-backed; nodepool-web 26.9,
#                 nodepoold 3.3), PSS 151 MiB; 1 x 1,000 RSS 21.3, PSS 10.0.
# What a worker still holds per foreign node (massif, 20,000 nodes): the
# cache entry (~190 B), the C client's data watch (~125 B) and malloc's
# overhead on those; its summary is shared with every equal unallocated
# node (0 B of its own) or 32 B with overhead when allocated (nodesum.h).
# nodepool-web holds 140-300 B per record for what its listings show
# (nodeview.h) beside the same cache entry and watches.
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
