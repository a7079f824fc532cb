"""The state-machine framework with the `fake` simulated cloud, played
against as Zuul would (reference sections 2.3-2.7, 3.2): launches, node
fields, min-ready, quota pause and resume, wedge avoidance, tenant
limits, deletion, cancellation, and the debug surface (state-file, dump).
Faults (retries, timeouts, quota errors, leaks, nodescan) are in
test_fake_faults.py."""
import json
import time

from conftest import deletion_passes, wait_for
from fakecloud import (Cloud, dump, fake_config, mark_for_deletion, nodes_in,
                       nothing_left_behind)


def served(zuul, labels, **kw):
    rid = zuul.submit(labels, **kw)
    req = zuul.wait_request(rid)
    assert req["state"] == "fulfilled", req
    return rid, req


def test_request_served_from_the_simulated_cloud(deployment, zuul):
    cfg = fake_config(
        deployment,
        labels={"small": {"cloud-image": "debian", "cores": 2, "ram": 2048}},
        provider={"region-name": "r1",
                  "cloud-images": [{"name": "debian", "image-id": "img-debian",
                                    "username": "debian",
                                    "python-path": "/usr/bin/python3"}]},
        pool={"node-attributes": {"color": "blue"}})
    p = deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    rid, req = served(zuul, ["small"], tenant="t1", requestor="zuul-sched")
    (nid,) = req["nodes"]
    n = zuul.node(nid)
    inst = wait_for(lambda: cloud.by_node().get(nid), what="instance in the cloud")
    assert n["state"] == "ready" and n["allocated_to"] == rid
    assert n["provider"] == "sim" and n["pool"] == "main" and n["type"] == ["small"]
    assert n["external_id"] == inst["id"] and inst["status"] == "ACTIVE"
    assert inst["name"] == "np" + nid
    assert n["interface_ip"] == inst["public_ipv4"] == n["public_ipv4"]
    assert n["interface_ip"].startswith("203.0.113.")
    assert n["private_ipv4"] == inst["private_ipv4"] and n["public_ipv6"] == inst["public_ipv6"]
    assert n["resources"] == {"cores": 2, "instances": 1, "ram": 2048}
    assert n["username"] == "debian" and n["python_path"] == "/usr/bin/python3"
    assert n["image_id"] == "debian" and inst["image"] == "img-debian"
    assert n["cloud"] == "fake" and n["region"] == "r1" and n["az"] == "fake-az-1"
    assert n["connection_type"] == "ssh" and n["connection_port"] == 22
    assert n["host_keys"] == []  # host-key-checking defaults to false for fake
    assert n["attributes"] == {"color": "blue"}
    assert n["tenant_name"] == "t1" and n["requestor"] == "zuul-sched"
    assert inst["metadata"] == {"nodepool_node_id": nid, "nodepool_pool_name": "main",
                                "nodepool_provider_name": "sim",
                                "groups": "sim,debian,small"}
    # the worker's dump shows the framework and the cloud
    text = dump(p)
    assert "fake cloud: 1 servers" in text and ("server %s np%s ACTIVE node %s" % (
        inst["id"], nid, nid)) in text
    assert "event loop lag: max" in text


def test_used_node_deleted_from_the_cloud(deployment, zk, zuul):
    cfg = fake_config(deployment, provider={"delete-delay": 0.3})
    p = deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    rid, req = served(zuul, ["small"])
    (nid,) = req["nodes"]
    wait_for(lambda: nid in cloud.by_node(), what="instance")
    held = zuul.accept(rid)
    zuul.finish(held)
    wait_for(lambda: zuul.node(nid) is None, what="used node deleted")
    # the state-file follows within a fraction of a second
    wait_for(lambda: nid not in cloud.by_node() and cloud.volumes() == [],
             what="instance and volume gone")
    assert cloud.counters()["deletes"] == 1
    wait_for(lambda: cloud.framework()["deletes.ok"] == 1, what="framework counter")
    # nobody waited for the room: the deletion waited for the requests
    # that come with a used node (Zuul's next), not the other way round
    deferred, at_once = deletion_passes(p)
    assert deferred >= 1 and at_once == 0, (deferred, at_once)


def unallocated_ready(zuul, label):
    return {nid: n for nid, n in nodes_in(zuul, "ready").items()
            if n["allocated_to"] is None and label in n["type"]}


def test_min_ready(deployment, zuul):
    cfg = fake_config(deployment, labels={"small": {}, "large": {"cores": 4}},
                      label_top={"small": {"min-ready": 2}})
    deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    ready = wait_for(lambda: len(unallocated_ready(zuul, "small")) >= 2 and
                     unallocated_ready(zuul, "small"), what="2 min-ready nodes")
    # served min-ready requests are removed; no node of the other label
    wait_for(lambda: not zuul.zk.get_children("/nodepool/requests"),
             what="min-ready requests removed")
    assert all(n["type"] == ["small"] for n in zuul.nodes().values())
    nothing_left_behind(zuul, cloud)
    # a request takes one; min-ready tops up again
    rid, req = served(zuul, ["small"])
    assert req["nodes"][0] in ready
    wait_for(lambda: len(unallocated_ready(zuul, "small")) >= 2, what="topped up")
    wait_for(lambda: len(cloud.instances()) == len(zuul.nodes()), what="one instance per node")


def test_min_ready_is_exact(deployment, zuul):
    cfg = fake_config(deployment, label_top={"small": {"min-ready": 2}})
    deployment.start_launcher("sim", deployment.write_config(cfg))
    wait_for(lambda: len(unallocated_ready(zuul, "small")) >= 2, what="2 min-ready nodes")
    wait_for(lambda: not zuul.zk.get_children("/nodepool/requests"),
             what="min-ready requests removed")
    assert len(zuul.nodes()) == 2


def test_quota_pause_and_resume(deployment, zk, zuul):
    cfg = fake_config(deployment, pool={"max-servers": 2})
    p = deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    r1, _ = served(zuul, ["small"])
    r2, _ = served(zuul, ["small"])
    r3 = zuul.submit(["small"])
    wait_for(lambda: zuul.pools() and zuul.pools()[0]["paused"], what="pool paused")
    assert zuul.request(r3)["state"] == "pending"
    assert zuul.request(r3).get("declined_by", []) == []
    wait_for(lambda: len(cloud.instances()) == 2, what="2 instances")
    held = zuul.accept(r1)
    zuul.finish(held)
    req3 = zuul.wait_request(r3)
    assert req3["state"] == "fulfilled"
    wait_for(lambda: not zuul.pools()[0]["paused"], what="pool unpaused")
    wait_for(lambda: len(cloud.instances()) == 2, what="2 instances")
    # the used node's deletion freed the room r3 waited for: at once,
    # not deferred behind other requests
    deferred, at_once = deletion_passes(p)
    assert at_once >= 1, (deferred, at_once)


def test_wedge_avoided_by_deleting_the_oldest_unused_node(deployment, zk, zuul):
    """A pool at capacity with unused READY nodes of another label does not
    wedge: the paused handler deletes the oldest unused node (as upstream's
    deleteOldestUnusedNode) and launches in its place."""
    cfg = fake_config(deployment, labels={"a": {}, "b": {}}, pool={"max-servers": 2})
    deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    first = []
    for _ in range(2):
        rid, req = served(zuul, ["a"])
        first += req["nodes"]
        zk.delete("/nodepool/requests/" + rid)  # never used: the nodes go back
        time.sleep(0.05)
    wait_for(lambda: len(unallocated_ready(zuul, "a")) == 2, what="2 unused nodes of a")
    oldest = first[0]
    rid = zuul.submit(["b"])
    req = zuul.wait_request(rid, timeout=30)
    assert req["state"] == "fulfilled"
    assert zuul.node(req["nodes"][0])["type"] == ["b"]
    assert zuul.node(oldest) is None, "the oldest unused node made room"
    assert zuul.node(first[1])["state"] == "ready"
    wait_for(lambda: sorted(cloud.by_node()) == sorted([first[1], req["nodes"][0]]),
             what="its instance deleted")


def test_tenant_limits_defer_requests(deployment, zuul):
    cfg = fake_config(deployment, labels={"small": {"cores": 2}},
                      top={"tenant-resource-limits": [{"tenant-name": "t1", "max-cores": 2}]})
    deployment.start_launcher("sim", deployment.write_config(cfg))
    r1, _ = served(zuul, ["small"], tenant="t1")
    r2 = zuul.submit(["small"], tenant="t1")
    r3, _ = served(zuul, ["small"], tenant="t2")  # another tenant is not held up
    req2 = zuul.request(r2)
    assert req2["state"] == "requested" and req2.get("declined_by", []) == []
    held = zuul.accept(r1)
    zuul.finish(held)
    assert zuul.wait_request(r2)["state"] == "fulfilled"


def test_request_cancelled_mid_launch_leaves_nothing_behind(deployment, zk, zuul):
    cfg = fake_config(deployment, provider={"boot-delay": 1.5})
    deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    rid = zuul.submit(["small", "small"])
    building = wait_for(lambda: len(nodes_in(zuul, "building")) == 2 and
                        nodes_in(zuul, "building"), what="2 nodes building")
    zk.delete("/nodepool/requests/" + rid)
    # the launches complete; the nodes are released for reuse
    wait_for(lambda: all((zuul.node(nid) or {}).get("state") == "ready"
                         for nid in building), what="launches completed")
    nothing_left_behind(zuul, cloud)
    assert sorted(cloud.by_node()) == sorted(building)
    # an admin deletes them: nothing remains in the cloud
    for nid in building:
        mark_for_deletion(zk, zuul, nid)
    wait_for(lambda: zuul.nodes() == {} and cloud.instances() == [] and cloud.volumes() == [],
             what="nodes and instances gone")


def test_nodeset_of_several_labels(deployment, zuul):
    cfg = fake_config(deployment, labels={"a": {"cores": 1}, "b": {"cores": 8}})
    deployment.start_launcher("sim", deployment.write_config(cfg))
    rid, req = served(zuul, ["a", "b", "a"])
    types = [zuul.node(nid)["type"] for nid in req["nodes"]]
    assert types == [["a"], ["b"], ["a"]]
    assert zuul.node(req["nodes"][1])["resources"]["cores"] == 8


def test_worker_restart_keeps_serving(deployment, zuul):
    """The cloud dies with the worker (it is simulated inside it); nodes
    whose instances are gone are deleted as not found, and the new worker
    serves again."""
    cfg = fake_config(deployment)
    path = deployment.write_config(cfg)
    p = deployment.start_launcher("sim", path)
    cloud = Cloud(deployment)
    rid, req = served(zuul, ["small"])
    held = zuul.accept(rid)
    assert p.stop() == 0
    zuul.finish(held)
    deployment.start_launcher("sim", path)
    wait_for(lambda: zuul.nodes() == {}, what="old node deleted (instance not found)")
    rid, req = served(zuul, ["small"])
    wait_for(lambda: list(cloud.by_node()) == req["nodes"], what="one instance, the new node's")


def test_diskimage_label_without_an_upload_is_not_ready(deployment, zk, zuul):
    """The launcher has no image-upload cache yet (drv_latest_upload finds
    none): a diskimage label is not ready, as upstream with no READY
    upload: requests for it are declined, min-ready makes none."""
    cfg = fake_config(deployment, labels={"di": {"diskimage": "debian-12"}, "small": {}},
                      provider={"diskimages": [{"name": "debian-12"}]},
                      top={"diskimages": [{"name": "debian-12"}]},
                      label_top={"di": {"min-ready": 1}})
    p = deployment.start_launcher("sim", deployment.write_config(cfg))
    pool = wait_for(lambda: zuul.pools(), what="pool")[0]
    rid = zuul.submit(["di"])
    req = zuul.wait_request(rid)
    assert req["state"] == "failed" and req["declined_by"] == [pool["id"]]
    assert "images are not available" in p.output()
    served(zuul, ["small"])  # the cloud-image label is fine
    assert [n["type"] for n in zuul.nodes().values()] == [["small"]]
    assert [r for r in zk.get_children("/nodepool/requests")
            if zuul.request(r)["requestor"] == "NodePool:min-ready"] == []


def test_rate_spaces_cloud_calls(deployment, zuul):
    """`rate` (seconds between calls, as OpenStack's, which upstream's fake
    driver is) holds the simulated cloud's calls apart: creates of launches
    started together are at least `rate` seconds apart."""
    cfg = fake_config(deployment, provider={"rate": 0.1})
    deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    rids = [zuul.submit(["small"]) for _ in range(5)]
    for rid in rids:
        assert zuul.wait_request(rid)["state"] == "fulfilled"
    wait_for(lambda: len(cloud.instances()) == 5, what="5 instances")
    created = sorted(i["created"] for i in cloud.instances())
    gaps = [b - a for a, b in zip(created, created[1:])]
    assert min(gaps) >= 0.099, gaps


def test_states_as_zuul_sees_them_in_fewer_transactions(deployment, zk, zuul):
    """Issue 25: the request still goes requested -> pending -> fulfilled,
    each written once, and its nodes init -> building -> ready; but the
    request's lock is taken in the transaction that writes `pending`, and
    the last node's `ready` in the one that writes `fulfilled` (Zuul reads
    the request, then its nodes: they are ready whenever it is fulfilled).
    A two-node request: the first node ready is written alone."""
    cfg = fake_config(deployment, provider={"boot-delay": 1})
    deployment.start_launcher("sim", deployment.write_config(cfg))
    rid = zuul.submit(["small", "small"])
    path = "/nodepool/requests/" + rid
    seen = []

    def step():
        data, st = zk.get(path)
        state = json.loads(data)["state"]
        if not seen or seen[-1][0] != state:
            seen.append((state, st.version, st.mzxid))
        return state == "fulfilled"

    wait_for(step, interval=0.005, what="request fulfilled")
    states = [s for s, _, _ in seen]
    assert states[-2:] == ["pending", "fulfilled"] and states[0] in ("requested", "pending")
    versions = {s: v for s, v, _ in seen}
    assert versions["pending"] == 1 and versions["fulfilled"] == 2, seen
    pending_zxid = dict((s, z) for s, _, z in seen)["pending"]
    lock_dir = zk.exists("/nodepool/requests-lock/" + rid)
    assert lock_dir.czxid == pending_zxid, "lock taken with `pending`"
    data, st = zk.get(path)
    req = json.loads(data)
    stats = [zk.get("/nodepool/nodes/" + nid) for nid in req["nodes"]]
    assert [json.loads(d)["state"] for d, _ in stats] == ["ready", "ready"]
    assert sorted(s.mzxid == st.mzxid for _, s in stats) == [False, True], \
        "one node written ready with the fulfilment, the other before it"
    assert all(s.mzxid <= st.mzxid for _, s in stats)
