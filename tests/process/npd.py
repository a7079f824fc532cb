"""Helpers for process tests of nodepoold and nodepoolctl: a supervisor run
in the foreground (or through its init-script verbs), nodepoolctl calls,
and what Zuul or an operator would look at (pids, ZooKeeper sessions of
pool components)."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

from kazoo.exceptions import NoNodeError

from conftest import Proc, bin_path, free_port, wait_for

FAST = {"cleanup-interval": 1, "delete-interval": 0.5}


def host(name, labels, **kw):
    h = {"name": name, "labels": labels, "host-key-checking": False}
    h.update(kw)
    return h


def static_provider(name, hosts, pool="main"):
    return {"name": name, "driver": "static", "pools": [{"name": pool, "nodes": hosts}]}


class Supervisor:
    """One nodepoold with its own config, pid file and control socket.

    Socket paths are limited to 107 bytes: they live in a short private
    directory under /tmp, not in pytest's tmp_path."""

    def __init__(self, deployment, name="npd", bindir=None):
        self.d = deployment
        self.name = name
        self.rundir = tempfile.mkdtemp(prefix="npd.", dir="/tmp")
        self.sock = os.path.join(self.rundir, "ctl.sock")
        self.pidfile = os.path.join(self.rundir, "npd.pid")
        self.bindir = bindir or os.path.dirname(bin_path("nodepoold"))
        self.config = None
        self.proc = None
        self.daemon_pid = None
        self.log_path = os.path.join(self.d.dir, "%s.log" % name)
        self.web_port = free_port()  # nodepool-web's, kept across rewrites

    def settings(self, **kw):
        s = {"control-socket": self.sock, "pid-file": self.pidfile,
             "worker-status-timeout": 5, "restart-backoff-max": 2}
        s.update(FAST)
        s.update(kw)
        return s

    def write(self, cfg, settings=None, raw=None):
        """Write nodepool.yaml (dict, JSON is YAML) or raw text."""
        path = os.path.join(self.d.dir, "%s.yaml" % self.name)
        if raw is not None:
            with open(path + ".tmp", "w") as f:
                f.write(raw)
            os.rename(path + ".tmp", path)
        else:
            full = dict(cfg)
            full.setdefault("zookeeper-timeout", 4)
            # nodepool-web: a free loopback port, not everyone's 8005
            full.setdefault("webapp", {"port": self.web_port, "listen_address": "127.0.0.1"})
            full["nodepoold"] = self.settings(**(settings or {}))
            path = self.d.write_config(full, name="%s.yaml" % self.name)
        self.config = path
        return path

    def exe(self, prog):
        return os.path.join(self.bindir, prog)

    def start_fg(self, extra=(), env=None):
        self.proc = self.d.start([self.exe("nodepoold"), "-f", "-c", self.config] + list(extra),
                                 self.name, env=env)
        self.log_path = self.proc.log_path
        wait_for(lambda: os.path.exists(self.pidfile), what="nodepoold pid file")
        return self.proc

    def verb(self, *args, env=None):
        """nodepoold with a verb; its output appended to our log."""
        with open(self.log_path, "ab") as log:
            r = subprocess.run([self.exe("nodepoold"), "-c", self.config] + list(args),
                               stdout=subprocess.PIPE, stderr=log, timeout=60, env=env)
        return r.returncode, r.stdout.decode()

    def ctl(self, *args, sock=True):
        cmd = [bin_path("nodepoolctl")]
        if sock:
            cmd += ["-s", self.sock]
        r = subprocess.run(cmd + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=60)
        return r.returncode, r.stdout.decode(), r.stderr.decode()

    def status(self):
        rc, out, err = self.ctl("status", "--json")
        assert rc == 0, err
        return {w["name"]: w for w in json.loads(out)["workers"]}

    def pid(self):
        with open(self.pidfile) as f:
            return int(f.read())

    def wait_running(self, names, timeout=30):
        def ok():
            try:
                st = self.status()
            except AssertionError:
                return None
            if "web" not in names:
                st.pop("web", None)  # nodepool-web runs beside any set of providers
            if sorted(st) != sorted(names):
                return None
            if all(w["state"] == "running" and w["pid"] > 0 and w["zk"] == "connected"
                   for w in st.values()):
                return st
            return None
        return wait_for(ok, timeout, interval=0.05, what="workers %s running" % names)

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        """Stop whatever we started (by pid)."""
        if self.proc is not None:
            self.proc.stop(30)
        elif self.daemon_pid is not None:
            try:
                os.kill(self.daemon_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            wait_for(lambda: not alive(self.daemon_pid), 30, what="daemon gone")
        shutil.rmtree(self.rundir, ignore_errors=True)


def builder_bindir(tmp_path):
    """nodepoold's copy with the real launcher and tests/process/fake_builder.py
    as nodepool-builder (it records what it gets in tmp_path/builder)."""
    d = tmp_path / "bin"
    d.mkdir()
    out = tmp_path / "builder"
    out.mkdir()
    shutil.copy(bin_path("nodepoold"), d / "nodepoold")
    os.symlink(bin_path("nodepool-launcher"), d / "nodepool-launcher")
    fake = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_builder.py")
    b = d / "nodepool-builder"
    b.write_text("#!/bin/sh\nexec /usr/bin/python3 %s %s \"$@\"\n" % (fake, out))
    b.chmod(0o755)
    return str(d), out


def alive(pid):
    """pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read().rsplit(")", 1)[1].split()[0]
        return st not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        # gone before the open, or between the open and the read (ESRCH:
        # test_metastatic's SIGKILL raced the check once)
        return False


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")
    except FileNotFoundError:
        return []


def pool_sessions(zk):
    """{provider: ZooKeeper session id owning its pool component(s)}: the
    ephemeral owner is the session of the worker that registered it."""
    zk = getattr(zk, "zk", zk)  # a conftest.Zuul or a kazoo client
    out = {}
    try:
        children = zk.get_children("/nodepool/components/pool")
    except NoNodeError:
        return out
    for c in children:
        try:
            data, st = zk.get("/nodepool/components/pool/" + c)
        except NoNodeError:
            continue
        out.setdefault(json.loads(data)["provider_name"], set()).add(st.ephemeralOwner)
    return out


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def wait_gone(pid, timeout=20):
    wait_for(lambda: not alive(pid), timeout, what="pid %d gone" % pid)


def now():
    return time.time()
