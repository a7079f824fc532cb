#!/bin/sh
# Issue 12's benchmark: the builder's memory while it uploads a large
# image, and build-to-ready time.
#
#   bench/builder_upload.sh [SIZE_MIB]   (default 1024: a 1 GiB image)
#
# Starts a private ZooKeeper (tests/zkfixture.sh) and one nodepool-builder
# (1 build worker, 1 upload worker) for one diskimage built by the
# stand-in dib-cmd (tests/dib/fake-dib-cmd, FAKE_DIB_SIZE bytes) and one
# fake provider whose image store (image-dir) takes the upload: the fake
# adapter streams the file in 1 MiB steps and checks its sha256. Prints
# the time from the builder's start to a ready build and to a ready
# upload, and the peak RSS (VmHWM) of the builder and of each worker; the
# upload worker's is the one that held the image's bytes in flight.
# Stops everything it started, by pid. BUILD picks the build.
set -eu
# as root: our daemons refuse that unless told (lib/core/privsep.h)
[ "$(id -u)" != 0 ] || export NODEPOOL_ALLOW_ROOT=${NODEPOOL_ALLOW_ROOT:-1}
SIZE=${1:-1024}
BUILD=${BUILD:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ -n "${BENCH_NOMAKE:-}" ] || make -s "$BUILD/bin/nodepool-builder" >/dev/null
tmp=$(mktemp -d /tmp/nodepoold-bench.XXXXXX)
pid=""
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	sh tests/zkfixture.sh stop "$tmp/zk"
	[ -n "${BENCH_KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
sh tests/zkfixture.sh start "$tmp/zk" >/dev/null
. "$tmp/zk/env"
port=${NP_TEST_ZK_TLS##*:}
mkdir -p "$tmp/store"
cat >"$tmp/nodepool.yaml" <<YAML
zookeeper-servers: [{host: 127.0.0.1, port: $port}]
zookeeper-tls: {ca: $NP_TEST_CERTS/ca.pem, cert: $NP_TEST_CERTS/client.pem, key: $NP_TEST_CERTS/client.key}
images-dir: $tmp/images
build-log-dir: $tmp/logs
labels: [{name: big-label}]
diskimages:
  - name: big
    dib-cmd: $top/tests/dib/fake-dib-cmd
    elements: [vm]
    env-vars: {FAKE_DIB_SIZE: "$((SIZE * 1024 * 1024))"}
providers:
  - name: sim
    driver: fake
    image-dir: $tmp/store
    diskimages: [{name: big}]
    pools: [{name: main, labels: [{name: big-label, diskimage: big}]}]
YAML
start=$(date +%s.%N)
"$BUILD/bin/nodepool-builder" -c "$tmp/nodepool.yaml" --build-workers 1 --upload-workers 1 \
	--interval 0.2 >"$tmp/builder.log" 2>&1 &
pid=$!
peak() { awk '/VmHWM/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
built="" ; ready=""
for _ in $(seq 1 3000); do
	if [ -z "$built" ] && grep -q "build .* is ready" "$tmp/builder.log"; then
		built=$(date +%s.%N)
	fi
	if grep -q " in sim is ready" "$tmp/builder.log"; then
		ready=$(date +%s.%N)
		break
	fi
	sleep 0.05
done
[ -n "$ready" ] || { echo "no upload within 150 s"; tail "$tmp/builder.log"; exit 1; }
echo "image size:            $SIZE MiB"
echo "start to ready build:  $(awk "BEGIN {printf \"%.3f\", $built - $start}") s"
echo "start to ready upload: $(awk "BEGIN {printf \"%.3f\", $ready - $start}") s"
echo "builder peak RSS:      $(peak "$pid") KiB"
for c in $(ps -o pid= --ppid "$pid"); do
	kind=$(tr '\0' ' ' <"/proc/$c/cmdline" | sed 's/.*--worker \([a-z]*\).*/\1/')
	echo "$kind worker peak RSS: $(peak "$c") KiB"
done
ls -l "$tmp/store" | sed -n '2,$p' | awk '{print "stored: " $5 " bytes " $9}'
