#!/bin/sh
# The long-partition scenarios of issue 27, repeated: nodepoold's fake
# provider serves Zuul's requests through a ZooKeeper-aware proxy that cuts
# the link at the node's `ready` store, at the request's fulfilment, or
# right after a fulfilment landed (its reply lost), and keeps it cut until
# the worker's session has expired; Zuul then takes what it is handed.
# Counts the handovers of nodes Zuul could not lock or that were not
# `ready` (expected: 0), N rounds per scenario within one nodepoold
# (tests/process/test_lost_writes.py, NP_LOST_SESSION_ROUNDS).
#
#   sh bench/lost_session_soak.sh [N]   (default 20; BUILD=build-address-undefined
#                                        for ASan)
# Starts its own ZooKeeper (tests/zkfixture.sh) and stops it, by pid.
set -eu
N=${1:-20}
BUILD=${BUILD:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ -x "$BUILD/bin/nodepoold" ] || { echo "build first: make" >&2; exit 1; }
tmp=$(mktemp -d /tmp/np-lost-soak.XXXXXX)
cleanup() {
	sh tests/zkfixture.sh stop "$tmp/zk" >/dev/null 2>&1 || true
	[ -n "${NP_KEEP_TMP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

sh tests/zkfixture.sh start "$tmp/zk" >/dev/null
. "$tmp/zk/env"
export NP_BUILD="$top/$BUILD" NP_LOST_SESSION_ROUNDS="$N"
rc=0
/usr/bin/python3 -m pytest -q -s -p no:cacheprovider \
	tests/process/test_lost_writes.py -k long_partition >"$tmp/out" 2>&1 || rc=$?
grep -E '^LOST-SESSION|^  (node|request) ' "$tmp/out" || true
tail -1 "$tmp/out"
awk '/^LOST-SESSION/ { r += $3; b += $5 } END {
	printf "total: %d rounds, %d handovers of unlockable or unready nodes\n", r, b }' "$tmp/out"
exit $rc
