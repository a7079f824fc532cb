"""The Kubernetes API server simulator (tests/sim/kubernetes) as a
process-test fixture: started on free loopback ports (read back from its
ready-file), driven through its control API, stopped by pid.

    sim = KubeSim(tmp_path, {"pod_delay": 0.2}).start()
    sim.info["kubeconfig"]                 # contexts kubesim (token), kubesim-cert
    sim.fault(method="POST", path="/pods$", status=500, count=1)
    sim.namespaces(), sim.pods(), sim.calls()
    sim.stop()
"""
import os

from simfixture import TOP, SimFixture

SIM_DIR = os.path.join(TOP, "tests", "sim", "kubernetes")


class KubeSim(SimFixture):
    NAME = "kubesim"
    SIM_DIR = SIM_DIR
    START_TIMEOUT = 30
    LOG_MODE = "ab"

    # ctl, fault, clear_fault: SimFixture
    def behavior(self, **kw):
        return self.ctl("POST", "/behavior", kw)

    def namespaces(self):
        return self.ctl("GET", "/namespaces")

    def pods(self):
        return self.ctl("GET", "/pods")

    def calls(self):
        return self.ctl("GET", "/calls")

    def leaks(self, node_ids):
        """Namespaces (and the pods in them) that carry nodepool labels
        naming no node in node_ids."""
        node_ids = set(node_ids)
        out = []
        for ns in self.namespaces():
            labels = ns["metadata"].get("labels") or {}
            if "nodepool_node_id" in labels and labels["nodepool_node_id"] not in node_ids:
                out.append(ns["metadata"]["name"])
        for p in self.pods():
            labels = p["metadata"].get("labels") or {}
            if "nodepool_node_id" in labels and labels["nodepool_node_id"] not in node_ids:
                out.append("%s/%s" % (p["metadata"]["namespace"], p["metadata"]["name"]))
        return out
