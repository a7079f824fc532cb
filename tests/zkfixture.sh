#!/bin/sh
# Private ZooKeeper for tests: one server (Debian's zookeeper package) on free
# loopback ports, plain and TLS (mutual, certificates made here with openssl).
#
#   tests/zkfixture.sh start DIR   start it; writes DIR/env (shell exports)
#   tests/zkfixture.sh stop DIR    stop exactly the server started in DIR (by pid)
#
# DIR/env exports:
#   NP_TEST_ZK       127.0.0.1:<plain port>
#   NP_TEST_ZK_TLS   127.0.0.1:<TLS port>
#   NP_TEST_CERTS    DIR/certs: ca.pem client.pem client.key server.pem server.key
#                    rogue-ca.pem rogue-server.pem rogue-server.key (signed by a
#                    CA we do not trust) wrongip-server.pem wrongip-server.key
#                    (our CA, but only IP SAN 10.9.9.9) dnsonly-server.pem
#                    dnsonly-server.key (our CA, only DNS SAN localhost)
#                    wrongname-server.pem wrongname-server.key (our CA, only
#                    DNS SAN zk.elsewhere.example)
# NP_TEST_ZK_HEAP (environment, default 256m): the JVM heap of the server
set -eu

cmd=$1
dir=$2

freeport() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

mkcert() { # name cn san [ca]
	name=$1 cn=$2 san=$3 ca=${4:-ca}
	openssl req -new -newkey rsa:2048 -nodes -subj "/CN=$cn" \
		-keyout "$c/$name.key" -out "$c/$name.csr" 2>/dev/null
	printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\n' "$san" >"$c/$name.ext"
	openssl x509 -req -in "$c/$name.csr" -CA "$c/$ca.pem" -CAkey "$c/$ca.key" \
		-CAcreateserial -days 30 -extfile "$c/$name.ext" -out "$c/$name.pem" 2>/dev/null
}

mkca() { # name
	openssl req -x509 -new -newkey rsa:2048 -nodes -subj "/CN=$1 test CA" -days 30 \
		-keyout "$c/$1.key" -out "$c/$1.pem" 2>/dev/null
}

case $cmd in
start)
	mkdir -p "$dir/data" "$dir/certs"
	c="$dir/certs"
	mkca ca
	mkca rogue-ca
	mkcert server zookeeper "IP:127.0.0.1,DNS:localhost"
	mkcert client nodepool "DNS:nodepool"
	mkcert rogue-server zookeeper "IP:127.0.0.1,DNS:localhost" rogue-ca
	mkcert wrongip-server zookeeper "IP:10.9.9.9" ca
	mkcert dnsonly-server zookeeper "DNS:localhost" ca
	mkcert wrongname-server zookeeper "DNS:zk.elsewhere.example" ca
	cat "$c/server.key" "$c/server.pem" >"$c/server-bundle.pem"
	chmod 600 "$c"/*.key

	plain=$(freeport)
	tls=$(freeport)
	cat >"$dir/zoo.cfg" <<CFG
tickTime=500
${NP_ZK_EXTRA_CFG:-}
minSessionTimeout=1000
maxSessionTimeout=60000
dataDir=$dir/data
clientPortAddress=127.0.0.1
clientPort=$plain
secureClientPortAddress=127.0.0.1
secureClientPort=$tls
serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
ssl.keyStore.location=$c/server-bundle.pem
ssl.keyStore.type=PEM
ssl.trustStore.location=$c/ca.pem
ssl.trustStore.type=PEM
admin.enableServer=false
4lw.commands.whitelist=*
CFG
	cat >"$dir/log4j.properties" <<CFG
log4j.rootLogger=WARN, F
log4j.appender.F=org.apache.log4j.FileAppender
log4j.appender.F.File=$dir/zookeeper.log
log4j.appender.F.layout=org.apache.log4j.PatternLayout
log4j.appender.F.layout.ConversionPattern=%d %p %c{1}: %m%n
CFG
	cp=/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/netty-codec.jar
	java -Xmx${NP_TEST_ZK_HEAP:-256m} -cp "$cp" -Dzookeeper.log.dir="$dir" \
		-Dlog4j.configuration="file:$dir/log4j.properties" \
		-Dlogback.configurationFile=/nonexistent \
		org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zoo.cfg" \
		>"$dir/zookeeper.out" 2>&1 &
	echo $! >"$dir/zk.pid"
	i=0
	until python3 - "$plain" <<'PY' 2>/dev/null
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)
s.sendall(b"ruok")
sys.exit(0 if s.recv(4) == b"imok" else 1)
PY
	do
		i=$((i + 1))
		if [ $i -gt 120 ] || ! kill -0 "$(cat "$dir/zk.pid")" 2>/dev/null; then
			echo "zkfixture: ZooKeeper did not start; see $dir/zookeeper.out" >&2
			tail -20 "$dir/zookeeper.out" >&2 || true
			exit 1
		fi
		sleep 0.25
	done
	cat >"$dir/env" <<ENV
export NP_TEST_ZK=127.0.0.1:$plain
export NP_TEST_ZK_TLS=127.0.0.1:$tls
export NP_TEST_CERTS=$c
ENV
	;;
stop)
	if [ -f "$dir/zk.pid" ]; then
		pid=$(cat "$dir/zk.pid")
		kill "$pid" 2>/dev/null || true
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 40 ]; do sleep 0.25; i=$((i + 1)); done
		kill -9 "$pid" 2>/dev/null || true
		rm -f "$dir/zk.pid"
	fi
	;;
*)
	echo "usage: $0 start|stop DIR" >&2
	exit 2
	;;
esac
