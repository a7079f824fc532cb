"""High availability under load (issue 22's done-when): three nodepoold
instances serve a fake provider and an OpenStack-simulator provider under
the requests of a Zuul-faithful load; one host is killed -9 mid-load and
another is cut from ZooKeeper past its session timeout, then comes back.
A sampler reading every node checks the limits at every instant it
sees; the simulator's record of every server created checks that no node
was launched twice; the lost hosts' BUILDING nodes must be adopted and
fulfil their own requests; nothing may be left in either cloud.

NP_HA_REQUESTS sets the number of requests (the issue's 1000 by
default)."""
import json
import os
import re
import signal
import threading
import time

from kazoo.exceptions import NoNodeError

from conftest import TcpProxy, kazoo_client, wait_for
from fakecloud import Cloud
from ha_helpers import os_config, os_sim, sims  # noqa: F401 (sims: a fixture)
from load_helpers import Load
from npd import Supervisor
from openstack_helpers import wait_clean, write_clouds


# NP_HA_REQUESTS: how many requests the load makes in all (the 1000)
REQUESTS = int(os.environ.get("NP_HA_REQUESTS", "1000"))
FK_MAX = 20                      # the fake provider's pool max-servers
OS_MAX, OS_MAX_CORES = 16, 24    # the OpenStack pool's (flavor small: 2 cores)


def ha_config(deployment, k, zk_servers=None):
    """Instance k's nodepool.yaml: the OpenStack-simulator provider os1
    (label small) and the fake provider fk (label tiny). Each instance's
    fake cloud is its own (in its worker): its own state file, and ids
    numbered from its own base, so no id names servers of two clouds."""
    cfg = os_config(max_servers=OS_MAX)
    cfg["providers"][0]["pools"][0]["max-cores"] = OS_MAX_CORES
    cfg["providers"].append({
        "name": "fk", "driver": "fake", "launch-retries": 3, "boot-delay": 0.5,
        "state-file": os.path.join(deployment.dir, "cloud-fk-%d.json" % k),
        "instance-id-base": 100000 * (k + 1),
        "pools": [{"name": "main", "max-servers": FK_MAX, "labels": [{"name": "tiny"}]}]})
    cfg["labels"].append({"name": "tiny"})
    if zk_servers is not None:
        cfg["zookeeper-servers"] = zk_servers
    return cfg


class LimitSampler(threading.Thread):
    """Reads every node over and over. One listing of /nodepool/nodes is
    one instant: every node in it existed then, and a node's provider and
    size never change, so the nodes per provider of one listing, and
    their cores (the node's resources), are what the provider had at that
    instant (every state counts, as upstream's quota). A node deleted
    before its first read cannot be given a provider: counted in
    unattributed (every read is sent right after the listing, on a
    session of the sampler's own, so a node lives through many listings
    and reads). Per node it records every external_id and launcher
    seen."""

    def __init__(self, zk):
        super().__init__(daemon=True)
        self.zk = zk
        self.stop = threading.Event()
        self.samples = 0
        self.unattributed = 0
        self.max_nodes = {}
        self.max_cores = {}
        self.prov = {}
        self.cores = {}
        self.ext = {}
        self.launchers = {}
        self.last_ext = {}

    def run(self):
        while not self.stop.is_set():
            kids = self.zk.get_children("/nodepool/nodes")
            nodes, cores = {}, {}
            # every read sent at once, right after the listing
            reads = [(k, self.zk.get_async("/nodepool/nodes/" + k)) for k in kids]
            for k, a in reads:
                try:
                    data, _ = a.get(30)
                    n = json.loads(data) if data else {}
                except (NoNodeError, ValueError):
                    n = {}
                if n.get("provider"):
                    self.prov[k] = n["provider"]
                if (n.get("resources") or {}).get("cores") is not None:
                    self.cores[k] = n["resources"]["cores"]
                if n.get("external_id"):
                    self.ext.setdefault(k, set()).add(n["external_id"])
                    self.last_ext[k] = n["external_id"]
                if n.get("launcher"):
                    self.launchers.setdefault(k, set()).add(n["launcher"])
                p = self.prov.get(k)
                if p is None:
                    self.unattributed += 1
                    continue
                nodes[p] = nodes.get(p, 0) + 1
                cores[p] = cores.get(p, 0) + self.cores.get(k, 0)
            for p, v in nodes.items():
                self.max_nodes[p] = max(self.max_nodes.get(p, 0), v)
                self.max_cores[p] = max(self.max_cores.get(p, 0), cores[p])
            self.samples += 1


def kill_host(sup):
    """A host lost: nodepoold stopped (so it restarts nothing), then every
    process of it (each worker, the web process, itself) killed -9, by the
    pids it reports."""
    st = sup.status()
    daemon = sup.pid()
    os.kill(daemon, signal.SIGSTOP)
    for w in st.values():
        if w["pid"] > 0:
            os.kill(w["pid"], signal.SIGKILL)
    os.kill(daemon, signal.SIGKILL)
    sup.proc.p.wait()
    sup.proc = None


def own_launchers(sup, zuul, providers):
    """The launcher ids (pool component ids) of sup's workers: each
    provider's components less the peers sup reports."""
    st = sup.status()
    mine = set()
    for prov in providers:
        peers = {p.split()[-1] for p in st[prov].get("peers") or []}
        ids = {c["id"] for c in zuul.pools() if c["provider_name"] == prov} - peers
        assert len(ids) == 1, (prov, ids)
        mine |= ids
    return mine


def building_of(zuul, launchers):
    """The BUILDING nodes launchers left, each with its record."""
    return {nid: n for nid, n in zuul.nodes().items()
            if n.get("launcher") in launchers and n.get("state") == "building"}


def os_launch_of(zuul, launchers, among=None):
    """1 when launchers have an OpenStack server building for a node (one
    of the server ids among, if given)."""
    return any(n.get("provider") == "os1" and n.get("external_id") and
               (among is None or n["external_id"] in among)
               for n in building_of(zuul, launchers).values())


def test_three_instances_two_providers_two_hosts_lost(deployment, zuul, sims, tmp_path,
                                                      monkeypatch):
    """The issue's done-when: three instances serve the fake provider
    (max-servers 20) and the OpenStack-simulator provider (max-servers 16,
    max-cores 24: 12 servers) under REQUESTS requests of Zuul's. Mid-load
    one host is killed -9, later another is cut from ZooKeeper (a proxy
    that stops answering) past its session timeout, then comes back. Every
    request ends fulfilled or failed, no limit is exceeded at any instant
    sampled, every BUILDING node the lost hosts left is adopted and
    fulfils its own request (on OpenStack with its original server: one
    create per node), and nothing is left in either cloud."""
    t_start = time.time()
    sim = os_sim(tmp_path, boot_delay=1.5)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    zhost, zport, _ = deployment.zk_server
    proxy = TcpProxy(zhost, zport)
    sups = []
    for k in range(3):
        s = Supervisor(deployment, name="npd%d" % k)
        via = None
        if k == 1:  # host 1 reaches ZooKeeper through the proxy we cut
            via = [{"host": "127.0.0.1", "port": proxy.port, "chroot": deployment.chroot}]
        s.write(ha_config(deployment, k, via))
        sups.append(s)
    provs = ["fk", "os1"]
    load = Load(zuul, ["tiny", "small"], per_label=22, wait_timeout=300, poll=0.15,
                join_timeout=300, max_requests=REQUESTS)
    szk = kazoo_client(deployment.zk_server, deployment.chroot)  # its own session
    smp = LimitSampler(szk)
    try:
        for s in sups:
            s.start_fg()
        for s in sups:
            s.wait_running(provs, timeout=90)
        wait_for(lambda: all(len(s.status()[p].get("peers") or []) == 2
                             for s in sups for p in provs), 60, what="every worker sees two peers")
        ids = [own_launchers(s, zuul, provs) for s in sups]

        smp.start()
        load.start()
        # host 0 killed a quarter into the load
        wait_for(lambda: len(load.records) >= REQUESTS // 4, 600, what="a quarter of the load")
        wait_for(lambda: os_launch_of(zuul, ids[0]), 120, what="host 0 launching on OpenStack")
        t_kill = time.time()
        kill_host(sups[0])
        time.sleep(0.5)  # what it sent has landed; nothing of it moves now
        lost = {0: building_of(zuul, ids[0])}

        # host 1 cut from ZooKeeper past its session timeout (4 s)
        wait_for(lambda: len(load.records) >= REQUESTS * 9 // 20, 600, what="45% of the load")
        # servers created from now on boot for 20 s: host 1's launches are
        # still building when it comes back and learns its session ended
        sim.ctl("POST", "/behavior", {"boot_delay": 20})
        slow_from = len(sim.created())
        wait_for(lambda: os_launch_of(zuul, ids[1], {c["id"] for c in sim.created()[slow_from:]}),
                 120, what="host 1 launching a slow server")
        t_cut = time.time()
        proxy.hang()
        time.sleep(0.5)
        lost[1] = building_of(zuul, ids[1])
        wait_for(lambda: not ids[1] & {c["id"] for c in zuul.pools()}, 60,
                 what="host 1's session expired (its pool components gone)")

        # it comes back at once: a new session, and its launches in flight
        # (their servers still booting) left to the launchers that adopt
        # their nodes, never deleted under them
        proxy.restore()
        sups[1].wait_running(provs, timeout=120)
        sim.ctl("POST", "/behavior", {"boot_delay": 1.5})

        wait_for(lambda: len(load.records) >= REQUESTS and
                 all(r["state"] != "requested" for r in load.records), 900,
                 what="every request of the load ended")
        load.finish()
        assert not load.errors, load.errors
        wait_for(lambda: not zuul.nodes(), 180, what="every node deleted")
        smp.stop.set()
        smp.join(30)
        t_load = time.time() - t_start

        recs = load.records
        assert len(recs) == REQUESTS
        by_state = {}
        for r in recs:
            by_state[r["state"]] = by_state.get(r["state"], 0) + 1
        assert set(by_state) <= {"fulfilled", "failed"}, by_state
        # never more than a limit allows, at any instant sampled
        assert smp.samples > 100
        assert smp.unattributed == 0  # every node of every listing counted
        assert smp.max_nodes.get("fk", 0) <= FK_MAX, smp.max_nodes
        assert smp.max_nodes.get("os1", 0) <= OS_MAX, smp.max_nodes
        assert smp.max_cores.get("os1", 0) <= OS_MAX_CORES, smp.max_cores

        # every BUILDING node a lost host left fulfilled its own request
        by_rid = {r["rid"]: r for r in recs}
        logs = "".join(s.log() for s in sups)
        created = {}  # node id: when each of its servers was created
        for c in sim.created():
            created.setdefault(c["metadata"].get("nodepool_node_id"), []).append(
                (c["time"], c["id"]))
        adopted_nodes = []
        for k in (0, 1):
            for nid, n in lost[k].items():
                if not n.get("external_id"):
                    continue  # no instance named yet: nothing to adopt
                why = [line for line in logs.splitlines() if nid in line][-40:]
                r = by_rid[n["allocated_to"]]
                assert r["state"] == "fulfilled" and r["nodes"] == [nid], (k, nid, n, r, why)
                # taken over by a live launcher (a survivor, or the cut
                # host's own launcher in its new session)
                assert "adopting node %s " % nid in logs, (nid, why)
                if n["provider"] == "os1":
                    # with the server the lost host created: the last one
                    # it named, and none created for it since
                    assert smp.last_ext[nid] == n["external_id"], (nid, smp.ext[nid], why)
                    # (a create the lost host sent just before its loss
                    # may reach the simulator just after it: that is the
                    # adopted server itself, not a second one)
                    since = [(t, sid) for t, sid in created[nid]
                             if t > (t_kill, t_cut)[k] and sid != n["external_id"]]
                    assert not since, (nid, since, why)
                adopted_nodes.append((k, n["provider"], nid))
        assert [a for a in adopted_nodes if a[1] == "os1"], (
            "no OpenStack launch was adopted",
            {k: {nid: (n["provider"], n.get("external_id")) for nid, n in v.items()}
             for k, v in lost.items()})
        # one create per node on OpenStack: none launched twice; a second
        # server only after an attempt the launcher reported failed (a
        # cloud error or a timeout on a loaded machine), never for an
        # adoption (checked above: nothing created after a loss)
        creates = {nid: len(ts) for nid, ts in created.items()}
        assert None not in creates, creates.get(None)
        retried = {nid: v for nid, v in creates.items() if v > 1}
        for nid, v in retried.items():
            failed = len(re.findall(r"launch attempt \d+/\d+ for node %s failed" % nid, logs))
            assert failed >= v - 1, (nid, v, [line for line in logs.splitlines()
                                             if nid in line][-40:])
        # nothing left: no server without a node, in the simulator or in
        # the fake clouds of the hosts that are still up
        wait_clean(sim, zuul, timeout=120)
        wait_for(lambda: sim.servers() == [], 120, what="every server deleted")
        for k in (1, 2):
            c = Cloud(deployment, name="fk-%d" % k)
            wait_for(lambda: c.state() is not None and c.instances() == [], 120,
                     what="host %d's fake cloud empty" % k)
        adoptions = logs.count("adopting node")
        print("\nHA load: %d requests (%s), max nodes fk %d/%d, os1 %d/%d, max cores os1 "
              "%d/%d, %d samples (%d unattributed node reads), os1 creates %d for %d nodes "
              "(max %d per node, %d nodes retried after a failed attempt), lost building nodes: host0 %d, host1 %d, adopted with "
              "an instance %d (%d os1), 'adopting node' lines %d, %.0f s" % (
                  len(recs), by_state, smp.max_nodes.get("fk", 0), FK_MAX,
                  smp.max_nodes.get("os1", 0), OS_MAX, smp.max_cores.get("os1", 0),
                  OS_MAX_CORES, smp.samples, smp.unattributed, sum(creates.values()),
                  len(creates), max(creates.values()), len(retried), len(lost[0]), len(lost[1]),
                  len(adopted_nodes), len([a for a in adopted_nodes if a[1] == "os1"]),
                  adoptions, t_load))
    finally:
        smp.stop.set()
        load.stop.set()
        for s in sups:
            s.stop()
        proxy.close()
        szk.stop()
        szk.close()
