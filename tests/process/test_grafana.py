"""The Grafana dashboards shipped in packaging/grafana/ (made by
make-dashboards.py, installed by the .deb under /usr/share/nodepoold/grafana).

What an operator needs of them: they load in Grafana as provisioned
dashboards (the fields Grafana's dashboard model requires: uid, title,
schemaVersion, panels with ids, types, grid positions inside the 24-column
grid, targets, a datasource variable every panel and target uses, every
$variable a target names defined), and every metric they query is one
nodepoold exports: the Prometheus names are those a running nodepool-web
serves on /metrics (# TYPE lines), the Graphite ones those the C code sends
to statsd (its "nodepool...." keys), each under statsd's Graphite prefix
for its kind."""
import glob
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import wait_for
from npd import Supervisor, host, static_provider
from test_web import get

TOP = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
GRAFANA = os.path.join(TOP, "packaging", "grafana")
PANEL_TYPES = {"row", "timeseries", "stat", "bargauge", "table", "heatmap", "text", "gauge"}


def load(name):
    with open(os.path.join(GRAFANA, name)) as f:
        return json.load(f)


def panels(doc):
    return [p for p in doc["panels"] if p["type"] != "row"]


@pytest.mark.parametrize("name,ds_type", [("nodepoold-prometheus.json", "prometheus"),
                                          ("nodepoold-graphite.json", "graphite")])
def test_dashboard_model(name, ds_type):
    doc = load(name)
    for k in ("uid", "title", "schemaVersion", "panels", "templating", "time"):
        assert k in doc, k
    assert isinstance(doc["schemaVersion"], int) and doc["schemaVersion"] >= 36
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", doc["uid"])
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    ds = variables["datasource"]
    assert ds["type"] == "datasource" and ds["query"] == ds_type
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    cells = set()
    for p in doc["panels"]:
        assert p["type"] in PANEL_TYPES, p["type"]
        g = p["gridPos"]
        assert 0 <= g["x"] and g["w"] > 0 and g["x"] + g["w"] <= 24 and g["h"] > 0, g
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, ("panels overlap", p["title"])
                cells.add((x, y))
    for p in panels(doc):
        assert p["datasource"] == {"type": ds_type, "uid": "${datasource}"}, p["title"]
        if p["type"] == "text":
            continue
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}"
            assert t["refId"]
            text = t.get("expr") or t.get("target")
            assert text, (p["title"], t)
            for v in re.findall(r"\$(\w+)", text):
                assert v in variables or v.startswith("__"), (p["title"], v)
    # the panels the status page has
    titles = " ".join(p["title"].lower() for p in doc["panels"])
    for word in ("nodes by state", "label", "launch", "request", "max-servers"):
        assert word in titles, word


def test_dashboards_are_what_the_generator_makes(tmp_path):
    """packaging/grafana/*.json are make-dashboards.py's output, unedited."""
    script = os.path.join(GRAFANA, "make-dashboards.py")
    src = open(script).read().replace(
        'HERE = os.path.dirname(os.path.abspath(__file__))', 'HERE = %r' % str(tmp_path))
    subprocess.run([sys.executable, "-c", src], check=True)
    for f in ("nodepoold-prometheus.json", "nodepoold-graphite.json"):
        assert (tmp_path / f).read_text() == open(os.path.join(GRAFANA, f)).read(), f


def exported_prometheus(sup):
    """The metric names nodepool-web serves: its # TYPE lines, with a
    histogram's _bucket, _sum and _count."""
    port = sup.web_port
    sup.write({"labels": [{"name": "small"}],
               "providers": [static_provider("static-a", [host("a1", ["small"])])]})
    sup.start_fg()
    sup.wait_running(["static-a", "web"])
    wait_for(lambda: get(port, "/ready")[0] == 200, what="/ready 200")
    status, _, text = get(port, "/metrics")
    assert status == 200
    names = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M):
        names.add(name)
        if kind == "histogram":
            names.update(name + s for s in ("_bucket", "_sum", "_count"))
    return names


def test_prometheus_dashboard_queries_exported_metrics(deployment):
    sup = Supervisor(deployment)
    try:
        exported = exported_prometheus(sup)
    finally:
        sup.stop()
    assert "nodepool_nodes" in exported and "nodepool_quota_limit" in exported
    doc = load("nodepoold-prometheus.json")
    queried = set()
    for p in panels(doc):
        for t in p["targets"]:
            queried.update(re.findall(r"\b(nodepool_[a-z_]+)\b", t["expr"]))
    for v in doc["templating"]["list"]:
        q = v.get("query")
        if isinstance(q, dict):
            queried.update(re.findall(r"\b(nodepool_[a-z_]+)\b", q["query"]))
    assert queried, "no metric queried"
    assert queried <= exported, sorted(queried - exported)
    # every family nodepoold exports has a panel
    families = {n for n in exported if not re.search(r"_(bucket|sum|count)$", n)}
    assert families - {"nodepool_unreadable_records"} <= queried | {
        "nodepool_launch_duration_seconds"}, sorted(families - queried)


def statsd_keys():
    """The statsd keys the C code sends: every "nodepool...." string with
    %s (any non-empty text), as regular expressions."""
    keys = set()
    for path in glob.glob(os.path.join(TOP, "**", "*.c"), recursive=True):
        rel = os.path.relpath(path, TOP)
        if rel.startswith(("tests/", "build/", "build-")):
            continue  # tests' own strings, build output
        for lit in re.findall(r'"(nodepool\.[a-z_%.]+)"', open(path, errors="replace").read()):
            if lit == "nodepool.yaml":
                continue
            keys.add(lit)
    return keys


def graphite_series(target):
    """The series paths a Graphite target reads (functions stripped)."""
    return re.findall(r"(stats(?:_counts|\.gauges|\.timers)\.nodepool\.[^,)\s\"]+)", target)


def concrete(glob_path):
    """Examples of the names a Graphite path pattern covers: $var and * as
    a word, {a,b} as each alternative."""
    m = re.search(r"\{([^}]*)\}", glob_path)
    if m:
        out = []
        for alt in m.group(1).split(","):
            out += concrete(glob_path[:m.start()] + alt + glob_path[m.end():])
        return out
    return [re.sub(r"\$\w+|\*", "words", glob_path)]


def test_graphite_dashboard_queries_exported_statsd_names():
    keys = statsd_keys()
    assert "nodepool.nodes.%s" in keys and "nodepool.launch.provider.%s.%s" in keys
    regexes = [re.compile(re.escape(k).replace("%s", r"[^.]+(?:\.[^.]+)*") + "$") for k in keys]
    doc = load("nodepoold-graphite.json")
    paths = []
    for p in panels(doc):
        for t in p["targets"]:
            paths += graphite_series(t["target"])
    # a variable lists the children of a path: some key starts there
    for v in doc["templating"]["list"]:
        if v["type"] == "query":
            stem = re.sub(r"^stats\.gauges\.", "", v["query"]).rstrip("*")
            assert any(k.startswith(stem) for k in keys), v["query"]
    assert paths
    timer_aggs = r"\.(mean|upper_\d+|lower|count|sum|median|std)$"
    for path in paths:
        prefix, rest = re.match(r"(stats_counts|stats\.gauges|stats\.timers)\.(.*)", path).groups()
        if prefix == "stats.timers":
            assert re.search(timer_aggs, rest), path
            rest = re.sub(timer_aggs, "", rest)
        for name in concrete(rest):
            assert any(r.match(name) for r in regexes), (path, name)
