"""Process-test fixtures: a real ZooKeeper, real nodepoold processes, and a
requester that plays Zuul's part with kazoo (Zuul's own ZooKeeper library),
as Zuul's zuul/zk/nodepool.py does (reference section 1.6).

Environment (set by tests/run.sh; started here when missing):
  NP_TEST_ZK_TLS, NP_TEST_CERTS  the private ZooKeeper (TLS) and certificates
  NP_BUILD                       the build directory with bin/
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _build():
    return os.environ.get("NP_BUILD", os.path.join(TOP, "build"))


def bin_path(name):
    return os.path.join(_build(), "bin", name)


@pytest.fixture(scope="session")
def zk_server():
    """(host, port, certs dir) of a TLS ZooKeeper shared by the session."""
    if os.environ.get("NP_TEST_ZK_TLS"):
        host, port = os.environ["NP_TEST_ZK_TLS"].rsplit(":", 1)
        yield host, int(port), os.environ["NP_TEST_CERTS"]
        return
    d = tempfile.mkdtemp(prefix="np-pytest-zk.")
    subprocess.check_call(["sh", os.path.join(TOP, "tests/zkfixture.sh"), "start", d])
    env = {}
    with open(os.path.join(d, "env")) as f:
        for line in f:
            k, v = line.replace("export ", "").strip().split("=", 1)
            env[k] = v
    host, port = env["NP_TEST_ZK_TLS"].rsplit(":", 1)
    try:
        yield host, int(port), env["NP_TEST_CERTS"]
    finally:
        subprocess.call(["sh", os.path.join(TOP, "tests/zkfixture.sh"), "stop", d])
        shutil.rmtree(d, ignore_errors=True)


def kazoo_client(zk_server, chroot=""):
    host, port, certs = zk_server
    k = KazooClient(
        hosts="%s:%d%s" % (host, port, chroot),
        use_ssl=True,
        ca=os.path.join(certs, "ca.pem"),
        certfile=os.path.join(certs, "client.pem"),
        keyfile=os.path.join(certs, "client.key"),
        verify_certs=True,
    )
    k.start(timeout=15)
    return k


@pytest.fixture
def chroot(zk_server):
    """A fresh chroot for this test, created on the server."""
    path = "/np-test-%d-%s" % (os.getpid(), uuid.uuid4().hex[:8])
    k = kazoo_client(zk_server)
    k.ensure_path(path)
    k.stop()
    k.close()
    return path


@pytest.fixture
def zk(zk_server, chroot):
    """A kazoo client inside the test's chroot (Zuul's view)."""
    k = kazoo_client(zk_server, chroot)
    yield k
    k.stop()
    k.close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_for(pred, timeout=20.0, interval=0.02, what="condition"):
    deadline = time.time() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.time() > deadline:
            raise AssertionError("timed out waiting for %s" % what)
        time.sleep(interval)


class Proc:
    """A process we started; stopped by pid only."""

    def __init__(self, args, log_path, env=None):
        self.log_path = log_path
        self.log = open(log_path, "wb")
        e = dict(os.environ)
        e.update(env or {})
        self.p = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=e)

    @property
    def pid(self):
        return self.p.pid

    def alive(self):
        return self.p.poll() is None

    def signal(self, sig):
        if self.alive():
            os.kill(self.p.pid, sig)

    def stop(self, timeout=10):
        if self.alive():
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        if not self.log.closed:
            self.log.close()
        return self.p.returncode

    def output(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")


class Deployment:
    """Writes nodepool.yaml for the test's chroot and runs our programs."""

    def __init__(self, zk_server, chroot, tmpdir):
        self.zk_server = zk_server
        self.chroot = chroot
        self.dir = str(tmpdir)
        self.procs = []

    def zk_config(self):
        host, port, certs = self.zk_server
        return {
            "zookeeper-servers": [{"host": host, "port": port, "chroot": self.chroot}],
            "zookeeper-tls": {
                "ca": os.path.join(certs, "ca.pem"),
                "cert": os.path.join(certs, "client.pem"),
                "key": os.path.join(certs, "client.key"),
            },
        }

    def write_config(self, cfg, name="nodepool.yaml"):
        full = self.zk_config()
        full.update(cfg)
        path = os.path.join(self.dir, name)
        with open(path + ".tmp", "w") as f:
            json.dump(full, f, indent=2)  # JSON is YAML
        os.rename(path + ".tmp", path)
        return path

    def start_launcher(self, provider, config_path, extra_args=()):
        log = os.path.join(self.dir, "launcher-%s-%d.log" % (provider, len(self.procs)))
        p = Proc([bin_path("nodepool-launcher"), "-p", provider, "-c", config_path]
                 + list(extra_args), log)
        self.procs.append(p)
        return p

    def start(self, args, name, env=None):
        log = os.path.join(self.dir, "%s-%d.log" % (name, len(self.procs)))
        p = Proc(args, log, env=env)
        self.procs.append(p)
        return p

    def stop_all(self):
        for p in self.procs:
            p.stop()


@pytest.fixture
def deployment(zk_server, chroot, tmp_path):
    d = Deployment(zk_server, chroot, tmp_path)
    yield d
    d.stop_all()
    for p in d.procs:
        out = p.output()
        # A launcher must never crash or trip a sanitizer in any test.
        assert "AddressSanitizer" not in out, out[-4000:]
        assert "runtime error:" not in out, out[-4000:]


class Zuul:
    """Plays Zuul's side of the node request protocol with kazoo, as
    zuul/zk/nodepool.py does."""

    def __init__(self, zk):
        self.zk = zk

    def submit(self, labels, priority=100, requestor="zuul-test", provider=None,
               relative_priority=0, tenant=None, reuse=True):
        data = {
            "state": "requested",
            "state_time": time.time(),
            "node_types": list(labels),
            "requestor": requestor,
            "requestor_data": {"job": "test"},
            "provider": provider,
            "relative_priority": relative_priority,
            "event_id": uuid.uuid4().hex,
            "created_time": time.time(),
            "tenant_name": tenant,
            "reuse": reuse,
            "declined_by": [],
            "nodes": [],
        }
        self.zk.ensure_path("/nodepool/requests")
        path = self.zk.create("/nodepool/requests/%03d-" % priority,
                              json.dumps(data).encode(), sequence=True)
        return path.rsplit("/", 1)[1]

    def request(self, rid):
        try:
            data, _ = self.zk.get("/nodepool/requests/" + rid)
        except NoNodeError:
            return None
        return json.loads(data)

    def wait_request(self, rid, states=("fulfilled", "failed"), timeout=20):
        return wait_for(lambda: (self.request(rid) or {}).get("state") in states
                        and self.request(rid), timeout, what="request %s in %s" % (rid, states))

    def node(self, nid):
        try:
            data, _ = self.zk.get("/nodepool/nodes/" + nid)
        except NoNodeError:
            return None
        return json.loads(data) if data else None

    def nodes(self):
        out = {}
        try:
            children = self.zk.get_children("/nodepool/nodes")
        except NoNodeError:
            return out
        for c in children:
            try:
                n = self.node(c)
            except ValueError:
                continue  # not JSON: a malformed record
            if isinstance(n, dict):
                out[c] = n
        return out

    def store_node(self, nid, node):
        self.zk.set("/nodepool/nodes/" + nid, json.dumps(node).encode())

    def accept(self, rid):
        """Lock the fulfilled request's nodes, set them in-use, delete the
        request. Returns [(node id, lock)]."""
        req = self.request(rid)
        held = []
        for nid in req["nodes"]:
            lock = self.zk.Lock("/nodepool/nodes/%s/lock" % nid)
            assert lock.acquire(timeout=10), "could not lock node %s" % nid
            n = self.node(nid)
            n["state"] = "in-use"
            n["state_time"] = time.time()
            self.store_node(nid, n)
            held.append((nid, lock))
        self.zk.delete("/nodepool/requests/" + rid)
        return held

    def finish(self, held):
        for nid, lock in held:
            n = self.node(nid)
            n["state"] = "used"
            n["state_time"] = time.time()
            self.store_node(nid, n)
            lock.release()

    def pools(self):
        try:
            children = self.zk.get_children("/nodepool/components/pool")
        except NoNodeError:
            return []
        out = []
        for c in children:
            try:
                data, _ = self.zk.get("/nodepool/components/pool/" + c)
                out.append(json.loads(data))
            except NoNodeError:
                pass
        return out


@pytest.fixture
def zuul(zk):
    return Zuul(zk)


class TcpProxy:
    """A loopback TCP proxy the test can cut: cut() drops every connection
    and refuses new ones until restore(). TLS passes through untouched."""

    def __init__(self, target_host, target_port):
        import threading
        self.target = (target_host, target_port)
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.port = self.lsock.getsockname()[1]
        self.conns = []
        self.cut_now = False
        self.stopped = False
        self.lock = threading.Lock()
        self.t = threading.Thread(target=self._accept, daemon=True)
        self.t.start()

    def _pipe(self, a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.close()
            except OSError:
                pass

    def _accept(self):
        import threading
        while not self.stopped:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            if self.cut_now:
                c.close()
                continue
            try:
                u = socket.create_connection(self.target, 5)
            except OSError:
                c.close()
                continue
            with self.lock:
                self.conns += [c, u]
            threading.Thread(target=self._pipe, args=(c, u), daemon=True).start()
            threading.Thread(target=self._pipe, args=(u, c), daemon=True).start()

    def cut(self):
        self.cut_now = True
        with self.lock:
            for s in self.conns:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                    s.close()
                except OSError:
                    pass
            self.conns = []

    def restore(self):
        self.cut_now = False

    def close(self):
        self.stopped = True
        self.cut()
        self.lsock.close()
