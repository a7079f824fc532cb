"""nodepoold under load and across hosts.

- Two nodepoold on one ZooKeeper, each with some of the providers (its own
  nodepool.yaml listing only those, the same labels), cooperate as two
  upstream launchers would.
- The issue's "done when": every worker is killed in turn (kill -9, then a
  hang) while Zuul-like requests keep arriving for labels of every
  provider; no request is lost (every one ends fulfilled), no node leaks
  (afterwards every node is back to ready), and the other providers are
  served meanwhile by the same processes and ZooKeeper sessions."""
import os
import signal
import time

from kazoo.exceptions import NoNodeError

from conftest import wait_for
from load_helpers import Load
from npd import Supervisor, alive, host, pool_sessions, rss_kb, static_provider, wait_gone


def ready_nodes(zuul, provider=None):
    return {nid: n for nid, n in zuul.nodes().items()
            if n["state"] == "ready" and (provider is None or n["provider"] == provider)}


def test_two_daemons_share_one_zookeeper(deployment, zuul):
    labels = [{"name": "small"}, {"name": "nowhere"}]
    one = Supervisor(deployment, name="npd1")
    two = Supervisor(deployment, name="npd2")
    try:
        one.write({"labels": labels,
                   "providers": [static_provider("static-a", [host("a1", ["small"])])]})
        two.write({"labels": labels,
                   "providers": [static_provider("static-b", [host("b1", ["small"])])]})
        one.start_fg()
        two.start_fg()
        one.wait_running(["static-a"])
        two.wait_running(["static-b"])
        pools = wait_for(lambda: len(zuul.pools()) == 2 and zuul.pools(), what="two pools")
        wait_for(lambda: len(ready_nodes(zuul)) == 2, what="two nodes")
        # each serves its own provider
        for prov in ("static-a", "static-b", "static-a"):
            rid = zuul.submit(["small"], provider=prov)
            req = zuul.wait_request(rid)
            assert req["state"] == "fulfilled"
            assert zuul.node(req["nodes"][0])["provider"] == prov
            zuul.finish(zuul.accept(rid))
        assert one.status()["static-a"]["fulfilled"] >= 2 or \
            wait_for(lambda: one.status()["static-a"]["fulfilled"] >= 2, what="a counted")
        # a label no pool of either offers: declined by both, then failed
        rid = zuul.submit(["nowhere"])
        req = zuul.wait_request(rid)
        assert req["state"] == "failed"
        assert sorted(req["declined_by"]) == sorted(p["id"] for p in pools)
        # one goes away: the other keeps serving
        b_pid = two.status()["static-b"]["pid"]
        one.proc.stop(30)
        assert one.proc.p.returncode == 0
        wait_for(lambda: [p["provider_name"] for p in zuul.pools()] == ["static-b"],
                 what="only static-b's pool left")
        for _ in range(2):
            rid = zuul.submit(["small"])
            req = zuul.wait_request(rid)
            assert req["state"] == "fulfilled"
            assert zuul.node(req["nodes"][0])["provider"] == "static-b"
            zuul.finish(zuul.accept(rid))
        assert two.status()["static-b"]["pid"] == b_pid
    finally:
        one.stop()
        two.stop()


PROVIDERS = ("static-a", "static-b", "static-c")


def label_of(prov):
    return "label-" + prov[-1]


def test_kill_each_worker_in_turn_under_load(deployment, zuul):
    cfg = {
        "labels": [{"name": label_of(p)} for p in PROVIDERS],
        "providers": [static_provider(p, [host(p[-1] + "1", [label_of(p)]),
                                          host(p[-1] + "2", [label_of(p)])])
                      for p in PROVIDERS],
    }
    s = Supervisor(deployment)
    load = None
    try:
        # A worker silent for 1 s is hung; ZooKeeper sessions last 4 s, so a
        # replacement registers its pool before the old session's pool goes
        # (requests for its label are never declined by everyone meanwhile).
        s.write(cfg, settings={"worker-status-timeout": 1, "restart-backoff-max": 1})
        s.start_fg()
        s.wait_running(list(PROVIDERS))
        wait_for(lambda: len(ready_nodes(zuul)) == 6, what="six ready nodes")
        load = Load(zuul, [label_of(p) for p in PROVIDERS], wait_timeout=120, poll=0.05,
                    join_timeout=180, record_provider=True)
        load.start()
        t0 = time.time()
        for p in PROVIDERS:
            wait_for(lambda: load.fulfilled_since(label_of(p), t0), 60,
                     what="load flowing for %s" % p)

        for victim in PROVIDERS:
            for how in ("kill -9", "hang"):
                # the previous victim's old session has expired: one each
                sessions = wait_for(lambda: (lambda ps: sorted(ps) == list(PROVIDERS) and
                                             all(len(v) == 1 for v in ps.values()) and ps)(
                    pool_sessions(zuul)), 30, what="one ZooKeeper session per provider")
                sessions = {p: v for p, v in sessions.items() if p != victim}
                st = s.status()
                pid = st[victim]["pid"]
                others = {p: st[p]["pid"] for p in PROVIDERS if p != victim}
                t = time.time()
                os.kill(pid, signal.SIGKILL if how == "kill -9" else signal.SIGSTOP)
                try:
                    wait_for(lambda: (lambda w: w["pid"] not in (0, pid) and
                                      w["state"] == "running")(s.status()[victim]),
                             60, interval=0.05, what="%s back after %s" % (victim, how))
                finally:
                    if alive(pid):
                        os.kill(pid, signal.SIGCONT)
                wait_gone(pid)
                # the replacement serves, and so do the others, untouched
                wait_for(lambda: load.fulfilled_since(label_of(victim), t), 60,
                         what="%s serves again after %s" % (victim, how))
                for p in others:
                    wait_for(lambda: load.fulfilled_since(label_of(p), t), 60,
                             what="%s served while %s was down" % (p, victim))
                st = s.status()
                assert {p: st[p]["pid"] for p in others} == others
                assert {p: ps for p, ps in pool_sessions(zuul).items() if p in others} \
                    == sessions
        load.finish()
        assert load.errors == []

        # zero lost: every request ended fulfilled, and none is left over
        states = {}
        for r in load.records:
            states[r["state"]] = states.get(r["state"], 0) + 1
        assert states == {"fulfilled": len(load.records)}, states
        assert len(load.records) > 30
        try:
            left = zuul.zk.get_children("/nodepool/requests")
        except NoNodeError:
            left = []
        assert left == []
        # zero leaked: every slot back to one ready, unallocated node
        def settled():
            nodes = zuul.nodes()
            if len(nodes) != 6:
                return None
            if any(n["state"] != "ready" or n["allocated_to"] for n in nodes.values()):
                return None
            return nodes
        nodes = wait_for(settled, 60, what="every node ready and unallocated")
        assert sorted(n["hostname"] for n in nodes.values()) == \
            ["a1", "a2", "b1", "b2", "c1", "c2"]
        # each worker was restarted exactly twice: by its own incidents only
        st = s.status()
        for p in PROVIDERS:
            assert st[p]["restarts"] == 2 and st[p]["state"] == "running"
        log = s.log()
        assert log.count("killed by signal 9") == 6  # 3 kill -9, 3 hung ones killed
        assert log.count("no STATUS reply within 1 s") == 3
        per = {p: sum(1 for r in load.records if r.get("provider") == p) for p in PROVIDERS}
        print("\nload: %d requests, all fulfilled, per provider %s" % (len(load.records), per))
        print("supervisor RSS %d KiB; worker RSS %s KiB" % (
            rss_kb(s.proc.pid), {p: rss_kb(st[p]["pid"]) for p in PROVIDERS}))
    finally:
        if load is not None:
            load.stop.set()
        s.stop()
