"""The Kubernetes simulator answers as the API reference documents, call by
call, for the calls upstream Nodepool's drivers make
(nodepool/driver/openshift/provider.py: ProjectRequest, ServiceAccount and
its token secrets, authorization.openshift.io RoleBinding, Project list and
delete; kubernetes and openshiftpods: pods), driven through Debian's
python3-kubernetes (its typed and dynamic clients, its watch.Watch) and
kubectl. Both service account behaviours are served: Kubernetes 1.23 (and
OpenShift up to 4.15) where a token secret is made for every account and
listed under its `secrets`, and 1.24+ where none is. The watch follows the
API concepts page (resourceVersion, bookmarks, 410 Expired).
See tests/sim/kubernetes/README.md for the reference pages."""
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
from kubernetes import watch as k8s_watch  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402
from kubernetes.dynamic import DynamicClient  # noqa: E402

from conftest import wait_for  # noqa: E402
from kubesim_fixture import KubeSim  # noqa: E402

KUBECTL = shutil.which("kubectl")
USER = "zuul-worker"


def start(tmp_path, version, **cfg):
    base = {"pod_delay": 0.3, "token_delay": 0.1, "namespace_delete_delay": 0.2,
            "kubernetes_version": version, "bookmark_interval": 0.5}
    base.update(cfg)
    return KubeSim(tmp_path, base).start()


@pytest.fixture
def sim123(tmp_path):
    s = start(tmp_path, "1.23")
    yield s
    s.stop()


@pytest.fixture
def sim128(tmp_path):
    s = start(tmp_path, "1.28")
    yield s
    s.stop()


def clients(sim):
    cfg = k8s.Configuration()
    k8s_config.load_kube_config(config_file=sim.info["kubeconfig"], context="kubesim",
                                client_configuration=cfg)
    ac = k8s.ApiClient(configuration=cfg)
    return k8s.CoreV1Api(ac), DynamicClient(ac), ac


def token_client(sim, token):
    cfg = k8s.Configuration()
    cfg.host = sim.info["server"]
    cfg.ssl_ca_cert = sim.info["ca"]
    cfg.api_key = {"authorization": "Bearer " + token}
    return k8s.CoreV1Api(k8s.ApiClient(cfg))


def upstream_openshift_project(core, dyn, project):
    """upstream OpenshiftProvider.createProject + prepareProject, in order:
    a ProjectRequest, the service account, then the account re-read until
    one of the secrets it lists carries a token and ca.crt, then the
    authorization.openshift.io RoleBinding of admin. Returns the token."""
    preq = dyn.resources.get(api_version="project.openshift.io/v1", kind="ProjectRequest")
    preq.create(body={"apiVersion": "project.openshift.io/v1", "kind": "ProjectRequest",
                      "metadata": {"name": project}})
    core.create_namespaced_service_account(project, {
        "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": USER}})

    def token():
        sa = core.read_namespaced_service_account(USER, project)
        for ref in sa.secrets or []:
            secret = core.read_namespaced_secret(ref.name, project)
            data = secret.data or {}
            if data.get("token") and data.get("ca.crt"):
                return base64.b64decode(data["token"]).decode(), secret
        return None
    tok, secret = wait_for(token, timeout=10, what="the service account's token secret")
    rbs = dyn.resources.get(api_version="authorization.openshift.io/v1", kind="RoleBinding")
    rb = rbs.create(body={
        "apiVersion": "authorization.openshift.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "admin-0"}, "roleRef": {"name": "admin"},
        "subjects": [{"kind": "ServiceAccount", "name": USER, "namespace": project}],
        "userNames": ["system:serviceaccount:%s:%s" % (project, USER)]}, namespace=project)
    return tok, secret, rb


def test_version_1_23_token_secret_listed_on_the_service_account(sim123):
    """Issue 24's gap: before 1.24 (OpenShift up to 4.15) the token
    controller makes and lists a token secret for each service account;
    upstream's openshift driver waits for it."""
    core, dyn, _ = clients(sim123)
    v = core.api_client.call_api("/version", "GET", response_type=object, auth_settings=["BearerToken"],
                                 _return_http_data_only=True)
    assert (v["major"], v["minor"]) == ("1", "23") and v["gitVersion"].startswith("v1.23")
    tok, secret, _ = upstream_openshift_project(core, dyn, "zuul-ci-0000000001")
    sa = core.read_namespaced_service_account(USER, "zuul-ci-0000000001")
    names = [r.name for r in sa.secrets]
    # OpenShift lists the pull secret first, then the token secret; both
    # named <sa>-<kind>-<5 random characters>
    assert len(names) == 2
    assert names[0].startswith(USER + "-dockercfg-") and len(names[0]) == len(USER) + 16
    assert names[1].startswith(USER + "-token-") and len(names[1]) == len(USER) + 12
    assert [r.name for r in sa.image_pull_secrets] == [names[0]]
    assert secret.metadata.name == names[1]
    assert secret.type == "kubernetes.io/service-account-token"
    ann = secret.metadata.annotations
    assert ann["kubernetes.io/service-account.name"] == USER
    assert ann["kubernetes.io/service-account.uid"] == sa.metadata.uid
    assert set(secret.data) == {"token", "ca.crt", "namespace", "service-ca.crt"}
    assert base64.b64decode(secret.data["namespace"]).decode() == "zuul-ci-0000000001"
    assert base64.b64decode(secret.data["ca.crt"]).decode() == open(sim123.info["ca"]).read()
    pull = core.read_namespaced_secret(names[0], "zuul-ci-0000000001")
    assert pull.type == "kubernetes.io/dockercfg" and ".dockercfg" in pull.data
    # every namespace's "default" account has its own, too
    dflt = core.read_namespaced_service_account("default", "zuul-ci-0000000001")
    assert any(r.name.startswith("default-token-") for r in dflt.secrets)
    # the token is the account's: it may list pods in its project only
    sa_api = token_client(sim123, tok)
    assert sa_api.list_namespaced_pod("zuul-ci-0000000001").items == []
    with pytest.raises(ApiException) as e:
        sa_api.list_namespaced_pod("default")
    assert e.value.status == 403


def test_version_1_24_and_later_make_no_token_secret(sim128):
    core, dyn, _ = clients(sim128)
    preq = dyn.resources.get(api_version="project.openshift.io/v1", kind="ProjectRequest")
    preq.create(body={"apiVersion": "project.openshift.io/v1", "kind": "ProjectRequest",
                      "metadata": {"name": "p128"}})
    sa = core.create_namespaced_service_account("p128", {
        "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": USER}})
    assert sa.secrets is None
    time.sleep(0.3)  # longer than token_delay: nothing appears later either
    assert core.read_namespaced_service_account(USER, "p128").secrets is None
    assert core.list_namespaced_secret("p128").items == []
    # a token secret asked for explicitly is filled (what nodepoold does)
    core.create_namespaced_secret("p128", {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
        "metadata": {"name": USER, "annotations": {"kubernetes.io/service-account.name": USER}}})
    s = wait_for(lambda: (lambda s: s if (s.data or {}).get("token") else None)(
        core.read_namespaced_secret(USER, "p128")), timeout=10, what="token")
    assert set(s.data) >= {"token", "ca.crt", "namespace"}


def test_openshift_authorization_rolebinding(sim128):
    """Issue 24's gap: upstream's openshift driver binds admin through
    authorization.openshift.io/v1; the simulator serves it (discovery,
    create, get, list, delete) as a view of the rbac RoleBinding, and the
    binding grants what the admin ClusterRole grants."""
    core, dyn, ac = clients(sim128)
    groups = ac.call_api("/apis", "GET", response_type=object, auth_settings=["BearerToken"],
                    _return_http_data_only=True)
    assert "authorization.openshift.io" in [g["name"] for g in groups["groups"]]
    preq = dyn.resources.get(api_version="project.openshift.io/v1", kind="ProjectRequest")
    preq.create(body={"apiVersion": "project.openshift.io/v1", "kind": "ProjectRequest",
                      "metadata": {"name": "zuul-ci-0000000002"}})
    core.create_namespaced_service_account("zuul-ci-0000000002", {
        "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": USER}})
    core.create_namespaced_secret("zuul-ci-0000000002", {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
        "metadata": {"name": USER, "annotations": {"kubernetes.io/service-account.name": USER}}})
    s = wait_for(lambda: (lambda s: s if (s.data or {}).get("token") else None)(
        core.read_namespaced_secret(USER, "zuul-ci-0000000002")), timeout=10, what="token")
    sa_api = token_client(sim128, base64.b64decode(s.data["token"]).decode())
    with pytest.raises(ApiException) as e:
        sa_api.list_namespaced_pod("zuul-ci-0000000002")
    assert e.value.status == 403  # not bound yet
    rbs = dyn.resources.get(api_version="authorization.openshift.io/v1", kind="RoleBinding")
    rb = rbs.create(body={
        "apiVersion": "authorization.openshift.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "admin-0"}, "roleRef": {"name": "admin"},
        "subjects": [{"kind": "ServiceAccount", "name": USER,
                      "namespace": "zuul-ci-0000000002"}],
        "userNames": ["system:serviceaccount:zuul-ci-0000000002:%s" % USER]},
        namespace="zuul-ci-0000000002")
    assert (rb.kind, rb.apiVersion) == ("RoleBinding", "authorization.openshift.io/v1")
    assert rb.roleRef.name == "admin" and rb.roleRef.namespace is None
    assert rb.userNames == ["system:serviceaccount:zuul-ci-0000000002:%s" % USER]
    assert rb.groupNames is None
    assert rb.metadata.uid and rb.metadata.resourceVersion and rb.metadata.creationTimestamp
    assert [s_.name for s_ in rb.subjects] == [USER]
    # the rbac view: a RoleBinding of the ClusterRole admin
    rbac = k8s.RbacAuthorizationV1Api(ac).read_namespaced_role_binding(
        "admin-0", "zuul-ci-0000000002")
    assert (rbac.role_ref.kind, rbac.role_ref.name) == ("ClusterRole", "admin")
    assert [(x.kind, x.name, x.namespace) for x in rbac.subjects] == [
        ("ServiceAccount", USER, "zuul-ci-0000000002")]
    assert rbs.get(name="admin-0", namespace="zuul-ci-0000000002").roleRef.name == "admin"
    assert [i.metadata.name for i in rbs.get(namespace="zuul-ci-0000000002").items] == [
        "admin-0"]
    assert sa_api.list_namespaced_pod("zuul-ci-0000000002").items == []
    with pytest.raises(ApiException) as e:
        rbs.create(body={"apiVersion": "authorization.openshift.io/v1", "kind": "RoleBinding",
                         "metadata": {"name": "admin-0"}, "roleRef": {"name": "admin"}},
                   namespace="zuul-ci-0000000002")
    assert e.value.status == 409
    rbs.delete(name="admin-0", namespace="zuul-ci-0000000002")
    with pytest.raises(ApiException) as e:
        sa_api.list_namespaced_pod("zuul-ci-0000000002")
    assert e.value.status == 403


def test_upstream_openshift_list_and_cleanup(sim123):
    """upstream listNodes (Project list by kind) and cleanupNode /
    waitForNodeCleanup (Project delete, then get until it fails)."""
    core, dyn, _ = clients(sim123)
    upstream_openshift_project(core, dyn, "main-0000000003")
    projects = dyn.resources.get(api_version="v1", kind="Project")
    items = projects.get().items
    p = [i for i in items if i.metadata.name == "main-0000000003"][0]
    assert p.kind == "Project" and p.status.phase == "Active"
    assert p.spec.finalizers == ["kubernetes"]
    assert p.metadata.annotations["openshift.io/requester"] == "kubernetes-admin"
    projects.delete(name="main-0000000003")

    def gone():
        try:
            projects.get(name="main-0000000003")
        except ApiException as e:
            return e.status == 404
        return False
    wait_for(gone, timeout=10, what="project gone")


def test_pod_has_the_documented_members(sim128):
    """A pod as upstream's createPod sends it: the answer carries the
    defaults the Pod reference documents, and once Running the status
    members a client reads (phase, conditions, IPs, container states)."""
    core, _, _ = clients(sim128)
    core.create_namespace({"metadata": {"name": "pods"}})
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fedora-0000000004"},
            "spec": {"containers": [{
                "name": "fedora", "image": "docker.io/fedora:40",
                "imagePullPolicy": "IfNotPresent", "command": ["/bin/sh", "-c"],
                "args": ["while true; do sleep 30; done;"], "env": [],
                "resources": {"requests": {"cpu": 1, "memory": "512Mi"},
                              "limits": {"cpu": 1, "memory": "512Mi"}}}],
                "imagePullSecrets": [], "restartPolicy": "Never"}}
    pod = core.create_namespaced_pod("pods", body)
    spec, c = pod.spec, pod.spec.containers[0]
    assert spec.restart_policy == "Never"
    assert (spec.dns_policy, spec.scheduler_name, spec.service_account_name) == (
        "ClusterFirst", "default-scheduler", "default")
    assert spec.termination_grace_period_seconds == 30 and spec.priority == 0
    assert spec.enable_service_links is True
    assert spec.preemption_policy == "PreemptLowerPriority"
    assert sorted(t.key for t in spec.tolerations) == [
        "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"]
    assert all(t.toleration_seconds == 300 and t.effect == "NoExecute"
               for t in spec.tolerations)
    assert (c.termination_message_path, c.termination_message_policy) == (
        "/dev/termination-log", "File")
    assert c.volume_mounts[0].mount_path == "/var/run/secrets/kubernetes.io/serviceaccount"
    assert spec.volumes[0].projected.sources[0].service_account_token.path == "token"
    assert pod.status.phase == "Pending" and pod.status.qos_class == "Guaranteed"
    pod = wait_for(lambda: (lambda p: p if p.status.phase == "Running" else None)(
        core.read_namespaced_pod("fedora-0000000004", "pods")), timeout=10, what="Running")
    st = pod.status
    assert pod.spec.node_name == "sim-node-1"
    assert st.host_ip and st.pod_ip and st.start_time
    assert [ip.ip for ip in st.pod_i_ps] == [st.pod_ip]
    assert {x.type: x.status for x in st.conditions} == {
        "Initialized": "True", "Ready": "True", "ContainersReady": "True",
        "PodScheduled": "True"}
    cs = st.container_statuses[0]
    assert cs.ready and cs.started and cs.restart_count == 0
    assert cs.container_id.startswith("containerd://")
    assert cs.image_id.startswith("docker.io/library/fedora@sha256:") or \
        cs.image_id.startswith("docker.io/fedora@sha256:")
    assert cs.state.running.started_at is not None
    # a pod without resources is BestEffort; only limits: requests follow
    body["metadata"]["name"] = "be"
    body["spec"]["containers"][0]["resources"] = {}
    assert core.create_namespaced_pod("pods", body).status.qos_class == "BestEffort"
    body["metadata"]["name"] = "lim"
    body["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1", "memory": "1Gi"}}
    p = core.create_namespaced_pod("pods", body)
    assert p.spec.containers[0].resources.requests == {"cpu": "1", "memory": "1Gi"}
    assert p.status.qos_class == "Guaranteed"


def test_openshiftpods_calls(sim128):
    """upstream openshiftpods: pods created, read, listed and deleted in an
    existing project with the provider's own credentials."""
    core, dyn, _ = clients(sim128)
    dyn.resources.get(api_version="project.openshift.io/v1", kind="ProjectRequest").create(
        body={"apiVersion": "project.openshift.io/v1", "kind": "ProjectRequest",
              "metadata": {"name": "zuul-pods"}})
    core.create_namespaced_pod("zuul-pods", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "fedora-0000000005", "labels": {"nodepool_node_id": "0000000005"}},
        "spec": {"containers": [{"name": "fedora", "image": "docker.io/fedora:40"}]}})
    listed = core.list_namespaced_pod("zuul-pods", label_selector="nodepool_node_id")
    assert [p.metadata.name for p in listed.items] == ["fedora-0000000005"]
    assert listed.metadata.resource_version
    d = core.delete_namespaced_pod("fedora-0000000005", "zuul-pods")
    assert d.metadata.deletion_timestamp is not None
    with pytest.raises(ApiException) as e:
        core.read_namespaced_pod("fedora-0000000005", "zuul-pods")
    assert e.value.status == 404


# ---- watch -------------------------------------------------------------------------------------


def test_watch_from_a_list_sees_the_pod_start(sim128):
    """python3-kubernetes' watch.Watch from the list's resourceVersion:
    ADDED (Pending), MODIFIED (Running), bookmarks carry a newer
    resourceVersion, DELETED when the pod goes."""
    core, _, _ = clients(sim128)
    core.create_namespace({"metadata": {"name": "w"}})
    rv = core.list_namespaced_pod("w").metadata.resource_version
    core.create_namespaced_pod("w", {"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "docker.io/fedora:40"}]}})
    w = k8s_watch.Watch()
    seen = []
    for ev in w.stream(core.list_namespaced_pod, "w", resource_version=rv,
                       allow_watch_bookmarks=True, timeout_seconds=10):
        seen.append((ev["type"], ev["object"].status.phase))
        if ev["object"].status.phase == "Running":
            break
    w.stop()
    assert seen[0] == ("ADDED", "Pending")
    assert seen[-1] == ("MODIFIED", "Running")
    # raw stream: bookmarks, then DELETED
    resp = core.list_namespaced_pod("w", watch=True, resource_version=rv,
                                    allow_watch_bookmarks=True, timeout_seconds=2,
                                    _preload_content=False)
    types = []
    deleted = False
    for line in resp:
        for ln in line.splitlines():
            if not ln.strip():
                continue
            ev = json.loads(ln)
            types.append(ev["type"])
            if ev["type"] == "BOOKMARK":
                assert set(ev["object"]) == {"kind", "apiVersion", "metadata"}
                assert ev["object"]["kind"] == "Pod"
                assert ev["object"]["metadata"]["resourceVersion"] != rv
                if not deleted:
                    core.delete_namespaced_pod("p", "w")
                    deleted = True
    assert types[:2] == ["ADDED", "MODIFIED"]
    assert "BOOKMARK" in types and "DELETED" in types
    assert types[-1] == "BOOKMARK"  # one before the server closes the watch


def test_watch_without_resource_version_starts_with_the_objects(sim128):
    core, _, _ = clients(sim128)
    w = k8s_watch.Watch()
    names = []
    for ev in w.stream(core.list_namespace, timeout_seconds=1):
        assert ev["type"] == "ADDED"
        names.append(ev["object"].metadata.name)
    assert {"default", "kube-system"} <= set(names)


def test_watch_too_old_resource_version_is_410_expired(sim128):
    core, _, _ = clients(sim128)
    rv = core.list_namespace().metadata.resource_version
    sim128.ctl("POST", "/watches/expire", {})
    w = k8s_watch.Watch()
    with pytest.raises(ApiException) as e:
        for _ in w.stream(core.list_namespace, resource_version=rv, timeout_seconds=5):
            pass
    assert e.value.status == 410 and "Expired" in e.value.reason
    # the documented recovery: list again, watch from the new version
    rv2 = core.list_namespace().metadata.resource_version
    assert rv2 != rv
    core.create_namespace({"metadata": {"name": "after"}})
    got = []
    for ev in w.stream(core.list_namespace, resource_version=rv2, timeout_seconds=2):
        got.append((ev["type"], ev["object"].metadata.name))
        w.stop()
    assert got == [("ADDED", "after")]


@pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")
def test_kubectl_get_pods_watch(sim128):
    env = dict(os.environ, KUBECONFIG=sim128.info["kubeconfig"], HOME=sim128.dir)
    core, _, _ = clients(sim128)
    core.create_namespace({"metadata": {"name": "kw"}})
    proc = subprocess.Popen([KUBECTL, "get", "pods", "-n", "kw", "-w",
                             "--request-timeout=0"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        core.create_namespaced_pod("kw", {"metadata": {"name": "kp"}, "spec": {
            "containers": [{"name": "c", "image": "docker.io/fedora:40"}]}})
        lines = []
        while True:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            lines.append(line.split())
            if lines[-1][:3] == ["kp", "1/1", "Running"]:
                break
        assert ["kp", "0/1", "Pending"] == lines[0][:3] or lines[0][0] == "NAME"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_token_request_and_cluster_role(sim128):
    """Issue 25: nodepoold asks for a node's token with the TokenRequest
    API (authentication-resources/token-request-v1: POST
    serviceaccounts/<sa>/token) and binds a ClusterRole it makes once
    (authorization-resources/cluster-role-v1) in each node's namespace. The
    token works in its namespace only, as the rules of the bound role
    allow, and no longer once its account goes."""
    core, _, ac = clients(sim128)
    rbac = k8s.RbacAuthorizationV1Api(ac)
    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
             {"apiGroups": [""], "resources": ["pods/exec", "pods/log", "pods/portforward"],
              "verbs": ["create", "get"]}]
    cr = rbac.create_cluster_role({"apiVersion": "rbac.authorization.k8s.io/v1",
                                   "kind": "ClusterRole",
                                   "metadata": {"name": "nodepool-test-restricted"},
                                   "rules": rules})
    assert cr.kind == "ClusterRole" and cr.metadata.namespace is None
    assert [r.resources for r in cr.rules] == [["pods"], ["pods/exec", "pods/log",
                                                           "pods/portforward"]]
    with pytest.raises(ApiException) as e:
        rbac.create_cluster_role({"metadata": {"name": "nodepool-test-restricted"},
                                  "rules": rules})
    assert e.value.status == 409 and json.loads(e.value.body)["reason"] == "AlreadyExists"
    assert "nodepool-test-restricted" in [
        r.metadata.name for r in rbac.list_cluster_role().items]
    for ns in ("tr-1", "tr-2"):
        core.create_namespace({"metadata": {"name": ns}})
        core.create_namespaced_service_account(ns, {"metadata": {"name": USER}})
        rbac.create_namespaced_role_binding(ns, {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "zuul-role"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "nodepool-test-restricted"},
            "subjects": [{"kind": "ServiceAccount", "name": USER, "namespace": ns}]})
    tr = core.create_namespaced_service_account_token(USER, "tr-1", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 86400}})
    assert tr.kind == "TokenRequest" and tr.spec.expiration_seconds == 86400
    assert tr.status.token and tr.status.expiration_timestamp is not None
    left = tr.status.expiration_timestamp.timestamp() - time.time()
    assert 86400 - 60 < left <= 86400
    api = token_client(sim128, tr.status.token)
    assert api.list_namespaced_pod("tr-1").items == []
    for forbidden in (lambda: api.list_namespaced_pod("tr-2"),
                      lambda: api.list_namespaced_secret("tr-1"),
                      lambda: api.create_namespaced_pod("tr-1", {"metadata": {"name": "x"}, "spec": {
                          "containers": [{"name": "c", "image": "docker.io/fedora:40"}]}})):
        with pytest.raises(ApiException) as e:
            forbidden()
        assert e.value.status == 403
    # the API's limits: at least 10 minutes; an unknown account is 404
    with pytest.raises(ApiException) as e:
        core.create_namespaced_service_account_token(USER, "tr-1", {
            "spec": {"expirationSeconds": 60}})
    assert e.value.status == 422 and "less than 10 minutes" in json.loads(e.value.body)["message"]
    with pytest.raises(ApiException) as e:
        core.create_namespaced_service_account_token("nobody", "tr-1", {"spec": {}})
    assert e.value.status == 404
    # a service account's token cannot mint tokens
    with pytest.raises(ApiException) as e:
        api.create_namespaced_service_account_token(USER, "tr-1", {"spec": {}})
    assert e.value.status == 403
    core.delete_namespaced_service_account(USER, "tr-1")
    with pytest.raises(ApiException) as e:
        api.list_namespaced_pod("tr-1")
    assert e.value.status == 401


def test_token_request_bound_to_a_pod(sim128):
    """Issue 25 (namespace-reuse): a TokenRequest's spec.boundObjectRef
    (token-request-v1 BoundObjectReference, kind Pod) ties the token to
    that pod: "the token is only valid for as long as the bound object
    exists". The object must exist (404), run as the account (400), and
    have the uid given (409 Conflict: deleted and made again); the token
    is refused (401) once the pod is gone, and a pod made again under the
    same name does not revive it."""
    core, _, ac = clients(sim128)
    rbac = k8s.RbacAuthorizationV1Api(ac)
    core.create_namespace({"metadata": {"name": "bound"}})
    rbac.create_namespaced_role(
        "bound", {"metadata": {"name": "r"}, "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]})
    rbac.create_namespaced_role_binding("bound", {
        "metadata": {"name": "rb"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "bound"}]})
    body = {"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "docker.io/fedora:40"}]}}
    pod = core.create_namespaced_pod("bound", body)
    assert pod.spec.service_account_name == "default" and pod.metadata.uid

    def request(name, uid, kind="Pod", sa="default"):
        # the client's own models (V1BoundObjectReference), as it sends them
        body = k8s.AuthenticationV1TokenRequest(
            api_version="authentication.k8s.io/v1", kind="TokenRequest",
            spec=k8s.V1TokenRequestSpec(
                audiences=["https://kubernetes.default.svc"], expiration_seconds=3600,
                bound_object_ref=k8s.V1BoundObjectReference(
                    api_version="v1", kind=kind, name=name, uid=uid)))
        return core.create_namespaced_service_account_token(sa, "bound", body)

    tr = request("p", pod.metadata.uid)
    assert tr.spec.bound_object_ref.name == "p"
    assert tr.spec.bound_object_ref.uid == pod.metadata.uid
    api = token_client(sim128, tr.status.token)
    assert [p.metadata.name for p in api.list_namespaced_pod("bound").items] == ["p"]
    for args, status in (((("nothere", None)), 404),
                         (("p", "00000000-0000-0000-0000-000000000000"), 409),
                         (("p", pod.metadata.uid, "Deployment"), 400)):
        with pytest.raises(ApiException) as e:
            request(*args)
        assert e.value.status == status, e.value.body
    core.create_namespaced_service_account("bound", {"metadata": {"name": USER}})
    with pytest.raises(ApiException) as e:
        request("p", pod.metadata.uid, sa=USER)
    assert e.value.status == 400 and "different serviceaccount" in e.value.body
    # the pod goes: so does the token; a new pod of the same name is
    # another object (another uid), which the token is not bound to
    core.delete_namespaced_pod("p", "bound")
    with pytest.raises(ApiException) as e:
        api.list_namespaced_pod("bound")
    assert e.value.status == 401
    again = core.create_namespaced_pod("bound", body)
    assert again.metadata.uid != pod.metadata.uid
    with pytest.raises(ApiException) as e:
        api.list_namespaced_pod("bound")
    assert e.value.status == 401
    # an unbound token of the same account still works: the pod took only its own
    tr2 = core.create_namespaced_service_account_token("default", "bound", {
        "spec": {"expirationSeconds": 3600}})
    assert len(token_client(sim128, tr2.status.token).list_namespaced_pod("bound").items) == 1


def test_resource_quota_of_one_pod(sim128):
    """A ResourceQuota with spec.hard.pods 1 (policy/resource-quota-v1):
    a second pod in the namespace is refused (403, "exceeded quota", as
    the admission plugin words it) until the first is gone. nodepoold's
    warm namespaces carry one, so two launchers can never put two nodes'
    pods in one."""
    core, _, _ = clients(sim128)
    core.create_namespace({"metadata": {"name": "q1"}})
    q = core.create_namespaced_resource_quota("q1", k8s.V1ResourceQuota(
        metadata=k8s.V1ObjectMeta(name="one-pod"),
        spec=k8s.V1ResourceQuotaSpec(hard={"pods": "1"})))
    assert q.spec.hard == {"pods": "1"}
    assert [x.metadata.name for x in core.list_namespaced_resource_quota("q1").items] == [
        "one-pod"]
    body = lambda n: {"metadata": {"name": n}, "spec": {  # noqa: E731
        "containers": [{"name": "c", "image": "docker.io/fedora:40"}]}}
    core.create_namespaced_pod("q1", body("a"))
    # the quota controller's status, as kubectl describe quota shows it
    st = core.read_namespaced_resource_quota("one-pod", "q1").status
    assert (st.hard, st.used) == ({"pods": "1"}, {"pods": "1"})
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod("q1", body("b"))
    assert e.value.status == 403
    assert json.loads(e.value.body)["message"] == (
        'pods "b" is forbidden: exceeded quota: one-pod, requested: pods=1, used: pods=1, '
        "limited: pods=1")
    core.delete_namespaced_pod("a", "q1")
    assert core.create_namespaced_pod("q1", body("b")).metadata.name == "b"


def test_token_request_cut_to_the_servers_maximum(tmp_path):
    """--service-account-max-token-expiration: a longer request is granted
    for the maximum, which status.expirationTimestamp says."""
    sim = start(tmp_path, "1.28", max_token_expiration=3600)
    try:
        core, _, _ = clients(sim)
        core.create_namespace({"metadata": {"name": "tm"}})
        core.create_namespaced_service_account("tm", {"metadata": {"name": USER}})
        tr = core.create_namespaced_service_account_token(USER, "tm", {
            "spec": {"expirationSeconds": 86400 * 30}})
        assert tr.spec.expiration_seconds == 3600
        assert tr.status.expiration_timestamp.timestamp() - time.time() <= 3600
    finally:
        sim.stop()


def test_token_request_absent_before_1_20(tmp_path):
    """Before 1.20 (TokenRequest GA) the subresource is modelled as not
    served: 404, and discovery does not list it."""
    sim = start(tmp_path, "1.19")
    try:
        core, _, ac = clients(sim)
        core.create_namespace({"metadata": {"name": "t19"}})
        core.create_namespaced_service_account("t19", {"metadata": {"name": USER}})
        with pytest.raises(ApiException) as e:
            core.create_namespaced_service_account_token(USER, "t19", {"spec": {}})
        assert e.value.status == 404
        names = [r.name for r in core.get_api_resources().resources]
        assert "serviceaccounts" in names and "serviceaccounts/token" not in names
    finally:
        sim.stop()


@pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")
def test_kubectl_create_token(sim128):
    env = dict(os.environ, KUBECONFIG=sim128.info["kubeconfig"], HOME=sim128.dir)
    core, _, _ = clients(sim128)
    core.create_namespace({"metadata": {"name": "kt"}})
    core.create_namespaced_service_account("kt", {"metadata": {"name": USER}})
    r = subprocess.run([KUBECTL, "create", "token", USER, "-n", "kt", "--duration", "2h"],
                       env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    tok = r.stdout.strip()
    assert tok in [t["token"] for t in sim128.ctl("GET", "/tokens")]
    # the account has no binding yet: authenticated, but forbidden
    r = subprocess.run([KUBECTL, "--token", tok, "--server", sim128.info["server"],
                        "--certificate-authority", sim128.info["ca"], "get", "pods", "-n", "kt"],
                       env=dict(env, KUBECONFIG="/dev/null"), capture_output=True, text=True,
                       timeout=30)
    assert r.returncode != 0 and "Forbidden" in r.stderr, r.stderr
