"""Images a launcher can trust (issue 21): its view of /nodepool/images
follows ZooKeeper's watch, so a request for a label whose upload became
ready a moment ago is served."""
import json
import os
import queue
import subprocess

import pytest

from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from builder_helpers import builder_config, start_builder
from conftest import TOP, wait_for
from fakecloud import fake_config

N = 20


def test_request_the_moment_an_upload_is_ready_is_served(deployment, zk, zuul):
    """20 diskimages, each serving its own label: the moment the first
    upload of each turns ready (a kazoo data watch, as Zuul's own caches
    would see it), Zuul asks for a node of its label. Every request is
    fulfilled, from that upload. The cleanup timer is a minute: a view
    refreshed by a poll would decline them ("images are not available")."""
    names = ["img%02d" % i for i in range(N)]
    cfg = builder_config(deployment, images=names)
    fc = fake_config(deployment, labels={"%s-label" % i: {"diskimage": i} for i in names},
                     provider=cfg["providers"][0])
    cfg["providers"][0] = fc["providers"][0]
    cfg["nodepoold"] = {"cleanup-interval": 60, "delete-interval": 0.5}
    path = deployment.write_config(cfg)
    deployment.start_launcher("sim", path)
    wait_for(lambda: zk.exists("/nodepool/components/pool") and
             zk.get_children("/nodepool/components/pool"), what="the launcher's pool")

    ready = queue.Queue()
    seen, watches = set(), []

    def watch_upload(image, upath):
        def changed(data, stat):
            if data and json.loads(data).get("state") == "ready" and image not in seen:
                seen.add(image)
                ready.put((image, upath))
                return False
            return True
        watches.append(DataWatch(zk, upath, changed))

    def watch_builds(image):
        known = set()

        def builds(children):
            for b in children:
                if b != "lock" and b not in known:
                    known.add(b)
                    watch_upload(image, "/nodepool/images/%s/builds/%s/providers/sim/"
                                 "images/0000000001" % (image, b))
        base = "/nodepool/images/%s/builds" % image
        zk.ensure_path(base)
        watches.append(ChildrenWatch(zk, base, builds))

    for i in names:
        watch_builds(i)
    start_builder(deployment, path, extra=["--build-workers", "2"])

    asked = []
    for _ in range(N):
        image, upath = ready.get(timeout=120)
        asked.append((image, upath, zuul.submit(["%s-label" % image])))
    served = 0
    for image, upath, rid in asked:
        req = zuul.wait_request(rid)
        assert req["state"] == "fulfilled", (image, req)
        node = zuul.node(req["nodes"][0])
        assert node["image_id"] == upath, node
        served += 1
    assert served == N


def test_builder_acts_on_a_build_request_at_once(deployment, zk):
    """The builder's snapshot follows the watch, not its timer: with a
    pass an hour apart, `nodepool image-build` still starts a build."""
    from builder_helpers import Images
    from operator_helpers import nodepool
    cfg = builder_config(deployment)
    path = deployment.write_config(cfg)
    start_builder(deployment, path, extra=["--interval", "3600"])
    images = Images(zk)
    (first,) = wait_for(lambda: list(images.ready_builds("img")), what="the first build")
    assert nodepool(path, "image-build", "img").returncode == 0
    wait_for(lambda: len(images.ready_builds("img")) == 2, what="the requested build")
    wait_for(lambda: not zk.exists("/nodepool/images/img/request-build"),
             what="the request removed")


@pytest.fixture
def sshd(tmp_path):
    d = str(tmp_path / "sshd")
    port = int(subprocess.check_output(
        ["sh", os.path.join(TOP, "tests/sshd-fixture.sh"), "start", d]).decode().split()[-1])
    yield port, d
    subprocess.call(["sh", os.path.join(TOP, "tests/sshd-fixture.sh"), "stop", d])


def upload_path(u):
    return "/nodepool/images/img/builds/%s/providers/sim/images/%s" % (u[0], u[2])


def test_validation_before_service(deployment, zk, zuul, sshd):
    """`validate: true`: each new upload serves only once a node booted
    from it passed keyscan and its validate-command over SSH (a real
    sshd). A good image passes and serves; an image whose boot fails, one
    whose keyscan fails, and one whose command exits non-zero are never
    handed to a request: the previous upload serves throughout. The
    builder deletes each failed upload, from the cloud and from ZooKeeper,
    notes the reason on the build record and uploads the build again, three
    tries in all; a try that passes (the command fails once) serves, and
    `nodepool image-list` shows why the one before it failed."""
    from builder_helpers import Images, Store
    from operator_helpers import nodepool
    cfg = builder_config(deployment, diskimage={"img": {"validate": True}})
    fc = fake_config(deployment, labels={"img-label": {"diskimage": "img"}},
                     provider=cfg["providers"][0])
    cfg["providers"][0] = fc["providers"][0]
    prov = cfg["providers"][0]
    port, sshd_dir = sshd
    broken = os.path.join(deployment.dir, "broken-image")
    prov.update({"fake-ssh-port": port, "boot-timeout": 5, "launch-retries": 1})
    prov["diskimages"][0].update({
        "username": "root", "validate-key": os.path.join(sshd_dir, "client_key"),
        # fails once after the test creates `broken`: the check removes it
        "validate-command": "if test -e %s; then rm %s; exit 1; fi" % (broken, broken),
        "validate-timeout": 30})
    path = deployment.write_config(cfg)
    deployment.start_launcher("sim", path)
    start_builder(deployment, path)
    images, store = Images(zk), Store(deployment)

    def verdict(u):
        return u[3].get("validation", {}).get("state")

    (good,) = wait_for(lambda: [u for u in images.ready_uploads("img")
                                if verdict(u) == "passed"], timeout=60,
                       what="the first upload validated")
    served = []

    def serve(also=None):
        """A node booted from the good upload (or, with also, from an
        upload of that build); Zuul runs its job and returns it. Returns
        the node's image_id."""
        rid = zuul.submit(["img-label"])
        req = zuul.wait_request(rid, timeout=60)
        assert req["state"] == "fulfilled", req
        n = zuul.node(req["nodes"][0])
        assert n["image_id"] == upload_path(good) or (
            also and n["image_id"].startswith("/nodepool/images/img/builds/%s/" % also)), n
        served.append(req["nodes"][0])
        zuul.finish(zuul.accept(rid))
        return n["image_id"]

    def failures(build):
        return images.builds("img").get(build, {}).get("validation_failures", {}).get("sim")

    for meta, why in (({"fake-boot": "fail"}, "validation boot failed"),
                      ({"fake-ssh-port": "1"}, "validation boot failed"),
                      ({}, "validation command exited 1")):
        prov["diskimages"][0]["meta"] = dict({"owner": "test"}, **meta)
        if not meta:
            open(broken, "w").close()  # this image's check fails, once
        deployment.write_config(cfg)
        before = set(images.builds("img"))
        assert nodepool(path, "image-build", "img").returncode == 0

        def noted():
            new = [b for b in images.builds("img") if b not in before]
            f = new and failures(new[0])
            if not f:
                serve()  # the previous upload serves meanwhile
            return f and (new[0], f)
        build, first = wait_for(noted, timeout=90, interval=0.5,
                                what="the failed validation noted")
        assert first["count"] >= 1 and first["reason"].startswith(why), first
        # the bad upload is gone, from ZooKeeper and from the cloud
        wait_for(lambda: serve(also=None if meta else build) and (
            first["upload"] not in {u[2] for u in images.uploads("img", build=build)} and
            first["external_id"] not in store.images()), timeout=60, interval=0.5,
            what="the failed upload deleted")
        if meta:
            # it fails again: three tries in all, each deleted, then the
            # builder waits for the next build
            f = wait_for(lambda: serve() and (
                (lambda f: f if f["count"] == 3 and not images.uploads(
                    "img", build=build) else None)(failures(build))),
                timeout=120, interval=0.5, what="three tries")
            assert f["reason"].startswith(why), f
            assert good[3]["external_id"] in store.images()
            continue
        # a later try passes and serves, and image-list says why the try
        # before it failed
        (retry,) = wait_for(lambda: serve(also=build) and [
            u for u in images.ready_uploads("img") if u[0] == build and
            verdict(u) == "passed"], timeout=90, interval=0.5, what="a try that passes")
        assert retry[3]["retry_of"]["attempt"] == 2 and not os.path.exists(broken), retry
        assert retry[3]["retry_of"]["reason"].startswith(why), retry
        wait_for(lambda: serve(also=build) == upload_path(retry), timeout=60,
                 what="the passed try serving")
        r = nodepool(path, "image-list")
        rows = [line for line in r.stdout.splitlines() if retry[2] in line and build in line]
        assert rows and "validation failed: " + why in rows[0], r.stdout
        assert "serving" in rows[0] and "try %d" % retry[3]["retry_of"]["attempt"] in rows[0], \
            rows[0]
    assert len(served) >= 3


def test_rollback_after_failing_launches(deployment, zk, zuul):
    """rollback-after: 2. The newest upload starts failing every launch
    (its servers go to ERROR): after 2 failed launches in a row the
    launcher boots the previous upload again, says so on /metrics, and
    `nodepool image-list` shows which upload serves. No request fails
    beyond those 2."""
    from builder_helpers import Images
    from operator_helpers import nodepool
    from test_web import get
    cfg = builder_config(deployment)
    fc = fake_config(deployment, labels={"img-label": {"diskimage": "img"}},
                     provider=cfg["providers"][0])
    cfg["providers"][0] = fc["providers"][0]
    prov = cfg["providers"][0]
    prov["launch-retries"] = 1
    prov["diskimages"][0]["rollback-after"] = 2
    path = deployment.write_config(cfg)
    deployment.start_launcher("sim", path)
    start_builder(deployment, path)
    images = Images(zk)
    (first,) = wait_for(lambda: images.ready_uploads("img"), what="the first upload")

    def ask():
        rid = zuul.submit(["img-label"])
        req = zuul.wait_request(rid, timeout=60)
        if req["state"] != "fulfilled":
            return None
        return zuul.node(req["nodes"][0])["image_id"]

    assert ask() == upload_path(first)
    prov["diskimages"][0]["meta"] = {"owner": "test", "fake-boot": "fail"}
    deployment.write_config(cfg)
    assert nodepool(path, "image-build", "img").returncode == 0
    (bad,) = wait_for(lambda: [u for u in images.ready_uploads("img") if u[0] != first[0]],
                      what="the newest upload")
    outcomes = [ask() for _ in range(6)]
    failed = outcomes.count(None)
    assert failed == 2, outcomes
    assert outcomes[failed:] == [upload_path(first)] * (6 - failed), outcomes
    rec = [u for u in images.uploads("img") if u[0] == bad[0]][0][3]
    assert rec["state"] == "ready" and "2 launches" in rec["rollback"]["reason"], rec
    r = nodepool(path, "image-list")
    line = {l.split("|")[1].strip(): l for l in r.stdout.splitlines() if l.startswith("| ")}
    assert "rolled back: 2 launches" in line[bad[0]], r.stdout
    assert "serving" in line[first[0]], r.stdout
    text = wait_for(lambda: (lambda t: t if 'nodepool_image_rollbacks_total{provider="sim",'
                             'image="img"} 1' in t else None)(
        get(deployment.web_port, "/metrics")[2]), what="the rollback on /metrics")
    assert text


def alien_rows(path, env, *args):
    """`nodepool alien-image-list` rows as (provider, name, image id)."""
    from conftest import bin_path
    r = subprocess.run([bin_path("nodepool"), "-c", path, "alien-image-list"] + list(args),
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0 and "Sanitizer" not in r.stderr, r.stderr
    assert "cannot" not in r.stderr and "listing alien" not in r.stderr, r.stderr
    return sorted(tuple(c.strip() for c in line.strip("|").split("|"))
                  for line in r.stdout.splitlines()[3:] if line.startswith("|"))


def alien_setup(zk, provider, make_image):
    """Three images in the cloud: one with its upload record in ZooKeeper,
    one tagged by Nodepool without a record (left by a killed upload), one
    that is not Nodepool's. Returns (known id, alien id, alien name)."""
    from operator_helpers import build_record, upload_record, write_build, write_upload
    bid = write_build(zk, "img", build_record(formats="qcow2,raw"))
    uid = write_upload(zk, "img", bid, provider, upload_record(state="uploading"))
    tags = {"nodepool_build_id": bid, "nodepool_upload_id": uid,
            "nodepool_provider_name": provider}
    known = make_image("img-known", tags)
    zk.set("/nodepool/images/img/builds/%s/providers/%s/images/%s" % (bid, provider, uid),
           json.dumps(upload_record(external_id=known, external_name="img-known")).encode())
    alien = make_image("img-alien", dict(tags, nodepool_upload_id="%010d" % (int(uid) + 1)))
    make_image("someone-elses", {"team": "other"})
    return known, alien


def test_alien_image_list_openstack(deployment, zk, tmp_path, monkeypatch):
    """alien-image-list against the OpenStack simulator (Glance v2); then
    the launcher's leak cleanup deletes the alien image through the same
    listing."""
    from openstack_helpers import write_clouds
    from ossim_fixture import OSSim
    sim = OSSim(tmp_path, {"clouds": {"simc": {"regions": {"R1": {
        "flavors": [{"name": "small", "ram": 2048, "vcpus": 2}]}}}}}).start()
    try:
        write_clouds(sim, tmp_path, monkeypatch)
        cfg = builder_config(deployment, providers=())
        cfg["providers"] = [{
            "name": "os1", "cloud": "simc", "region-name": "R1", "rate": 0.001,
            "diskimages": [{"name": "img"}],
            "pools": [{"name": "main", "labels": [
                {"name": "img-label", "diskimage": "img", "flavor-name": "small"}]}]}]
        path = deployment.write_config(cfg)

        def make(name, props):
            (img,) = sim.ctl("POST", "/images", {"image": {
                "name": name, "visibility": "private", "properties": props}})["images"]
            return img["id"]
        known, alien = alien_setup(zk, "os1", make)
        assert alien_rows(path, dict(os.environ)) == [("os1", "img-alien", alien)]
        assert alien_rows(path, dict(os.environ), "os1") == [("os1", "img-alien", alien)]
        # the launcher's leak cleanup finds it through the image listing
        # (two passes in a row), and leaves the one ZooKeeper knows
        deployment.start_launcher("os1", path)
        wait_for(lambda: alien not in {i["id"] for i in sim.images()}, timeout=60,
                 what="the alien image deleted by leak cleanup")
        ids = {i["id"] for i in sim.images()}
        assert known in ids and len(ids) == 3, ids  # known, someone else's, the cloud's
        assert alien_rows(path, dict(os.environ)) == []
    finally:
        sim.stop()


def test_alien_image_list_aws(deployment, zk, tmp_path):
    from awssim_fixture import AwsSim
    sim = AwsSim(tmp_path, {"regions": {"eu-west-1": {}}}).start()
    try:
        cfg = builder_config(deployment, providers=())
        cfg["providers"] = [{
            "name": "ec2", "driver": "aws", "region-name": "eu-west-1", "rate": 100,
            "diskimages": [{"name": "img", "username": "zuul"}],
            "pools": [{"name": "main", "labels": [
                {"name": "img-label", "diskimage": "img", "instance-type": "t3.small",
                 "key-name": "zuul"}]}]}]
        path = deployment.write_config(cfg)

        def make(name, tags):
            return sim.ctl("POST", "/images", {"name": name, "region": "eu-west-1",
                                               "tags": tags})["id"]
        known, alien = alien_setup(zk, "ec2", make)
        env = sim.env()
        env["HOME"] = deployment.dir
        assert alien_rows(path, env) == [("ec2", "img-alien", alien)]
    finally:
        sim.stop()


def test_alien_image_list_azure(deployment, zk, tmp_path):
    """alien-image-list against the Azure simulator (Images - List By
    Resource Group): an image is named by its name, its tags are Azure's."""
    from azuresim_fixture import AzureSim
    sim = AzureSim(tmp_path, {}).start()
    try:
        cfg = builder_config(deployment, providers=())
        cfg["providers"] = [{
            "name": "az", "driver": "azure", "auth-path": sim.auth_path, "rate": 100,
            "location": "centralus", "resource-group": "nodepool",
            "resource-group-location": "centralus",
            "subnet-id": "/subscriptions/c35cf7df-ed75-4c85-be00-535409a85120/resourceGroups/"
                         "nodepool/providers/Microsoft.Network/virtualNetworks/NodePool/"
                         "subnets/default",
            "diskimages": [{"name": "img", "username": "zuul"}],
            "pools": [{"name": "main", "max-servers": 5, "labels": [
                {"name": "img-label", "diskimage": "img",
                 "hardware-profile": {"vm-size": "Standard_B1s"}}]}]}]
        path = deployment.write_config(cfg)

        def make(name, tags):
            return sim.ctl("POST", "/images", {"name": name, "resource_group": "nodepool",
                                               "tags": tags})["name"]
        known, alien = alien_setup(zk, "az", make)
        env = dict(os.environ, **sim.env())
        env["HOME"] = deployment.dir
        assert alien_rows(path, env) == [("az", "img-alien", alien)]
        assert alien_rows(path, env, "az") == [("az", "img-alien", alien)]
    finally:
        sim.stop()


def test_alien_image_list_ibmvpc(deployment, zk, tmp_path):
    """alien-image-list against the IBM VPC simulator (GET /images): IBM
    VPC images carry no tags; Nodepool's uploads are those in the resource
    group npimages_<provider>."""
    from ibmvpcsim_fixture import IbmVpcSim
    from test_ibmvpc import ibm_builder_config
    sim = IbmVpcSim(tmp_path, {}).start()
    try:
        path = deployment.write_config(ibm_builder_config(deployment, sim))
        sim.ctl("POST", "/resource_groups", {"name": "npimages_ibm"})

        def make(name, tags):
            rg = "npimages_ibm" if "nodepool_provider_name" in tags else "Default"
            return sim.ctl("POST", "/images", {"name": name, "resource_group": rg})["id"]
        known, alien = alien_setup(zk, "ibm", make)
        env = dict(os.environ, **sim.env())
        env["HOME"] = deployment.dir
        assert alien_rows(path, env) == [("ibm", "img-alien", alien)]
        assert alien_rows(path, env, "ibm") == [("ibm", "img-alien", alien)]
    finally:
        sim.stop()


def test_alien_image_list_gce(deployment, zk, tmp_path):
    """alien-image-list against the GCE simulator (images.list): an image
    is named by its name, its labels are its tags. Upstream's gce test
    config; Nodepool uploads nothing there, an image labelled by it is
    still listed."""
    from test_gce import PROVIDER, UPSTREAM, load, start_sim
    sim = start_sim(tmp_path, project="gcloud-project")
    try:
        path = deployment.write_config(load(UPSTREAM, 22))

        def make(name, labels):
            return sim.ctl("POST", "/images", {"project": "gcloud-project", "name": name,
                                               "labels": labels})["name"]
        known, alien = alien_setup(zk, PROVIDER, make)
        env = dict(os.environ, **sim.env())
        env["HOME"] = deployment.dir
        assert alien_rows(path, env) == [(PROVIDER, "img-alien", alien)]
        assert alien_rows(path, env, PROVIDER) == [(PROVIDER, "img-alien", alien)]
    finally:
        sim.stop()
