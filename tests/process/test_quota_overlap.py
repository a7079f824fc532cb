"""Quota rounds that overlap under a held lock (issue 25, worker/quota.c).

While a launcher holds the provider's quota lock without a break, a round
wanted while the creates of the last one are still in flight (not answered,
or answered and not read by its node cache yet) runs at once, counting those
creates as reservations. A burst of requests larger than max-servers is the
case where a miscount would show: at no instant may the provider have more
nodes than max-servers (every state counts, as upstream's quota), with one
launcher, or two launchers (nodepoold on two hosts) sharing the provider.
Each test also reads the launchers' round counters (their SIGUSR2 dump) to
prove that rounds did overlap, so that the new path is the one checked."""
import os
import re
import signal

from conftest import wait_for
from ha_helpers import CREATE, NodeSampler, instances, os_config, os_sim, sims  # noqa: F401
from load_helpers import Load
from openstack_helpers import wait_clean, write_clouds

MAX = 6
JOBS = 3 * MAX  # a burst three times what the pool may hold
REQUESTS = 8 * MAX


def overlapping(sup):
    """The launcher's quota-round counters, from its SIGUSR2 dump (sent
    through nodepoold, which forwards it): (rounds, overlapping)."""
    before = len(sup.log())
    os.kill(sup.pid(), signal.SIGUSR2)
    pat = re.compile(r"provider lock rounds (\d+) \(taken \d+ times, (\d+) overlapping\)")
    m = wait_for(lambda: pat.search(sup.log()[before:]), 30, what="the launcher's dump")
    return int(m.group(1)), int(m.group(2))


def run_burst(deployment, zuul, sims, tmp_path, monkeypatch, n_instances):
    sim = os_sim(tmp_path, boot_delay=0.3)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    cfg = os_config(max_servers=MAX)
    cfg["providers"][0]["launch-retries"] = 1  # one create per attempt: countable
    sups = instances(deployment, n_instances, cfg)
    # every job submits at once: the burst; each hands its node back as
    # soon as it has it, so the pool stays at its limit while requests wait
    load = Load(zuul, ["small"], per_label=JOBS, wait_timeout=240, max_requests=REQUESTS)
    try:
        for s in sups:
            s.wait_running(["os1"], timeout=60)
        with NodeSampler(zuul.zk) as w:
            load.start()
            wait_for(lambda: len(load.records) >= REQUESTS and
                     all(r["state"] != "requested" for r in load.records), 240,
                     what="every request of the burst answered")
            load.finish()
            assert not load.errors, load.errors
            wait_for(lambda: not zuul.nodes(), 120, what="every node deleted")
        # never more nodes than max-servers at any instant sampled, and
        # the burst did fill the pool
        assert w.max == MAX, w.max
        assert w.samples > 50
        assert all(r["state"] == "fulfilled" for r in load.records), \
            [r for r in load.records if r["state"] != "fulfilled"]
        # one server per node, and every create the cloud saw was a node's
        assert all(len(v) == 1 for v in w.ext.values()), w.ext
        assert sim.call_count(**CREATE) == len(w.ext)
        wait_clean(sim, zuul)
        counts = [overlapping(s) for s in sups]
        # rounds ran while earlier creates were in flight: the path this
        # test is about did run
        assert sum(o for _, o in counts) > 0, counts
        return counts
    finally:
        load.stop.set()
        for s in sups:
            s.stop()


def test_burst_over_max_servers_one_launcher(deployment, zuul, sims, tmp_path, monkeypatch):
    run_burst(deployment, zuul, sims, tmp_path, monkeypatch, 1)


def test_burst_over_max_servers_two_launchers(deployment, zuul, sims, tmp_path, monkeypatch):
    counts = run_burst(deployment, zuul, sims, tmp_path, monkeypatch, 2)
    # both launchers ran rounds
    assert all(r > 0 for r, _ in counts), counts


def test_burst_over_tenant_limit(deployment, zuul, sims, tmp_path, monkeypatch):
    """Tenant limits (tenant-resource-limits, as upstream: every node of the
    tenant counts, any state) under the same overlapping rounds: a burst of
    three times the tenant's max-servers, the pool itself allowing more,
    never gives the tenant more nodes than its limit."""
    limit = 4
    sim = os_sim(tmp_path, boot_delay=0.3)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    cfg = os_config(max_servers=5 * limit)
    cfg["tenant-resource-limits"] = [{"tenant-name": "t1", "max-servers": limit}]
    (sup,) = instances(deployment, 1, cfg)
    try:
        sup.wait_running(["os1"], timeout=60)
        with NodeSampler(zuul.zk) as w:
            waiting = [zuul.submit(["small"], tenant="t1") for _ in range(3 * limit)]
            served = []

            def step():
                # Zuul's part: each fulfilled request's node taken, used
                # and handed back, so that the tenant has room again
                for rid in list(waiting):
                    req = zuul.request(rid)
                    if req["state"] == "failed":
                        raise AssertionError("request failed: %r" % req)
                    if req["state"] == "fulfilled":
                        zuul.finish(zuul.accept(rid))
                        waiting.remove(rid)
                        served.append(rid)
                return not waiting
            wait_for(step, 240, interval=0.05, what="every request of the burst served")
            wait_for(lambda: not zuul.nodes(), 120, what="every node deleted")
        # only t1's nodes exist here: never more than its limit at any
        # instant sampled, and the burst did reach it
        assert w.max == limit, w.max
        assert w.samples > 50
        assert len(served) == 3 * limit
        wait_clean(sim, zuul)
        _, overlapped = overlapping(sup)
        assert overlapped > 0
    finally:
        sup.stop()
