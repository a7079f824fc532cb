#!/bin/sh
# `make demo`: the main job, end to end on this machine.
#   1. a private ZooKeeper with mutual TLS (tests/zkfixture.sh)
#   2. two real sshd on loopback ports: the static hosts
#   3. nodepoold with a static provider of those hosts (host keys scanned)
#   4. a requester playing Zuul's part: request -> fulfilled -> lock ->
#      in-use -> used -> node back to ready, each step printed
# With CLOUD=openstack (`make demo CLOUD=openstack`), steps 2 and 3 are
# instead the OpenStack simulator (tests/sim/openstack: Keystone, Nova,
# Glance, Neutron, Cinder on a loopback port) and nodepoold with an
# openstack provider pointed at it through clouds.yaml (min-ready 2): the
# nodes are servers booted through the Nova API, and a used node's server
# is deleted and replaced.
# Everything started here is stopped here, by pid.
set -eu
# as root: our daemons refuse that unless told (lib/core/privsep.h)
[ "$(id -u)" != 0 ] || export NODEPOOL_ALLOW_ROOT=${NODEPOOL_ALLOW_ROOT:-1}
BUILD=${BUILD:-build}
CLOUD=${CLOUD:-static}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
tmp=$(mktemp -d /tmp/nodepoold-demo.XXXXXX)
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	for p in $pids; do wait "$p" 2>/dev/null || true; done
	sh tests/sim/openstack/ossim.sh stop "$tmp/sim" || true
	sh tests/sshd-fixture.sh stop "$tmp/ssh1" || true
	sh tests/sshd-fixture.sh stop "$tmp/ssh2" || true
	sh tests/zkfixture.sh stop "$tmp/zk" || true
	[ -n "${NP_KEEP_TMP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== starting ZooKeeper (TLS) on loopback"
sh tests/zkfixture.sh start "$tmp/zk"
. "$tmp/zk/env"
tlsport=${NP_TEST_ZK_TLS##*:}
/usr/bin/python3 - "$NP_TEST_ZK_TLS" "$NP_TEST_CERTS" <<'PY'
import sys
from kazoo.client import KazooClient
c = sys.argv[2]
k = KazooClient(hosts=sys.argv[1], use_ssl=True, verify_certs=True, ca=c + "/ca.pem",
                certfile=c + "/client.pem", keyfile=c + "/client.key")
k.start(timeout=15)
k.ensure_path("/nodepool-demo")
k.stop()
PY
provider=static-demo
# the web API, nodepool-web's or a lone launcher's (upstream: 0.0.0.0:8005): a free
# loopback port
webport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
if [ "$CLOUD" = openstack ]; then
	echo "== starting the OpenStack simulator (cloud demo, region RegionOne, 1 s boot)"
	sh tests/sim/openstack/ossim.sh start "$tmp/sim" --cloud demo --regions RegionOne \
		--boot-delay 1
	. "$tmp/sim/env"
	export OS_CLIENT_CONFIG_FILE
	echo "== clouds.yaml ($OS_CLIENT_CONFIG_FILE)"
	sed 's/^/   /' "$OS_CLIENT_CONFIG_FILE"
	provider=demo-cloud
	cat >"$tmp/nodepool.yaml" <<CFG
zookeeper-servers:
  - host: 127.0.0.1
    port: $tlsport
    chroot: /nodepool-demo
zookeeper-tls:
  ca: $NP_TEST_CERTS/ca.pem
  cert: $NP_TEST_CERTS/client.pem
  key: $NP_TEST_CERTS/client.key
webapp: {port: $webport, listen_address: 127.0.0.1}
labels:
  - name: ubuntu-jammy
    min-ready: 2
providers:
  - name: demo-cloud
    cloud: demo
    region-name: RegionOne
    rate: 0.01
    cloud-images:
      - name: cirros
    pools:
      - name: main
        max-servers: 4
        # the simulator's addresses have no sshd behind them
        host-key-checking: false
        labels:
          - name: ubuntu-jammy
            cloud-image: cirros
            min-ram: 1024
nodepoold:
  control-socket: $tmp/nodepoold.sock
  pid-file: $tmp/nodepoold.pid
CFG
elif [ "$CLOUD" != static ]; then
	echo "CLOUD must be static (the default) or openstack" >&2
	exit 2
else
echo "== starting two sshd hosts"
p1=$(sh tests/sshd-fixture.sh start "$tmp/ssh1")
p2=$(sh tests/sshd-fixture.sh start "$tmp/ssh2")
key1=$(grep ed25519 "$tmp/ssh1/host_keys")
cat >"$tmp/nodepool.yaml" <<CFG
zookeeper-servers:
  - host: 127.0.0.1
    port: $tlsport
    chroot: /nodepool-demo
zookeeper-tls:
  ca: $NP_TEST_CERTS/ca.pem
  cert: $NP_TEST_CERTS/client.pem
  key: $NP_TEST_CERTS/client.key
webapp: {port: $webport, listen_address: 127.0.0.1}
labels:
  - name: ubuntu-jammy
providers:
  - name: static-demo
    driver: static
    pools:
      - name: main
        nodes:
          - name: 127.0.0.1
            labels: [ubuntu-jammy]
            connection-port: $p1
            host-key: "$key1"
            timeout: 5
          - name: 127.0.0.1
            labels: [ubuntu-jammy]
            connection-port: $p2
            max-parallel-jobs: 2
nodepoold:
  control-socket: $tmp/nodepoold.sock
  pid-file: $tmp/nodepoold.pid
CFG
fi
echo "== nodepool.yaml"
sed 's/^/   /' "$tmp/nodepool.yaml"
if [ -x "$BUILD/bin/nodepoold" ]; then
	echo "== starting nodepoold"
	"$BUILD/bin/nodepoold" -f -c "$tmp/nodepool.yaml" >"$tmp/nodepoold.log" 2>&1 &
else
	echo "== starting nodepool-launcher ($provider)"
	"$BUILD/bin/nodepool-launcher" -p "$provider" -c "$tmp/nodepool.yaml" >"$tmp/nodepoold.log" 2>&1 &
fi
pids="$!"
echo "== requester playing Zuul"
if ! /usr/bin/python3 tests/demo_requester.py "127.0.0.1:$tlsport/nodepool-demo" \
	"$NP_TEST_CERTS" ubuntu-jammy 3; then
	echo "== demo FAILED; daemon log:"
	cat "$tmp/nodepoold.log"
	exit 1
fi
if [ -x "$BUILD/bin/nodepoolctl" ]; then
	echo "== nodepoolctl status"
	"$BUILD/bin/nodepoolctl" -s "$tmp/nodepoold.sock" status || true
fi
if [ "$CLOUD" = openstack ]; then
	echo "== the simulated cloud's servers (Nova, via the simulator's control API)"
	/usr/bin/python3 - "$OSSIM_CONTROL" <<'PY'
import json, sys, urllib.request
for s in json.load(urllib.request.urlopen(sys.argv[1] + "/servers"))["servers"]:
    addrs = [a["addr"] for net in s["addresses"].values() for a in net]
    print("   %s %-14s %-7s %s node %s" % (s["id"], s["name"], s["status"], ",".join(addrs),
                                           s["metadata"].get("nodepool_node_id")))
PY
fi
echo "== daemon log (last lines)"
tail -15 "$tmp/nodepoold.log" | sed 's/^/   /'
