"""Issue 25: what a kubernetes node's credential is made of, in fewer API
calls than upstream's eight, with the same confinement. A pod node's
token comes from the TokenRequest API for the namespace's default
account, bound (one RoleBinding) to a ClusterRole nodepoold makes once
with upstream's "zuul-restricted" rules; a namespace node's is
upstream's zuul-worker account bound to the "zuul" rules. Each token
works in its own namespace, as its rules allow, not in another node's,
and goes with its node. Older clusters and other settings fall back to
upstream's way, each checked: no TokenRequest API (before 1.20), a
server that cuts the token's lifetime, token-lifetime 0, a provider
that may not make ClusterRoles."""
import os
import shutil
import subprocess
import time
import urllib.parse

import pytest
import yaml

from conftest import wait_for
from test_kubernetes_driver import k8s_config, release_and_check_gone, serve, write_kubeconfig
from kubesim_fixture import KubeSim

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")

POD = {"name": "pod", "type": "pod", "image": "docker.io/fedora:40", "cpu": 1, "memory": 256}
NS = {"name": "ns", "type": "namespace"}
TOKEN_REQUEST = ("POST", "/api/v1/namespaces/{ns}/serviceaccounts/{name}/token")
SECRET_CREATE = ("POST", "/api/v1/namespaces/{ns}/secrets")
SA_CREATE = ("POST", "/api/v1/namespaces/{ns}/serviceaccounts")
ROLE_CREATE = ("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles")
CROLE_CREATE = ("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles")
# upstream's Role for pod nodes (nodepool/driver/kubernetes/provider.py)
RESTRICTED = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
              {"apiGroups": [""], "resources": ["pods/exec", "pods/log", "pods/logs",
                                                "pods/portforward"],
               "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}]


@pytest.fixture
def ksim(tmp_path, monkeypatch, request):
    """The simulator with the test's settings (indirect parameter)."""
    cfg = {"pod_delay": 0.2, "token_delay": 0.05, "namespace_delete_delay": 0.1,
           "namespaces": ["default", "kube-system"]}
    cfg.update(getattr(request, "param", {}))
    s = KubeSim(tmp_path, cfg).start()
    monkeypatch.setenv("KUBECONFIG", write_kubeconfig(s, str(tmp_path / "kubeconfig")))
    yield s
    s.stop()


def calls(sim):
    return {(c["method"], c["route"]): c["count"] for c in sim.calls()["calls"]}


def zuul_kubeconfig(path, cred):
    """The kubeconfig Zuul's executor writes for a node (zuul/executor/
    server.py prepareKubeConfig): cluster (certificate-authority-data is
    the credential's ca_crt as it is), user "<namespace>:<user>" with the
    token, and a context in the node's namespace."""
    cluster_name = urllib.parse.urlsplit(cred["host"]).netloc.replace(".", "-")
    cluster = {"server": cred["host"]}
    if cred.get("ca_crt"):
        cluster["certificate-authority-data"] = cred["ca_crt"]
    if cred["skiptls"]:
        cluster["insecure-skip-tls-verify"] = True
    user_name = "%s:%s" % (cred["namespace"], cred["user"])
    ctx = "%s/%s" % (user_name, cluster_name)
    cfg = {"apiVersion": "v1", "kind": "Config", "preferences": {},
           "clusters": [{"name": cluster_name, "cluster": cluster}],
           "users": [{"name": user_name, "user": {"token": cred["token"]}}],
           "contexts": [{"name": ctx, "context": {"user": user_name, "cluster": cluster_name,
                                                 "namespace": cred["namespace"]}}],
           "current-context": ctx}
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f, default_flow_style=False)
    return path


def kubectl(sim, cred, *args):
    """kubectl as a Zuul job uses a node: with the kubeconfig Zuul writes
    from its credential."""
    path = zuul_kubeconfig(os.path.join(sim.dir, "zuul-kubeconfig"), cred)
    env = dict(os.environ, HOME=sim.dir, KUBECONFIG=path)
    return subprocess.run([KUBECTL] + list(args), capture_output=True, text=True, env=env,
                          timeout=30)


def objects(sim, plural, ns=None):
    st = sim.ctl("GET", "/state")["objects"]
    return {k.split("/", 2)[2]: o for k, o in st.items()
            if k.split("/", 2)[0] == plural and (ns is None or k.split("/", 2)[1] == ns)}


def check_confined(sim, cred, other_ns):
    """The token lists and reads its own namespace's pods (with the pod
    node's rules), and nothing of another node's namespace."""
    r = kubectl(sim, cred, "get", "pods", "-n", cred["namespace"], "-o", "name")
    assert r.returncode == 0, r.stderr
    if "pod" in cred:
        assert r.stdout.split() == ["pod/" + cred["pod"]]
        r = kubectl(sim, cred, "get", "pod", cred["pod"], "-n", cred["namespace"])
        assert r.returncode == 0 and "Running" in r.stdout, r.stderr
        # the restricted rules: no secrets, no new pods
        r = kubectl(sim, cred, "get", "secrets", "-n", cred["namespace"])
        assert r.returncode != 0 and "Forbidden" in r.stderr, r.stderr
    r = kubectl(sim, cred, "get", "pods", "-n", other_ns)
    assert r.returncode != 0 and "Forbidden" in r.stderr, r.stderr


def test_pod_node_token_works_for_its_pod_only(deployment, zuul, ksim):
    deployment.start_launcher("k8s", deployment.write_config(k8s_config([POD])))
    rid1, nid1, n1 = serve(deployment, zuul, ksim, "pod")
    rid2, nid2, n2 = serve(deployment, zuul, ksim, "pod")
    c1, c2 = n1["connection_port"], n2["connection_port"]
    assert c1["namespace"] == "main-" + nid1 and c1["pod"] == "pod"
    assert c1["user"] == "default" and c1["token"] != c2["token"]
    check_confined(ksim, c1, c2["namespace"])
    check_confined(ksim, c2, c1["namespace"])
    # what gives it its rights: a binding of the ClusterRole made once,
    # with upstream's rules for pod nodes (exec, logs, port-forward)
    (rb,) = objects(ksim, "rolebindings", c1["namespace"]).values()
    assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                             "name": "nodepool-zuul-restricted"}
    assert rb["subjects"] == [{"kind": "ServiceAccount", "name": "default",
                               "namespace": c1["namespace"]}]
    cr = objects(ksim, "clusterroles")["nodepool-zuul-restricted"]
    assert cr["rules"] == RESTRICTED
    c = calls(ksim)
    assert c[TOKEN_REQUEST] == 2 and c[CROLE_CREATE] == 1
    assert SA_CREATE not in c and SECRET_CREATE not in c and ROLE_CREATE not in c, c
    # the tokens go with their nodes
    zuul.finish(zuul.accept(rid1))
    wait_for(lambda: nid1 not in zuul.nodes(), what="node deleted")
    wait_for(lambda: c1["namespace"] not in [n["metadata"]["name"] for n in ksim.namespaces()],
             what="its namespace gone")
    r = kubectl(ksim, c1, "get", "pods", "-n", c1["namespace"])
    assert r.returncode != 0 and "Unauthorized" in r.stderr, r.stderr
    check_confined(ksim, c2, c1["namespace"])
    release_and_check_gone(zuul, ksim, rid2)


def test_namespace_node_token_is_zuul_worker(deployment, zuul, ksim):
    deployment.start_launcher("k8s", deployment.write_config(k8s_config([NS, POD])))
    rid1, nid1, n1 = serve(deployment, zuul, ksim, "ns")
    rid2, nid2, n2 = serve(deployment, zuul, ksim, "pod")
    cred = n1["connection_port"]
    assert cred["user"] == "zuul-worker"
    assert set(objects(ksim, "serviceaccounts", cred["namespace"])) == {"default", "zuul-worker"}
    # upstream's "zuul" rules: workloads and secrets in its namespace
    r = kubectl(ksim, cred, "get", "secrets", "-n", cred["namespace"])
    assert r.returncode == 0, r.stderr
    check_confined(ksim, cred, n2["connection_port"]["namespace"])
    check_confined(ksim, n2["connection_port"], cred["namespace"])
    (rb,) = objects(ksim, "rolebindings", cred["namespace"]).values()
    assert rb["roleRef"]["kind"] == "ClusterRole" and rb["roleRef"]["name"] == "nodepool-zuul"
    assert "pods/exec" in objects(ksim, "clusterroles")["nodepool-zuul"]["rules"][0]["resources"]
    zuul.finish(zuul.accept(rid1) + zuul.accept(rid2))
    wait_for(lambda: zuul.nodes() == {}, what="nodes deleted")
    wait_for(lambda: ksim.leaks([]) == [], what="nothing left in the cluster")


@pytest.mark.parametrize("ksim", [{"kubernetes_version": "1.19"}], indirect=True)
def test_no_token_request_api_uses_token_secrets(deployment, zuul, ksim):
    """Before 1.20: the first node learns there is no TokenRequest API;
    every node then gets upstream's token secret."""
    p = deployment.start_launcher("k8s", deployment.write_config(k8s_config([POD])))
    rid1, _, n1 = serve(deployment, zuul, ksim, "pod")
    rid2, _, n2 = serve(deployment, zuul, ksim, "pod")
    check_confined(ksim, n1["connection_port"], n2["connection_port"]["namespace"])
    check_confined(ksim, n2["connection_port"], n1["connection_port"]["namespace"])
    assert n2["connection_port"]["user"] == "zuul-worker"
    c = calls(ksim)
    assert c[TOKEN_REQUEST] == 1 and c[SECRET_CREATE] == 2, c
    assert "no TokenRequest API (404): token secrets" in p.output()
    zuul.finish(zuul.accept(rid1) + zuul.accept(rid2))
    wait_for(lambda: ksim.leaks([]) == [], what="nothing left in the cluster")


@pytest.mark.parametrize("ksim", [{"max_token_expiration": 3600}], indirect=True)
def test_server_cutting_token_lifetime_uses_token_secrets(deployment, zuul, ksim):
    """A server that grants tokens for less than token-lifetime (its
    --service-account-max-token-expiration): a ready node could outlive
    its token, so the node gets upstream's token secret, which does not
    expire; and so do the nodes after it."""
    p = deployment.start_launcher("k8s", deployment.write_config(k8s_config([POD])))
    rid1, _, n1 = serve(deployment, zuul, ksim, "pod")
    rid2, _, n2 = serve(deployment, zuul, ksim, "pod")
    tokens = {t["token"]: t for t in ksim.ctl("GET", "/tokens")}
    for n in (n1, n2):
        assert "exp" not in tokens[n["connection_port"]["token"]]  # a secret's: no expiry
    check_confined(ksim, n1["connection_port"], n2["connection_port"]["namespace"])
    assert calls(ksim)[TOKEN_REQUEST] == 1
    assert "the API server grants tokens for 3600 s, not the 31536000 s of token-lifetime" \
        in p.output()
    zuul.finish(zuul.accept(rid1) + zuul.accept(rid2))
    wait_for(lambda: ksim.leaks([]) == [], what="nothing left in the cluster")


def test_token_lifetime_asked_for(deployment, zuul, ksim):
    cfg = k8s_config([POD], provider={"token-lifetime": 7200})
    deployment.start_launcher("k8s", deployment.write_config(cfg))
    rid, _, n = serve(deployment, zuul, ksim, "pod")
    tok = {t["token"]: t for t in ksim.ctl("GET", "/tokens")}[n["connection_port"]["token"]]
    assert 7000 < tok["exp"] - time.time() <= 7200
    release_and_check_gone(zuul, ksim, rid)


def test_token_lifetime_zero_is_upstreams_way(deployment, zuul, ksim):
    cfg = k8s_config([POD], provider={"token-lifetime": 0})
    deployment.start_launcher("k8s", deployment.write_config(cfg))
    rid, _, n = serve(deployment, zuul, ksim, "pod")
    cred = n["connection_port"]
    assert cred["user"] == "zuul-worker"
    c = calls(ksim)
    assert TOKEN_REQUEST not in c and c[SECRET_CREATE] == 1 and c[SA_CREATE] == 1, c
    sec = objects(ksim, "secrets", cred["namespace"])["zuul-worker"]
    assert sec["type"] == "kubernetes.io/service-account-token"
    r = kubectl(ksim, cred, "get", "pod", "pod", "-n", cred["namespace"])
    assert r.returncode == 0, r.stderr
    release_and_check_gone(zuul, ksim, rid)


def test_bad_token_lifetime_is_refused(deployment, ksim):
    cfg = k8s_config([POD], provider={"token-lifetime": 60})
    p = deployment.start_launcher("k8s", deployment.write_config(cfg))
    wait_for(lambda: "token-lifetime 60: 0 (token secrets, as upstream) or 600 to "
             "4294967295 seconds" in p.output(), what="the reason logged")


def test_cluster_roles_forbidden_uses_a_role_per_namespace(deployment, zuul, ksim):
    """A provider whose account may not make ClusterRoles binds upstream's
    Role in each node's namespace: one call more, confined the same."""
    ksim.fault(method="POST", path="/clusterroles$", status=403,
               message='clusterroles.rbac.authorization.k8s.io is forbidden: User "nodepool" '
                       'cannot create resource "clusterroles"')
    p = deployment.start_launcher("k8s", deployment.write_config(k8s_config([POD])))
    rid1, _, n1 = serve(deployment, zuul, ksim, "pod")
    rid2, _, n2 = serve(deployment, zuul, ksim, "pod")
    ns1 = n1["connection_port"]["namespace"]
    (rb,) = objects(ksim, "rolebindings", ns1).values()
    assert rb["roleRef"]["kind"] == "Role" and rb["roleRef"]["name"] == "zuul-restricted"
    assert objects(ksim, "roles", ns1)["zuul-restricted"]["rules"] == RESTRICTED
    check_confined(ksim, n1["connection_port"], n2["connection_port"]["namespace"])
    c = calls(ksim)
    assert c[CROLE_CREATE] == 1 and c[ROLE_CREATE] == 2, c  # asked once
    assert "a Role in each node's namespace instead" in p.output()
    zuul.finish(zuul.accept(rid1) + zuul.accept(rid2))
    wait_for(lambda: ksim.leaks([]) == [], what="nothing left in the cluster")


@pytest.mark.parametrize("ksim", [{"default_sa_delay": 0.5}], indirect=True)
def test_default_account_made_late(deployment, zuul, ksim):
    """The cluster makes a namespace's default account a moment after the
    namespace: the pod is refused until then (the ServiceAccount admission
    plugin) and so is its token (404); both are asked again until it is
    there, and the node is served with a token that works."""
    deployment.start_launcher("k8s", deployment.write_config(k8s_config([POD])))
    rid1, _, n1 = serve(deployment, zuul, ksim, "pod")
    rid2, _, n2 = serve(deployment, zuul, ksim, "pod")
    assert n1["connection_port"]["user"] == "default"
    check_confined(ksim, n1["connection_port"], n2["connection_port"]["namespace"])
    check_confined(ksim, n2["connection_port"], n1["connection_port"]["namespace"])
    zuul.finish(zuul.accept(rid1) + zuul.accept(rid2))
    wait_for(lambda: ksim.leaks([]) == [], what="nothing left in the cluster")
