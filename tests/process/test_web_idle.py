"""nodepool-web's view of nodes and requests asleep while nobody reads it
(issue 25): after webapp view_idle_timeout seconds without a listing it
closes the view's ZooKeeper session (no watch, no record held), and the
next listing reads everything again before it is answered. What a user
checks: the first listing after an idle period shows what changed while
nobody looked (nodes added, removed, changed, locked; requests), exactly as
a process that watched all along would."""
import json
import signal

from conftest import TcpProxy, bin_path, free_port, wait_for
from operator_helpers import host, parse_table, ready_nodes, static_config
from test_web import get, wait_ready


def listing(port, path):
    status, _, body = get(port, path, "application/json")
    assert status == 200, (status, body)
    return json.loads(body)


def foreign(state, **kw):
    """A node of a provider this deployment does not serve, as another
    Nodepool launcher stores it (only what the listings read matters)."""
    n = {"state": state, "provider": "elsewhere", "type": ["other"],
         "hostname": "elsewhere.example", "state_time": 1700000000.0}
    n.update(kw)
    return json.dumps(n).encode()


def asleep_count(web):
    return web.output().count("web: view asleep")


def awake_count(web):
    return web.output().count("web: view awake")


def test_listing_after_idle_shows_what_changed_meanwhile(deployment, zuul):
    cfg = static_config([host("host-a", ["small"]), host("host-b", ["small"])])
    # the launcher serves its own API (upstream's) on the deployment's port
    path = deployment.write_config(cfg)
    deployment.start_launcher("static-a", path)
    statics = wait_for(lambda: len(ready_nodes(zuul)) == 2 and ready_nodes(zuul),
                       what="2 ready static nodes")
    zk = zuul.zk
    zk.create("/nodepool/nodes/0000090001", foreign("ready"), makepath=True)
    zk.create("/nodepool/nodes/0000090002", foreign("ready"))
    # nodepool-web on a port of its own, its view asleep after 0.5 s
    port = free_port()
    cfg["webapp"] = {"port": port, "listen_address": "127.0.0.1", "view_idle_timeout": 0.5}
    web_path = deployment.write_config(cfg, name="web.yaml")
    web = deployment.start([bin_path("nodepool-web"), "-c", web_path], "web")
    wait_ready(port)
    want = set(statics) | {"0000090001", "0000090002"}
    # the first listing wakes the view (nothing is watched before); as
    # text: the JSON listing below is then not an answer kept from before
    # (answers are kept 1 s per path and type)
    wait_for(lambda: {r["ID"] for r in parse_table(get(port, "/node-list")[2])[1]} == want,
             what="the four nodes listed")
    assert awake_count(web) >= 1

    # nobody reads: the view goes to sleep
    wait_for(lambda: asleep_count(web) >= 1, what="the view asleep")
    woken = awake_count(web)
    slept = asleep_count(web)

    # meanwhile: Zuul takes a static node (fulfilled, locked, in-use) and a
    # request nobody can serve fails; another launcher's nodes change
    rid = zuul.submit(["small"])
    zuul.wait_request(rid)
    held = zuul.accept(rid)
    taken = held[0][0]
    failed = zuul.submit(["no-such-label"])
    assert zuul.wait_request(failed)["state"] == "failed"
    zk.delete("/nodepool/nodes/0000090001")
    zk.set("/nodepool/nodes/0000090002", foreign("hold", comment="kept for a look"))
    zk.create("/nodepool/nodes/0000090003", foreign("building"))
    # nothing read the view meanwhile: it slept through all of it
    assert awake_count(web) == woken and asleep_count(web) == slept

    nodes = {n["id"]: n for n in listing(port, "/node-list")}
    assert awake_count(web) == woken + 1  # this listing woke it
    assert set(nodes) == set(statics) | {"0000090002", "0000090003"}
    assert nodes[taken]["state"] == "in-use" and nodes[taken]["locked"] == "locked"
    other = (set(statics) - {taken}).pop()
    assert nodes[other]["state"] == "ready" and nodes[other]["locked"] == "unlocked"
    assert nodes["0000090002"]["state"] == "hold"
    assert nodes["0000090002"]["comment"] == "kept for a look"
    assert nodes["0000090003"]["state"] == "building"
    reqs = {r["id"]: r for r in listing(port, "/request-list")}
    assert set(reqs) == {failed} and reqs[failed]["state"] == "failed"

    # the dump says how the view is (SIGUSR2: a few lines in the log)
    zuul.finish(held)
    web.signal(signal.SIGUSR2)
    wait_for(lambda: "view: " in web.output() and "woken" in web.output(),
             what="the dump's view line")
    web.signal(signal.SIGTERM)
    wait_for(lambda: not web.alive(), what="web stopped")
    assert web.p.returncode == 0


def test_view_idle_timeout_0_keeps_the_view_awake(deployment, zuul):
    """view_idle_timeout 0: watched from the start and never put to sleep,
    as before issue 25 (/ready waits for the view's first sync)."""
    port = free_port()
    cfg = static_config([host("host-a", ["small"])])
    cfg["webapp"] = {"port": port, "listen_address": "127.0.0.1", "view_idle_timeout": 0}
    path = deployment.write_config(cfg)
    web = deployment.start([bin_path("nodepool-web"), "-c", path], "web")
    wait_ready(port)
    zuul.zk.create("/nodepool/nodes/0000090001", foreign("ready"), makepath=True)
    wait_for(lambda: [n["id"] for n in listing(port, "/node-list")] == ["0000090001"],
             what="the node listed")
    web.signal(signal.SIGUSR2)
    wait_for(lambda: "view: awake (asleep after 0 s without a listing: never)" in web.output(),
             what="the dump's view line")
    assert awake_count(web) == 0 and asleep_count(web) == 0


def test_asleep_and_zookeeper_unreachable_answers_503(deployment, zuul):
    """A listing that finds the view asleep and ZooKeeper out of reach has
    nothing to show: 503, not an empty listing; once ZooKeeper is back the
    next listing reads the view and shows it."""
    zhost, zport, _ = deployment.zk_server
    proxy = TcpProxy(zhost, zport)
    try:
        port = free_port()
        cfg = static_config([host("host-a", ["small"])])
        cfg["zookeeper-servers"] = [{"host": "127.0.0.1", "port": proxy.port,
                                     "chroot": deployment.chroot}]
        cfg["zookeeper-timeout"] = 30  # the session outlives the cut
        cfg["webapp"] = {"port": port, "listen_address": "127.0.0.1",
                         "view_idle_timeout": 0.5}
        path = deployment.write_config(cfg)
        zuul.zk.create("/nodepool/nodes/0000090001", foreign("ready"), makepath=True)
        web = deployment.start([bin_path("nodepool-web"), "-c", path], "web")
        wait_ready(port)
        assert [n["id"] for n in listing(port, "/node-list")] == ["0000090001"]
        wait_for(lambda: asleep_count(web) >= 1, what="the view asleep")
        proxy.cut()
        wait_for(lambda: get(port, "/ready")[0] == 503, what="/ready 503 while cut")
        status, _, body = get(port, "/request-list", "application/json")
        assert status == 503 and "ZooKeeper is not connected" in body
        proxy.restore()
        wait_ready(port)
        assert [r["id"] for r in listing(port, "/request-list")] == []
        assert [n["id"] for n in listing(port, "/node-list")] == ["0000090001"]
    finally:
        proxy.close()
