"""nodepool-builder as upstream's builder (reference section 4), with the
stand-in dib-cmd (tests/dib/fake-dib-cmd) and fake clouds sharing an
image store: builds and uploads become ready; the launcher boots from the
newest upload and falls back after image-delete; two builders never build
one image at once; pause and manual builds; a killed upload worker leaves
a clean retry; cleanup of superseded, failed and orphaned records; the
`nodepool` image commands against what the builder does."""
import json
import os
import signal
import time

from conftest import wait_for
from builder_helpers import (Images, Store, builder_config, start_builder, workers)
from fakecloud import fake_config
from operator_helpers import nodepool


def rows(r):
    """The table `nodepool ... ` printed, as lists of cells."""
    out = []
    for line in r.stdout.splitlines():
        if line.startswith("|"):
            out.append([c.strip() for c in line.strip("|").split("|")])
    return out[1:]  # without the header


def test_build_and_upload_become_ready(deployment, zk):
    cfg = builder_config(deployment)
    path = deployment.write_config(cfg)
    t0 = time.time()
    b = start_builder(deployment, path)
    images, store = Images(zk), Store(deployment)
    (bid, rec), = wait_for(lambda: images.ready_builds("img").items(), what="a ready build")
    (_, prov, uid, up), = wait_for(lambda: images.ready_uploads("img"), what="a ready upload")
    took = time.time() - t0
    print("build-to-ready (builder start to upload ready, stand-in dib-cmd): %.3fs" % took)

    # the build record, as upstream writes it
    with open(os.path.join(deployment.dir, "images", "builder_id.txt")) as f:
        builder_id = f.read().strip()
    assert len(builder_id) == 36 and builder_id.count("-") == 4
    assert rec["builder_id"] == builder_id and rec["builder"]
    assert rec["formats"] == "qcow2" and rec["username"] == "zuul"
    assert len(bid) == 32
    # the builder component
    comps = zk.get_children("/nodepool/components/builder")
    assert len(comps) == 1
    comp = json.loads(zk.get("/nodepool/components/builder/" + comps[0])[0])
    assert comp["kind"] == "builder" and comp["state"] == "running"

    # dib-cmd got upstream's arguments and environment (parents merged)
    base = os.path.join(deployment.dir, "images", "img-" + bid)
    with open(base + ".qcow2") as f:
        seen = json.load(f)
    assert seen["elements"] == ["debian-minimal", "vm", "simple-init"]
    assert seen["env"]["DIB_BASE_VAR"] == "from-base" and seen["env"]["DIB_CHILD_VAR"] == "img"
    assert seen["env"]["DIB_RELEASE"] == "12" and seen["env"]["DIB_IMAGE_NAME"] == "img"
    assert seen["env"]["DIB_IMAGE_FILENAME"] == base
    assert os.path.isdir(base + ".d") and os.path.exists(base + ".qcow2.sha256")
    log = os.path.join(deployment.dir, "build-logs", "img-%s.log" % bid)
    with open(log) as f:
        text = f.read()
    assert "fake-dib-cmd: done" in text and text.endswith("Exit code: 0\n")

    # the upload: in the cloud, with its tags, recorded
    assert prov == "sim" and uid == "0000000001"
    assert up["format"] == "qcow2" and up["username"] == "zuul"
    img = store.images()[up["external_id"]]
    assert img["name"] == up["external_name"] and up["external_name"].startswith("img-")
    assert img["metadata"] == {"owner": "test", "nodepool_build_id": bid,
                               "nodepool_upload_id": uid, "nodepool_provider_name": "sim"}
    with open(base + ".qcow2.sha256") as f:
        assert img["sha256"] == f.read().split()[0]

    # the CLI sees what the builder did
    r = nodepool(path, "dib-image-list")
    assert r.returncode == 0
    (row,) = rows(r)
    assert row[0] == "img-" + bid and row[3] == "qcow2" and row[4] == "ready", row
    r = nodepool(path, "image-list")
    (row,) = rows(r)
    assert row[:6] == [bid, uid, "sim", "img", up["external_name"], up["external_id"]], row
    assert row[6] == "ready"
    assert b.alive()


def test_launcher_boots_newest_upload_and_falls_back_after_image_delete(deployment, zk, zuul):
    cfg = builder_config(deployment)
    # the launcher's view of the same provider: label img-label from the diskimage
    fc = fake_config(deployment, labels={"img-label": {"diskimage": "img"}},
                     provider=cfg["providers"][0])
    cfg["providers"][0] = fc["providers"][0]
    path = deployment.write_config(cfg)
    b = start_builder(deployment, path)
    deployment.start_launcher("sim", path)
    images = Images(zk)
    (b1,) = wait_for(lambda: [u[0] for u in images.ready_uploads("img")], what="upload 1")
    # a manual build: the request goes once the build is ready
    assert nodepool(path, "image-build", "img").returncode == 0
    wait_for(lambda: len(images.ready_uploads("img")) == 2, what="upload 2")
    assert not zk.exists("/nodepool/images/img/request-build")
    b2 = [u for u in images.ready_uploads("img") if u[0] != b1][0]
    assert images.ready_builds("img")[b2[0]]["state_time"] > \
        images.ready_builds("img")[b1]["state_time"]

    def boot():
        # until the image-delete below reaches the launcher's watch, a
        # node may come from either upload: Zuul asks again
        rid = zuul.submit(["img-label"])
        req = zuul.wait_request(rid)
        return zuul.node(req["nodes"][0]) if req["state"] == "fulfilled" else {}

    newest = "/nodepool/images/img/builds/%s/providers/sim/images/%s" % (b2[0], b2[2])
    n = wait_for(lambda: (lambda n: n if n.get("image_id") == newest else None)(boot()),
                 what="a node from the newest upload")
    assert n["image_id"] == newest

    # the builder off (it would upload build 2 again), image-delete the newest
    b.stop()
    r = nodepool(path, "image-delete", "--provider", "sim", "--image", "img",
                 "--build-id", b2[0], "--upload-id", b2[2])
    assert r.returncode == 0, r.stderr
    older = [u for u in images.ready_uploads("img") if u[0] == b1][0]
    previous = "/nodepool/images/img/builds/%s/providers/sim/images/%s" % (b1, older[2])
    n = wait_for(lambda: (lambda n: n if n.get("image_id") == previous else None)(boot()),
                 what="a node from the previous upload")
    assert n["image_id"] == previous


def test_two_builders_never_build_one_image_at_once(deployment, zk):
    trace = os.path.join(deployment.dir, "dib-trace")
    cfg = builder_config(deployment, images=("img", "other"),
                         env={"FAKE_DIB_SLEEP": "0.15", "FAKE_DIB_TRACE": trace},
                         diskimage={"img": {"rebuild-age": 1}, "other": {"rebuild-age": 1}})
    for i in (1, 2):
        c = dict(cfg, **{"images-dir": os.path.join(deployment.dir, "images%d" % i)})
        start_builder(deployment, deployment.write_config(c, "builder%d.yaml" % i),
                      extra=["--build-workers", "2"], name="builder%d" % i)

    def spans():
        out, open_ = {}, {}
        if not os.path.exists(trace):
            return out
        with open(trace) as f:
            for line in f:
                what, image, pid, t = line.split()
                if what == "start":
                    open_[pid] = (image, float(t))
                elif pid in open_:
                    image, t0 = open_.pop(pid)
                    out.setdefault(image, []).append((t0, float(t)))
        return out

    builders = set()

    def enough():
        # cleanup keeps only the newest builds: remember who built each
        builders.update(r.get("builder_id") for i in ("img", "other")
                        for r in Images(zk).builds(i).values())
        return len(builders) == 2 and all(len(spans().get(i, [])) >= 4
                                          for i in ("img", "other"))
    wait_for(enough, timeout=30, what="several builds of each image, by both builders")
    for image, s in spans().items():
        s.sort()
        for (a0, a1), (b0, b1) in zip(s, s[1:]):
            assert b0 >= a1, "%s built twice at once: %s" % (image, s)


def test_pause_and_manual_builds(deployment, zk):
    cfg = builder_config(deployment, images=("img", "held"),
                         diskimage={"held": {"pause": True}})
    path = deployment.write_config(cfg)
    images = Images(zk)
    # paused with the ZooKeeper flag before the builder ever ran
    assert nodepool(path, "image-pause", "img").returncode == 0
    start_builder(deployment, path)
    time.sleep(1.0)  # a few passes
    assert images.builds("img") == {} and images.builds("held") == {}
    # a manual build of a paused image waits for the unpause (as upstream)
    assert nodepool(path, "image-build", "img").returncode == 0
    r = nodepool(path, "image-build", "held")  # paused in the config: refused
    assert r.returncode != 0 and "paused" in (r.stdout + r.stderr)
    time.sleep(0.6)
    assert images.builds("img") == {}
    assert nodepool(path, "image-unpause", "img").returncode == 0
    wait_for(lambda: images.ready_builds("img"), what="the build after unpause")
    wait_for(lambda: not zk.exists("/nodepool/images/img/request-build"),
             what="the request removed")
    assert images.builds("held") == {}
    # a manual build of a fresh image builds again (not aged out)
    (first,) = images.ready_builds("img")
    assert nodepool(path, "image-build", "img").returncode == 0
    r = nodepool(path, "image-status")
    assert r.returncode == 0
    wait_for(lambda: len(images.ready_builds("img")) == 2, what="the manual rebuild")
    wait_for(lambda: not zk.exists("/nodepool/images/img/request-build"),
             what="the request removed")


def test_killed_upload_worker_leaves_a_clean_retry(deployment, zk):
    cfg = builder_config(deployment, provider={"sim": {"upload-delay": 2.5}})
    path = deployment.write_config(cfg)
    b = start_builder(deployment, path, extra=["--upload-workers", "1"])
    images, store = Images(zk), Store(deployment)
    wait_for(lambda: [u for u in images.uploads("img") if u[3]["state"] == "uploading"],
             what="an upload in progress")
    (victim,) = workers(b.pid, "upload")
    os.kill(victim, signal.SIGKILL)
    # the upload is recorded failed at once, then done again by a new worker
    wait_for(lambda: [u for u in images.uploads("img") if u[3]["state"] == "failed"],
             what="the killed upload recorded failed")
    (good,) = wait_for(lambda: images.ready_uploads("img"), what="the retried upload")
    assert good[2] != "0000000001"
    new_worker = wait_for(lambda: workers(b.pid, "upload"), what="a new upload worker")
    assert new_worker != [victim]
    # cleanup removes the failed record; the cloud holds the one image
    wait_for(lambda: len(images.uploads("img")) == 1, what="only the good record left")
    assert list(store.images()) == [good[3]["external_id"]]
    assert b.alive()


def test_removed_provider_and_image_are_cleaned(deployment, zk):
    cfg = builder_config(deployment, images=("img", "gone"), providers=("sim", "sim2", "sim3"))
    path = deployment.write_config(cfg)
    start_builder(deployment, path)
    images, store = Images(zk), Store(deployment)
    wait_for(lambda: len(images.ready_uploads("img")) == 3 and
             len(images.ready_uploads("gone")) == 3, what="six uploads")
    assert len(store.images()) == 6
    ext = {(u[1], i): u[3]["external_id"] for i in ("img", "gone")
           for u in images.ready_uploads(i)}
    # sim2 stops using img; sim3 leaves the configuration; image gone leaves it too
    cfg["providers"] = cfg["providers"][:2]
    cfg["providers"][1]["diskimages"] = []
    cfg["providers"][1]["cloud-images"] = [{"name": "debian", "image-id": "debian-12"}]
    cfg["providers"][1]["pools"][0]["labels"] = [{"name": "img-label", "cloud-image": "debian"}]
    cfg["diskimages"] = [d for d in cfg["diskimages"] if d["name"] != "gone"]
    for p in cfg["providers"]:
        p["diskimages"] = [d for d in p["diskimages"] if d["name"] != "gone"]
        p["pools"][0]["labels"] = [l for l in p["pools"][0]["labels"]
                                   if l.get("diskimage") != "gone"]
    cfg["labels"] = [l for l in cfg["labels"] if l["name"] != "gone-label"]
    time.sleep(0.05)  # a new mtime
    deployment.write_config(cfg)
    wait_for(lambda: [u[1] for u in images.uploads("img")] == ["sim"],
             what="img's uploads in sim2 and sim3 removed")
    wait_for(lambda: images.builds("gone") == {}, what="image gone removed")
    left = set(store.images())
    assert ext[("sim", "img")] in left and ext[("sim2", "img")] not in left
    assert ext[("sim", "gone")] not in left and ext[("sim2", "gone")] not in left
    # sim3's cloud is out of reach: its images stay, only the records went
    assert ext[("sim3", "img")] in left and ext[("sim3", "gone")] in left
    gone_files = [f for f in os.listdir(os.path.join(deployment.dir, "images"))
                  if f.startswith("gone-")]
    wait_for(lambda: not [f for f in os.listdir(os.path.join(deployment.dir, "images"))
                          if f.startswith("gone-")], what="gone's local files removed")
    assert gone_files


def test_rebuilds_keep_two_and_clean_the_rest(deployment, zk):
    cfg = builder_config(deployment, diskimage={"img": {"rebuild-age": 1}})
    path = deployment.write_config(cfg)
    start_builder(deployment, path)
    images, store = Images(zk), Store(deployment)
    seen = set()

    def many():
        seen.update(images.builds("img"))
        return len(seen) >= 5
    wait_for(many, timeout=30, what="five builds")
    # no more builds: what is left settles to the two newest, their uploads
    # (the cloud's images and the records), their local files
    assert nodepool(path, "image-pause", "img").returncode == 0

    def settled():
        ready = images.ready_builds("img")
        ups = images.uploads("img")
        local = {f.split(".")[0][len("img-"):]
                 for f in os.listdir(os.path.join(deployment.dir, "images"))
                 if f.startswith("img-")}
        ok = (len(ready) == 2 and set(images.builds("img")) == set(ready) and
              len(ups) == 2 and {u[0] for u in ups} == set(ready) and
              all(u[3]["state"] == "ready" for u in ups) and
              set(store.images()) == {u[3]["external_id"] for u in ups} and
              local == set(ready))
        return ok and ready
    ready = wait_for(settled, timeout=30, what="superseded builds and uploads removed")
    newest = sorted(seen)
    assert set(ready) <= set(newest)


def test_failed_build_recorded_and_removed(deployment, zk):
    cfg = builder_config(deployment, env={"FAKE_DIB_FAIL": "3"})
    path = deployment.write_config(cfg)
    b = start_builder(deployment, path)
    images = Images(zk)
    failed = wait_for(lambda: [k for k, r in images.builds("img").items()
                               if r["state"] == "failed"], what="a failed build")
    log = os.path.join(deployment.dir, "build-logs", "img-%s.log" % failed[0])
    with open(log) as f:
        assert f.read().endswith("Exit code: 3\n")
    # cleanup removes failed builds (not the newest ready ones: there are none)
    wait_for(lambda: failed[0] not in images.builds("img"), what="the failed build removed")
    assert images.ready_builds("img") == {} and b.alive()


def test_under_nodepoold_builds_uploads_and_serves(deployment, zk, zuul):
    """nodepoold starts the builder (diskimages are configured) and a
    launcher; the label boots from the builder's upload."""
    from npd import Supervisor
    cfg = builder_config(deployment)
    fc = fake_config(deployment, labels={"img-label": {"diskimage": "img"}},
                     provider=cfg["providers"][0])
    cfg["providers"][0] = fc["providers"][0]
    del cfg["nodepoold"]
    s = Supervisor(deployment)
    try:
        s.write(cfg)
        s.start_fg()
        st = s.wait_running(["sim", "builder"])
        assert st["builder"]["kind"] == "builder"
        images = Images(zk)
        (up,) = wait_for(lambda: images.ready_uploads("img"), what="an upload")
        want = "/nodepool/images/img/builds/%s/providers/sim/images/%s" % (up[0], up[2])

        def boot():
            rid = zuul.submit(["img-label"])
            req = zuul.wait_request(rid)
            return zuul.node(req["nodes"][0]) if req["state"] == "fulfilled" else None
        n = wait_for(boot, what="a node from the upload")
        assert n["image_id"] == want
        # the builder's counters reach nodepoolctl
        st = wait_for(lambda: (lambda b: b if b["fulfilled"] >= 2 else None)(
            s.status()["builder"]), what="builder status")
        assert st["failed"] == 0
    finally:
        s.stop()


def test_opendev_nb07_builds_with_the_stand_in(deployment, zk):
    """OpenDev's builder config (tests/data/configs/opendev/nb07, copied
    from the shared reference set) loads, and every diskimage a provider
    uses builds with the stand-in dib-cmd. Its providers are OpenStack
    clouds this build cannot reach, so nothing is uploaded."""
    import yaml
    from conftest import TOP
    from builder_helpers import FAKE_DIB
    with open(os.path.join(TOP, "tests/data/configs/opendev/nb07.opendev.org.yaml")) as f:
        cfg = yaml.safe_load(f)
    cfg.pop("zookeeper-servers")
    cfg["images-dir"] = os.path.join(deployment.dir, "images")
    cfg["build-log-dir"] = os.path.join(deployment.dir, "build-logs")
    cfg["elements-dir"] = os.path.join(deployment.dir, "elements")
    for d in cfg["diskimages"]:
        d["dib-cmd"] = FAKE_DIB
        d.setdefault("env-vars", {})["TMPDIR"] = deployment.dir
    path = deployment.write_config(cfg)
    start_builder(deployment, path, extra=["--build-workers", "4"])
    paused = {d["name"] for d in cfg["diskimages"] if d.get("pause")}
    used = {i["name"] for p in cfg["providers"] for i in p.get("diskimages", [])} - paused
    abstract = {d["name"] for d in cfg["diskimages"] if d.get("abstract")}
    assert len(used) >= 8 and not used & abstract and paused
    images = Images(zk)
    wait_for(lambda: all(images.ready_builds(i) for i in used), timeout=30,
             what="a ready build of %s" % sorted(used))
    for i in used:
        (bid, rec), = images.ready_builds(i).items()
        assert rec["formats"] == "qcow2"
        with open(os.path.join(deployment.dir, "images", "%s-%s.qcow2" % (i, bid))) as f:
            seen = json.load(f)
        assert seen["env"]["ELEMENTS_PATH"] == cfg["elements-dir"]
        assert "vm" in seen["elements"] and seen["env"]["DIB_CHECKSUM"] == "1"
    # paused images and those no provider uses (no formats) are not built
    # (as upstream)
    for d in cfg["diskimages"]:
        if d["name"] not in used:
            assert images.builds(d["name"]) == {}
    assert images.uploads(sorted(used)[0]) == []


def test_build_timeout(deployment, zk):
    cfg = builder_config(deployment, env={"FAKE_DIB_SLEEP": "30"},
                         diskimage={"img": {"build-timeout": 1}})
    path = deployment.write_config(cfg)
    start_builder(deployment, path)
    images = Images(zk)
    # dib-cmd would take 30 s: failed well before, it was killed
    failed = wait_for(lambda: [k for k, r in images.builds("img").items()
                               if r["state"] == "failed"], what="the timed-out build")
    log = os.path.join(deployment.dir, "build-logs", "img-%s.log" % failed[0])
    with open(log) as f:
        text = f.read()
    assert "fake-dib-cmd: building" in text and "Exit code" not in text  # as upstream


def test_formats_delete_after_upload_hook_and_stats(deployment, zk):
    from test_statsd import Receiver
    hook_out = os.path.join(deployment.dir, "hook-args")
    hook = os.path.join(deployment.dir, "hook.sh")
    with open(hook, "w") as f:
        f.write("#!/bin/sh\necho \"$@\" >> %s\n" % hook_out)
    os.chmod(hook, 0o755)
    cfg = builder_config(
        deployment, providers=("sim", "raw-cloud"),
        diskimage={"img": {"formats": ["vhd"], "keep-formats": ["vhd"],
                           "delete-after-upload": True}},
        provider={"sim": {"post-upload-hook": hook},
                  "raw-cloud": {"image-format": "raw"}})
    path = deployment.write_config(cfg)
    rx = Receiver()
    start_builder(deployment, path, env=rx.env())
    images = Images(zk)
    (bid, rec), = wait_for(lambda: images.ready_builds("img").items(), what="a build")
    assert rec["formats"] == "qcow2,raw,vhd"  # the providers' and its own, sorted
    ups = wait_for(lambda: len(images.ready_uploads("img")) == 2 and
                   images.ready_uploads("img"), what="two uploads")
    assert {u[1]: u[3]["format"] for u in ups} == {"sim": "qcow2", "raw-cloud": "raw"}
    # delete-after-upload: every provider has its format; vhd is kept
    base = os.path.join(deployment.dir, "images", "img-" + bid)
    wait_for(lambda: not os.path.exists(base + ".qcow2") and
             not os.path.exists(base + ".raw"), what="uploaded formats removed")
    assert os.path.exists(base + ".vhd")
    # the hook ran for sim only, with (provider, external id, file)
    sim = [u for u in ups if u[1] == "sim"][0]
    with open(hook_out) as f:
        assert f.read().split() == ["sim", sim[3]["external_id"], base + ".qcow2"]
    # upstream's builder metrics
    names = set()
    wait_for(lambda: names.update(rx.collect(0.5)) or all(
        k in names for k in ("nodepool.dib_image_build.img.qcow2.size",
                             "nodepool.dib_image_build.img.status.rc",
                             "nodepool.dib_image_build.img.status.last_build",
                             "nodepool.image_build_requests")), what="builder gauges")


def test_dib_image_delete_removes_the_build_everywhere(deployment, zk):
    cfg = builder_config(deployment)
    path = deployment.write_config(cfg)
    start_builder(deployment, path)
    images, store = Images(zk), Store(deployment)
    (old,) = wait_for(lambda: [u for u in images.ready_uploads("img")], what="upload 1")
    assert nodepool(path, "image-build", "img").returncode == 0
    wait_for(lambda: len(images.ready_uploads("img")) == 2, what="upload 2")
    r = nodepool(path, "dib-image-delete", "img-" + old[0])
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr
    wait_for(lambda: old[0] not in images.builds("img"), what="the build removed")
    assert old[3]["external_id"] not in store.images()
    assert len(store.images()) == 1 and len(images.ready_builds("img")) == 1
    wait_for(lambda: not [f for f in os.listdir(os.path.join(deployment.dir, "images"))
                          if old[0] in f], what="its local files removed")


def test_failed_upload_attempt_is_retried_in_place(deployment, zk):
    cfg = builder_config(deployment, provider={"sim": {"upload-failures": 2}})
    path = deployment.write_config(cfg)
    b = start_builder(deployment, path, extra=["--upload-workers", "1"])
    images = Images(zk)
    (up,) = wait_for(lambda: images.ready_uploads("img"), what="the upload")
    # the third attempt of the first upload record succeeded: no failed record
    assert up[2] == "0000000001" and len(images.uploads("img")) == 1
    out = b.output()
    assert "attempt 1/3" in out and "attempt 3/3" in out and "simulated error" in out


def test_stopped_builder_leaves_an_aborted_build_that_is_cleaned(deployment, zk):
    trace = os.path.join(deployment.dir, "dib-trace")
    cfg = builder_config(deployment, env={"FAKE_DIB_SLEEP": "30", "FAKE_DIB_TRACE": trace})
    path = deployment.write_config(cfg)
    b1 = start_builder(deployment, path)
    images = Images(zk)
    (orphan,) = wait_for(lambda: [k for k, r in images.builds("img").items()
                                  if r["state"] == "building"] and os.path.exists(trace),
                         what="a build in progress") and list(images.builds("img"))
    b1.stop()
    # the stop killed dib-cmd with its worker; the record stays building
    with open(trace) as f:
        (start,) = f.read().split("\n")[:1]
    dib_pid = int(start.split()[2])
    wait_for(lambda: not os.path.exists("/proc/%d" % dib_pid), what="dib-cmd gone")
    assert images.builds("img")[orphan]["state"] == "building"
    # the next builder removes the abandoned build and builds anew
    cfg["diskimages"][1]["env-vars"]["FAKE_DIB_SLEEP"] = "0"
    deployment.write_config(cfg)
    start_builder(deployment, path)
    wait_for(lambda: orphan not in images.builds("img") and images.ready_builds("img"),
             what="the aborted build removed, a new one ready")
