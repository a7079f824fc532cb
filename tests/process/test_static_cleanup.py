"""Static driver host keys against real sshd, config changes, and the
launcher's cleanup rules (reference 2.7): lost requests, orphan
allocations, max-ready-age, holds, empty node znodes, max-concurrency."""
import json
import os
import subprocess
import time

import pytest

from conftest import TOP, wait_for
from test_static_launcher import FAST, host, ready_nodes, static_config


@pytest.fixture
def sshd(tmp_path):
    """Start real sshd servers on loopback ports; stopped by pid."""
    started = []

    def start(name):
        d = str(tmp_path / name)
        port = int(subprocess.check_output(
            ["sh", os.path.join(TOP, "tests/sshd-fixture.sh"), "start", d]).strip())
        with open(os.path.join(d, "host_keys")) as f:
            keys = [l.strip() for l in f if l.strip()]
        started.append(d)
        return port, keys

    yield start
    for d in started:
        subprocess.call(["sh", os.path.join(TOP, "tests/sshd-fixture.sh"), "stop", d])


def test_host_keys_scanned_and_checked(deployment, zuul, sshd):
    port1, keys1 = sshd("one")
    port2, keys2 = sshd("two")
    cfg = static_config([
        {"name": "127.0.0.1", "labels": ["small"], "connection-port": port1,
         "host-key": keys1[0]},
        # a host key that is not this server's: never registered
        {"name": "127.0.0.1", "labels": ["small"], "connection-port": port2,
         "host-key": keys1[1]},
    ])
    p = deployment.start_launcher("static-a", deployment.write_config(cfg))
    nodes = wait_for(lambda: ready_nodes(zuul), what="ready node")
    time.sleep(1.0)
    nodes = ready_nodes(zuul)
    assert len(nodes) == 1
    (n,) = nodes.values()
    assert n["connection_port"] == port1
    assert sorted(n["host_keys"]) == sorted(keys1)
    assert "configured host-key not among" in p.output()


def test_unreachable_host_kept_out_until_it_answers(deployment, zuul, sshd, tmp_path):
    port1, _ = sshd("up")
    # a port nobody listens on yet
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    late_port = s.getsockname()[1]
    s.close()
    cfg = static_config([
        {"name": "127.0.0.1", "labels": ["small"], "connection-port": port1, "timeout": 1},
        {"name": "127.0.0.1", "labels": ["small"], "connection-port": late_port, "timeout": 1},
    ])
    p = deployment.start_launcher("static-a", deployment.write_config(cfg))
    wait_for(lambda: ready_nodes(zuul), what="reachable host registered")
    time.sleep(1.5)
    assert [n["connection_port"] for n in ready_nodes(zuul).values()] == [port1]
    assert "unreachable, kept out of service" in p.output()
    # the host comes up: it is registered without any operator action
    d = str(tmp_path / "late")
    fixture = os.path.join(TOP, "tests/sshd-fixture.sh")
    subprocess.check_call(["sh", fixture, "start", d, str(late_port)],
                          stdout=subprocess.DEVNULL)
    try:
        wait_for(lambda: len(ready_nodes(zuul)) == 2, timeout=30, what="late host registered")
        late = [n for n in ready_nodes(zuul).values() if n["connection_port"] == late_port]
        assert len(late) == 1 and len(late[0]["host_keys"]) == 3
    finally:
        subprocess.call(["sh", fixture, "stop", d])


def test_config_change_across_restart(deployment, zuul):
    cfg = static_config([host("keep", ["small"]), host("drop", ["small"])],
                        pool_extra={"node-attributes": {"v": 1}})
    p = deployment.start_launcher("static-a", deployment.write_config(cfg))
    before = wait_for(lambda: len(ready_nodes(zuul)) == 2 and ready_nodes(zuul),
                      what="2 ready nodes")
    keep_id = [i for i, n in before.items() if n["hostname"] == "keep"][0]
    assert p.stop() == 0
    cfg = static_config([host("keep", ["small", "extra"]), host("new", ["small"])],
                        pool_extra={"node-attributes": {"v": 2}})
    deployment.start_launcher("static-a", deployment.write_config(cfg))

    def settled():
        nodes = zuul.nodes()
        names = sorted(n["hostname"] for n in nodes.values() if n["state"] == "ready")
        return names == ["keep", "new"] and nodes
    nodes = wait_for(settled, what="drop removed, new added")
    # the kept host is updated in place: same id, new labels and attributes
    assert nodes[keep_id]["type"] == ["small", "extra"]
    assert nodes[keep_id]["attributes"] == {"v": 2}


def test_lost_request_reset_and_served(deployment, zuul):
    cfg = static_config([host("host-a", ["small"])])
    deployment.start_launcher("static-a", deployment.write_config(cfg))
    wait_for(lambda: ready_nodes(zuul), what="ready node")
    # a request some launcher accepted and then died holding (no lock left)
    rid = zuul.submit(["small"])
    # race the launcher: overwrite as pending at once; it may already have
    # served it, in which case the test is moot
    req = zuul.request(rid)
    if req["state"] == "requested":
        req["state"] = "pending"
        zuul.zk.set("/nodepool/requests/" + rid, json.dumps(req).encode())
    req = zuul.wait_request(rid, timeout=30)
    assert req["state"] == "fulfilled"


def test_orphan_allocation_cleared(deployment, zuul):
    cfg = static_config([host("host-a", ["small"])])
    deployment.start_launcher("static-a", deployment.write_config(cfg))
    (nid,) = wait_for(lambda: ready_nodes(zuul), what="ready node").keys()
    n = zuul.node(nid)
    n["allocated_to"] = "100-0000099999"  # no such request
    zuul.store_node(nid, n)
    wait_for(lambda: zuul.node(nid)["allocated_to"] is None, what="allocation cleared")
    assert zuul.node(nid)["state"] == "ready"


def test_max_ready_age_recycles(deployment, zuul):
    cfg = static_config([host("host-a", ["small"])])
    cfg["labels"] = [{"name": "small", "max-ready-age": 1}]
    deployment.start_launcher("static-a", deployment.write_config(cfg))
    (first,) = wait_for(lambda: ready_nodes(zuul), what="ready node").keys()
    wait_for(lambda: zuul.node(first) is None, timeout=15, what="aged node deleted")
    wait_for(lambda: ready_nodes(zuul), what="re-registered")
    assert first not in ready_nodes(zuul)


def test_hold_expiration(deployment, zuul):
    cfg = static_config([host("host-a", ["small"]), host("host-b", ["small"])],
                        extra={"max-hold-age": 3600})
    deployment.start_launcher("static-a", deployment.write_config(cfg))
    nodes = wait_for(lambda: len(ready_nodes(zuul)) == 2 and ready_nodes(zuul),
                     what="2 ready nodes")
    a, b = sorted(nodes)
    for nid, exp in ((a, 1), (b, None)):
        lock = zuul.zk.Lock("/nodepool/nodes/%s/lock" % nid)
        assert lock.acquire(timeout=5)
        n = zuul.node(nid)
        n["state"] = "hold"
        n["hold_job"] = "tenant project job"
        n["comment"] = "debugging"
        n["hold_expiration"] = exp
        zuul.store_node(nid, n)
        lock.release()
    # a's own hold_expiration (1 s) ends its hold; b is kept (max-hold-age 1 h)
    wait_for(lambda: zuul.node(a) is None, timeout=15, what="expired hold deleted")
    time.sleep(1.5)
    assert zuul.node(b)["state"] == "hold"


def test_empty_node_znode_removed(deployment, zuul):
    zuul.zk.ensure_path("/nodepool/nodes")
    zuul.zk.create("/nodepool/nodes/0000099999", b"")
    cfg = static_config([host("host-a", ["small"])])
    deployment.start_launcher("static-a", deployment.write_config(cfg))
    wait_for(lambda: not zuul.zk.exists("/nodepool/nodes/0000099999"), timeout=15,
             what="empty znode removed")


def test_max_concurrency_zero_serves_nothing(deployment, zuul):
    cfg = static_config([host("host-a", ["small"])])
    cfg["providers"][0]["max-concurrency"] = 0
    deployment.start_launcher("static-a", deployment.write_config(cfg))
    wait_for(lambda: ready_nodes(zuul), what="ready node")
    rid = zuul.submit(["small"])
    time.sleep(1.5)
    req = zuul.request(rid)
    assert req["state"] == "requested" and req.get("declined_by", []) == []


def test_used_node_locked_by_zuul_is_not_deleted(deployment, zuul):
    cfg = static_config([host("host-a", ["small"])])
    deployment.start_launcher("static-a", deployment.write_config(cfg))
    (nid,) = wait_for(lambda: ready_nodes(zuul), what="ready node").keys()
    rid = zuul.submit(["small"])
    zuul.wait_request(rid)
    held = zuul.accept(rid)
    n = zuul.node(nid)
    n["state"] = "used"
    zuul.store_node(nid, n)  # used, but Zuul still holds the lock
    time.sleep(1.5)
    assert zuul.node(nid)["state"] == "used"
    held[0][1].release()
    wait_for(lambda: zuul.node(nid) is None, what="released used node deleted")


def test_stale_request_locks_removed(deployment, zuul):
    """Request-lock GC (reference 2.7; upstream's _cleanupNodeRequestLocks
    with LOCK_CLEANUP made settable): a dir under /nodepool/requests-lock
    whose request is gone is deleted with what is in it once its mtime is
    older than request-lock-cleanup-age; the lock dir of a request that
    exists is kept however old; a young orphan is kept until it is old. The
    age is the znode's mtime, as upstream's, not its ctime."""
    import uuid
    age = 3.0
    root = "/nodepool/requests-lock/"
    zk = zuul.zk
    # orphans from before the launcher started: one with a kazoo-style
    # contender left in it, one empty, and one whose mtime is renewed below
    zk.ensure_path(root + "100-0000000901")
    contender = zk.create(root + "100-0000000901/%s__lock__" % uuid.uuid4().hex,
                          b"somehost", ephemeral=True, sequence=True)
    zk.ensure_path(root + "100-0000000902")
    zk.ensure_path(root + "100-0000000903")
    created = time.time()

    def mtime(name):
        st = zk.exists(root + name)
        return st and st.mtime / 1000.0

    def seen_until_old(name):
        """Polls until name is gone; asserts it was never gone while it was
        younger than the age. Returns how many times it was seen."""
        seen, last_mtime = 0, None
        while True:
            m = mtime(name)
            now = time.time()
            if m is None:
                assert last_mtime is not None, "%s never seen" % name
                assert now - last_mtime > age, "%s deleted while young" % name
                return seen
            last_mtime = m
            seen += 1
            if now - m > age + 15:
                raise AssertionError("timed out waiting for %s to be removed" % name)
            time.sleep(0.05)

    cfg = static_config([host("host-a", ["small"])],
                        extra={"nodepoold": {"cleanup-interval": 0.5, "delete-interval": 0.5,
                                             "request-lock-cleanup-age": age}})
    p = deployment.start_launcher("static-a", deployment.write_config(cfg))
    wait_for(lambda: ready_nodes(zuul), what="ready node")
    # a request served: its lock dir stays while the request exists
    rid = zuul.submit(["small"])
    assert zuul.wait_request(rid)["state"] == "fulfilled"
    assert zk.exists(root + rid)
    # renew 903's mtime (written, as nothing in Nodepool writes a lock dir)
    # before it is old by its ctime
    while time.time() - created < age - 1.5:
        time.sleep(0.05)
    zk.set(root + "100-0000000903", b"x")
    st = zk.exists(root + "100-0000000903")
    assert st.mtime > st.ctime

    wait_for(lambda: not zk.exists(root + "100-0000000901") and
             not zk.exists(root + "100-0000000902"), 15, what="old orphans removed")
    assert not zk.exists(contender)
    # 903 was old by its ctime when the others went, not by its mtime
    assert zk.exists(root + "100-0000000903")
    assert seen_until_old("100-0000000903") > 0
    # a young orphan created now is kept until it is old
    zk.ensure_path(root + "100-0000000904")
    assert seen_until_old("100-0000000904") > 0
    # the served request's dir is older than the age by now, and kept
    assert time.time() - mtime(rid) > age
    assert zk.exists(root + rid)
    # once the request is gone (Zuul deletes it), so is its lock dir
    zk.delete("/nodepool/requests/" + rid)
    wait_for(lambda: not zk.exists(root + rid), 15, what="the request's lock dir removed")
    out = p.output()
    assert "removing request lock 100-0000000901: its request is gone" in out
    assert "removing request lock %s" % rid in out
