#!/bin/sh
# How long a provider's worker is gone after kill -9, and what the processes
# cost at rest. Starts a private ZooKeeper (TLS) and nodepoold with two
# static providers (hosts that need no ssh), then:
#   - idle RSS of nodepoold and of one worker (VmRSS, after a quiet second);
#   - N times: kill -9 one worker and time until nodepoolctl shows its
#     replacement running (READY: driver up, ZooKeeper session live), and
#     the spawn-to-READY time nodepoold logs for it.
# Everything started here is stopped here, by pid.
#
#   sh bench/restart_time.sh [N]      (BUILD=build-address-undefined for ASan)
set -eu
# as root: our daemons refuse that unless told (lib/core/privsep.h)
[ "$(id -u)" != 0 ] || export NODEPOOL_ALLOW_ROOT=${NODEPOOL_ALLOW_ROOT:-1}
N=${1:-10}
BUILD=${BUILD:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bin="$top/$BUILD/bin"
[ -x "$bin/nodepoold" ] || { echo "build first: make" >&2; exit 1; }
tmp=$(mktemp -d /tmp/np-restart.XXXXXX)
npd=""
cleanup() {
	[ -n "$npd" ] && kill "$npd" 2>/dev/null && wait "$npd" 2>/dev/null || true
	sh tests/zkfixture.sh stop "$tmp/zk" >/dev/null 2>&1 || true
	[ -n "${NP_KEEP_TMP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

sh tests/zkfixture.sh start "$tmp/zk" >/dev/null
. "$tmp/zk/env"
/usr/bin/python3 - "$NP_TEST_ZK_TLS" "$NP_TEST_CERTS" <<'PY'
import sys
from kazoo.client import KazooClient
c = sys.argv[2]
k = KazooClient(hosts=sys.argv[1], use_ssl=True, verify_certs=True, ca=c + "/ca.pem",
                certfile=c + "/client.pem", keyfile=c + "/client.key")
k.start(timeout=15)
k.ensure_path("/bench")
k.stop()
PY
cat >"$tmp/nodepool.yaml" <<CFG
zookeeper-servers:
  - host: 127.0.0.1
    port: ${NP_TEST_ZK_TLS##*:}
    chroot: /bench
zookeeper-tls:
  ca: $NP_TEST_CERTS/ca.pem
  cert: $NP_TEST_CERTS/client.pem
  key: $NP_TEST_CERTS/client.key
labels:
  - name: small
providers:
  - name: bench-a
    driver: static
    pools:
      - name: main
        nodes:
          - {name: a1, labels: [small], host-key-checking: false}
  - name: bench-b
    driver: static
    pools:
      - name: main
        nodes:
          - {name: b1, labels: [small], host-key-checking: false}
nodepoold:
  control-socket: $tmp/ctl.sock
  pid-file: $tmp/npd.pid
  restart-backoff-max: 1
CFG
"$bin/nodepoold" -f -c "$tmp/nodepool.yaml" >"$tmp/npd.log" 2>&1 &
npd=$!

now() { date +%s.%N; }
# "PID STATE" of a worker from nodepoolctl's table
worker() { "$bin/nodepoolctl" -s "$tmp/ctl.sock" status 2>/dev/null | awk -v n="$1" '$1 == n {print $3, $4}'; }
wait_running() { # name [not-pid]
	while :; do
		set -- "$1" "${2:-0}" $(worker "$1")
		if [ "${4:-}" = running ] && [ "$3" != "$2" ] && [ "$3" != 0 ]; then
			echo "$3"
			return
		fi
		kill -0 "$npd" 2>/dev/null || { echo "nodepoold died" >&2; cat "$tmp/npd.log" >&2; exit 1; }
	done
}
rss() { awk '/^VmRSS/ {r = $2} /^RssAnon/ {a = $2} END {printf "%s (anon %s)", r, a}' "/proc/$1/status"; }

pid=$(wait_running bench-a)
wait_running bench-b >/dev/null
sleep 1
echo "idle RSS: nodepoold $(rss "$npd") KiB, worker $(rss "$pid") KiB (bench-a)"

i=0
: >"$tmp/times"
while [ $i -lt "$N" ]; do
	t0=$(now)
	kill -9 "$pid"
	pid=$(wait_running bench-a "$pid")
	t1=$(now)
	echo "$t0 $t1" | awk '{printf "%.3f\n", $2 - $1}' >>"$tmp/times"
	i=$((i + 1))
	# a run of restart-backoff-max (1 s) counts as a good one: the next
	# kill is a first failure again, restarted without back-off
	sleep 1.2
done
echo "kill -9 -> replacement running (READY), as nodepoolctl sees it, over $N kills:"
sort -n "$tmp/times" | awk '{v[NR] = $1; s += $1} END {
	printf "  min %.3f s, median %.3f s, mean %.3f s, max %.3f s\n",
	    v[1], v[int((NR + 1) / 2)], s / NR, v[NR]}'
echo "spawn -> READY, as nodepoold logs it:"
grep "provider bench-a: ready" "$tmp/npd.log" | tail -n "$N" |
	sed -n 's/.*, \([0-9.]*\) s after start/\1/p' | sort -n | awk '{v[NR] = $1; s += $1} END {
	printf "  min %.3f s, median %.3f s, mean %.3f s, max %.3f s\n",
	    v[1], v[int((NR + 1) / 2)], s / NR, v[NR]}'
echo "nodepoold RSS after the kills: $(rss "$npd") KiB"
