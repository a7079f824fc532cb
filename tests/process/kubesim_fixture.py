"""The Kubernetes API server simulator (tests/sim/kubernetes) as a
process-test fixture: started on free loopback ports (read back from its
ready-file), driven through its control API, stopped by pid.

    sim = KubeSim(tmp_path, {"pod_delay": 0.2}).start()
    sim.info["kubeconfig"]                 # contexts kubesim (token), kubesim-cert
    sim.fault(method="POST", path="/pods$", status=500, count=1)
    sim.namespaces(), sim.pods(), sim.calls()
    sim.stop()
"""
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM_DIR = os.path.join(TOP, "tests", "sim", "kubernetes")


class KubeSim:
    def __init__(self, workdir, config=None, name="kubesim"):
        self.dir = os.path.join(str(workdir), name)
        os.makedirs(self.dir, exist_ok=True)
        self.config = config or {}
        self.proc = None
        self.info = None

    def start(self, timeout=30):
        cfgp = os.path.join(self.dir, "config.json")
        with open(cfgp, "w") as f:
            json.dump(self.config, f)
        ready = os.path.join(self.dir, "ready.json")
        if os.path.exists(ready):
            os.unlink(ready)
        args = [sys.executable, SIM_DIR, "--config", cfgp, "--ready-file", ready]
        self.log = open(os.path.join(self.dir, "kubesim.log"), "ab")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while not os.path.exists(ready):
            if self.proc.poll() is not None:
                raise RuntimeError("kubesim exited: %s" % self.output())
            if time.time() > deadline:
                self.stop()
                raise RuntimeError("kubesim did not start: %s" % self.output())
            time.sleep(0.02)
        with open(ready) as f:
            self.info = json.load(f)
        return self

    @property
    def pid(self):
        return self.proc.pid

    def output(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log.name, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()  # by pid: the process we started
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc and not self.log.closed:
            self.log.close()

    def ctl(self, method, path, body=None, **query):
        url = self.info["control"] + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                raw = r.read()
        except urllib.error.HTTPError as e:
            raise AssertionError("control %s %s: %d %s" % (method, path, e.code, e.read()))
        return json.loads(raw) if raw else None

    def fault(self, **spec):
        return self.ctl("POST", "/faults", spec)["id"]

    def clear_fault(self, fid=None):
        self.ctl("DELETE", "/faults" if fid is None else "/faults/%d" % fid)

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
