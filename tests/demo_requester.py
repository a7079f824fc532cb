"""The demo's requester: plays Zuul's part against nodepoold over
ZooKeeper (TLS) with kazoo, printing each step of a node request's life:
request -> fulfilled -> lock -> in-use -> used -> node back to ready."""
import json
import os
import sys
import time
import uuid

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

hosts, certs, label = sys.argv[1], sys.argv[2], sys.argv[3]
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 2
zk = KazooClient(hosts=hosts, use_ssl=True, verify_certs=True,
                 ca=os.path.join(certs, "ca.pem"),
                 certfile=os.path.join(certs, "client.pem"),
                 keyfile=os.path.join(certs, "client.key"))
zk.start(timeout=15)
t0 = time.time()


def say(msg):
    print("[%7.3fs] %s" % (time.time() - t0, msg), flush=True)


def get(path):
    try:
        return json.loads(zk.get(path)[0])
    except (NoNodeError, ValueError):
        return None


def ready_nodes():
    out = {}
    for c in zk.get_children("/nodepool/nodes") if zk.exists("/nodepool/nodes") else []:
        n = get("/nodepool/nodes/" + c)
        if n and n["state"] == "ready" and label in n["type"] and not n["allocated_to"]:
            out[c] = n
    return out


def wait(pred, what, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.01)
    say("TIMEOUT waiting for " + what)
    sys.exit(1)


pools = wait(lambda: zk.exists("/nodepool/components/pool") and
             zk.get_children("/nodepool/components/pool"), "a pool component")
for p in pools:
    c = get("/nodepool/components/pool/" + p)
    say("pool component: provider %s pool %s labels %s" % (
        c["provider_name"], c["name"], c["supported_labels"]))
nodes = wait(ready_nodes, "ready nodes")
want = len(nodes)  # a cloud's min-ready may overshoot for a moment: count the first look
for nid, n in sorted(nodes.items()):
    say("ready node %s: %s:%s, %d host keys scanned" % (
        nid, n["hostname"] or n["interface_ip"], n["connection_port"], len(n["host_keys"])))

for rnd in range(rounds):
    req = {"state": "requested", "state_time": time.time(), "node_types": [label],
           "requestor": "demo-zuul", "requestor_data": None, "provider": None,
           "relative_priority": 0, "event_id": uuid.uuid4().hex,
           "created_time": time.time(), "tenant_name": "demo", "reuse": True,
           "declined_by": [], "nodes": []}
    t_req = time.time()
    path = zk.create("/nodepool/requests/100-", json.dumps(req).encode(),
                     sequence=True, makepath=True)
    rid = path.rsplit("/", 1)[1]
    say("round %d: request %s for [%s] submitted" % (rnd + 1, rid, label))
    r = wait(lambda: (get(path) or {}).get("state") in ("fulfilled", "failed") and get(path),
             "fulfilment")
    if r["state"] != "fulfilled":
        say("request %s FAILED (declined by %s)" % (rid, r["declined_by"]))
        sys.exit(1)
    say("request %s fulfilled in %.1f ms: nodes %s" % (
        rid, (time.time() - t_req) * 1000, r["nodes"]))
    held = []
    for nid in r["nodes"]:
        lock = zk.Lock("/nodepool/nodes/%s/lock" % nid)
        lock.acquire(timeout=10)
        n = get("/nodepool/nodes/" + nid)
        n["state"] = "in-use"
        zk.set("/nodepool/nodes/" + nid, json.dumps(n).encode())
        held.append((nid, lock))
        say("node %s locked and in-use (%s:%s)" % (nid, n["hostname"] or n["interface_ip"],
                                                   n["connection_port"]))
    zk.delete(path)
    say("request %s deleted (nodes accepted)" % rid)
    time.sleep(0.2)  # "the job runs"
    for nid, lock in held:
        n = get("/nodepool/nodes/" + nid)
        n["state"] = "used"
        zk.set("/nodepool/nodes/" + nid, json.dumps(n).encode())
        lock.release()
        say("node %s used and unlocked" % nid)
    t_used = time.time()
    for nid, _ in held:
        wait(lambda: get("/nodepool/nodes/" + nid) is None, "node %s deleted" % nid)
    back = wait(lambda: len(ready_nodes()) >= want and ready_nodes(), "nodes back to ready")
    say("node recycled: %d ready again after %.1f ms (new ids %s)" % (
        len(back), (time.time() - t_used) * 1000, sorted(set(back) - set(nodes))))
    nodes = back
say("demo complete")
zk.stop()
