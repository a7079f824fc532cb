"""A request's nodes made in its accept's multi (issue 25, worker/handler.c
plan_launches).

When a launcher takes a request while its provider's quota round can be
opened on the spot (its quota lock held since a round that saw the whole
view) and would launch every node at once, the request's lock, its
`pending` write and one INIT node per wanted node go to ZooKeeper in one
transaction. These tests watch that multi on the wire (zkwire.ZkWireProxy)
and check what Zuul and ZooKeeper see:

  - a nodeset of two is launched that way and fulfilled; each node was
    created in the very transaction that made the request's lock
    (the node's czxid is the lock dir's);
  - another launcher takes the request's lock just before the multi
    reaches the server (the race two launchers of one provider run): the
    multi is refused and makes nothing, not one node, and the request is
    served once the other launcher lets it go, with exactly its nodes;
  - the multi lands and its reply is lost (the session lives on): the
    launcher finds the nodes it made and goes on with them; the request is
    fulfilled with exactly those, nothing else is created;
  - two nodepoold serving one provider race for every request: the nodes
    ever made are exactly those the requests were fulfilled with.

A node's launch (the cloud's create) then starts at once, while the node's
lock and `building` are on their way: when another launcher locks the node
first, the launch is cancelled, or its instance deleted if it had ended.

The first request of a fresh launcher takes the quota lock the usual way,
so requests are served one by one until the aimed multi passes (a bounded
number of tries). Tests wait on conditions with generous deadlines, never
on times."""
import json
import os
import re
import signal

import pytest

from conftest import wait_for
from fakecloud import Cloud
from npd import Supervisor
from zkwire import CREATES, OP_MULTI, OP_SETDATA, wire_proxy

LABEL = "label-f"
TRIES = 10



@pytest.fixture
def wire(zk_server):
    """The test ZooKeeper's plain port behind a ZkWireProxy."""
    with wire_proxy() as p:
        yield p

def start(deployment, wire, chroot, name, timeout=6, boot=0):
    """nodepoold with one fake provider (servers ACTIVE boot seconds after
    their create), through the proxy, plain TCP (the proxy reads the
    requests)."""
    s = Supervisor(deployment, name=name)
    full = {
        "zookeeper-servers": [{"host": "127.0.0.1", "port": wire.port, "chroot": chroot}],
        "zookeeper-timeout": timeout,
        "labels": [{"name": LABEL}],
        "providers": [{
            "name": "sim", "driver": "fake", "boot-delay": boot,
            "state-file": os.path.join(deployment.dir, "cloud-%s.json" % name),
            "pools": [{"name": "main", "max-servers": 6, "labels": [{"name": LABEL}]}],
        }],
        "webapp": {"port": s.web_port, "listen_address": "127.0.0.1"},
        "nodepoold": s.settings(),
    }
    s.write(None, raw=json.dumps(full))
    s.start_fg(extra=["-d"] if os.environ.get("NP_TEST_DEBUG") else ())
    s.wait_running(["sim"], timeout=60)
    return s


def accept_with_nodes(req):
    """The accept's multi carrying node creates: a request's `pending`
    and INIT creates under /nodepool/nodes/."""
    if req.op != OP_MULTI:
        return False
    sets = [o for o in req.ops if o.op == OP_SETDATA and "/nodepool/requests/" in (o.path or "")]
    creates = [o for o in req.ops
               if o.op in CREATES and (o.path or "").endswith("/nodepool/nodes/")]
    return bool(sets and creates and
                all(json.loads(o.data or b"{}").get("state") == "pending" for o in sets))


def multi_request_id(req):
    for o in req.ops:
        if o.op == OP_SETDATA and "/nodepool/requests/" in (o.path or ""):
            return o.path.rsplit("/", 1)[1]
    for o in req.ops:
        # a node's lock and `building`: the request it is allocated to
        if o.op == OP_SETDATA and "/nodepool/nodes/" in (o.path or ""):
            return json.loads(o.data).get("allocated_to")
    return None


def node_lock_building(req):
    """A new node's lock (its dir and our contender) and `building` in one
    multi."""
    if req.op != OP_MULTI:
        return False
    return any(o.op == OP_SETDATA and "/nodepool/nodes/" in (o.path or "") and
               json.loads(o.data or b"{}").get("state") == "building" for o in req.ops) and \
        any(o.op in CREATES and (o.path or "").endswith("/lock") for o in req.ops)


def multi_node_id(req):
    for o in req.ops:
        if o.op == OP_SETDATA and "/nodepool/nodes/" in (o.path or ""):
            return o.path.rsplit("/", 1)[1]
    return None


def no_nodes(zuul):
    return not zuul.nodes()


def serve(zuul, rid):
    """Zuul takes the fulfilled request and hands its nodes back."""
    req = zuul.wait_request(rid, timeout=60)
    assert req["state"] == "fulfilled", req
    zuul.finish(zuul.accept(rid))


def until_aimed(zuul, wire, labels, pred, lose, hook=None, before=None):
    """Submit requests one at a time (each served and its nodes gone
    before the next; before() called before each) until the aimed multi
    passes; the request it was for."""
    for _ in range(TRIES):
        wait_for(lambda: no_nodes(zuul), 60, what="no node left")
        if before is not None:
            before()
        wire.aim(pred, lose=lose, hook=hook)
        rid = zuul.submit(labels)
        wait_for(lambda: wire.fired.is_set() or
                 (zuul.request(rid) or {}).get("state") in ("fulfilled", "failed"),
                 60, what="request %s served or its accept aimed at" % rid)
        if wire.fired.is_set():
            assert multi_request_id(wire.hit) == rid, (wire.hit, rid)
            return rid
        wire.aim(None)
        serve(zuul, rid)
    raise AssertionError("no accept carried node creates in %d requests" % TRIES)


def czxid(zk, path):
    return zk.exists(path).czxid


def node_creates(req):
    return [o for o in req.ops if o.op in CREATES and (o.path or "").endswith("/nodepool/nodes/")]


def test_nodeset_of_two_made_with_the_accept(deployment, wire, zuul, chroot):
    s = start(deployment, wire, chroot, "npd-accept-two")
    try:
        rid = until_aimed(zuul, wire, [LABEL, LABEL], accept_with_nodes, "hook",
                          hook=lambda req: None)
        assert len(node_creates(wire.hit)) == 2, wire.hit
        req = zuul.wait_request(rid, timeout=60)
        assert req["state"] == "fulfilled", req
        assert len(req["nodes"]) == 2 and len(set(req["nodes"])) == 2, req
        # made in the transaction that made the request's lock
        lock_zxid = czxid(zuul.zk, "/nodepool/requests-lock/" + rid)
        for nid in req["nodes"]:
            assert czxid(zuul.zk, "/nodepool/nodes/" + nid) == lock_zxid, nid
            n = zuul.node(nid)
            assert n["state"] == "ready" and n["allocated_to"] == rid, n
        assert sorted(zuul.nodes()) == sorted(req["nodes"])
        serve(zuul, rid)
        wait_for(lambda: no_nodes(zuul), 60, what="the nodes deleted once used")
    finally:
        s.stop()


def test_rival_launcher_takes_the_lock_first(deployment, wire, zuul, chroot):
    """Another launcher of the provider locks the request just before our
    multi reaches the server: the multi is refused as a whole (its lock
    dir exists), so it made no node; the request is served once the rival
    declines it, with exactly its own nodes."""
    s = start(deployment, wire, chroot, "npd-accept-race")
    rival = {}

    def rival_locks(req):
        rid = multi_request_id(req)
        lock = zuul.zk.Lock("/nodepool/requests-lock/" + rid, "rival-launcher")
        assert lock.acquire(timeout=10)
        rival["lock"] = lock

    try:
        rid = until_aimed(zuul, wire, [LABEL, LABEL], accept_with_nodes, "hook",
                          hook=rival_locks)
        assert "lock" in rival
        wait_for(lambda: "request %s: accept with 2 launch(es) not applied" % rid in s.log(),
                 60, what="the refused accept seen by the launcher")
        # nothing of the refused multi exists: not one node
        assert zuul.nodes() == {}, zuul.nodes()
        req = zuul.request(rid)
        assert req["state"] == "requested" and not req.get("nodes"), req
        # the rival declines it (as upstream's decline: its pool id in
        # declined_by, back to requested) and unlocks
        data, st = zuul.zk.get("/nodepool/requests/" + rid)
        body = json.loads(data)
        body["declined_by"] = body.get("declined_by", []) + ["rival-host-PoolWorker.sim-main-0"]
        zuul.zk.set("/nodepool/requests/" + rid, json.dumps(body).encode(), version=st.version)
        rival.pop("lock").release()
        req = zuul.wait_request(rid, timeout=60)
        assert req["state"] == "fulfilled", req
        # exactly the request's nodes exist: the refused attempt left none
        assert len(req["nodes"]) == 2 and sorted(zuul.nodes()) == sorted(req["nodes"]), \
            (req, zuul.nodes())
        serve(zuul, rid)
        wait_for(lambda: no_nodes(zuul), 60, what="the nodes deleted once used")
    finally:
        if "lock" in rival:
            rival["lock"].release()
        s.stop()


def test_accept_reply_lost(deployment, wire, zuul, chroot):
    """The accept's multi lands, its reply is lost, the session lives on:
    the launcher finds the nodes it made once back and goes on with them;
    exactly one node per wanted node, the request fulfilled."""
    s = start(deployment, wire, chroot, "npd-accept-reply-lost")
    try:
        rid = until_aimed(zuul, wire, [LABEL, LABEL], accept_with_nodes, "reply")
        made = [p.rsplit("/", 1)[1] for p in wire.created_all
                if p is not None and "/nodepool/nodes/" in p]
        assert len(made) == 2, wire.created_all
        for nid in made:
            n = zuul.node(nid)
            assert n is not None and n["state"] == "init" and n["allocated_to"] == rid, n
        wire.restore()
        req = zuul.wait_request(rid, timeout=120)
        assert req["state"] == "fulfilled", req
        assert sorted(req["nodes"]) == sorted(made), (req, made)
        assert sorted(zuul.nodes()) == sorted(made), zuul.nodes()
        serve(zuul, rid)
        wait_for(lambda: no_nodes(zuul), 60, what="the nodes deleted once used")
        log = s.log()
        assert "was created before the connection was lost; going on with it" in log, \
            log[-4000:]
        st = s.status()
        assert st["sim"]["restarts"] == 0, st
    finally:
        s.stop()


@pytest.mark.parametrize("when", ["launch-running", "launch-ended"])
def test_node_lock_refused_while_launching(deployment, wire, zuul, chroot, when):
    """The node's launch begins at its create's reply, while its lock and
    `building` are on their way. Another launcher locks the node first
    (the lock dir exists: the multi is refused, the lock is busy): the
    launch is cancelled, or, had it ended already, its instance deleted;
    no instance is left in the cloud, the node is never written
    `building` by us, and the request ends as for any node whose lock is
    refused (declined by the only pool: failed)."""
    boot = 60 if when == "launch-running" else 0
    s = start(deployment, wire, chroot, "npd-early-" + when, boot=boot)
    cloud = Cloud(deployment, name="npd-early-" + when)
    rival = {}
    ready = {}

    def mark():
        ready["before"] = (cloud.framework() or {}).get("launches.ready", 0)

    def instance_of(nid):
        return [i for i in cloud.instances()
                if (i.get("metadata") or {}).get("nodepool_node_id") == nid]

    def rival_locks(req):
        nid = multi_node_id(req)
        # the launch's create reached the cloud (it began before this
        # multi was answered); with boot 0, the launch has ended too
        wait_for(lambda: instance_of(nid), 30, what="node %s's instance created" % nid)
        if when == "launch-ended":
            wait_for(lambda: (cloud.framework() or {}).get("launches.ready", 0) >
                     ready["before"], 30, what="node %s's launch ended" % nid)
        lock = zuul.zk.Lock("/nodepool/nodes/%s/lock" % nid, "rival-launcher")
        assert lock.acquire(timeout=10)
        rival["lock"], rival["nid"] = lock, nid

    try:
        rid = until_aimed(zuul, wire, [LABEL], node_lock_building, "hook", hook=rival_locks,
                          before=mark)
        nid = rival["nid"]
        req = zuul.wait_request(rid, timeout=60)
        assert req["state"] == "failed", req
        # the instance the early launch made is gone from the cloud
        wait_for(lambda: not instance_of(nid), 60, what="node %s's instance deleted" % nid)
        # the record was never written `building` by the launcher
        n = zuul.node(nid)
        assert n is not None and n["state"] == "init", n
        log = s.log()
        if when == "launch-running":
            assert "node %s: its lock was refused; cancelling its launch" % nid in log
        else:
            assert "node %s: deleting instance" % nid in log
        # the rival (a launcher's cleanup) removes the node, Zuul the request
        zuul.zk.delete("/nodepool/nodes/" + nid, recursive=True)
        rival.pop("lock").release()
        zuul.cancel(rid)
        wait_for(lambda: not cloud.instances(), 60, what="no instance left")
        st = s.status()
        assert st["sim"]["restarts"] == 0, st
    finally:
        if "lock" in rival:
            rival["lock"].release()
        s.stop()


def dump_counts(sup):
    """The launcher's request-lock and accept counters, from its SIGUSR2
    dump (sent through nodepoold): (lost races, requests whose nodes were
    made with their accept)."""
    before = len(sup.log())
    os.kill(sup.pid(), signal.SIGUSR2)
    pat = re.compile(r"request locks: attempts \d+ lost (\d+);.* nodes made with the accept "
                     r"for (\d+) requests")
    m = wait_for(lambda: pat.search(sup.log()[before:]), 30, what="the launcher's dump")
    return int(m.group(1)), int(m.group(2))


def test_two_launchers_racing_leave_no_orphan(deployment, zuul, chroot):
    """Two nodepoold (two hosts) serve one provider and both go for every
    request (peer-takeover-delay 0: no ranking). Whatever each one's
    accept carried, the loser's multi made nothing: once every request is
    served and every node gone, the nodes ever made under /nodepool/nodes
    (its cversion counts each create and each delete) are exactly the
    nodes the requests were fulfilled with."""
    cfg = {
        "labels": [{"name": LABEL}],
        "providers": [{
            "name": "sim", "driver": "fake",
            "pools": [{"name": "main", "max-servers": 40, "labels": [{"name": LABEL}]}],
        }],
    }
    sups = []
    for k in range(2):
        s = Supervisor(deployment, name="npd%d" % k)
        c = json.loads(json.dumps(cfg))
        c["providers"][0]["state-file"] = os.path.join(deployment.dir, "cloud-%d.json" % k)
        s.write(c, settings={"peer-takeover-delay": 0})
        sups.append(s)
    try:
        for s in sups:
            s.start_fg()
        for s in sups:
            s.wait_running(["sim"], timeout=60)
        wait_for(lambda: zuul.zk.exists("/nodepool/nodes"), 30, what="/nodepool/nodes")
        c0 = zuul.zk.exists("/nodepool/nodes").cversion
        handed = 0
        for wave in range(3):
            rids = [zuul.submit([LABEL] * (1 + k % 2)) for k in range(20)]
            for rid in rids:
                req = zuul.wait_request(rid, timeout=120)
                assert req["state"] == "fulfilled", req
                handed += len(req["nodes"])
                zuul.finish(zuul.accept(rid))
        wait_for(lambda: no_nodes(zuul), 120, what="every node deleted")
        made = (zuul.zk.exists("/nodepool/nodes").cversion - c0) // 2
        counts = [dump_counts(s) for s in sups]
        print("\nRACE: %d nodes made, %d handed over; (lost races, accepts with nodes) per "
              "launcher: %s" % (made, handed, counts))
        assert made == handed, (made, handed, counts)
    finally:
        for s in sups:
            s.stop()
