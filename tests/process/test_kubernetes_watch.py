"""The kubernetes, openshift and openshiftpods drivers follow pods and
namespaces (projects) with the API's watch instead of reading each node's
objects: a node is ready when the watch says its pod runs, gone when the
watch says its namespace went. What can happen to a watch ends with the
right state: it expires (410: the driver lists again), its connection
drops mid-stream (resumed from the last resourceVersion), and a pod
changes while no watch runs (the resumed watch, or the new list, tells).
Each checks through the simulator's call log that the watch, not a read
of the pod, made the node ready."""
import pytest

from conftest import wait_for
from test_kubernetes_driver import (k8s_config, release_and_check_gone, serve,  # noqa: F401
                                    sim)

POD = {"name": "pod", "type": "pod", "image": "docker.io/fedora:40", "cpu": 1, "memory": 256}
POD_READ = ("GET", "/api/v1/namespaces/{ns}/pods/{name}")
NS_READ = ("GET", "/api/v1/namespaces/{name}")


def calls(sim):
    return {(c["method"], c["route"]): c["count"] for c in sim.calls()["calls"]}


def release_both(zuul, sim, rid1, rid2):
    zuul.finish(zuul.accept(rid1) + zuul.accept(rid2))
    wait_for(lambda: zuul.nodes() == {}, what="nodes deleted")
    wait_for(lambda: sim.leaks([]) == [], what="nothing left in the cluster")
    assert calls(sim).get(NS_READ, 0) == 0  # deletions told by the watch


def pod_running(sim, ns):
    return [p for p in sim.pods() if p["metadata"]["namespace"] == ns and
            p["status"]["phase"] == "Running"]


def test_pod_node_ready_and_gone_by_the_watch(deployment, zuul, sim):
    deployment.start_launcher("k8s", deployment.write_config(k8s_config([POD])))
    rid, nid, node = serve(deployment, zuul, sim, "pod")
    assert node["host_id"] == "sim-node-1" and node["connection_port"]["token"]
    release_and_check_gone(zuul, sim, rid)
    c = calls(sim)
    assert c.get(POD_READ, 0) == 0 and c.get(NS_READ, 0) == 0, c
    assert c[("GET", "/api/v1/pods")] == 1, c  # listed once
    assert c[("WATCH", "/api/v1/pods")] >= 1, c
    # (namespaces are listed by leak cleanup too)
    assert c[("WATCH", "/api/v1/namespaces")] >= 1, c


def test_watch_dropped_mid_stream_is_resumed(deployment, zuul, sim):
    deployment.start_launcher("k8s", deployment.write_config(k8s_config([POD])))
    rid1, _, _ = serve(deployment, zuul, sim, "pod")
    before = calls(sim)[("WATCH", "/api/v1/pods")]
    sim.ctl("POST", "/watches/drop", {})
    wait_for(lambda: calls(sim)[("WATCH", "/api/v1/pods")] > before, what="watch resumed")
    rid2, _, node = serve(deployment, zuul, sim, "pod")
    assert node["state"] == "ready"
    c = calls(sim)
    assert c[("GET", "/api/v1/pods")] == 1  # resumed, not listed again
    assert c.get(POD_READ, 0) == 0
    release_both(zuul, sim, rid1, rid2)


def test_watch_expired_410_lists_again(deployment, zuul, sim):
    deployment.start_launcher("k8s", deployment.write_config(k8s_config([POD])))
    rid1, _, _ = serve(deployment, zuul, sim, "pod")
    sim.ctl("POST", "/watches/expire", {})
    # the resumed watch gets 410 Expired: the driver lists again
    wait_for(lambda: calls(sim)[("GET", "/api/v1/pods")] == 2, what="pods listed again")
    rid2, _, node = serve(deployment, zuul, sim, "pod")
    assert node["state"] == "ready"
    assert calls(sim).get(POD_READ, 0) == 0
    release_both(zuul, sim, rid1, rid2)


@pytest.mark.parametrize("recovery", ["resume", "expire"])
def test_pod_runs_while_the_watch_is_down(deployment, zuul, sim, recovery):
    """The watch connection drops and cannot be made again (the API server
    holds new watches) while the node's pod starts: once watches work
    again, the resumed watch replays the change, or (history expired) the
    new list shows the pod running; the node is ready either way."""
    deployment.start_launcher("k8s", deployment.write_config(k8s_config([POD])))
    rid1, nid1, _ = serve(deployment, zuul, sim, "pod")
    sim.behavior(pod_delay=0.3)
    fid = sim.fault(method="GET", path="^/api/v1/pods$", watch=True, hang=True)
    sim.ctl("POST", "/watches/drop", {})
    wait_for(lambda: sim.ctl("GET", "/faults/%d" % fid)["hits"] >= 1, what="re-watch held")
    rid2 = zuul.submit(["pod"])
    wait_for(lambda: [p for p in sim.pods() if p["status"]["phase"] == "Running"
                      and p["metadata"]["labels"]["nodepool_node_id"] != nid1],
             what="the second pod running in the cluster")
    assert zuul.request(rid2)["state"] != "fulfilled"
    lists = calls(sim)[("GET", "/api/v1/pods")]
    if recovery == "expire":
        sim.ctl("POST", "/watches/expire", {})
    sim.clear_fault(fid)
    req = zuul.wait_request(rid2, timeout=30)
    assert req["state"] == "fulfilled"
    assert zuul.node(req["nodes"][0])["state"] == "ready"
    c = calls(sim)
    assert c.get(POD_READ, 0) == 0
    assert c[("GET", "/api/v1/pods")] == lists + (1 if recovery == "expire" else 0)
    release_both(zuul, sim, rid1, rid2)


@pytest.mark.parametrize("sim", ["1.23"], indirect=True)
def test_openshift_project_and_pod_by_the_watch(deployment, zuul, sim):
    labels = [{"name": "proj", "type": "project"}, dict(POD, name="pod")]
    deployment.start_launcher("k8s", deployment.write_config(
        k8s_config(labels, driver="openshift")))
    rid1, _, n1 = serve(deployment, zuul, sim, "proj")
    rid2, _, n2 = serve(deployment, zuul, sim, "pod")
    assert n1["connection_type"] == "project" and n2["connection_type"] == "kubectl"
    held = zuul.accept(rid1) + zuul.accept(rid2)
    zuul.finish(held)
    wait_for(lambda: zuul.nodes() == {}, what="nodes deleted")
    c = calls(sim)
    assert c.get(POD_READ, 0) == 0
    assert c.get(("GET", "/apis/project.openshift.io/v1/projects/{name}"), 0) == 0
    assert c[("WATCH", "/apis/project.openshift.io/v1/projects")] >= 1


def test_openshiftpods_by_the_watch(deployment, zuul, sim):
    label = {k: v for k, v in POD.items() if k != "type"}  # always pods
    cfg = k8s_config([label], driver="openshiftpods")
    deployment.start_launcher("k8s", deployment.write_config(cfg))
    rid, nid, node = serve(deployment, zuul, sim, "pod")
    assert node["external_id"] == "pod-" + nid
    zuul.finish(zuul.accept(rid))
    wait_for(lambda: zuul.nodes() == {}, what="node deleted")
    wait_for(lambda: sim.leaks([]) == [], what="pod deleted")
    c = calls(sim)
    assert c.get(POD_READ, 0) == 0
    assert c[("WATCH", "/api/v1/namespaces/{ns}/pods")] >= 1


def test_pod_before_the_default_account_exists_is_made_again(deployment, zuul, sim):
    """The pod is created while the namespace's other objects are still
    being made: a cluster whose service account controller has not made
    the namespace's default account yet refuses it (403); the driver makes
    it again and the node is ready."""
    sim.behavior(default_sa_delay=0.5)
    deployment.start_launcher("k8s", deployment.write_config(k8s_config([POD])))
    rid, nid, node = serve(deployment, zuul, sim, "pod")
    assert node["state"] == "ready"
    log = [c for c in sim.ctl("GET", "/calls/log")
           if c["method"] == "POST" and c["path"] == "/api/v1/namespaces/main-%s/pods" % nid]
    assert len(log) >= 2  # refused, then made
    release_and_check_gone(zuul, sim, rid)
