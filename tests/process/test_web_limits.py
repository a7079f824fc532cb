"""The web API under abuse (issue 23; web.h's limits, nodepool.yaml(5)
webapp): an operator's /ready probe keeps being answered, within its
1-second client timeout, while

- a slowloris client holds 64 connections, each sending one header line
  every 6 s (and reconnecting when closed), and
- clients ask for the text node list of 10,000 nodes, one of which has a
  20 kB comment, each time with a new unknown query key (?x=N).

The probes' outcome is what is asserted (every probe answered 200), not a
measured duration. The abusers and the probe are processes of their own
(web_abuse.py), the abusers from another loopback address (another
client)."""
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

from conftest import bin_path, free_port, wait_for

PROBE_TIMEOUT = 1.0  # the "within 1 s"


def web_config(deployment, port, **limits):
    w = {"port": port, "listen_address": "127.0.0.1"}
    w.update(limits)
    return deployment.write_config({
        "labels": [{"name": "small"}],
        "providers": [{"name": "p1", "driver": "static",
                       "pools": [{"name": "main", "nodes": []}]}],
        "webapp": w,
    })


def start_web(deployment, path, port):
    web = deployment.start([bin_path("nodepool-web"), "-c", path], "web")

    def ready():
        try:
            return probe(port) == 200
        except OSError:
            return False
    wait_for(ready, 60, what="nodepool-web /ready 200")
    return web


def probe(port, path="/ready", timeout=PROBE_TIMEOUT):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


ABUSE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "web_abuse.py")


def client(*args):
    """A web_abuse.py client of its own (a process), started now."""
    return subprocess.Popen([sys.executable, ABUSE] + [str(a) for a in args],
                            stdout=subprocess.PIPE)


def result(p, timeout=120):
    out, _ = p.communicate(timeout=timeout)
    assert p.returncode == 0
    return json.loads(out)


def test_slowloris_leaves_ready_answering(deployment):
    """While slow clients hold connections, /ready still answers. No
    deadline on the answer (the probe waits up to 30 s): what shows it came
    while the slow connections were held is that they were still open after
    it, and that the server closed them itself later (its request_timeout),
    so it had accepted them."""
    port = free_port()
    path = web_config(deployment, port)
    web = start_web(deployment, path, port)
    attack = client("slowloris", port, 64, 6.0, 28)
    time.sleep(1)  # the attack is on
    # four of the attacker's lines, two request timeouts; four more slow
    # connections, held by the probe itself
    held = result(client("held-probe", port, 25, 4, 30.0))
    closed = result(attack)
    statuses = [p[0] for p in held["probes"]]
    assert statuses
    assert all(r == 200 for r in statuses), [r for r in statuses if r != 200]
    # answered while all four slow connections were open (before the probe
    # was sent and after its answer came) ...
    assert any(n_open == 4 for _, n_open in held["probes"]), held
    # ... and the server held them: in every round all four were closed by
    # the server (four from one client are under the per-client cap: its
    # whole-request deadline), not by the probe
    assert held["rounds"]
    assert all(by_server == 4 for _, by_server in held["rounds"]), held
    # the limits acted: connections over the per-client cap, and the ones
    # past the whole-request deadline, were closed by the server
    assert closed > 56
    out = web.output()
    assert "max_connections_per_client reached" in out
    assert web.alive()


def write_nodes(zk, n, big_comment):
    zk.ensure_path("/nodepool/nodes")
    now = time.time()
    pending = []
    for i in range(n):
        rec = {
            "state": "ready", "state_time": now, "created_time": now,
            "provider": "p1", "pool": "main", "type": ["small"],
            "cloud": "cloud", "region": None, "az": None,
            "hostname": "host-%05d" % i, "interface_ip": "192.0.2.1",
            "public_ipv4": "192.0.2.1", "public_ipv6": None,
            "external_id": "ext-%05d" % i, "launcher": "l", "allocated_to": None,
            "comment": big_comment if i == 0 else None, "attributes": {},
            "username": "zuul", "connection_type": "ssh", "connection_port": 22,
            "host_keys": [], "hold_job": None, "image_id": None,
        }
        pending.append(zk.create_async("/nodepool/nodes/%010d" % i,
                                       json.dumps(rec).encode()))
        if len(pending) >= 500:
            for p in pending:
                p.get(timeout=30)
            pending = []
    for p in pending:
        p.get(timeout=30)


def test_text_table_amplification_leaves_ready_answering(deployment, zk):
    port = free_port()
    write_nodes(zk, 10000, "c" * 20000)
    path = web_config(deployment, port)
    web = start_web(deployment, path, port)

    def all_listed():
        req = urllib.request.Request("http://127.0.0.1:%d/node-list" % port,
                                     headers={"Accept": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return len(json.loads(r.read())) == 10000
    wait_for(all_listed, 60, interval=0.5, what="10,000 nodes listed")
    # an operator has looked at the text list before (the process's first
    # large answer grows its heap once)
    with urllib.request.urlopen("http://127.0.0.1:%d/node-list" % port, timeout=60) as r:
        r.read()

    # The attack runs until the probes are done; the probe waits up to 30 s
    # an answer, so what shows /ready was not starved is the order: every
    # probe was answered after the attack's first answer and before its last.
    attack = subprocess.Popen([sys.executable, ABUSE, "hammer", str(port), "4", "300"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert attack.stdout.readline().strip() == "answered"
    results = result(client("probe", port, 15, 30.0))
    out, _ = attack.communicate(timeout=120)
    assert attack.returncode == 0
    got = json.loads(out)
    assert all(r[0] == 200 for r in results), [r for r in results if r[0] != 200]
    assert all(r[1] < got["last"] for r in results), \
        "a probe was answered only after the attack had ended"
    assert not got["errors"], got["errors"][:5]
    sizes = got["sizes"]
    assert sizes, "no /node-list answer"
    # The comment is cut in the text table (no 20 kB-wide rows); every
    # answer is the same cached one whatever ?x= says.
    body = got["first"]
    longest = max(len(line) for line in body.split("\n"))
    assert longest < 20000, longest
    assert "c" * 250 + "..." in body
    assert max(sizes) == min(sizes)
    assert max(sizes) < 32 << 20
    assert web.alive()


def test_response_size_bound(deployment, zk):
    """max_response_size: a listing larger than it is refused with a 503
    that says so; a smaller one (one node) is still served."""
    port = free_port()
    write_nodes(zk, 200, None)
    path = web_config(deployment, port, max_response_size=20000)
    start_web(deployment, path, port)
    req = urllib.request.Request("http://127.0.0.1:%d/node-list" % port)
    try:
        urllib.request.urlopen(req, timeout=10)
        raise AssertionError("a listing over max_response_size was served")
    except urllib.error.HTTPError as e:
        assert e.code == 503
        assert b"max_response_size (20000 bytes)" in e.read()
    with urllib.request.urlopen("http://127.0.0.1:%d/node-list?node_id=0000000007" % port,
                                timeout=10) as r:
        assert b"host-00007" in r.read()
