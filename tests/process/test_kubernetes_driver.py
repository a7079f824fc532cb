"""The kubernetes, openshift and openshiftpods drivers end to end against
the Kubernetes API server simulator (tests/sim/kubernetes), with Zuul's
side played by conftest's Zuul class: the public configs upstream accepts
(tests/data/configs/wild, see its README for their sources) serve their
labels, a namespace node's credential works with kubectl, and faults
(image pull errors, unschedulable pods, an API server that stops
answering, a launcher killed mid-launch) end in fulfilled or cleanly
failed requests with nothing left behind."""
import base64
import json
import os
import shutil
import signal
import subprocess

import pytest
import yaml

from conftest import TOP, wait_for
from fakecloud import FAST
from kubesim_fixture import KubeSim

WILD = os.path.join(TOP, "tests", "data", "configs", "wild")
KUBECTL = shutil.which("kubectl")

# The wild configs' contexts, each pointed at the simulator by the
# kubeconfig the tests write.
CONTEXTS = [
    "/k1s-i-02845a58f1aca78a7-zuul-wazo-community/managed",
    "/k1s-i-05f0ac2ac6898b2d1-zuul-wazo-community/managed",
    "thoth-zuul/paas-psi-redhat-com:443/system:serviceaccount:thoth-zuul:nodepool",
    "/open-paas-redhat-com:443/cgoern",
    "kubesim",
]


@pytest.fixture
def sim(tmp_path, monkeypatch, request):
    # parametrized (indirect) with a Kubernetes version: "1.23" makes token
    # secrets for every service account (OpenShift up to 4.15), "1.28" not
    version = getattr(request, "param", "1.28")
    s = KubeSim(tmp_path, {"pod_delay": 0.2, "token_delay": 0.05,
                           "namespace_delete_delay": 0.1, "kubernetes_version": version,
                           "namespaces": ["default", "kube-system", "thoth-zuul", "main"]}
                ).start()
    monkeypatch.setenv("KUBECONFIG", write_kubeconfig(s, str(tmp_path / "kubeconfig")))
    yield s
    s.stop()


def write_kubeconfig(sim, path, current="kubesim"):
    i = sim.info
    cfg = {"apiVersion": "v1", "kind": "Config",
           "clusters": [{"name": "sim", "cluster": {"server": i["server"],
                                                    "certificate-authority": i["ca"]}}],
           "users": [{"name": "admin", "user": {"token": i["token"]}}],
           "contexts": [{"name": c, "context": {"cluster": "sim", "user": "admin"}}
                        for c in CONTEXTS],
           "current-context": current}
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def wild_config(deployment, name, **provider_extra):
    with open(os.path.join(WILD, name)) as f:
        cfg = yaml.safe_load(f)
    for k in ("zookeeper-servers", "zookeeper-tls", "webapp", "images-dir", "elements-dir"):
        cfg.pop(k, None)
    for p in cfg.get("providers", []):
        p.update(provider_extra)
    cfg.update(FAST)
    return cfg


def k8s_config(labels, driver="kubernetes", provider=None, pool=None):
    prov = {"name": "k8s", "driver": driver, "context": "kubesim", "launch-retries": 1,
            "pools": [dict({"name": "main", "labels": labels}, **(pool or {}))]}
    prov.update(provider or {})
    cfg = {"labels": [{"name": l["name"]} for l in labels], "providers": [prov]}
    cfg.update(FAST)
    return cfg


def serve(deployment, zuul, sim, label, timeout=30):
    rid = zuul.submit([label])
    req = zuul.wait_request(rid, timeout=timeout)
    assert req["state"] == "fulfilled", req
    (nid,) = req["nodes"]
    return rid, nid, zuul.node(nid)


def release_and_check_gone(zuul, sim, rid, timeout=20):
    held = zuul.accept(rid)
    zuul.finish(held)
    wait_for(lambda: zuul.nodes() == {}, timeout=timeout, what="nodes deleted")
    wait_for(lambda: sim.leaks([]) == [], timeout=timeout, what="nothing left in the cluster")


def test_kubernetes_wild_config_pod_label(deployment, zuul, sim):
    """opentelekomcloud-scs: a kubernetes provider with no context (the
    current context) and a pod label with cpu and memory."""
    cfg = wild_config(deployment, "opentelekomcloud-scs__zuul-config__nodepool__nodepool__at-059b65b.yaml")
    p = deployment.start_launcher("scsinfra", deployment.write_config(cfg))
    rid, nid, node = serve(deployment, zuul, sim, "pod-fedora-38")
    ns = "zuul-" + nid
    assert node["external_id"] == ns
    assert node["connection_type"] == "kubectl"
    assert node["interface_ip"] == "pod-fedora-38"
    assert node["host_id"] == "sim-node-1"
    assert node["resources"] == {"cores": 2, "instances": 1, "ram": 2048}
    cred = node["connection_port"]
    assert cred["namespace"] == ns and cred["pod"] == "pod-fedora-38"
    assert cred["host"] == sim.info["server"] and cred["skiptls"] is False
    # base64, as upstream hands the token secret's ca.crt on and Zuul
    # writes it: certificate-authority-data
    assert base64.b64decode(cred["ca_crt"]).decode() == open(sim.info["ca"]).read()
    pods = [x for x in sim.pods() if x["metadata"]["namespace"] == ns]
    assert len(pods) == 1
    spec = pods[0]["spec"]["containers"][0]
    assert spec["image"] == "quay.io/opentelekomcloud/zuul-fedora:post_38"
    assert spec["resources"]["requests"] == {"cpu": 2, "memory": "2048Mi"}
    assert pods[0]["metadata"]["labels"]["nodepool_node_id"] == nid
    release_and_check_gone(zuul, sim, rid)
    assert p.alive()


@pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")
def test_namespace_node_credential_works_with_kubectl(deployment, zuul, sim):
    cfg = k8s_config([{"name": "ns", "type": "namespace"}])
    deployment.start_launcher("k8s", deployment.write_config(cfg))
    rid, nid, node = serve(deployment, zuul, sim, "ns")
    assert node["connection_type"] == "namespace"
    cred = node["connection_port"]
    assert set(cred) == {"name", "namespace", "host", "skiptls", "token", "user", "ca_crt"}
    assert cred["user"] == "zuul-worker" and cred["namespace"] == "main-" + nid
    ca = os.path.join(deployment.dir, "node-ca.crt")
    with open(ca, "w") as f:
        f.write(base64.b64decode(cred["ca_crt"]).decode())
    env = dict(os.environ, HOME=deployment.dir, KUBECONFIG="/dev/null")
    r = subprocess.run([KUBECTL, "--token", cred["token"], "--server", cred["host"],
                        "--certificate-authority", ca, "get", "pods", "-n",
                        cred["namespace"]], capture_output=True, text=True, env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "No resources found in %s namespace." % cred["namespace"] in r.stderr
    # The credential is confined to its namespace.
    r = subprocess.run([KUBECTL, "--token", cred["token"], "--server", cred["host"],
                        "--certificate-authority", ca, "get", "pods", "-n", "default"],
                       capture_output=True, text=True, env=env, timeout=30)
    assert r.returncode != 0 and "Forbidden" in r.stderr
    release_and_check_gone(zuul, sim, rid)


@pytest.mark.parametrize("sim", ["1.23", "1.28"], indirect=True)
def test_openshift_wild_config_project_and_pod(deployment, zuul, sim):
    """thoth-station (openshift): a project label and a pod label, against
    both service account behaviours (token secrets made by the cluster
    before 1.24, not after); the node's token works in its project."""
    cfg = wild_config(deployment, "thoth-station__zuul-config__nodepool__thoth__at-9479f30.yaml")
    for l in cfg["labels"]:
        l["min-ready"] = 0
    deployment.start_launcher("openpaas", deployment.write_config(cfg))
    rid1, nid1, n1 = serve(deployment, zuul, sim, "openshift-project")
    assert n1["connection_type"] == "project"
    assert n1["external_id"] == "zuul-ci-" + nid1
    cred = n1["connection_port"]
    r = subprocess.run(["kubectl", "--token", cred["token"], "--server", cred["host"],
                        "--certificate-authority", sim.info["ca"], "get", "pods", "-n",
                        cred["namespace"], "-o", "json"], capture_output=True, text=True,
                       timeout=30, env=dict(os.environ, HOME=sim.dir, KUBECONFIG="/dev/null"))
    assert r.returncode == 0 and json.loads(r.stdout)["items"] == [], r.stderr
    rid2, nid2, n2 = serve(deployment, zuul, sim, "thoth-python-36-centos7-pod")
    assert n2["connection_type"] == "kubectl"
    assert n2["interface_ip"] == "thoth-python-36-centos7-pod"
    ns = {x["metadata"]["name"]: x for x in sim.namespaces()}
    assert "zuul-ci-" + nid1 in ns and "zuul-ci-" + nid2 in ns
    ann = ns["zuul-ci-" + nid1]["metadata"]["annotations"]
    assert ann["openshift.io/requester"] == "kubernetes-admin"
    held = zuul.accept(rid1) + zuul.accept(rid2)
    zuul.finish(held)
    wait_for(lambda: zuul.nodes() == {}, what="nodes deleted")
    wait_for(lambda: not [n for n in sim.namespaces()
                          if n["metadata"]["name"].startswith("zuul-ci-")],
             what="projects deleted")


@pytest.mark.parametrize("sim", ["1.23", "1.28"], indirect=True)
def test_openshiftpods_wild_config(deployment, zuul, sim):
    """thoth-station (openshiftpods): pods in the existing project named by
    the pool; min-ready nodes are made at start."""
    cfg = wild_config(deployment, "thoth-station__zuul-config__nodepool__thoth.yaml")
    deployment.start_launcher("psi", deployment.write_config(cfg))
    # min-ready 1 for thoth-coala, thoth-pylint, thoth-pytest, thoth-pytest-py37
    wait_for(lambda: len([n for n in zuul.nodes().values() if n["state"] == "ready"]) == 4,
             timeout=30, what="4 min-ready nodes")
    rid, nid, node = serve(deployment, zuul, sim, "thoth-mypy")
    assert node["external_id"] == "thoth-mypy-" + nid
    assert node["connection_type"] == "kubectl"
    cred = node["connection_port"]
    assert cred["namespace"] == "thoth-zuul" and cred["pod"] == "thoth-mypy-" + nid
    assert cred["token"] == sim.info["token"]  # the provider's own
    pods = {(x["metadata"]["namespace"], x["metadata"]["name"]) for x in sim.pods()}
    assert ("thoth-zuul", "thoth-mypy-" + nid) in pods
    held = zuul.accept(rid)
    zuul.finish(held)
    wait_for(lambda: ("thoth-zuul", "thoth-mypy-" + nid) not in
             {(x["metadata"]["namespace"], x["metadata"]["name"]) for x in sim.pods()},
             what="pod deleted")


def test_openshiftpods_wild_config_without_labels_starts(deployment, zuul, sim):
    """TinxHQ: two openshiftpods providers with no labels (extra-labels
    elsewhere): each launcher starts, registers its pool and idles."""
    cfg = wild_config(deployment,
                      "TinxHQ__wazo-production-sf-config__nodepool___local_hypervisor_k1s.yaml")
    path = deployment.write_config(cfg)
    names = [p["name"] for p in cfg["providers"]]
    procs = [deployment.start_launcher(n, path) for n in names]
    wait_for(lambda: len(zuul.pools()) == 2, what="2 pools registered")
    assert all(p.alive() for p in procs)


def test_image_pull_error_fails_cleanly(deployment, zuul, sim):
    sim.behavior(image_outcomes={"does-not-exist": "image_pull"})
    cfg = k8s_config([{"name": "bad", "type": "pod", "image": "quay.io/does-not-exist:1"}],
                     provider={"launch-retries": 2})
    p = deployment.start_launcher("k8s", deployment.write_config(cfg))
    rid = zuul.submit(["bad"])
    req = zuul.wait_request(rid, timeout=30)
    assert req["state"] == "failed"
    assert "image pull failed: ImagePullBackOff" in p.output()
    wait_for(lambda: zuul.nodes() == {} and sim.leaks([]) == [], what="nothing left")


def test_unschedulable_pod_fails_at_boot_timeout(deployment, zuul, sim):
    sim.behavior(pod_outcome="unschedulable")
    cfg = k8s_config([{"name": "big", "type": "pod", "image": "fedora", "cpu": 64}],
                     provider={"boot-timeout": 1})
    p = deployment.start_launcher("k8s", deployment.write_config(cfg))
    rid = zuul.submit(["big"])
    req = zuul.wait_request(rid, timeout=30)
    assert req["state"] == "failed"
    out = p.output()
    assert "not running after 1 s (boot-timeout): not scheduled: Unschedulable" in out
    wait_for(lambda: zuul.nodes() == {} and sim.leaks([]) == [], what="nothing left")


def test_api_server_stops_answering(deployment, zuul, sim):
    """Pod creates hang: the attempt times out (launch-timeout), its
    namespace is deleted, the request fails; once the server answers
    again the next request is served."""
    fid = sim.fault(method="POST", path="/pods$", hang=True)
    cfg = k8s_config([{"name": "pod", "type": "pod", "image": "fedora"}],
                     provider={"launch-timeout": 2})
    deployment.start_launcher("k8s", deployment.write_config(cfg))
    rid = zuul.submit(["pod"])
    req = zuul.wait_request(rid, timeout=30)
    assert req["state"] == "failed"
    wait_for(lambda: zuul.nodes() == {} and sim.leaks([]) == [], what="nothing left")
    sim.clear_fault(fid)
    rid, nid, node = serve(deployment, zuul, sim, "pod")
    release_and_check_gone(zuul, sim, rid)


def test_transient_500_is_retried(deployment, zuul, sim):
    sim.fault(method="POST", path="/rolebindings$", status=500, count=1)
    cfg = k8s_config([{"name": "ns", "type": "namespace"}], provider={"launch-retries": 2})
    deployment.start_launcher("k8s", deployment.write_config(cfg))
    rid, nid, node = serve(deployment, zuul, sim, "ns")
    assert node["external_id"] == "main-" + nid
    assert [n["metadata"]["name"] for n in sim.namespaces()
            if n["metadata"].get("labels", {}).get("nodepool_node_id")] == ["main-" + nid]
    release_and_check_gone(zuul, sim, rid)


def test_launcher_killed_mid_launch_leaves_nothing(deployment, zuul, sim):
    """SIGKILL while pods are Pending: a new launcher adopts the node and
    goes on with its namespace and pod (launches survive, issue 22), or,
    failing that, deletes what is left (by the labels) and serves the
    request again."""
    sim.behavior(pod_delay=15)
    cfg = k8s_config([{"name": "pod", "type": "pod", "image": "fedora"}])
    cfg["zookeeper-timeout"] = 4  # the dead launcher's locks go sooner
    path = deployment.write_config(cfg)
    p = deployment.start_launcher("k8s", path)
    rid = zuul.submit(["pod"])
    wait_for(lambda: [x for x in sim.pods()], timeout=20, what="a pod created")
    p.signal(signal.SIGKILL)
    p.p.wait()
    sim.behavior(pod_delay=0.2)
    deployment.start_launcher("k8s", path)
    req = zuul.wait_request(rid, timeout=60)
    assert req["state"] in ("fulfilled", "failed")
    live = set(req["nodes"]) if req["state"] == "fulfilled" else set()
    wait_for(lambda: sim.leaks(live) == [], timeout=30, what="leaked namespace deleted")
    if req["state"] == "fulfilled":
        release_and_check_gone(zuul, sim, rid)


def b64file(path):
    import base64
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def test_kubeconfig_client_certificate_data(deployment, zuul, sim, tmp_path, monkeypatch):
    """A context whose user has client-certificate-data/client-key-data
    and whose cluster has certificate-authority-data (all embedded), found
    in the second file of a KUBECONFIG list."""
    i = sim.info
    other = tmp_path / "other.yaml"
    other.write_text(json.dumps({"apiVersion": "v1", "kind": "Config", "contexts": [],
                                 "clusters": [], "users": []}))
    kc = tmp_path / "certs.yaml"
    kc.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {
            "server": i["server"], "certificate-authority-data": b64file(i["ca"])}}],
        "users": [{"name": "u", "user": {"client-certificate-data": b64file(i["client_cert"]),
                                         "client-key-data": b64file(i["client_key"])}}],
        "contexts": [{"name": "by-cert", "context": {"cluster": "c", "user": "u"}}]}))
    monkeypatch.setenv("KUBECONFIG", "%s:%s" % (other, kc))
    cfg = k8s_config([{"name": "ns", "type": "namespace"}], provider={"context": "by-cert"})
    deployment.start_launcher("k8s", deployment.write_config(cfg))
    rid, nid, node = serve(deployment, zuul, sim, "ns")
    users = {c["user"] for c in sim.ctl("GET", "/calls/log")
             if c["path"].startswith("/api/v1/namespaces")}
    assert "kubernetes-admin" in users  # the certificate's CN
    release_and_check_gone(zuul, sim, rid)


def test_in_cluster_service_account(deployment, zuul, sim, tmp_path, monkeypatch):
    """No context and no kubeconfig: the in-cluster service account."""
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text(sim.info["token"] + "\n")
    shutil.copy(sim.info["ca"], str(sa / "ca.crt"))
    (sa / "namespace").write_text("default")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(sim.info["port"]))
    monkeypatch.setenv("NODEPOOLD_K8S_SA_DIR", str(sa))
    cfg = k8s_config([{"name": "ns", "type": "namespace"}])
    del cfg["providers"][0]["context"]
    p = deployment.start_launcher("k8s", deployment.write_config(cfg))
    rid, nid, node = serve(deployment, zuul, sim, "ns")
    assert node["connection_port"]["host"] == "https://127.0.0.1:%d" % sim.info["port"]
    assert "context in-cluster" in p.output()
    release_and_check_gone(zuul, sim, rid)


def test_exec_plugin_is_refused_clearly(deployment, sim, tmp_path, monkeypatch):
    kc = tmp_path / "exec.yaml"
    kc.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": sim.info["server"]}}],
        "users": [{"name": "u", "user": {"exec": {"command": "aws"}}}],
        "contexts": [{"name": "eks", "context": {"cluster": "c", "user": "u"}}]}))
    monkeypatch.setenv("KUBECONFIG", str(kc))
    cfg = k8s_config([{"name": "ns", "type": "namespace"}], provider={"context": "eks"})
    p = deployment.start_launcher("k8s", deployment.write_config(cfg))
    wait_for(lambda: "provider k8s: user u uses an exec plugin: nodepoold supports tokens, "
             "token files and client certificates only" in p.output(), what="the reason logged")
    assert p.alive()


def test_pool_quota_max_cores(deployment, zuul, sim):
    """max-cores 3 with 2-core pods: one node at a time; the second request
    is served once the first node is gone. The node's resources carry the
    label's cpu and memory."""
    cfg = k8s_config([{"name": "pod", "type": "pod", "image": "fedora", "cpu": 2,
                       "memory": 1024}], pool={"max-cores": 3})
    deployment.start_launcher("k8s", deployment.write_config(cfg))
    rid1, nid1, n1 = serve(deployment, zuul, sim, "pod")
    assert n1["resources"] == {"cores": 2, "instances": 1, "ram": 1024}
    rid2 = zuul.submit(["pod"])
    wait_for(lambda: zuul.request(rid2)["state"] == "pending", what="second request pending")
    assert len([p for p in sim.pods()]) == 1
    held = zuul.accept(rid1)
    zuul.finish(held)
    req2 = zuul.wait_request(rid2, timeout=30)
    assert req2["state"] == "fulfilled"
    release_and_check_gone(zuul, sim, rid2)


def test_pod_label_keys_reach_the_pod(deployment, zuul, sim):
    label = {"name": "full", "type": "pod", "image": "docker.io/fedora:40",
             "image-pull": "Always", "python-path": "/usr/bin/python3", "shell-type": "csh",
             "cpu": 2, "memory": 512, "cpu-limit": 4, "storage": 100, "gpu": 1,
             "gpu-resource": "example.com/gpu", "env": [{"name": "A", "value": "1"}],
             "node-selector": {"disk": "ssd"}, "privileged": True,
             "scheduler-name": "custom", "volumes": [{"name": "v", "emptyDir": {}}],
             "volume-mounts": [{"name": "v", "mountPath": "/v"}],
             "labels": {"team": "ci"}, "dynamic-labels": {"req": "{request.id}"},
             "annotations": {"note": "x"}}
    cfg = k8s_config([label], pool={"default-label-memory-limit": 2048})
    deployment.start_launcher("k8s", deployment.write_config(cfg))
    rid, nid, node = serve(deployment, zuul, sim, "full")
    assert node["python_path"] == "/usr/bin/python3" and node["shell_type"] == "csh"
    (pod,) = [p for p in sim.pods() if p["metadata"]["namespace"] == "main-" + nid]
    md, spec = pod["metadata"], pod["spec"]
    assert md["labels"]["team"] == "ci" and md["labels"]["req"] == rid
    assert md["labels"]["nodepool_node_label"] == "full"
    assert md["annotations"] == {"note": "x"}
    c = spec["containers"][0]
    assert c["image"] == "docker.io/fedora:40" and c["imagePullPolicy"] == "Always"
    assert c["env"] == [{"name": "A", "value": "1"}]
    assert c["resources"]["requests"] == {"cpu": 2, "memory": "512Mi",
                                          "ephemeral-storage": "100M"}
    assert c["resources"]["limits"] == {"cpu": 4, "memory": "2048Mi",
                                        "ephemeral-storage": "100M", "example.com/gpu": "1"}
    assert c["securityContext"] == {"privileged": True}
    # the label's mounts and volumes, then the service account token's
    # that the API server's admission adds
    assert c["volumeMounts"][0] == {"name": "v", "mountPath": "/v"}
    assert c["volumeMounts"][1]["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"
    assert spec["nodeSelector"] == {"disk": "ssd"} and spec["schedulerName"] == "custom"
    assert spec["volumes"][0] == {"name": "v", "emptyDir": {}}
    assert spec["volumes"][1]["name"].startswith("kube-api-access-")
    release_and_check_gone(zuul, sim, rid)


def test_throttled_429_is_waited_out(deployment, zuul, sim):
    """A 429 with Retry-After: the call is repeated after the delay (the
    HTTP client's), not failed."""
    fid = sim.fault(method="POST", path="/api/v1/namespaces$", status=429, retry_after=1,
                    count=1)
    cfg = k8s_config([{"name": "ns", "type": "namespace"}])
    deployment.start_launcher("k8s", deployment.write_config(cfg))
    rid, nid, node = serve(deployment, zuul, sim, "ns")
    assert sim.ctl("GET", "/faults/%d" % fid)["hits"] == 1
    posts = [c for c in sim.ctl("GET", "/calls/log")
             if c["method"] == "POST" and c["path"] == "/api/v1/namespaces"]
    assert len(posts) == 2 and posts[1]["t"] - posts[0]["t"] >= 0.9
    release_and_check_gone(zuul, sim, rid)


def test_outage_during_delete_then_recovery(deployment, zuul, sim):
    """Every API call hangs while a used node is being deleted: nothing is
    lost; once the server answers again the namespace and the node go."""
    cfg = k8s_config([{"name": "ns", "type": "namespace"}])
    p = deployment.start_launcher("k8s", deployment.write_config(cfg))
    rid, nid, node = serve(deployment, zuul, sim, "ns")
    fid = sim.fault(path=".", hang=True)
    held = zuul.accept(rid)
    zuul.finish(held)
    wait_for(lambda: sim.ctl("GET", "/faults/%d" % fid)["hits"] > 0, what="delete tried")
    assert "main-" + nid in [n["metadata"]["name"] for n in sim.namespaces()]
    assert zuul.node(nid) is not None
    sim.clear_fault(fid)
    wait_for(lambda: zuul.nodes() == {}, timeout=30, what="node deleted")
    wait_for(lambda: sim.leaks([]) == [], what="namespace deleted")
    assert p.alive()


def test_leaked_objects_are_deleted_by_their_labels(deployment, zuul, sim):
    """Objects a dead launcher left: a namespace (kubernetes), a project
    (openshift: its metadata in the description) and a pod
    (openshiftpods), each naming a node that does not exist, are deleted;
    another provider's and unlabelled ones are left alone."""
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config
    kc = k8s.Configuration()
    k8s_config.load_kube_config(config_file=os.environ["KUBECONFIG"], context="kubesim",
                                client_configuration=kc)
    core = k8s.CoreV1Api(k8s.ApiClient(kc))

    def labels(provider, pool="main"):
        return {"nodepool_node_id": "0000099999", "nodepool_provider_name": provider,
                "nodepool_pool_name": pool}
    core.create_namespace({"metadata": {"name": "main-0000099999", "labels": labels("k8s")}})
    core.create_namespace({"metadata": {"name": "other-0000099999",
                                        "labels": labels("someone-else")}})
    core.create_namespace({"metadata": {"name": "plain"}})
    meta = json.dumps(labels("os"), sort_keys=True, separators=(",", ":"))
    kc_api = k8s.ApiClient(kc)
    kc_api.call_api("/apis/project.openshift.io/v1/projectrequests", "POST",
                    body={"apiVersion": "project.openshift.io/v1", "kind": "ProjectRequest",
                          "metadata": {"name": "main-0000099998"},
                          "description": "nodepool:" + meta}, auth_settings=["BearerToken"],
                    response_type="object")
    pod = {"metadata": {"name": "leak-0000099999", "labels": labels("pods", "thoth-zuul")},
           "spec": {"containers": [{"name": "c", "image": "fedora"}]}}
    core.create_namespaced_pod("thoth-zuul", pod)
    path = deployment.write_config({
        "labels": [{"name": "ns"}],
        "providers": [
            {"name": "k8s", "driver": "kubernetes", "context": "kubesim",
             "pools": [{"name": "main", "labels": [{"name": "ns", "type": "namespace"}]}]},
            {"name": "os", "driver": "openshift", "context": "kubesim",
             "pools": [{"name": "main", "labels": [{"name": "ns", "type": "project"}]}]},
            {"name": "pods", "driver": "openshiftpods", "context": "kubesim",
             "pools": [{"name": "thoth-zuul", "labels": [{"name": "ns", "image": "f"}]}]}],
        **FAST})
    for name in ("k8s", "os", "pods"):
        deployment.start_launcher(name, path)
    names = lambda: {n["metadata"]["name"] for n in sim.namespaces()}
    wait_for(lambda: not {"main-0000099999", "main-0000099998"} & names(), timeout=30,
             what="leaked namespace and project deleted")
    wait_for(lambda: not [p for p in sim.pods() if p["metadata"]["name"] == "leak-0000099999"],
             timeout=30, what="leaked pod deleted")
    assert {"other-0000099999", "plain", "thoth-zuul"} <= names()
