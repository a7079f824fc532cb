"""The OpenStack simulator (tests/sim/openstack) as a process-test fixture:
started on a free loopback port (port 0, the bound port read back from its
ready-file), driven through its control API, stopped by pid.

    sim = OSSim(tmp_path, config).start()
    sim.write_clouds_yaml(path)            # clouds.yaml pointing at it
    sim.ctl("POST", "/faults", {...})      # the control API (README.md)
    sim.servers()                          # state, flat, with cloud/region
    sim.stop()
"""
import os
import sys

from simfixture import TOP, SimFixture

SIM_DIR = os.path.join(TOP, "tests", "sim", "openstack")
sys.path.insert(0, SIM_DIR)
import clouds_yaml  # noqa: E402


class OSSim(SimFixture):
    NAME = "ossim"
    SIM_DIR = SIM_DIR
    START_TIMEOUT = 20

    def __init__(self, workdir, config=None, tls=False, name="ossim"):
        super().__init__(workdir, config, name)
        self.tls = tls

    def extra_args(self):
        args = ["--data-dir", os.path.join(self.dir, "images")]
        if self.tls:
            args += ["--tls-dir", os.path.join(self.dir, "tls")]
        return args

    # --- clouds.yaml
    def clouds(self, **kw):
        return clouds_yaml.clouds_yaml(self.info, **kw)

    def write_clouds_yaml(self, path, secure=None, **kw):
        """clouds.yaml at path; with secure (a path), the secrets go to
        that secure.yaml instead."""
        doc = self.clouds(**kw)
        if secure:
            doc, sec = clouds_yaml.split_secure(doc)
            with open(secure, "w") as f:
                f.write(clouds_yaml.dump_yaml(sec))
        with open(path, "w") as f:
            f.write(clouds_yaml.dump_yaml(doc))
        return path

    # --- control API (ctl, fault, clear_fault: SimFixture)
    def state(self, **sel):
        return self.ctl("GET", "/state", **sel)["clouds"]

    def servers(self, **sel):
        return self.ctl("GET", "/servers", **sel)["servers"]

    def created(self, **sel):
        """Every server ever created (deleted ones too): [{time, id, name,
        metadata, cloud, region}], in creation order."""
        return self.ctl("GET", "/servers/created", **sel)["created"]

    def ports(self, **sel):
        return self.ctl("GET", "/ports", **sel)["ports"]

    def floating_ips(self, **sel):
        return self.ctl("GET", "/floating_ips", **sel)["floating_ips"]

    def volumes(self, **sel):
        return self.ctl("GET", "/volumes", **sel)["volumes"]

    def images(self, **sel):
        return self.ctl("GET", "/images", **sel)["images"]

    def calls(self, **sel):
        return self.ctl("GET", "/calls", **sel)

    def call_count(self, service=None, method=None, route=None, interface=None, region=None):
        n = 0
        for c in self.calls()["calls"]:
            if ((service is None or c["service"] == service) and
                    (method is None or c["method"] == method) and
                    (route is None or c["route"] == route) and
                    (interface is None or c["interface"] == interface) and
                    (region is None or c["region"] == region)):
                n += c["count"]
        return n

    def leaks(self, node_ids, **sel):
        """What the cloud holds that no node accounts for (the issue's
        "once cleanup has run the simulator holds no server, port or
        floating IP without a node"): servers whose nodepool_node_id
        metadata is not in node_ids, compute ports bound to no live server,
        floating IPs attached to no port. Returns {"servers": [...],
        "ports": [...], "floating_ips": [...]} (empty lists when clean)."""
        node_ids = set(node_ids)
        servers = self.servers(**sel)
        live = {s["id"] for s in servers if not s.get("deleting")}
        return {
            "servers": [s for s in servers
                        if s["metadata"].get("nodepool_node_id") not in node_ids],
            "ports": [p for p in self.ports(**sel)
                      if (not p["device_owner"] or p["device_owner"].startswith("compute:"))
                      and p["device_id"] not in live],
            "floating_ips": [f for f in self.floating_ips(**sel) if not f["port_id"]],
        }

    def call_log(self, **sel):
        """The calls in order: [{time, cloud, region, interface, service,
        method, route}], filtered by any of those keys given."""
        out = []
        for c in self.ctl("GET", "/calls/log")["log"]:
            if all(c.get(k) == v for k, v in sel.items()):
                out.append(c)
        return out

    def call_gaps(self, **sel):
        """Seconds between consecutive calls matching sel (for `rate`,
        upstream's seconds between API calls)."""
        times = [c["time"] for c in self.call_log(**sel)]
        return [b - a for a, b in zip(times, times[1:])]
