"""An ensemble cut off whole, under load (issue 27): every server of a
3-server ensemble unreachable from nodepoold (a TcpProxy in front of each,
all cut), twice for a moment (the sessions live on) and once for 15 s
(past the 6 s session timeout). The C client retries every address every
50-100 ms; it used to log each failure, about 40 lines a second per
process. Now the log holds a bounded number of connection lines per
outage and process (its first error, the loss, the outage summed up on
reconnection), the counts go to /metrics, and every request of the load
is fulfilled as before."""
import os
import re
import time

from conftest import TcpProxy, Zuul, wait_for
from load_helpers import Load, chrooted_kazoo
from npd import Supervisor, pool_sessions
from test_reconnect import (LABELS, PROVIDERS, STATIC, RetryingZk, daemon_config, describe,
                            settled)
from zkservers import Ensemble

# lines about the connection to ZooKeeper, of any process, at any level
# above debug
CONN = re.compile(r"^\S+ \S+ (WARNING|ERROR|INFO) (\S+): (zookeeper client: |zookeeper: "
                  r"(connection lost|reconnected|connected|session .* expired|TLS)|ZooKeeper )",
                  re.M)
# at most this many per process and outage (was ~40 a second while every
# server was away)
BOUND = 20


def conn_lines(log, t0, t1):
    """{process: [line]} of CONN lines logged between t0 and t1 (epoch s)."""
    import datetime
    out = {}
    for m in CONN.finditer(log):
        line = log[m.start():log.index("\n", m.start())]
        t = datetime.datetime.strptime(" ".join(line.split()[:2]),
                                       "%Y-%m-%d %H:%M:%S.%f").timestamp()
        if t0 <= t <= t1:
            out.setdefault(m.group(2), []).append(line)
    return out


def resent_counts(log, t0):
    """Per process: the operations it sent again after each outage since t0
    ("N operations interrupted by the lost connection sent again")."""
    import datetime
    out = {}
    for m in re.finditer(r"^(\S+ \S+) INFO (\S+): zookeeper: (\d+) operations? interrupted",
                         log, re.M):
        t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()
        if t >= t0:
            out.setdefault(m.group(2), []).append(int(m.group(3)))
    return out


def test_ensemble_cut_off(deployment, zk_server, tmp_path):
    certs = zk_server[2]
    ens = Ensemble(str(tmp_path / "zk-ensemble"), certs)
    proxies = []
    k = None
    s = Supervisor(deployment, name="npd-cutoff")
    load = None
    try:
        ens.start()
        hosts = ",".join(m.hostport() for m in ens.members)
        k = chrooted_kazoo(hosts, certs)
        zuul = Zuul(RetryingZk(k))
        proxies = [TcpProxy("127.0.0.1", m.tls) for m in ens.members]
        servers = [{"host": "127.0.0.1", "port": p.port, "chroot": "/np"} for p in proxies]
        s.write(daemon_config(deployment, servers, 6))
        s.start_fg(extra=["-d"] if os.environ.get("NP_TEST_DEBUG") else ())
        s.wait_running(list(PROVIDERS), timeout=60)
        wait_for(lambda: len([n for n in zuul.nodes().values()
                              if n.get("provider") == "static-a"
                              and n["state"] == "ready"]) == len(STATIC), 30,
                 what="static nodes ready")
        load = Load(zuul, LABELS)
        load.start()
        t_start = time.time()
        for label in LABELS:
            wait_for(lambda: len(load.fulfilled_after(label, t_start)) >= 3, 60,
                     what="load flowing for %s" % label)

        def outage(seconds):
            before = pool_sessions(zuul.zk)
            t0 = time.time()
            for p in proxies:
                p.cut()
            time.sleep(seconds)
            for p in proxies:
                p.restore()
            t1 = time.time()
            for label in LABELS:
                wait_for(lambda: len(load.fulfilled_after(label, t1)) >= 3, 90,
                         what="%s served again" % label)
            return t0, t1, before

        short = [outage(3.0), outage(3.0)]
        t0, t1, before = outage(15.0)
        windows = [(short[0][0], short[1][0]), (short[1][0], t0)]
        after = pool_sessions(zuul.zk)
        assert all(not (after[p] & before[p]) for p in PROVIDERS), (before, after)
        load.finish()
        assert load.errors == [], load.errors
        states = {}
        for r in load.records:
            states[r["state"]] = states.get(r["state"], 0) + 1
        assert states == {"fulfilled": len(load.records)}, states
        try:
            wait_for(lambda: settled(zuul), 60, interval=0.1,
                     what="every node ready, unallocated and unlocked")
        except AssertionError:
            raise AssertionError("not settled: %s\n%s" % (describe(zuul), s.log()[-6000:]))

        log = s.log()
        # the 15 s outage and the reconnection after it (a new session)
        lines = conn_lines(log, t0, time.time())
        counts = {p: len(v) for p, v in lines.items()}
        print("\nconnection lines per process during the 15 s outage: %s" % counts)
        for p, v in lines.items():
            assert len(v) <= BOUND, "%s logged %d connection lines:\n%s" % (
                p, len(v), "\n".join(v))
            assert not any(" ERROR " in x for x in v), v
        # and for the short outages (sessions kept), each up to the next
        for a, b in windows:
            lines = conn_lines(log, a, b)
            print("connection lines per process during a 3 s outage: %s" % (
                {p: len(v) for p, v in lines.items()},))
            for p, v in lines.items():
                assert len(v) <= BOUND, "%s logged %d connection lines:\n%s" % (
                    p, len(v), "\n".join(v))
                assert not any(" ERROR " in x for x in v), v
        print("operations sent again after each outage, per process: %s" % (
            resent_counts(log, t_start),))
        # the counts: the worker's record on /metrics (it reaches
        # nodepool-web with the worker's next status)
        import urllib.request

        def events():
            text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % s.web_port,
                                          timeout=10).read().decode()
            got = {k: int(v) for k, v in re.findall(
                r'^nodepool_zookeeper_events_total\{provider="static-a",'
                r'event="(\w+)"\} (\d+)$', text, re.M)}
            ok = (got.get("connection_losses", 0) >= 3 and got.get("expirations", 0) >= 1
                  and got.get("connect_errors", 0) > 0)
            return ok and got
        got = wait_for(events, 60, interval=0.5, what="ZooKeeper events on /metrics")
        print("static-a's ZooKeeper events on /metrics: %s" % got)
    finally:
        if load is not None:
            load.stop.set()
        s.stop()
        for p in proxies:
            p.close()
        if k is not None:
            k.stop()
            k.close()
        ens.stop()
