"""Helpers for process tests of nodepool-builder: a nodepool.yaml whose
diskimages build with the stand-in dib-cmd (tests/dib/fake-dib-cmd) and
whose fake providers share an image store (the fake driver's image-dir),
a builder started on its own, and what an operator or Zuul would read
back: ZooKeeper's build and upload records, the cloud's images, the
builder's files."""
import json
import os

from kazoo.exceptions import NoNodeError

from conftest import TOP, Proc, bin_path, wait_for

FAKE_DIB = os.path.join(TOP, "tests", "dib", "fake-dib-cmd")
# brisk passes for tests (the defaults are upstream's 10 s and 60 s)
FAST_BUILDER = ["--interval", "0.2", "--cleanup-interval", "0.5",
                "--upload-retry-delay", "0.2"]


def builder_config(deployment, images=("img",), providers=("sim",), env=None,
                   diskimage=None, provider=None, top=None, store="cloud"):
    """A builder's nodepool.yaml: each image a child of an abstract
    `base` (elements and env-vars merged), built by the stand-in; each
    fake provider uses every image and serves a label <image>-label."""
    d = deployment.dir
    os.makedirs(os.path.join(d, store), exist_ok=True)
    base = {"name": "base", "abstract": True, "elements": ["debian-minimal"],
            "env-vars": {"DIB_BASE_VAR": "from-base"}, "release": "12",
            "dib-cmd": FAKE_DIB}
    dis = [base]
    for i in images:
        di = {"name": i, "parent": "base", "elements": ["vm", "simple-init"],
              "env-vars": dict({"DIB_CHILD_VAR": i}, **(env or {}))}
        di.update((diskimage or {}).get(i, {}))
        dis.append(di)
    provs = []
    for p in providers:
        pr = {"name": p, "driver": "fake", "image-dir": os.path.join(d, store),
              "diskimages": [{"name": i, "meta": {"owner": "test"}} for i in images],
              "pools": [{"name": "main", "labels": [
                  {"name": "%s-label" % i, "diskimage": i} for i in images]}]}
        pr.update((provider or {}).get(p, {}))
        provs.append(pr)
    cfg = {"images-dir": os.path.join(d, "images"),
           "build-log-dir": os.path.join(d, "build-logs"),
           "labels": [{"name": "%s-label" % i} for i in images],
           "diskimages": dis, "providers": provs,
           "nodepoold": {"cleanup-interval": 1, "delete-interval": 0.5}}
    cfg.update(top or {})
    return cfg


def start_builder(deployment, config_path, extra=(), name="builder", env=None):
    log = os.path.join(deployment.dir, "%s-%d.log" % (name, len(deployment.procs)))
    p = Proc([bin_path("nodepool-builder"), "-c", config_path] + FAST_BUILDER + list(extra),
             log, env=env)
    deployment.procs.append(p)
    return p


def children(pid):
    """Pids of the processes whose parent is pid (the builder's workers)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if int(st.rsplit(")", 1)[1].split()[1]) == pid:
            out.append((int(d), [c.decode() for c in cmd if c]))
    return out


def workers(pid, kind):
    return [p for p, cmd in children(pid) if "--worker" in cmd and kind in cmd]


class Images:
    """/nodepool/images as the builder leaves it, read with kazoo."""

    def __init__(self, zk):
        self.zk = zk

    def _get(self, path):
        try:
            data, _ = self.zk.get(path)
        except NoNodeError:
            return None
        return json.loads(data) if data else {}

    def _children(self, path):
        try:
            return sorted(c for c in self.zk.get_children(path) if c != "lock")
        except NoNodeError:
            return []

    def builds(self, image):
        out = {}
        for b in self._children("/nodepool/images/%s/builds" % image):
            rec = self._get("/nodepool/images/%s/builds/%s" % (image, b))
            if rec is not None:
                out[b] = rec
        return out

    def ready_builds(self, image):
        return {b: r for b, r in self.builds(image).items() if r.get("state") == "ready"}

    def uploads(self, image, build=None, provider=None):
        """[(build, provider, upload id, record)]"""
        out = []
        for b in ([build] if build else self._children("/nodepool/images/%s/builds" % image)):
            base = "/nodepool/images/%s/builds/%s/providers" % (image, b)
            for p in ([provider] if provider else self._children(base)):
                for u in self._children("%s/%s/images" % (base, p)):
                    rec = self._get("%s/%s/images/%s" % (base, p, u))
                    if rec is not None:
                        out.append((b, p, u, rec))
        return out

    def ready_uploads(self, image, provider=None):
        return [u for u in self.uploads(image, provider=provider)
                if u[3].get("state") == "ready"]


class Store:
    """The fake clouds' shared image store (image-dir)."""

    def __init__(self, deployment, store="cloud"):
        self.dir = os.path.join(deployment.dir, store)

    def images(self):
        out = {}
        for f in os.listdir(self.dir):
            if f.endswith(".json"):
                try:
                    with open(os.path.join(self.dir, f)) as fh:
                        rec = json.load(fh)
                except (OSError, ValueError):
                    continue
                out[rec["id"]] = rec
        return out

