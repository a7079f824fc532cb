"""The GCE simulator (tests/sim/gce) as a process-test fixture: started on a
free loopback port (port 0, read back from its ready-file), driven through
its control API (/_sim/), stopped by pid.

    sim = GceSim(tmp_path, config).start()
    sim.env()                           # the variables Google's libraries
                                        # (and nodepoold) read, pointing at it
    sim.fault(api="compute", ...)       # the control API (README.md)
    sim.instances()                     # every instance, every zone
    sim.stop()
"""
import os

from simfixture import TOP, SimFixture

SIM_DIR = os.path.join(TOP, "tests", "sim", "gce")


class GceSim(SimFixture):
    NAME = "gcesim"
    SIM_DIR = SIM_DIR
    START_TIMEOUT = 30
    CTL_ERROR = RuntimeError
    CTL_PREFIX = "gcesim"

    def env(self):
        """Application default credentials (the simulator's service
        account key, whose token_uri is the simulator), the Compute API
        root and the CA of the simulator's certificate."""
        return {"GOOGLE_APPLICATION_CREDENTIALS": self.info["credentials"],
                "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE": self.info["endpoint"],
                "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE": self.info["cacert"]}

    def state(self):
        return self.ctl("GET", "/state")

    def instances(self):
        return self.state()["instances"]

    def disks(self):
        return self.state()["disks"]

    def fault(self, **spec):
        """Adds a fault; returns its id."""
        return self.ctl("POST", "/faults", spec)["id"]

    def faults(self):
        return self.ctl("GET", "/faults")["faults"]

    def calls(self):
        return self.ctl("GET", "/calls")["calls"]
