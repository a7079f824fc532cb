"""The launcher with the static driver, played against as Zuul would
(reference sections 2 and 3.3): registration, reuse, nodesets, decline,
deferral, cancellation, recycling of used nodes."""
import json
import time

from conftest import deletion_passes, wait_for

FAST = {"nodepoold": {"cleanup-interval": 1, "delete-interval": 0.5}}


def static_config(hosts, labels=None, pool_extra=None, provider="static-a", extra=None):
    labels = labels or sorted({l for h in hosts for l in h["labels"]})
    pool = {"name": "main", "nodes": hosts}
    pool.update(pool_extra or {})
    cfg = {
        "labels": [{"name": l} for l in labels],
        "providers": [{"name": provider, "driver": "static", "pools": [pool]}],
    }
    cfg.update(FAST)
    cfg.update(extra or {})
    return cfg


def host(name, labels, **kw):
    h = {"name": name, "labels": labels, "host-key-checking": False}
    h.update(kw)
    return h


def ready_nodes(zuul, label=None):
    return {nid: n for nid, n in zuul.nodes().items()
            if n["state"] == "ready" and (label is None or label in n["type"])}


def test_registers_slots_and_pool_component(deployment, zuul):
    cfg = static_config([host("host-a", ["small"], **{"max-parallel-jobs": 2}),
                         host("host-b", ["small", "large"], username="ci",
                              **{"connection-port": 2222})],
                        pool_extra={"node-attributes": {"color": "blue"}})
    p = deployment.start_launcher("static-a", deployment.write_config(cfg))
    nodes = wait_for(lambda: len(ready_nodes(zuul)) == 3 and ready_nodes(zuul),
                     what="3 ready nodes")
    by_host = sorted((n["hostname"], n["slot"]) for n in nodes.values())
    assert by_host == [("host-a", 0), ("host-a", 1), ("host-b", 0)]
    for n in nodes.values():
        assert n["provider"] == "static-a" and n["pool"] == "main"
        assert n["launcher"] == "static driver"
        assert n["external_id"] == n["hostname"] == n["interface_ip"]
        assert n["attributes"] == {"color": "blue"}
        assert n["allocated_to"] is None
    b = [n for n in nodes.values() if n["hostname"] == "host-b"][0]
    assert b["username"] == "ci" and b["connection_port"] == 2222 and b["ssh_port"] == 2222
    assert sorted(b["type"]) == ["large", "small"]
    pools = wait_for(lambda: zuul.pools(), what="pool component")
    assert len(pools) == 1
    assert pools[0]["provider_name"] == "static-a" and pools[0]["name"] == "main"
    assert sorted(pools[0]["supported_labels"]) == ["large", "small"]
    assert pools[0]["kind"] == "pool" and pools[0]["state"] == "running"
    assert pools[0]["id"].endswith(pools[0]["id"][-32:])
    assert "-PoolWorker.static-a-main-" in pools[0]["id"]
    assert p.alive()


def test_request_served_and_node_recycled(deployment, zuul):
    cfg = static_config([host("host-a", ["small"])])
    deployment.start_launcher("static-a", deployment.write_config(cfg))
    first = wait_for(lambda: ready_nodes(zuul), what="ready node")
    (first_id,) = first.keys()

    rid = zuul.submit(["small"], tenant="tenant-one", requestor="zuul-sched")
    req = zuul.wait_request(rid)
    assert req["state"] == "fulfilled"
    assert req["nodes"] == [first_id]
    n = zuul.node(first_id)
    assert n["allocated_to"] == rid
    assert n["tenant_name"] == "tenant-one" and n["requestor"] == "zuul-sched"

    held = zuul.accept(rid)
    assert zuul.node(first_id)["state"] == "in-use"
    zuul.finish(held)
    # the used node is deleted and a new READY node takes its slot
    wait_for(lambda: zuul.node(first_id) is None, what="used node deleted")
    again = wait_for(lambda: ready_nodes(zuul), what="re-registered node")
    (new_id,) = again.keys()
    assert new_id != first_id
    assert again[new_id]["hostname"] == "host-a" and again[new_id]["slot"] == 0


def test_nodeset_order_with_duplicates(deployment, zuul):
    cfg = static_config([host("a1", ["a"]), host("a2", ["a"]), host("b1", ["b"])])
    deployment.start_launcher("static-a", deployment.write_config(cfg))
    wait_for(lambda: len(ready_nodes(zuul)) == 3, what="3 ready nodes")
    rid = zuul.submit(["a", "b", "a"])
    req = zuul.wait_request(rid)
    assert req["state"] == "fulfilled"
    labels = [zuul.node(nid)["type"] for nid in req["nodes"]]
    assert labels == [["a"], ["b"], ["a"]]
    assert len(set(req["nodes"])) == 3


def test_unknown_label_declined_and_failed(deployment, zuul):
    cfg = static_config([host("host-a", ["small"])], labels=["small", "huge"])
    deployment.start_launcher("static-a", deployment.write_config(cfg))
    pool = wait_for(lambda: zuul.pools(), what="pool component")[0]
    wait_for(lambda: ready_nodes(zuul), what="ready node")
    rid = zuul.submit(["huge"])
    req = zuul.wait_request(rid)
    assert req["state"] == "failed"
    assert req["declined_by"] == [pool["id"]]
    assert req["nodes"] == []


def test_more_nodes_than_pool_has_is_declined(deployment, zuul):
    cfg = static_config([host("host-a", ["small"])])
    deployment.start_launcher("static-a", deployment.write_config(cfg))
    wait_for(lambda: ready_nodes(zuul), what="ready node")
    rid = zuul.submit(["small", "small"])
    assert zuul.wait_request(rid)["state"] == "failed"


def test_busy_label_deferred_until_node_returns(deployment, zuul):
    cfg = static_config([host("host-a", ["small"])])
    p = deployment.start_launcher("static-a", deployment.write_config(cfg))
    wait_for(lambda: ready_nodes(zuul), what="ready node")
    r1 = zuul.submit(["small"])
    assert zuul.wait_request(r1)["state"] == "fulfilled"
    held = zuul.accept(r1)
    r2 = zuul.submit(["small"])
    time.sleep(1.0)
    req2 = zuul.request(r2)
    # deferred, not declined: still requested, nobody declined it
    assert req2["state"] == "requested" and req2.get("declined_by", []) == []
    zuul.finish(held)
    req2 = zuul.wait_request(r2)
    assert req2["state"] == "fulfilled"
    assert zuul.node(req2["nodes"][0])["allocated_to"] == r2
    # the used node's slot is what r2 waited for: recycled at once, never
    # deferred as a cloud's deletions are behind the requests
    deferred, at_once = deletion_passes(p)
    assert deferred == 0 and at_once >= 1, (deferred, at_once)


def test_request_order_priority_then_relative_priority(deployment, zuul):
    cfg = static_config([host("host-a", ["small"])])
    path = deployment.write_config(cfg)
    # submit before the launcher starts, so it sees them all at once
    low = zuul.submit(["small"], priority=200)
    mid = zuul.submit(["small"], priority=100, relative_priority=5)
    high = zuul.submit(["small"], priority=100, relative_priority=1)
    deployment.start_launcher("static-a", path)
    served = []
    for _ in range(3):
        rid = wait_for(lambda: next((r for r in (low, mid, high) if r not in served and
                                     (zuul.request(r) or {}).get("state") == "fulfilled"),
                                    None), what="next fulfilled request")
        served.append(rid)
        zuul.finish(zuul.accept(rid))
    assert served == [high, mid, low]


def test_cancelled_request_releases_nodes(deployment, zuul):
    cfg = static_config([host("host-a", ["small"])])
    deployment.start_launcher("static-a", deployment.write_config(cfg))
    (nid,) = wait_for(lambda: ready_nodes(zuul), what="ready node").keys()
    rid = zuul.submit(["small"])
    assert zuul.wait_request(rid)["state"] == "fulfilled"
    # Zuul gives up before taking the nodes: the allocation is cleared
    zuul.zk.delete("/nodepool/requests/" + rid)
    wait_for(lambda: (zuul.node(nid) or {}).get("allocated_to") is None,
             what="allocation cleared")
    assert zuul.node(nid)["state"] == "ready"
    rid2 = zuul.submit(["small"])
    assert zuul.wait_request(rid2)["nodes"] == [nid]


def test_provider_preference_and_two_workers(deployment, zuul):
    cfg = {
        "labels": [{"name": "small"}],
        "providers": [
            {"name": "static-a", "driver": "static",
             "pools": [{"name": "main", "nodes": [host("a1", ["small"])]}]},
            {"name": "static-b", "driver": "static",
             "pools": [{"name": "main", "nodes": [host("b1", ["small"])]}]},
        ],
    }
    cfg.update(FAST)
    path = deployment.write_config(cfg)
    deployment.start_launcher("static-a", path)
    deployment.start_launcher("static-b", path)
    wait_for(lambda: len(zuul.pools()) == 2 and len(ready_nodes(zuul)) == 2,
             what="two pools, two nodes")
    for prov in ("static-b", "static-a", "static-b"):
        rid = zuul.submit(["small"], provider=prov)
        req = zuul.wait_request(rid)
        assert req["state"] == "fulfilled"
        assert zuul.node(req["nodes"][0])["provider"] == prov
        zuul.finish(zuul.accept(rid))


def test_failed_only_when_every_pool_declined(deployment, zuul):
    cfg = {
        "labels": [{"name": "small"}, {"name": "only-b"}],
        "providers": [
            {"name": "static-a", "driver": "static",
             "pools": [{"name": "main", "nodes": [host("a1", ["small"])]}]},
            {"name": "static-b", "driver": "static",
             "pools": [{"name": "main", "nodes": [host("b1", ["only-b"])]}]},
        ],
    }
    cfg.update(FAST)
    path = deployment.write_config(cfg)
    deployment.start_launcher("static-a", path)
    deployment.start_launcher("static-b", path)
    wait_for(lambda: len(zuul.pools()) == 2 and len(ready_nodes(zuul)) == 2,
             what="two pools")
    rid = zuul.submit(["only-b"])
    req = zuul.wait_request(rid)
    assert req["state"] == "fulfilled"
    assert zuul.node(req["nodes"][0])["provider"] == "static-b"
    rid = zuul.submit(["nothing-has-this"])
    req = zuul.wait_request(rid)
    assert req["state"] == "failed"
    assert sorted(req["declined_by"]) == sorted(p["id"] for p in zuul.pools())


def test_launcher_stop_removes_components(deployment, zuul):
    cfg = static_config([host("host-a", ["small"])])
    p = deployment.start_launcher("static-a", deployment.write_config(cfg))
    wait_for(lambda: zuul.pools(), what="pool component")
    assert p.stop() == 0
    assert zuul.pools() == []
    launchers = zuul.zk.get_children("/nodepool/components/launcher")
    assert launchers == []


def test_malformed_records_are_skipped(deployment, zuul):
    zuul.zk.ensure_path("/nodepool/requests")
    zuul.zk.create("/nodepool/requests/100-", b"{not json", sequence=True)
    zuul.zk.ensure_path("/nodepool/nodes")
    zuul.zk.create("/nodepool/nodes/", b'["an", "array"]', sequence=True)
    cfg = static_config([host("host-a", ["small"])])
    p = deployment.start_launcher("static-a", deployment.write_config(cfg))
    wait_for(lambda: ready_nodes(zuul), what="ready node")
    rid = zuul.submit(["small"])
    assert zuul.wait_request(rid)["state"] == "fulfilled"
    assert p.alive()
    assert "malformed" in p.output()


def test_abandoned_in_use_node_recycled(deployment, zuul):
    """An in-use node whose holder vanished (unlocked) is deleted and the
    static slot re-registered, as DeletedNodeWorker."""
    cfg = static_config([host("host-a", ["small"])])
    deployment.start_launcher("static-a", deployment.write_config(cfg))
    (nid,) = wait_for(lambda: ready_nodes(zuul), what="ready node").keys()
    rid = zuul.submit(["small"])
    zuul.wait_request(rid)
    held = zuul.accept(rid)
    held[0][1].release()  # Zuul "crashes": in-use, unlocked
    wait_for(lambda: zuul.node(nid) is None, what="abandoned node deleted")
    wait_for(lambda: ready_nodes(zuul), what="slot re-registered")


def test_label_shared_across_pools_and_node_fields(deployment, zuul):
    cfg = {
        "labels": [{"name": "small"}],
        "providers": [{
            "name": "static-a", "driver": "static",
            "pools": [
                {"name": "p1", "nodes": [host("h1", ["small"], **{
                    "python-path": "/usr/bin/python3", "shell-type": "bash",
                    "connection-type": "network_cli", "username": "admin"})]},
                {"name": "p2", "nodes": [host("h2", ["small"])]},
            ]}],
    }
    cfg.update(FAST)
    deployment.start_launcher("static-a", deployment.write_config(cfg))
    nodes = wait_for(lambda: len(ready_nodes(zuul)) == 2 and ready_nodes(zuul),
                     what="2 ready nodes")
    pools = wait_for(lambda: len(zuul.pools()) == 2 and zuul.pools(), what="2 pools")
    assert sorted(p["name"] for p in pools) == ["p1", "p2"]
    h1 = [n for n in nodes.values() if n["hostname"] == "h1"][0]
    assert h1["pool"] == "p1" and h1["python_path"] == "/usr/bin/python3"
    assert h1["shell_type"] == "bash" and h1["connection_type"] == "network_cli"
    assert h1["username"] == "admin"
    r1, r2 = zuul.submit(["small"]), zuul.submit(["small"])
    got = {zuul.node(zuul.wait_request(r)["nodes"][0])["pool"] for r in (r1, r2)}
    assert got == {"p1", "p2"}


def test_slot_waits_for_old_session(deployment, zuul, zk_server, chroot):
    """After kill -9 the old worker's ZooKeeper session outlives it, and a
    node registration it sent may land after the new worker read the node
    list. Registrations are made one launcher at a time, under the
    provider's lock (worker/quota.c): the old worker sent its registration
    holding it, so the new worker registers missing slots only once that
    session has ended: never two nodes for one slot, while nodes already
    there keep serving."""
    from conftest import kazoo_client
    old = kazoo_client(zk_server, chroot)
    try:
        old.ensure_path("/nodepool/components/pool")
        old.create("/nodepool/components/pool/oldhost-", json.dumps({
            "kind": "pool", "hostname": "oldhost", "state": "running",
            "id": "oldhost-PoolWorker.static-a-main-" + "0" * 32,
            "name": "main", "provider_name": "static-a",
            "supported_labels": ["small"], "priority": 100, "nodepoold": "0.1.0",
            "paused": False}).encode(), ephemeral=True, sequence=True)
        # the old worker was registering: it holds the provider's lock
        assert old.Lock("/nodepool/launcher-quota/static-a", "oldhost").acquire(timeout=10)
        # host-b's slot is registered; host-a's node was just deleted by
        # the old worker, whose re-registration is still in flight
        nb = {"state": "ready", "provider": "static-a", "pool": "main",
              "type": ["small"], "hostname": "host-b", "external_id": "host-b",
              "interface_ip": "host-b", "username": "zuul", "connection_port": 22,
              "connection_type": "ssh", "python_path": "auto", "slot": 0,
              "launcher": "static driver", "host_keys": [], "attributes": None,
              "allocated_to": None, "state_time": time.time()}
        zuul.zk.create("/nodepool/nodes/", json.dumps(nb).encode(), sequence=True,
                       makepath=True)
        cfg = static_config([host("host-a", ["small"]), host("host-b", ["small"])])
        p = deployment.start_launcher("static-a", deployment.write_config(cfg))
        wait_for(lambda: len(zuul.pools()) == 2, what="the new worker's pool")
        # host-b serves meanwhile
        rid = zuul.submit(["small"])
        req = zuul.wait_request(rid)
        assert req["state"] == "fulfilled"
        assert [zuul.node(nid)["hostname"] for nid in req["nodes"]] == ["host-b"]
        zuul.zk.delete("/nodepool/requests/" + rid)
        assert sorted(n["hostname"] for n in zuul.nodes().values()) == ["host-b"]
        # the old worker's registration lands, then its session ends
        na = dict(nb, hostname="host-a", external_id="host-a", interface_ip="host-a")
        old.create("/nodepool/nodes/", json.dumps(na).encode(), sequence=True)
    finally:
        old.stop()
        old.close()
    wait_for(lambda: len(zuul.pools()) == 1, what="the old pool registration gone")
    time.sleep(1.5)
    hosts = sorted(n["hostname"] for n in zuul.nodes().values())
    assert hosts == ["host-a", "host-b"]
    assert p.alive()


def test_slot_never_doubled_under_churn(deployment, zuul):
    """Two jobs recycling two hosts back to back: a slot whose new node is
    written but not yet in the launcher's cache must not be registered a
    second time by a sync the other host's recycling starts. A watcher
    samples the live (not deleting) nodes per host the whole time."""
    import threading
    cfg = static_config([host("h1", ["small"]), host("h2", ["small"])])
    # no dedupe pass to hide a double (a copy: FAST is shared by every test)
    cfg["nodepoold"] = dict(cfg["nodepoold"], **{"cleanup-interval": 3600})
    deployment.start_launcher("static-a", deployment.write_config(cfg))
    wait_for(lambda: len(ready_nodes(zuul)) == 2, what="2 ready nodes")
    stop = threading.Event()
    worst = {}
    errors = []

    def watch():
        while not stop.is_set():
            per = {}
            for n in zuul.nodes().values():
                if n["state"] not in ("deleting", "deleted"):
                    per[n["hostname"]] = per.get(n["hostname"], 0) + 1
            for h, c in per.items():
                worst[h] = max(worst.get(h, 0), c)
            time.sleep(0.01)

    def job(k):
        try:
            for _ in range(k):
                rid = zuul.submit(["small"])
                req = zuul.wait_request(rid)
                assert req["state"] == "fulfilled", req
                zuul.finish(zuul.accept(rid))
        except Exception as e:
            errors.append(repr(e))

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    jobs = [threading.Thread(target=job, args=(40,), daemon=True) for _ in range(2)]
    for t in jobs:
        t.start()
    for t in jobs:
        t.join(240)
    wait_for(lambda: len(ready_nodes(zuul)) == 2, what="both hosts ready again")
    time.sleep(0.5)
    stop.set()
    w.join(10)
    assert errors == []
    assert worst == {"h1": 1, "h2": 1}
    assert sorted(n["hostname"] for n in zuul.nodes().values()) == ["h1", "h2"]
