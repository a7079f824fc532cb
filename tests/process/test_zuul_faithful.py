"""Issue 9's done-when test: requesters that do exactly what Zuul's code does
(tests/process/conftest.py `Zuul`: NodeRequest.toDict bodies, user_data
objects, Node.toDict write-backs with `id`, autohold and its release) run
jobs on static and fake nodes for a while. Throughout, sampled
continuously: max-servers and the tenant's resource limit hold, and no
held node is handed out. At the end every used node has been recycled,
and no process logged a "malformed" record."""
import threading
import time

from conftest import Zuul, kazoo_client, wait_for
from fakecloud import Cloud, fake_config

RUN_SECONDS = 20
MAX_SERVERS = 2
TENANT_MAX = 1  # servers of tenant t-lim


def config(deployment):
    cfg = fake_config(
        deployment,
        labels={"fake-small": {"cloud-image": "debian", "cores": 1, "ram": 1024}},
        provider={"region-name": "r1",
                  "cloud-images": [{"name": "debian", "image-id": "img-debian"}]},
        pool={"max-servers": MAX_SERVERS})
    cfg["labels"].append({"name": "static-small"})
    cfg["providers"].append({
        "name": "rack", "driver": "static",
        "pools": [{"name": "main", "nodes": [
            {"name": "host-a", "labels": ["static-small"], "host-key-checking": False},
            {"name": "host-b", "labels": ["static-small"], "host-key-checking": False},
        ]}]})
    cfg["tenant-resource-limits"] = [{"tenant-name": "t-lim", "max-servers": TENANT_MAX}]
    return cfg


class Run:
    """What the requesters and the sampler saw."""

    def __init__(self):
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.errors = []
        self.held_ids = set()  # every node id ever seen in state hold
        self.used = {}  # node id -> label, nodes a job ran on
        self.jobs = {"fake-small": 0, "static-small": 0}
        self.holds = []  # (Zuul, hold request id)
        self.samples = 0
        self.peak = {"sim": 0, "t-lim": 0}
        self.clients = []  # the requesters' ZooKeeper clients
        self.ndone = 0  # requesters finished

    def error(self, msg):
        with self.lock:
            self.errors.append(msg)


def sampler(zk_server, chroot, run):
    """Reads every node record, continuously, as a user watching would."""
    zk = kazoo_client(zk_server, chroot)
    z = Zuul(zk)
    try:
        while not run.stop.is_set():
            nodes = z.nodes()
            sim = [n for n in nodes.values() if n.get("provider") == "sim"]
            tenant = sum((n.get("resources") or {}).get("instances", 0)
                         for n in nodes.values() if n.get("tenant_name") == "t-lim")
            with run.lock:
                run.samples += 1
                run.peak["sim"] = max(run.peak["sim"], len(sim))
                run.peak["t-lim"] = max(run.peak["t-lim"], tenant)
                for nid, n in nodes.items():
                    if n.get("state") == "hold":
                        run.held_ids.add(nid)
            if len(sim) > MAX_SERVERS:
                run.error("max-servers exceeded: %s" % sorted(
                    (nid, n["state"]) for nid, n in nodes.items() if n.get("provider") == "sim"))
            if tenant > TENANT_MAX:
                run.error("tenant limit exceeded: %d servers of t-lim" % tenant)
            time.sleep(0.02)
    finally:
        zk.stop()
        zk.close()


def requester(zk_server, chroot, run, tenant, labels, hold_every=0):
    """One Zuul system running jobs one after another: request, accept
    (lock, in-use with user_data), the job, then return the nodes (used) or,
    every hold_every-th job, autohold them as a failed build would."""
    zk = kazoo_client(zk_server, chroot)
    run.clients.append(zk)
    zuul = Zuul(zk, tenant=tenant)
    k = 0
    try:
        while not run.stop.is_set():
            label = labels[k % len(labels)]
            k += 1
            rid = zuul.submit([label], job="job-%d" % k)
            try:
                req = zuul.wait_request(rid, timeout=30)
            except AssertionError as e:
                run.error("%s: %s" % (tenant, e))
                zuul.cancel(rid)
                return
            if req["state"] != "fulfilled":
                run.error("request %s %s" % (rid, req["state"]))
                return
            with run.lock:
                given_held = set(req["nodes"]) & run.held_ids
            if given_held:
                run.error("held nodes handed out: %s" % sorted(given_held))
            held = zuul.accept(rid)
            for nid, _ in held:
                n = zuul.node(nid)
                if n["user_data"] != {"zuul_system": zuul.system_id,
                                      "project_name": zuul.project} or n["id"] != nid:
                    run.error("node %s not as Zuul wrote it: %s" % (nid, n))
            time.sleep(0.3)  # the job
            with run.lock:
                run.jobs[label] += 1
                for nid, _ in held:
                    run.used[nid] = label
            if hold_every and k % hold_every == 0:
                hid = zuul.autohold_request(job="job-%d" % k, reason="debugging",
                                            node_expiration=3600)
                zuul.autohold(held, hid)
                with run.lock:
                    run.holds.append((zuul, hid, time.time()))
            else:
                zuul.finish(held)
    except Exception as e:  # noqa: BLE001 - reported as a test failure
        run.error("%s requester: %r" % (tenant, e))
    finally:
        with run.lock:
            run.ndone += 1


def releaser(run):
    """An operator's `zuul autohold-delete` of each hold 2 s after it was
    made (Zuul's deleteHoldRequest, by the Zuul that holds it); at the end,
    of every hold left, once the requesters are done."""
    while True:
        with run.lock:
            ending = run.ndone == 3
            due = [h for h in run.holds if ending or time.time() - h[2] > 2]
        for h in due:
            try:
                ok = h[0].release_hold(h[1])
            except Exception as e:  # noqa: BLE001
                run.error("release %s: %r" % (h[1], e))
                ok = True
            if ok:
                with run.lock:
                    run.holds.remove(h)
        with run.lock:
            if ending and not run.holds:
                return
        time.sleep(0.1)


def test_zuul_faithful_jobs_on_static_and_fake(deployment, zk_server, chroot, zuul):
    path = deployment.write_config(config(deployment))
    deployment.start_launcher("sim", path)
    deployment.start_launcher("rack", path)
    wait_for(lambda: len([n for n in zuul.nodes().values()
                          if n["provider"] == "rack" and n["state"] == "ready"]) == 2,
             what="2 static nodes")
    static_first = set(zuul.nodes())
    run = Run()
    threads = [
        threading.Thread(target=sampler, args=(zk_server, deployment.chroot, run)),
        threading.Thread(target=requester,
                         args=(zk_server, deployment.chroot, run, "t-lim", ["fake-small"])),
        threading.Thread(target=requester,
                         args=(zk_server, deployment.chroot, run, "t-open",
                               ["fake-small", "static-small"], 3)),
        threading.Thread(target=requester,
                         args=(zk_server, deployment.chroot, run, "t-open",
                               ["static-small"], 4)),
    ]
    threads.append(threading.Thread(target=releaser, args=(run,)))
    for t in threads:
        t.start()
    time.sleep(RUN_SECONDS)
    run.stop.set()
    for t in threads:
        t.join(60)
        assert not t.is_alive()
    for zk in run.clients:
        zk.stop()
        zk.close()
    assert run.errors == [], run.errors[:10]

    # jobs ran on both kinds, more than there are static slots (so static
    # hosts served again after recycling), and some nodes were held
    assert run.jobs["fake-small"] >= 3 and run.jobs["static-small"] >= 4, run.jobs
    assert run.held_ids, "no node was autoheld"
    assert run.samples > 100 and run.peak["sim"] >= 1 and run.peak["t-lim"] == TENANT_MAX
    # every node a job ran on (held ones after their release) is recycled
    wait_for(lambda: not set(run.used) & set(zuul.nodes()), timeout=30,
             what="every used node deleted: %s" % sorted(set(run.used) & set(zuul.nodes())))
    wait_for(lambda: len([n for n in zuul.nodes().values()
                          if n["provider"] == "rack" and n["state"] == "ready"]) == 2,
             what="static hosts ready again")
    now = zuul.nodes()
    assert not (set(now) & static_first & set(run.used))
    assert all(n["state"] == "ready" for n in now.values()), now
    # the leak cleanup (every second here) never took a node Zuul was
    # using for a leak
    assert Cloud(deployment).framework().get("leaked.instances", 0) == 0
    for p in deployment.procs:
        out = p.output()
        assert "leaked" not in out, [l for l in out.splitlines() if "leaked" in l]
        assert "malformed" not in out, [l for l in out.splitlines() if "malformed" in l]
        assert "kept verbatim" not in out, [l for l in out.splitlines() if "verbatim" in l]
