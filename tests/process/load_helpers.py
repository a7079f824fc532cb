"""What the load and reconnect process tests share (test_reconnect.py,
test_builder_reconnect.py, test_supervisor_load.py):

- Load: Zuul-like jobs keeping requests coming (through conftest's Zuul:
  submit, wait, accept, finish) while a test breaks things;
- tls_kazoo, chrooted_kazoo: the test's own kazoo clients (TLS);
- zk_proxy: a TcpProxy between nodepoold and the session's ZooKeeper,
  for partitions;
- restart_outage: an outage that restarts a dedicated ZooKeeper.
"""
import contextlib
import os
import threading
import time

from kazoo.client import KazooClient

from conftest import TcpProxy


class Load:
    """Zuul-like jobs, per_label per label: each submits a request for its
    label, waits for it (wait_timeout seconds, polling every poll s),
    takes the node (in-use), runs briefly, hands it back (used), again,
    until finish(), or until max_requests requests were submitted in all.
    Each request is a record in self.records: label, t (submitted), rid,
    state (final), fulfilled_at (the request's state_time), nodes (the
    fulfilled request's), done (when the job saw it end) and, with
    record_provider, provider (its node's). A job's exception goes to
    self.errors ("label: repr")."""

    def __init__(self, zuul, labels, per_label=2, wait_timeout=90, poll=0.02,
                 join_timeout=120, record_provider=False, max_requests=None):
        self.zuul = zuul
        self.wait_timeout = wait_timeout
        self.poll = poll
        self.join_timeout = join_timeout
        self.record_provider = record_provider
        self.max_requests = max_requests
        self.stop = threading.Event()
        self.records = []
        self.errors = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.job, args=(label,), daemon=True)
                        for label in labels for _ in range(per_label)]

    def start(self):
        for t in self.threads:
            t.start()

    def wait_done(self, rid):
        deadline = time.time() + self.wait_timeout
        while time.time() < deadline:
            req = self.zuul.request(rid)
            if req is not None and req["state"] in ("fulfilled", "failed"):
                return req
            time.sleep(self.poll)
        return self.zuul.request(rid) or {"state": "vanished"}

    def job(self, label):
        try:
            while not self.stop.is_set():
                rec = {"label": label, "t": time.time(), "state": "requested", "rid": None}
                with self.lock:
                    if self.max_requests is not None and len(self.records) >= self.max_requests:
                        return
                    self.records.append(rec)
                rec["rid"] = self.zuul.submit([label], requestor="zuul-load")
                req = self.wait_done(rec["rid"])
                # under the lock: fulfilled_after() must never see the
                # final state without its time
                with self.lock:
                    rec["state"] = req["state"]
                    rec["fulfilled_at"] = req.get("state_time")
                    rec["nodes"] = req.get("nodes")
                    rec["done"] = time.time()
                if req["state"] != "fulfilled":
                    continue
                if self.record_provider:
                    rec["provider"] = self.zuul.node(req["nodes"][0])["provider"]
                held = self.zuul.accept(rec["rid"])
                time.sleep(0.1)
                self.zuul.finish(held)
        except Exception as e:  # reported by the test
            with self.lock:
                self.errors.append("%s: %r" % (label, e))

    def fulfilled_after(self, label, t):
        """The sorted state_times of label's requests fulfilled at or
        after t (seconds since the epoch)."""
        with self.lock:
            return sorted(r["fulfilled_at"] for r in self.records
                          if r["label"] == label and r["state"] == "fulfilled"
                          and r["fulfilled_at"] is not None and r["fulfilled_at"] >= t)

    def fulfilled_since(self, label, t):
        """The records of label's requests submitted after t and
        fulfilled."""
        with self.lock:
            return [r for r in self.records
                    if r["label"] == label and r["t"] > t and r["state"] == "fulfilled"]

    def finish(self):
        """Stops the jobs and waits for them; asserts every one ended."""
        self.stop.set()
        for t in self.threads:
            t.join(self.join_timeout)
        assert not any(t.is_alive() for t in self.threads), "a job never finished"


def tls_kazoo(hosts, certs):
    """A started kazoo client on hosts ("h:p,...[/chroot]") with the
    fixture's client certificate from the directory certs."""
    k = KazooClient(hosts=hosts, use_ssl=True, ca=os.path.join(certs, "ca.pem"),
                    certfile=os.path.join(certs, "client.pem"),
                    keyfile=os.path.join(certs, "client.key"), verify_certs=True,
                    timeout=10)
    k.start(timeout=30)
    return k


def chrooted_kazoo(hosts, certs, chroot="/np"):
    """tls_kazoo on hosts + chroot, the chroot created first."""
    boot = tls_kazoo(hosts, certs)
    boot.ensure_path(chroot)
    boot.stop()
    boot.close()
    return tls_kazoo(hosts + chroot, certs)


@contextlib.contextmanager
def zk_proxy(zk_server, chroot):
    """A TcpProxy in front of the session's ZooKeeper (zk_server's plain
    port): yields (proxy, zookeeper-servers entries through it with
    chroot); closed on exit."""
    host_, port, _ = zk_server
    proxy = TcpProxy(host_, port)
    try:
        yield proxy, [{"host": "127.0.0.1", "port": proxy.port, "chroot": chroot}]
    finally:
        proxy.close()


def restart_outage(server, down=0.5):
    """An outage function for a zkservers.Standalone: restarts it on the
    same data (down seconds stopped), prints how long it was away (and
    how much earlier its TLS port listened) and returns when it served
    again."""
    def outage():
        t_down, t_up = server.restart(down=down)
        print("\nZooKeeper down %.1f s (stop, JVM start, serving); its TLS port "
              "listened %.0f ms before srvr said it served" % (
                  t_up - t_down, (t_up - server.t_listen) * 1000))
        return t_up
    return outage
