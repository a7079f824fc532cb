#!/bin/sh
# Issue 25's benchmark: CPU per request of the whole process tree.
#   bench/cpu_per_request.sh [N requests (500)] [C concurrency (20)] [H static hosts (20)]
# Starts a private ZooKeeper (TLS) and nodepoold (-f) with one static
# provider of H hosts (host-key-checking off: no host is contacted), so the
# tree is nodepoold, its worker (nodepool-launcher) and nodepool-web; waits
# for H ready nodes; runs bench/zuul_load (Zuul's own sequence: submit,
# lock, in-use, used, unlock, delete the request) for N requests, C in
# flight; then prints, from /proc/<pid>/stat (utime+stime) read by pid
# right before and right after the load, each process's CPU and CPU per
# request, the tree's, and nodepool-web's share of it. Stops everything it
# started, by pid. BENCH_WARMUP=M (default 40) unmeasured requests first.
# Nobody reads the web API unless BENCH_POLL says so (below): nodepool-web's
# view of nodes and requests then sleeps (webapp view_idle_timeout).
#
# Measured (release build, 2-core VM shared with other builds, 2026-11-28;
# 500 requests at concurrency 20, 20 hosts; three runs each, alternated,
# ms of CPU per request; the 10 ms clock tick and the shared machine make a
# run's figure vary by 10-15 %):
#   main ba1941d: tree 3.38 / 3.22 / 3.26: launcher 2.12 / 1.98 / 2.00,
#                 nodepool-web 1.22 / 1.20 / 1.22 (36-37 % of the tree),
#                 nodepoold 0.04.
#   issue 25 (nodepool-web reads on demand, lock counts from the watch's
#   events, no /dev/urandom per big-number decode): tree 2.78 / 2.10 /
#                 2.28: launcher 2.18 / 1.64 / 1.80, nodepool-web 0.56 /
#                 0.42 / 0.44 (19-20 %).
#   issue 25, nodepool-web's view asleep while nobody reads it (release,
#   2026-11-28, alternated with a copy of the build before, 5980ff7):
#                 before: nodepool-web 0.48 / 0.38 / 0.32 / 0.28 (21.1 /
#                 16.8 / 16.3 / 15.4 % of the tree's 2.28 / 2.26 / 1.96 /
#                 1.82); after: nodepool-web 0.000 in each of three runs
#                 (0 %; the tree 1.76 / 1.62 / 2.14, the launcher's share
#                 varying with the machine). With a reader polling
#                 /node-list every 2 s (BENCH_POLL=2) the view stays awake
#                 and costs what it did: before 0.32 / 0.40 (17.6 / 19.0 %),
#                 after 0.30 / 0.34 (15.2 / 17.0 %).
#                 What it did per node request before (BENCH_STRACE, 500
#                 requests): ~99,000 system calls in all, ~198 per request:
#                 poll 19.6 (the C client's I/O thread woken per watch
#                 event: about 20 events per request, the request's and its
#                 nodes' changes and their lock contenders), read 57 (TLS
#                 records), eventfd and pipe writes 18.6 (one hand-off per
#                 event to the loop), futex 85; none of it asked for by
#                 anyone. After: ~160 in all (the status polls and session
#                 pings), 0.3 per request.
#   issue 25, the launcher's ZooKeeper requests (own writes taken from
#   their replies, new lock dirs made with the contender in one multi, a
#   new node's lock counted from events, a used node deleted with its lock
#   dir in one multi, no request started on a node another is locking
#   for): ZooKeeper requests per request 28.5 / 28.7 -> 12.0 (uprobes on
#   the C client's zoo_a* calls, BENCH_PERF_EVENTS); ms per request on a
#   machine at load average 13-20, alternated with a copy of the build
#   before (5980ff7): launcher 1.68 / 2.00 / 1.84 -> 1.12 / 1.34 / 1.50,
#   tree 2.12 / 2.60 / 2.40 -> 1.56 / 1.84 / 2.02.
# Where the launcher's CPU went after that, before the transport patch
# below (perf record -g, BENCH_PERF): about half of each
# process's CPU is in the kernel, per ZooKeeper message: the C client's I/O
# and completion threads and our eventfd hand-off (futex, poll, epoll,
# pipe and eventfd writes), and TLS records. In the launcher, libc's
# malloc/free ~10 %, jansson ~7 %, OpenSSL ~9 %, our own code ~9 %. Per
# request the launcher now sends: the new request's read, its lock (one
# multi) and release, the node lock (one multi) and release, the
# fulfilment (one multi), the new node's create and read, two reads of
# Zuul's node changes, and the used node's delete (one multi).
#   issue 25, the ZooKeeper client's transport (mk/zkclient-io.patch:
#   completions on the I/O thread, its self-pipe written only when it may
#   sleep, the queued requests in one TLS record, read-ahead; three runs
#   each, alternated with 5980ff7 on the same ZooKeeper):
#     5980ff7:    tree 2.06 / 2.28 / 2.24: launcher 1.62 / 1.86 / 1.82,
#                 nodepool-web 0.40 / 0.38 / 0.40, nodepoold 0.02-0.04.
#     zkclient-io: tree 1.28 / 1.18 / 1.40: launcher 0.94 / 0.86 / 1.10,
#                 nodepool-web 0.30 / 0.28 / 0.28 (20-24 %), nodepoold
#                 0.02-0.04.
#   System calls per request (BENCH_STRACE, strace -f -c, all threads):
#   launcher 665 -> 45 (futex 234 -> 0.5, write 152 -> 17, read 176 -> 14,
#   poll 58 -> 9, epoll_wait 41 -> 2.6), nodepool-web 179 -> 20,
#   nodepoold 9.5 -> 7.8.
# Where the launcher's system calls go now, per request: ~6 TLS writes and
# ~7 reads of ZooKeeper's socket (requests and answers are batched), ~5
# wake-ups of the client's I/O thread (a pipe write, a poll, a read
# each), ~3 hand-offs to the loop (eventfd write, epoll_wait, read), ~3
# log lines, and ~3 getpid from OpenSSL's RAND_bytes (OpenSSL's fork check)
# for each lock's node name (zk_lock_new).
#   issue 25, our own writes applied from the record we encoded (no decode
#   back) and records written straight to text (branch i25-cachewrite;
#   release, 2026-11-29 00:50-01:16, load average 1.5-4.8, alternated with
#   a copy of the build before, e3ba4c0): launcher 1.06 / 0.84 / 0.96 /
#   0.92 / 0.84 -> 0.66 / 0.60 ms per request, tree 1.10 / 0.88 / 1.00 /
#   0.96 / 0.90 -> 0.70 / 0.64 (intermediate steps: no decode back but a
#   new node's writes, 0.76 / 0.88, tree 0.78 / 0.94; with the first
#   writer, 0.76 / 0.68 / 0.78, tree 0.80 / 0.74 / 0.82); nodepool-web 0
#   (asleep). Final build (7e0c91d), 01:41-01:43, load average 0.8-1.7:
#   launcher 0.94 / 0.90 -> 0.62 / 0.70, tree 0.98 / 0.94 -> 0.66 / 0.74.
#   The direct writer (records written straight to text) was then taken
#   out again: JSON comes from a library here, even a slower one, and the
#   target was met without it. Merged tree (the own writes kept, the
#   writer out, with i25-fastlaunch and i25-pace3), bench/issue25.sh,
#   2026-11-29 01:46, load average 1.5: tree 0.76 ms per request,
#   nodepool-web 0 %.
set -eu
N=${1:-500}
C=${2:-20}
H=${3:-20}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init nodepoold-cpu
[ -n "${BENCH_NOMAKE:-}" ] || make -s "$BUILD/bin/nodepoold" "$BUILD/bin/nodepool-web" \
	"$BUILD/bin/nodepoolctl" >/dev/null
bench_static_setup "/cpu-$$" "$H" "nodepoold: {control-socket: $tmp/ctl.sock, pid-file: $tmp/npd.pid}"
"$BUILD/bin/nodepoold" -f -c "$tmp/nodepool.yaml" >"$tmp/launcher.log" 2>&1 &
pid=$!
bench_wait_static_ready "$H" 60 "$BUILD/bin/nodepoolctl" "$tmp/ctl.sock"
# BENCH_POLL=S: a reader fetches /node-list (JSON) from nodepool-web every
# S seconds from here to the end of the load, as a dashboard would (its
# own CPU is not counted: it is not in the tree)
pollpid=""
if [ -n "${BENCH_POLL:-}" ]; then
	/usr/bin/python3 - "$webport" "$BENCH_POLL" <<'PY' &
import sys, time, urllib.request
while True:
    req = urllib.request.Request("http://127.0.0.1:%s/node-list" % sys.argv[1],
                                 headers={"Accept": "application/json"})
    try:
        urllib.request.urlopen(req, timeout=10).read()
    except OSError:
        pass
    time.sleep(float(sys.argv[2]))
PY
	pollpid=$!
fi
bench_warmup 40 "$C" small
sleep 2
# the tree: nodepoold and its descendants, pid and name
/usr/bin/python3 - "$pid" >"$tmp/tree" <<'PY'
import os, sys
kids = {}
for d in os.listdir("/proc"):
    if d.isdigit():
        try:
            st = open("/proc/%s/stat" % d).read()
        except OSError:
            continue
        kids.setdefault(int(st[st.rindex(")") + 2:].split()[1]), []).append(
            (int(d), st[st.index("(") + 1:st.rindex(")")]))
todo, out = [int(sys.argv[1])], [(int(sys.argv[1]), "nodepoold")]
while todo:
    for c, comm in kids.get(todo.pop(), []):
        out.append((c, comm))
        todo.append(c)
for p, comm in out:
    print(p, comm)
PY
pidopt=$(awk '{printf "--pid %s ", $1}' "$tmp/tree")
# BENCH_PERF=DIR: perf record -g of every process during the load, into
# DIR/perf-PID.data (perf report -i ... to read); BENCH_PERF_EVENTS=LIST
# records those events instead (perf record -e LIST, no call graphs), e.g.
# uprobes on the ZooKeeper C client's zoo_a* calls to count the requests
# per request by kind (perf script -i ... to read)
perfpids=""
if [ -n "${BENCH_PERF:-}" ]; then
	mkdir -p "$BENCH_PERF"
	while read -r p _; do
		if [ -n "${BENCH_PERF_EVENTS:-}" ]; then
			perf record -q -g -e "$BENCH_PERF_EVENTS" -o "$BENCH_PERF/perf-$p.data" -p "$p" \
				>/dev/null 2>&1 &
		else
			perf record -q -g -o "$BENCH_PERF/perf-$p.data" -p "$p" >/dev/null 2>&1 &
		fi
		perfpids="$perfpids $!"
	done <"$tmp/tree"
	sleep 1
fi
# BENCH_STRACE=DIR: strace -f -c of every process (all its threads) during
# the load, a table of system calls by kind into DIR/strace-PID.txt (the
# tracing slows the tree: its CPU figures are not comparable then);
# BENCH_STRACE_ARGS replaces -c (-e trace=write, say, for each call)
if [ -n "${BENCH_STRACE:-}" ]; then
	mkdir -p "$BENCH_STRACE"
	while read -r p _; do
		# shellcheck disable=SC2086 # a list of words
		strace -f ${BENCH_STRACE_ARGS:--c} -o "$BENCH_STRACE/strace-$p.txt" -p "$p" >/dev/null 2>&1 &
		perfpids="$perfpids $!"
	done <"$tmp/tree"
	sleep 1
fi
echo "load: $N requests, concurrency $C, $H static nodes; nodepoold and its children:"
# shellcheck disable=SC2086 # pidopt is a list of words
bench_zuul_load -l small -n "$N" -c "$C" $pidopt --idle 5 | tee "$tmp/load.out"
[ -z "$pollpid" ] || { kill "$pollpid"; wait "$pollpid" || true; }
for p in $perfpids; do
	kill -INT "$p"
	wait "$p" || true
done
# per process, the tree, nodepool-web's share
awk -v n="$N" '
NR == FNR { name[$1] = $2; next }
/^pid [0-9]+: / {
	p = $2; sub(":", "", p)
	for (i = NF; i >= 1; i--) if ($i == "CPU" && $(i - 1) != "idle") cpu = $(i + 1)
	for (i = 1; i <= NF; i++) if ($i == "idle") idle = $(i + 2)
	c[p] = cpu; id[p] = idle; tot += cpu; itot += idle
	if (name[p] ~ /web/) web += cpu
}
END {
	printf "%-8s %-20s %10s %12s %14s\n", "pid", "process", "CPU s", "ms/request", "idle ms/5 s"
	for (p in c)
		printf "%-8s %-20s %10.3f %12.3f %14.1f\n", p, name[p], c[p], c[p] * 1e3 / n, id[p]
	printf "%-8s %-20s %10.3f %12.3f %14.1f\n", "", "whole tree", tot, tot * 1e3 / n, itot
	if (tot > 0)
		printf "nodepool-web share of the tree: %.1f%%\n", 100 * web / tot
}' "$tmp/tree" "$tmp/load.out"
