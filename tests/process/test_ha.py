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

import pytest

from conftest import wait_for
from npd import Supervisor
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
    sim = os_sim(tmp_path, boot_delay=12)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    sup = Supervisor(deployment)
    sup.write(os_config())
    sup.start_fg()
    try:
        before = sup.wait_running(["os1"], timeout=60)
        rids = [zuul.submit(["small"]) for _ in range(N)]

        def building():
            ns = {nid: n for nid, n in zuul.nodes().items()
                  if n.get("state") == "building" and n.get("external_id")}
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
    sim = os_sim(tmp_path, boot_delay=12)
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
            ns = {nid: n for nid, n in zuul.nodes().items()
                  if n.get("state") == "building" and n.get("external_id")}
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
