"""High availability (issue 22): launches that survive their launcher.

A nodepool-launcher killed with SIGKILL mid-launch is restarted by
nodepoold; once the killed worker's ZooKeeper session has ended, its
requests are reset (upstream's lost-request cleanup) and taken again, and
the BUILDING nodes it left are adopted from their records (external_id):
the servers the cloud is already booting become the nodes Zuul gets, and
none is created twice (the OpenStack simulator counts the creates)."""
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
