"""High availability (issue 22): launches that survive their launcher.

A nodepool-launcher killed with SIGKILL mid-launch is restarted by
nodepoold; once the killed worker's ZooKeeper session has ended, its
requests are reset (upstream's lost-request cleanup) and taken again, and
the BUILDING nodes it left are adopted from their records (external_id):
the servers the cloud is already booting become the nodes Zuul gets, and
none is created twice (the OpenStack simulator counts the creates)."""
import json

from conftest import wait_for
from ha_helpers import (CREATE, N, NodeSampler, SlotSampler, check_resumed, finish, instances,  # noqa: F401
                        kill_instance, kill_worker_and_wait_restart, launched_nodes,
                        lose_static_instance, os_config, os_sim, pool_component,
                        served_only_once_gone, sims)
from load_helpers import Load
from npd import Supervisor, host, static_provider
from openstack_helpers import wait_clean, write_clouds


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
        launched = launched_nodes(zuul, rids, 60, what="servers")
        assert sim.call_count(**CREATE) == N

        kill_worker_and_wait_restart(sup, "os1", before, 30)
        # the very node (and server) the killed worker was launching
        check_resumed(zuul, sup, rids, launched, 120)
        # one create per node: no server was launched twice, none deleted
        assert sim.call_count(**CREATE) == N
        assert sorted(s["id"] for s in sim.servers()) == sorted(e for _, e in launched.values())

        finish(zuul, rids, 60)
        wait_clean(sim, zuul)
        wait_for(lambda: sim.servers() == [], 60, what="every server deleted")
    finally:
        sup.stop()


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
        launched = launched_nodes(zuul, rids, 60, what="servers")
        kill_instance(a)
        check_resumed(zuul, b, rids, launched, 120)
        assert sim.call_count(**CREATE) == N
        finish(zuul, rids, 60)
        wait_clean(sim, zuul)
        wait_for(lambda: sim.servers() == [], 60, what="every server deleted")
    finally:
        for s in (a, b):
            s.stop()


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
        with NodeSampler(zuul.zk) as smp:
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
        lose_static_instance(sups, load, smp, slots, 20)
    finally:
        smp.stop.set()
        load.stop.set()
        for s in sups:
            s.stop()


def test_upstream_launcher_on_the_same_provider_is_refused(deployment, zuul):
    """An upstream Nodepool launcher's pool component for our provider (as
    its zk/components.py registers it: no nodepoold key): nodepoold serves
    nothing of the provider while it is there, and says why."""
    upstream = pool_component("nl99.example.org", "sim", "0123456789abcdef0123456789abcdef",
                              "9.1.0")
    served_only_once_gone(deployment, zuul, upstream,
                          "also served by an upstream Nodepool launcher nl99.example.org",
                          "the upstream launcher is gone")
