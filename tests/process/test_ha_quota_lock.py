"""The provider's quota lock kept across rounds (issue 25).

A launcher keeps /nodepool/launcher-quota/<provider> while it keeps
wanting launch rounds and no peer waits for it; a peer's contender makes it
hand the lock over after its current round. So two nodepoold instances
serving one provider under steady load both launch, and the provider's
max-servers holds across them at every instant (the node records are the
reservations: every state counts, as upstream's quota)."""
import json

from kazoo.exceptions import NoNodeError

from conftest import wait_for
from ha_helpers import CREATE, NodeSampler, instances, os_config, os_sim, sims  # noqa: F401
from load_helpers import Load
from openstack_helpers import wait_clean, write_clouds

LOCK = "/nodepool/launcher-quota/os1"
MAX = 8


class Watcher(NodeSampler):
    """NodeSampler, and who holds the provider's quota lock (the lowest
    contender, as kazoo's Lock.contenders()). Both instances run on this
    host, so the identifier (the hostname) is the same: the contender's
    uuid prefix tells them apart."""

    def __init__(self, zk):
        super().__init__(zk)
        self.holders = set()  # contender prefixes seen holding the lock

    def sample_more(self):
        try:
            cs = self.zk.get_children(LOCK)
        except NoNodeError:
            return
        if cs:
            # "<uuid>__lock__<seq>": the uuid is fixed for a lock's life
            # (kazoo's too), so it names the launcher
            self.holders.add(min(cs, key=lambda c: c[-10:]).split("__lock__")[0])


def test_two_instances_hand_the_kept_quota_lock_over(deployment, zuul, sims, tmp_path,
                                                     monkeypatch):
    sim = os_sim(tmp_path, boot_delay=0.5)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    cfg = os_config(max_servers=MAX)
    cfg["providers"][0]["launch-retries"] = 1  # one create per attempt: countable
    sups = instances(deployment, 2, cfg)
    load = Load(zuul, ["small"], per_label=16, wait_timeout=240)
    try:
        for s in sups:
            s.wait_running(["os1"], timeout=60)
        comps = wait_for(lambda: (lambda c: len(c) == 2 and c)(
            [json.loads(zuul.zk.get("/nodepool/components/pool/" + c)[0])
             for c in zuul.zk.get_children("/nodepool/components/pool")]), 30,
            what="two pool components")
        ids = {c["id"] for c in comps}
        with Watcher(zuul.zk) as w:
            load.start()
            # the pool fills up to its limit and stays busy: both launchers
            # keep wanting rounds, so the lock must change hands
            wait_for(lambda: w.max >= MAX and len(load.records) > 80, 240,
                     what="the pool at max-servers under load")
            load.finish()
            assert not load.errors, load.errors
            wait_for(lambda: not zuul.nodes(), 120, what="every node deleted")
        # never more nodes than max-servers at any instant sampled
        assert w.max == MAX, w.max
        assert w.samples > 100
        assert all(r["state"] == "fulfilled" for r in load.records), \
            [r for r in load.records if r["state"] != "fulfilled"]
        # both instances launched nodes under the load
        by = {}
        for nid, lid in w.launcher.items():
            by[lid] = by.get(lid, 0) + 1
        assert set(by) == ids, by
        # and both held the provider's lock
        assert len(w.holders) == 2, w.holders
        # one server per node, every create the cloud saw a node's
        assert all(len(v) == 1 for v in w.ext.values()), w.ext
        assert sim.call_count(**CREATE) == len(w.ext)
        wait_clean(sim, zuul)
    finally:
        load.stop.set()
        for s in sups:
            s.stop()
