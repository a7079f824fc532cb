"""Degrade, never drop (issue 9): a node record with a value of an odd type
keeps every other field and is served, listed and recycled as any other;
a znode under /nodepool/nodes that is not a JSON object is skipped, logged
once per version, counted in /metrics, and never deleted by us."""
import json
import time

from conftest import wait_for
from operator_helpers import host, ready_nodes, static_config, webapp
from test_web import get, parse_metrics, wait_ready


def test_odd_values_kept_unreadable_znodes_left_alone(deployment, zk, zuul):
    w = webapp()
    cfg = static_config([host("host-a", ["small"]), host("host-b", ["small"])], extra=w)
    p = deployment.start_launcher("static-a", deployment.write_config(cfg))
    port = w["webapp"]["port"]
    wait_ready(port)
    wait_for(lambda: len(ready_nodes(zuul)) == 2, what="2 ready nodes")

    # two znodes nobody can read as a record (another tool's, a bad write)
    zk.create("/nodepool/nodes/0000009998", b"{not json")
    zk.create("/nodepool/nodes/0000009999", b"[1, 2]")

    # values of a type no field of ours holds, written by another tool on
    # the ready nodes: our allocation write and Zuul's writes keep them
    for nid, n in ready_nodes(zuul).items():
        n["comment"] = ["a", "list"]
        n["hold_expiration"] = {"not": "a number"}
        zuul.store_node(nid, n)
    rid = zuul.submit(["small"])
    req = zuul.wait_request(rid)
    assert req["state"] == "fulfilled"
    held = zuul.accept(rid)
    (nid, _), = held
    n = zuul.node(nid)
    assert n["allocated_to"] == rid and n["state"] == "in-use"
    assert n["comment"] == ["a", "list"] and n["hold_expiration"] == {"not": "a number"}

    def listed():
        rows = json.loads(get(port, "/node-list", "application/json")[2])
        return {r["id"]: r for r in rows}
    rows = wait_for(lambda: (lambda r: nid in r and r[nid]["state"] == "in-use" and r)(
        listed()), what="in-use node listed")
    assert rows[nid]["comment"] == ["a", "list"]
    assert rows[nid]["user_data"] == {"zuul_system": zuul.system_id,
                                      "project_name": zuul.project}
    assert "0000009998" not in rows and "0000009999" not in rows
    m = parse_metrics(get(port, "/metrics")[2])
    assert m['nodepool_unreadable_records{kind="node"}'] == 2
    assert m['nodepool_nodes{provider="static-a",state="in-use"}'] == 1

    # the node is still the slot's: no second node is registered for it
    time.sleep(1.5)
    assert len([x for x in zuul.nodes().values() if x.get("hostname") == n["hostname"]]) == 1

    zuul.finish(held)  # used: recycled, odd values and all
    wait_for(lambda: zuul.node(nid) is None, what="used node with odd values deleted")
    wait_for(lambda: len(ready_nodes(zuul)) == 2, what="slot registered again")

    # cleanup ran several times (every second): the unreadable znodes stay
    time.sleep(2.5)
    assert zk.get("/nodepool/nodes/0000009998")[0] == b"{not json"
    assert zk.get("/nodepool/nodes/0000009999")[0] == b"[1, 2]"
    # logged once per version: a new version is logged again
    out = p.output()
    assert out.count("node 0000009998: malformed record skipped") == 1, out
    assert out.count("node 0000009999: malformed record skipped") == 1, out
    zk.set("/nodepool/nodes/0000009999", b"42")
    wait_for(lambda: p.output().count("node 0000009999: malformed record skipped") == 2,
             what="the new version logged")
    zk.set("/nodepool/nodes/0000009999", json.dumps({"state": "ready"}).encode())
    wait_for(lambda: parse_metrics(get(port, "/metrics")[2])[
        'nodepool_unreadable_records{kind="node"}'] == 1, what="a readable record no longer counted")
    # the odd values were noted, never as "malformed"
    assert "node %s: key 'comment'" % nid in p.output()
    assert "node %s: malformed" % nid not in p.output()


def test_zuul_autohold_expires_and_operators_see_it(deployment, zuul):
    """Nodes Zuul autoholds (state hold, hold_job, comment, hold_expiration,
    user_data an object, Zuul's id key) expire by their hold_expiration, and
    `nodepool list` and `nodepool delete` take them as any other node."""
    from operator_helpers import nodepool, parse_table
    cfg = static_config([host("host-a", ["small"]), host("host-b", ["small"])])
    path = deployment.write_config(cfg)
    deployment.start_launcher("static-a", path)
    wait_for(lambda: len(ready_nodes(zuul)) == 2, what="2 ready nodes")
    held_ids = []
    for expiration in (2, None):
        rid = zuul.submit(["small"], job="flaky")
        assert zuul.wait_request(rid)["state"] == "fulfilled"
        held = zuul.accept(rid)
        hid = zuul.autohold_request(job="flaky", reason="debug it", node_expiration=expiration)
        zuul.autohold(held, hid)
        held_ids += [nid for nid, _ in held]
    a, b = held_ids
    n = zuul.node(a)
    assert n["state"] == "hold" and n["hold_expiration"] == 2 and n["id"] == a
    assert n["hold_job"] == "tenant-one review.example.org/org/project flaky .*"
    r = nodepool(path, "list", "--detail")
    assert r.returncode == 0, r.stderr
    rows = {x["ID"]: x for x in parse_table(r.stdout)[1]}
    assert rows[a]["State"] == "hold" and rows[a]["Comment"] == "debug it"
    assert rows[a]["Hold Job"] == n["hold_job"]
    assert zuul.system_id in rows[a]["User Data"]
    # the one with hold_expiration 2 s is deleted by the launcher
    wait_for(lambda: zuul.node(a) is None, timeout=20, what="expired hold deleted")
    assert zuul.node(b)["state"] == "hold"
    # the other is the operator's to delete
    r = nodepool(path, "delete", b)
    assert r.returncode == 0, r.stderr
    wait_for(lambda: zuul.node(b) is None, what="held node deleted")
    wait_for(lambda: len(ready_nodes(zuul)) == 2, what="both hosts ready again")
