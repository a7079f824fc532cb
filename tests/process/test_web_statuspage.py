"""The operator's status page of nodepool-web (`/`, lib/ops/statuspage.h),
opened in a real headless Chromium (tests/process/browser.py) against
nodepoold serving a static and a fake provider under a Zuul-like load
(load_helpers.Load, conftest.Zuul).

What an operator checks: every panel's numbers on the page agree with the
JSON endpoints they come from (/node-list, /request-list, /metrics,
/dib-image-list, /status-summary); the page's script logs no error; a link
per provider filters every panel; a provider whose worker is killed shows
as down. Screenshots go to the test's directory (paths printed)."""
import json
import os
import re
import signal
import time
import urllib.parse

import pytest

import browser
from conftest import wait_for
from load_helpers import Load
from npd import Supervisor, host, static_provider
from operator_helpers import build_record, upload_record, write_build, write_upload
from test_web import get, parse_metrics

PHASES = ["quota_wait", "create", "boot", "keyscan", "total"]


@pytest.fixture
def sup(deployment):
    s = Supervisor(deployment)
    yield s
    s.stop()


def config(deployment):
    static = static_provider("static-a", [host("a%d" % i, ["small"]) for i in range(1, 4)])
    fake = {"name": "sim", "driver": "fake", "launch-retries": 3,
            "state-file": os.path.join(deployment.dir, "cloud-sim.json"),
            "pools": [{"name": "main", "max-servers": 4, "labels": [{"name": "medium"}]}]}
    return {"labels": [{"name": "small"}, {"name": "medium"}],
            "providers": [static, fake],
            "tenant-resource-limits": [{"tenant-name": "tenant-one", "max-servers": 10}]}


def jget(port, path):
    status, _, body = get(port, path, "application/json")
    assert status == 200, (path, status, body[:300])
    return json.loads(body)


def dom_numbers(b):
    """Every figure the page shows, by its data-k key."""
    return b.js("var o = {}; document.querySelectorAll('[data-k]').forEach("
                "function (e) { o[e.getAttribute('data-k')] = e.textContent.trim(); });"
                "return o;")


def wait_drawn_after(b, t):
    """Until the page's script has drawn a summary generated after t."""
    return wait_for(lambda: float(b.js("return document.body.getAttribute('data-generated')"
                                       " || '0'")) > t, timeout=30,
                    what="the page redrawn from a summary after %.1f" % t)


def quiet_node_list(port):
    """The node listing once two reads a second apart agree (no launch or
    deletion in flight)."""
    last = [None]

    def same():
        now = sorted((n["id"], n["state"]) for n in jget(port, "/node-list"))
        ok = now == last[0] and not any(s in ("building", "deleting", "init")
                                        for _, s in now)
        last[0] = now
        return ok
    wait_for(same, timeout=60, interval=1.0, what="nodes at rest")
    return jget(port, "/node-list")


def check_against_endpoints(b, port, provider=None):
    """The page's figures against the JSON endpoints (the fleet at rest)."""
    nodes = [n for n in jget(port, "/node-list")
             if provider is None or n["provider"] == provider]
    requests = jget(port, "/request-list")
    metrics = parse_metrics(get(port, "/metrics")[2])
    dib = jget(port, "/dib-image-list")
    uploads = [u for u in jget(port, "/image-list")
               if provider is None or u["provider"] == provider]
    d = dom_numbers(b)
    assert int(d["nodes-total"]) == len(nodes), (d["nodes-total"], len(nodes))
    by_state = {}
    for n in nodes:
        by_state[n["state"]] = by_state.get(n["state"], 0) + 1
        for label in n["label"]:
            key = "label-state:%s|%s" % (label, n["state"])
            assert key in d, (key, sorted(d))
    for st, c in by_state.items():
        assert int(d["state:" + st]) == c, (st, d["state:" + st], c)
    for label in {l for n in nodes for l in n["label"]}:
        for st in by_state:
            want = sum(1 for n in nodes if label in n["label"] and n["state"] == st)
            assert int(d["label-state:%s|%s" % (label, st)]) == want
    for prov in {n["provider"] for n in nodes}:
        mine = [n for n in nodes if n["provider"] == prov]
        assert int(d["prov-total:" + prov]) == len(mine)
        # quota: every node of the provider but those already deleted
        used = sum(1 for n in mine if n["state"] != "deleted")
        assert int(d["quota:%s||servers" % prov]) == used
        pools = {n["pool"] for n in mine}
        for pool in pools:
            assert int(d["quota:%s|%s|servers" % (prov, pool)]) == sum(
                1 for n in mine if n["pool"] == pool and n["state"] != "deleted")
    # launch phases: /metrics' histogram counts, summed over the providers shown
    for ph in PHASES:
        want = sum(v for k, v in metrics.items()
                   if k.startswith("nodepool_launch_duration_seconds_count{") and
                   'phase="%s"' % ph in k and
                   (provider is None or 'provider="%s"' % provider in k))
        assert int(d["phase-count:" + ph]) == int(want), (ph, d["phase-count:" + ph], want)
    # requests waiting: requested or pending in /request-list
    waiting = [r for r in requests if r["state"] in ("requested", "pending")]
    assert int(d["req-waiting"]) == len(waiting)
    assert sum(int(d["req-age:%d" % i]) for i in range(6)) == len(waiting)
    assert int(d["held-count"]) == by_state.get("hold", 0)
    # diskimages: builds and uploads per image, as the listings have them
    for image in {x["image"] for x in dib}:
        assert int(d["image-builds:" + image]) == sum(1 for x in dib if x["image"] == image)
        assert int(d["image-uploads:" + image]) == sum(
            1 for u in uploads if u["image"] == image)
    return d


def test_status_page_in_chromium(sup, zuul, deployment, tmp_path):
    why = browser.missing()
    if why:
        pytest.skip(why)
    port = sup.web_port
    # restart-backoff-max: a worker killed again and again stays away
    # longer than its session (zookeeper-timeout 4 s), whose end takes
    # its pools' registration with it
    sup.write(config(deployment), settings={"restart-backoff-max": 30})
    sup.start_fg()
    sup.wait_running(["static-a", "sim", "web"])
    wait_for(lambda: get(port, "/ready")[0] == 200, what="/ready 200")

    # Zuul's side: jobs on both labels for a while, and one node autoheld
    load = Load(zuul, ["small", "medium"], per_label=2)
    load.start()
    rid = zuul.submit(["small"])
    assert zuul.wait_request(rid)["state"] == "fulfilled"
    held = zuul.accept(rid)
    hid = zuul.autohold_request(node_expiration=7200)
    zuul.autohold(held, hid)
    wait_for(lambda: len(load.records) >= 12, timeout=90, what="a dozen jobs run")
    load.finish()
    assert load.errors == [], load.errors[:3]
    # one request waiting: the fake pool (max-servers 4) holds three
    # nodes for a first request when a second asks for three more
    first = zuul.submit(["medium"] * 3)
    assert zuul.wait_request(first)["state"] == "fulfilled"
    waiting = zuul.submit(["medium"] * 3)
    quiet_node_list(port)
    # a diskimage as upstream's builder records it: a build a day old,
    # uploaded to sim, and one building
    day = time.time() - 86400
    b1 = write_build(zuul.zk, "ubuntu-jammy", build_record(state_time=day))
    write_upload(zuul.zk, "ubuntu-jammy", b1, "sim", upload_record(state_time=day + 600))
    write_build(zuul.zk, "ubuntu-jammy", build_record(state="building"))
    t_quiet = time.time()

    summary = jget(port, "/status-summary")
    assert [p["name"] for p in summary["providers"]] == ["static-a", "sim"]
    # sim's pool is paused: the waiting request is over its quota (as
    # upstream's launcher pauses a pool that cannot satisfy a request)
    states = {p["name"]: p["state"] for p in summary["providers"]}
    assert states == {"static-a": "up", "sim": "paused"}, states
    # the sample ring: a sample every 10 s; wait for one with the fleet in it
    wait_for(lambda: any(x["by_state"] for x in
                         jget(port, "/status-summary")["history"]["samples"]),
             timeout=30, what="a sample of the nodes in the history")

    with browser.Browser(str(tmp_path)) as b:
        b.get("http://127.0.0.1:%d/" % port)
        wait_drawn_after(b, t_quiet)
        assert b.js("return document.querySelectorAll('#chart svg polygon').length") >= 1
        d = check_against_endpoints(b, port)
        assert d["prov-state:static-a"] == "up" and d["prov-state:sim"] == "paused"
        assert int(d["held-count"]) == 1
        assert int(d["phase-count:total"]) >= 1
        assert int(d["image-builds:ubuntu-jammy"]) == 2
        assert int(d["image-uploads:ubuntu-jammy"]) == 1
        assert int(d["req-waiting"]) == 1
        render_ms = b.js("return window.npRenderMs")
        shot = b.screenshot(str(tmp_path / "status-page.png"))
        print("\nstatus page screenshot: %s (drawn in %.1f ms)" % (shot, render_ms))
        assert b.console_errors() == []

        # the provider link filters every panel
        href = b.js("var a = document.querySelector('#providers a.flt[href*=\"provider=sim\"]');"
                    "return a && a.getAttribute('href');")
        assert href == "?provider=sim"
        b.get("http://127.0.0.1:%d/%s" % (port, href))
        t = time.time()
        wait_drawn_after(b, t)
        d = check_against_endpoints(b, port, provider="sim")
        assert [k for k in d if k.startswith("prov-state:")] == ["prov-state:sim"]
        assert not any(k.startswith("label-state:small") for k in d)
        shot = b.screenshot(str(tmp_path / "status-page-sim.png"))
        print("filtered by provider sim: %s" % shot)

        # the fake provider's worker killed (by pid, until its back-off
        # keeps it away for longer than three polls): shown down
        b.get("http://127.0.0.1:%d/" % port)

        def page_shows_down():
            pid = sup.status()["sim"]["pid"]
            if pid:
                os.kill(pid, signal.SIGKILL)
            return dom_numbers(b).get("prov-state:sim") == "down"
        wait_for(page_shows_down, timeout=90, interval=1.0, what="the page showing sim down")
        assert jget(port, "/status-summary")["providers"][1]["state"] == "down"
        assert dom_numbers(b)["prov-state:static-a"] == "up"
        shot = b.screenshot(str(tmp_path / "status-page-down.png"))
        print("sim's worker killed: %s" % shot)
        assert b.console_errors() == []
    zuul.cancel(waiting)
    zuul.cancel(first)
    zuul.finish(held)


def figures(html):
    """The data-k figures of the server's HTML (the script left out)."""
    return dict(re.findall(r'data-k="([^"]+)">([^<]*)<', html.split("<script")[0]))


def test_status_page_without_javascript(sup, zuul, deployment):
    """The tables are the server's: the HTML alone carries every figure."""
    port = sup.web_port
    sup.write(config(deployment))
    sup.start_fg()
    sup.wait_running(["static-a", "sim", "web"])
    wait_for(lambda: get(port, "/ready")[0] == 200, what="/ready 200")
    rid = zuul.submit(["medium"])
    assert zuul.wait_request(rid)["state"] == "fulfilled"
    status, headers, html = get(port, "/")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    keys = figures(html)
    nodes = jget(port, "/node-list")
    assert int(keys["nodes-total"]) == len(nodes)
    assert keys["prov-state:sim"] in ("up", "down")
    for section in ("providers", "nodes", "quota", "requests", "phases", "images", "held"):
        assert '<section id="%s">' % section in html
    # no external assets: nothing fetched but the page and its summary
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert "<script src" not in html and 'rel="stylesheet"' not in html
    # the label link filters: only medium's figures
    status, _, html = get(port, "/?label=medium")
    keys = figures(html)
    assert int(keys["nodes-total"]) == sum(1 for n in nodes if "medium" in n["label"])
    assert not any(k.startswith("label-state:small") for k in keys)
    # a bad filter is an empty page, not an error
    status, _, html = get(port, "/?provider=" + urllib.parse.quote("<nope>"))
    assert status == 200 and "&lt;nope&gt;" in html and "<nope>" not in html
