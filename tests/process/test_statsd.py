"""statsd from launchers (upstream's stats.py): enabled by STATSD_HOST and
STATSD_PORT, received here on a UDP socket the test binds. Gauges come from
the winner of the stats election only."""
import os
import socket
import time

from conftest import wait_for
from fakecloud import Cloud, fake_config
from npd import Supervisor, static_provider as npd_static_provider
from operator_helpers import host, ready_nodes, start_launcher

STATES = ["init", "building", "testing", "ready", "in-use", "used", "hold", "deleting",
          "failed", "aborted", "deleted"]


class Receiver:
    def __init__(self):
        self.s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.s.bind(("127.0.0.1", 0))
        self.s.settimeout(0.2)
        self.port = self.s.getsockname()[1]
        self.datagrams = []

    def env(self):
        return {"STATSD_HOST": "127.0.0.1", "STATSD_PORT": str(self.port)}

    def collect(self, seconds):
        """Gauges seen in the next `seconds` (name -> last value)."""
        end = time.time() + seconds
        out = {}
        while time.time() < end:
            try:
                d, _ = self.s.recvfrom(65536)
            except socket.timeout:
                continue
            assert len(d) <= 512, len(d)  # the Python client's datagram size
            self.datagrams.append(d)
            for line in d.decode().split("\n"):
                name, rest = line.split(":", 1)
                value, kind = rest.split("|")
                assert kind in ("g", "c", "ms"), line
                out[name] = (value, kind)
        return out

    def close(self):
        self.s.close()


def config(deployment, providers):
    cfg = {
        "labels": [{"name": "small"}, {"name": "large"}],
        "providers": providers,
        "nodepoold": {"cleanup-interval": 1, "delete-interval": 0.5, "stats-interval": 0.3},
        "tenant-resource-limits": [
            {"tenant-name": "ten.ant", "max-cores": 40, "max-servers": 10},
        ],
    }
    return deployment.write_config(cfg)


def static_provider(name, nodes, max_servers=None):
    pool = {"name": "main", "nodes": nodes}
    if max_servers is not None:
        pool["max-servers"] = max_servers
    return {"name": name, "driver": "static", "pools": [pool]}


def test_gauges_names_and_values(deployment, zuul):
    rx = Receiver()
    try:
        path = config(deployment, [static_provider(
            "static-a", [host("a1", ["small"], **{"max-parallel-jobs": 2}),
                         host("a2", ["small", "large"])], max_servers=7)])
        start_launcher(deployment, "static-a", path, env=rx.env())
        wait_for(lambda: len(ready_nodes(zuul)) == 3, what="3 ready nodes")
        rid = zuul.submit(["large", "small"])
        assert zuul.wait_request(rid)["state"] == "fulfilled"
        held = zuul.accept(rid)  # in-use; the request is gone
        rid2 = zuul.submit(["large"])  # waits: the large node is in use
        g = wait_for(lambda: (lambda g: g.get("nodepool.nodes.in-use") == ("2", "g") and
                              "nodepool.provider.static-a.pool.main.addressable_requests" in g
                              and g)(rx.collect(1.0)), what="gauges after the request")
        for st in STATES:
            assert "nodepool.nodes.%s" % st in g
            assert "nodepool.provider.static-a.nodes.%s" % st in g
            assert "nodepool.label.small.nodes.%s" % st in g
            assert "nodepool.label.large.nodes.%s" % st in g
        assert g["nodepool.nodes.ready"] == ("1", "g")
        assert g["nodepool.provider.static-a.nodes.ready"] == ("1", "g")
        assert g["nodepool.provider.static-a.nodes.in-use"] == ("2", "g")
        assert g["nodepool.label.small.nodes.ready"] == ("1", "g")
        assert g["nodepool.label.small.nodes.in-use"] == ("2", "g")
        assert g["nodepool.label.large.nodes.ready"] == ("0", "g")
        assert g["nodepool.label.large.nodes.in-use"] == ("1", "g")
        assert g["nodepool.nodes.deleting"] == ("0", "g")
        assert g["nodepool.provider.static-a.max_servers"] == ("7", "g")
        assert g["nodepool.tenant_limits.ten_ant.cores"] == ("40", "g")
        assert g["nodepool.tenant_limits.ten_ant.instances"] == ("10", "g")
        assert g["nodepool.provider.static-a.pool.main.addressable_requests"] == ("1", "g")
        assert zuul.request(rid2)["state"] in ("requested", "pending")
        assert len(held) == 2  # Zuul keeps them until the launcher stops
    finally:
        rx.close()


def test_one_emitter_by_election(deployment, zuul, zk):
    rx = Receiver()
    try:
        path = config(deployment, [
            static_provider("static-a", [host("a1", ["small"])]),
            static_provider("static-b", [host("b1", ["large"])]),
        ])
        pa = start_launcher(deployment, "static-a", path, env=rx.env())
        pb = start_launcher(deployment, "static-b", path, env=rx.env())
        wait_for(lambda: len(ready_nodes(zuul)) == 2, what="2 ready nodes")
        lock = zk.Lock("/nodepool/elections/stats")
        contenders = wait_for(lambda: len(lock.contenders()) == 2 and lock.contenders(),
                              what="two contenders")
        hostname = socket.gethostname()
        assert sorted(contenders) == sorted("%s-%d" % (hostname, p.pid) for p in (pa, pb))
        leader = contenders[0]
        g = wait_for(lambda: (lambda g: g.get("nodepool.nodes.ready") == ("2", "g") and
                              "nodepool.provider.static-b.max_servers" in g and
                              "nodepool.provider.static-a.max_servers" in g and g)(
            rx.collect(1.0)), what="gauges from the leader")
        assert g["nodepool.provider.static-a.nodes.ready"] == ("1", "g")
        assert g["nodepool.provider.static-b.nodes.ready"] == ("1", "g")
        # each worker sends its own provider's max_servers
        assert "nodepool.provider.static-a.max_servers" in g
        assert "nodepool.provider.static-b.max_servers" in g
        # the leader goes: the other one takes over the gauges
        (pa if leader.endswith("-%d" % pa.pid) else pb).stop()
        wait_for(lambda: len(lock.contenders()) == 1, what="one contender left")
        rx.collect(0.5)  # drain
        g = wait_for(lambda: (lambda g: "nodepool.nodes.ready" in g and g)(rx.collect(1.0)),
                     what="gauges from the new leader")
    finally:
        rx.close()


def test_statsd_off_without_environment(deployment, zuul, zk):
    path = config(deployment, [static_provider("static-a", [host("a1", ["small"])])])
    env = {"STATSD_HOST": "", "STATSD_PORT": ""}
    start_launcher(deployment, "static-a", path, env=env)
    wait_for(lambda: ready_nodes(zuul), what="ready node")
    time.sleep(1.0)
    # no election without statsd, as upstream's StatsWorker
    assert zk.exists("/nodepool/elections/stats") is None or \
        zk.get_children("/nodepool/elections/stats") == []


def launcher_keys():
    """upstream's _localStats keys (launcher.py, zk reportStats) for this host"""
    root = "nodepool.launcher.%s.zk." % socket.gethostname()
    return [root + "client.connection_queue"] + [
        root + "%s_cache.%s_queue" % (c, q)
        for c in ("node", "request", "image") for q in ("event", "playback")]


class Seen:
    """Everything received so far (name -> [(value, kind), ...])."""

    def __init__(self, rx):
        self.rx = rx
        self.lines = {}
        self.senders = {}  # name -> source ports (one UDP socket per process)

    def poll(self, seconds=0.3):
        end = time.time() + seconds
        while time.time() < end:
            try:
                d, src = self.rx.s.recvfrom(65536)
            except socket.timeout:
                continue
            for line in d.decode().split("\n"):
                name, rest = line.split(":", 1)
                value, kind = rest.split("|")
                self.lines.setdefault(name, []).append((value, kind))
                self.senders.setdefault(name, set()).add(src[1])
        return self


def test_leaked_and_launcher_keys(deployment, zuul):
    """A standalone launcher: leak cleanup counts each leaked resource it
    deletes (nodepool.provider.<p>.leaked.<type>s, as upstream's
    cleanupLeakedResources), and the launcher reports its ZooKeeper client's
    queues under nodepool.launcher.<hostname>."""
    rx = Receiver()
    try:
        cfg = fake_config(deployment, provider={"leak-rate": 1, "volume-leak-rate": 1})
        cfg["nodepoold"] = dict(cfg["nodepoold"], **{"stats-interval": 0.3})
        p = start_launcher(deployment, "sim", deployment.write_config(cfg), env=rx.env())
        cloud = Cloud(deployment)
        seen = Seen(rx)
        rid = zuul.submit(["small"])
        req = zuul.wait_request(rid)
        (nid,) = req["nodes"]
        zuul.finish(zuul.accept(rid))
        wait_for(lambda: zuul.node(nid) is None, what="node deleted (its instance leaks)")
        wait_for(lambda: nid not in cloud.by_node() and
                 "nodepool.provider.sim.leaked.instances" in seen.poll().lines,
                 timeout=20, what="leaked instance deleted and counted")
        wait_for(lambda: "nodepool.provider.sim.leaked.volumes" in seen.poll().lines,
                 what="leaked volume counted")
        assert seen.lines["nodepool.provider.sim.leaked.instances"] == [("1", "c")]
        assert seen.lines["nodepool.provider.sim.leaked.volumes"] == [("1", "c")]
        assert cloud.framework().get("leaked.instances") == 1
        for k in launcher_keys():
            assert k in seen.lines, (k, sorted(seen.lines))
            assert all(kind == "g" and int(v) >= 0 for v, kind in seen.lines[k])
        for k in launcher_keys()[1:]:
            assert set(seen.lines[k]) == {("0", "g")}, k  # no event backlog here
        assert p.alive()
    finally:
        rx.close()


def test_launcher_keys_once_per_host_under_nodepoold(deployment, zuul):
    """Under nodepoold the host's launcher is every worker together:
    nodepoold sends nodepool.launcher.<hostname>.*, the workers do not."""
    rx = Receiver()
    s = Supervisor(deployment)
    try:
        s.write({"labels": [{"name": "small"}],
                 "providers": [npd_static_provider("static-a", [host("a1", ["small"])]),
                               npd_static_provider("static-b", [host("b1", ["small"])])]},
                settings={"stats-interval": 0.3})
        s.start_fg(env=rx.env())
        s.wait_running(["static-a", "static-b"])
        seen = Seen(rx)
        key = launcher_keys()[0]
        wait_for(lambda: len(seen.poll().lines.get(key, ())) >= 3, what="launcher gauges")
        assert all(k in seen.lines for k in launcher_keys())
        # the workers' own gauges come too (the stats election's winner) ...
        wait_for(lambda: "nodepool.nodes.ready" in seen.poll().lines, what="node gauges")
        wait_for(lambda: all("nodepool.provider.%s.max_servers" % p in seen.poll().lines
                             for p in ("static-a", "static-b")), what="both workers")
        workers = (seen.senders["nodepool.provider.static-a.max_servers"] |
                   seen.senders["nodepool.provider.static-b.max_servers"])
        assert len(workers) == 2
        # ... but the launcher gauges come from one process, not a worker
        for k in launcher_keys():
            assert len(seen.senders[k]) == 1 and not seen.senders[k] & workers, k
    finally:
        s.stop()
        rx.close()
