"""Helpers the high-availability tests share (issue 22: test_ha.py,
test_ha_duties.py, test_ha_resume.py, test_ha_upgrade.py, test_ha_load.py):
an OpenStack-simulator provider, several nodepoold instances on one
ZooKeeper as on several hosts, a host or a worker lost (kill -9, by the
pids nodepoold reports), the launches a killed worker leaves and their
adoption, and a pool component registered by another launcher."""
import json
import os
import signal
import threading

import pytest
from kazoo.exceptions import NoNodeError

from conftest import wait_for
from fakecloud import fake_config
from npd import Supervisor
from ossim_fixture import OSSim

N = 20
CREATE = dict(service="compute", method="POST", route="/v2.1/servers")


@pytest.fixture
def sims():
    """A list the test appends the simulators it starts to; each is
    stopped at the end."""
    started = []
    yield started
    for s in started:
        s.stop()


def os_sim(tmp, boot_delay):
    """An OpenStack simulator with cloud simc, region R1: flavor small, image
    debian; each server in BUILD for boot_delay seconds."""
    r = {"boot_delay": boot_delay,
         "flavors": [{"name": "small", "ram": 2048, "vcpus": 2}],
         "images": [{"name": "debian"}]}
    return OSSim(tmp, {"clouds": {"simc": {"regions": {"R1": r}}}}).start()


def os_config(max_servers=N):
    """nodepool.yaml for provider os1 on os_sim's cloud: label small, pool
    main of max_servers."""
    lab = {"name": "small", "cloud-image": "debian", "flavor-name": "small"}
    pool = {"name": "main", "max-servers": max_servers, "host-key-checking": False,
            "labels": [lab]}
    prov = {"name": "os1", "cloud": "simc", "region-name": "R1", "rate": 0.001,
            "boot-timeout": 60, "launch-timeout": 120, "launch-retries": 3,
            "cloud-images": [{"name": "debian"}], "pools": [pool]}
    return {"labels": [{"name": "small"}], "providers": [prov],
            "zookeeper-timeout": 4}  # a killed worker's session ends soon


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


def kill_instance(sup, provider="os1"):
    """A host lost: nodepoold and its launcher of provider killed -9 (the
    supervisor stopped first, so that it restarts nothing)."""
    worker = sup.status()[provider]["pid"]
    daemon = sup.pid()
    os.kill(daemon, signal.SIGSTOP)
    os.kill(worker, signal.SIGKILL)
    os.kill(daemon, signal.SIGKILL)
    sup.proc.p.wait()
    sup.proc = None


def kill_worker_and_wait_restart(sup, provider, before, timeout=60):
    """provider's launcher (its pid in before, a status()) killed -9;
    returns once nodepoold runs a new one."""
    victim = before[provider]["pid"]
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: (lambda st: st[provider]["pid"] not in (0, victim) and
                      st[provider]["state"] == "running")(sup.status()), timeout,
             what="%s restarted by nodepoold" % provider)


def launched_nodes(zuul, rids, timeout=90, what="instances"):
    """The N nodes building (or, on a slow machine, up already) for rids,
    each named by the cloud: {request id: (node id, external id)}."""
    def building():
        ns = {nid: n for nid, n in zuul.nodes().items()
              if n.get("state") in ("building", "ready") and n.get("external_id")}
        return len(ns) == N and ns
    nodes = wait_for(building, timeout, what="%d nodes building with their %s" % (N, what))
    launched = {n["allocated_to"]: (nid, n["external_id"]) for nid, n in nodes.items()}
    assert sorted(launched) == sorted(rids)
    return launched


def check_resumed(zuul, sup, rids, launched, timeout=180):
    """Every request fulfilled with the very node (and instance) the killed
    worker was launching, adopted (said in sup's log)."""
    for rid in rids:
        req = zuul.wait_request(rid, timeout=timeout)
        assert req["state"] == "fulfilled", req
        nid, eid = launched[rid]
        assert req["nodes"] == [nid]
        n = zuul.node(nid)
        assert n["state"] == "ready" and n["external_id"] == eid
        assert n["allocated_to"] == rid
    assert "adopting node" in sup.log()


def finish(zuul, rids, timeout=120):
    """Zuul done with every request's nodes; returns once all are deleted."""
    for rid in rids:
        zuul.finish(zuul.accept(rid))
    wait_for(lambda: not zuul.nodes(), timeout, what="nodes deleted")


class NodeSampler:
    """Reads /nodepool/nodes over and over (its own thread, Zuul's kazoo
    client): the children listing is one atomic snapshot, so its length is
    the number of nodes (every state counts against max-servers, as
    upstream's quota) at that instant; max is the most ever seen. Each
    node's external_id (node id -> set of ids) and launcher (node id -> the
    pool component's id) are recorded. A subclass samples more in
    sample_more(), called once a pass."""

    def __init__(self, zk):
        self.zk = zk
        self.max = 0
        self.samples = 0
        self.launcher = {}
        self.ext = {}
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)

    def sample_more(self):
        pass

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
                if n.get("launcher"):
                    self.launcher[k] = n["launcher"]
                if n.get("external_id"):
                    self.ext.setdefault(k, set()).add(n["external_id"])
            self.sample_more()

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.t.join(30)


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


def lose_static_instance(sups, load, smp, slots, more):
    """sups[0] lost mid-load (kill_instance, its static provider st): the
    survivor serves more requests yet, the load finishes without errors,
    and every slot of slots is registered again, once; smp (a started
    SlotSampler) is then stopped and must have seen no slot registered
    twice at once, and every request fulfilled."""
    kill_instance(sups[0], "st")
    served = len([r for r in load.records if r["state"] == "fulfilled"])
    wait_for(lambda: len([r for r in load.records
                          if r["state"] == "fulfilled"]) > served + more, 120,
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


def pool_component(hostname, provider, uid, version):
    """Another launcher's pool component for provider's pool main, as
    upstream Nodepool's zk/components.py registers it (no nodepoold key);
    uid: the 32 hex digits ending its id."""
    return {"hostname": hostname, "id": "%s-PoolWorker.%s-main-%s" % (hostname, provider, uid),
            "kind": "pool", "model_api": 0, "name": "main", "paused": False,
            "priority": 100, "provider_name": provider, "state": "running",
            "supported_labels": ["small"], "version": version}


def register_component(zuul, comp):
    """comp registered as its launcher does (a sequence node under
    /nodepool/components/pool); returns its path."""
    return zuul.zk.create("/nodepool/components/pool/%s-" % comp["hostname"],
                          json.dumps(comp, sort_keys=True).encode(),
                          sequence=True, makepath=True)


def served_only_once_gone(deployment, zuul, comp, refusal, gone):
    """A launcher of the fake provider sim started while comp (a pool
    component of sim's) is registered: it says refusal, registers its own
    component, takes no request, and once comp goes serves and says gone.
    Returns the launcher (its output for more checks)."""
    cfg = fake_config(deployment, top={"zookeeper-timeout": 4})
    path = register_component(zuul, comp)
    p = deployment.start_launcher("sim", deployment.write_config(cfg))
    wait_for(lambda: refusal in p.output(), 30, what="the refusal")
    rid = zuul.submit(["small"])
    # ours registered too (to Zuul, a pool like any other) ...
    wait_for(lambda: len(zuul.zk.get_children("/nodepool/components/pool")) == 2, 30,
             what="our pool component")
    # ... but takes nothing while the other launcher serves the provider
    assert zuul.request(rid)["state"] == "requested"
    assert "sim" not in {n.get("provider") for n in zuul.nodes().values()}
    # the other's session ends: its component goes, we serve
    zuul.zk.delete(path)
    assert zuul.wait_request(rid, timeout=60)["state"] == "fulfilled"
    assert gone in p.output()
    return p
