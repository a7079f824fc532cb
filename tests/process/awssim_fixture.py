"""The AWS simulator (tests/sim/aws) as a process-test fixture: started on a
free loopback port (port 0, read back from its ready-file), driven through
its control API (/_sim/), stopped by pid.

    sim = AwsSim(tmp_path, config).start()
    sim.env()                           # AWS_* variables pointing at it
    sim.ctl("POST", "/faults", {...})   # the control API (README.md)
    sim.instances()                     # every instance, all regions
    sim.stop()
"""
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM_DIR = os.path.join(TOP, "tests", "sim", "aws")


class AwsSim:
    def __init__(self, workdir, config=None, name="awssim"):
        self.dir = os.path.join(str(workdir), name)
        os.makedirs(self.dir, exist_ok=True)
        self.config = config or {}
        self.proc = None
        self.info = None

    def start(self, timeout=20):
        cfgp = os.path.join(self.dir, "config.json")
        with open(cfgp, "w") as f:
            json.dump(self.config, f)
        ready = os.path.join(self.dir, "ready.json")
        self.log = open(os.path.join(self.dir, "awssim.log"), "wb")
        self.proc = subprocess.Popen([sys.executable, SIM_DIR, "--config", cfgp,
                                      "--ready-file", ready],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while not os.path.exists(ready):
            if self.proc.poll() is not None or time.time() > deadline:
                self.stop()
                raise RuntimeError("awssim did not start: %s" % self.output())
            time.sleep(0.02)
        with open(ready) as f:
            self.info = json.load(f)
        return self

    @property
    def endpoint(self):
        return self.info["endpoint"]

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
        if self.proc:
            self.log.close()

    def env(self):
        """The environment an AWS SDK (or nodepoold) needs to use the
        simulator: static keys and the endpoint override."""
        return {"AWS_ACCESS_KEY_ID": self.info["access_key_id"],
                "AWS_SECRET_ACCESS_KEY": self.info["secret_access_key"],
                "AWS_ENDPOINT_URL": self.endpoint}

    def ctl(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.info["control"] + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            raise RuntimeError("awssim %s %s: %s %s" % (method, path, e.code, e.read()))

    def state(self):
        return self.ctl("GET", "/state")

    def instances(self, alive=True):
        out = []
        for name, reg in self.state().items():
            if name.startswith("_"):
                continue
            for i in reg["instances"]:
                if not alive or i["state"] in ("pending", "running"):
                    out.append(dict(i, region=name))
        return out

    def volumes(self):
        return [v for n, r in self.state().items() if not n.startswith("_")
                for v in r["volumes"]]

    def fault(self, **spec):
        return self.ctl("POST", "/faults", spec)

    def calls(self):
        return self.ctl("GET", "/calls")["calls"]
