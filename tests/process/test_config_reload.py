"""nodepoold applies nodepool.yaml and secure.conf when they change, with
no signal, as Nodepool's launcher does (launcher.py, checkRecentConfig):
the file rewritten in place, replaced by a rename, swapped by a symlink,
its symlink's target edited; a broken file keeps the running
configuration (its errors logged once, with file:line:col) until it is
fixed; only the providers whose settings changed are touched. What is
checked is what a user sees: the pools' supported_labels and the nodes
in ZooKeeper, `nodepoolctl status`, the log."""
import json
import os
import re
import urllib.request

from conftest import free_port, wait_for
from npd import Supervisor, builder_bindir, host, pool_sessions, static_provider


def hostnames(zuul, provider):
    return {n["hostname"] for n in zuul.nodes().values()
            if n["provider"] == provider and n["state"] == "ready"}


def supported_labels(zuul, provider):
    return sorted(l for p in zuul.pools() if p["provider_name"] == provider
                  for l in p["supported_labels"])


def generation_logged(sup, gen):
    m = re.findall(r"configuration generation %d in force: .*" % gen, sup.log())
    return m[-1] if m else None


def write_in_place(path, text):
    """What `cat > file` or an editor that writes in place does: the same
    inode, truncated and written."""
    with open(path, "w") as f:
        f.write(text)


def write_by_rename(path, text):
    with open(path + ".new", "w") as f:
        f.write(text)
    os.rename(path + ".new", path)


def swap_symlink(path, target, text):
    """What a configuration tool does: the new file next to the old one,
    a new symlink renamed over the path."""
    with open(target, "w") as f:
        f.write(text)
    os.symlink(target, path + ".lnk")
    os.rename(path + ".lnk", path)


def ready_ok(port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/ready" % port, timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def test_every_kind_of_change_is_applied_without_a_signal(deployment, zuul):
    sup = Supervisor(deployment)
    try:
        port, other_port = free_port(), free_port()
        cfg = {
            "labels": [{"name": "small"}],
            "webapp": {"port": port, "listen_address": "127.0.0.1"},
            "providers": [
                static_provider("static-a", [host("a1", ["small"])]),
                static_provider("static-b", [host("b1", ["small"])]),
            ],
        }
        path = sup.write(cfg)
        full = json.load(open(path))  # with the ZooKeeper and nodepoold sections
        sup.start_fg()
        before = sup.wait_running(["static-a", "static-b"])
        wait_for(lambda: hostnames(zuul, "static-a") == {"a1"} and
                 hostnames(zuul, "static-b") == {"b1"}, what="a1 and b1 ready")
        sessions = wait_for(lambda: len(pool_sessions(zuul)) == 2 and pool_sessions(zuul),
                            what="two pools")
        assert "watching %s for changes" % path in sup.log()
        wait_for(lambda: ready_ok(port), what="web API up")

        def untouched(name):
            st = sup.status()[name]
            assert st["pid"] == before[name]["pid"] and st["restarts"] == 0
            assert pool_sessions(zuul)[name] == sessions[name]

        # 1. rewritten in place: static-a gets a host with a new label (and
        # the webapp port is changed: read once at start, as upstream; the
        # counts below include nodepool-web, whose slice changes only when a
        # pool's labels or limits do: its status page shows them)
        full["labels"].append({"name": "large"})
        full["providers"][0]["pools"][0]["nodes"].append(host("a2", ["large"]))
        full["webapp"]["port"] = other_port
        write_in_place(path, json.dumps(full, indent=2))
        wait_for(lambda: supported_labels(zuul, "static-a") == ["large", "small"],
                 what="static-a's pool offering large")
        wait_for(lambda: hostnames(zuul, "static-a") == {"a1", "a2"}, what="a2 ready")
        # static-a and nodepool-web (static-a's pool now offers large)
        assert "1 unchanged, 2 changed, 0 added, 0 removed" in generation_logged(sup, 2)
        untouched("static-b")
        assert "webapp changes take effect when nodepoold restarts" in sup.log()
        wait_for(lambda: ready_ok(port), what="web API still on its first port")
        assert not ready_ok(other_port)
        a_session = wait_for(lambda: pool_sessions(zuul).get("static-a"), what="a's pool")

        # 2. replaced by a rename (an editor's save): static-b gets b2
        full["providers"][1]["pools"][0]["nodes"].append(host("b2", ["small"]))
        write_by_rename(path, json.dumps(full, indent=2))
        wait_for(lambda: hostnames(zuul, "static-b") == {"b1", "b2"}, what="b2 ready")
        assert "2 unchanged, 1 changed" in generation_logged(sup, 3)
        assert pool_sessions(zuul)["static-a"] == a_session  # untouched this time

        # 3. swapped by a symlink: static-b's b3 offers large
        full["providers"][1]["pools"][0]["nodes"].append(host("b3", ["large"]))
        target = os.path.join(deployment.dir, "nodepool-v4.yaml")
        swap_symlink(path, target, json.dumps(full, indent=2))
        assert os.path.islink(path)
        wait_for(lambda: supported_labels(zuul, "static-b") == ["large", "small"],
                 what="static-b's pool offering large")
        wait_for(lambda: hostnames(zuul, "static-b") == {"b1", "b2", "b3"}, what="b3 ready")
        assert generation_logged(sup, 4)

        # 4. broken, written through the symlink into its target: the
        # running configuration stays, every error logged with its position
        gen4 = sup.status()
        broken = json.loads(json.dumps(full))
        broken["labels"][0]["min-ready"] = "lots"
        broken["providers"][0]["pools"][0]["max-servers"] = "x"
        broken_text = json.dumps(broken, indent=2)
        write_in_place(path, broken_text)
        wait_for(lambda: "reload failed: 2 configuration error(s)" in sup.log(),
                 what="the failed reload logged")
        log = sup.log()
        assert re.search(re.escape(path) + r":\d+:\d+: labels\[0\]\.min-ready: ", log), log
        assert re.search(re.escape(path) + r":\d+:\d+: providers\[0\]\.pools\[0\]\.max-servers: ",
                         log), log
        st = sup.status()
        for name in ("static-a", "static-b"):
            assert st[name]["pid"] == gen4[name]["pid"] and st[name]["state"] == "running"
        assert hostnames(zuul, "static-b") == {"b1", "b2", "b3"}
        # the same broken bytes again, and a touch: not logged again
        write_in_place(path, broken_text)
        os.utime(target)

        # 5. fixed (and a change): applied
        full["providers"][0]["pools"][0]["nodes"].append(host("a3", ["small"]))
        write_in_place(path, json.dumps(full, indent=2))
        wait_for(lambda: hostnames(zuul, "static-a") == {"a1", "a2", "a3"}, what="a3 ready")
        assert "2 unchanged, 1 changed" in generation_logged(sup, 5)
        assert sup.log().count("reload failed:") == 1, sup.log()
        assert sup.log().count("changed on disk: reloading") == 5, sup.log()
        assert sup.status()["static-b"]["pid"] == before["static-b"]["pid"]

        # nothing but the content counts: the unchanged file rewritten,
        # touched, renamed over itself: the next reload logged is the next
        # real change
        text = json.dumps(full, indent=2)
        write_in_place(path, text)
        os.utime(target)
        write_by_rename(target, text)
        full["labels"].append({"name": "unused"})
        write_in_place(path, json.dumps(full, indent=2))
        wait_for(lambda: generation_logged(sup, 6), what="generation 6")
        assert "3 unchanged, 0 changed" in generation_logged(sup, 6)
        assert generation_logged(sup, 7) is None
        assert sup.log().count("changed on disk: reloading") == 6, sup.log()
    finally:
        sup.stop()


DISKIMAGES = [{"name": "ubuntu", "elements": ["ubuntu-minimal"]}]


def test_secure_conf_change_is_applied_and_reaches_the_builder(deployment, zuul, tmp_path):
    bindir, out = builder_bindir(tmp_path)
    sup = Supervisor(deployment, bindir=bindir)
    try:
        secure = os.path.join(deployment.dir, "secure.conf")
        write_by_rename(secure, json.dumps(
            {"diskimages": [{"name": "ubuntu", "env-vars": {"DIB_MIRROR": "one"}}]}))
        sup.write({
            "labels": [{"name": "small"}],
            "diskimages": DISKIMAGES,
            "providers": [static_provider("static-a", [host("a1", ["small"])])],
        })
        sup.start_fg(["-s", secure])
        before = sup.wait_running(["static-a", "builder"])
        got = json.loads((out / "config-1.json").read_text())
        assert got["secure"]["diskimages"][0]["env-vars"] == {"DIB_MIRROR": "one"}
        assert "watching %s and %s for changes" % (sup.config, secure) in sup.log()

        # secure.conf replaced: the builder gets it; the provider, which
        # does not use the image, is not touched
        write_by_rename(secure, json.dumps(
            {"diskimages": [{"name": "ubuntu", "env-vars": {"DIB_MIRROR": "two"}}]}))
        wait_for(lambda: (out / "config-2.json").exists(), what="the builder's second CONFIG")
        got = json.loads((out / "config-2.json").read_text())
        assert got["secure"]["diskimages"][0]["env-vars"] == {"DIB_MIRROR": "two"}
        assert "2 unchanged, 1 changed" in wait_for(lambda: generation_logged(sup, 2),
                                                    what="generation 2")
        st = sup.status()
        assert st["static-a"]["pid"] == before["static-a"]["pid"]
        assert st["builder"]["pid"] == before["builder"]["pid"]  # reconfigured, not restarted

        # broken secure.conf (an unknown image): kept, logged with its position
        write_in_place(secure, "diskimages:\n  - name: nope\n    env-vars: {A: b}\n")
        wait_for(lambda: "reload failed:" in sup.log(), what="the failed reload logged")
        assert re.search(re.escape(secure) + r":2:\d+: ", sup.log()), sup.log()
        # secure.conf removed: logged, nothing changes; back: applied
        os.unlink(secure)
        wait_for(lambda: re.search(re.escape(secure) + r": cannot open: No such file",
                                   sup.log()), what="the missing secure.conf logged")
        write_by_rename(secure, json.dumps(
            {"diskimages": [{"name": "ubuntu", "env-vars": {"DIB_MIRROR": "three"}}]}))
        wait_for(lambda: (out / "config-3.json").exists(), what="the builder's third CONFIG")
        got = json.loads((out / "config-3.json").read_text())
        assert got["secure"]["diskimages"][0]["env-vars"] == {"DIB_MIRROR": "three"}
        assert sup.status()["static-a"]["pid"] == before["static-a"]["pid"]
    finally:
        sup.stop()


def test_reload_on_change_off_waits_for_a_signal(deployment, zuul):
    sup = Supervisor(deployment)
    try:
        cfg = {"labels": [{"name": "small"}],
               "providers": [static_provider("static-a", [host("a1", ["small"])])]}
        sup.write(cfg, settings={"reload-on-change": False})
        sup.start_fg()
        sup.wait_running(["static-a"])
        wait_for(lambda: hostnames(zuul, "static-a") == {"a1"}, what="a1 ready")
        assert "watching" not in sup.log()
        cfg["providers"][0]["pools"][0]["nodes"].append(host("a2", ["small"]))
        sup.write(cfg, settings={"reload-on-change": False})
        rc, o, err = sup.ctl("reload")
        assert rc == 0 and "1 unchanged, 1 changed" in o, o + err
        wait_for(lambda: hostnames(zuul, "static-a") == {"a1", "a2"}, what="a2 ready")
        assert "changed on disk: reloading" not in sup.log()
        # turned on by a reload: from then on a change applies by itself
        cfg["providers"][0]["pools"][0]["nodes"].append(host("a3", ["small"]))
        sup.write(cfg)
        sup.ctl("reload")
        wait_for(lambda: hostnames(zuul, "static-a") == {"a1", "a2", "a3"}, what="a3 ready")
        assert "watching %s for changes" % sup.config in sup.log()
        cfg["providers"][0]["pools"][0]["nodes"].append(host("a4", ["small"]))
        sup.write(cfg)
        wait_for(lambda: hostnames(zuul, "static-a") == {"a1", "a2", "a3", "a4"},
                 what="a4 ready")
        assert "changed on disk: reloading" in sup.log()
        # turned off by the file itself: the watcher stops (from within its
        # own report), and the next change waits for the signal
        cfg["providers"][0]["pools"][0]["nodes"].append(host("a5", ["small"]))
        sup.write(cfg, settings={"reload-on-change": False})
        wait_for(lambda: "reload-on-change off" in sup.log(), what="the watcher stopped")
        wait_for(lambda: hostnames(zuul, "static-a") == {"a1", "a2", "a3", "a4", "a5"},
                 what="a5 ready")
        cfg["providers"][0]["pools"][0]["nodes"].append(host("a6", ["small"]))
        sup.write(cfg, settings={"reload-on-change": False})
        rc, o, err = sup.ctl("reload")
        assert rc == 0 and "1 unchanged, 1 changed" in o, o + err
        wait_for(lambda: len(hostnames(zuul, "static-a")) == 6, what="a6 ready")
    finally:
        sup.stop()
