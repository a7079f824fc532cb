"""Issue 25: namespace-reuse (a kubernetes pod label option, off by
default): a pod node's pod goes into a namespace kept warm for its label,
whose RoleBinding of upstream's restricted rules is already there, and
its token comes from a TokenRequest bound to the pod (boundObjectRef):
three API calls per node (pod, token, pod delete) instead of five. What a
user checks: a node's token works for its own pod and not for another
node's; once the node is deleted its token is refused and its namespace
serves the next node, which the old token cannot reach; leak cleanup
removes a leaked pod in a warm namespace and the warm namespaces of a
label that no longer has the option, and leaves everything else alone.
The default (off) is upstream's namespace per node: test_kubernetes_tokens
and test_kubernetes_driver."""
import pytest

from conftest import deletion_passes, wait_for
from test_kubernetes_driver import k8s_config, serve
from test_kubernetes_tokens import (KUBECTL, calls, check_confined, kubectl,  # noqa: F401
                                    ksim, objects)

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")

POD = {"name": "pod", "type": "pod", "image": "docker.io/fedora:40", "cpu": 1, "memory": 256,
       "namespace-reuse": True}
NS_CREATE = ("POST", "/api/v1/namespaces")
POD_CREATE = ("POST", "/api/v1/namespaces/{ns}/pods")
POD_DELETE = ("DELETE", "/api/v1/namespaces/{ns}/pods/{name}")
RB_CREATE = ("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings")
TOKEN_REQUEST = ("POST", "/api/v1/namespaces/{ns}/serviceaccounts/{name}/token")


def warm_namespaces(sim, label="pod"):
    return {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in sim.namespaces()
            if (n["metadata"].get("labels") or {}).get("nodepool_warm_label") == label
            and n["status"]["phase"] == "Active"}


def pods_in(sim, ns):
    return [p["metadata"]["name"] for p in sim.pods() if p["metadata"]["namespace"] == ns]


def release(zuul, rid, nid):
    zuul.finish(zuul.accept(rid))
    wait_for(lambda: nid not in zuul.nodes(), what="node %s deleted" % nid)


def test_reused_namespace_token_bound_to_its_pod(deployment, zuul, ksim):
    p = deployment.start_launcher("k8s", deployment.write_config(k8s_config([POD])))
    rid1, nid1, n1 = serve(deployment, zuul, ksim, "pod")
    rid2, nid2, n2 = serve(deployment, zuul, ksim, "pod")
    c1, c2 = n1["connection_port"], n2["connection_port"]
    # each node in a warm namespace of its own, with its own pod, as Zuul reads it
    assert c1["namespace"] != c2["namespace"]
    assert c1["pod"] == "pod-" + nid1 and c2["pod"] == "pod-" + nid2
    assert n1["connection_type"] == "kubectl" and n1["interface_ip"] == c1["pod"]
    assert c1["user"] == "default" and c1["ca_crt"] and c1["host"] == ksim.info["server"]
    warm = warm_namespaces(ksim)
    assert set(warm) == {c1["namespace"], c2["namespace"]}
    assert all("nodepool_node_id" not in lb and lb["nodepool_provider_name"] == "k8s"
               for lb in warm.values())
    # a node's token: its pod, not the other node's
    check_confined(ksim, c1, c2["namespace"])
    check_confined(ksim, c2, c1["namespace"])
    r = kubectl(ksim, c1, "get", "pod", c2["pod"], "-n", c2["namespace"])
    assert r.returncode != 0 and "Forbidden" in r.stderr, r.stderr
    # the token is bound to the pod (the simulator's record of it)
    tok = {t["token"]: t for t in ksim.ctl("GET", "/tokens")}[c1["token"]]
    pod1 = objects(ksim, "pods", c1["namespace"])[c1["pod"]]
    assert tok["bound"] == ["pods", c1["namespace"], c1["pod"], pod1["metadata"]["uid"]]
    (rb,) = objects(ksim, "rolebindings", c1["namespace"]).values()
    assert rb["roleRef"]["name"] == "nodepool-zuul-restricted"
    # one pod at a time in a warm namespace, whatever launcher asks
    (quota,) = objects(ksim, "resourcequotas", c1["namespace"]).values()
    assert quota["spec"] == {"hard": {"pods": "1"}}

    # node 1 goes: its pod and its token with it, its namespace stays warm
    release(zuul, rid1, nid1)
    wait_for(lambda: pods_in(ksim, c1["namespace"]) == [], what="node 1's pod gone")
    r = kubectl(ksim, c1, "get", "pods", "-n", c1["namespace"])
    assert r.returncode != 0 and "Unauthorized" in r.stderr, r.stderr
    assert c1["namespace"] in warm_namespaces(ksim)
    before = calls(ksim)

    # the next node gets node 1's namespace, for three calls in all
    rid3, nid3, n3 = serve(deployment, zuul, ksim, "pod")
    c3 = n3["connection_port"]
    assert c3["namespace"] == c1["namespace"] and c3["pod"] == "pod-" + nid3
    check_confined(ksim, c3, c2["namespace"])
    r = kubectl(ksim, c1, "get", "pod", c3["pod"], "-n", c3["namespace"])
    assert r.returncode != 0 and "Unauthorized" in r.stderr, r.stderr
    release(zuul, rid3, nid3)
    wait_for(lambda: pods_in(ksim, c3["namespace"]) == [], what="node 3's pod gone")
    after = calls(ksim)
    delta = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    node_calls = {k: v for k, v in delta.items() if k[0] != "WATCH" and k[0] != "GET"}
    assert node_calls == {POD_CREATE: 1, TOKEN_REQUEST: 1, POD_DELETE: 1}, delta
    r = kubectl(ksim, c3, "get", "pods", "-n", c3["namespace"])
    assert r.returncode != 0 and "Unauthorized" in r.stderr, r.stderr
    release(zuul, rid2, nid2)
    wait_for(lambda: ksim.leaks([]) == [], what="no node's pod left")
    assert set(warm_namespaces(ksim)) == {c1["namespace"], c2["namespace"]}
    # a pod's deletion frees the namespace the next request reuses: at
    # once, never deferred as a cloud server's is
    deferred, at_once = deletion_passes(p)
    assert deferred == 0 and at_once >= 1, (deferred, at_once)


def test_leak_cleanup_of_warm_namespaces(deployment, zuul, ksim):
    """A pod a dead launcher left in a warm namespace (its node does not
    exist) is deleted and the namespace then serves a node; once the
    label loses namespace-reuse its warm namespaces go. Another provider's
    warm namespace and unlabelled ones stay."""
    path = deployment.write_config(k8s_config([POD]))
    p = deployment.start_launcher("k8s", path)
    rid, nid, n = serve(deployment, zuul, ksim, "pod")
    ns = n["connection_port"]["namespace"]
    release(zuul, rid, nid)
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config_mod
    import os
    kc = k8s.Configuration()
    k8s_config_mod.load_kube_config(config_file=os.environ["KUBECONFIG"], context="kubesim",
                                    client_configuration=kc)
    core = k8s.CoreV1Api(k8s.ApiClient(kc))
    core.create_namespace({"metadata": {"name": "other-warm", "labels": {
        "nodepool_provider_name": "someone-else", "nodepool_pool_name": "main",
        "nodepool_warm_label": "pod"}}})
    core.create_namespace({"metadata": {"name": "plain"}})
    wait_for(lambda: pods_in(ksim, ns) == [], what="the node's pod gone")
    # a leaked pod: a node that does not exist
    core.create_namespaced_pod(ns, {"metadata": {"name": "pod-0000099999", "labels": {
        "nodepool_node_id": "0000099999", "nodepool_provider_name": "k8s",
        "nodepool_pool_name": "main", "nodepool_node_label": "pod"}},
        "spec": {"containers": [{"name": "c", "image": "docker.io/fedora:40"}]}})
    wait_for(lambda: pods_in(ksim, ns) == [], timeout=30, what="the leaked pod deleted")
    assert ns in warm_namespaces(ksim)
    rid, nid, n = serve(deployment, zuul, ksim, "pod")
    assert n["connection_port"]["namespace"] == ns
    release(zuul, rid, nid)
    wait_for(lambda: pods_in(ksim, ns) == [], what="the node's pod gone")
    # the label without namespace-reuse: its warm namespaces are deleted
    p.stop()
    plain = dict(POD)
    del plain["namespace-reuse"]
    p = deployment.start_launcher("k8s", deployment.write_config(k8s_config([plain])))
    wait_for(lambda: set(warm_namespaces(ksim)) == {"other-warm"}, timeout=30,
             what="k8s's warm namespaces deleted")
    assert "deleting warm namespace %s: its label no longer has namespace-reuse" % ns \
        in p.output()
    names = {n["metadata"]["name"] for n in ksim.namespaces()}
    assert {"plain", "other-warm"} <= names
    # and the label serves as upstream does, a namespace per node
    rid, nid, n = serve(deployment, zuul, ksim, "pod")
    assert n["connection_port"]["namespace"] == "main-" + nid


def test_namespace_reuse_on_a_namespace_label_is_refused(deployment, ksim):
    cfg = k8s_config([{"name": "ns", "type": "namespace", "namespace-reuse": True}])
    p = deployment.start_launcher("k8s", deployment.write_config(cfg))
    wait_for(lambda: "namespace-reuse: namespace-reuse is for kubernetes labels of type pod"
             in p.output(), what="the reason logged")


def test_warm_namespaces_made_ahead(deployment, zuul, ksim):
    """warm-namespaces: N has warm namespaces made before any request (at
    most max-servers of them), each with its binding; a node then costs
    its pod, its token and its pod's delete, and no namespace."""
    label = dict(POD, **{"warm-namespaces": 3})
    cfg = k8s_config([label], pool={"max-servers": 2})
    p = deployment.start_launcher("k8s", deployment.write_config(cfg))
    wait_for(lambda: p.output().count("made ahead for label pod") == 2, timeout=30,
             what="two warm namespaces made ahead")
    warm = warm_namespaces(ksim)
    assert len(warm) == 2, warm
    for ns in warm:
        (rb,) = objects(ksim, "rolebindings", ns).values()
        assert rb["roleRef"]["name"] == "nodepool-zuul-restricted"
        assert rb["subjects"] == [{"kind": "ServiceAccount", "name": "default", "namespace": ns}]
    before = calls(ksim)
    rid, nid, n = serve(deployment, zuul, ksim, "pod")
    c = n["connection_port"]
    assert c["namespace"] in warm
    r = kubectl(ksim, c, "get", "pod", c["pod"], "-n", c["namespace"])
    assert r.returncode == 0 and "Running" in r.stdout, r.stderr
    release(zuul, rid, nid)
    wait_for(lambda: pods_in(ksim, c["namespace"]) == [], what="the node's pod gone")
    after = calls(ksim)
    assert after.get(NS_CREATE, 0) == before.get(NS_CREATE, 0)
    assert after[POD_CREATE] - before.get(POD_CREATE, 0) == 1
    assert len(warm_namespaces(ksim)) == 2


def test_launcher_killed_mid_launch_resumes_in_its_namespace(deployment, zuul, ksim):
    """SIGKILL while the pod is Pending: the next launcher adopts the
    launch (issue 22) in the warm namespace it began in, finds the pod
    made, binds a new token to it, and the node serves; after it, nothing
    of the node is left and the namespace is warm."""
    import signal
    ksim.behavior(pod_delay=15)
    cfg = k8s_config([POD])
    cfg["zookeeper-timeout"] = 4  # the dead launcher's locks go sooner
    path = deployment.write_config(cfg)
    p = deployment.start_launcher("k8s", path)
    rid = zuul.submit(["pod"])
    pod = wait_for(lambda: ksim.pods(), timeout=20, what="a pod created")[0]["metadata"]
    p.signal(signal.SIGKILL)
    p.p.wait()
    ksim.behavior(pod_delay=0.2)
    before = calls(ksim)
    deployment.start_launcher("k8s", path)
    req = zuul.wait_request(rid, timeout=60)
    assert req["state"] == "fulfilled", req
    (nid,) = req["nodes"]
    c = zuul.node(nid)["connection_port"]
    assert (c["namespace"], c["pod"]) == (pod["namespace"], pod["name"])
    assert calls(ksim)[POD_CREATE] == before[POD_CREATE]  # found, not made again
    r = kubectl(ksim, c, "get", "pod", c["pod"], "-n", c["namespace"])
    assert r.returncode == 0 and "Running" in r.stdout, r.stderr
    release(zuul, rid, nid)
    wait_for(lambda: ksim.leaks([]) == [], timeout=30, what="nothing of the node left")
    assert c["namespace"] in warm_namespaces(ksim)


def test_shrunk_provider_keeps_at_most_max_servers_warm(deployment, zuul, ksim):
    """Warm namespaces above the label's max-servers (the pool's, else the
    provider's) are deleted by leak cleanup once the provider shrinks;
    the rest keep serving."""
    label = dict(POD, **{"warm-namespaces": 3})
    p = deployment.start_launcher("k8s", deployment.write_config(
        k8s_config([label], provider={"max-servers": 3})))
    wait_for(lambda: len(warm_namespaces(ksim)) == 3, timeout=30, what="three warm namespaces")
    p.stop()
    p = deployment.start_launcher("k8s", deployment.write_config(
        k8s_config([POD], provider={"max-servers": 1})))
    wait_for(lambda: len(warm_namespaces(ksim)) == 1, timeout=30, what="one warm namespace left")
    assert p.output().count("more than max-servers of its label") == 2
    (left,) = warm_namespaces(ksim)
    rid, nid, n = serve(deployment, zuul, ksim, "pod")
    assert n["connection_port"]["namespace"] == left


def test_taken_warm_namespace_is_passed_over(deployment, zuul, ksim):
    """A free warm namespace in which a pod appears that this launcher
    cannot see (another launcher's, made an instant earlier: here one
    without the provider's labels) refuses the node's pod (its quota of
    one pod); the node goes into another namespace and the other pod is
    left alone."""
    deployment.start_launcher("k8s", deployment.write_config(k8s_config([POD])))
    rid, nid, n = serve(deployment, zuul, ksim, "pod")
    ns = n["connection_port"]["namespace"]
    release(zuul, rid, nid)
    wait_for(lambda: pods_in(ksim, ns) == [], what="the node's pod gone")
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config_mod
    import os
    kc = k8s.Configuration()
    k8s_config_mod.load_kube_config(config_file=os.environ["KUBECONFIG"], context="kubesim",
                                    client_configuration=kc)
    core = k8s.CoreV1Api(k8s.ApiClient(kc))
    core.create_namespaced_pod(ns, {"metadata": {"name": "intruder"}, "spec": {
        "containers": [{"name": "c", "image": "docker.io/fedora:40"}]}})
    rid, nid, n = serve(deployment, zuul, ksim, "pod")
    c = n["connection_port"]
    assert c["namespace"] != ns
    check_confined(ksim, c, ns)
    assert pods_in(ksim, ns) == ["intruder"]
