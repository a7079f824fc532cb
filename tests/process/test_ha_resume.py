"""Launches survive their launcher on AWS and Kubernetes (issue 22), as
test_ha.py's OpenStack test: a nodepool-launcher killed with SIGKILL while
20 launches are in flight is restarted by nodepoold; once the killed
worker's ZooKeeper session has ended its requests are reset and taken
again, and the BUILDING nodes it left are adopted from their records:
the instances (AWS) and pods (Kubernetes) the cloud is already starting
become the nodes Zuul gets, with their original external ids, and none is
created twice (the simulators count RunInstances and pod creates)."""
import pytest

from awssim_fixture import AwsSim
from conftest import wait_for
from ha_helpers import N, check_resumed, finish, kill_worker_and_wait_restart, launched_nodes
from kubesim_fixture import KubeSim
from npd import Supervisor
from test_aws import PROVIDER as AWS_PROVIDER, upload_image, wild_config as aws_wild_config
from test_kubernetes_driver import k8s_config, write_kubeconfig


@pytest.fixture
def awssim(tmp_path):
    s = AwsSim(tmp_path, {"regions": {"eu-west-1": {}}, "boot_delay": 20,
                          "terminate_delay": 0.1}).start()
    yield s
    s.stop()


def test_aws_worker_killed_mid_launch_resumes_its_launches(deployment, zuul, awssim):
    upload_image(awssim, zuul)
    cfg = aws_wild_config(extra_pool=False, top={"zookeeper-timeout": 4})
    for pool in cfg["providers"][0]["pools"]:
        pool["max-servers"] = N
    sup = Supervisor(deployment)
    sup.write(cfg)
    env = awssim.env()
    env["HOME"] = deployment.dir  # no ~/.aws of the machine's
    sup.start_fg(extra=["--no-builder"], env=env)  # the diskimage is uploaded by the test
    try:
        before = sup.wait_running([AWS_PROVIDER], timeout=60)
        rids = [zuul.submit(["vm-debian-12-m1s"]) for _ in range(N)]
        launched = launched_nodes(zuul, rids)
        assert awssim.calls()["ec2:RunInstances"] == N
        kill_worker_and_wait_restart(sup, AWS_PROVIDER, before)
        check_resumed(zuul, sup, rids, launched)
        # one RunInstances per node: none launched twice, none terminated
        assert awssim.calls()["ec2:RunInstances"] == N
        assert sorted(i["id"] for i in awssim.instances()) == \
            sorted(e for _, e in launched.values())
        finish(zuul, rids)
        wait_for(lambda: awssim.instances() == [], 60, what="every instance terminated")
    finally:
        sup.stop()


@pytest.fixture
def kubesim(tmp_path, monkeypatch):
    s = KubeSim(tmp_path, {"pod_delay": 20, "token_delay": 0.05,
                           "namespace_delete_delay": 0.1,
                           "namespaces": ["default", "kube-system"]}).start()
    monkeypatch.setenv("KUBECONFIG", write_kubeconfig(s, str(tmp_path / "kubeconfig")))
    yield s
    s.stop()


def pod_creates(sim):
    return sum(c["count"] for c in sim.calls()["calls"]
               if c["method"] == "POST" and c["route"].endswith("/pods"))


def test_kubernetes_worker_killed_mid_launch_resumes_its_launches(deployment, zuul, kubesim):
    cfg = k8s_config([{"name": "pod", "type": "pod", "image": "fedora"}],
                     provider={"launch-retries": 3, "boot-timeout": 120},
                     pool={"max-servers": N})
    cfg["zookeeper-timeout"] = 4
    sup = Supervisor(deployment)
    sup.write(cfg)
    sup.start_fg()
    try:
        before = sup.wait_running(["k8s"], timeout=60)
        rids = [zuul.submit(["pod"]) for _ in range(N)]
        # every pod made (the node is named by its namespace from the start)
        wait_for(lambda: pod_creates(kubesim) == N, 90, what="%d pods created" % N)
        launched = launched_nodes(zuul, rids)
        kill_worker_and_wait_restart(sup, "k8s", before)
        check_resumed(zuul, sup, rids, launched)
        # one pod create per node: none made twice, none deleted
        assert pod_creates(kubesim) == N
        assert sorted(p["metadata"]["namespace"] for p in kubesim.pods()) == \
            sorted(e for _, e in launched.values())
        finish(zuul, rids)
        wait_for(lambda: kubesim.leaks(set()) == [], 60, what="every namespace deleted")
    finally:
        sup.stop()
