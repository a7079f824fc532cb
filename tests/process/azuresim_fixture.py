"""The Azure simulator (tests/sim/azure) as a process-test fixture: started
on free loopback ports (read back from its ready-file), HTTPS with a CA of
its own, driven through its control API (/_sim/, plain HTTP on a second
port), stopped by pid.

    sim = AzureSim(tmp_path, config).start()
    sim.auth_path                       # the service principal's auth file
    sim.env()                           # REQUESTS_CA_BUNDLE for nodepoold / azure-cli
    sim.fault(method="PUT", path="virtualMachines", status=500, count=1)
    sim.state()["virtualMachines"]
    sim.stop()
"""
import os

from simfixture import TOP, SimFixture

SIM_DIR = os.path.join(TOP, "tests", "sim", "azure")


class AzureSim(SimFixture):
    NAME = "azuresim"
    SIM_DIR = SIM_DIR
    START_TIMEOUT = 30
    CTL_ERROR = RuntimeError
    CTL_PREFIX = "azuresim"

    @property
    def auth_path(self):
        return self.info["auth_path"]

    @property
    def base(self):
        return self.info["base"]

    def env(self):
        """The environment nodepoold (and azure-cli, python3-azure) need to
        trust the simulator's certificate."""
        return {"REQUESTS_CA_BUNDLE": self.info["cacert"]}

    def state(self):
        return self.ctl("GET", "/state")

    def vms(self):
        return self.state()["virtualMachines"]

    def fault(self, **spec):
        """Adds a fault; returns its id."""
        return self.ctl("POST", "/faults", spec)["id"]

    def calls(self):
        return self.ctl("GET", "/calls")["calls"]

    def leaks(self, external_ids):
        """What the simulator holds that no node accounts for: VMs not in
        external_ids, and NICs, public IPs and disks of no listed VM."""
        st = self.state()
        ids = {e.lower() for e in external_ids}
        out = [("vm", v["name"]) for v in st["virtualMachines"] if v["name"].lower() not in ids]
        for t in ("networkInterfaces", "publicIPAddresses", "disks"):
            for r in st[t]:
                if not any(r["name"].lower().startswith(i) for i in ids):
                    out.append((t, r["name"]))
        return out
