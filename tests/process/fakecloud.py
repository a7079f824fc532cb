"""Helpers for the process tests of the state-machine framework with the
`fake` driver (drivers/fake): a nodepool.yaml for a fake provider and a
reader of the simulated cloud's state-file (servers, volumes, counters,
and the framework's counters), which the worker rewrites as its cloud
changes."""
import json
import os
import signal
import time

from conftest import wait_for

FAST = {"nodepoold": {"cleanup-interval": 1, "delete-interval": 0.5}}


def fake_config(deployment, labels=None, provider=None, pool=None, top=None,
                name="sim", label_top=None):
    """labels: {label name: extra pool-label keys}; provider/pool: extra
    keys; label_top: {label name: extra top-level label keys (min-ready)}."""
    labels = labels or {"small": {}}
    pool_cfg = {"name": "main",
                "labels": [dict({"name": l}, **extra) for l, extra in labels.items()]}
    pool_cfg.update(pool or {})
    prov = {"name": name, "driver": "fake", "launch-retries": 3,
            "state-file": os.path.join(deployment.dir, "cloud-%s.json" % name),
            "pools": [pool_cfg]}
    prov.update(provider or {})
    cfg = {"labels": [dict({"name": l}, **(label_top or {}).get(l, {})) for l in labels],
           "providers": [prov]}
    cfg.update(FAST)
    for k, v in (top or {}).items():
        cfg[k] = v
    return cfg


class Cloud:
    """The simulated cloud as its state-file shows it."""

    def __init__(self, deployment, name="sim"):
        self.path = os.path.join(deployment.dir, "cloud-%s.json" % name)

    def state(self):
        try:
            with open(self.path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def instances(self, managed_only=True):
        s = self.state() or {"instances": []}
        return [i for i in s["instances"] if not (managed_only and i["unmanaged"])]

    def volumes(self):
        return (self.state() or {"volumes": []})["volumes"]

    def counters(self):
        return (self.state() or {"counters": {}})["counters"]

    def framework(self):
        return (self.state() or {"framework": {}})["framework"]

    def by_node(self):
        return {i["metadata"].get("nodepool_node_id"): i for i in self.instances()}


def nodes_in(zuul, *states):
    return {nid: n for nid, n in zuul.nodes().items() if n["state"] in states}


def mark_for_deletion(zk, zuul, nid):
    """What `nodepool delete` does: lock the node, set it deleting, unlock."""
    lock = zk.Lock("/nodepool/nodes/%s/lock" % nid)
    assert lock.acquire(timeout=10)
    n = zuul.node(nid)
    n["state"] = "deleting"
    n["state_time"] = time.time()
    zuul.store_node(nid, n)
    lock.release()


def nothing_left_behind(zuul, cloud, timeout=20):
    """No node building, allocated or deleting, and the cloud holds
    exactly the instances of the nodes ZooKeeper knows."""
    def ok():
        nodes = zuul.nodes()
        if any(n["state"] in ("init", "building", "deleting", "aborted", "failed")
               for n in nodes.values()):
            return False
        if any(n.get("allocated_to") for n in nodes.values() if n["state"] == "ready"):
            return False
        inst = cloud.by_node()
        return set(inst) == set(nodes) and all(
            nodes[nid].get("external_id") == i["id"] for nid, i in inst.items())
    wait_for(ok, timeout, what="nothing left behind: %s / %s" % (
        sorted(zuul.nodes()), sorted(cloud.by_node())))


def dump(proc, marker="state machines"):
    """SIGUSR2 the worker and return the dump it logs."""
    before = len(proc.output())
    proc.signal(signal.SIGUSR2)
    out = wait_for(lambda: marker in proc.output()[before:] and
                   "event loop lag" in proc.output()[before:] and proc.output()[before:],
                   what="state dump")
    return out
