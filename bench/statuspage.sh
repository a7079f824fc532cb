#!/bin/sh
# Issue 26's measure: how long the status page (nodepool-web's `/`) takes
# to render in a browser with N node records (default 20,000).
#   bench/statuspage.sh [N nodes (20000)] [LOADS (5)]
# Starts a dedicated ZooKeeper (tests/zkfixture.sh), fills it with N node
# records shaped as bench/scale.sh's (bench/scale.py's fill: upstream's
# and Zuul's records, 60% in-use, 20% ready, 10% used, 5% hold, 5%
# building, over five providers and seven labels), starts nodepool-web on
# its own (-c nodepool.yaml), opens the page LOADS times in headless
# Chromium (tests/process/browser.py) and prints, from the browser's
# Performance API (Navigation Timing): the server's answer (requestStart
# -> responseStart), the render (responseStart -> domContentLoadedEventEnd:
# parsing the HTML and its inline CSS and running the script's first draw)
# and the script's redraw from /status-summary (performance.now() around
# draw()). Target: render under 200 ms.
# BENCH_ZK_DIR: reuse a running fixture instead of starting one.
#
# Measured (release build, 2-core VM shared with other jobs, Chromium 156,
# 2026-11-28, 20,000 nodes, 1,000 of them held; median of 5 loads):
#   server 45.6 ms, render 51.0 ms (46.7-80.3), the script's chart 0.6 ms,
#   a redraw of every panel from /status-summary 63.7 ms; 50 KB of HTML.
#   Before held nodes were capped at the 50 soonest to expire and the page
#   stopped embedding the whole summary: 445 KB, render 993 ms.
set -eu
N=${1:-20000}
LOADS=${2:-5}
BUILD=${BUILD:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ -n "${BENCH_NOMAKE:-}" ] || make -s "$BUILD/bin/nodepool-web" >/dev/null
tmp=$(mktemp -d /tmp/nodepoold-pagebench.XXXXXX)
cleanup() {
	set +e
	[ -n "${BENCH_ZK_DIR:-}" ] || sh tests/zkfixture.sh stop "$tmp/zk"
	rm -rf "$tmp"
}
trap cleanup EXIT
if [ -n "${BENCH_ZK_DIR:-}" ]; then
	. "$BENCH_ZK_DIR/env"
else
	NP_TEST_ZK_HEAP=${NP_TEST_ZK_HEAP:-1g} sh tests/zkfixture.sh start "$tmp/zk" >/dev/null
	. "$tmp/zk/env"
fi
export NP_TEST_ZK_TLS NP_TEST_CERTS
/usr/bin/python3 bench/statuspage.py "$top/$BUILD" "$N" "$LOADS"
