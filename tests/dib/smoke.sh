#!/bin/sh
# make dib-smoke: a real image, end to end. Debian's diskimage-builder
# builds a tiny qcow2 (the tiny-root element: the host's busybox, no
# network, no mirror) for nodepool-builder, which uploads it to the fake
# cloud's image store; qemu-img then checks what the cloud holds. Not part
# of `make check` (root, loop devices, a few seconds of disk-image-create).
#
#   BUILD=build sh tests/dib/smoke.sh
#
# Needs: root (diskimage-builder runs sudo, losetup, mount), and the
# packages of `mk/deps.sh dib`. Starts a private ZooKeeper and one builder,
# and stops exactly those (by pid).
set -eu
# as root: our daemons refuse that unless told (lib/core/privsep.h)
[ "$(id -u)" != 0 ] || export NODEPOOL_ALLOW_ROOT=${NODEPOOL_ALLOW_ROOT:-1}
BUILD=${BUILD:-build}
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
sh mk/deps.sh dib
tmp=$(mktemp -d /tmp/nodepoold-dib-smoke.XXXXXX)
pid=""
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	sh tests/zkfixture.sh stop "$tmp/zk" >/dev/null 2>&1 || true
	[ -n "${DIB_SMOKE_KEEP:-}" ] || rm -rf "$tmp"
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
elements-dir: $top/tests/dib/elements
labels: [{name: tiny-label}]
diskimages:
  - name: tiny
    # -n: without the base element (it updates packages from a mirror)
    dib-cmd: disk-image-create -n
    elements: [tiny-root]
    build-timeout: 600
    env-vars:
      DIB_IMAGE_SIZE: "1"
      DIB_IMAGE_CACHE: $tmp/dib-cache
providers:
  - name: sim
    driver: fake
    image-dir: $tmp/store
    diskimages: [{name: tiny}]
    pools: [{name: main, labels: [{name: tiny-label, diskimage: tiny}]}]
YAML
start=$(date +%s)
"$BUILD/bin/nodepool-builder" -c "$tmp/nodepool.yaml" --interval 1 >"$tmp/builder.log" 2>&1 &
pid=$!
ok=""
for _ in $(seq 1 600); do
	if grep -q " in sim is ready" "$tmp/builder.log"; then
		ok=1
		break
	fi
	if grep -q "build .* failed" "$tmp/builder.log"; then
		break
	fi
	kill -0 "$pid" 2>/dev/null || break
	sleep 1
done
if [ -z "$ok" ]; then
	echo "dib-smoke: FAILED" >&2
	tail -30 "$tmp/builder.log" >&2
	for f in "$tmp"/logs/*.log; do
		[ -f "$f" ] && tail -30 "$f" >&2
	done
	exit 1
fi
end=$(date +%s)
img=$(ls "$tmp"/store/*.qcow2)
sum=$(sha256sum "$img" | cut -d' ' -f1)
built=$(ls "$tmp"/images/tiny-*.qcow2)
want=$(cut -d' ' -f1 "$built.sha256")
qemu-img info "$img" | grep -q "file format: qcow2"
[ "$sum" = "$want" ]
echo "dib-smoke: OK: disk-image-create built $(basename "$built") ($(stat -c %s "$built") bytes," \
	"qcow2), uploaded to the fake cloud as $(basename "$img"), sha256 checked," \
	"$((end - start)) s from builder start to ready upload"
grep "Exit code" "$tmp"/logs/*.log
