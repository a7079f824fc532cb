#!/bin/sh
# Build a TLS-capable static ZooKeeper C client from Debian's own source
# package (Debian 12's libzookeeper-mt has no OpenSSL), with
# mk/zkclient-tls.patch applied: the OpenSSL 3 build fix (FIPS_mode), trust in
# the configured CA only, and a check of the server's name against the
# certificate, as any TLS client makes: a host name in the connection string
# against its DNS names, an IP address against its IP addresses. See
# ../README.md, "ZooKeeper and TLS". mk/zkclient-reconnect.patch paces
# reconnection; mk/zkclient-watch.patch adds persistent (recursive) watches:
# zoo_aadd_watch(), re-registered with SetWatches2; and the catch-up after a
# lost connection: zoo_aset_data_watches() (SetWatches with a normal xid),
# zoo_catchup_zxid() and zoo_resync_done() (the zxid to catch up from, held
# in the I/O thread from the first lost connection until caught up).
# mk/zkclient-io.patch cuts the system calls per message: completions called
# on the I/O thread (no completion thread), the I/O thread woken only when
# asleep, one TLS record per request and read-ahead on receipt.
#
# Usage: mk/zkclient.sh OUTDIR
# OUTDIR receives lib/libzookeeper.a, lib/libhashtable.a and include/.
# The result is cached under $NP_CACHE (default ~/.cache/nodepoold), keyed on
# the source version and the patch, so later builds (and fresh clones) skip it.
set -eu

out=$1
here=$(cd "$(dirname "$0")" && pwd)
cache=${NP_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/nodepoold}
srcver=3.8.0
# The patches, applied in this order (each one line):
patches="
zkclient-tls.patch
zkclient-reconnect.patch
zkclient-watch.patch
zkclient-io.patch
"
key=$(cd "$here" && cat zkclient.sh $patches | sha256sum | cut -c1-16)
cdir="$cache/zkclient-$srcver-$key"

if [ ! -f "$cdir/lib/libzookeeper.a" ]; then
	t0=$(date +%s.%N)
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	mkdir -p "$work/apt/lists/partial" "$work/apt/sources.list.d"
	# A private apt configuration: /etc/apt is left as it is.
	cat >"$work/apt/sources.list" <<SRC
deb-src http://deb.debian.org/debian bookworm main
deb-src http://deb.debian.org/debian-security bookworm-security main
SRC
	aptopt="-o Dir::Etc::SourceList=$work/apt/sources.list
		-o Dir::Etc::SourceParts=$work/apt/sources.list.d
		-o Dir::State::Lists=$work/apt/lists"
	# shellcheck disable=SC2086
	apt-get $aptopt update -q >/dev/null 2>&1
	(cd "$work" && apt-get $aptopt source --download-only "zookeeper=$srcver*" >/dev/null 2>&1) ||
		(cd "$work" && apt-get $aptopt source --download-only zookeeper >/dev/null)
	(cd "$work" && dpkg-source -x ./zookeeper_*.dsc src >/dev/null)
	for p in $patches; do
		(cd "$work/src" && patch -p1 -s <"$here/$p")
	done
	c="$work/src/zookeeper-client/zookeeper-client-c"
	mkdir -p "$c/generated"
	(cd "$c/generated" && java -cp /usr/share/java/zookeeper-jute.jar \
		org.apache.jute.compiler.generated.Rcc -l c \
		"$work/src/zookeeper-jute/src/main/resources/zookeeper.jute" >/dev/null)
	mkdir -p "$c/b"
	# The client parses what the network sends: built with the hardening
	# the Makefile gives our own code (a stack protector, fortified libc
	# calls; RelWithDebInfo's -O2 lets FORTIFY work). Fixed here, not taken
	# from the environment, so the cache key above covers them.
	(cd "$c/b" && cmake .. -DWITH_OPENSSL=ON -DWANT_CPPUNIT=OFF \
		-DCMAKE_C_FLAGS="-fstack-protector-strong -D_FORTIFY_SOURCE=2" \
		-DWITH_CYRUS_SASL=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DCMAKE_POSITION_INDEPENDENT_CODE=ON >/dev/null &&
		make -j"$(nproc)" zookeeper hashtable >/dev/null)
	tmp="$cdir.tmp.$$"
	rm -rf "$tmp"
	mkdir -p "$tmp/lib" "$tmp/include"
	cp "$c/b/libzookeeper.a" "$c/b/libhashtable.a" "$tmp/lib/"
	cp "$c"/include/*.h "$c/generated/zookeeper.jute.h" "$tmp/include/"
	rm -rf "$cdir"
	mv "$tmp" "$cdir"
	t1=$(date +%s.%N)
	echo "zkclient: built TLS ZooKeeper client in $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s -> $cdir" >&2
fi

mkdir -p "$out"
rm -rf "$out/lib" "$out/include"
cp -r "$cdir/lib" "$cdir/include" "$out/"
