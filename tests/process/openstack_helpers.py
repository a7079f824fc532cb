"""Helpers for the OpenStack process tests: nodepool.yaml + simulator config
+ clouds.yaml for a deployment, ZooKeeper image records for diskimage
labels, and the "nothing left behind" check (every simulated server, port
and floating IP belongs to a node)."""
import copy
import os

import yaml

from conftest import wait_for
from operator_helpers import build_record, upload_record, write_build, write_upload
from ossim_fixture import OSSim, clouds_yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OPENDEV = os.path.join(TOP, "tests", "data", "configs", "opendev")


def load_opendev(name):
    with open(os.path.join(OPENDEV, name)) as f:
        return yaml.safe_load(f)


def for_test(cfg, deployment):
    """A copy of a production nodepool.yaml made runnable here: our
    ZooKeeper (added by the deployment), builder directories in the test's
    tmp, the builder's diskimages paused (uploads come from records the
    test writes), host-key-checking off in pools (the simulator's
    addresses have no sshd behind them), and 0.05 s between API calls where
    the provider sets no rate."""
    cfg = copy.deepcopy(cfg)
    cfg.pop("zookeeper-servers", None)
    cfg.pop("zookeeper-tls", None)
    cfg.pop("webapp", None)
    cfg["images-dir"] = os.path.join(deployment.dir, "images")
    cfg["elements-dir"] = os.path.join(deployment.dir, "elements")
    for d in cfg.get("diskimages") or []:
        d["pause"] = True
    for p in cfg.get("providers") or []:
        for pool in p.get("pools") or []:
            pool["host-key-checking"] = False
        # a provider without `rate` makes one call a second per API
        # (upstream's default): ~20 launches take a minute; keep the test
        # brisk (the rates the file sets are kept)
        p.setdefault("rate", 0.05)
    return cfg


def sim_for(cfg, tmp, boot_delay=0.2, tweak=None):
    """Start a simulator serving every openstack provider of cfg (one
    region per provider), with one Glance image per diskimage the provider
    lists. Returns (sim, where, image ids {(provider, diskimage): id})."""
    scfg, where = clouds_yaml.sim_config_from_nodepool(cfg, boot_delay=boot_delay)
    ids = {}
    for p in cfg.get("providers") or []:
        if p.get("driver", "openstack") != "openstack":
            continue
        cloud, region = where[p["name"]]
        for di in p.get("diskimages") or []:
            # the simulator holds an active image per provider diskimage
            ids[(p["name"], di["name"])] = clouds_yaml.diskimage_image_id(cloud, region,
                                                                           di["name"])
    if tweak:
        tweak(scfg)
    sim = OSSim(tmp, scfg).start()
    return sim, where, ids


def write_clouds(sim, tmp, monkeypatch, **kw):
    path = os.path.join(str(tmp), "clouds.yaml")
    sim.write_clouds_yaml(path, **kw)
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", path)
    return path


def write_uploads(zk, cfg, ids):
    """READY builds and uploads, as the builder writes them, for every
    provider diskimage, naming the simulator's image."""
    builds = {}
    for p in cfg.get("providers") or []:
        for di in p.get("diskimages") or []:
            name = di["name"]
            if name not in builds:
                builds[name] = write_build(zk, name, build_record())
            write_upload(zk, name, builds[name], p["name"],
                         upload_record(external_id=ids[(p["name"], name)],
                                       external_name="%s-1700000000" % name))


def servable_labels(cfg):
    """Labels some pool with room (max-servers > 0, or unset) serves."""
    out = set()
    for p in cfg.get("providers") or []:
        for pool in p.get("pools") or []:
            if pool.get("max-servers", 1) == 0:
                continue
            for lab in pool.get("labels") or []:
                out.add(lab["name"])
    return out


def leftovers(sim, zuul):
    """What the simulator holds that no node accounts for: servers whose id
    is no node's external_id, compute ports of no existing server, and
    floating IPs not on such a port."""
    nodes = zuul.nodes()
    ext = {n.get("external_id") for n in nodes.values()}
    servers = [s for s in sim.servers() if not s.get("deleting")]
    sids = {s["id"] for s in servers}
    bad = ["server %s (%s, metadata %s)" % (s["id"], s["status"], s["metadata"])
           for s in servers if s["id"] not in ext]
    ports = sim.ports()
    good_ports = set()
    for p in ports:
        owner = p.get("device_owner") or ""
        if owner.startswith("compute:") or owner == "":
            if p.get("device_id") in sids:
                good_ports.add(p["id"])
            else:
                bad.append("port %s (%s, device %r)" % (p["id"], p["status"],
                                                        p.get("device_id")))
    for f in sim.floating_ips():
        if f.get("port_id") not in good_ports:
            bad.append("floating ip %s (port %r)" % (f["floating_ip_address"],
                                                     f.get("port_id")))
    return bad


def wait_clean(sim, zuul, timeout=60):
    """Wait until the simulator holds nothing without a node."""
    last = []

    def ok():
        last[:] = leftovers(sim, zuul)
        return not last
    try:
        wait_for(ok, timeout, interval=0.2, what="nothing left behind")
    except AssertionError:
        raise AssertionError("left behind: %s" % last)
