"""The pace of shared status listings (issue 25; drivers/statemachine/
pace.c) against the fake cloud, whose create machines learn their servers'
status only from a shared status listing, as a real cloud's: waves of
launches all complete, the listings stay shared (far fewer than one per
node) and within the budget (one a second on average, or one per 25
servers named, plus small bursts), and the launcher learns the label's boot
time."""
import re
import time

from fakecloud import Cloud, dump, fake_config, nothing_left_behind

BOOT = 0.5
WAVES, PER_WAVE = 3, 8


def test_waves_of_launches_share_few_status_listings(deployment, zuul):
    cfg = fake_config(deployment, provider={"boot-delay": BOOT})
    p = deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    t0 = time.monotonic()
    launched = 0
    for _ in range(WAVES):
        rids = [zuul.submit(["small"]) for _ in range(PER_WAVE)]
        reqs = [zuul.wait_request(rid) for rid in rids]
        assert [r["state"] for r in reqs] == ["fulfilled"] * PER_WAVE
        launched += PER_WAVE
        for rid in rids:
            zuul.finish(zuul.accept(rid))
    nothing_left_behind(zuul, cloud)
    elapsed = time.monotonic() - t0
    c = cloud.counters()
    assert c["creates"] == launched and c["boot_errors"] == 0
    listings = c["status_listings"]
    # shared: a wave's servers are answered together, not one listing each
    assert 0 < listings <= launched // 2, c
    # the budget: never more often than upstream's one-second period or
    # one listing per 25 servers named, the larger, beyond two bursts of
    # five (drivers/statemachine/pace.c)
    assert listings <= max(elapsed, launched / 25) + 2 * 5 + 1, (listings, elapsed)
    # the launcher learnt the label's boot time from every launch
    out = dump(p, marker="boot estimate of label small")
    m = re.findall(r"boot estimate of label small: ([0-9.]+)s \(deviation [0-9.]+s, "
                   r"(\d+) samples\)", out)
    assert m, out[-2000:]
    mean, samples = float(m[-1][0]), int(m[-1][1])
    assert samples == launched
    # a server is never seen ready before it booted (give or take the
    # moment between its creation and the create call's answer)
    assert mean > BOOT * 0.8, mean


def test_a_server_that_never_boots_is_followed_on_upstreams_period(deployment, zuul):
    """A server stuck in BUILD: its launch times out as before, and the
    follow-up listings space out to upstream's period meanwhile."""
    cfg = fake_config(deployment, provider={"never-ready-rate": 1, "launch-retries": 1,
                                            "launch-timeout": 4})
    deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    t0 = time.monotonic()
    rid = zuul.submit(["small"])
    assert zuul.wait_request(rid, timeout=30)["state"] == "failed"
    elapsed = time.monotonic() - t0
    c = cloud.counters()
    assert c["creates"] == 1
    assert 0 < c["status_listings"] <= elapsed + 5 + 1, (c, elapsed)
