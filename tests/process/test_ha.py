"""High availability (issue 22): launches that survive their launcher.

A nodepool-launcher killed with SIGKILL mid-launch is restarted by
nodepoold; once the killed worker's ZooKeeper session has ended, its
requests are reset (upstream's lost-request cleanup) and taken again, and
the BUILDING nodes it left are adopted from their records (external_id):
the servers the cloud is already booting become the nodes Zuul gets, and
none is created twice (the OpenStack simulator counts the creates)."""
import json
import os
import signal
import threading

import pytest
from kazoo.exceptions import NoNodeError

from conftest import wait_for
from fakecloud import fake_config
from load_helpers import Load
from npd import Supervisor, host, static_provider
from openstack_helpers import wait_clean, write_clouds
from ossim_fixture import OSSim

N = 20
CREATE = dict(service="compute", method="POST", route="/v2.1/servers")


@pytest.fixture
def sims():
    started = []
    yield started
    for s in started:
        s.stop()


def os_sim(tmp, boot_delay):
    r = {"boot_delay": boot_delay,
         "flavors": [{"name": "small", "ram": 2048, "vcpus": 2}],
         "images": [{"name": "debian"}]}
    return OSSim(tmp, {"clouds": {"simc": {"regions": {"R1": r}}}}).start()


def os_config(max_servers=N):
    lab = {"name": "small", "cloud-image": "debian", "flavor-name": "small"}
    pool = {"name": "main", "max-servers": max_servers, "host-key-checking": False,
            "labels": [lab]}
    prov = {"name": "os1", "cloud": "simc", "region-name": "R1", "rate": 0.001,
            "boot-timeout": 60, "launch-timeout": 120, "launch-retries": 3,
            "cloud-images": [{"name": "debian"}], "pools": [pool]}
    return {"labels": [{"name": "small"}], "providers": [prov],
            "zookeeper-timeout": 4}  # a killed worker's session ends soon


def test_worker_killed_mid_launch_resumes_its_launches(deployment, zuul, sims, tmp_path,
                                                       monkeypatch):
    # servers stay in BUILD long enough for the kill, the restart and the
    # old session's expiry to happen while they boot
    sim = os_sim(tmp_path, boot_delay=20)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    sup = Supervisor(deployment)
    sup.write(os_config())
    sup.start_fg()
    try:
        before = sup.wait_running(["os1"], timeout=60)
        rids = [zuul.submit(["small"]) for _ in range(N)]

        def building():
            # named by the cloud (a slow machine may see some up already)
            ns = {nid: n for nid, n in zuul.nodes().items()
                  if n.get("state") in ("building", "ready") and n.get("external_id")}
            return len(ns) == N and ns
        nodes = wait_for(building, 60, what="%d nodes building with their servers" % N)
        launched = {n["allocated_to"]: (nid, n["external_id"]) for nid, n in nodes.items()}
        assert sorted(launched) == sorted(rids)
        assert sim.call_count(**CREATE) == N

        victim = before["os1"]["pid"]
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: (lambda st: st["os1"]["pid"] not in (0, victim) and
                          st["os1"]["state"] == "running")(sup.status()), 30,
                 what="os1 restarted by nodepoold")

        for rid in rids:
            req = zuul.wait_request(rid, timeout=120)
            assert req["state"] == "fulfilled", req
            nid, eid = launched[rid]
            # the very node (and server) the killed worker was launching
            assert req["nodes"] == [nid]
            n = zuul.node(nid)
            assert n["state"] == "ready" and n["external_id"] == eid
            assert n["allocated_to"] == rid
        # one create per node: no server was launched twice, none deleted
        assert sim.call_count(**CREATE) == N
        assert sorted(s["id"] for s in sim.servers()) == sorted(e for _, e in launched.values())
        assert "adopting node" in sup.log()

        for rid in rids:
            zuul.finish(zuul.accept(rid))
        wait_for(lambda: not zuul.nodes(), 60, what="nodes deleted")
        wait_clean(sim, zuul)
        wait_for(lambda: sim.servers() == [], 60, what="every server deleted")
    finally:
        sup.stop()


def instances(deployment, n, cfg):
    """n nodepoold instances serving the same providers (as on n hosts):
    each its own config file, control socket, pid file and web port."""
    sups = []
    for k in range(n):
        s = Supervisor(deployment, name="npd%d" % k)
        s.write(cfg)
        sups.append(s)
    for s in sups:
        s.start_fg()
    return sups


def kill_instance(sup):
    """A host lost: nodepoold and its launcher killed -9 (the supervisor
    stopped first, so that it restarts nothing)."""
    worker = sup.status()["os1"]["pid"]
    daemon = sup.pid()
    os.kill(daemon, signal.SIGSTOP)
    os.kill(worker, signal.SIGKILL)
    os.kill(daemon, signal.SIGKILL)
    sup.proc.p.wait()
    sup.proc = None


def test_two_instances_share_a_provider(deployment, zuul, sims, tmp_path, monkeypatch):
    sim = os_sim(tmp_path, boot_delay=0.2)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    sups = instances(deployment, 2, os_config(max_servers=40))
    try:
        for s in sups:
            s.wait_running(["os1"], timeout=60)
        # each registers its pool component, as upstream; each shows the
        # other as a peer of the provider
        comps = wait_for(lambda: (lambda c: len(c) == 2 and c)(
            [json.loads(zuul.zk.get("/nodepool/components/pool/" + c)[0])
             for c in zuul.zk.get_children("/nodepool/components/pool")]), 30,
            what="two pool components")
        assert {c["provider_name"] for c in comps} == {"os1"}
        ids = {c["id"] for c in comps}
        for s in sups:
            peers = wait_for(lambda: s.status()["os1"].get("peers"), 30, what="peers")
            assert len(peers) == 1 and peers[0].split()[-1] in ids
            rc, out, _ = s.ctl("status")
            assert rc == 0 and "os1 peer launcher: " in out

        rids = [zuul.submit(["small"]) for _ in range(30)]
        for rid in rids:
            assert zuul.wait_request(rid, timeout=120)["state"] == "fulfilled"
        # work shared by rendezvous hashing: both launchers served some
        by = {}
        for rid in rids:
            (nid,) = zuul.request(rid)["nodes"]
            by.setdefault(zuul.node(nid)["launcher"], []).append(rid)
        assert sorted(by) == sorted(ids), by
        st = [s.status()["os1"] for s in sups]
        assert sum(w["fulfilled"] for w in st) == 30
        assert sim.call_count(**CREATE) == 30
        for rid in rids:
            zuul.finish(zuul.accept(rid))
        wait_for(lambda: not zuul.nodes(), 60, what="nodes deleted")
        wait_clean(sim, zuul)
    finally:
        for s in sups:
            s.stop()


def test_lost_instance_launches_adopted_by_its_peer(deployment, zuul, sims, tmp_path,
                                                   monkeypatch):
    sim = os_sim(tmp_path, boot_delay=20)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    a, b = instances(deployment, 2, os_config(max_servers=40))
    try:
        for s in (a, b):
            s.wait_running(["os1"], timeout=60)
        wait_for(lambda: len(zuul.zk.get_children("/nodepool/components/pool")) == 2, 30,
                 what="two pool components")
        rids = [zuul.submit(["small"]) for _ in range(N)]

        def building():
            # named by the cloud (a slow machine may see some up already)
            ns = {nid: n for nid, n in zuul.nodes().items()
                  if n.get("state") in ("building", "ready") and n.get("external_id")}
            return len(ns) == N and ns
        nodes = wait_for(building, 60, what="%d nodes building with their servers" % N)
        launched = {n["allocated_to"]: (nid, n["external_id"]) for nid, n in nodes.items()}
        kill_instance(a)
        for rid in rids:
            req = zuul.wait_request(rid, timeout=120)
            assert req["state"] == "fulfilled", req
            nid, eid = launched[rid]
            assert req["nodes"] == [nid]
            n = zuul.node(nid)
            assert n["state"] == "ready" and n["external_id"] == eid
        assert sim.call_count(**CREATE) == N
        assert "adopting node" in b.log()
        for rid in rids:
            zuul.finish(zuul.accept(rid))
        wait_for(lambda: not zuul.nodes(), 60, what="nodes deleted")
        wait_clean(sim, zuul)
        wait_for(lambda: sim.servers() == [], 60, what="every server deleted")
    finally:
        for s in (a, b):
            s.stop()


class Sampler:
    """Reads /nodepool/nodes over and over (its own thread, Zuul's kazoo
    client): the children listing is one atomic snapshot, so its length is
    the number of nodes (every state counts against max-servers, as
    upstream's quota) at that instant; max is the most ever seen. Each
    node's external_id is recorded (node id -> set of ids)."""

    def __init__(self, zk):
        self.zk = zk
        self.max = 0
        self.samples = 0
        self.ext = {}
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            kids = self.zk.get_children("/nodepool/nodes")
            self.max = max(self.max, len(kids))
            self.samples += 1
            for k in kids:
                try:
                    data, _ = self.zk.get("/nodepool/nodes/" + k)
                    n = json.loads(data) if data else {}
                except (NoNodeError, ValueError):
                    continue
                if n.get("external_id"):
                    self.ext.setdefault(k, set()).add(n["external_id"])

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.t.join(30)


def test_three_instances_quota_exact_and_one_lost(deployment, zuul, sims, tmp_path,
                                                  monkeypatch):
    sim = os_sim(tmp_path, boot_delay=1.0)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    cfg = os_config(max_servers=20)
    cfg["providers"][0]["launch-retries"] = 1  # one create per attempt: countable
    sups = instances(deployment, 3, cfg)
    load = Load(zuul, ["small"], per_label=30, wait_timeout=240)
    try:
        for s in sups:
            s.wait_running(["os1"], timeout=60)
        wait_for(lambda: len(zuul.zk.get_children("/nodepool/components/pool")) == 3, 30,
                 what="three pool components")
        with Sampler(zuul.zk) as smp:
            load.start()
            # the pool fills up to its limit, shared by three launchers
            wait_for(lambda: smp.max >= 20 and len(load.records) > 60, 120,
                     what="the pool at max-servers under load")
            kill_instance(sups[0])
            # the survivors go on: more requests served after the loss
            served = len([r for r in load.records if r["state"] == "fulfilled"])
            wait_for(lambda: len([r for r in load.records
                                  if r["state"] == "fulfilled"]) > served + 60, 240,
                     what="requests served after the loss")
            load.finish()
            assert not load.errors, load.errors
            wait_for(lambda: not zuul.nodes(), 120, what="every node deleted")
        # never more nodes than max-servers at any instant sampled
        assert smp.max == 20, smp.max
        assert smp.samples > 100
        assert all(r["state"] in ("fulfilled", "failed") for r in load.records), \
            [r for r in load.records if r["state"] not in ("fulfilled", "failed")]
        # one server per node: no node ever named two servers, and every
        # create the cloud saw belongs to a node
        assert all(len(v) == 1 for v in smp.ext.values()), smp.ext
        assert sim.call_count(**CREATE) == len(smp.ext)
        wait_clean(sim, zuul)
        wait_for(lambda: sim.servers() == [], 60, what="every server deleted")
    finally:
        load.stop.set()
        for s in sups:
            s.stop()


class SlotSampler(threading.Thread):
    """Static nodes as one listing of /nodepool/nodes shows them: every
    node in one listing existed at that instant, and a node's host and slot
    never change, so two nodes of one (host, slot) in one listing were two
    registrations of the slot at once."""

    def __init__(self, zk, provider):
        super().__init__(daemon=True)
        self.zk = zk
        self.provider = provider
        self.stop = threading.Event()
        self.dups = []
        self.samples = 0
        self.last = {}

    def run(self):
        while not self.stop.is_set():
            slots = {}
            for k in self.zk.get_children("/nodepool/nodes"):
                try:
                    data, _ = self.zk.get("/nodepool/nodes/" + k)
                    n = json.loads(data) if data else {}
                except (NoNodeError, ValueError):
                    continue
                if n.get("provider") != self.provider or n.get("state") in ("deleting",
                                                                             "deleted"):
                    continue
                slots.setdefault((n.get("hostname"), n.get("slot")), []).append(k)
            self.dups += [(s, ids) for s, ids in slots.items() if len(ids) > 1]
            self.last = slots
            self.samples += 1


def test_static_provider_on_two_instances(deployment, zuul, tmp_path):
    hosts = [host("h1", ["small"]), host("h2", ["small"]),
             host("h3", ["small"], **{"max-parallel-jobs": 2})]
    slots = {("h1", 0), ("h2", 0), ("h3", 0), ("h3", 1)}
    cfg = {"labels": [{"name": "small"}], "providers": [static_provider("st", hosts)],
           "zookeeper-timeout": 4}
    sups = instances(deployment, 2, cfg)
    smp = SlotSampler(zuul.zk, "st")
    load = Load(zuul, ["small"], per_label=6, wait_timeout=120)
    try:
        for s in sups:
            s.wait_running(["st"], timeout=60)
        smp.start()
        # every slot registered once, by whichever instance
        wait_for(lambda: set(smp.last) == slots, 30, what="every slot registered")
        load.start()
        wait_for(lambda: len([r for r in load.records if r["state"] == "fulfilled"]) > 20,
                 120, what="static nodes served and recycled")
        # one instance lost: the other serves and re-registers every slot
        worker = sups[0].status()["st"]["pid"]
        daemon = sups[0].pid()
        os.kill(daemon, signal.SIGSTOP)
        os.kill(worker, signal.SIGKILL)
        os.kill(daemon, signal.SIGKILL)
        sups[0].proc.p.wait()
        sups[0].proc = None
        served = len([r for r in load.records if r["state"] == "fulfilled"])
        wait_for(lambda: len([r for r in load.records
                              if r["state"] == "fulfilled"]) > served + 20, 120,
                 what="requests served by the survivor")
        load.finish()
        assert not load.errors, load.errors
        wait_for(lambda: set(smp.last) == slots and
                 all(len(v) == 1 for v in smp.last.values()), 60,
                 what="every slot registered again")
        smp.stop.set()
        smp.join(30)
        assert smp.samples > 50
        assert smp.dups == [], smp.dups[:5]
        assert all(r["state"] == "fulfilled" for r in load.records), \
            [r for r in load.records if r["state"] != "fulfilled"][:5]
    finally:
        smp.stop.set()
        load.stop.set()
        for s in sups:
            s.stop()


def test_upstream_launcher_on_the_same_provider_is_refused(deployment, zuul):
    """An upstream Nodepool launcher's pool component for our provider (as
    its zk/components.py registers it: no nodepoold key): nodepoold serves
    nothing of the provider while it is there, and says why."""
    cfg = fake_config(deployment, top={"zookeeper-timeout": 4})
    upstream = {"hostname": "nl99.example.org", "id":
                "nl99.example.org-PoolWorker.sim-main-0123456789abcdef0123456789abcdef",
                "kind": "pool", "model_api": 0, "name": "main", "paused": False,
                "priority": 100, "provider_name": "sim", "state": "running",
                "supported_labels": ["small"], "version": "9.1.0"}
    path = zuul.zk.create("/nodepool/components/pool/nl99.example.org-",
                          json.dumps(upstream, sort_keys=True).encode(),
                          sequence=True, makepath=True)
    p = deployment.start_launcher("sim", deployment.write_config(cfg))
    wait_for(lambda: "also served by an upstream Nodepool launcher nl99.example.org" in
             p.output(), 30, what="the refusal")
    rid = zuul.submit(["small"])
    # ours registered too (to Zuul, a pool like any other) ...
    wait_for(lambda: len(zuul.zk.get_children("/nodepool/components/pool")) == 2, 30,
             what="our pool component")
    # ... but takes nothing while the upstream launcher serves the provider
    assert zuul.request(rid)["state"] == "requested"
    assert "sim" not in {n.get("provider") for n in zuul.nodes().values()}
    zuul.zk.delete(path)
    assert zuul.wait_request(rid, timeout=60)["state"] == "fulfilled"
    assert "the upstream launcher is gone" in p.output()
