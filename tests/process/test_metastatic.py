"""The metastatic driver (drivers/metastatic), played against as Zuul would:
a metastatic provider slicing the nodes of a backing static provider and
of a backing fake provider, all under one nodepoold. What upstream's
metastatic adapter writes (gndrmnn/nodepool nodepool/driver/metastatic/
adapter.py) is checked on the wire: its backing requests, the persistent
lock and user_data of its backing nodes, the driver_data of its slices.
A sampler reads every node (and request) in a loop for the whole test and
checks at every instant that no backing node carries more slices than
max-parallel-jobs, nor two slices on one slot."""
import json
import os
import random
import signal
import threading
import time
import uuid

from kazoo.exceptions import NoNodeError

from conftest import wait_for
from npd import Supervisor, alive, host

MY_ID = "NodePool:metastatic:meta"
MPJ = 2
GRACE = 3


def config(d, grace=GRACE, static_hosts=3):
    return {
        "labels": [{"name": n} for n in ("big", "host", "slice-fake", "slice-static")],
        "providers": [
            {"name": "back", "driver": "fake", "boot-delay": 0.5,
             "state-file": os.path.join(d.dir, "cloud-back.json"),
             "cloud-images": [{"name": "debian", "username": "debian"}],
             "pools": [{"name": "main", "max-servers": 20,
                        "node-attributes": {"backattr": "back", "testattr": "backing"},
                        "labels": [{"name": "big", "cloud-image": "debian"}]}]},
            {"name": "stat", "driver": "static",
             "pools": [{"name": "main",
                        "nodes": [host("host-%d" % i, ["host"], **{"connection-port": 2200 + i})
                                  for i in range(static_hosts)]}]},
            {"name": "meta", "driver": "metastatic",
             "pools": [{"name": "main", "max-servers": 50,
                        "node-attributes": {"metaattr": "meta", "testattr": "metastatic"},
                        "labels": [
                            {"name": "slice-fake", "backing-label": "big",
                             "max-parallel-jobs": MPJ, "grace-time": grace},
                            {"name": "slice-static", "backing-label": "host",
                             "max-parallel-jobs": MPJ, "grace-time": grace}]}]},
        ],
    }


def read_all(zk, root):
    out = {}
    try:
        names = zk.get_children(root)
    except NoNodeError:
        return out
    for c in names:
        try:
            data, st = zk.get("%s/%s" % (root, c))
        except NoNodeError:
            continue
        try:
            out[c] = (json.loads(data), st)
        except ValueError:
            continue
    return out


class Sampler:
    """Reads every node and request, again and again, and records each
    violation of the slicing contract it sees, with the backing nodes'
    history (when each was last seen carrying a slice, when in-use)."""

    def __init__(self, zk):
        self.zk = zk
        self.stop = threading.Event()
        self.violations = []
        self.samples = 0
        self.max_slices = 0
        self.backing_requests = {}  # id -> (body, ephemeral owner)
        self.last_slice = {}  # backing id -> time a slice last named it
        self.released = {}  # backing id -> first time seen not in-use after in-use
        self.backing_seen = set()
        self.t = threading.Thread(target=self.run, daemon=True)

    def start(self):
        # backing requests live a few milliseconds (a static provider
        # fulfils at once, then we delete them): read each as it appears
        def children(names):
            for rid in names:
                if rid in self.backing_requests or rid in self.other_requests:
                    continue
                try:
                    data, st = self.zk.get("/nodepool/requests/" + rid)
                    body = json.loads(data)
                except (NoNodeError, ValueError):
                    continue
                if body.get("requestor") == MY_ID:
                    self.backing_requests[rid] = (body, st.ephemeralOwner)
                else:
                    self.other_requests.add(rid)
            return not self.stop.is_set()
        self.other_requests = set()
        self.zk.ChildrenWatch("/nodepool/requests", children)
        self.t.start()
        return self

    def finish(self):
        self.stop.set()
        self.t.join(30)

    def run(self):
        while not self.stop.is_set():
            now = time.time()
            nodes = {k: v[0] for k, v in read_all(self.zk, "/nodepool/nodes").items()}
            for rid, (body, st) in read_all(self.zk, "/nodepool/requests").items():
                if body.get("requestor") == MY_ID and rid not in self.backing_requests:
                    self.backing_requests[rid] = (body, st.ephemeralOwner)
            per = {}
            for nid, n in nodes.items():
                if n.get("provider") != "meta":
                    continue
                dd = n.get("driver_data") or {}
                if dd.get("backing_node") is None:
                    continue
                per.setdefault(dd["backing_node"], []).append((dd["slot"], nid))
            for bid, slices in per.items():
                self.last_slice[bid] = now
                self.backing_seen.add(bid)
                self.max_slices = max(self.max_slices, len(slices))
                slots = [s for s, _ in slices]
                if len(slices) > MPJ or len(set(slots)) != len(slots) or \
                        any(not 0 <= s < MPJ for s in slots):
                    self.violations.append((now, bid, sorted(slices)))
            for nid, n in nodes.items():
                ud = n.get("user_data")
                if isinstance(ud, str) and MY_ID in ud:
                    self.backing_seen.add(nid)
                if nid in self.backing_seen and n.get("state") != "in-use" \
                        and nid not in self.released:
                    self.released[nid] = now
            for bid in self.backing_seen - set(nodes) - set(self.released):
                self.released[bid] = now  # returned and gone (deleted, recycled)
            for bid in list(self.released):
                if bid not in nodes:
                    continue
                if nodes[bid].get("state") == "in-use" and isinstance(
                        nodes[bid].get("user_data"), str):
                    del self.released[bid]  # taken again
            self.samples += 1


def contenders(zk, nid):
    path = "/nodepool/nodes/%s/lock" % nid
    try:
        names = zk.get_children(path)
    except NoNodeError:
        return []
    out = []
    for c in sorted(names, key=lambda c: c.rsplit("__lock__", 1)[-1]):
        data, st = zk.get("%s/%s" % (path, c))
        out.append((data.decode(), st.ephemeralOwner))
    return out


def run_jobs(zuul, label, n, hold):
    """n jobs at once: submit, accept, hold each `hold` seconds, finish.
    Returns the nodes they got."""
    rids = [zuul.submit([label]) for _ in range(n)]
    held, got = [], []
    for rid in rids:
        req = zuul.wait_request(rid, timeout=60)
        assert req["state"] == "fulfilled", req
        got.append(req["nodes"][0])
        held.append(zuul.accept(rid))
    time.sleep(hold)
    for h in held:
        zuul.finish(h)
    return got


def start(deployment, cfg):
    s = Supervisor(deployment)
    s.write(cfg)
    s.start_fg()
    s.wait_running(["back", "stat", "meta"])
    return s


def test_slices_share_backing_nodes_up_to_the_limit(deployment, zk, zuul):
    s = start(deployment, config(deployment))
    sampler = Sampler(zk).start()
    try:
        # static hosts registered
        wait_for(lambda: len([n for n in zuul.nodes().values() if n["provider"] == "stat"]) == 3,
                 what="static slots")
        for label in ("slice-fake", "slice-static"):
            rids = [zuul.submit([label]) for _ in range(3 * MPJ)]
            reqs = [zuul.wait_request(r, timeout=60) for r in rids]
            assert all(r["state"] == "fulfilled" for r in reqs), reqs
            held = [zuul.accept(r) for r in rids]
            slices = {h[0][0]: zuul.node(h[0][0]) for h in held}
            backing = {}
            for nid, n in slices.items():
                dd = n["driver_data"]
                assert dd["node"] == nid and n["external_id"] == nid
                assert dd["slot"] == n["slot"] and 0 <= n["slot"] < MPJ
                assert dd["metadata"]["nodepool_node_id"] == nid
                assert dd["metadata"]["nodepool_provider_name"] == "meta"
                backing.setdefault(dd["backing_node"], []).append(n["slot"])
                b = zuul.node(dd["backing_node"])
                # the slice gets its backing node's connection info
                for k in ("interface_ip", "public_ipv4", "private_ipv4", "public_ipv6",
                          "connection_port", "connection_type", "host_keys", "username",
                          "az", "region", "cloud"):
                    assert n[k] == b[k], (k, n[k], b[k])
                assert n["provider"] == "meta" and n["type"] == [label]
                # the pool's node-attributes over the backing node's
                assert n["attributes"]["metaattr"] == "meta"
                assert n["attributes"]["testattr"] == "metastatic"
                if label == "slice-fake":
                    assert n["attributes"]["backattr"] == "back"
            # 3 x max-parallel-jobs jobs at once: exactly 3 backing nodes,
            # each full
            assert len(backing) == 3, backing
            for bid, slots in backing.items():
                assert sorted(slots) == list(range(MPJ))
                b = zuul.node(bid)
                assert b["state"] == "in-use" and b["allocated_to"].startswith("100-")
                assert b["type"] == ["big" if label == "slice-fake" else "host"]
                ud = json.loads(b["user_data"])  # a JSON string, as upstream
                assert ud["owner"] == MY_ID and ud["slots"] == MPJ
                assert ud["label"] == label and ud["failed"] is False
                # locked with a persistent contender naming us
                c = contenders(zk, bid)
                assert c and c[0] == (MY_ID, 0), c
            for h in held:
                zuul.finish(h)
        # the backing requests were upstream's: ephemeral, priority 100,
        # our requestor, one backing label
        assert sorted({b["node_types"][0] for b, _ in list(sampler.backing_requests.values())}) == \
            ["big", "host"]
        for rid, (body, owner) in list(sampler.backing_requests.items()):
            assert rid.startswith("100-") and owner != 0
            assert body["node_types"] in (["big"], ["host"]) and body["reuse"] is True
        # every backing node is returned grace-time after its last slice
        bids = set(sampler.backing_seen)

        def returned():
            nodes = zuul.nodes()
            for bid in bids:
                n = nodes.get(bid)
                if n is None:
                    continue  # fake: deleted by its provider
                if n["provider"] == "back" or n["state"] != "ready" or contenders(zk, bid):
                    return False
            return True
        wait_for(returned, 60, what="backing nodes returned")
        n = sampler.samples
        wait_for(lambda: sampler.samples >= n + 2, what="the sampler seeing it")
        for bid in bids:
            assert bid in sampler.released, bid
            idle = sampler.released[bid] - sampler.last_slice[bid]
            assert idle >= GRACE - 0.5, (bid, idle)
        # nothing of ours is left: no journal entry, no backing request
        assert zk.get_children("/nodepool/metastatic/meta/requests") == []
        assert not [r for r, (b, _) in read_all(zk, "/nodepool/requests").items()
                    if b.get("requestor") == MY_ID]
    finally:
        sampler.finish()
        s.stop()
    assert sampler.samples > 10
    assert sampler.violations == []
    assert sampler.max_slices == MPJ


def test_sigkill_mid_load_loses_and_double_books_nothing(deployment, zk, zuul):
    s = start(deployment, config(deployment))
    sampler = Sampler(zk).start()
    stop = threading.Event()
    outcomes = []
    errors = []

    def job_loop(label):
        rng = random.Random(label)
        while not stop.is_set():
            try:
                rid = zuul.submit([label])
                req = zuul.wait_request(rid, timeout=90)
                outcomes.append(req["state"])
                if req["state"] != "fulfilled":
                    zuul.cancel(rid)
                    continue
                held = zuul.accept(rid)
                time.sleep(rng.uniform(0.1, 0.8))
                zuul.finish(held)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))
                return

    try:
        wait_for(lambda: len([n for n in zuul.nodes().values() if n["provider"] == "stat"]) == 3,
                 what="static slots")
        threads = [threading.Thread(target=job_loop, args=(l,), daemon=True)
                   for l in ["slice-fake"] * 3 + ["slice-static"] * 3]
        for t in threads:
            t.start()
        wait_for(lambda: len(outcomes) >= 12, 90, what="load running")
        meta_pid = s.status()["meta"]["pid"]
        # kill it while one of its backing requests is outstanding
        wait_for(lambda: [r for r, (b, _) in read_all(zk, "/nodepool/requests").items()
                          if b.get("requestor") == MY_ID and b.get("state") != "fulfilled"],
                 60, interval=0.005, what="a backing request in flight")
        os.kill(meta_pid, signal.SIGKILL)
        wait_for(lambda: not alive(meta_pid), what="worker gone")
        n_before = len(outcomes)

        def restarted():
            try:
                w = s.status()["meta"]
            except AssertionError:
                return None  # the control socket busy with the restart
            return w["pid"] not in (0, None, meta_pid) and w["state"] == "running" and w
        assert wait_for(restarted, 60, what="worker restarted")["pid"] != meta_pid
        wait_for(lambda: len(outcomes) >= n_before + 12, 120, what="load after the restart")
        stop.set()
        for t in threads:
            t.join(120)
        assert errors == []
        assert outcomes.count("fulfilled") == len(outcomes), outcomes
        # no slot lost: every static slot can be had again, all at once
        got = run_jobs(zuul, "slice-static", 3 * MPJ, 0.2)
        assert len(set(got)) == 3 * MPJ
        # and no backing node leaked: once grace-time has passed, every
        # backing node is back with its provider
        def settled():
            nodes = zuul.nodes()
            for nid, n in nodes.items():
                if n["provider"] == "meta":
                    return False
                if n["provider"] == "stat" and (n["state"] != "ready" or contenders(zk, nid)):
                    return False
                if n["provider"] == "back" and n["state"] != "ready" and \
                        n["state"] != "deleting":
                    return False
                if n["provider"] == "back" and n["state"] == "ready" and contenders(zk, nid):
                    return False
            return True
        wait_for(settled, 120, what="every backing node returned")
        assert zk.get_children("/nodepool/metastatic/meta/requests") == []
    finally:
        stop.set()
        sampler.finish()
        s.stop()
    assert sampler.violations == []
    assert sampler.max_slices <= MPJ


def test_backing_node_locked_by_a_dead_launcher_is_taken_back(deployment, zk, zuul):
    """A launcher killed after it locked a backing node (persistent lock)
    and before it wrote its user_data: upstream's metastatic never
    recognises the node again (its start-up scan looks for user_data) and
    the node stays locked for ever. nodepoold's journal entry of the
    backing request names the request the node was allocated to, so the
    restarted provider finds the node, takes it as its backing node, and
    returns it after grace-time."""
    full = config(deployment, static_hosts=1)
    first = dict(full, labels=[l for l in full["labels"] if l["name"] in ("big", "host")],
                 providers=[p for p in full["providers"] if p["name"] != "meta"])
    s = Supervisor(deployment)
    s.write(first)
    s.start_fg()
    sampler = None
    try:
        s.wait_running(["back", "stat"])
        (sid, node), = wait_for(lambda: [(k, n) for k, n in zuul.nodes().items()
                                         if n["provider"] == "stat" and n["state"] == "ready"],
                                what="static node")
        rid = "100-0000099999"
        # the dead launcher's state: its persistent lock contender ...
        zk.create("/nodepool/nodes/%s/lock/%s__lock__" % (sid, uuid.uuid4().hex),
                  MY_ID.encode(), sequence=True, makepath=True)
        # ... on the node the backing provider allocated to its request ...
        node["allocated_to"] = rid
        zuul.store_node(sid, node)
        # ... and its journal entry for that request
        zk.create("/nodepool/metastatic/meta/requests/%s" % uuid.uuid4().hex,
                  json.dumps({"label": "slice-static", "slots": MPJ, "launched": time.time(),
                              "request": rid}).encode(), makepath=True)
        sampler = Sampler(zk).start()
        s.write(full)
        s.ctl("reload")
        s.wait_running(["back", "stat", "meta"])
        wait_for(lambda: sid in sampler.backing_seen, 30, what="node taken back")
        # returned after grace-time: used, unlocked, recycled by static
        wait_for(lambda: sid in sampler.released, 30, what="node returned")
        def host_free():
            nodes = [(k, n) for k, n in zuul.nodes().items() if n["provider"] == "stat"]
            return len(nodes) == 1 and nodes[0][1]["state"] == "ready" and \
                nodes[0][1]["allocated_to"] is None and not contenders(zk, nodes[0][0])
        wait_for(host_free, 30, what="static node free again")
        assert zk.get_children("/nodepool/metastatic/meta/requests") == []
        # and it serves slices again
        got = run_jobs(zuul, "slice-static", MPJ, 0.1)
        assert len(got) == MPJ
    finally:
        if sampler is not None:
            sampler.finish()
        s.stop()
    assert sampler.violations == []


def test_backing_request_fulfilled_while_the_worker_was_down_is_taken(deployment, zk,
                                                                       zk_server, chroot, zuul):
    """A backing request the provider made before it died, fulfilled
    while no worker followed it: upstream forgets the request (in memory
    only), and its node stays allocated to a request nobody accepts.
    nodepoold's journal entry names it: the restarted provider takes the
    node (persistent lock, user_data, in-use), deletes the request, and
    returns the node after grace-time."""
    from conftest import kazoo_client
    full = config(deployment, static_hosts=1)
    first = dict(full, labels=[l for l in full["labels"] if l["name"] in ("big", "host")],
                 providers=[p for p in full["providers"] if p["name"] != "meta"])
    s = Supervisor(deployment)
    s.write(first)
    s.start_fg()
    dead = kazoo_client(zk_server, chroot)  # the dead worker's session
    sampler = None
    try:
        s.wait_running(["back", "stat"])
        wait_for(lambda: [n for n in zuul.nodes().values() if n["provider"] == "stat"
                          and n["state"] == "ready"], what="static node")
        eid = uuid.uuid4().hex
        jpath = "/nodepool/metastatic/meta/requests/" + eid
        zk.create(jpath, json.dumps({"label": "slice-static", "slots": MPJ,
                                     "launched": time.time(), "request": None}).encode(),
                  makepath=True)
        # upstream's storeNodeRequest of _allocateBackingNode's request
        body = {"state": "requested", "state_time": time.time(), "node_types": ["host"],
                "nodes": [], "declined_by": [], "reuse": True, "requestor": MY_ID,
                "requestor_data": None, "provider": None, "relative_priority": 0,
                "event_id": eid, "created_time": time.time(), "tenant_name": None}
        path = dead.create("/nodepool/requests/100-", json.dumps(body).encode(),
                           ephemeral=True, sequence=True)
        rid = path.rsplit("/", 1)[1]
        zk.set(jpath, json.dumps({"label": "slice-static", "slots": MPJ,
                                  "launched": time.time(), "request": rid}).encode())
        req = zuul.wait_request(rid)
        assert req["state"] == "fulfilled", req
        (bid,) = req["nodes"]
        sampler = Sampler(zk).start()
        s.write(full)
        s.ctl("reload")
        s.wait_running(["back", "stat", "meta"])
        wait_for(lambda: bid in sampler.backing_seen, 30, what="node taken")
        n = zuul.node(bid)
        ud = json.loads(n["user_data"])
        assert ud["owner"] == MY_ID and ud["label"] == "slice-static"
        assert contenders(zk, bid)[0] == (MY_ID, 0)
        wait_for(lambda: zuul.request(rid) is None, what="request deleted")
        # it serves slices as any backing node: the next slice lands on it
        r2 = zuul.submit(["slice-static"])
        assert zuul.wait_request(r2)["state"] == "fulfilled"
        held = zuul.accept(r2)
        assert zuul.node(held[0][0])["driver_data"]["backing_node"] == bid
        zuul.finish(held)
        wait_for(lambda: bid in sampler.released, 30, what="node returned")
        assert zk.get_children("/nodepool/metastatic/meta/requests") == []
    finally:
        dead.stop()
        if sampler is not None:
            sampler.finish()
        s.stop()
    assert sampler.violations == []


def test_label_removed_returns_its_backing_nodes_at_once(deployment, zk, zuul):
    """As upstream: a backing node whose label left the configuration is
    returned without waiting for grace-time (here far longer than the
    test). The reload replaces the provider's driver state in the running
    worker, which reads its backing nodes back from ZooKeeper."""
    cfg = config(deployment, grace=600, static_hosts=2)
    s = start(deployment, cfg)
    try:
        wait_for(lambda: len([n for n in zuul.nodes().values() if n["provider"] == "stat"]) == 2,
                 what="static slots")
        run_jobs(zuul, "slice-static", 2 * MPJ, 0.1)
        held_before = [nid for nid, n in zuul.nodes().items()
                       if n["provider"] == "stat" and n["state"] == "in-use"]
        assert len(held_before) == 2  # kept for grace-time
        labels = [l for l in cfg["labels"] if l["name"] != "slice-static"]
        meta = [p for p in cfg["providers"] if p["name"] == "meta"][0]
        meta["pools"][0]["labels"] = [l for l in meta["pools"][0]["labels"]
                                      if l["name"] != "slice-static"]
        s.write(dict(cfg, labels=labels))
        s.ctl("reload")

        def returned():
            nodes = [(k, n) for k, n in zuul.nodes().items() if n["provider"] == "stat"]
            return len(nodes) == 2 and all(n["state"] == "ready" and not contenders(zk, k)
                                           for k, n in nodes)
        wait_for(returned, 60, what="backing nodes returned")
    finally:
        s.stop()
