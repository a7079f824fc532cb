#!/bin/sh
# Issue 20's benchmark: Zuul-like load against the gce driver and the GCE
# simulator (tests/sim/gce), i.e. the adapter's API economy.
#
#   bench/gce_load.sh [N requests] [C concurrency] [BOOT seconds] [RATE calls/s]
#
# Starts a private ZooKeeper (tests/zkfixture.sh), an sshd on loopback (the
# instances' address: upstream's gce schema has no host-key-checking, so
# every node's host keys are scanned), the GCE simulator (instances STAGING
# for BOOT seconds, over HTTPS, its token endpoint checking the JWTs), one
# launcher serving a gce provider at `rate-limit` RATE (Compute API calls
# per second) and runs bench/zuul_load (N requests, C in flight; each
# fulfilled request's node is locked, used and released, then deleted).
# Stops everything it started, by pid. Prints throughput, latency, the
# launcher's peak RSS and CPU, and the simulator's API call counts: calls
# per launched node, by method.
#
# Environment: BENCH_WARMUP=M runs M requests first, unmeasured (0 skips,
# the default); BUILD picks the build.
set -eu
N=${1:-500}
C=${2:-50}
BOOT=${3:-1}
RATE=${4:-50}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init nodepoold-bench
bench_cleanup_hook() {
	sh tests/sim/gce/gcesim.sh stop "$tmp/gce"
	sh tests/sshd-fixture.sh stop "$tmp/sshd"
}
bench_zk_start
sshport=$(sh tests/sshd-fixture.sh start "$tmp/sshd")
echo '{"project": "bench-project", "boot_delay": '"$BOOT"', "terminate_delay": 0.5,
 "interface_ip": "127.0.0.1", "quotas": {"us-central1": {"CPUS": 100000, "INSTANCES": 100000}}}' \
	>"$tmp/gce.json"
sh tests/sim/gce/gcesim.sh start "$tmp/gce" --config "$tmp/gce.json"
. "$tmp/gce/env"
export GOOGLE_APPLICATION_CREDENTIALS CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE \
	CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE
export HOME="$tmp" # no ~/.config/gcloud of the machine's
bench_zk_mkdir /bench
{
	bench_config_head
	cat <<CFG
labels: [{name: small}]
providers:
  - name: gce-bench
    driver: gce
    project: bench-project
    region: us-central1
    zone: us-central1-a
    rate-limit: $RATE
    cloud-images:
      - {name: debian, image-project: debian-cloud, image-family: debian-12, username: zuul,
         connection-port: $sshport}
    pools:
      - name: main
        max-servers: 1000
        use-internal-ip: true
        labels:
          - {name: small, cloud-image: debian, instance-type: e2-small}
CFG
} >"$tmp/nodepool.yaml"
"$BUILD/bin/nodepool-launcher" -p gce-bench -c "$tmp/nodepool.yaml" >"$tmp/launcher.log" 2>&1 &
pid=$!
bench_wait_pool
bench_warmup 0 "$C" small
bench_dump
curl -s -X DELETE "$GCESIM_CONTROL/calls" >/dev/null
echo "load: $N requests, concurrency $C, simulated GCE boot ${BOOT}s, rate-limit ${RATE} calls/s"
bench_zuul_load -l small -n "$N" -c "$C" --pid "$pid" --idle 2
bench_dump
bench_lag
# let the last deletes finish, then count the calls
i=0
while [ $i -lt 100 ]; do
	left=$(curl -s "$GCESIM_CONTROL/state" | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["instances"]))')
	[ "$left" = 0 ] && break
	i=$((i + 1))
	sleep 0.2
done
curl -s "$GCESIM_CONTROL/calls" | /usr/bin/python3 -c '
import json, sys
n = int(sys.argv[1])
c = json.load(sys.stdin)["calls"]
tot = sum(v for k, v in c.items() if k.startswith("compute."))
print("Compute API calls: %d for %d nodes launched and deleted: %.2f per node" % (tot, n, tot / n))
for k, v in sorted(c.items(), key=lambda kv: -kv[1]):
    print("  %-36s %6d  %.3f/node" % (k, v, v / n))
' "$N"
