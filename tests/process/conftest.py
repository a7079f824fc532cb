"""Process-test fixtures: a real ZooKeeper, real nodepoold processes, and a
requester that plays Zuul's part with kazoo (Zuul's own ZooKeeper library),
as Zuul's zuul/zk/nodepool.py does (reference section 1.6).

Environment (set by tests/run.sh; started here when missing):
  NP_TEST_ZK_TLS, NP_TEST_CERTS  the private ZooKeeper (TLS) and certificates
  NP_BUILD                       the build directory with bin/
"""
import json
import os
import re
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

# Test machines run the suite as root: our daemons refuse root with no user
# to drop to unless told (lib/core/privsep.h). test_privsep.py runs them
# with users, and without this.
if os.geteuid() == 0:
    os.environ.setdefault("NODEPOOL_ALLOW_ROOT", "1")


# NP_BUILD may be relative (to where pytest was started): made absolute
# now, before any test changes directory (monkeypatch.chdir), as tests/run.sh
# makes it absolute.
BUILD = os.path.abspath(os.environ.get("NP_BUILD", os.path.join(TOP, "build")))


def _build():
    return BUILD


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
    os.environ["NP_TEST_ZK"] = env["NP_TEST_ZK"]  # its plain port (tests/process/zkwire.py)
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


DELETION_PASSES = re.compile(
    r"deletion passes for node events: (\d+) deferred [\d.]+s, (\d+) at once")


def deletion_passes(proc):
    """A worker's deletion passes for node events, (deferred, at once), from
    the dump it logs on SIGUSR2 (worker/launcher.c, lc_schedule_delete_soon)."""
    before = len(proc.output())
    proc.signal(signal.SIGUSR2)
    m = wait_for(lambda: DELETION_PASSES.search(proc.output()[before:]), what="worker dump")
    return int(m.group(1)), int(m.group(2))


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
        # A standalone nodepool-launcher serves the web API as upstream's
        # does, by default on 0.0.0.0:8005: a port every test (and anything
        # else on the machine) would share, open on every interface. Every
        # config this deployment writes gets a free loopback port of its own
        # unless the test sets `webapp`; the same port for every rewrite, so
        # a reload does not move it.
        self.web_port = free_port()

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
        full["webapp"] = {"port": self.web_port, "listen_address": "127.0.0.1"}
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
        # nor serve on every interface (write_config gives a loopback port)
        assert "serving on 0.0.0.0:" not in out, out[-4000:]


class ZuulNode:
    """The wire side of Zuul's zuul/model.py `Node`: what it keeps of a node
    record it read and what it writes back."""

    def __init__(self, nid):
        # Node.__init__: the attributes toDict always writes
        self.id = nid
        self.lock = None
        self.attrs = {"hold_job": None, "comment": None, "user_data": None,
                      "tenant_name": None, "requestor": None}
        self._state = "unknown"
        self._keys = []

    def updateFromDict(self, data):
        # Node.updateFromDict: state taken as is (no setter), every other
        # key except name/aliases kept, in the record's order
        self._state = data["state"]
        keys = []
        for k, v in data.items():
            if k in ("state", "name", "aliases"):
                continue
            keys.append(k)
            if k == "id":
                self.id = v
            else:
                self.attrs[k] = v
        self._keys = keys

    @property
    def state(self):
        return self._state

    @state.setter
    def state(self, value):
        # Node.state setter: a known state, and state_time refreshed
        assert value in ZUUL_NODE_STATES, value
        self._state = value
        self.attrs["state_time"] = time.time()

    def __getitem__(self, k):
        return self.id if k == "id" else (self._state if k == "state" else self.attrs.get(k))

    def __setitem__(self, k, v):
        if k == "state":
            self.state = v
        else:
            self.attrs[k] = v

    def toDict(self):
        # Node.toDict: id, state, hold_job, comment, user_data,
        # tenant_name, requestor, then every key read, in that order
        d = {}
        d["id"] = self.id
        d["state"] = self._state
        for k in ("hold_job", "comment", "user_data", "tenant_name", "requestor"):
            d[k] = self.attrs.get(k)
        for k in self._keys:
            d[k] = self.id if k == "id" else self.attrs.get(k)
        return d


# zuul/model.py NODE_STATES (STATE_* constants)
ZUUL_NODE_STATES = {"building", "testing", "ready", "in-use", "used", "hold", "deleting"}


class Held(tuple):
    """(node id, kazoo lock) as tests unpack it, carrying Zuul's in-memory
    node (Zuul writes its own copy back, never a fresh read)."""

    def __new__(cls, nid, lock, node):
        t = tuple.__new__(cls, (nid, lock))
        t.node = node
        return t


class Zuul:
    """Plays Zuul's side of the node request protocol with kazoo, step by
    step as Zuul's own code does it (pythonerdog/zuul: zuul/nodepool.py
    Nodepool, zuul/zk/nodepool.py ZooKeeperNodepool, zuul/model.py Node and
    NodeRequest, zuul/executor/server.py for the order of the steps). Each
    step names the Zuul function it mirrors. What differs from a real Zuul is
    only what never reaches ZooKeeper (pipelines, Ansible, statsd).
    """

    def __init__(self, zk, system_id=None, tenant="tenant-one",
                 project="review.example.org/org/project"):
        self.zk = zk
        # zuul/zk/system.py ZuulSystem: the system id is a uuid4 hex
        self.system_id = system_id or uuid.uuid4().hex
        self.tenant = tenant
        self.project = project

    # ---- requests ---------------------------------------------------------

    def submit(self, labels, priority=100, requestor=None, provider=None,
               relative_priority=0, tenant=None, reuse=True, job="test-job",
               pipeline="check"):
        """Nodepool.requestNodes + ZooKeeperNodepool.submitNodeRequest:
        the body is NodeRequest.toDict() of a new request, nothing more.
        `requestor` stands for another Zuul system's id (default ours).
        reuse=False adds a "reuse": false that Zuul never writes (only
        nodepool's own min-ready requests carry it): for tests that play
        such a requestor."""
        # submitNodeRequest: created_time, then the saved span
        # (tracing.startSavedSpan -> getSpanInfo: ids are 128/64-bit ints,
        # start_time in ns)
        created_time = time.time()
        span_info = {
            "name": "RequestNodes",
            "trace_id": uuid.uuid4().int,
            "span_id": uuid.uuid4().int >> 64,
            "trace_flags": 1,
            "start_time": int(created_time * 10**9),
            "parent": None,
        }
        state_time = time.time()  # NodeRequest.__init__
        # NodeRequest.toDict on a request never read back (_zk_data {})
        d = {}
        d["requestor_data"] = {
            "build_set_uuid": uuid.uuid4().hex,
            "tenant_name": tenant or self.tenant,
            "pipeline_name": pipeline,
            "job_uuid": uuid.uuid4().hex,
            "job_name": job,
            "span_info": span_info,
        }
        d.setdefault("node_types", list(labels))
        d.setdefault("requestor", requestor or self.system_id)
        d.setdefault("created_time", created_time)
        d.setdefault("provider", provider)
        d["state"] = "requested"
        d["state_time"] = state_time
        d["relative_priority"] = relative_priority
        d["event_id"] = uuid.uuid4().hex  # a zuul_event_id
        d["tenant_name"] = tenant or self.tenant
        if not reuse:
            d["reuse"] = False  # not Zuul: see above
        # submitNodeRequest: '{}/{:0>3}-' sequential, persistent, makepath
        path = self.zk.create("/nodepool/requests/%03d-" % priority,
                              json.dumps(d).encode("utf8"), makepath=True,
                              sequence=True)
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

    def cancel(self, rid):
        """Nodepool.cancelRequest -> ZooKeeperNodepool.deleteNodeRequest."""
        try:
            self.zk.delete("/nodepool/requests/" + rid)
            return True
        except NoNodeError:
            return False

    # ---- nodes ------------------------------------------------------------

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
        """ZooKeeperNodepool.storeNode: a whole body, unversioned. A
        ZuulNode is written as Node.toDict(); a dict as it is."""
        if isinstance(node, ZuulNode):
            node = node.toDict()
        self.zk.set("/nodepool/nodes/" + nid, json.dumps(node).encode("utf8"))

    def _update_node(self, nid):
        # ZooKeeperNodepool.updateNode(node, node_id): read, json.loads,
        # Node.updateFromDict; node.id = node_id first
        node = ZuulNode(nid)
        data, _ = self.zk.get("/nodepool/nodes/" + nid)
        node.updateFromDict(json.loads(data.decode("utf8")))
        return node

    def accept(self, rid, project=None):
        """The fulfilled request, as Zuul takes it to a job: the scheduler's
        Nodepool.getNodesetInfo, then the executor's lockNodes ->
        Nodepool.acceptNodes, then Nodepool.useNodeSet. Returns
        [Held(node id, lock, node)]."""
        req = self.request(rid)
        # Nodepool.getNodesetInfo: updateNode for each node of the request
        for nid in req["nodes"]:
            self._update_node(nid)
        # Nodepool.acceptNodes -> lockNodes
        locked = []
        try:
            for nid in req["nodes"]:
                node = self._update_node(nid)
                if node["allocated_to"] != rid:
                    raise AssertionError("Node %s allocated to %s, not %s"
                                         % (nid, node["allocated_to"], rid))
                # ZooKeeperNodepool.lockNode(node, timeout=30): a kazoo Lock
                # on <node>/lock, no identifier
                lock = self.zk.Lock("/nodepool/nodes/%s/lock" % nid)
                assert lock.acquire(timeout=30), "could not lock node %s" % nid
                node.lock = lock
                # lockNodes checks allocated_to again on its copy
                if node["allocated_to"] != rid:
                    raise AssertionError("Node %s was reallocated" % nid)
                locked.append(node)
        except Exception:
            for node in locked:  # Nodepool._unlockNodes
                node.lock.release()
            self.cancel(rid)  # acceptNodes deletes the request regardless
            raise
        # acceptNodes -> Nodepool.deleteNodeRequest
        self.cancel(rid)
        held = [Held(n.id, n.lock, n) for n in locked]
        self.use(held, project=project)
        return held

    def use(self, held, project=None):
        """Nodepool.useNodeSet: each locked node in-use with Zuul's
        user_data object, written back with every key read plus id."""
        user_data = {"zuul_system": self.system_id,
                     "project_name": project or self.project}
        for h in held:
            node = self._node_of(h)
            assert node.lock is not None, "Node %s is not locked" % node.id
            node.state = "in-use"
            node["user_data"] = user_data
            self.store_node(node.id, node)

    def _node_of(self, h):
        if isinstance(h, Held):
            return h.node
        # a bare (node id, lock) pair: Zuul's copy as it would have read it
        nid, lock = h
        node = self._update_node(nid)
        node.lock = lock
        return node

    def finish(self, held):
        """Nodepool.returnNodeSet: a node still in-use is set used and
        written back (Zuul's in-memory copy); then every lock is released
        (unlockNodeSet)."""
        nodes = [self._node_of(h) for h in held]
        for node in nodes:
            if node.lock is None:
                continue  # "Node %s is not locked": logged, skipped
            if node.state == "in-use":
                node.state = "used"
                self.store_node(node.id, node)
        for node in nodes:  # Nodepool.unlockNodeSet -> _unlockNodes
            if node.lock is not None:
                node.lock.release()
                node.lock = None

    # ---- autohold ---------------------------------------------------------

    def autohold_request(self, tenant=None, project=None, job="test-job",
                         ref_filter=".*", reason="held by test", count=1,
                         node_expiration=None):
        """`zuul autohold` -> ZooKeeperNodepool.storeHoldRequest: a
        HoldRequest (zuul/model.py HoldRequest.toDict) under
        /zuul/hold-requests, which nodepool never reads. Returns its id."""
        d = {"id": None, "expired": None, "tenant": tenant or self.tenant,
             "project": project or self.project, "job": job, "ref_filter": ref_filter,
             "max_count": count, "current_count": 0, "reason": reason,
             "node_expiration": node_expiration, "nodes": []}
        path = self.zk.create("/zuul/hold-requests/", json.dumps(d).encode("utf8"),
                              sequence=True, makepath=True)
        return path.rsplit("/", 1)[1]

    def _hold_request(self, hid):
        data, _ = self.zk.get("/zuul/hold-requests/" + hid)
        d = json.loads(data.decode("utf8"))
        d["id"] = hid
        return d

    def autohold(self, held, hold_id, build=None):
        """A failed build matching an autohold: the executor's
        _processAutohold -> Nodepool.holdNodeSet (state hold, hold_job
        "<tenant> <project> <job> <ref_filter>", comment = the reason,
        hold_expiration = node_expiration if set; each node stored), the
        hold request's nodes and count updated under its lock; then
        unlockNodes -> returnNodeSet, which stores nothing (no node is
        in-use any more) and releases the locks."""
        req = self._hold_request(hold_id)
        nodes = [self._node_of(h) for h in held]
        for node in nodes:
            assert node.lock is not None, "Node %s is not locked" % node.id
            node.state = "hold"
            node["hold_job"] = " ".join([req["tenant"], req["project"], req["job"],
                                         req["ref_filter"]])
            node["comment"] = req["reason"]
            if req["node_expiration"]:
                node["hold_expiration"] = req["node_expiration"]
            self.store_node(node.id, node)
        req["nodes"].append({"build": build or uuid.uuid4().hex,
                             "nodes": [n.id for n in nodes]})
        req["current_count"] += 1
        if req["current_count"] >= req["max_count"] and not req["expired"]:
            req["expired"] = time.time()
        # lockHoldRequest(timeout=5), storeHoldRequest, unlockHoldRequest
        lock = self.zk.Lock("/zuul/hold-requests/%s/lock" % hold_id)
        assert lock.acquire(timeout=5)
        try:
            self.zk.set("/zuul/hold-requests/" + hold_id, json.dumps(req).encode("utf8"))
        finally:
            lock.release()
        self.finish(held)

    def release_hold(self, hold_id):
        """`zuul autohold-delete` -> ZooKeeperNodepool.deleteHoldRequest ->
        _markHeldNodesAsUsed: each held node read raw (_getNodeData adds
        "id"), its state key set to used in the dict (no state_time
        refresh), taken into a Node, locked without blocking, stored,
        unlocked; the hold request is deleted only if every node was
        marked. Returns True when it was deleted."""
        req = self._hold_request(hold_id)
        failure = False
        for group in req["nodes"]:
            for nid in group["nodes"]:
                try:
                    data, _ = self.zk.get("/nodepool/nodes/" + nid)
                except NoNodeError:
                    continue
                if not data:
                    continue
                d = json.loads(data.decode("utf8"))
                d["id"] = nid
                if d["state"] == "used":
                    continue
                d["state"] = "used"
                node = ZuulNode(None)
                node.updateFromDict(d)
                lock = self.zk.Lock("/nodepool/nodes/%s/lock" % nid)
                try:
                    if not lock.acquire(blocking=False):
                        failure = True
                        continue
                    node.lock = lock
                    self.store_node(nid, node)
                finally:
                    if node.lock is not None:
                        lock.release()
        if failure:
            return False
        try:
            self.zk.delete("/zuul/hold-requests/" + hold_id, recursive=True)
        except NoNodeError:
            pass
        return True

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
    and refuses new ones until restore(). hang() drops every connection
    and takes new ones without ever answering (a hung server, a proxy
    whose far side is gone) until restore(); those stay silent until
    close(). TLS passes through untouched."""

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
        self.hang_now = False
        self.held = []
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
            if self.hang_now:
                with self.lock:
                    self.held.append(c)
                continue
            try:
                u = socket.create_connection(self.target, 5)
            except OSError:
                c.close()
                continue
            # as the client and the server set on theirs: without it, Nagle
            # and the peer's delayed ACK hold a relayed reply ~40 ms
            for s in (c, u):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
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

    def hang(self):
        self.hang_now = True
        self.cut()
        self.cut_now = False

    def restore(self):
        self.cut_now = False
        self.hang_now = False

    def close(self):
        self.stopped = True
        self.cut()
        with self.lock:
            for s in self.held:
                s.close()
            self.held = []
        self.lsock.close()
