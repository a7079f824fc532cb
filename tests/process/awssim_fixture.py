"""The AWS simulator (tests/sim/aws) as a process-test fixture: started on a
free loopback port (port 0, read back from its ready-file), driven through
its control API (/_sim/), stopped by pid.

    sim = AwsSim(tmp_path, config).start()
    sim.env()                           # AWS_* variables pointing at it
    sim.ctl("POST", "/faults", {...})   # the control API (README.md)
    sim.instances()                     # every instance, all regions
    sim.stop()
"""
import os

from simfixture import TOP, SimFixture

SIM_DIR = os.path.join(TOP, "tests", "sim", "aws")


class AwsSim(SimFixture):
    NAME = "awssim"
    SIM_DIR = SIM_DIR
    START_TIMEOUT = 20
    CTL_ERROR = RuntimeError
    CTL_PREFIX = "awssim"

    @property
    def endpoint(self):
        return self.info["endpoint"]

    def env(self):
        """The environment an AWS SDK (or nodepoold) needs to use the
        simulator: static keys and the endpoint override."""
        return {"AWS_ACCESS_KEY_ID": self.info["access_key_id"],
                "AWS_SECRET_ACCESS_KEY": self.info["secret_access_key"],
                "AWS_ENDPOINT_URL": self.endpoint}

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
        """Adds a fault; returns the control API's whole answer."""
        return self.ctl("POST", "/faults", spec)

    def calls(self):
        return self.ctl("GET", "/calls")["calls"]
