#!/usr/bin/python3
"""Where a launch's time goes (issue 25), from a launcher's debug log.

    NP_DEBUG=1 BENCH_KEEP=1 bench/fake_load.sh ...   (or openstack/aws)
    bench/launch_timeline.py /tmp/nodepoold-bench.XXXX/launcher.log [--last N] [--boot S]

Reads the timestamps of one request's steps from the launcher's log
(worker/handler.c and drivers/statemachine/runner.c log them at debug
level) and prints, over the last N requests fulfilled with one launched
node each, the p50/p90/p99 of every step's share:

    created      the request znode's ctime (its read says how long before)
    seen         the launcher's request cache showed it
    read         locked and read
    accepted     `pending` written
    building     its node created, locked and written `building`
    named        the create call answered (the cloud named the server)
    complete     a status listing showed it ready (the create machine done)
    ready        the launch reported ready (after a nodescan, if any)
    fulfilled    the node written ready and the request `fulfilled`

and, with --boot, how long after the boot the listing that showed a server
ready started (the pace's share) and the overhead above the boot.
"""
import argparse
import re
import sys
from datetime import datetime

TS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) (\w+) [^:]+: (.*)$")
PATTERNS = [
    ("seen", re.compile(r"request (\S+): seen by pool")),
    ("read", re.compile(r"request (\S+): locked and read \(created (\d+) ms before[;)]")),
    ("accepted", re.compile(r"request (\S+) accepted by pool")),
    ("building", re.compile(r"request (\S+): node (\S+) building; launching")),
    ("named", re.compile(r"node (\S+): instance \S+ named")),
    ("complete", re.compile(r"node (\S+): instance \S+ complete .*listing that showed it "
                            r"started (-?[\d.]+)s after naming")),
    ("ready", re.compile(r"node (\S+) \(\S+\) ready")),
    ("fulfilled", re.compile(r"request (\S+) fulfilled by pool")),
]
STEPS = ["created", "seen", "read", "accepted", "building", "named", "complete", "ready",
         "fulfilled"]


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p / 100))] if v else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--last", type=int, default=500)
    ap.add_argument("--boot", type=float, default=None)
    a = ap.parse_args()
    req, node_req, node = {}, {}, {}
    order = []
    with open(a.log, errors="replace") as f:
        for line in f:
            m = TS.match(line)
            if not m:
                continue
            t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()
            msg = m.group(3)
            for step, rx in PATTERNS:
                mm = rx.search(msg)
                if not mm:
                    continue
                if step in ("named", "complete", "ready"):
                    n = node.setdefault(mm.group(1), {})
                    n[step] = t
                    if step == "complete":
                        n["listing_after_named"] = float(mm.group(2))
                    break
                r = req.setdefault(mm.group(1), {})
                if step == "read":
                    r["created"] = t - int(mm.group(2)) / 1000
                if step == "building":
                    r.setdefault("nodes", []).append(mm.group(2))
                    node_req[mm.group(2)] = mm.group(1)
                if step not in r:
                    r[step] = t
                if step == "fulfilled":
                    order.append(mm.group(1))
                break
    rows = []
    for rid in order:
        r = req[rid]
        if len(r.get("nodes", [])) != 1:
            continue
        n = node.get(r["nodes"][0], {})
        row = dict(r)
        row.update({k: v for k, v in n.items()})
        if all(s in row for s in STEPS):
            rows.append(row)
    rows = rows[-a.last:]
    if not rows:
        sys.exit("no complete timelines (was the launcher run with NP_DEBUG=1?)")
    print("launch timeline over %d requests (one launched node each), ms:" % len(rows))
    print("  %-24s %8s %8s %8s" % ("step", "p50", "p90", "p99"))
    for prev, step in zip(STEPS, STEPS[1:]):
        v = [(row[step] - row[prev]) * 1000 for row in rows]
        print("  %-24s %8.0f %8.0f %8.0f" % (prev + " -> " + step, pct(v, 50), pct(v, 90),
                                            pct(v, 99)))
    v = [(row["fulfilled"] - row["created"]) * 1000 for row in rows]
    print("  %-24s %8.0f %8.0f %8.0f" % ("created -> fulfilled", pct(v, 50), pct(v, 90),
                                        pct(v, 99)))
    if a.boot is not None:
        v = [(row["listing_after_named"] - a.boot) * 1000 for row in rows]
        print("  %-24s %8.0f %8.0f %8.0f" % ("ready listing - boot", pct(v, 50), pct(v, 90),
                                            pct(v, 99)))
        v = [(row["fulfilled"] - row["created"] - a.boot) * 1000 for row in rows]
        print("  %-24s %8.0f %8.0f %8.0f" % ("overhead above boot", pct(v, 50), pct(v, 90),
                                            pct(v, 99)))


if __name__ == "__main__":
    main()
