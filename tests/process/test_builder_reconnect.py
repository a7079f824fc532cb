"""nodepool-builder rides through ZooKeeper going away (issue 13, "same
for the builder"): a build running, an upload spanning the outage (the
fake cloud's upload-delay) and more work queued behind them, while

  (a) a short partition cuts a TCP proxy between the builder and
      ZooKeeper for 2.5 s (the session lives on),
  (b) a long partition outlasts the session (2 s timeout): the locks and
      the builder component go with it,
  (c) a dedicated ZooKeeper restarts on the same data directory,
  (d) a long partition during which another builder (the test, with
      kazoo's Lock as upstream takes it) takes the upload lock: the upload
      that finishes then is not ours to record.

What an operator checks once things settle: every image has a ready
build and a ready upload; no build or upload left building/uploading; no
lock held; exactly one cloud image per ready upload and no other image in
the cloud (none leaked, none doubled); one builder component, registered
again after an expiry. The time from ZooKeeper back to the builder's
next record is measured and printed (no timing thresholds)."""
import datetime
import json
import re
import time

from kazoo.exceptions import KazooException, NoNodeError

from conftest import wait_for
from builder_helpers import Store, builder_config, start_builder, workers
from load_helpers import chrooted_kazoo, restart_outage, zk_proxy
from zkservers import Standalone

IMAGES = ("img", "other")
ROOT = "/nodepool/images"


def scenario_config(deployment, servers, timeout):
    """img builds at once and its upload to the fake cloud takes 2.5 s;
    other's build takes 2 s, so its upload is queued behind the outage."""
    return builder_config(
        deployment, images=IMAGES, provider={"sim": {"upload-delay": 2.5}},
        diskimage={"other": {"env-vars": {"DIB_CHILD_VAR": "other",
                                          "FAKE_DIB_SLEEP": "2"}}},
        top={"zookeeper-servers": servers, "zookeeper-timeout": timeout})


def children(zk, path):
    try:
        return sorted(c for c in zk.get_children(path) if c != "lock")
    except NoNodeError:
        return []


def records(zk):
    """[(kind, path, record, mtime seconds)] of every build and upload."""
    out = []
    for image in children(zk, ROOT):
        for b in children(zk, "%s/%s/builds" % (ROOT, image)):
            bp = "%s/%s/builds/%s" % (ROOT, image, b)
            try:
                data, st = zk.get(bp)
            except NoNodeError:
                continue
            out.append(("build", bp, json.loads(data) if data else {}, st.mtime / 1000.0))
            for p in children(zk, bp + "/providers"):
                for u in children(zk, "%s/providers/%s/images" % (bp, p)):
                    up = "%s/providers/%s/images/%s" % (bp, p, u)
                    try:
                        data, st = zk.get(up)
                    except NoNodeError:
                        continue
                    out.append(("upload", up, json.loads(data) if data else {},
                                st.mtime / 1000.0))
    return out


def held_locks(zk):
    """Lock dirs under /nodepool/images with a contender."""
    out = []

    def walk(path):
        for c in sorted(zk.get_children(path)):
            p = path + "/" + c
            if c == "lock" or c.endswith("-lock"):
                if any("__lock__" in x for x in zk.get_children(p)):
                    out.append(p)
            else:
                walk(p)
    try:
        walk(ROOT)
    except NoNodeError:
        pass
    return out


def quiet(fn):
    """fn() or None while ZooKeeper is away from the test's client."""
    def call():
        try:
            return fn()
        except (KazooException, NoNodeError):
            return None
    return call


def in_flight(zk):
    """(build path, upload path) of a build of other running and an
    upload of img under way, or None."""
    recs = records(zk)
    building = [r[1] for r in recs if r[0] == "build" and "/other/" in r[1]
                and r[2].get("state") == "building"]
    uploading = [r[1] for r in recs if r[0] == "upload" and "/img/" in r[1]
                 and r[2].get("state") == "uploading"]
    return (building[0], uploading[0]) if building and uploading else None


def settled(zk, store):
    """Every image built and uploaded once, nothing in flight, nothing
    locked, the cloud holding exactly the ready uploads' images."""
    recs = records(zk)
    for image in IMAGES:
        if not any(r[0] == "build" and "/%s/" % image in r[1] and r[2].get("state") == "ready"
                   for r in recs):
            return None
        if not any(r[0] == "upload" and "/%s/" % image in r[1]
                   and r[2].get("state") == "ready" for r in recs):
            return None
    if any(r[2].get("state") in ("building", "uploading") for r in recs):
        return None
    if held_locks(zk):
        return None
    ready = [r for r in recs if r[0] == "upload" and r[2].get("state") == "ready"]
    if sorted(store.images()) != sorted(r[2]["external_id"] for r in ready):
        return None
    return recs


def describe(zk, store):
    lines = ["%s %s %s" % (k, p, r.get("state")) for k, p, r, _ in records(zk)]
    lines.append("locks held: %s" % held_locks(zk))
    lines.append("cloud images: %s" % sorted(store.images()))
    return "\n".join(lines)


def components(zk):
    out = {}
    for c in children(zk, "/nodepool/components/builder"):
        try:
            _, st = zk.get("/nodepool/components/builder/" + c)
        except NoNodeError:
            continue
        out[c] = st.ephemeralOwner
    return out


def reconnect_lag(log, t_back):
    """Seconds from ZooKeeper back to the builder's (re)connection, as its
    log (local time, milliseconds) shows, or None."""
    for m in re.finditer(r"^(\S+ \S+) INFO builder: zookeeper: (?:re)?connected, session",
                         log, re.M):
        t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()
        if t >= t_back - 0.5:
            return t - t_back
    return None


def run_scenario(name, deployment, zk, servers, timeout, outage, session_kept,
                 upload_kept=True):
    """Start a builder on `servers`; once a build and an upload are in
    flight run outage() (it returns the time ZooKeeper is back); check
    what an operator would and report how soon the builder worked again.
    The build and (upload_kept) the upload in flight must be the ones that
    end ready: kept, not lost and done again."""
    store = Store(deployment)
    path = deployment.write_config(scenario_config(deployment, servers, timeout))
    b = start_builder(deployment, path, extra=["--upload-workers", "2"], name="builder-" + name)
    build, upload = wait_for(quiet(lambda: in_flight(zk)), 30,
                             what="a build and an upload in flight")
    before = wait_for(quiet(lambda: components(zk)), 10, what="the builder component")
    upload_workers = sorted(workers(b.p.pid, "upload"))

    t_back = outage()

    try:
        recs = wait_for(quiet(lambda: settled(zk, store)), 45, interval=0.1,
                        what="every image built and uploaded, nothing in flight")
    except AssertionError:
        raise AssertionError("not settled:\n%s\n%s" % (quiet(lambda: describe(zk, store))(),
                                                       b.output()[-6000:]))
    assert b.alive()
    log = b.output()
    # exactly one ready upload per build and provider, one image each
    ready = [r for r in recs if r[0] == "upload" and r[2]["state"] == "ready"]
    per_build = {}
    for _, p, r, _ in ready:
        key = p.rsplit("/images/", 1)[0]
        per_build[key] = per_build.get(key, 0) + 1
    assert all(v == 1 for v in per_build.values()), per_build
    assert len({r[2]["external_id"] for r in ready}) == len(ready)
    images = Store(deployment).images()
    assert sorted(images) == sorted(r[2]["external_id"] for r in ready), (images, ready)
    for _, p, r, _ in ready:
        img = images[r["external_id"]]
        assert img["name"] == r["external_name"]
        assert img["metadata"]["nodepool_upload_id"] == p.rsplit("/", 1)[1]
    # every build ready: none failed, none abandoned
    states = sorted(r[2]["state"] for r in recs if r[0] == "build")
    assert states == ["ready"] * len(IMAGES), describe(zk, store)
    # the work in flight was kept: the build running when ZooKeeper went
    # away is the one ready now, each image was built once
    by_path = {p: r for _, p, r, _ in recs}
    assert by_path.get(build, {}).get("state") == "ready", (build, describe(zk, store))
    assert log.count("INFO builder: building image ") == len(IMAGES), log
    if upload_kept:
        assert by_path.get(upload, {}).get("state") == "ready", (upload, describe(zk, store))
        assert log.count("INFO builder: uploading image ") == len(IMAGES), log
    # one builder component; a new one (new session) after an expiry
    after = components(zk)
    assert len(after) == 1, after
    if session_kept:
        assert after == before, (before, after)
    else:
        assert set(after.values()).isdisjoint(before.values()), (before, after)
    # the upload workers lived through it
    assert sorted(workers(b.p.pid, "upload")) == upload_workers
    assert "refused us" not in log and "refused our certificate" not in log
    # how soon the builder worked again: its first record written after
    # ZooKeeper was back (ZooKeeper's own clock, same host)
    writes = sorted(m for _, _, _, m in recs if m >= t_back - 0.05)
    first = writes[0] - t_back if writes else None
    lag = reconnect_lag(log, t_back)
    print("\n%s: after ZooKeeper was back the builder reconnected in %s and wrote its "
          "first record in %s; %d builds, %d uploads ready; cloud images %d" % (
              name, "%.0f ms" % (lag * 1000) if lag is not None else "(?)",
              "%.0f ms" % (first * 1000) if first is not None else "(none)",
              len(states), len(ready), len(images)))
    return log, first


def test_short_partition_session_kept(deployment, zk, zk_server, chroot):
    with zk_proxy(zk_server, chroot) as (proxy, servers):
        def outage():
            proxy.cut()
            time.sleep(2.5)
            proxy.restore()
            return time.time()
        log, _ = run_scenario("short-partition", deployment, zk, servers, 8, outage, True)
        assert "session expired" not in log


def test_long_partition_session_expires(deployment, zk, zk_server, chroot):
    with zk_proxy(zk_server, chroot) as (proxy, servers):
        def outage():
            before = components(zk)
            t_cut = time.time()
            proxy.cut()
            # the server expires the session (2 s): the component goes
            wait_for(lambda: not (set(components(zk)) & set(before)), 20,
                     what="the builder's session expired")
            # the upload (2.5 s) and the build (2 s) end while the builder
            # is still cut off, its session gone: the known gap (an upload
            # ending after its session expired was recorded READY whatever
            # became of its lock)
            time.sleep(max(0.0, t_cut + 3.0 - time.time()))
            proxy.restore()
            return time.time()
        log, _ = run_scenario("long-partition", deployment, zk, servers, 2, outage, False)
        # both results waited for their locks, taken again on the new session
        assert log.count("took the lock") == 2, log
        assert "our lock was lost; recording waits" in log


def test_zookeeper_restart_same_data(deployment, zk_server, tmp_path):
    certs = zk_server[2]
    server = Standalone(str(tmp_path / "zk-restart"), certs)
    k = None
    try:
        server.start()
        k = chrooted_kazoo(server.server.hostport(), certs)
        servers = [{"host": "127.0.0.1", "port": server.server.tls, "chroot": "/np"}]
        run_scenario("zookeeper-restart", deployment, k, servers, 15, restart_outage(server),
                     True)
    finally:
        if k is not None:
            k.stop()
            k.close()
        server.stop()


def test_lock_taken_over_during_expiry_is_not_recorded_as_ours(deployment, zk, zk_server,
                                                               chroot):
    """While the builder's session is gone another builder takes the
    upload lock (kazoo's Lock, as upstream's builder takes it) and holds
    it past the end of the upload: the builder must not record that
    upload READY, and must delete the image it made again. Once the lock
    is free the abandoned record is cleaned up and the image uploaded
    again: one ready upload, one cloud image."""
    with zk_proxy(zk_server, chroot) as (proxy, servers):
        taken = {}

        def outage():
            before = components(zk)
            (upload,) = [p for k, p, r, _ in records(zk)
                         if k == "upload" and "/img/" in p and r["state"] == "uploading"]
            lock_path = upload.rsplit("/images/", 1)[0] + "/images/lock"
            proxy.cut()
            wait_for(lambda: not (set(components(zk)) & set(before)), 20,
                     what="the builder's session expired")
            lock = zk.Lock(lock_path, "another-builder")
            assert lock.acquire(timeout=5)
            taken["lock"], taken["upload"] = lock, upload
            proxy.restore()
            t_back = time.time()
            # the upload ends (upload-delay) while the lock is someone else's
            wait_for(lambda: "is someone else's now" in deployment.procs[-1].output(), 20,
                     what="the builder seeing the lock taken")
            wait_for(lambda: "not recorded" in deployment.procs[-1].output(), 20,
                     what="the upload not recorded as ours")
            assert zk.get(upload)[0] and json.loads(zk.get(upload)[0])["state"] == "uploading"
            lock.release()
            return t_back
        log, _ = run_scenario("lock-taken-over", deployment, zk, servers, 2, outage, False,
                              upload_kept=False)
        assert "deleting image" in log and "again" in log
        # the abandoned record went; a new upload took its place
        assert not zk.exists(taken["upload"])
