"""The state-machine framework against a misbehaving simulated cloud
(reference 2.5, 2.6): launch retries that delete the failed attempt's
instance first, launch-timeout, boot-timeout with the console log, quota
errors (abort, relaunch), cloud limits minus unmanaged usage, delete
errors, leaked instances and volumes, and nodescan against a real sshd."""
import os
import signal
import subprocess

import pytest

from conftest import TOP, wait_for
from fakecloud import Cloud, fake_config


def test_failed_boot_is_retried_after_deleting_its_instance(deployment, zuul):
    cfg = fake_config(deployment, provider={"boot-failures": 2, "launch-retries": 3})
    p = deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    rid = zuul.submit(["small"])
    req = zuul.wait_request(rid)
    assert req["state"] == "fulfilled"
    (nid,) = req["nodes"]
    node = zuul.node(nid)
    wait_for(lambda: cloud.counters().get("creates") == 3 and
             cloud.counters().get("deletes") == 2, what="3 creates")
    assert cloud.counters()["boot_errors"] == 2
    # only the third attempt's instance is left, and it is the node's
    wait_for(lambda: [i["id"] for i in cloud.instances()] == [node["external_id"]],
             what="one instance")
    wait_for(lambda: cloud.framework().get("launches.ready") == 1, what="counted")
    fw = cloud.framework()
    assert fw["launches.attempts_failed"] == 2 and fw["launches.unwound"] == 2
    out = p.output()
    assert "launch attempt 1/3 for node %s failed: the server went to ERROR" % nid in out
    assert "launch attempt 2/3 for node %s failed" % nid in out


def test_launch_fails_when_retries_are_spent(deployment, zuul):
    cfg = fake_config(deployment, provider={"failure-rate": 1, "launch-retries": 2})
    deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    pool = wait_for(lambda: zuul.pools(), what="pool")[0]
    rid = zuul.submit(["small"])
    req = zuul.wait_request(rid)
    assert req["state"] == "failed" and req["declined_by"] == [pool["id"]]
    # the failed node and its instance are deleted
    wait_for(lambda: zuul.nodes() == {} and cloud.counters().get("creates") == 2 and
             cloud.instances() == [] and cloud.volumes() == [], what="failed node cleaned up")
    assert cloud.counters()["boot_errors"] == 2


def test_create_errors_are_retried(deployment, zuul):
    cfg = fake_config(deployment, provider={"create-error-rate": 0.5, "seed": 7,
                                            "launch-retries": 10})
    deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    rids = [zuul.submit(["small"]) for _ in range(6)]
    for rid in rids:
        assert zuul.wait_request(rid)["state"] == "fulfilled"
    wait_for(lambda: len(cloud.instances()) == 6, what="6 instances")
    wait_for(lambda: cloud.counters()["creates"] == 6 + cloud.counters()["create_errors"],
             what="counters")
    c = cloud.counters()
    assert c["create_errors"] > 0 and c["creates"] == 6 + c["create_errors"]
    assert sorted(i["id"] for i in cloud.instances()) == sorted(
        n["external_id"] for n in zuul.nodes().values())


def test_launch_timeout(deployment, zuul):
    cfg = fake_config(deployment, provider={"never-ready-rate": 1, "launch-timeout": 1,
                                            "launch-retries": 2})
    p = deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    rid = zuul.submit(["small"])
    req = zuul.wait_request(rid, timeout=30)
    assert req["state"] == "failed"
    assert "timed out after 1 s (state building)" in p.output()
    wait_for(lambda: zuul.nodes() == {} and cloud.counters().get("creates") == 2 and
             cloud.instances() == [], what="cleaned up")


def test_boot_timeout_logs_the_console(deployment, zuul):
    """host-key-checking on, and nothing listens where the instance says
    it is: the nodescan fails at boot-timeout; the console log is shown."""
    s = __import__("socket").socket()
    s.bind(("127.0.0.1", 0))
    closed = s.getsockname()[1]
    s.close()
    cfg = fake_config(deployment,
                      labels={"small": {"host-key-checking": True, "console-log": True}},
                      provider={"fake-ssh-port": closed, "boot-timeout": 1,
                                "launch-retries": 1})
    p = deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    rid = zuul.submit(["small"])
    req = zuul.wait_request(rid, timeout=30)
    assert req["state"] == "failed"
    out = p.output()
    assert "nodescan of i-000001 failed: 127.0.0.1:%d" % closed in out
    assert "console: [    1.234567] fake-init: np" in out
    wait_for(lambda: zuul.nodes() == {} and cloud.counters().get("creates") == 1 and
             cloud.instances() == [], what="cleaned up")
    wait_for(lambda: cloud.framework().get("nodescan.failed") == 1, what="counted")


def test_quota_error_aborts_and_relaunches(deployment, zuul):
    cfg = fake_config(deployment, provider={"quota-errors": 1})
    p = deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    rid = zuul.submit(["small"])
    req = zuul.wait_request(rid)
    assert req["state"] == "fulfilled"
    assert "aborted (quota): Quota exceeded" in p.output()
    wait_for(lambda: cloud.framework().get("launches.aborted") == 1 and
             cloud.counters().get("creates") == 2, what="abort counted")
    assert cloud.counters()["quota_errors"] == 1
    # the aborted node is gone; the quota was re-read after the error
    wait_for(lambda: list(zuul.nodes()) == req["nodes"], what="aborted node deleted")
    assert cloud.framework()["quota.reads"] >= 2
    wait_for(lambda: list(cloud.by_node()) == req["nodes"], what="one instance")


def test_cloud_limits_minus_unmanaged_usage(deployment, zk, zuul):
    """quota 3 instances, 2 of them somebody else's: one node at a time."""
    cfg = fake_config(deployment, provider={"quota": {"instances": 3},
                                            "unmanaged-instances": 2})
    deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    r1 = zuul.submit(["small"])
    assert zuul.wait_request(r1)["state"] == "fulfilled"
    r2 = zuul.submit(["small"])
    wait_for(lambda: zuul.pools() and zuul.pools()[0]["paused"], what="pool paused")
    assert zuul.request(r2)["state"] == "pending"
    wait_for(lambda: len(cloud.instances(managed_only=False)) == 3, what="3 servers")
    assert cloud.counters()["quota_errors"] == 0, "the limit was known, not run into"
    held = zuul.accept(r1)
    zuul.finish(held)
    assert zuul.wait_request(r2)["state"] == "fulfilled"
    # the unmanaged servers were never touched
    wait_for(lambda: len(cloud.instances()) == 1, what="the new node's instance")
    assert len([i for i in cloud.instances(managed_only=False) if i["unmanaged"]]) == 2


def test_unreported_limits_run_into_quota_errors(deployment, zuul):
    """A cloud that does not report its limits refuses the launch beyond
    them: the node is aborted, the pool relaunches once room frees up."""
    cfg = fake_config(deployment, provider={"quota": {"instances": 1},
                                            "report-quota": False})
    deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    r1 = zuul.submit(["small"])
    assert zuul.wait_request(r1)["state"] == "fulfilled"
    r2 = zuul.submit(["small"])
    wait_for(lambda: cloud.counters().get("quota_errors", 0) >= 1, what="a quota error")
    held = zuul.accept(r1)
    zuul.finish(held)
    assert zuul.wait_request(r2, timeout=30)["state"] == "fulfilled"
    wait_for(lambda: len(cloud.instances()) == 1, what="one instance")


def test_delete_error_is_retried(deployment, zuul):
    cfg = fake_config(deployment, provider={"delete-failure-rate": 1, "delete-delay": 0.2})
    p = deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    rid = zuul.submit(["small"])
    req = zuul.wait_request(rid)
    held = zuul.accept(rid)
    zuul.finish(held)
    (nid,) = req["nodes"]
    wait_for(lambda: zuul.node(nid) is None, what="node deleted in the end")
    wait_for(lambda: cloud.instances() == [] and cloud.counters().get("deletes") == 1,
             what="instance gone")
    assert cloud.counters()["delete_errors"] == 1
    assert "deleting node %s: delete of" % nid in p.output()


def test_leaked_instance_deleted_after_two_passes(deployment, zuul):
    """A delete the cloud acknowledged but did not do leaves an instance
    whose node ZooKeeper no longer knows: leak cleanup deletes it."""
    cfg = fake_config(deployment, provider={"leak-rate": 1, "unmanaged-instances": 1})
    p = deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    rid = zuul.submit(["small"])
    req = zuul.wait_request(rid)
    (nid,) = req["nodes"]
    held = zuul.accept(rid)
    zuul.finish(held)
    wait_for(lambda: zuul.node(nid) is None and cloud.counters().get("leaked_on_delete") == 1,
             what="node deleted")
    assert nid in cloud.by_node(), "the instance leaked"
    # two cleanup passes (1 s apart here) later: deleted, with its volume
    wait_for(lambda: nid not in cloud.by_node() and not [
        v for v in cloud.volumes() if v["metadata"].get("nodepool_node_id") == nid],
        timeout=15, what="leaked instance deleted")
    wait_for(lambda: cloud.framework().get("leaked.instances") == 1, what="counted")
    assert "deleted leaked instance i-000002 (node %s)" % nid in p.output()
    # somebody else's instance (no nodepool metadata) is left alone
    assert [i["name"] for i in cloud.instances(managed_only=False)] == ["unmanaged-1"]


def test_leaked_volume_deleted(deployment, zuul):
    cfg = fake_config(deployment, provider={"volume-leak-rate": 1})
    deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    rid = zuul.submit(["small"])
    req = zuul.wait_request(rid)
    (nid,) = req["nodes"]
    held = zuul.accept(rid)
    zuul.finish(held)
    wait_for(lambda: zuul.node(nid) is None and cloud.counters().get("deletes") == 1,
             what="node deleted")
    assert cloud.instances() == []
    assert [v["server"] for v in cloud.volumes()] == [None], "its volume leaked"
    wait_for(lambda: cloud.volumes() == [], timeout=15, what="leaked volume deleted")
    wait_for(lambda: cloud.framework().get("leaked.volumes") == 1, what="counted")
    assert "leaked.instances" not in cloud.framework()


@pytest.fixture
def sshd(tmp_path):
    d = str(tmp_path / "sshd")
    port = int(subprocess.check_output(
        ["sh", os.path.join(TOP, "tests/sshd-fixture.sh"), "start", d]).decode().split()[-1])
    with open(os.path.join(d, "host_keys")) as f:
        keys = [line.strip() for line in f if line.strip()]
    yield port, keys
    subprocess.call(["sh", os.path.join(TOP, "tests/sshd-fixture.sh"), "stop", d])


def test_nodescan_against_a_real_sshd(deployment, zuul, sshd):
    port, keys = sshd
    cfg = fake_config(deployment, labels={"small": {"host-key-checking": True}},
                      provider={"fake-ssh-port": port, "boot-timeout": 30})
    deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    rid = zuul.submit(["small"])
    req = zuul.wait_request(rid, timeout=40)
    assert req["state"] == "fulfilled"
    n = zuul.node(req["nodes"][0])
    assert n["interface_ip"] == "127.0.0.1" and n["connection_port"] == port
    assert n["public_ipv4"].startswith("203.0.113.")
    assert sorted(n["host_keys"]) == sorted(keys)
    assert len(keys) == 3
    wait_for(lambda: list(cloud.by_node()) == req["nodes"], what="the node's instance")
    assert cloud.framework()["nodescan.failed"] == 0


def test_launch_phases_on_metrics(deployment, zuul, sshd):
    """/metrics has the launch phase histograms the state machine framework
    records: create (until the cloud names the server), boot (until it is
    active) and keyscan (host keys scanned against a real sshd), one
    observation each for one launch, beside the whole launch ("total")."""
    from operator_helpers import webapp
    from test_web import get, parse_metrics
    port, keys = sshd
    w = webapp()
    cfg = fake_config(deployment, labels={"small": {"host-key-checking": True}},
                      provider={"fake-ssh-port": port, "boot-timeout": 30,
                                "boot-delay": 0.3},
                      top=dict(w, nodepoold=dict(fake_config(deployment)["nodepoold"],
                                                 **{"stats-interval": 0.3})))
    deployment.start_launcher("sim", deployment.write_config(cfg))
    rid = zuul.submit(["small"])
    assert zuul.wait_request(rid, timeout=40)["state"] == "fulfilled"
    web = w["webapp"]["port"]

    def scrape():
        status, _, body = get(web, "/metrics")
        return status == 200 and parse_metrics(body)

    def count(m, phase):
        return m.get('nodepool_launch_duration_seconds_count{provider="sim",phase="%s"}'
                     % phase)
    m = wait_for(lambda: (lambda m: m and count(m, "total") == 1 and m)(scrape()),
                 what="the launch on /metrics")
    for phase in ("create", "boot", "keyscan", "total"):
        assert count(m, phase) == 1, (phase, sorted(k for k in m if "duration" in k))
        inf = m['nodepool_launch_duration_seconds_bucket{provider="sim",phase="%s",'
                'le="+Inf"}' % phase]
        assert inf == 1
        assert m['nodepool_launch_duration_seconds_sum{provider="sim",phase="%s"}'
                 % phase] >= 0
    # the server is ACTIVE boot-delay after its create: boot took time
    assert m['nodepool_launch_duration_seconds_sum{provider="sim",phase="boot"}'] > 0
    # every phase lies within the whole launch
    total = m['nodepool_launch_duration_seconds_sum{provider="sim",phase="total"}']
    parts = sum(m['nodepool_launch_duration_seconds_sum{provider="sim",phase="%s"}' % p]
                for p in ("create", "boot", "keyscan"))
    assert parts <= total + 0.001, (parts, total)


def test_launcher_killed_mid_launch_its_instance_deleted_by_external_id(deployment, zuul):
    """A launching node carries its instance's external_id in ZooKeeper as
    soon as the cloud names it, and each retry's new one (as upstream's
    StateMachineNodeLauncher stores it at once). The launcher is then
    killed -9 mid-launch and Zuul cancels the request; a new one deletes
    the BUILDING node once the old session is gone, and the instance with
    it, by that external_id. The
    cloud is `persistent` (it outlives the worker, read back from its
    state-file), and leak cleanup cannot run here (its first pass is an
    hour away, and it needs two): the delete can only come from the node."""
    cfg = fake_config(
        deployment,
        provider={"boot-delay": 3, "boot-failures": 1, "persistent": True},
        top={"zookeeper-timeout": 2,
             "nodepoold": {"cleanup-interval": 3600, "delete-interval": 0.5}})
    path = deployment.write_config(cfg)
    p1 = deployment.start_launcher("sim", path)
    cloud = Cloud(deployment)
    rid = zuul.submit(["small"])

    def building_with(eid):
        def ok():
            nodes = [k for k, n in zuul.nodes().items()
                     if n.get("external_id") == eid and n["state"] == "building"]
            return nodes and nodes[0]
        return ok

    # the first attempt: named while building (it fails to boot after 3 s)
    nid = wait_for(building_with("i-000001"), 10, what="building node naming i-000001")
    assert zuul.node(nid)["allocated_to"] == rid
    inst = wait_for(lambda: cloud.by_node().get(nid), what="the instance in the cloud")
    assert inst["id"] == "i-000001" and inst["status"] == "BUILD"
    # the retry's instance, named while building, after the first is deleted
    assert wait_for(building_with("i-000002"), 15, what="the retry's id in ZooKeeper") == nid
    inst = wait_for(lambda: (cloud.by_node().get(nid) or {}).get("id") == "i-000002" and
                    cloud.by_node()[nid], what="the retry's instance in the cloud")
    assert inst["status"] == "BUILD"
    assert [i["id"] for i in cloud.instances()] == ["i-000002"]
    assert cloud.counters()["deletes"] == 1  # the failed attempt's, by p1

    p1.signal(signal.SIGKILL)
    p1.p.wait()
    assert zuul.node(nid)["state"] == "building"
    # the cloud outlived the launcher
    assert [i["id"] for i in cloud.instances()] == ["i-000002"]

    # Zuul gives up on the request: nothing is left to adopt the node for
    # (a request still waiting would adopt it: test_ha.py)
    assert zuul.cancel(rid)
    p2 = deployment.start_launcher("sim", path)
    wait_for(lambda: zuul.node(nid) is None, 20, what="the BUILDING node deleted")
    wait_for(lambda: cloud.instances() == [] and cloud.volumes() == [],
             what="its instance deleted")
    assert cloud.counters()["deletes"] == 2
    wait_for(lambda: cloud.framework().get("deletes.ok") == 1, what="p2's delete counted")
    out = p2.output()
    assert "fake: cloud read back from" in out
    assert "node %s: deleting instance i-000002" % nid in out
    assert "leaked" not in out
    assert "leaked.instances" not in cloud.framework()
    assert p2.alive()


def test_label_with_config_error_becomes_an_error_label(deployment, zuul):
    """Error labels (reference 2.6; upstream's StateMachineProvider
    errorLabels): the adapter's quota-for-label reports a permanent
    configuration error for `broken`; the request in hand goes on and
    fails, the launcher logs the error, and from then on the pool declines
    requests needing `broken` without launching anything, while `small`
    keeps being served."""
    why = "instance type x9.huge is not offered in region sim-1"
    cfg = fake_config(deployment, labels={"small": {}, "broken": {"config-error": why}},
                      provider={"launch-retries": 2})
    p = deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    pool = wait_for(lambda: zuul.pools(), what="pool")[0]

    first = zuul.submit(["broken"])
    req = zuul.wait_request(first)
    assert req["state"] == "failed" and req["declined_by"] == [pool["id"]]
    out = p.output()
    assert ("provider sim: error getting quota for label broken, marking it "
            "permanently unavailable: " + why) in out
    # the launch ran (two attempts, refused by the cloud) and left nothing
    assert "launch attempt 1/2 for node" in out
    wait_for(lambda: cloud.counters().get("creates") == 2 and
             cloud.counters().get("create_errors") == 2, what="2 refused creates")
    wait_for(lambda: zuul.nodes() == {}, what="failed node cleaned up")
    assert cloud.instances() == []

    good = zuul.submit(["small"])
    later = [zuul.submit(["broken"]), zuul.submit(["small", "broken"])]
    assert zuul.wait_request(good)["state"] == "fulfilled"
    for rid in later:
        r = zuul.wait_request(rid)
        assert r["state"] == "failed" and r["declined_by"] == [pool["id"]]
        assert r["nodes"] == []
        wait_for(lambda: ("request %s failed: declined by every pool (last: main: "
                          "node type(s) [broken] not available)" % rid) in p.output(),
                 what="decline of %s logged" % rid)
    again = zuul.submit(["small"])
    assert zuul.wait_request(again)["state"] == "fulfilled"
    # no launch for the declined requests: only the two small servers
    # were created after the first request's two refused attempts
    wait_for(lambda: cloud.counters().get("creates") == 4 and len(cloud.instances()) == 2,
             what="two small servers")
    assert cloud.counters()["create_errors"] == 2
    assert sorted(i["label"] for i in cloud.instances()) == ["small", "small"]
    assert all(n["type"] == ["small"] for n in zuul.nodes().values())
    # the error was logged once, when the label was marked
    assert p.output().count("error getting quota for label broken") == 1
