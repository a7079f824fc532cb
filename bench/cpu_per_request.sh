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
# Where the rest goes (perf record -g, BENCH_PERF): over half of each
# process's CPU is in the kernel, per ZooKeeper message: the C client's I/O
# and completion threads and our eventfd hand-off (futex, poll, epoll,
# pipe and eventfd writes; strace -c: ~680 system calls per request in the
# launcher before, 26 ZooKeeper requests per request after), and TLS
# records sent as two writes (length, then body). JSON and our own code
# are a few per cent.
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
# DIR/perf-PID.data (perf report -i ... to read)
perfpids=""
if [ -n "${BENCH_PERF:-}" ]; then
	mkdir -p "$BENCH_PERF"
	while read -r p _; do
		perf record -q -g -o "$BENCH_PERF/perf-$p.data" -p "$p" >/dev/null 2>&1 &
		perfpids="$perfpids $!"
	done <"$tmp/tree"
	sleep 1
fi
echo "load: $N requests, concurrency $C, $H static nodes; nodepoold and its children:"
# shellcheck disable=SC2086 # pidopt is a list of words
bench_zuul_load -l small -n "$N" -c "$C" $pidopt --idle 5 | tee "$tmp/load.out"
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
