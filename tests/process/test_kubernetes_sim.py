"""The Kubernetes API server simulator (tests/sim/kubernetes) judged by
Kubernetes' own clients: Debian's python3-kubernetes making the calls
upstream Nodepool's kubernetes, openshift and openshiftpods drivers make
(nodepool/driver/kubernetes/provider.py, openshift/provider.py,
openshiftpods/provider.py), and kubectl (get, describe, delete). If a client
disagrees with the simulator, the simulator is wrong."""
import base64
import json
import os
import shutil
import subprocess
import time

import pytest

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client as k8s  # noqa: E402
from kubernetes import config as k8s_config  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

from conftest import wait_for  # noqa: E402
from kubesim_fixture import SIM_DIR, KubeSim  # noqa: E402

KUBECTL = shutil.which("kubectl")


@pytest.fixture
def sim(tmp_path):
    s = KubeSim(tmp_path, {"pod_delay": 0.3, "token_delay": 0.1,
                           "namespace_delete_delay": 0.2}).start()
    yield s
    s.stop()


def api(sim, context="kubesim"):
    """Clients configured as upstream's get_client does: from the
    kubeconfig, by context."""
    cfg = k8s.Configuration()
    k8s_config.load_kube_config(config_file=sim.info["kubeconfig"], context=context,
                                client_configuration=cfg)
    ac = k8s.ApiClient(configuration=cfg)
    return k8s.CoreV1Api(ac), k8s.RbacAuthorizationV1Api(ac), ac


def make_namespace(core, rbac, name, node_id="0000000001"):
    """The calls of upstream's createNamespace, in order."""
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": name, "labels": {"nodepool_node_id": node_id,
                                 "nodepool_provider_name": "kubesim",
                                 "nodepool_pool_name": "main"}}})
    core.create_namespaced_service_account(name, {"apiVersion": "v1", "kind": "ServiceAccount",
                                                  "metadata": {"name": "zuul-worker"}})
    core.create_namespaced_secret(name, {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
        "metadata": {"name": "zuul-worker",
                     "annotations": {"kubernetes.io/service-account.name": "zuul-worker"}}})

    def token():
        s = core.read_namespaced_secret("zuul-worker", name)
        if s.data and s.data.get("token") and s.data.get("ca.crt"):
            return s.data
        return None
    data = wait_for(token, timeout=10, what="token controller")
    rbac.create_namespaced_role(name, {
        "kind": "Role", "apiVersion": "rbac.authorization.k8s.io/v1",
        "metadata": {"name": "zuul"},
        "rules": [{"apiGroups": [""], "resources": ["pods", "pods/exec", "pods/log"],
                   "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}]})
    rbac.create_namespaced_role_binding(name, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "zuul-role"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "zuul"},
        "subjects": [{"kind": "ServiceAccount", "name": "zuul-worker", "namespace": name}]})
    return base64.b64decode(data["token"]).decode(), base64.b64decode(data["ca.crt"]).decode()


def pod_body(name="pod-fedora", image="quay.io/fedora:38", node_id="0000000001"):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"nodepool_node_id": node_id,
                                                  "nodepool_provider_name": "kubesim",
                                                  "nodepool_pool_name": "main",
                                                  "nodepool_node_label": name}},
            "spec": {"containers": [{"name": name, "image": image,
                                     "imagePullPolicy": "IfNotPresent",
                                     "command": ["/bin/sh", "-c"],
                                     "args": ["while true; do sleep 30; done;"],
                                     "resources": {"requests": {"cpu": "2", "memory": "2048Mi"},
                                                   "limits": {"cpu": "2", "memory": "2048Mi"}}}],
                     "restartPolicy": "Never"}}


def test_namespace_lifecycle_as_upstream(sim):
    core, rbac, ac = api(sim)
    token, ca = make_namespace(core, rbac, "main-0000000001")
    assert ca == open(sim.info["ca"]).read()
    ns = core.read_namespace("main-0000000001")
    assert ns.status.phase == "Active"
    assert ns.metadata.labels["nodepool_node_id"] == "0000000001"
    listed = core.list_namespace(label_selector="nodepool_provider_name=kubesim")
    assert [n.metadata.name for n in listed.items] == ["main-0000000001"]
    # The service account's token works in its namespace, and only there.
    cfg = k8s.Configuration()
    cfg.host = sim.info["server"]
    cfg.ssl_ca_cert = sim.info["ca"]
    cfg.api_key = {"authorization": "Bearer " + token}
    sa = k8s.CoreV1Api(k8s.ApiClient(cfg))
    assert sa.list_namespaced_pod("main-0000000001").items == []
    with pytest.raises(ApiException) as e:
        sa.list_namespaced_pod("default")
    assert e.value.status == 403
    assert json.loads(e.value.body)["reason"] == "Forbidden"
    # Cleanup as upstream: delete with a Background propagation body, then
    # read until 404.
    core.delete_namespace("main-0000000001", body={"apiVersion": "v1", "kind": "DeleteOptions",
                                                   "propagationPolicy": "Background"})
    assert core.read_namespace("main-0000000001").status.phase == "Terminating"

    def gone():
        try:
            core.read_namespace("main-0000000001")
        except ApiException as e:
            return e.status == 404
        return False
    wait_for(gone, timeout=10, what="namespace deleted")
    with pytest.raises(ApiException) as e:
        sa.list_namespaced_pod("main-0000000001")
    assert e.value.status == 401  # the token went with its namespace


def test_pod_runs_after_delay(sim):
    core, rbac, _ = api(sim)
    make_namespace(core, rbac, "main-0000000002", "0000000002")
    # long enough for the read below to see it Pending on a loaded machine
    sim.ctl("POST", "/outcomes", {"outcomes": [{"outcome": "running", "delay": 2}]})
    core.create_namespaced_pod("main-0000000002", pod_body(node_id="0000000002"))
    pod = core.read_namespaced_pod("pod-fedora", "main-0000000002")
    assert pod.status.phase == "Pending"
    pod = wait_for(lambda: (lambda p: p if p.status.phase == "Running" else None)(
        core.read_namespaced_pod("pod-fedora", "main-0000000002")), timeout=10, what="Running")
    assert pod.spec.node_name == "sim-node-1"
    assert pod.status.container_statuses[0].ready
    pods = core.list_pod_for_all_namespaces(label_selector="nodepool_node_id=0000000002")
    assert [p.metadata.name for p in pods.items] == ["pod-fedora"]


def test_image_pull_error_and_unschedulable(sim):
    core, rbac, _ = api(sim)
    sim.ctl("POST", "/outcomes", {"outcomes": [{"outcome": "image_pull", "delay": 0.1},
                                               {"outcome": "unschedulable", "delay": 0.1}]})
    core.create_namespace({"metadata": {"name": "a"}})
    core.create_namespaced_pod("a", pod_body("p1"))
    core.create_namespaced_pod("a", pod_body("p2"))
    time.sleep(0.4)
    p1 = core.read_namespaced_pod("p1", "a")
    assert p1.status.phase == "Pending"
    assert p1.status.container_statuses[0].state.waiting.reason == "ImagePullBackOff"
    p2 = core.read_namespaced_pod("p2", "a")
    assert p2.status.phase == "Pending"
    cond = p2.status.conditions[0]
    assert (cond.type, cond.status, cond.reason) == ("PodScheduled", "False", "Unschedulable")


def test_errors_are_status_objects(sim):
    core, rbac, _ = api(sim)
    core.create_namespace({"metadata": {"name": "dup"}})
    with pytest.raises(ApiException) as e:
        core.create_namespace({"metadata": {"name": "dup"}})
    body = json.loads(e.value.body)
    assert e.value.status == 409
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "AlreadyExists", 409)
    assert body["details"] == {"name": "dup", "kind": "namespaces"}
    with pytest.raises(ApiException) as e:
        core.read_namespaced_pod("nope", "dup")
    assert e.value.status == 404 and json.loads(e.value.body)["reason"] == "NotFound"
    sim.fault(method="POST", path="/pods$", status=500, count=1)
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod("dup", pod_body())
    assert e.value.status == 500 and json.loads(e.value.body)["reason"] == "InternalError"
    # 429 with Retry-After: the client (urllib3) waits and retries, as it
    # does against a real API server that throttles.
    fid = sim.fault(method="GET", path="/namespaces/dup$", status=429, retry_after=1, count=1)
    t0 = time.time()
    assert core.read_namespace("dup").metadata.name == "dup"
    assert time.time() - t0 >= 0.9
    assert sim.ctl("GET", "/faults/%d" % fid)["hits"] == 1
    # No credentials: 401.
    cfg = k8s.Configuration()
    cfg.host = sim.info["server"]
    cfg.ssl_ca_cert = sim.info["ca"]
    with pytest.raises(ApiException) as e:
        k8s.CoreV1Api(k8s.ApiClient(cfg)).list_namespace()
    assert e.value.status == 401


def test_client_certificate_context(sim):
    core, _, _ = api(sim, context="kubesim-cert")
    names = [n.metadata.name for n in core.list_namespace().items]
    assert "default" in names


def test_openshift_project_request(sim):
    """openshift's createProject: a ProjectRequest through the dynamic
    client, then the project is read, listed and deleted."""
    from kubernetes.dynamic import DynamicClient
    _, _, ac = api(sim)
    dyn = DynamicClient(ac)
    preq = dyn.resources.get(api_version="project.openshift.io/v1", kind="ProjectRequest")
    preq.create(body={"apiVersion": "project.openshift.io/v1", "kind": "ProjectRequest",
                      "metadata": {"name": "zuul-ci-0000000003"}})
    proj = dyn.resources.get(api_version="project.openshift.io/v1", kind="Project")
    p = proj.get(name="zuul-ci-0000000003")
    assert p.status.phase == "Active"
    assert "zuul-ci-0000000003" in [i.metadata.name for i in proj.get().items]
    proj.delete(name="zuul-ci-0000000003")

    def gone():
        return "zuul-ci-0000000003" not in [n["metadata"]["name"] for n in sim.namespaces()]
    wait_for(gone, timeout=10, what="project deleted")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")
def test_kubectl_get_describe_delete(sim):
    env = dict(os.environ, KUBECONFIG=sim.info["kubeconfig"], HOME=sim.dir)
    core, rbac, _ = api(sim)
    token, _ = make_namespace(core, rbac, "main-0000000004", "0000000004")
    core.create_namespaced_pod("main-0000000004", pod_body(node_id="0000000004"))
    kc = lambda *a: subprocess.run([KUBECTL] + list(a), env=env, capture_output=True,
                                   text=True, timeout=30)

    def running():
        r = kc("get", "pods", "-n", "main-0000000004")
        return r.stdout if "Running" in r.stdout else None
    out = wait_for(running, timeout=10, what="kubectl sees the pod Running")
    assert "pod-fedora" in out and "1/1" in out
    r = kc("describe", "pod", "pod-fedora", "-n", "main-0000000004")
    assert r.returncode == 0, r.stderr
    assert "sim-node-1" in r.stdout and "quay.io/fedora:38" in r.stdout
    r = kc("describe", "namespace", "main-0000000004")
    assert r.returncode == 0, r.stderr
    assert "nodepool_node_id=0000000004" in r.stdout
    # As Zuul uses the credential: token, server and CA, no kubeconfig.
    r = subprocess.run([KUBECTL, "--token", token, "--server", sim.info["server"],
                        "--certificate-authority", sim.info["ca"], "get", "pods", "-n",
                        "main-0000000004", "-o", "json"], capture_output=True, text=True,
                       timeout=30, env=dict(os.environ, HOME=sim.dir, KUBECONFIG="/dev/null"))
    assert r.returncode == 0, r.stderr
    assert [i["metadata"]["name"] for i in json.loads(r.stdout)["items"]] == ["pod-fedora"]
    r = kc("delete", "pod", "pod-fedora", "-n", "main-0000000004")
    assert r.returncode == 0, r.stderr
    assert kc("get", "pod", "pod-fedora", "-n", "main-0000000004").returncode != 0
    r = kc("delete", "namespace", "main-0000000004")
    assert r.returncode == 0, r.stderr
    assert "main-0000000004" not in kc("get", "namespaces").stdout
    r = kc("get", "namespace", "main-0000000004")
    assert r.returncode == 1 and "NotFound" in r.stderr


def test_shell_wrapper(tmp_path):
    d = str(tmp_path / "sh")
    sh = os.path.join(SIM_DIR, "kubesim.sh")
    subprocess.run(["sh", sh, "start", d, "--pod-delay", "0.1"], check=True, timeout=60)
    try:
        env = {}
        for line in open(os.path.join(d, "env")):
            k, v = line.replace("export ", "").strip().split("=", 1)
            env[k] = v
        assert os.path.exists(env["KUBECONFIG"])
        if KUBECTL:
            r = subprocess.run([KUBECTL, "get", "ns"], capture_output=True, text=True,
                               env=dict(os.environ, HOME=d, **env), timeout=30)
            assert r.returncode == 0 and "kube-system" in r.stdout, r.stderr
    finally:
        subprocess.run(["sh", sh, "stop", d], check=True, timeout=30)
    assert not os.path.exists(os.path.join(d, "pid"))
