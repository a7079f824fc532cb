"""Images a launcher can trust (issue 21): its view of /nodepool/images
follows ZooKeeper's watch, so a request for a label whose upload became
ready a moment ago is served."""
import json
import queue

from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from builder_helpers import builder_config, start_builder
from conftest import wait_for
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
