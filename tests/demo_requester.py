"""The demo's requester: plays Zuul's part against nodepoold over
ZooKeeper (TLS) with kazoo, printing each step of a node request's life:
request -> fulfilled -> lock -> in-use -> used -> node back to ready.

The Zuul side is the process tests' `Zuul` class (tests/process/conftest.py),
which follows Zuul's own code step by step: the request is exactly what
Zuul's NodeRequest.toDict writes, the nodes are locked and set in-use with
Zuul's user_data object and written back as Zuul's Node.toDict does."""
import os
import sys
import time

from kazoo.client import KazooClient

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "process"))
from conftest import Zuul  # noqa: E402

hosts, certs, label = sys.argv[1], sys.argv[2], sys.argv[3]
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 2
zk = KazooClient(hosts=hosts, use_ssl=True, verify_certs=True,
                 ca=os.path.join(certs, "ca.pem"),
                 certfile=os.path.join(certs, "client.pem"),
                 keyfile=os.path.join(certs, "client.key"))
zk.start(timeout=15)
zuul = Zuul(zk, tenant="demo", project="review.example.org/demo/project")
t0 = time.time()


def say(msg):
    print("[%7.3fs] %s" % (time.time() - t0, msg), flush=True)


def ready_nodes():
    return {nid: n for nid, n in zuul.nodes().items()
            if n.get("state") == "ready" and label in (n.get("type") or [])
            and not n.get("allocated_to")}


def wait(pred, what, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.01)
    say("TIMEOUT waiting for " + what)
    sys.exit(1)


wait(zuul.pools, "a pool component")
for c in zuul.pools():
    say("pool component: provider %s pool %s labels %s" % (
        c["provider_name"], c["name"], c["supported_labels"]))
nodes = wait(ready_nodes, "ready nodes")
want = len(nodes)  # a cloud's min-ready may overshoot for a moment: count the first look
for nid, n in sorted(nodes.items()):
    say("ready node %s: %s:%s, %d host keys scanned" % (
        nid, n["hostname"] or n["interface_ip"], n["connection_port"], len(n["host_keys"])))

say("Zuul system id %s" % zuul.system_id)
for rnd in range(rounds):
    t_req = time.time()
    rid = zuul.submit([label], job="demo-job")
    say("round %d: request %s for [%s] submitted (keys: %s)" % (
        rnd + 1, rid, label, ", ".join(zuul.request(rid))))
    r = wait(lambda: (zuul.request(rid) or {}).get("state") in ("fulfilled", "failed")
             and zuul.request(rid), "fulfilment")
    if r["state"] != "fulfilled":
        say("request %s FAILED (declined by %s)" % (rid, r.get("declined_by")))
        sys.exit(1)
    say("request %s fulfilled in %.1f ms: nodes %s" % (
        rid, (time.time() - t_req) * 1000, r["nodes"]))
    held = zuul.accept(rid)  # lock, delete the request, in-use
    for nid, _ in held:
        n = zuul.node(nid)
        say("node %s locked and in-use (%s:%s), user_data %s" % (
            nid, n["hostname"] or n["interface_ip"], n["connection_port"], n["user_data"]))
    say("request %s deleted (nodes accepted)" % rid)
    time.sleep(0.2)  # "the job runs"
    zuul.finish(held)
    for nid, _ in held:
        say("node %s used and unlocked" % nid)
    t_used = time.time()
    for nid, _ in held:
        wait(lambda: zuul.node(nid) is None, "node %s deleted" % nid)
    back = wait(lambda: len(ready_nodes()) >= want and ready_nodes(), "nodes back to ready")
    say("node recycled: %d ready again after %.1f ms (new ids %s)" % (
        len(back), (time.time() - t_used) * 1000, sorted(set(back) - set(nodes))))
    nodes = back
say("demo complete")
zk.stop()
