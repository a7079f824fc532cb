#!/bin/sh
# Install the Debian 12 packages nodepoold needs to build, test and run its
# demo. Quick when everything is present (one dpkg-query); otherwise runs
# apt-get as root. Usage: mk/deps.sh [dib]
#   dib: also what `make dib-smoke` needs (diskimage-builder, qemu-img,
#   busybox for its offline root, sudo which diskimage-builder calls).
# chromium and chromium-driver: the status page's test in a real browser
# (tests/process/test_web_statuspage.py), with a font to draw it.
set -eu

PKGS="gcc make cmake pkg-config clang libclang-rt-14-dev
libssl-dev libevent-dev libyaml-dev libmsgpack-dev libcurl4-openssl-dev
libjansson-dev libcriterion-dev libssh-dev zlib1g-dev
zookeeper libzookeeper-java default-jre-headless dpkg-dev
python3 python3-kazoo python3-pytest python3-yaml python3-openstacksdk python3-openstackclient
python3-kubernetes python3-boto3 libxml2-dev
azure-cli python3-azure
python3-googleapi python3-google-auth python3-google-auth-httplib2 python3-httplib2
openssh-server openssh-client openssl mandoc debhelper
chromium chromium-driver fonts-dejavu-core"
if [ "${1:-}" = dib ]; then
	PKGS="$PKGS python3-diskimage-builder qemu-utils busybox-static sudo"
fi

missing=""
for p in $PKGS; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$st" = "installed" ] || missing="$missing $p"
done
# kubectl for the Kubernetes simulator's tests: Debian's kubernetes-client,
# only when no kubectl is present (it conflicts with other kubectl packages).
command -v kubectl >/dev/null 2>&1 || missing="$missing kubernetes-client"
[ -z "$missing" ] && exit 0

echo "deps: installing:$missing" >&2
if [ "$(id -u)" != 0 ]; then
	echo "deps: not root: run 'sudo apt-get install$missing' first" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing >/dev/null
