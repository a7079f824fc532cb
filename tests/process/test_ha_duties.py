"""One actor per duty (issue 22): several nodepoold instances serving one
provider share its periodic duties by rendezvous hashing, as they share
requests. max-ready-age, hold expiry and leak cleanup act on each item
(a node, a leaked server) exactly once, in the one instance that owns the
item: the launcher whose pool component has the best score of (launcher
id, item key) among the provider's live pool components. The hash is
recomputed here from the pool components Zuul sees, so the test checks
the owner, not just that somebody acted. When an instance is lost its
items pass to the survivors once its pool components go (its session
timeout), and only its items move (the rendezvous property)."""
import json
import re
import threading
import urllib.request

import openstack
from kazoo.exceptions import NoNodeError

from conftest import Zuul, wait_for
from ha_helpers import (CREATE, SlotSampler, instances, kill_instance, os_config,  # noqa: F401
                        lose_static_instance, os_sim, pool_component,
                        register_component, sims)
from load_helpers import Load
from npd import host, static_provider
from openstack_helpers import wait_clean, write_clouds

M64 = (1 << 64) - 1


def mix(h):
    h ^= h >> 30
    h = (h * 0xbf58476d1ce4e5b9) & M64
    h ^= h >> 27
    h = (h * 0x94d049bb133111eb) & M64
    return h ^ (h >> 31)


def fnv(s):
    h = 1469598103934665603
    for b in s.encode():
        h = ((h ^ b) * 1099511628211) & M64
    return h


def rv_score(launcher_id, key):
    """worker/assign.c rv_score: FNV-1a of the key, splitmix64's
    finalizer, xor FNV-1a of the launcher id, the finalizer again."""
    return mix(fnv(launcher_id) ^ mix(fnv(key)))


def owner(ids, key):
    """The launcher id that acts on key among ids (ties: the smaller id)."""
    return sorted(ids, key=lambda i: (-rv_score(i, key), i))[0]


def pool_ids(zuul):
    """The launcher ids of every pool component now (one going away while
    it is listed is left out)."""
    out = set()
    for c in zuul.zk.get_children("/nodepool/components/pool"):
        try:
            out.add(json.loads(zuul.zk.get("/nodepool/components/pool/" + c)[0])["id"])
        except NoNodeError:
            pass
    return out


def own_ids(sups, zuul, n):
    """Each instance's own launcher id: every pool component's id but the
    peers its nodepoolctl status shows."""
    ids = wait_for(lambda: (lambda s: len(s) == n and s)(pool_ids(zuul)), 30,
                   what="%d pool components" % n)
    out = []
    for s in sups:
        peers = wait_for(lambda: (lambda p: len(p) == n - 1 and p)(
            s.status()["os1"].get("peers")), 30, what="peers")
        mine = ids - {p.split()[-1] for p in peers}
        assert len(mine) == 1, (ids, peers)
        out.append(mine.pop())
    return out


def acted(sups, pattern, since=None):
    """{item: [instance index...]} for every log line matching pattern
    (its first group names the item), in each log from offset since[k]
    (logs() gives them) or whole."""
    out = {}
    for k, s in enumerate(sups):
        text = s.log()[since[k] if since else 0:]
        for m in re.finditer(pattern, text):
            out.setdefault(m.group(1), []).append(k)
    return out


def logs(sups):
    """Each log's length now (offsets for acted)."""
    return [len(s.log()) for s in sups]


def leak(conn, node_id):
    """A server as a launcher's create leaves it when its node record is
    gone: tagged with the provider and a node id ZooKeeper does not know."""
    return conn.create_server(wait=False, name="np" + node_id, image="debian",
                              flavor="small",
                              meta={"nodepool_provider_name": "os1",
                                    "nodepool_node_id": node_id}).id


def check_owners(actors, ids, lost, what):
    """Each item acted on once, by its owner: the owner among every
    instance, or, when that one was lost, the owner among the survivors."""
    survivors = [i for k, i in enumerate(ids) if k != lost]
    for item, ks in actors.items():
        assert len(ks) == 1, (what, item, ks)
        key, k = item, ks[0]
        want = owner(ids, key)
        if lost is not None and want == ids[lost] and k != lost:
            want = owner(survivors, key)  # acted on after the loss
        assert ids[k] == want, (what, item, k)


def test_duties_one_actor_each_and_handed_over(deployment, zuul, sims, tmp_path,
                                              monkeypatch):
    sim = os_sim(tmp_path, boot_delay=0.2)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    cfg = os_config(max_servers=20)
    # ready nodes age out every few seconds and are made again (min-ready)
    cfg["labels"] = [{"name": "small", "min-ready": 4, "max-ready-age": 3}]
    # a leaked server is deleted at the second listing that shows it
    cfg["providers"][0]["rate"] = 0.001
    sups = instances(deployment, 3, cfg)
    conn = openstack.connect(cloud="simc", region_name="R1")
    try:
        for s in sups:
            s.wait_running(["os1"], timeout=60)
        ids = own_ids(sups, zuul, 3)

        def hold(n, expiration):
            hid = zuul.autohold_request(count=n, node_expiration=expiration)
            for _ in range(n):
                rid = zuul.submit(["small"])
                assert zuul.wait_request(rid, timeout=60)["state"] == "fulfilled"
                zuul.autohold(zuul.accept(rid), hid)

        leaks = [leak(conn, "09999990%02d" % k) for k in range(8)]
        hold(6, 2)
        expired = lambda: acted(sups, r"node (\d+) exceeded max-ready-age")
        wait_for(lambda: len(expired()) >= 12, 90, what="ready nodes aged out")
        wait_for(lambda: len(acted(sups, r"deleted leaked instance (\S+)")) == 8, 60,
                 what="the leaked servers deleted")
        wait_for(lambda: len(acted(sups, r"held node (\d+) exceeded its hold age")) == 6,
                 60, what="held nodes expired")
        # one instance lost: its items pass to the survivors, and only its
        before = {
            "age": set(expired()),
        }
        kill_instance(sups[0])
        wait_for(lambda: ids[0] not in pool_ids(zuul), 30,
                 what="the lost instance's pool component gone")
        leaks += [leak(conn, "09999991%02d" % k) for k in range(8)]
        hold(6, 2)
        wait_for(lambda: len(set(expired()) - before["age"]) >= 12, 90,
                 what="ready nodes aged out after the loss")
        wait_for(lambda: len(acted(sups, r"deleted leaked instance (\S+)")) == 16, 60,
                 what="the leaked servers deleted after the loss")
        wait_for(lambda: len(acted(sups, r"held node (\d+) exceeded its hold age")) == 12,
                 60, what="held nodes expired after the loss")
        lost = 0

        # every expired node deleted once, by its owner ("node/<id>")
        check_owners({"node/" + n: k for n, k in expired().items()}, ids, lost,
                     "max-ready-age")
        check_owners({"node/" + n: k for n, k in
                      acted(sups, r"held node (\d+) exceeded its hold age").items()},
                     ids, lost, "hold expiry")
        # every leaked server deleted once, by its owner ("leak/<node id>")
        by_node = acted(sups, r"deleted leaked instance \S+ \(node (\d+)\)")
        assert sorted(by_node) == sorted("09999990%02d" % k for k in range(8)) + \
            sorted("09999991%02d" % k for k in range(8))
        check_owners({"leak/" + n: k for n, k in by_node.items()}, ids, lost, "leak")
        # each of the first leaks was seen by all three, deleted by one:
        # the cloud got one delete per server
        assert not [s for s in sim.servers() if s["id"] in leaks]
        assert all(len(ks) == 1 for ks in by_node.values())
        # the survivors share the lost one's items (both acted after it)
        after = set(expired()) - before["age"]
        assert {k for n in after for k in expired()[n]} == {1, 2}
        assert sim.call_count(**CREATE) >= 12
    finally:
        for s in sups:
            s.stop()
        conn.close()


def test_static_hosts_one_registrant_each_and_handed_over(deployment, zuul, tmp_path):
    """Static registration, one actor per host ("static/<name>"): each
    host's slots are registered (at start and after each recycle) by its
    owner only, every slot has one node at every instant (SlotSampler),
    and when the owner is lost its hosts pass to the survivor."""
    names = ["h%d" % k for k in range(1, 9)]
    hosts = [host(n, ["small"]) for n in names]
    cfg = {"labels": [{"name": "small"}], "providers": [static_provider("st", hosts)],
           "zookeeper-timeout": 4}
    sups = instances(deployment, 2, cfg)
    smp = SlotSampler(zuul.zk, "st")
    load = Load(zuul, ["small"], per_label=4, wait_timeout=120)
    reg = r"registering static node (h\d+) port"
    try:
        for s in sups:
            s.wait_running(["st"], timeout=60)
        ids = wait_for(lambda: (lambda s: len(s) == 2 and s)(pool_ids(zuul)), 30,
                       what="two pool components")
        own = []
        for s in sups:
            peers = wait_for(lambda: s.status()["st"].get("peers"), 30, what="peers")
            own.append((ids - {p.split()[-1] for p in peers}).pop())
        smp.start()
        wait_for(lambda: set(smp.last) == {(n, 0) for n in names}, 30,
                 what="every slot registered")
        # (at start the first instance up registers every host until the
        # other's registration shows: a join moves items to the joiner)
        mark = logs(sups)
        load.start()
        # served and recycled until more than half the hosts and hosts of
        # both owners were registered again: which hosts Zuul's requests
        # get is the launchers' choice, so a fixed count of requests could
        # end before one owner's hosts were used
        wait_for(lambda: len([r for r in load.records if r["state"] == "fulfilled"]) > 40
                 and (lambda by: len(by) > len(names) // 2 and
                      {k for ks in by.values() for k in ks} == {0, 1})(acted(sups, reg, mark)),
                 120, what="static nodes of both owners served and recycled")
        # each host registered again after each recycle by its owner only,
        # whichever instance deleted the used node; both own some
        by = acted(sups, reg, mark)
        assert set(by) <= set(names) and len(by) > len(names) // 2, by
        for n, ks in by.items():
            assert {own[k] for k in ks} == {owner(own, "static/" + n)}, (n, ks)
        assert {k for ks in by.values() for k in ks} == {0, 1}
        lost_hosts = [n for n in names if owner(own, "static/" + n) == own[0]]
        before = sum(len(v) for v in by.values())

        # the owner of some hosts lost: the survivor registers them now
        lose_static_instance(sups, load, smp, {(n, 0) for n in names}, 30)
        by = acted(sups, reg, mark)
        # the lost owner's hosts recycled and registered by the survivor
        assert [n for n in lost_hosts if 1 in by.get(n, [])], (lost_hosts, by)
        # the survivor's own hosts stay its own (only the lost one's move)
        assert all(set(by[n]) == {1} for n in by if n not in lost_hosts), by
        assert sum(len(v) for v in by.values()) > before
    finally:
        smp.stop.set()
        load.stop.set()
        for s in sups:
            s.stop()


class TenantSampler(threading.Thread):
    """How many nodes of tenant /nodepool/nodes holds at one instant, sampled.
    A node's tenant_name is set when it is created (INIT) or allocated and
    kept until the node goes, so it is read once per node (until then it
    is read again each time: a ready node may be allocated later). The
    reads of a listing's nodes come after the listing, while nodes keep
    coming and going: a node counted from an earlier read may be deleted
    and another allocated before it is read, and the two were never the
    tenant's together. So a sample counts only when no child was created
    or deleted from its listing until after its last read (the parent's
    pzxid, ZooKeeper's zxid of its last child change, is the same in the
    listing that follows): the nodes it lists then all existed, together,
    at the instant of its last read, each of them the tenant's by then if
    it was read so. Samples whose listing changed meanwhile are left out
    (self.torn)."""

    def __init__(self, zk, tenant):
        super().__init__(daemon=True)
        self.zk = zk
        self.tenant = tenant
        self.stop = threading.Event()
        self.known = {}
        self.max = 0
        self.samples = 0
        self.torn = 0

    def run(self):
        kids, st = self.zk.get_children("/nodepool/nodes", include_data=True)
        while not self.stop.is_set():
            n = 0
            for k in kids:
                if self.known.get(k) is None:
                    try:
                        data, _ = self.zk.get("/nodepool/nodes/" + k)
                        self.known[k] = json.loads(data).get("tenant_name") if data else None
                    except (NoNodeError, ValueError):
                        continue
                n += self.known[k] == self.tenant
            after, st2 = self.zk.get_children("/nodepool/nodes", include_data=True)
            if st2.pzxid == st.pzxid:
                self.max = max(self.max, n)
                self.samples += 1
            else:
                self.torn += 1
            kids, st = after, st2


def test_tenant_limit_exact_across_launchers_and_providers(deployment, zuul, sims, tmp_path,
                                                          monkeypatch):
    """tenant-resource-limits are global (upstream): two providers, each
    served by two nodepoold instances (four launchers), under Zuul's load
    for one tenant: the tenant's nodes never exceed its max-servers at any
    instant sampled, and it reaches it."""
    sim = os_sim(tmp_path, boot_delay=0.5)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    cfg = os_config(max_servers=20)
    second = json.loads(json.dumps(cfg["providers"][0]))
    second["name"] = "os2"
    cfg["providers"].append(second)
    cfg["tenant-resource-limits"] = [{"tenant-name": "tenant-one", "max-servers": 5}]
    sups = instances(deployment, 2, cfg)
    smp = TenantSampler(zuul.zk, "tenant-one")
    load = Load(zuul, ["small"], per_label=12, wait_timeout=240, record_provider=True)
    try:
        for s in sups:
            s.wait_running(["os1", "os2"], timeout=60)
        wait_for(lambda: len(zuul.zk.get_children("/nodepool/components/pool")) == 4, 30,
                 what="four pool components")
        smp.start()
        load.start()
        wait_for(lambda: len([r for r in load.records if r["state"] == "fulfilled"]) > 80,
                 240, what="requests served under the tenant's limit")
        load.finish()
        assert not load.errors, load.errors
        wait_for(lambda: not zuul.nodes(), 120, what="every node deleted")
        smp.stop.set()
        smp.join(30)
        assert smp.samples > 100
        assert smp.max == 5, smp.max
        assert all(r["state"] == "fulfilled" for r in load.records), \
            [r for r in load.records if r["state"] != "fulfilled"][:5]
        # both providers served the tenant
        assert {r.get("provider") for r in load.records} == {"os1", "os2"}
        wait_clean(sim, zuul)
    finally:
        smp.stop.set()
        load.stop.set()
        for s in sups:
            s.stop()


def http_get(port, path, accept="application/json"):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path),
                                 headers={"Accept": accept})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, r.read().decode()


def test_web_api_shows_peer_launchers(deployment, zuul):
    """Each provider's launchers, peers included, on nodepool-web:
    /status-summary (nodepoold's own endpoint: upstream's listings keep
    their shapes) lists them per provider and per pool with their ids and
    hosts, marks an upstream Nodepool launcher's registration, and the
    status page (HTML alone, no script) shows each by host and id."""
    hosts = [host("h1", ["small"]), host("h2", ["small"])]
    cfg = {"labels": [{"name": "small"}], "providers": [static_provider("st", hosts)],
           "zookeeper-timeout": 4}
    sups = instances(deployment, 2, cfg)
    try:
        for s in sups:
            s.wait_running(["st", "web"], timeout=60)
        ids = wait_for(lambda: (lambda s: len(s) == 2 and s)(pool_ids(zuul)), 30,
                       what="two pool components")
        # an upstream launcher serving another provider, as its
        # zk/components.py registers it
        register_component(zuul, pool_component("nl99.example.org", "elsewhere",
                                                "0123456789abcdef0123456789abcdef", "9.1.0"))
        for s in sups:
            # every instance's web API shows both launchers of st
            def summary():
                _, body = http_get(s.web_port, "/status-summary")
                d = {p["name"]: p for p in json.loads(body)["providers"]}
                ok = "elsewhere" in d and len(d.get("st", {}).get("launchers", [])) == 2
                return ok and d
            provs = wait_for(summary, 30, what="both launchers in /status-summary")
            st = provs["st"]
            assert {la["id"] for la in st["launchers"]} == ids
            assert all(la["hostname"] and la["nodepoold"] and la["state"] == "running"
                       for la in st["launchers"])
            (pool,) = st["pools"]
            assert {la["id"] for la in pool["launchers"]} == ids
            (up,) = provs["elsewhere"]["launchers"]
            assert up["nodepoold"] is None and up["hostname"] == "nl99.example.org"
            # the page, without its script
            status, html = http_get(s.web_port, "/", accept="text/html")
            assert status == 200
            for i in ids:
                assert 'title="%s">%s</small>' % (i, i[-8:]) in html
            assert "<small>Nodepool</small>" in html
            # upstream's listings keep their shapes: label-list as before
            _, body = http_get(s.web_port, "/label-list")
            assert json.loads(body) == [{"label": "small"}]
            # nodepoolctl status: the other instance as its peer
            rc, out, _ = s.ctl("status")
            assert rc == 0 and "st peer launcher: " in out
    finally:
        for s in sups:
            s.stop()


def test_tenant_limit_exact_for_reused_nodes(deployment, zuul):
    """A ready node becomes a tenant's when it is allocated: static nodes
    (reuse only) on two instances, a tenant limited to two servers, Zuul's
    load of six jobs for it and two for another tenant: the limited
    tenant never holds more than two nodes at any instant sampled, reaches
    two, and the other tenant is served alongside."""
    hosts = [host("h%d" % k, ["small"]) for k in range(1, 7)]
    cfg = {"labels": [{"name": "small"}], "providers": [static_provider("st", hosts)],
           "tenant-resource-limits": [{"tenant-name": "tenant-one", "max-servers": 2}],
           "zookeeper-timeout": 4}
    sups = instances(deployment, 2, cfg)
    smp = TenantSampler(zuul.zk, "tenant-one")
    other = Zuul(zuul.zk, tenant="tenant-two")
    load = Load(zuul, ["small"], per_label=6, wait_timeout=240)
    load2 = Load(other, ["small"], per_label=2, wait_timeout=240)
    try:
        for s in sups:
            s.wait_running(["st"], timeout=60)
        wait_for(lambda: len(zuul.zk.get_children("/nodepool/components/pool")) == 2, 30,
                 what="two pool components")
        smp.start()
        load.start()
        load2.start()
        wait_for(lambda: len([r for r in load.records if r["state"] == "fulfilled"]) > 40 and
                 len([r for r in load2.records if r["state"] == "fulfilled"]) > 10,
                 240, what="both tenants served")
        load.finish()
        load2.finish()
        assert not load.errors and not load2.errors, (load.errors, load2.errors)
        smp.stop.set()
        smp.join(30)
        assert smp.samples > 100
        assert smp.max == 2, smp.max
        assert all(r["state"] == "fulfilled" for r in load.records + load2.records)
        # both instances allocated nodes to the limited tenant
        assert all(s.status()["st"]["fulfilled"] > 0 for s in sups)
    finally:
        smp.stop.set()
        load.stop.set()
        load2.stop.set()
        for s in sups:
            s.stop()
