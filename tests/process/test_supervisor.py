"""nodepoold and nodepoolctl, as an operator and an init script use them:
the verbs and the pid file, nodepoolctl status/restart/reload/stop, crash
isolation (kill -9, exit 100, a hung worker), reloads, SIGUSR2."""
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import time

import pytest

from conftest import bin_path, wait_for
from npd import (Supervisor, alive, builder_bindir, cmdline, host, pool_sessions,
                 static_provider, wait_gone)


def two_providers(extra_hosts_b=()):
    return {
        "labels": [{"name": "small"}],
        "providers": [
            static_provider("static-a", [host("a1", ["small"])]),
            static_provider("static-b", [host("b1", ["small"])] + list(extra_hosts_b)),
        ],
    }


@pytest.fixture
def sup(deployment):
    s = Supervisor(deployment)
    yield s
    s.stop()


def ready_nodes(zuul, provider=None):
    return {nid: n for nid, n in zuul.nodes().items()
            if n["state"] == "ready" and (provider is None or n["provider"] == provider)}


# ---- -n, verbs, pid file ------------------------------------------------------


def test_check_config(sup):
    good = sup.write(two_providers())
    r = subprocess.run([bin_path("nodepoold"), "-n", "-c", good], capture_output=True)
    assert r.returncode == 0, r.stderr
    bad = sup.write(None, raw="labels:\n  - name: small\n    min-ready: lots\n"
                    "providers:\n  - name: p\n    driver: static\n    pools: 3\n")
    r = subprocess.run([bin_path("nodepoold"), "-n", "-c", bad], capture_output=True)
    assert r.returncode == 1
    lines = r.stderr.decode().strip().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith(bad + ":3:16: labels[0].min-ready:"), lines
    assert lines[1].startswith(bad + ":7:12: providers[0].pools:"), lines
    # start refuses it too, printing the same errors, and leaves nothing behind
    rc, out = sup.verb("start")
    assert rc == 1
    assert bad + ":3:16:" in sup.log()
    assert not os.path.exists(sup.pidfile) and not os.path.exists(sup.sock)


def test_verbs_and_pid_file(sup, zuul):
    sup.write(two_providers())
    rc, out = sup.verb("status")
    assert rc == 3 and "not running" in out
    rc, out = sup.verb("stop")
    assert rc == 0 and "not running" in out

    rc, out = sup.verb("start")
    assert rc == 0, sup.log()
    # the pid file names the daemon, written once the control socket is up
    pid = sup.pid()
    sup.daemon_pid = pid
    assert alive(pid) and os.path.basename(cmdline(pid)[0].decode()) == "nodepoold"
    assert stat.S_IMODE(os.stat(sup.sock).st_mode) == 0o600
    # detached: a session of its own, of which it is not the leader (no tty ever)
    assert os.getsid(pid) not in (os.getsid(0), pid)
    st = sup.wait_running(["static-a", "static-b"])
    for w in st.values():
        assert os.getppid() != w["pid"] and alive(w["pid"])
        argv = cmdline(w["pid"])
        assert argv[0].decode().endswith("/nodepool-launcher")
        assert argv[1:5] == [b"-p", w["name"].encode(), b"--channel", b"3"]

    rc, out = sup.verb("status")
    assert rc == 0 and str(pid) in out
    # start again: already running, still exit 0, same daemon
    rc, out = sup.verb("start")
    assert rc == 0 and "already running" in out
    assert sup.pid() == pid

    rc, out = sup.verb("reload")
    assert rc == 0
    wait_for(lambda: "configuration generation 2 in force" in sup.log(), what="reload logged")

    workers = [w["pid"] for w in st.values()]
    rc, out = sup.verb("stop")
    assert rc == 0 and "stopped" in out
    assert not alive(pid)
    for w in workers:
        assert not alive(w)
    assert not os.path.exists(sup.pidfile) and not os.path.exists(sup.sock)
    rc, out = sup.verb("status")
    assert rc == 3
    log = sup.log()
    assert "exited 0" in log and "AddressSanitizer" not in log and "runtime error" not in log


def test_pid_file_option_overrides_config(sup):
    sup.write(two_providers())
    other = os.path.join(sup.rundir, "other.pid")
    rc, _ = sup.verb("-p", other, "start")
    assert rc == 0, sup.log()
    with open(other) as f:
        sup.daemon_pid = int(f.read())
    assert not os.path.exists(sup.pidfile)
    assert sup.verb("-p", other, "status")[0] == 0
    assert sup.verb("status")[0] == 3  # the config's pid file: nothing there
    assert sup.verb("-p", other, "stop")[0] == 0
    assert not alive(sup.daemon_pid) and not os.path.exists(other)


def test_foreground_sigterm_stops_children(sup, zuul):
    sup.write(two_providers())
    p = sup.start_fg()
    st = sup.wait_running(["static-a", "static-b"])
    assert sup.pid() == p.pid
    p.signal(signal.SIGTERM)
    p.p.wait(30)
    assert p.p.returncode == 0
    for w in st.values():
        assert not alive(w["pid"])
    assert not os.path.exists(sup.pidfile) and not os.path.exists(sup.sock)
    # their pool components went with their sessions
    wait_for(lambda: pool_sessions(zuul) == {}, 15, what="pool components gone")


# ---- nodepoolctl ------------------------------------------------------------


def test_ctl_status_text_and_json(sup, zuul):
    sup.write(two_providers())
    sup.start_fg()
    sup.wait_running(["static-a", "static-b"])
    wait_for(lambda: len(ready_nodes(zuul)) == 2, what="two ready nodes")
    rid = zuul.submit(["small"], provider="static-b")
    req = zuul.wait_request(rid)
    assert req["state"] == "fulfilled"
    held = zuul.accept(rid)

    def counted():
        st = sup.status()
        b = st["static-b"]
        return b["fulfilled"] >= 1 and b["nodes"].get("in-use") == 1 and st
    st = wait_for(counted, what="static-b counts its fulfilled request")
    a, b = st["static-a"], st["static-b"]
    assert a["kind"] == b["kind"] == "provider"
    assert b["accepted"] >= 1 and b["declined"] == 0 and b["failed"] == 0
    assert a["nodes"] == {"ready": 1}
    for w in (a, b):
        assert w["state"] == "running" and w["zk"] == "connected"
        assert w["restarts"] == 0 and w["error"] is None and w["uptime_s"] >= 0
        assert alive(w["pid"]) and cmdline(w["pid"])[2] == w["name"].encode()

    rc, out, err = sup.ctl("status")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "KIND", "PID", "STATE", "UPTIME", "RESTARTS", "ZK",
                                "ACCEPTED", "FULFILLED", "DECLINED", "FAILED", "NODES",
                                "RSS", "PSS", "ERROR"]
    rows = {l.split()[0]: l.split() for l in lines[1:]}
    assert rows["static-b"][1:4] == ["provider", str(b["pid"]), "running"]
    assert rows["static-b"][6] == "connected"
    assert rows["static-b"][11] == "in-use:1"
    assert rows["static-a"][11] == "ready:1" and rows["static-a"][14] == "-"
    # memory, MiB: RSS and PSS (shared pages shared out, so no more)
    rss, pss = (float(rows["static-b"][k].rstrip("M")) for k in (12, 13))
    assert 0 < pss <= rss, rows["static-b"]
    assert b["rss_kb"] > 0 and 0 < b["pss_kb"] <= b["rss_kb"] + 1024
    zuul.finish(held)

    # the socket found through -c (the config's control-socket)
    r = subprocess.run([bin_path("nodepoolctl"), "-c", sup.config, "status", "--json"],
                       capture_output=True)
    assert r.returncode == 0 and set(json.loads(r.stdout)["workers"][0]) >= {
        "name", "pid", "state", "uptime_s", "restarts", "zk", "accepted", "fulfilled",
        "declined", "failed", "nodes", "error"}


def test_ctl_errors(sup, tmp_path):
    # nobody there
    rc, out, err = sup.ctl("status")
    assert rc == 1 and err.strip() == "nodepoold is not running (no control socket at %s)" \
        % sup.sock
    # a stale socket
    import socket
    s = socket.socket(socket.AF_UNIX)
    s.bind(sup.sock)
    s.close()
    rc, out, err = sup.ctl("status")
    assert rc == 1 and "stale control socket" in err
    os.unlink(sup.sock)
    # usage
    for args in (["frobnicate"], ["restart"], ["status", "--xml"], ["reload", "x"], []):
        rc, out, err = sup.ctl(*args)
        assert rc == 1 and err.startswith("usage: nodepoolctl"), (args, err)
    # -c naming a file that does not exist
    r = subprocess.run([bin_path("nodepoolctl"), "-c", str(tmp_path / "nope.yaml"), "status"],
                       capture_output=True)
    assert r.returncode == 1 and b"cannot read" in r.stderr
    # a running daemon: unknown provider
    sup.write(two_providers())
    sup.start_fg()
    sup.wait_running(["static-a", "static-b"])
    rc, out, err = sup.ctl("restart", "nope")
    assert rc == 1 and err.strip() == "no such provider: nope"


def test_ctl_restart_changes_only_that_worker(sup, zuul):
    sup.write(two_providers())
    sup.start_fg()
    before = sup.wait_running(["static-a", "static-b"])
    sessions = wait_for(lambda: len(pool_sessions(zuul)) == 2 and pool_sessions(zuul),
                        what="two pool components")
    rc, out, err = sup.ctl("restart", "static-a")
    assert rc == 0 and out.startswith("restarting static-a (pid %d)" % before["static-a"]["pid"])
    after = wait_for(lambda: (lambda st: st["static-a"]["pid"] not in (0, before["static-a"]["pid"])
                              and st["static-a"]["state"] == "running" and st)(sup.status()),
                     what="static-a restarted")
    assert after["static-a"]["restarts"] == 1
    assert after["static-b"]["pid"] == before["static-b"]["pid"]
    assert after["static-b"]["restarts"] == 0
    wait_gone(before["static-a"]["pid"])
    now = wait_for(lambda: (lambda ps: ps.get("static-a") and
                            ps["static-a"] != sessions["static-a"] and ps)(pool_sessions(zuul)),
                   what="static-a re-registered")
    assert now["static-b"] == sessions["static-b"]


# ---- crash isolation -----------------------------------------------------------


def test_kill9_restarts_only_that_worker(sup, zuul):
    sup.write(two_providers())
    sup.start_fg()
    before = sup.wait_running(["static-a", "static-b"])
    sessions = wait_for(lambda: len(pool_sessions(zuul)) == 2 and pool_sessions(zuul),
                        what="two pool components")
    victim = before["static-a"]["pid"]
    os.kill(victim, signal.SIGKILL)
    after = wait_for(lambda: (lambda st: st["static-a"]["pid"] not in (0, victim)
                              and st["static-a"]["state"] == "running" and st)(sup.status()),
                     what="static-a back")
    assert after["static-a"]["restarts"] == 1
    assert "signal 9" in after["static-a"]["error"]
    assert after["static-b"]["pid"] == before["static-b"]["pid"]
    assert after["static-b"]["restarts"] == 0 and after["static-b"]["error"] is None
    # static-b's ZooKeeper session is the one it had; static-a has a new one
    ps = wait_for(lambda: (lambda p: len(p.get("static-a", ())) == 1 and
                           p["static-a"] != sessions["static-a"] and p)(pool_sessions(zuul)),
                  30, what="static-a's old session expired, new one registered")
    assert ps["static-b"] == sessions["static-b"]
    # and it serves again
    rid = zuul.submit(["small"], provider="static-a")
    req = zuul.wait_request(rid)
    assert req["state"] == "fulfilled"
    assert zuul.node(req["nodes"][0])["provider"] == "static-a"
    assert "killed by signal 9" in sup.log()


def fake_bindir(tmp_path, doomed, code=100):
    """A bindir holding a copy of nodepoold and a nodepool-launcher that
    exits `code` (100: permanent failure) for provider `doomed` and runs the
    real one otherwise (fd 3, the channel, passes through exec)."""
    d = tmp_path / "bin"
    d.mkdir()
    shutil.copy(bin_path("nodepoold"), d / "nodepoold")
    w = d / "nodepool-launcher"
    w.write_text("#!/bin/sh\n"
                 "if [ \"$2\" = %s ]; then echo \"worker[$2]: no credentials\" >&2; exit %d; fi\n"
                 "exec %s \"$@\"\n" % (doomed, code, bin_path("nodepool-launcher")))
    w.chmod(0o755)
    return str(d)


def test_exit_100_is_not_restarted(deployment, zuul, tmp_path):
    s = Supervisor(deployment, bindir=fake_bindir(tmp_path, "static-b"))
    try:
        s.write(two_providers())
        s.start_fg()
        st = wait_for(lambda: (lambda st: st["static-b"]["state"] == "dead" and
                               st["static-a"]["state"] == "running" and st)(s.status()),
                      what="static-b dead, static-a running")
        assert st["static-b"]["pid"] == 0 and st["static-b"]["restarts"] == 0
        assert "exited 100" in st["static-b"]["error"]
        # it stays down: the back-off is 0 s at first, so a restart would be immediate
        wait_for(lambda: "not restarted" in s.log(), what="logged")
        st2 = s.status()
        assert st2["static-b"]["state"] == "dead" and st2["static-b"]["restarts"] == 0
        assert st2["static-a"]["pid"] == st["static-a"]["pid"]
        assert s.log().count("provider static-b: started") == 1
        # nodepoolctl restart tries again (and it fails again, permanently)
        rc, out, err = s.ctl("restart", "static-b")
        assert rc == 0, err
        wait_for(lambda: s.log().count("provider static-b: started") == 2, what="second try")
        st3 = wait_for(lambda: (lambda st: st["static-b"]["state"] == "dead" and st)(s.status()),
                       what="dead again")
        assert st3["static-b"]["restarts"] == 1
    finally:
        s.stop()


def test_crash_loop_backs_off_up_to_the_cap(deployment, zuul, tmp_path):
    s = Supervisor(deployment, bindir=fake_bindir(tmp_path, "static-b", code=1))
    try:
        s.write(two_providers(), settings={"restart-backoff-max": 2})
        s.start_fg()
        # 0 s, then 1 s, then 2 s (the cap), 2 s ...
        wait_for(lambda: "provider static-b: restarting in 2 s (4 failures in a row)"
                 in s.log(), 30, what="back-off reached the cap")
        log = s.log()
        assert "provider static-b: restarting now" in log
        assert "provider static-b: restarting in 1 s (2 failures in a row)" in log
        assert "provider static-b: restarting in 2 s (3 failures in a row)" in log
        assert "restarting in 4 s" not in log
        st = s.status()
        assert st["static-b"]["state"] in ("backoff", "starting")
        assert st["static-b"]["restarts"] >= 3 and "exited 1" in st["static-b"]["error"]
        assert st["static-a"]["state"] == "running" and st["static-a"]["restarts"] == 0
    finally:
        s.stop()


def test_hung_worker_is_killed_and_restarted(sup, zuul):
    sup.write(two_providers(), settings={"worker-status-timeout": 1})
    sup.start_fg()
    before = sup.wait_running(["static-a", "static-b"])
    victim = before["static-a"]["pid"]
    os.kill(victim, signal.SIGSTOP)
    try:
        after = wait_for(lambda: (lambda st: st["static-a"]["pid"] not in (0, victim)
                                  and st["static-a"]["state"] == "running" and st)(sup.status()),
                         what="hung static-a replaced")
    finally:
        if alive(victim):
            os.kill(victim, signal.SIGCONT)
    wait_gone(victim)
    assert "no STATUS reply within 1 s" in after["static-a"]["error"]
    assert after["static-a"]["restarts"] == 1
    assert after["static-b"]["pid"] == before["static-b"]["pid"]
    assert "killing pid %d" % victim in sup.log()


def test_sigusr2_dumps_every_process(sup):
    sup.write(two_providers())
    p = sup.start_fg()
    st = sup.wait_running(["static-a", "static-b"])
    p.signal(signal.SIGUSR2)
    wait_for(lambda: all(s in sup.log() for s in (
        "INFO nodepoold: state dump:", "provider static-a: running, pid %d" % st["static-a"]["pid"],
        "INFO worker[static-a]: state dump:", "INFO worker[static-b]: state dump:")),
        what="dumps of nodepoold and both workers")


# ---- reload ------------------------------------------------------------------------


# These test the explicit reload (SIGHUP, nodepoolctl reload): reload-on-change
# is off so that the change is applied by it, not by the watcher
# (test_config_reload.py tests reload on change).
EXPLICIT = {"reload-on-change": False}


def test_reload_bad_config_keeps_everything(sup, zuul):
    sup.write(two_providers(), settings=EXPLICIT)
    p = sup.start_fg()
    before = sup.wait_running(["static-a", "static-b"])
    good = open(sup.config).read()
    cfg = json.loads(good)
    cfg["labels"][0]["min-ready"] = "lots"
    cfg["providers"][1]["pools"][0]["max-servers"] = "x"
    text = json.dumps(cfg, indent=2)
    sup.write(None, raw=text)
    rc, out, err = sup.ctl("reload")
    assert rc == 1
    lines = err.strip().splitlines()
    assert lines[0] == "reload failed: 2 configuration error(s)", err
    for l in lines[1:]:
        assert re.match(re.escape(sup.config) + r":\d+:\d+: ", l), l
    assert any("labels[0].min-ready" in l for l in lines)
    # SIGHUP: the same, logged
    p.signal(signal.SIGHUP)
    wait_for(lambda: sup.log().count("reload failed: 2 configuration error(s)") == 2,
             what="SIGHUP reload logged its failure")
    assert re.search(re.escape(sup.config) + r":\d+:\d+: labels\[0\]\.min-ready", sup.log())
    st = sup.status()
    for n in ("static-a", "static-b"):
        assert st[n]["pid"] == before[n]["pid"] and st[n]["state"] == "running"
    # the old config still serves
    rid = zuul.submit(["small"])
    assert zuul.wait_request(rid)["state"] == "fulfilled"


def test_reload_adds_removes_changes_providers(sup, zuul):
    cfg = {
        "labels": [{"name": "small"}],
        "providers": [
            static_provider("static-a", [host("a1", ["small"])]),
            static_provider("static-b", [host("b1", ["small"])]),
            static_provider("static-c", [host("c1", ["small"])]),
        ],
    }
    sup.write(cfg, settings=EXPLICIT)
    sup.start_fg()
    before = sup.wait_running(["static-a", "static-b", "static-c"])
    sessions = wait_for(lambda: len(pool_sessions(zuul)) == 3 and pool_sessions(zuul),
                        what="three pools")
    wait_for(lambda: len(ready_nodes(zuul)) == 3, what="three nodes")
    # a unchanged, b gets a second host, c goes, d comes
    cfg["providers"] = [
        static_provider("static-a", [host("a1", ["small"])]),
        static_provider("static-b", [host("b1", ["small"]), host("b2", ["small"])]),
        static_provider("static-d", [host("d1", ["small"])]),
    ]
    sup.write(cfg, settings=EXPLICIT)
    rc, out, err = sup.ctl("reload")
    assert rc == 0, err
    # unchanged: static-a; changed: static-b and nodepool-web (its status
    # page lists the providers and pools)
    assert "1 unchanged, 2 changed, 1 added, 1 removed" in out
    after = sup.wait_running(["static-a", "static-b", "static-d"])
    assert after["static-a"]["pid"] == before["static-a"]["pid"]
    # changed: same process, launcher restarted in-process on the new slice
    assert after["static-b"]["pid"] == before["static-b"]["pid"]
    assert after["static-b"]["restarts"] == 0
    wait_gone(before["static-c"]["pid"])
    # (c1's node stays: upstream leaves nodes of unknown providers alone)
    nodes = wait_for(lambda: (lambda r: {n["hostname"] for n in r.values()}
                              >= {"a1", "b1", "b2", "d1"} and r)(ready_nodes(zuul)),
                     what="nodes of a, b (two) and d")
    ps = wait_for(lambda: (lambda p: sorted(p) == ["static-a", "static-b", "static-d"] and
                           len(p["static-b"]) == 1 and p)(pool_sessions(zuul)),
                  what="pools of a, b, d")
    assert ps["static-a"] == sessions["static-a"]  # untouched, same session
    assert "provider static-c: stopped and removed" in sup.log()
    # the removed worker was asked to stop (graceful), not killed
    assert re.search(r"provider static-c: pid %d exited 0" % before["static-c"]["pid"],
                     sup.log())
    # a request for d is served by the new worker
    rid = zuul.submit(["small"], provider="static-d")
    req = zuul.wait_request(rid)
    assert req["state"] == "fulfilled" and zuul.node(req["nodes"][0])["provider"] == "static-d"
    assert len(nodes) in (4, 5)


# ---- the builder row of the process table -------------------------------------------

DISKIMAGES = [{"name": "ubuntu", "elements": ["ubuntu-minimal"]}]


def test_builder_skipped_when_not_installed(deployment, tmp_path):
    # nodepoold's own directory without nodepool-builder
    d = tmp_path / "bin"
    d.mkdir()
    shutil.copy(bin_path("nodepoold"), d / "nodepoold")
    os.symlink(bin_path("nodepool-launcher"), d / "nodepool-launcher")
    s = Supervisor(deployment, bindir=str(d))
    try:
        cfg = two_providers()
        cfg["diskimages"] = DISKIMAGES
        s.write(cfg)
        s.start_fg()
        s.wait_running(["static-a", "static-b"])  # and no builder row
        assert re.search(r"diskimages are configured but \S+/nodepool-builder is not "
                         r"installed: no builder is run", s.log())
    finally:
        s.stop()


def test_builder_runs_while_diskimages_are_configured(deployment, tmp_path):
    bindir, out = builder_bindir(tmp_path)
    s = Supervisor(deployment, bindir=bindir)
    try:
        cfg = two_providers()
        cfg["diskimages"] = DISKIMAGES
        s.write(cfg, settings=EXPLICIT)
        s.start_fg()
        st = s.wait_running(["static-a", "static-b", "builder"])
        assert st["builder"]["kind"] == "builder"
        assert json.loads((out / "argv.json").read_text()) == ["--channel", "3"]
        # it got the whole configuration (it builds for every provider)
        got = json.loads((out / "config-1.json").read_text())
        assert got["secure"] is None
        assert [p["name"] for p in got["config"]["providers"]] == ["static-a", "static-b"]
        assert got["config"]["diskimages"] == DISKIMAGES
        # restart it like a provider
        rc, o, err = s.ctl("restart", "builder")
        assert rc == 0, err
        wait_for(lambda: (lambda b: b["pid"] not in (0, st["builder"]["pid"]) and
                          b["state"] == "running")(s.status()["builder"]), what="builder back")
        # diskimages gone: the builder is stopped (STOP, exit 0) and leaves the table
        del cfg["diskimages"]
        s.write(cfg, settings=EXPLICIT)
        rc, o, err = s.ctl("reload")
        assert rc == 0 and "0 changed, 0 added, 1 removed" in o, o + err
        s.wait_running(["static-a", "static-b"])
        assert "builder builder: stopped and removed" in s.log()
        assert s.status()["static-a"]["pid"] == st["static-a"]["pid"]
    finally:
        s.stop()


def test_ctl_status_counts_unreadable_node_records(sup, zuul, zk):
    """A node znode that is not a JSON object is shown to the operator as
    'unreadable' in each worker's node counts, and left in place."""
    sup.write(two_providers())
    sup.start_fg()
    sup.wait_running(["static-a", "static-b"])
    wait_for(lambda: len(ready_nodes(zuul)) == 2, what="two ready nodes")
    zk.create("/nodepool/nodes/0000009999", b"not json at all")
    st = wait_for(lambda: (lambda st: st["static-a"]["nodes"].get("unreadable") == 1 and st)(
        sup.status()), what="unreadable counted")
    assert st["static-a"]["nodes"] == {"ready": 1, "unreadable": 1}
    rc, out, err = sup.ctl("status")
    assert rc == 0 and "ready:1,unreadable:1" in out, out
    zk.delete("/nodepool/nodes/0000009999")
    wait_for(lambda: "unreadable" not in sup.status()["static-a"]["nodes"],
             what="no longer counted")
