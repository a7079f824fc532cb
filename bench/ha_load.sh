#!/bin/sh
# Issue 22's benchmark: several launchers serving one provider.
#
#   bench/ha_load.sh [K launchers] [N requests] [C concurrency] [RATE s] [DELAY s]
#
# Starts a private ZooKeeper (TLS, tests/zkfixture.sh) and K
# nodepool-launcher processes serving the same `fake` provider (as K
# nodepoold hosts would), each with a per-launcher API `rate` of RATE
# seconds between cloud calls (upstream's meaning), so that one launcher's
# cloud calls bind its throughput; runs bench/zuul_load (N requests, C in
# flight, each node used and released), then prints throughput and latency
# (zuul_load) and, from each launcher's SIGUSR2 dump, its request-lock
# attempts and losses and its provider-lock rounds. DELAY is
# peer-takeover-delay: 2 (the default) ranks each request among the
# launchers by rendezvous hashing; 0 turns it off (every launcher tries every
# request, as upstream Nodepool's pools do).
#
# Each launcher has its own simulated cloud (the fake driver's is in the
# process): a node deleted by another launcher than the one that launched
# it leaves an instance behind in the first one's cloud (its leak cleanup
# would remove it; nothing here waits for that). Everything started is
# stopped by pid.
#
# Measured (2-core VM shared with other work, 600 requests, 60 in flight,
# rate 0.02 s): 1 launcher 22.6 req/s (p50 2.65 s, p99 2.75 s); 2: 38.3
# req/s (1.41 s, 2.44 s); 3: 49.7 req/s (0.93 s, 2.50 s). Request-lock
# attempts per fulfilled request with 3 launchers: 1.00 with the hashing,
# 4.93 without (peer-takeover-delay 0; 2356 lost races for 600 requests).
set -eu
K=${1:-1}
N=${2:-600}
C=${3:-60}
RATE=${4:-0.02}
DELAY=${5:-2}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init nodepoold-bench
pids=""
bench_cleanup_hook() {
	for p in $pids; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
}
bench_zk_start
bench_zk_mkdir /bench
i=0
while [ "$i" -lt "$K" ]; do
	{
		bench_config_head
		cat <<CFG
labels: [{name: small}]
nodepoold: {peer-takeover-delay: $DELAY}
providers:
  - name: fake-bench
    driver: fake
    rate: $RATE
    pools:
      - name: main
        labels: [{name: small, cores: 1, ram: 1024}]
CFG
	} >"$tmp/nodepool-$i.yaml"
	"$BUILD/bin/nodepool-launcher" -p fake-bench -c "$tmp/nodepool-$i.yaml" \
		>"$tmp/launcher-$i.log" 2>&1 &
	pids="$pids $!"
	i=$((i + 1))
done
bench_kz "$NP_TEST_ZK_TLS/bench" "$K" <<'PY'
import time
k = bench_kz_client(sys.argv[1], sys.argv[2])
end = time.time() + 60
while time.time() < end:
    if (k.exists("/nodepool/components/pool") and
            len(k.get_children("/nodepool/components/pool")) >= int(sys.argv[3])):
        break
    time.sleep(0.1)
else:
    sys.exit("the launchers did not all register their pools")
k.stop()
PY
echo "load: $N requests, concurrency $C, $K launcher(s), rate ${RATE}s, peer-takeover-delay ${DELAY}s"
# shellcheck disable=SC2086 # pids is a list of words
set -- $pids
bench_zuul_load -l small -n "$N" -c "$C" --pid "$1"
i=0
for p in $pids; do
	kill -USR2 "$p"
done
sleep 1
attempts=0
lost=0
for p in $pids; do
	line=$(grep "request locks:" "$tmp/launcher-$i.log" | tail -1)
	echo "launcher $i:$line"
	a=$(echo "$line" | sed -n 's/.*attempts \([0-9]*\) lost \([0-9]*\).*/\1/p')
	l=$(echo "$line" | sed -n 's/.*attempts \([0-9]*\) lost \([0-9]*\).*/\2/p')
	attempts=$((attempts + ${a:-0}))
	lost=$((lost + ${l:-0}))
	i=$((i + 1))
done
echo "request-lock attempts per fulfilled request: $attempts / $N ($lost lost races)"
