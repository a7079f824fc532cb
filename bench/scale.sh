#!/bin/sh
# Issue 13's scale benchmark: memory and start-up CPU with many nodes and
# many providers.
#   bench/scale.sh [N nodes (20000)] [M static providers (10)] [H hosts each (20)]
# Starts a dedicated ZooKeeper (tests/zkfixture.sh), fills it with N node
# records (bench/scale.py says how), starts nodepoold with M static
# providers, waits until every worker is running, prints per-process and
# total RSS, PSS and user+sys CPU; then plays Zuul for BENCH_ROUNDS (3) rounds
# of 2*M node requests (submit, accept, return, as Zuul's code does) and
# prints them again, 5 s after; and stops everything it started, by pid.
# BENCH_ZK_DIR: reuse a running fixture instead of starting one.
# BENCH_WEB_READ=1: at the end, one /node-list from nodepool-web (which
# reads its view for it) and the table again, 5 s later.
#
# BENCH_RESTART=1: after start-up, restart ZooKeeper (1 s down, same data
# and ports) and print each worker's reconnect and re-sync time; the load
# phase and its table come after it.
# Measured (release build, 2-core shared VM, 2026-11-24; RSS counts every
# shared library page in every process that maps it, PSS shares them out):
#   10 x 20,000   main 0f7c320 (session 3's end): RSS 305-315 MiB, PSS 174-190.
#                 main 728ebcb: RSS 138 MiB: nodepoold 3.3, workers 11.8-12.2
#                 (anonymous 4.7-5.1, file 7.0), nodepool-web 16.3 (9.4, 6.9);
#                 PSS 66 MiB; start-up CPU 12.1 s; all running after 10 s.
#                 Step by step: compact foreign summaries and web views 288,
#                 one recursive watch per cache 205, optional libraries
#                 loaded on first use 138.
#   10 x 200      (no foreign node: the per-process floor) RSS 97 MiB, PSS 25;
#                 a worker 8.5 (anonymous 1.5, file 7.0).
#   1 x 1,000     main 0f7c320: RSS 31.7, PSS 11.2; main 728ebcb: RSS 20.3
#                 (nodepoold 2.7, worker 8.8, nodepool-web 8.8), PSS 9.2.
#   10 x 20,000   main of session 5 (start-up trim, 64-byte cache entries):
#                 after start-up RSS 84.2 MiB (workers 7.1-7.5: anonymous
#                 4.0-4.4, file 3.0-3.2; nodepool-web 8.9; nodepoold 2.4),
#                 PSS 52.5; after serving 60 requests (BENCH_ROUNDS, the
#                 default 3) RSS 98.1 (workers 8.3-8.7, file 4.2-4.3 as the
#                 serving code comes back; web 11.1), PSS 53.5. With
#                 NODEPOOLD_NO_MEM_TRIM=1: RSS 130.2 / 130.5, PSS 56.5 / 58.1.
#                 (The file-page part of that trim is gone since issue 23:
#                 unsafe for swapped-out relocated pages, and worth only
#                 ~5 MiB of PSS; RSS figures above with "trim" include it.)
#   10 x 200      RSS 53.3 after start-up, 66.0 after serving; PSS 20.6 / 22.0.
#   1 x 1,000     RSS 9.9 after start-up, 13.2 after serving; PSS 5.3 / 5.9.
#   Restart, 10 x 20,000 (BENCH_RESTART=1): on main before the catch-up,
#                 reconnected 260-600 ms after the server served again but
#                 re-synced only after 4.4-10.9 s (a stat read per cached
#                 child). With the catch-up (SetWatches from the zxid held
#                 since the first lost connection): reconnected 277-362 ms,
#                 re-synced 1,187-1,279 ms, 1.0 s of CPU in all; then,
#                 after serving 60 requests, RSS 99.5 MiB, PSS 56.6 (without
#                 the trim after a re-sync: 116.7 right after it).
#   10 x 20,000, issue 25 (nodepool-web's view of nodes and requests
#                 asleep until a listing asks; BENCH_WEB_READ=1 asks for
#                 one /node-list at the end): before (5980ff7) nodepool-web
#                 PSS 12.5-12.7 MiB after start-up and after serving, 1.4-1.5
#                 s of start-up CPU; then 93.8 after one /node-list (3.6 s to
#                 answer). After: 2.1-2.2 MiB and 0.03 s of CPU (nothing
#                 read: no session of the view yet), total PSS 48.5-49.5
#                 against 58.8-59.1; after one /node-list 24.9 (answered in
#                 5.1 s: the view's session, every record read, the listing;
#                 the trim after that first read also returns the
#                 listing's buffers).
# What a worker still holds per foreign node (20,000 nodes): the cache entry
# (40 B + name: a 64-byte malloc chunk) and its slot in the cache's table
# (11-21 B), no watch (one recursive watch per cache); its summary is
# shared with every equal unallocated node (0 B of its own) or 32 B with
# overhead when allocated (nodesum.h). nodepool-web holds 140-300 B per
# record for what its listings show (nodeview.h) beside the same entry.
set -eu
# as root: our daemons refuse that unless told (lib/core/privsep.h)
[ "$(id -u)" != 0 ] || export NODEPOOL_ALLOW_ROOT=${NODEPOOL_ALLOW_ROOT:-1}
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
