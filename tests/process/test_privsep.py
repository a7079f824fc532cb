"""Privilege separation (lib/core/privsep.h, nodepoold(8) SECURITY), as an
operator checks it from /proc: nodepoold started as root with -u and
--web-user runs each child as its user, with no capabilities, no_new_privs,
not dumpable and no core file; root with no user to drop to is refused
unless told (--allow-root, NODEPOOL_ALLOW_ROOT=1)."""
import os
import pwd
import shutil
import subprocess
import tempfile
import urllib.request

import pytest

from conftest import bin_path, wait_for
from npd import Supervisor, host, static_provider

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges")

NOT_ALLOWED = {"NODEPOOL_ALLOW_ROOT": "0"}


def proc_status(pid):
    with open("/proc/%d/status" % pid) as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def core_limit(pid):
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max core file size"):
                return line.split()[4:6]
    return None


@pytest.fixture
def readable_certs(deployment):
    """The test ZooKeeper's client certificate and key, copied where the
    unprivileged users can read them (the originals are root's, 0600, under
    pytest's 0700 directories), as an operator gives the roles their
    ZooKeeper credentials."""
    d = tempfile.mkdtemp(prefix="np-privsep.", dir="/tmp")
    os.chmod(d, 0o755)
    certs = deployment.zk_server[2]
    for n in ("ca.pem", "client.pem", "client.key"):
        shutil.copy(os.path.join(certs, n), os.path.join(d, n))
        os.chmod(os.path.join(d, n), 0o644)
    yield {"ca": os.path.join(d, "ca.pem"), "cert": os.path.join(d, "client.pem"),
           "key": os.path.join(d, "client.key")}
    shutil.rmtree(d, ignore_errors=True)


def test_children_run_as_their_users_without_privileges(deployment, readable_certs):
    launcher_user, web_user = pwd.getpwnam("nobody"), pwd.getpwnam("daemon")
    sup = Supervisor(deployment)
    try:
        sup.write({
            "zookeeper-tls": readable_certs,
            "labels": [{"name": "small"}],
            "providers": [static_provider("p1", [host("h1", ["small"])])],
        })
        sup.start_fg(["-u", "nobody", "--web-user", "daemon"], env=NOT_ALLOWED)
        st = sup.wait_running(["p1", "web"])
        want = {"p1": launcher_user.pw_uid, "web": web_user.pw_uid}
        for name, uid in want.items():
            pid = st[name]["pid"]
            s = proc_status(pid)
            assert s["Uid"].split() == [str(uid)] * 4, (name, s["Uid"])
            gid = launcher_user.pw_gid if name == "p1" else web_user.pw_gid
            assert s["Gid"].split() == [str(gid)] * 4, (name, s["Gid"])
            assert s["NoNewPrivs"] == "1", name
            for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
                assert int(s[cap], 16) == 0, (name, cap, s[cap])
            # Not dumpable: the kernel gives its /proc files to root
            # instead of the process's own user (proc(5), PR_SET_DUMPABLE).
            assert os.stat("/proc/%d/status" % pid).st_uid == 0, name
            assert core_limit(pid) == ["0", "0"], name
        # nodepoold itself: root, and no core file either
        assert proc_status(sup.proc.pid)["Uid"].split()[0] == "0"
        assert core_limit(sup.proc.pid) == ["0", "0"]
        # the web API, as nodepool-web's user, still answers
        def ready():
            try:
                return urllib.request.urlopen("http://127.0.0.1:%d/ready" % sup.web_port,
                                              timeout=5).status == 200
            except OSError:
                return False
        wait_for(ready, what="/ready 200 from nodepool-web")
    finally:
        sup.stop()


def test_root_with_nothing_to_drop_to_is_refused(deployment):
    sup = Supervisor(deployment)
    try:
        cfg = sup.write({"labels": [{"name": "small"}],
                         "providers": [static_provider("p1", [host("h1", ["small"])])]})
        env = dict(os.environ, **NOT_ALLOWED)
        r = subprocess.run([bin_path("nodepoold"), "-f", "-c", cfg], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        assert r.returncode == 1
        assert b"refusing to run as root" in r.stderr, r.stderr
        assert not os.path.exists(sup.pidfile)
        r = subprocess.run([bin_path("nodepool-builder"), "-c", cfg], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        assert r.returncode == 100
        assert b"refusing to run as root" in r.stderr, r.stderr
        r = subprocess.run([bin_path("nodepoold"), "-f", "-c", cfg, "-u", "no-such-user-np"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        assert r.returncode == 1
        assert b"no user no-such-user-np" in r.stderr, r.stderr
    finally:
        sup.stop()


def test_allow_root_runs_as_root(deployment):
    sup = Supervisor(deployment)
    try:
        sup.write({"labels": [{"name": "small"}],
                   "providers": [static_provider("p1", [host("h1", ["small"])])]})
        sup.start_fg(["--allow-root"], env=NOT_ALLOWED)
        st = sup.wait_running(["p1"])
        s = proc_status(st["p1"]["pid"])
        assert s["Uid"].split()[0] == "0"
        assert s["NoNewPrivs"] == "1"
        assert core_limit(st["p1"]["pid"]) == ["0", "0"]
    finally:
        sup.stop()


def test_builder_runs_as_its_user_and_may_gain_privileges(deployment, readable_certs):
    """The builder (--builder-user) is not dumpable and writes no core, but
    has no no_new_privs, nor have its build workers: diskimage-builder
    runs sudo. Its upload workers have it."""
    from builder_helpers import builder_config, children
    builder_user = pwd.getpwnam("daemon")
    shared = tempfile.mkdtemp(prefix="np-privsep-builder.", dir="/tmp")
    os.chmod(shared, 0o777)
    sup = Supervisor(deployment)
    try:
        cfg = builder_config(deployment, providers=())
        cfg["labels"] = []
        cfg["images-dir"] = os.path.join(shared, "images")
        cfg["build-log-dir"] = os.path.join(shared, "logs")
        cfg["zookeeper-tls"] = readable_certs
        del cfg["nodepoold"]
        sup.write(cfg)
        sup.start_fg(["-u", "nobody", "--builder-user", "daemon"], env=NOT_ALLOWED)
        st = sup.wait_running(["builder"])
        pid = st["builder"]["pid"]
        s = proc_status(pid)
        assert s["Uid"].split() == [str(builder_user.pw_uid)] * 4
        assert s["NoNewPrivs"] == "0"
        assert int(s["CapEff"], 16) == 0 and int(s["CapPrm"], 16) == 0
        assert os.stat("/proc/%d/status" % pid).st_uid == 0, "not dumpable"
        assert core_limit(pid) == ["0", "0"]
        kids = wait_for(lambda: (lambda k: k if {"build", "upload"} <= {
            c[c.index("--worker") + 1] for _, c in k if "--worker" in c} else None)(
            children(pid)), what="the builder's workers")
        for kpid, cmd in kids:
            if "--worker" not in cmd:
                continue
            kind = cmd[cmd.index("--worker") + 1]
            ks = proc_status(kpid)
            assert ks["Uid"].split()[0] == str(builder_user.pw_uid)
            assert ks["NoNewPrivs"] == ("1" if kind == "upload" else "0"), (kind, ks)
            assert os.stat("/proc/%d/status" % kpid).st_uid == 0, kind + " not dumpable"
    finally:
        sup.stop()
        shutil.rmtree(shared, ignore_errors=True)
