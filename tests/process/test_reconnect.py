"""Reconnect without loss (issue 13): nodepoold with a static and a fake
provider under a steady Zuul-like load while ZooKeeper goes away and comes
back, four ways:

  (a) a short partition (a TCP proxy between nodepoold and ZooKeeper cut
      and restored; the sessions live on),
  (b) a long partition (the sessions expire),
  (c) a restart of a dedicated ZooKeeper on the same data directory,
  (d) a three-server ensemble whose leader is killed;
  (e) a hung server: the proxy takes connections and never answers, so a
      TLS handshake started then waits for nothing (the C client must give
      up on it after two thirds of the session timeout, as it does on a
      TCP connect, and try again: it used to wait until TCP gave up).

Each time: every request ends fulfilled, no static slot ever has two live
nodes, no node is left in a transient state or locked, and nodepoold
serves again soon after ZooKeeper is back (the time is measured and
printed, not asserted: tests carry no timing thresholds)."""
import datetime
import json
import os
import re
import threading
import time

import pytest
from kazoo.exceptions import (ConnectionLoss, NoNodeError, OperationTimeoutError,
                               SessionExpiredError)
from kazoo.retry import KazooRetry

from conftest import Zuul, wait_for
from load_helpers import Load, chrooted_kazoo, restart_outage, tls_kazoo, zk_proxy
from npd import Supervisor, host, pool_sessions, static_provider
from zkservers import Ensemble, Standalone

STATIC = ("s1", "s2", "s3")
LABELS = ("label-s", "label-f")
PROVIDERS = ("static-a", "sim")


class RetryingZk:
    """A kazoo client whose calls are retried across a lost connection,
    as Zuul's own ZooKeeper client does (kazoo's KazooRetry); Zuul's locks
    (kazoo's Lock) retry by themselves. What a call that was interrupted did
    is found out first where repeating it would not be the same: a delete
    that finds nothing had deleted it; a sequential create looks for a
    child holding its data before creating again (else a second request
    would be left that nobody waits for)."""

    RETRIED = ("get", "set", "get_children", "exists", "ensure_path")
    LOST = (ConnectionLoss, OperationTimeoutError, SessionExpiredError)

    def __init__(self, k):
        self.k = k
        self.retry = KazooRetry(max_tries=-1, delay=0.05, max_delay=0.5, deadline=60,
                                ignore_expire=True)

    def __getattr__(self, name):
        attr = getattr(self.k, name)
        if name not in self.RETRIED:
            return attr

        def call(*a, **kw):
            return self.retry.copy()(attr, *a, **kw)
        return call

    def delete(self, path, *a, **kw):
        tried = False
        while True:
            try:
                return self.k.delete(path, *a, **kw)
            except NoNodeError:
                if tried:
                    return True
                raise
            except self.LOST:
                tried = True
                time.sleep(0.05)

    def create(self, path, value=b"", *a, **kw):
        sequence = kw.get("sequence", False)
        parent, prefix = path.rsplit("/", 1)
        while True:
            try:
                return self.k.create(path, value, *a, **kw)
            except self.LOST:
                time.sleep(0.05)
                if not sequence:
                    continue
                found = self.retry.copy()(self._find, parent, prefix, value)
                if found is not None:
                    return found

    def _find(self, parent, prefix, value):
        for c in self.k.get_children(parent):
            if c.startswith(prefix):
                try:
                    data, _ = self.k.get(parent + "/" + c)
                except NoNodeError:
                    continue
                if self._same(value, data):
                    return parent + "/" + c
        return None

    @staticmethod
    def _same(value, data):
        """Is data (read back) what we created with value? By the
        bytes, or for a node request by its created_time and requestor:
        nodepoold may have taken and answered the request (its state,
        nodes, declined_by rewritten) before our client is back, since
        kazoo reconnects with a back-off; matching the bytes alone then
        missed it and submitted it again, leaving a fulfilled request no
        job waits for, its node allocated to it for good."""
        if data == value:
            return True
        try:
            a, b = json.loads(value), json.loads(data)
        except ValueError:
            return False
        return (isinstance(a, dict) and isinstance(b, dict)
                and a.get("created_time") is not None
                and a.get("created_time") == b.get("created_time")
                and a.get("requestor") == b.get("requestor"))


class SlotWatch:
    """Samples the static provider's live (not deleting) nodes per host the
    whole time: a slot must never have two."""

    def __init__(self, zuul):
        self.zuul = zuul
        self.worst = {}
        self.stop = threading.Event()
        self.errors = []
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop.is_set():
            try:
                per = {}
                for n in self.zuul.nodes().values():
                    if n.get("provider") == "static-a" and \
                            n["state"] not in ("deleting", "deleted"):
                        per[n["hostname"]] = per.get(n["hostname"], 0) + 1
                for h, c in per.items():
                    self.worst[h] = max(self.worst.get(h, 0), c)
            except Exception as e:
                self.errors.append(repr(e))
            time.sleep(0.02)

    def finish(self):
        self.stop.set()
        self.t.join(10)


def daemon_config(deployment, servers, timeout):
    return {
        "zookeeper-servers": servers,
        "zookeeper-timeout": timeout,
        "labels": [{"name": l} for l in LABELS],
        "providers": [
            static_provider("static-a", [host(h, ["label-s"]) for h in STATIC]),
            {"name": "sim", "driver": "fake", "launch-retries": 3,
             "state-file": os.path.join(deployment.dir, "cloud-sim.json"),
             "pools": [{"name": "main", "max-servers": 4,
                        "labels": [{"name": "label-f"}]}]},
        ],
    }


def lock_holders(zk, path):
    try:
        return [c for c in zk.get_children(path) if "__lock__" in c]
    except NoNodeError:
        return []


def settled(zuul):
    """Every static slot one ready, unallocated, unlocked node; every fake
    node ready and unlocked; no request and no request lock left."""
    nodes = zuul.nodes()
    static = [n for n in nodes.values() if n.get("provider") == "static-a"]
    if sorted(n["hostname"] for n in static) != sorted(STATIC):
        return None
    for nid, n in nodes.items():
        if n["state"] != "ready" or n.get("allocated_to"):
            return None
        if lock_holders(zuul.zk, "/nodepool/nodes/%s/lock" % nid):
            return None
    try:
        if zuul.zk.get_children("/nodepool/requests"):
            return None
        for r in zuul.zk.get_children("/nodepool/requests-lock"):
            if lock_holders(zuul.zk, "/nodepool/requests-lock/" + r):
                return None
    except NoNodeError:
        pass
    return nodes


def describe(zuul):
    out = []
    for nid, n in sorted(zuul.nodes().items()):
        out.append("node %s %s %s %s alloc=%s locks=%s" % (
            nid, n.get("provider"), n.get("hostname"), n["state"], n.get("allocated_to"),
            lock_holders(zuul.zk, "/nodepool/nodes/%s/lock" % nid)))
    try:
        for r in zuul.zk.get_children("/nodepool/requests"):
            out.append("request %s %s" % (r, zuul.request(r)))
        for r in zuul.zk.get_children("/nodepool/requests-lock"):
            out.append("request lock %s %s" % (
                r, lock_holders(zuul.zk, "/nodepool/requests-lock/" + r)))
    except NoNodeError:
        pass
    return "\n".join(out)


def resync_times(log):
    return [int(m) for m in re.findall(r"re-synced (\d+) ms after the connection", log)]


def worker_lags(log, t_back, what):
    """Per worker: seconds from ZooKeeper back to the first of its log
    lines (local time, milliseconds) matching the regular expression
    what."""
    out = {}
    for m in re.finditer(r"^(\S+ \S+) INFO worker\[([^\]]+)\]: " + what, log, re.M):
        t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()
        if t >= t_back - 0.5 and m.group(2) not in out:
            out[m.group(2)] = t - t_back
    return out


def reconnect_lags(log, t_back):
    """Per worker: seconds from ZooKeeper back to its (re)connection."""
    return worker_lags(log, t_back, r"zookeeper: (?:re)?connected, session")


def resume_lags(log, t_back):
    """Per worker: seconds from ZooKeeper back to its view re-synced and
    its work resumed (the decisions held back meanwhile are taken then)."""
    return worker_lags(log, t_back, r"ZooKeeper view re-synced")


def run_scenario(name, deployment, zuul, servers, timeout, outage, session_kept,
                 probe_zk=None):
    """Start nodepoold on `servers`, put it under load, run outage() (it
    returns the time ZooKeeper is back), then check and report. The probe
    requests right after the outage are Zuul's; with probe_zk (a function
    returning a started kazoo client) those of a second Zuul that connects
    anew then: Zuul's own client was cut off too and comes back only when
    kazoo's reconnect back-off (0.1 s doubling) lets it, up to ~1.4 s
    later, which would time Zuul, not nodepoold."""
    s = Supervisor(deployment, name="npd-" + name)
    load = watch = pk = None
    try:
        s.write(daemon_config(deployment, servers, timeout))
        s.start_fg(extra=["-d"] if os.environ.get("NP_TEST_DEBUG") else ())
        s.wait_running(list(PROVIDERS), timeout=60)
        wait_for(lambda: len([n for n in zuul.nodes().values()
                              if n.get("provider") == "static-a"
                              and n["state"] == "ready"]) == len(STATIC), 30,
                 what="static nodes ready")
        watch = SlotWatch(zuul)
        load = Load(zuul, LABELS)
        load.start()
        t0 = time.time()
        for label in LABELS:
            wait_for(lambda: len(load.fulfilled_after(label, t0)) >= 3, 60,
                     what="load flowing for %s" % label)
        before = pool_sessions(zuul.zk)

        t_back = outage()
        # a fresh request per label right after ZooKeeper is back
        pz = zuul
        if probe_zk is not None:
            pk = probe_zk()
            pz = Zuul(RetryingZk(pk))
        probes = {label: pz.submit([label], requestor="zuul-probe") for label in LABELS}
        # when each reached ZooKeeper (Zuul's own client may still have been
        # reconnecting)
        created = {label: pz.zk.exists("/nodepool/requests/" + rid).ctime / 1000.0
                   for label, rid in probes.items()}
        for label in LABELS:
            wait_for(lambda: len(load.fulfilled_after(label, t_back)) >= 5, 60,
                     what="%s served again" % label)
        first = {label: load.fulfilled_after(label, t_back)[0] - t_back for label in LABELS}
        probe_t = {}
        for label, rid in probes.items():
            req = pz.wait_request(rid, timeout=60)
            assert req["state"] == "fulfilled", req
            probe_t[label] = (created[label] - t_back, req["state_time"] - created[label])
            pz.finish(pz.accept(rid))
        load.finish()
        time.sleep(0.5)
        watch.finish()

        assert load.errors == [] and watch.errors == [], (load.errors, watch.errors)
        states = {}
        for r in load.records:
            states[r["state"]] = states.get(r["state"], 0) + 1
        assert states == {"fulfilled": len(load.records)}, states
        assert watch.worst == {h: 1 for h in STATIC}, watch.worst
        try:
            nodes = wait_for(lambda: settled(zuul), 45, interval=0.1,
                             what="every node ready, unallocated and unlocked")
        except AssertionError:
            raise AssertionError("not settled: %s\n%s" % (describe(zuul), s.log()[-6000:]))
        assert len([n for n in nodes.values() if n["provider"] == "static-a"]) == 3
        after = pool_sessions(zuul.zk)
        if session_kept:
            assert after == before, "the sessions lived on"
        else:
            assert all(not (after[p] & before[p]) for p in PROVIDERS), (before, after)
        st = s.status()
        assert all(w["state"] == "running" and w["restarts"] == 0 for w in st.values()), st
        log = s.log()
        assert "declined by every pool" not in log
        assert "refused our credentials" not in log
        resync = resync_times(log)
        lags = reconnect_lags(log, t_back)
        resumed = resume_lags(log, t_back)
        print("\n%s: %d requests, all fulfilled; after ZooKeeper was back: workers "
              "reconnected %s, re-synced their caches in %s ms, resumed work %s, "
              "first fulfilment %s; "
              "a fresh probe request (created +X ms by %s) fulfilled Y ms later: %s" % (
                  name, len(load.records),
                  ", ".join("%s %.0f ms" % (w, v * 1000) for w, v in sorted(lags.items())),
                  resync,
                  ", ".join("%s %.0f ms" % (w, v * 1000) for w, v in sorted(resumed.items())),
                  ", ".join("%s %.0f ms" % (l, v * 1000) for l, v in first.items()),
                  "a newly connected Zuul" if pk is not None else "Zuul",
                  ", ".join("%s +%.0f/%.0f ms" % (l, c * 1000, f * 1000)
                            for l, (c, f) in probe_t.items())))
        return first, probe_t
    finally:
        if load is not None:
            load.stop.set()
        if watch is not None:
            watch.stop.set()
        if pk is not None:
            pk.stop()
            pk.close()
        s.stop()


@pytest.fixture
def retry_zuul(zk_server, chroot):
    host_, port, certs = zk_server
    k = tls_kazoo("%s:%d%s" % (host_, port, chroot), certs)
    yield Zuul(RetryingZk(k))
    k.stop()
    k.close()


def test_short_partition_session_kept(deployment, retry_zuul, zk_server, chroot):
    with zk_proxy(zk_server, chroot) as (proxy, servers):
        def outage():
            proxy.cut()
            time.sleep(2.0)
            proxy.restore()
            return time.time()
        run_scenario("short-partition", deployment, retry_zuul, servers, 8, outage, True)


def test_hung_server_session_kept(deployment, retry_zuul, zk_server, chroot):
    with zk_proxy(zk_server, chroot) as (proxy, servers):
        def outage():
            proxy.hang()
            time.sleep(1.5)
            proxy.restore()
            return time.time()
        # a 6 s session: the handshake caught by the hang gives up after
        # 4 s, and the reconnection lands before the session would expire
        run_scenario("hung-server", deployment, retry_zuul, servers, 6, outage, True)


def test_long_partition_session_expires(deployment, retry_zuul, zk_server, chroot):
    with zk_proxy(zk_server, chroot) as (proxy, servers):
        def outage():
            before = pool_sessions(retry_zuul.zk)
            proxy.cut()
            # the server expires both sessions (2 s): their pools go
            old = set().union(*before.values())
            wait_for(lambda: not (owners(retry_zuul) & old), 20, what="sessions expired")
            proxy.restore()
            return time.time()
        run_scenario("long-partition", deployment, retry_zuul, servers, 2, outage, False)


def owners(zuul):
    out = set()
    for v in pool_sessions(zuul.zk).values():
        out |= v
    return out


def test_zookeeper_restart_same_data(deployment, zk_server, tmp_path):
    certs = zk_server[2]
    zk = Standalone(str(tmp_path / "zk-restart"), certs)
    k = None
    try:
        zk.start()
        k = chrooted_kazoo(zk.server.hostport(), certs)
        zuul = Zuul(RetryingZk(k))
        servers = [{"host": "127.0.0.1", "port": zk.server.tls, "chroot": "/np"}]
        run_scenario("zookeeper-restart", deployment, zuul, servers, 15, restart_outage(zk),
                     True, probe_zk=lambda: tls_kazoo(zk.server.hostport() + "/np", certs))
    finally:
        if k is not None:
            k.stop()
            k.close()
        zk.stop()


def test_ensemble_leader_killed(deployment, zk_server, tmp_path):
    certs = zk_server[2]
    ens = Ensemble(str(tmp_path / "zk-ensemble"), certs)
    k = None
    try:
        ens.start()
        hosts = ",".join(m.hostport() for m in ens.members)
        k = chrooted_kazoo(hosts, certs)
        zuul = Zuul(RetryingZk(k))
        servers = [{"host": "127.0.0.1", "port": m.tls, "chroot": "/np"} for m in ens.members]

        def outage():
            leader = ens.leader()
            assert leader is not None
            t_kill = time.time()
            leader.kill()
            ens.wait_quorum(60)
            t_back = time.time()
            print("\nleader %d killed; new quorum after %.1f s" % (
                leader.myid, t_back - t_kill))
            return t_back
        run_scenario("ensemble-leader-killed", deployment, zuul, servers, 15, outage, True,
                     probe_zk=lambda: tls_kazoo(hosts + "/np", certs))
    finally:
        if k is not None:
            k.stop()
            k.close()
        ens.stop()
