# shellcheck shell=sh disable=SC2034,SC1091 # sets variables for the sourcing script
# What the load benchmarks (bench/*_load.sh) share: the build, a temporary
# directory, a private ZooKeeper, one launcher, bench/zuul_load, the
# cleanup trap and the launcher's event-loop lag report. Sourced (POSIX sh,
# under set -eu) right after the script's `set -eu`:
#
#   . "$(dirname "$0")/lib.sh"
#   bench_init nodepoold-bench      # cd to the top, build, $tmp, trap
#   bench_zk_start                  # private ZooKeeper; $port $zkurl $tlscfg $tlsopt
#   bench_zk_mkdir /bench
#   { bench_config_head; cat <<CFG ... CFG; } >"$tmp/nodepool.yaml"
#   "$BUILD/bin/nodepool-launcher" ... >"$tmp/launcher.log" 2>&1 &
#   pid=$!
#   bench_wait_pool; bench_warmup 0 "$C"; bench_zuul_load -n "$N" ...
#
# A script that starts more (a simulator) redefines bench_cleanup_hook to
# stop it. Everything started is stopped by pid.
#
# Environment: BUILD picks the build (default build); BENCH_NOMAKE skips
# make; BENCH_KEEP keeps $tmp; BENCH_DEBUG traces; BENCH_ZK=plain talks to
# ZooKeeper without TLS (default tls); BENCH_WARMUP=M warm-up requests;
# BENCH_ZK_DIR reuses a running fixture (bench_zk_reuse_or_start).

# bench_init PREFIX: cd to the repository's top, build zuul_load and the
# launcher, make $tmp (/tmp/PREFIX.XXXXXX), set the cleanup trap. Sets
# BUILD, top, tmp, pid (the launcher's pid, "" until the script starts it).
bench_init() {
	BUILD=${BUILD:-build}
	# as root: our daemons refuse that unless told (lib/core/privsep.h)
	[ "$(id -u)" != 0 ] || export NODEPOOL_ALLOW_ROOT=${NODEPOOL_ALLOW_ROOT:-1}
	top=$(cd "$(dirname "$0")/.." && pwd)
	cd "$top" || exit 1
	[ -n "${BENCH_NOMAKE:-}" ] || make -s "$BUILD/bench/zuul_load" "$BUILD/bin/nodepool-launcher" >/dev/null
	tmp=$(mktemp -d "/tmp/$1.XXXXXX")
	pid=""
	bench_zk_started=""
	trap bench_cleanup EXIT
	if [ -n "${BENCH_DEBUG:-}" ]; then set -x; fi
}

# bench_cleanup_hook: stops what the script started besides the launcher
# and ZooKeeper (redefine it; the default does nothing).
bench_cleanup_hook() {
	:
}

# bench_cleanup (the EXIT trap): the launcher (by $pid), bench_cleanup_hook,
# the ZooKeeper bench_zk_start started, then $tmp (unless BENCH_KEEP). Never
# gives up half way: ZooKeeper is stopped whatever failed before.
bench_cleanup() {
	set +e
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
	bench_cleanup_hook
	[ -z "$bench_zk_started" ] || sh tests/zkfixture.sh stop "$tmp/zk"
	[ -n "${BENCH_KEEP:-}" ] || rm -rf "$tmp"
}

# bench_zk_vars: from tests/zkfixture.sh's env (already sourced), per
# BENCH_ZK: port (for nodepool.yaml), zkurl (host:port for zuul_load),
# tlscfg (the nodepool.yaml zookeeper-tls line, or empty) and tlsopt
# (zuul_load's TLS options, a list of words, or empty).
bench_zk_vars() {
	if [ "${BENCH_ZK:-tls}" = plain ]; then
		port=${NP_TEST_ZK##*:}
		zkurl=$NP_TEST_ZK
		tlscfg=""
		tlsopt=""
	else
		port=${NP_TEST_ZK_TLS##*:}
		zkurl=$NP_TEST_ZK_TLS
		tlscfg="zookeeper-tls: {ca: $NP_TEST_CERTS/ca.pem, cert: $NP_TEST_CERTS/client.pem, key: $NP_TEST_CERTS/client.key}"
		tlsopt="--ca $NP_TEST_CERTS/ca.pem --cert $NP_TEST_CERTS/client.pem --key $NP_TEST_CERTS/client.key"
	fi
}

# bench_zk_start: a private ZooKeeper in $tmp/zk (tests/zkfixture.sh, its
# env sourced: NP_TEST_ZK, NP_TEST_ZK_TLS, NP_TEST_CERTS; pid in
# $tmp/zk/zk.pid; zkdir names the fixture's directory), then bench_zk_vars.
bench_zk_start() {
	bench_zk_started=1
	zkdir=$tmp/zk
	sh tests/zkfixture.sh start "$tmp/zk" >/dev/null
	. "$tmp/zk/env"
	bench_zk_vars
}

# bench_zk_reuse_or_start: the running fixture named by BENCH_ZK_DIR (its
# env; a warm JVM, left running at the end: production's ZooKeeper has run
# for days, a fresh one spends the first thousands of requests compiling
# its hot paths, issue 25), else bench_zk_start.
bench_zk_reuse_or_start() {
	if [ -n "${BENCH_ZK_DIR:-}" ]; then
		zkdir=$BENCH_ZK_DIR
		. "$BENCH_ZK_DIR/env"
		bench_zk_vars
	else
		bench_zk_start
	fi
}

# bench_kz HOSTS [args...] <<'PY': runs a kazoo script on stdin with
# sys.argv[1] HOSTS, sys.argv[2] the certificates' directory, then args.
# bench_kz_client(hosts, certs) below connects with TLS.
bench_kz() {
	bench_kz_hosts=$1
	shift
	{
		cat <<'PY'
import sys
from kazoo.client import KazooClient


def bench_kz_client(hosts, c):
    k = KazooClient(hosts=hosts, use_ssl=True, verify_certs=True, ca=c + "/ca.pem",
                    certfile=c + "/client.pem", keyfile=c + "/client.key")
    k.start(timeout=15)
    return k
PY
		cat
	} >"$tmp/kz.py"
	/usr/bin/python3 "$tmp/kz.py" "$bench_kz_hosts" "$NP_TEST_CERTS" "$@"
}

# bench_zk_mkdir PATH: creates PATH (the launcher's chroot) in ZooKeeper.
bench_zk_mkdir() {
	bench_kz "$NP_TEST_ZK_TLS" "$1" <<'PY'
k = bench_kz_client(sys.argv[1], sys.argv[2])
k.ensure_path(sys.argv[3])
k.stop()
PY
}

# bench_webport: sets webport, a free loopback port for the launcher's web
# API (upstream's default is 0.0.0.0:8005).
bench_webport() {
	webport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
}

# bench_config_head: prints the nodepool.yaml lines every benchmark starts
# with: zookeeper-servers ($port, chroot $bench_chroot, default /bench),
# $tlscfg and webapp on a free loopback port (bench_webport; sets webport).
bench_config_head() {
	bench_webport
	echo "zookeeper-servers: [{host: 127.0.0.1, port: $port, chroot: ${bench_chroot:-/bench}}]"
	echo "$tlscfg"
	echo "webapp: {port: $webport, listen_address: 127.0.0.1}"
}

# bench_static_setup CHROOT H [LINE]: what the static benchmarks share
# before they start their daemon: ZooKeeper (bench_zk_reuse_or_start),
# CHROOT made and set as bench_chroot, and $tmp/nodepool.yaml with
# bench_config_head, LINE (a top-level nodepool.yaml line, if any), label
# small and the static provider static-bench of H hosts host0.example ...
# (host-key-checking off: no host is contacted).
bench_static_setup() {
	bench_zk_reuse_or_start
	bench_chroot=$1
	bench_zk_mkdir "$bench_chroot"
	{
		bench_config_head
		[ -z "${3:-}" ] || echo "$3"
		cat <<CFG
labels: [{name: small}]
providers:
  - name: static-bench
    driver: static
    pools:
      - name: main
        nodes:
CFG
		i=0
		while [ $i -lt "$2" ]; do
			echo "          - {name: host$i.example, labels: [small], host-key-checking: false}"
			i=$((i + 1))
		done
	} >"$tmp/nodepool.yaml"
}

# bench_wait_static_ready H SECONDS [NODEPOOLCTL SOCKET]: waits until H nodes
# under $bench_chroot are ready and, given nodepoolctl and nodepoold's
# control socket, every worker nodepoold runs (two at least) is running and
# connected to ZooKeeper; exits 1 after SECONDS.
bench_wait_static_ready() {
	bench_kz "$NP_TEST_ZK_TLS$bench_chroot" "$@" <<'PY'
import json, subprocess, time
k = bench_kz_client(sys.argv[1], sys.argv[2])
end = time.time() + float(sys.argv[4])
while time.time() < end:
    ok = True
    if len(sys.argv) > 6:
        r = subprocess.run([sys.argv[5], "-s", sys.argv[6], "status", "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        ws = json.loads(r.stdout)["workers"] if r.returncode == 0 else []
        ok = len(ws) >= 2 and all(w["state"] == "running" and w["zk"] == "connected"
                                  for w in ws)
    n = 0
    if k.exists("/nodepool/nodes"):
        for ch in k.get_children("/nodepool/nodes"):
            d = k.get("/nodepool/nodes/" + ch)[0]
            if d and json.loads(d)["state"] == "ready":
                n += 1
    if ok and n >= int(sys.argv[3]):
        break
    time.sleep(0.1)
else:
    sys.exit("the static nodes were not ready in time")
k.stop()
PY
}

# bench_wait_pool: waits (30 s) until the launcher registered its pool
# under $bench_chroot (default /bench); exits 1 if it did not.
bench_wait_pool() {
	bench_kz "$NP_TEST_ZK_TLS${bench_chroot:-/bench}" <<'PY'
import time
k = bench_kz_client(sys.argv[1], sys.argv[2])
end = time.time() + 30
while time.time() < end:
    if k.exists("/nodepool/components/pool") and k.get_children("/nodepool/components/pool"):
        break
    time.sleep(0.1)
else:
    sys.exit("the launcher did not register its pool")
k.stop()
PY
}

# bench_zuul_load [zuul_load options...]: bench/zuul_load against
# $zkurl$bench_chroot (default /bench) with $tlsopt, its report on stdout
# (and in $tmp/load.txt);
# on failure shows the launcher's log's tail and exits 1.
bench_zuul_load() {
	# shellcheck disable=SC2086 # tlsopt is a list of words
	"$BUILD/bench/zuul_load" -z "$zkurl${bench_chroot:-/bench}" $tlsopt "$@" >"$tmp/load.txt" || {
		cat "$tmp/load.txt"
		tail -30 "$tmp/launcher.log"
		exit 1
	}
	cat "$tmp/load.txt"
}

# bench_overhead BOOT: from the report of the last bench_zuul_load (its
# stdout, kept in $tmp/load.txt), the launch overhead above the cloud's
# configured boot time BOOT (seconds): request->fulfilled p50 and p99 minus
# BOOT, in ms (issue 25's measure); then, from the launcher's last dump
# (bench_dump), how long after the cloud named a server the framework saw it
# ready (p50 minus BOOT: what the pace of status listings and the listing's
# own round trip add), and the label's boot estimate (sampled at the start
# of the listing that showed a server ready).
bench_overhead() {
	awk -v boot="$1" '/^latency request->fulfilled/ {
		printf "launch overhead above the %gs boot: p50 %.0f ms  p99 %.0f ms\n", boot, $4 - boot * 1000, $10 - boot * 1000 }' "$tmp/load.txt"
	grep "boots noticed" "$tmp/launcher.log" | tail -1 | sed 's/^ *//' | awk -v boot="$1" '{
		p50 = $0; sub(/.* p50 /, "", p50); sub(/s .*/, "", p50)
		printf "%s (p50 %.0f ms after the boot)\n", $0, (p50 - boot) * 1000 }'
	# the estimate is sampled at the START of the listing that showed a
	# server ready: noticed minus estimate is the listing's own round trip
	grep "boot estimate of label" "$tmp/launcher.log" | tail -1 | sed 's/^ *//'
}

# bench_warmup DEFAULT C LABEL: BENCH_WARMUP (default DEFAULT) requests of
# LABEL, C in flight, unmeasured, report discarded (0 skips).
bench_warmup() {
	warm=${BENCH_WARMUP:-$1}
	if [ "$warm" -gt 0 ]; then
		# shellcheck disable=SC2086 # tlsopt is a list of words
		"$BUILD/bench/zuul_load" -z "$zkurl${bench_chroot:-/bench}" $tlsopt \
			-l "$3" -n "$warm" -c "$2" >/dev/null || {
			tail -30 "$tmp/launcher.log"
			exit 1
		}
	fi
}

# bench_dump: SIGUSR2 to the launcher and wait for its dump in the log (a
# dump logs the event-loop lag and resets its window); exits 1 after 5 s.
bench_dump() {
	n=$(grep -c "event loop lag" "$tmp/launcher.log" || true)
	kill -USR2 "$pid"
	i=0
	while [ "$(grep -c "event loop lag" "$tmp/launcher.log" || true)" -le "$n" ]; do
		i=$((i + 1))
		[ $i -lt 100 ] || { echo "no dump from the launcher" >&2; exit 1; }
		sleep 0.05
	done
}

# bench_lag: prints the event-loop lag of the last dump's window.
bench_lag() {
	lag=$(grep "event loop lag" "$tmp/launcher.log" | tail -1 | sed 's/.*since start, //; s/ since the last dump//')
	echo "worker event-loop lag during the load: max $lag"
	grep "loop since the last dump" "$tmp/launcher.log" | tail -1 |
		sed 's/^[[:space:]]*loop since the last dump: /worker loop during the load: /'
}

# bench_zkops N: the launcher's ZooKeeper requests and watch events during
# the load, per request (the "zk requests:" lines of the last two dumps,
# zk_op_counts): what the load cost the server, by kind.
bench_zkops() {
	grep "zk requests:" "$tmp/launcher.log" | tail -2 | sed 's/.*zk requests: //' | awk -v n="$1" '
	{ for (i = 1; i < NF; i += 2) { k = $i; v[NR, k] = $(i + 1); if (NR == 1) keys[++nk] = k } }
	END { printf "launcher ZooKeeper requests per request:"
		for (j = 1; j <= nk; j++) { k = keys[j]; d = v[2, k] - v[1, k]; if (d != 0) printf " %s %.2f", k, d / n }
		printf "\n" }'
}

# bench_launcher_env CMD...: execs CMD (the launcher, started with & so
# that $! is its pid); with BENCH_TIMELINE set, at debug level without the
# ZooKeeper client's own chatter (NP_ZK_QUIET), so that bench_timeline can
# read each launch's steps from its log.
bench_launcher_env() {
	if [ -n "${BENCH_TIMELINE:-}" ]; then
		NP_DEBUG=1 NP_ZK_QUIET=1 exec "$@"
	fi
	exec "$@"
}

# bench_timeline N BOOT: with BENCH_TIMELINE set, where the last N
# launches' time went, step by step (bench/launch_timeline.py).
bench_timeline() {
	[ -n "${BENCH_TIMELINE:-}" ] || return 0
	/usr/bin/python3 bench/launch_timeline.py "$tmp/launcher.log" --last "$1" --boot "$2"
}
