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
# With CLOUD=azure, the Azure simulator (tests/sim/azure: ARM and tokens over
# HTTPS) and an azure provider whose auth-path names it: the nodes are VMs
# created through Azure Resource Manager, each with its NIC and public IP.
# CLOUD=ibmvpc does the same against the IBM Cloud VPC simulator
# (tests/sim/ibmvpc) with an ibmvpc provider.
# With CLOUD=metastatic, the two sshd hosts back a metastatic provider
# (drivers/metastatic): each host is sliced into two nodes (min-ready 1),
# scanned over the host's own sshd.
# With CLOUD=gce, the Compute Engine simulator (tests/sim/gce: the Compute
# API and Google's OAuth2 token endpoint over HTTPS) and a gce provider in
# upstream's schema, credentials from GOOGLE_APPLICATION_CREDENTIALS (the
# simulator's service account key); host keys are scanned from an sshd on
# loopback, the instances' address.
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
	sh tests/sim/azure/azuresim.sh stop "$tmp/azsim" || true
	sh tests/sim/ibmvpc/ibmvpcsim.sh stop "$tmp/ibmsim" || true
	sh tests/sim/gce/gcesim.sh stop "$tmp/gcesim" || true
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
elif [ "$CLOUD" = azure ]; then
	echo "== starting the Azure simulator (ARM + tokens over HTTPS, 1 s boot)"
	sh tests/sim/azure/azuresim.sh start "$tmp/azsim" --boot-delay 1
	. "$tmp/azsim/env"
	export REQUESTS_CA_BUNDLE
	echo "== the service principal's auth file ($AZURE_AUTH_LOCATION)"
	sed 's/^/   /' "$AZURE_AUTH_LOCATION"
	provider=demo-azure
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
  - name: demo-azure
    driver: azure
    auth-path: $AZURE_AUTH_LOCATION
    location: centralus
    resource-group: nodepool
    resource-group-location: centralus
    network: NodePool
    rate: 20
    cloud-images:
      - name: jammy
        username: zuul
        image-reference:
          publisher: Canonical
          offer: 0001-com-ubuntu-server-jammy
          sku: 22_04-lts-gen2
          version: latest
    pools:
      - name: main
        max-servers: 4
        # the simulator's addresses have no sshd behind them
        host-key-checking: false
        labels:
          - name: ubuntu-jammy
            cloud-image: jammy
            hardware-profile:
              vm-size: Standard_B2s
            tags:
              team: demo
nodepoold:
  control-socket: $tmp/nodepoold.sock
  pid-file: $tmp/nodepoold.pid
CFG
elif [ "$CLOUD" = ibmvpc ]; then
	# IBM Cloud VPC: the simulator (tests/sim/ibmvpc, HTTPS) and an ibmvpc
	# provider in upstream's schema, its credentials-file pointing at it
	echo "== starting the IBM Cloud VPC simulator (region us-south, 1 s boot)"
	sh tests/sim/ibmvpc/ibmvpcsim.sh start "$tmp/ibmsim" --boot-delay 1
	. "$tmp/ibmsim/env"
	export REQUESTS_CA_BUNDLE
	echo "== ibm-credentials.env"
	sed 's/^/   /; s/APIKEY=.*/APIKEY=.../' "$tmp/ibmsim/ibm-credentials.env"
	provider=ibm-demo
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
  - name: ibm-demo
    driver: ibmvpc
    vpc: nodepool
    region: us-south
    subnet: sn-nodepool
    rate: 100
    credentials-file: $tmp/ibmsim/ibm-credentials.env
    cloud-images:
      - name: debian
        username: zuul
        keys: [testuser]
        image-filter:
          operating-system: {family: "Debian GNU/Linux"}
    pools:
      - name: main
        zone: us-south-1
        max-servers: 4
        public-ipv4: true
        # the simulator's addresses have no sshd behind them
        host-key-checking: false
        labels:
          - name: ubuntu-jammy
            cloud-image: debian
            profile: cx2-2x4
nodepoold:
  control-socket: $tmp/nodepoold.sock
  pid-file: $tmp/nodepoold.pid
CFG
elif [ "$CLOUD" = gce ]; then
	echo "== starting an sshd (the instances' address) and the GCE simulator (1 s boot)"
	sshport=$(sh tests/sshd-fixture.sh start "$tmp/ssh1")
	echo '{"project": "demo-project", "interface_ip": "127.0.0.1", "boot_delay": 1}' \
		>"$tmp/gcesim.json"
	sh tests/sim/gce/gcesim.sh start "$tmp/gcesim" --config "$tmp/gcesim.json"
	. "$tmp/gcesim/env"
	export GOOGLE_APPLICATION_CREDENTIALS CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE \
		CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE
	echo "== credentials: $GOOGLE_APPLICATION_CREDENTIALS (token_uri: the simulator)"
	provider=gce-demo
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
  - name: gce-demo
    driver: gce
    project: demo-project
    region: us-central1
    zone: us-central1-a
    rate-limit: 20
    cloud-images:
      - name: debian-bookworm
        image-project: debian-cloud
        image-family: debian-12
        username: zuul
        connection-port: $sshport
    pools:
      - name: main
        max-servers: 4
        use-internal-ip: true
        labels:
          - name: ubuntu-jammy
            cloud-image: debian-bookworm
            instance-type: e2-standard-2
            volume-size: 20
nodepoold:
  control-socket: $tmp/nodepoold.sock
  pid-file: $tmp/nodepoold.pid
CFG
elif [ "$CLOUD" != static ] && [ "$CLOUD" != metastatic ]; then
	echo "CLOUD must be static (the default), openstack, azure, gce, ibmvpc or metastatic" >&2
	exit 2
else
echo "== starting two sshd hosts"
p1=$(sh tests/sshd-fixture.sh start "$tmp/ssh1")
p2=$(sh tests/sshd-fixture.sh start "$tmp/ssh2")
key1=$(grep ed25519 "$tmp/ssh1/host_keys")
hostlabel=ubuntu-jammy metacfg=""
if [ "$CLOUD" = metastatic ]; then
	hostlabel=backing-host
	metacfg="  - name: backing-host
  - name: ubuntu-jammy
    min-ready: 1
providers:
  - name: meta-demo
    driver: metastatic
    pools:
      - name: main
        host-key-checking: true
        labels:
          - {name: ubuntu-jammy, backing-label: backing-host, max-parallel-jobs: 2, grace-time: 5}"
fi
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
${metacfg:-  - name: ubuntu-jammy
providers:}
  - name: static-demo
    driver: static
    pools:
      - name: main
        nodes:
          - name: 127.0.0.1
            labels: [$hostlabel]
            connection-port: $p1
            host-key: "$key1"
            timeout: 5
          - name: 127.0.0.1
            labels: [$hostlabel]
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
if [ "$CLOUD" = azure ]; then
	echo "== the simulated cloud's VMs (ARM, via the simulator's control API)"
	/usr/bin/python3 - "$AZURESIM_CONTROL" <<'PY'
import json, sys, urllib.request
st = json.load(urllib.request.urlopen(sys.argv[1] + "/state"))
ips = {p["name"]: p["ip"] for p in st["publicIPAddresses"]}
for v in st["virtualMachines"]:
    print("   %-12s %-10s %-12s %s node %s" % (v["name"], v["state"], v["size"],
                                              ips.get(v["name"] + "-v4-ip"),
                                              v["tags"].get("nodepool_node_id")))
PY
fi
if [ "$CLOUD" = ibmvpc ]; then
	echo "== the simulated account's instances (via the simulator's control API)"
	/usr/bin/python3 - "$IBMVPCSIM_CONTROL" <<'PY'
import json, sys, urllib.request
st = json.load(urllib.request.urlopen(sys.argv[1] + "/state"))
rgs = {g["id"]: g["name"] for g in st["resource_groups"]}
fips = {f["name"]: f["address"] for f in st["floating_ips"]}
for i in st["instances"]:
    print("   %s %-14s %-8s %s %s in %s" % (i["id"], i["name"], i["status"],
                                         i["primary_network_interface"]["primary_ipv4_address"],
                                         fips.get(i["name"], "-"),
                                         rgs.get(i["resource_group"]["id"])))
PY
fi
if [ "$CLOUD" = gce ]; then
	echo "== the simulated project's instances (via the simulator's control API)"
	/usr/bin/python3 - "$GCESIM_CONTROL" <<'PY'
import json, sys, urllib.request
for i in json.load(urllib.request.urlopen(sys.argv[1] + "/state"))["instances"]:
    meta = {m["key"]: m["value"] for m in i["metadata"].get("items", [])}
    print("   %-20s %-8s %-14s %s node %s" % (i["name"], i["status"],
          i["machineType"].rsplit("/", 1)[-1], i["networkInterfaces"][0]["networkIP"],
          meta.get("nodepool_node_id")))
PY
fi
echo "== daemon log (last lines)"
tail -15 "$tmp/nodepoold.log" | sed 's/^/   /'
