"""The web API in its own process (nodepool-web) under nodepoold: a child
beside the workers with its own ZooKeeper session, so that no provider's
fate reaches it. What an operator checks: /ready and /node-list keep
answering while the first provider's worker is killed over and over, or
when it cannot run at all (exit 100); /metrics carries every worker's
figures, passed on by the supervisor; nodepool-web itself is restarted like
any child."""
import json
import os
import shutil
import signal
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import bin_path, free_port, wait_for
from npd import Supervisor, alive, host, static_provider
from test_web import get, parse_metrics


def two_providers(port):
    return {
        "labels": [{"name": "small"}],
        "providers": [
            static_provider("static-a", [host("a1", ["small"])]),
            static_provider("static-b", [host("b1", ["small"])]),
        ],
        "webapp": {"port": port, "listen_address": "127.0.0.1"},
    }


@pytest.fixture
def sup(deployment):
    s = Supervisor(deployment)
    yield s
    s.stop()


def node_list(port):
    status, headers, body = get(port, "/node-list", "application/json")
    assert status == 200, (status, body)
    return json.loads(body)


def metrics(port):
    status, headers, body = get(port, "/metrics")
    assert status == 200, (status, body)
    return parse_metrics(body)


def metric(port, name):
    return metrics(port).get(name)


def stored_starts(zuul, provider):
    try:
        return json.loads(zuul.zk.get("/nodepoold/metrics/" + provider)[0])["starts"]
    except Exception:
        return None


class Poller(threading.Thread):
    """Asks /ready and /node-list again and again; every failure (no answer,
    an error status, a body that is not the listing) is kept."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.polls = 0
        self.failures = []
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.is_set():
            try:
                status, _, body = get(self.port, "/ready")
                if status != 200 or body != "OK":
                    self.failures.append(("/ready", status, body))
                nodes = json.loads(get(self.port, "/node-list", "application/json")[2])
                if not isinstance(nodes, list) or len(nodes) != 2:
                    self.failures.append(("/node-list", nodes))
            except (OSError, ValueError) as e:
                self.failures.append(("error", repr(e)))
            self.polls += 1
            time.sleep(0.02)

    def stop(self):
        self.stopping.set()
        self.join(10)


def test_web_answers_while_first_worker_is_killed_in_a_loop(sup, zuul):
    port = free_port()
    # stats-interval long: the workers' stored records are written once at
    # start, so figures that move later reach /metrics only through nodepoold
    sup.write(two_providers(port), settings={"stats-interval": 3600})
    sup.start_fg()
    st = sup.wait_running(["static-a", "static-b", "web"])
    web_pid = st["web"]["pid"]
    assert st["web"]["kind"] == "web"
    wait_for(lambda: get(port, "/ready")[0] == 200, what="/ready 200")
    wait_for(lambda: len(node_list(port)) == 2, what="both nodes listed")
    assert sorted(n["provider"] for n in node_list(port)) == ["static-a", "static-b"]

    poller = Poller(port)
    poller.start()
    try:
        for i in range(4):
            # the next worker continues from the stored record: kill this
            # one once it has stored its start (a worker killed sooner
            # cannot be counted by anyone)
            wait_for(lambda: stored_starts(zuul, "static-a") == i + 1,
                     what="start %d of static-a stored" % (i + 1))
            victim = sup.status()["static-a"]["pid"]
            os.kill(victim, signal.SIGKILL)
            wait_for(lambda: (lambda w: w["pid"] not in (0, victim) and
                              w["state"] == "running")(sup.status()["static-a"]),
                     what="static-a back after kill %d" % (i + 1))
            # the new worker counted its start and nodepoold passed it on
            wait_for(lambda: metric(port, 'nodepool_worker_starts_total{provider="static-a"}')
                     == i + 2, what="start %d of static-a in /metrics" % (i + 2))
    finally:
        poller.stop()
    assert poller.failures == [], poller.failures[:5]
    assert poller.polls >= 20
    after = sup.status()
    assert after["web"]["pid"] == web_pid and after["web"]["restarts"] == 0
    assert after["static-a"]["restarts"] == 4
    m = metrics(port)
    assert m['nodepool_worker_restarts_total{provider="static-a"}'] == 4
    assert m['nodepool_worker_starts_total{provider="static-b"}'] == 1

    # a request static-b fulfils shows on /metrics although its stored
    # record is not written again for an hour: the figure came over the
    # supervisor's channels
    rid = zuul.submit(["small"], provider="static-b")
    assert zuul.wait_request(rid)["state"] == "fulfilled"
    wait_for(lambda: metric(port, 'nodepool_requests_handled_total{provider="static-b",'
                                  'outcome="fulfilled"}') == 1,
             what="static-b's fulfilled request in /metrics")
    stored = json.loads(zuul.zk.get("/nodepoold/metrics/static-b")[0])
    assert stored["requests"]["fulfilled"] == 0


def fake_bindir(tmp_path, doomed):
    """nodepoold, nodepool-web and a nodepool-launcher that exits 100 for
    provider `doomed` (its driver not available) and runs the real one
    otherwise."""
    d = tmp_path / "bin"
    d.mkdir()
    shutil.copy(bin_path("nodepoold"), d / "nodepoold")
    w = d / "nodepool-launcher"
    w.write_text("#!/bin/sh\n"
                 "if [ \"$2\" = %s ]; then echo \"worker[$2]: driver not available\" >&2; "
                 "exit 100; fi\n"
                 "exec %s \"$@\"\n" % (doomed, bin_path("nodepool-launcher")))
    w.chmod(0o755)
    os.symlink(bin_path("nodepool-web"), d / "nodepool-web")
    return str(d)


def test_first_provider_exit_100_leaves_the_web_api_up(deployment, zuul, tmp_path):
    port = free_port()
    s = Supervisor(deployment, bindir=fake_bindir(tmp_path, "static-a"))
    try:
        s.write(two_providers(port))
        s.start_fg()
        st = wait_for(lambda: (lambda st: st["static-a"]["state"] == "dead" and
                               st["static-b"]["state"] == "running" and
                               st["web"]["state"] == "running" and st)(s.status()),
                      what="static-a dead, static-b and web running")
        assert "exited 100" in st["static-a"]["error"]
        wait_for(lambda: get(port, "/ready")[0] == 200, what="/ready 200")
        nodes = wait_for(lambda: node_list(port), what="static-b's node listed")
        assert [n["provider"] for n in nodes] == ["static-b"]
        assert json.loads(get(port, "/label-list", "application/json")[2]) == [
            {"label": "small"}]
        wait_for(lambda: metric(port, 'nodepool_worker_starts_total{provider="static-b"}') == 1,
                 what="static-b's figures in /metrics")
        rid = zuul.submit(["small"])
        assert zuul.wait_request(rid)["state"] == "fulfilled"
        wait_for(lambda: any(r["id"] == rid and r["state"] == "fulfilled" for r in json.loads(
            get(port, "/request-list", "application/json")[2])), what="request listed")
    finally:
        s.stop()


def test_web_process_is_restarted_like_any_child(sup, zuul):
    port = free_port()
    sup.write(two_providers(port))
    sup.start_fg()
    st = sup.wait_running(["static-a", "static-b", "web"])
    wait_for(lambda: get(port, "/ready")[0] == 200, what="/ready 200")
    os.kill(st["web"]["pid"], signal.SIGKILL)
    after = wait_for(lambda: (lambda w: w["pid"] not in (0, st["web"]["pid"]) and
                              w["state"] == "running" and w)(sup.status()["web"]),
                     what="web back")
    assert after["restarts"] == 1 and "signal 9" in after["error"]
    wait_for(lambda: get(port, "/ready")[0] == 200, what="/ready 200 again")
    # the workers were not touched, and their figures reach the new process
    st2 = sup.status()
    assert st2["static-a"]["pid"] == st["static-a"]["pid"]
    assert st2["static-b"]["pid"] == st["static-b"]["pid"]
    wait_for(lambda: metric(port, 'nodepool_worker_starts_total{provider="static-a"}') == 1,
             what="static-a's figures in the new web process")
    # nodepoolctl restarts it by name
    rc, out, err = sup.ctl("restart", "web")
    assert rc == 0 and "restarting web" in out, (out, err)
    wait_for(lambda: sup.status()["web"]["restarts"] == 2 and
             sup.status()["web"]["state"] == "running", what="web restarted by nodepoolctl")
    wait_for(lambda: get(port, "/ready")[0] == 200, what="/ready 200 after restart")
    assert alive(st2["static-a"]["pid"])
    # nodepool-web was never a worker's job: no worker listens on the port
    assert "serving on" not in "".join(
        line for line in sup.log().splitlines() if "worker[" in line)


def test_web_process_standalone(deployment, zuul):
    """nodepool-web -c nodepool.yaml: the API of a deployment, without
    nodepoold (its metrics: the stored records)."""
    port = free_port()
    cfg = two_providers(port)
    path = deployment.write_config(cfg)
    deployment.start_launcher("static-b", path)
    wait_for(lambda: len(zuul.pools()) == 1, what="static-b registered")
    web = deployment.start([bin_path("nodepool-web"), "-c", path], "web")

    def ready():
        try:
            return get(port, "/ready")[0] == 200
        except OSError:
            return False
    wait_for(ready, what="standalone web /ready 200")
    nodes = wait_for(lambda: node_list(port), what="static-b's node")
    assert [n["provider"] for n in nodes] == ["static-b"]
    wait_for(lambda: metric(port, 'nodepool_worker_starts_total{provider="static-b"}') == 1,
             what="stored record of static-b")
    web.signal(signal.SIGTERM)
    wait_for(lambda: not web.alive(), what="web stopped")
    assert web.p.returncode == 0


def test_reload_leaves_the_web_process_alone(sup, zuul):
    """webapp is read once, at start, as upstream: a reload that changes it
    is logged and the same nodepool-web keeps serving where it was; a
    reload that changes a provider does not touch it either, and its view
    follows."""
    port, port2 = free_port(), free_port()
    cfg = two_providers(port)
    sup.write(cfg)
    sup.start_fg()
    st = sup.wait_running(["static-a", "static-b", "web"])
    wait_for(lambda: get(port, "/ready")[0] == 200, what="/ready 200")
    cfg["webapp"]["port"] = port2
    sup.write(cfg)
    rc, out, err = sup.ctl("reload")
    assert rc == 0 and "3 unchanged, 0 changed" in out, (out, err)
    assert "webapp changes take effect when nodepoold restarts" in sup.log()
    assert get(port, "/ready")[0] == 200
    with pytest.raises(OSError):
        get(port2, "/ready")
    cfg["providers"][1]["pools"][0]["nodes"].append(host("b2", ["small"]))
    sup.write(cfg)
    rc, out, err = sup.ctl("reload")
    assert rc == 0 and "2 unchanged, 1 changed" in out, (out, err)
    wait_for(lambda: len(node_list(port)) == 3, what="b2 listed")
    after = sup.status()["web"]
    assert after["pid"] == st["web"]["pid"] and after["restarts"] == 0
