"""The IBM Cloud VPC simulator (tests/sim/ibmvpc) as a process-test fixture:
started on free loopback ports (HTTPS API, plain-HTTP control), driven
through its control API (/_sim/), stopped by pid.

    sim = IbmVpcSim(tmp_path, config).start()
    sim.write_credentials(path)       # an ibm-credentials.env pointing at it
    sim.env()                         # REQUESTS_CA_BUNDLE: its CA
    sim.fault(api="vpc", method="POST", path="/instances$", status=500, count=1)
    sim.instances(), sim.fips(), sim.calls(), sim.leaks(zuul.nodes())
    sim.stop()
"""
import os

from simfixture import TOP, SimFixture


class IbmVpcSim(SimFixture):
    NAME = "ibmvpcsim"
    SIM_DIR = os.path.join(TOP, "tests", "sim", "ibmvpc")
    START_TIMEOUT = 30
    CTL_ERROR = RuntimeError
    CTL_PREFIX = "ibmvpcsim"

    def extra_args(self):
        return ["--tls-dir", os.path.join(self.dir, "tls")]

    def write_credentials(self, path, apikey=None):
        """An ibm-credentials.env as the IBM SDKs read it (the file a
        provider's credentials-file names), pointing every API at the
        simulator. Returns path."""
        i = self.info
        with open(path, "w") as f:
            f.write("VPC_AUTH_TYPE=iam\nVPC_APIKEY=%s\nVPC_AUTH_URL=%s\nVPC_URL=%s\n"
                    "RESOURCE_MANAGER_URL=%s\nRESOURCE_CONTROLLER_URL=%s\n"
                    % (apikey or i["apikey"], i["auth_url"], i["vpc_url"],
                       i["resource_url"], i["resource_url"]))
        return path

    def env(self):
        """What a client needs to trust the simulator's certificate."""
        return {"REQUESTS_CA_BUNDLE": self.info["cacert"]}

    def state(self):
        return self.ctl("GET", "/state")

    def instances(self):
        return self.state()["instances"]

    def fips(self):
        return self.state()["floating_ips"]

    def calls(self):
        return self.ctl("GET", "/calls")["calls"]

    def fault(self, **spec):
        """Adds a fault; returns its id."""
        return self.ctl("POST", "/faults", spec)["id"]

    def leaks(self, nodes):
        """Names of instances and floating IPs in the account that no node
        (a dict id -> record, as zuul.nodes()) accounts for; the account's
        own objects made with POST /_sim/* are named by the test."""
        names = {"np" + nid for nid in nodes}
        return sorted(o["name"] for o in self.instances() + self.fips()
                      if o["name"] not in names)
