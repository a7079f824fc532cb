"""Availability-zone grouping with the `fake` simulated cloud, as Zuul
sees it (reference 2.3 "AZ grouping" and "Reuse ready nodes"; upstream's
StateMachineHandler): the nodes of one request are reused from and
launched in one zone. The first ready node reused fixes the zone (ready
nodes of another zone, or with no zone, are then passed over); when
nothing is reused, the first launch picks one at random from the pool's
availability-zones, else from the cloud's own list; a ready node with no
zone fixes nothing."""
import time

from conftest import wait_for
from fakecloud import Cloud, fake_config, nodes_in

ZONES = ["az-a", "az-b", "az-c"]


def served(zuul, labels, **kw):
    rid = zuul.submit(labels, **kw)
    req = zuul.wait_request(rid)
    assert req["state"] == "fulfilled", req
    return rid, req


def zones_of(zuul, req):
    return [zuul.node(nid)["az"] for nid in req["nodes"]]


def unallocated_ready(zuul):
    return {nid: n for nid, n in nodes_in(zuul, "ready").items() if n["allocated_to"] is None}


def give_back(zk, zuul, rid, nids):
    """Zuul drops a fulfilled request without using its nodes: they are
    deallocated and wait, ready, for the next request."""
    zk.delete("/nodepool/requests/" + rid)
    wait_for(lambda: all(n in unallocated_ready(zuul) for n in nids),
             what="nodes %s back to ready" % nids)


def test_fresh_nodesets_are_launched_in_one_zone(deployment, zuul):
    """Ten 3-node requests, no ready nodes: each nodeset lands in one of the
    pool's zones (a zone drawn per node would split one of them with
    probability 1 - (1/9)^10), and the cloud put the servers there."""
    cfg = fake_config(deployment, pool={"availability-zones": ZONES})
    deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    rids = [zuul.submit(["small", "small", "small"]) for _ in range(10)]
    chosen = []
    for rid in rids:
        req = zuul.wait_request(rid)
        assert req["state"] == "fulfilled", req
        zones = zones_of(zuul, req)
        assert len(zones) == 3 and len(set(zones)) == 1, (rid, zones)
        assert zones[0] in ZONES
        insts = wait_for(lambda: all(n in cloud.by_node() for n in req["nodes"]) and
                         cloud.by_node(), what="instances of %s" % rid)
        assert [insts[n]["az"] for n in req["nodes"]] == zones
        chosen.append(zones[0])
    # the zone is drawn per request, not fixed (all ten alike: 3^-9)
    assert len(set(chosen)) > 1, chosen


def test_zones_from_the_cloud_when_the_pool_names_none(deployment, zuul):
    """A pool without availability-zones draws from the zones the cloud
    reports (upstream's Adapter.getAZs)."""
    cloud_zones = ["z1", "z2", "z3"]
    cfg = fake_config(deployment, provider={"cloud-availability-zones": cloud_zones})
    deployment.start_launcher("sim", deployment.write_config(cfg))
    rids = [zuul.submit(["small", "small", "small"]) for _ in range(6)]
    for rid in rids:
        req = zuul.wait_request(rid)
        assert req["state"] == "fulfilled", req
        zones = zones_of(zuul, req)
        assert len(set(zones)) == 1 and zones[0] in cloud_zones, zones


def test_without_zones_the_cloud_places_nodes(deployment, zuul):
    """Neither the pool nor the cloud names zones: launches name none and
    the cloud places the servers (the fake cloud's default zone)."""
    cfg = fake_config(deployment)
    deployment.start_launcher("sim", deployment.write_config(cfg))
    _, req = served(zuul, ["small", "small"])
    assert zones_of(zuul, req) == ["fake-az-1", "fake-az-1"]


def test_a_pool_zone_the_cloud_lacks_fails_the_launch(deployment, zuul):
    """The fake cloud refuses a zone it does not have, as a real one does:
    the launch fails and the request with it."""
    cfg = fake_config(deployment, provider={"cloud-availability-zones": ["z1"],
                                            "launch-retries": 1},
                      pool={"availability-zones": ["nowhere"]})
    p = deployment.start_launcher("sim", deployment.write_config(cfg))
    rid = zuul.submit(["small"])
    assert zuul.wait_request(rid)["state"] == "failed"
    assert "availability zone nowhere does not exist" in p.output()


def ready_in_two_zones(zk, zuul):
    """Launch 1-node requests until two of them landed in different zones;
    give those two back (ready, unallocated) and leave the others allocated
    to their requests. Returns {zone: node id} of the two."""
    back = {}
    for _ in range(40):
        rid, req = served(zuul, ["small"], reuse=False)  # launch, do not take those back
        (nid,) = req["nodes"]
        az = zuul.node(nid)["az"]
        if az not in back:
            give_back(zk, zuul, rid, [nid])
            back[az] = nid
        if len(back) == 2:
            return back
    raise AssertionError("40 launches all landed in one zone")


def test_a_reused_node_fixes_the_zone_of_the_nodeset(deployment, zk, zuul):
    """One ready node in each of two zones; a 2-node request reuses one of
    them and launches the second node in the same zone rather than reuse
    the other ready node, which stays ready for someone else."""
    cfg = fake_config(deployment, pool={"availability-zones": ZONES})
    deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    for _ in range(2):
        back = ready_in_two_zones(zk, zuul)
        assert set(unallocated_ready(zuul)) == set(back.values())
        rid, req = served(zuul, ["small", "small"])
        zones = zones_of(zuul, req)
        assert len(set(zones)) == 1, zones
        (zone,) = set(zones)
        reused = [n for n in req["nodes"] if n in back.values()]
        assert reused == [back[zone]], (req["nodes"], back)
        (new,) = [n for n in req["nodes"] if n != back[zone]]
        insts = wait_for(lambda: new in cloud.by_node() and cloud.by_node(), what="instance")
        assert insts[new]["az"] == zone
        (other_zone,) = set(back) - {zone}
        assert list(unallocated_ready(zuul)) == [back[other_zone]]
        # the nodeset is used and done with, and the leftover ready node
        # taken out of the way: the next round starts from no ready node
        zuul.finish(zuul.accept(rid))
        wait_for(lambda: all(zuul.node(n) is None for n in req["nodes"]),
                 what="used nodes deleted")
        mark_used(zk, zuul, back[other_zone])


def mark_used(zk, zuul, nid):
    """Take a ready node out of the way as Zuul would after using it."""
    lock = zk.Lock("/nodepool/nodes/%s/lock" % nid)
    assert lock.acquire(timeout=10)
    n = zuul.node(nid)
    n["state"] = "used"
    n["state_time"] = time.time()
    zuul.store_node(nid, n)
    lock.release()
    wait_for(lambda: zuul.node(nid) is None, what="node %s deleted" % nid)


def ready_node(zk, zuul, label, az="keep"):
    """A ready, unallocated node of label; az given: its record rewritten
    under its lock to that zone (None: a cloud that reported none)."""
    rid, req = served(zuul, [label], reuse=False)
    (nid,) = req["nodes"]
    give_back(zk, zuul, rid, [nid])
    if az != "keep":
        lock = zk.Lock("/nodepool/nodes/%s/lock" % nid)
        assert lock.acquire(timeout=10)
        n = zuul.node(nid)
        n["az"] = az
        zuul.store_node(nid, n)
        lock.release()
    return nid


def test_a_node_without_zone_fixes_nothing_but_is_passed_over(deployment, zk, zuul):
    """Upstream's exact rule on a null az: a ready node without a zone does
    not fix the nodeset's zone, but once a zone is fixed it does not match
    it, so it is not reused for that request."""
    cfg = fake_config(deployment, labels={"x": {}, "y": {}},
                      pool={"availability-zones": ZONES})
    deployment.start_launcher("sim", deployment.write_config(cfg))
    # [x, y]: x reuses a zoned node, which fixes its zone; the zone-less y
    # node does not match and a y node is launched in that zone
    zoned = ready_node(zk, zuul, "x")
    zone = zuul.node(zoned)["az"]
    nozone = ready_node(zk, zuul, "y", az=None)
    rid, req = served(zuul, ["x", "y"])
    assert req["nodes"][0] == zoned and req["nodes"][1] != nozone
    assert zones_of(zuul, req) == [zone, zone]
    assert list(unallocated_ready(zuul)) == [nozone]
    # [y, x]: the zone-less y node is reused first and fixes nothing, so
    # the ready x node, whatever its zone, is reused too
    other = ready_node(zk, zuul, "x")
    rid, req = served(zuul, ["y", "x"])
    assert req["nodes"] == [nozone, other]
    assert zones_of(zuul, req) == [None, zuul.node(other)["az"]]
