"""The web API under abuse (issue 23; web.h's limits, nodepool.yaml(5)
webapp): an operator's /ready probe keeps being answered, within its
1-second client timeout, while

- a slowloris client holds 64 connections, each sending one header line
  every 6 s (and reconnecting when closed), and
- clients ask for the text node list of 10,000 nodes, one of which has a
  20 kB comment, each time with a new unknown query key (?x=N).

The probes' outcome is what is asserted (every probe answered 200), not a
measured duration."""
import json
import socket
import threading
import time
import urllib.error
import urllib.request

from conftest import bin_path, free_port, wait_for

PROBE_TIMEOUT = 1.0  # the "within 1 s"
ATTACKER = "127.0.0.2"  # another loopback address: another client


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


class Prober(threading.Thread):
    """/ready every half second; the outcome of each probe is kept."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.results = []
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.is_set():
            try:
                self.results.append(probe(self.port))
            except OSError as e:  # timeouts included
                self.results.append(repr(e))
            self.stopping.wait(0.5)

    def finish(self):
        self.stopping.set()
        self.join(10)
        return self.results


class Slowloris(threading.Thread):
    """One connection from ATTACKER: a request line, then one header line
    every `every` seconds, never the blank line that ends the head; when
    the server closes it, the same again on a new connection."""

    def __init__(self, port, stop, every=6.0):
        super().__init__(daemon=True)
        self.port, self.stop, self.every = port, stop, every
        self.closed_by_server = 0
        self.connects = 0

    def run(self):
        while not self.stop.is_set():
            s = socket.socket()
            try:
                s.bind((ATTACKER, 0))
                s.settimeout(2)
                s.connect(("127.0.0.1", self.port))
                self.connects += 1
                s.sendall(b"GET /node-list HTTP/1.1\r\nHost: x\r\n")
                n = 0
                s.settimeout(self.every)
                while not self.stop.is_set():
                    try:
                        if not s.recv(4096):
                            raise ConnectionResetError("closed by the server")
                    except socket.timeout:
                        s.sendall(b"X-Slow-%d: %d\r\n" % (n, n))
                        n += 1
            except OSError:
                self.closed_by_server += 1
                self.stop.wait(self.every)
            finally:
                s.close()


def test_slowloris_leaves_ready_answering(deployment):
    port = free_port()
    path = web_config(deployment, port)
    web = start_web(deployment, path, port)
    stop = threading.Event()
    attackers = [Slowloris(port, stop) for _ in range(64)]
    for a in attackers:
        a.start()
    prober = Prober(port)
    prober.start()
    time.sleep(25)  # four of the attacker's lines, two request timeouts
    results = prober.finish()
    stop.set()
    for a in attackers:
        a.join(10)
    assert len(results) >= 20
    assert all(r == 200 for r in results), results
    # the limits acted: connections over the per-client cap, and the ones
    # past the whole-request deadline, were closed by the server
    assert sum(a.closed_by_server for a in attackers) > 56
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

    stop = threading.Event()
    sizes, errors = [], []

    def hammer(k):
        i = 0
        while not stop.is_set():
            i += 1
            try:
                with urllib.request.urlopen(
                        "http://127.0.0.1:%d/node-list?x=%d-%d" % (port, k, i),
                        timeout=60) as r:
                    body = r.read()
                    sizes.append(len(body))
                    if i == 1 and k == 0:
                        hammer.body = body
            except (OSError, urllib.error.HTTPError) as e:
                errors.append(repr(e))
    hammer.body = None
    threads = [threading.Thread(target=hammer, args=(k,), daemon=True) for k in range(4)]
    prober = Prober(port)
    prober.start()
    for t in threads:
        t.start()
    time.sleep(15)
    results = prober.finish()
    stop.set()
    for t in threads:
        t.join(60)
    assert len(results) >= 10
    assert all(r == 200 for r in results), results
    assert not errors, errors[:5]
    assert sizes, "no /node-list answer"
    # The comment is cut in the text table (no 20 kB-wide rows); every
    # answer is the same cached one whatever ?x= says.
    body = hammer.body.decode()
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
