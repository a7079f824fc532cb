"""ossim: an OpenStack API simulator for nodepoold's tests.

One process serves, for one or more simulated clouds (each with its own
Keystone and its own regions):

  Keystone v3   /<cloud>/identity/v3   tokens (password, application
                credential), catalog with public and internal endpoints per
                region, token expiry
  Nova          /<cloud>/<region>/[internal/]compute/v2.1
  Glance v2     /<cloud>/<region>/[internal/]image/v2
  Neutron       /<cloud>/<region>/[internal/]network/v2.0
  Cinder v3     /<cloud>/<region>/[internal/]volume/v3/<project_id>

and a control API for tests under /_sim/ (fault injection, behaviour,
limits, state inspection, API call counts): see README.md next to this file.

Stdlib only (http.server, ssl, json, threading); no PyPI. Responses follow
the OpenStack API references (api-ref) field for field where a client reads
them; python3-openstacksdk and the `openstack` CLI are the judges
(tests/process/test_openstack_sim.py).
"""
import argparse
import base64
import collections
import datetime
import email.utils
import hashlib
import http
import http.client
import http.server
import io
import ipaddress
import json
import os
import re
import signal
import socket
import socketserver
import ssl
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid

NOVA_MIN = (2, 1)
NOVA_MAX = (2, 95)
CINDER_MIN = (3, 0)
CINDER_MAX = (3, 70)

SERVICES = ("compute", "image", "network", "volume")

DEFAULT_FLAVORS = [
    # name, ram MiB, vcpus, disk GB
    ("m1.tiny", 512, 1, 1),
    ("m1.small", 2048, 1, 20),
    ("m1.medium", 4096, 2, 40),
    ("m1.large", 8192, 4, 80),
    ("m1.xlarge", 16384, 8, 160),
]

DEFAULT_COMPUTE_LIMITS = {
    "maxTotalInstances": 100,
    "maxTotalCores": 400,
    "maxTotalRAMSize": 1638400,
    "maxTotalKeypairs": 100,
    "maxServerMeta": 128,
    "maxImageMeta": 128,
    "maxPersonality": 5,
    "maxPersonalitySize": 10240,
    "maxSecurityGroups": 10,
    "maxSecurityGroupRules": 20,
    "maxTotalFloatingIps": 100,
    "maxServerGroups": 10,
    "maxServerGroupMembers": 10,
}

DEFAULT_VOLUME_LIMITS = {
    "maxTotalVolumes": 100,
    "maxTotalVolumeGigabytes": 10000,
    "maxTotalSnapshots": 10,
    "maxTotalBackups": 10,
    "maxTotalBackupGigabytes": 1000,
}


def now_iso(t=None, micro=False):
    d = datetime.datetime.fromtimestamp(t if t is not None else time.time(),
                                        datetime.timezone.utc)
    if micro:
        return d.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return d.strftime("%Y-%m-%dT%H:%M:%SZ")


def new_id():
    """A random (version 4) UUID in its 36-character form, as
    str(uuid.uuid4()) gives, without building a uuid.UUID."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40  # version 4
    b[8] = (b[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = b.hex()
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


def parse_version(s):
    """'2.73' -> (2, 73); raises ValueError."""
    a, b = s.strip().split(".", 1)
    return int(a), int(b)


class HTTPError(Exception):
    """An error response: status, JSON-able body (or bytes), headers."""

    def __init__(self, status, body, headers=None):
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers or {}


def nova_error(status, message):
    key = {400: "badRequest", 401: "unauthorized", 403: "forbidden",
           404: "itemNotFound", 409: "conflictingRequest",
           413: "overLimit", 406: "notAcceptable", 429: "overLimit"}.get(status, "computeFault")
    return HTTPError(status, {key: {"code": status, "message": message}})


def cinder_error(status, message):
    return nova_error(status, message)


def neutron_error(status, typ, message):
    return HTTPError(status, {"NeutronError": {"type": typ, "message": message, "detail": ""}})


def glance_error(status, message):
    # Glance answers errors with a small text body (webob's default).
    title = {400: "400 Bad Request", 404: "404 Not Found", 409: "409 Conflict",
             403: "403 Forbidden", 413: "413 Request Entity Too Large"}.get(status, str(status))
    return HTTPError(status, ("%s\n\n%s\n\n   " % (title, message)).encode(),
                     {"Content-Type": "text/plain; charset=UTF-8"})


def keystone_unauthorized(msg="The request you have made requires authentication."):
    return HTTPError(401, {"error": {"code": 401, "title": "Unauthorized", "message": msg}},
                     {"WWW-Authenticate": 'Keystone uri="unknown"'})


# ---------------------------------------------------------------- the model


class Fault:
    """An injected fault: requests matching cloud/region/service/method/path
    get `status` (with body, Retry-After) or hang, `count` times (None:
    until removed), after skipping the first `after` matches."""

    FIELDS = ("cloud", "region", "service", "interface", "method", "path", "status",
              "body", "retry_after", "count", "after", "hang", "delay", "then",
              "headers", "drop")

    def __init__(self, fid, spec):
        unknown = set(spec) - set(self.FIELDS)
        if unknown:
            raise ValueError("unknown fault keys: %s" % ", ".join(sorted(unknown)))
        self.id = fid
        self.spec = dict(spec)
        self.path_re = re.compile(spec["path"]) if spec.get("path") else None
        self.count = spec.get("count")
        self.after = int(spec.get("after") or 0)
        self.hits = 0
        self.seen = 0
        self.released = threading.Event()
        if not any(spec.get(k) for k in ("hang", "status", "delay", "drop")):
            raise ValueError("a fault needs status, hang, drop or delay")

    def matches(self, cloud, region, interface, service, method, path):
        s = self.spec
        for k, v in (("cloud", cloud), ("region", region), ("service", service),
                     ("interface", interface)):
            if s.get(k) and s[k] != v:
                return False
        if s.get("method") and s["method"].upper() != method:
            return False
        if self.path_re and not self.path_re.search(path):
            return False
        return True

    def view(self):
        d = dict(self.spec)
        d.update(id=self.id, hits=self.hits, remaining=self.count)
        return d


class Region:
    """One simulated region of one cloud: Nova, Glance, Neutron, Cinder state."""

    def __init__(self, cloud, name, cfg):
        self.cloud = cloud
        self.name = name
        self.cfg = cfg
        self.behavior = {
            "boot_delay": float(cfg.get("boot_delay", 0.5)),
            "boot_outcome": cfg.get("boot_outcome", "active"),  # active|error|never
            "error_fault": cfg.get("error_fault", "No valid host was found. There are not "
                                   "enough hosts available."),
            "delete_delay": float(cfg.get("delete_delay", 0.0)),
            "leak_ports": bool(cfg.get("leak_ports", False)),
            "console_output": cfg.get("console_output"),
            "fip_delay": float(cfg.get("fip_delay", 0.0)),
            "quota_status": int(cfg.get("quota_status", 403)),
        }
        self.outcomes = collections.deque()
        self.azs = list(cfg.get("availability_zones", ["nova"]))
        self.compute_limits = dict(DEFAULT_COMPUTE_LIMITS)
        self.compute_limits.update(cfg.get("compute_limits", {}))
        self.volume_limits = dict(DEFAULT_VOLUME_LIMITS)
        self.volume_limits.update(cfg.get("volume_limits", {}))
        self.flavors = collections.OrderedDict()
        for i, f in enumerate(cfg.get("flavors") or
                              [dict(name=n, ram=r, vcpus=c, disk=d) for n, r, c, d in DEFAULT_FLAVORS]):
            fid = str(f.get("id", i + 1))
            self.flavors[fid] = {
                "id": fid, "name": f["name"], "ram": int(f["ram"]),
                "vcpus": int(f.get("vcpus", 1)), "disk": int(f.get("disk", 10)),
                "ephemeral": int(f.get("ephemeral", 0)), "swap": int(f.get("swap", 0)),
                "is_public": True, "disabled": False, "rxtx_factor": 1.0,
                "description": f.get("description"),
                "extra_specs": dict(f.get("extra_specs", {})),
            }
        self.images = collections.OrderedDict()
        for im in cfg.get("images", [{"name": "cirros"}]):
            self.add_image(im, active=True)
        self.networks = collections.OrderedDict()
        self.subnets = collections.OrderedDict()
        self.ports = collections.OrderedDict()
        self.fips = collections.OrderedDict()
        self.secgroups = collections.OrderedDict()
        self.volumes = collections.OrderedDict()
        self.servers = collections.OrderedDict()
        # every server ever created here, deleted ones too: (time, id,
        # name, metadata) for GET /_sim/servers/created
        self.created = []
        self.keypairs = collections.OrderedDict()
        for kp in cfg.get("keypairs", []):
            self.keypairs[kp] = {"name": kp, "public_key": "ssh-ed25519 AAAA sim", "fingerprint":
                                 "00:00", "type": "ssh"}
        sg = new_id()
        self.secgroups[sg] = {"id": sg, "name": "default", "description": "Default security group",
                              "security_group_rules": [], "tenant_id": cloud.project_id,
                              "project_id": cloud.project_id, "stateful": True, "tags": [],
                              "created_at": now_iso(), "updated_at": now_iso(),
                              "revision_number": 1}
        for sgname in cfg.get("security_groups", []):
            sid = new_id()
            self.secgroups[sid] = dict(self.secgroups[sg], id=sid, name=sgname, description="")
        nets = cfg.get("networks")
        if nets is None:
            # The two shapes of the corpus: a provider network that gives
            # servers public addresses, or a tenant network plus an
            # external network that floating IPs come from.
            if cfg.get("floating_ips"):
                nets = [{"name": "private", "cidr": "10.0.0.0/16"},
                        {"name": "public", "cidr": "100.64.0.0/16", "external": True}]
            else:
                nets = [{"name": "public", "cidr": "100.64.0.0/16", "provider": True},
                        {"name": "private", "cidr": "10.0.0.0/16"}]
        self.default_nets = []
        for n in nets:
            nid = self.add_network(n)
            if n.get("default", not n.get("external")) and not self.default_nets:
                self.default_nets.append(nid)
        self.mac_seq = 0

    # --- helpers
    def add_image(self, spec, active=True):
        iid = spec.get("id") or new_id()
        t = now_iso()
        img = {
            "id": iid, "name": spec.get("name"), "status": "active" if active else "queued",
            "visibility": spec.get("visibility", "public" if active else "private"),
            "protected": False, "os_hidden": False, "tags": list(spec.get("tags", [])),
            "disk_format": spec.get("disk_format", "qcow2"),
            "container_format": spec.get("container_format", "bare"),
            "size": spec.get("size", 1024 if active else None), "virtual_size": None,
            "checksum": spec.get("checksum"), "os_hash_algo": None, "os_hash_value": None,
            "min_disk": int(spec.get("min_disk", 0)), "min_ram": int(spec.get("min_ram", 0)),
            "owner": self.cloud.project_id, "created_at": t, "updated_at": t,
            "self": "/v2/images/%s" % iid, "file": "/v2/images/%s/file" % iid,
            "schema": "/v2/schemas/image",
        }
        for k, v in spec.get("properties", {}).items():
            img[k] = v
        self.images[iid] = img
        return img

    def add_network(self, n):
        nid = n.get("id") or new_id()
        t = now_iso()
        net = {
            "id": nid, "name": n["name"], "status": "ACTIVE", "admin_state_up": True,
            "shared": bool(n.get("shared", False)),
            "router:external": bool(n.get("external", False)),
            "provider:physical_network": n.get("physical_network",
                                               "physnet1" if n.get("provider") else None),
            "provider:network_type": "flat" if n.get("provider") else "vxlan",
            "provider:segmentation_id": None,
            "subnets": [], "tenant_id": self.cloud.project_id,
            "project_id": self.cloud.project_id, "mtu": 1500,
            "port_security_enabled": True, "availability_zones": list(self.azs),
            "availability_zone_hints": [], "tags": [], "description": "",
            "is_default": False, "ipv4_address_scope": None, "ipv6_address_scope": None,
            "created_at": t, "updated_at": t, "revision_number": 1,
        }
        self.networks[nid] = net
        cidr = ipaddress.ip_network(n.get("cidr", "10.%d.0.0/16" % (len(self.networks) + 10)))
        sid = new_id()
        hosts = cidr.hosts()
        gw = str(next(hosts))
        sub = {
            "id": sid, "name": n["name"] + "-subnet", "network_id": nid,
            "cidr": str(cidr), "ip_version": cidr.version, "gateway_ip": gw,
            "enable_dhcp": True, "dns_nameservers": [], "host_routes": [],
            "allocation_pools": [{"start": str(cidr.network_address + 2),
                                  "end": str(cidr.broadcast_address - 1)}],
            "tenant_id": self.cloud.project_id, "project_id": self.cloud.project_id,
            "ipv6_address_mode": None, "ipv6_ra_mode": None, "subnetpool_id": None,
            "description": "", "tags": [], "service_types": [],
            "created_at": t, "updated_at": t, "revision_number": 0,
        }
        self.subnets[sid] = sub
        net["subnets"].append(sid)
        sub["_next"] = 2
        sub["_net"] = cidr
        return nid

    def alloc_ip(self, subnet):
        net = subnet["_net"]
        used = {ip["ip_address"] for p in self.ports.values() for ip in p["fixed_ips"]}
        used |= {f["floating_ip_address"] for f in self.fips.values()}
        for _ in range(net.num_addresses):
            n = subnet["_next"]
            subnet["_next"] = n + 1 if n + 1 < net.num_addresses - 1 else 2
            a = str(net.network_address + n)
            if a not in used:
                return a
        raise neutron_error(409, "IpAddressGenerationFailure",
                            "No more IP addresses available on network %s." % subnet["network_id"])

    def new_mac(self):
        self.mac_seq += 1
        n = self.mac_seq
        return "fa:16:3e:%02x:%02x:%02x" % ((n >> 16) & 255, (n >> 8) & 255, n & 255)

    def find_network(self, ref):
        if ref in self.networks:
            return self.networks[ref]
        for n in self.networks.values():
            if n["name"] == ref:
                return n
        return None

    def make_port(self, network_id, device_id="", device_owner="", status="DOWN", name=""):
        net = self.networks[network_id]
        sub = self.subnets[net["subnets"][0]]
        pid = new_id()
        t = now_iso()
        port = {
            "id": pid, "name": name, "network_id": network_id, "mac_address": self.new_mac(),
            "fixed_ips": [{"subnet_id": sub["id"], "ip_address": self.alloc_ip(sub)}],
            "device_id": device_id, "device_owner": device_owner, "status": status,
            "admin_state_up": True, "tenant_id": self.cloud.project_id,
            "project_id": self.cloud.project_id,
            "security_groups": [next(iter(self.secgroups))],
            "binding:vnic_type": "normal", "allowed_address_pairs": [],
            "extra_dhcp_opts": [], "description": "", "tags": [],
            "port_security_enabled": True, "dns_name": "", "dns_assignment": [],
            "created_at": t, "updated_at": t, "revision_number": 1,
        }
        self.ports[pid] = port
        return port

    def used(self):
        inst = cores = ram = 0
        for s in self.servers.values():
            f = s["_flavor"]
            inst += 1
            cores += f["vcpus"]
            ram += f["ram"]
        return inst, cores, ram

    def volume_used(self):
        return len(self.volumes), sum(v["size"] for v in self.volumes.values())

    def advance(self, now):
        """Move servers along BUILD -> ACTIVE/ERROR and finish deletes."""
        for sid in list(self.servers):
            s = self.servers[sid]
            if s["_deleting_at"] is not None:
                if now >= s["_deleting_at"]:
                    self.finish_delete(s)
                continue
            if s["status"] == "BUILD" and s["_outcome"] != "never" and now >= s["_ready_at"]:
                if s["_outcome"] == "error":
                    self.set_error(s, s["_fault"], now)
                else:
                    s["status"] = "ACTIVE"
                    s["OS-EXT-STS:vm_state"] = "active"
                    s["OS-EXT-STS:task_state"] = None
                    s["OS-EXT-STS:power_state"] = 1
                    s["OS-SRV-USG:launched_at"] = now_iso(now, micro=True)
                    s["updated"] = now_iso(now)
                    s["progress"] = 100
                    for pid in s["_ports"]:
                        if pid in self.ports:
                            self.ports[pid]["status"] = "ACTIVE"
                    for vid in s["_volumes"]:
                        if vid in self.volumes:
                            self.volumes[vid]["status"] = "in-use"
        for f in self.fips.values():
            if f["_active_at"] is not None and now >= f["_active_at"]:
                f["status"] = "ACTIVE"
                f["_active_at"] = None

    def set_error(self, s, fault, now):
        s["status"] = "ERROR"
        s["OS-EXT-STS:vm_state"] = "error"
        s["OS-EXT-STS:task_state"] = None
        s["updated"] = now_iso(now)
        s["fault"] = {"code": 500, "created": now_iso(now), "message": fault,
                      "details": "Traceback: simulated by ossim"}

    def finish_delete(self, s):
        self.servers.pop(s["id"], None)
        for pid in s["_ports"]:
            port = self.ports.get(pid)
            if port is None:
                continue
            for f in self.fips.values():
                if f["port_id"] == pid:
                    f.update(port_id=None, fixed_ip_address=None, status="DOWN",
                             router_id=None, _active_at=None, updated_at=now_iso())
            if self.behavior["leak_ports"]:
                # A port Nova failed to clean up: DOWN, owner kept, unbound.
                port.update(status="DOWN", device_id="")
            else:
                self.ports.pop(pid, None)
        for vid in s["_volumes"]:
            v = self.volumes.get(vid)
            if v is None:
                continue
            if s["_vol_delete"].get(vid):
                self.volumes.pop(vid, None)
            else:
                v["attachments"] = []
                v["status"] = "available"


class Cloud:
    """One simulated cloud: its Keystone (users, application credentials,
    tokens) and its regions."""

    def __init__(self, sim, name, cfg):
        self.sim = sim
        self.name = name
        self.project_id = cfg.get("project_id") or uuid.uuid4().hex
        self.project_name = cfg.get("project_name", "nodepool")
        self.user_id = uuid.uuid4().hex
        self.user_name = cfg.get("username", "nodepool")
        self.password = cfg.get("password", "secret")
        self.domain = cfg.get("domain", "Default")
        self.app_creds = {}
        ac = cfg.get("application_credential", {"id": "appcred-" + name, "secret": "appsecret",
                                                "name": "nodepool-appcred"})
        if ac:
            self.app_creds[ac["id"]] = ac
        self.token_ttl = float(cfg.get("token_ttl", 3600))
        self.tokens = {}
        regions = cfg.get("regions") or {"RegionOne": {}}
        if isinstance(regions, list):
            regions = {r: {} for r in regions}
        self.regions = collections.OrderedDict(
            (r, Region(self, r, rc or {})) for r, rc in regions.items())

    def domain_ok(self, d):
        if not d:
            return True
        return d.get("name") in (self.domain, None) and d.get("id") in (None, "default", self.domain)


class Sim:
    def __init__(self, cfg, scheme="http", host="127.0.0.1"):
        self.lock = threading.RLock()
        self.scheme = scheme
        self.host = host
        self.port = None
        self.clouds = collections.OrderedDict()
        clouds = cfg.get("clouds")
        if not clouds:
            clouds = {cfg.get("cloud", "sim"): cfg}
        for name, c in clouds.items():
            self.clouds[name] = Cloud(self, name, c or {})
        self.faults = collections.OrderedDict()
        self.fault_seq = 0
        self.calls = collections.Counter()
        self.connections = 0  # API connections accepted (Handler._handle)
        self.log = collections.deque(maxlen=int(cfg.get("call_log", 20000)))
        # page sizes when a list asks no limit: Glance's limit_param_default
        # (25); Nova's and Cinder's osapi max_limit (1000); Neutron none
        self.page_size = {"image": int(cfg.get("glance_page_size", 25)),
                          "compute": int(cfg.get("nova_page_size", 1000)),
                          "volume": int(cfg.get("cinder_page_size", 1000))}
        self.data_dir = cfg.get("data_dir")
        # links_base: "next" links point at this scheme://host:port instead
        # of ours (a cloud, or a man in the middle, steering a client's
        # token elsewhere: issue 23)
        self.links_base = cfg.get("links_base")

    def base(self):
        return "%s://%s:%d" % (self.scheme, self.host, self.port)

    def catalog(self, cloud):
        b = self.base()
        out = []
        kinds = [("compute", "nova", "compute/v2.1"),
                 ("image", "glance", "image"),
                 ("network", "neutron", "network"),
                 ("volumev3", "cinderv3", "volume/v3/%s" % cloud.project_id),
                 ("block-storage", "cinder", "volume/v3/%s" % cloud.project_id)]
        for typ, name, suffix in kinds:
            eps = []
            for r in cloud.regions:
                for iface, pre in (("public", ""), ("internal", "internal/")):
                    eps.append({"id": hashlib.md5(("%s%s%s" % (r, typ, iface)).encode()).hexdigest(),
                                "interface": iface, "region": r, "region_id": r,
                                "url": "%s/%s/%s/%s%s" % (b, cloud.name, r, pre, suffix)})
            out.append({"id": hashlib.md5(typ.encode()).hexdigest(), "type": typ, "name": name,
                        "endpoints": eps})
        ident = []
        for r in cloud.regions:
            for iface in ("public", "internal"):
                ident.append({"id": hashlib.md5(("%sid%s" % (r, iface)).encode()).hexdigest(),
                              "interface": iface, "region": r, "region_id": r,
                              "url": "%s/%s/identity" % (b, cloud.name)})
        out.append({"id": hashlib.md5(b"identity").hexdigest(), "type": "identity",
                    "name": "keystone", "endpoints": ident})
        return out


# ---------------------------------------------------------------- HTTP


class Request:
    def __init__(self, handler, method, path, query, body, headers):
        self.h = handler
        self.method = method
        self.path = path
        self.query = query  # dict of str -> list
        self.body = body
        self.headers = headers
        self.arrived = None  # time.time() its request line came in (Handler)

    def q(self, k, default=None):
        v = self.query.get(k)
        return v[-1] if v else default

    def json(self):
        try:
            return json.loads(self.body or b"null")
        except ValueError:
            raise HTTPError(400, {"badRequest": {"code": 400, "message": "Malformed request body"}})


class Response:
    def __init__(self, status=200, body=None, headers=None):
        self.status = status
        self.body = body
        self.headers = headers or {}


# SO_TIMESTAMPNS (asm-generic/socket.h; the socket module does not name
# it): the kernel stamps each received segment, read back with recvmsg
SO_TIMESTAMPNS = 35


class StampedReader(io.RawIOBase):
    """A plain TCP socket read with recvmsg so that each read also gives
    the kernel's receive time of what it read (SO_TIMESTAMPNS): when a
    request reached the simulator's host, however long its thread then
    waited for a CPU, the GIL or sim.lock. last: that time (epoch
    seconds) of the latest read, None before the first."""

    def __init__(self, sock):
        super().__init__()
        self.sock = sock
        self.last = None
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)

    def readable(self):
        return True

    def readinto(self, b):
        n, anc, _, _ = self.sock.recvmsg_into([b], socket.CMSG_SPACE(16))
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
                sec, nsec = struct.unpack("qq", data[:16])
                self.last = sec + nsec / 1e9
        return n


# OSSIM_DEBUG: log each request and the simulator's own errors on stderr
DEBUG = bool(os.environ.get("OSSIM_DEBUG"))

_date_cache = (None, "")


def http_date():
    """Now as an HTTP Date header value (the stdlib's date_time_string),
    formatted once a second: the value has whole seconds."""
    global _date_cache
    sec = int(time.time())
    c = _date_cache
    if c[0] != sec:
        c = _date_cache = (sec, email.utils.formatdate(sec, usegmt=True))
    return c[1]


class Headers(dict):
    """A request's headers as the handlers read them: get(name, default),
    [name] (None when absent), `in`, names in any case; the first of
    repeated headers wins and a value keeps what the stdlib's email parser
    keeps (leading blanks and the line end stripped, continuation lines
    joined). Keys are lower-case names, values (name, value)."""

    def get(self, k, default=None):
        v = dict.get(self, k.lower())
        return default if v is None else v[1]

    def __getitem__(self, k):
        return self.get(k)

    def __contains__(self, k):
        return dict.__contains__(self, k.lower())

    def items(self):
        return [nv for nv in self.values()]

    @classmethod
    def read(cls, f):
        """Reads header lines up to the blank one from f, with
        http.client's limits (its LineTooLong, HTTPException)."""
        h = cls()
        n = 0
        last = None
        while True:
            line = f.readline(http.client._MAXLINE + 1)
            if len(line) > http.client._MAXLINE:
                raise http.client.LineTooLong("header line")
            n += 1
            if n > http.client._MAXHEADERS:
                raise http.client.HTTPException("got more than %d headers"
                                                % http.client._MAXHEADERS)
            if line in (b"\r\n", b"\n", b""):
                break
            line = str(line, "iso-8859-1")
            if line[0] in " \t":
                if last is not None and dict.get(h, last[0].lower()) is last:
                    last[1] += line
                continue
            name, sep, value = line.partition(":")
            if not sep:
                continue
            last = [name, value.lstrip(" \t")]
            dict.setdefault(h, name.lower(), last)
        for k, nv in list(dict.items(h)):
            dict.__setitem__(h, k, (nv[0], nv[1].rstrip("\r\n")))
        return h


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body leave at once, no 40 ms ACK waits
    server_version = "ossim/1"
    sim = None  # set on the class made per server
    control_only = False

    def log_message(self, fmt, *args):
        if DEBUG:
            sys.stderr.write("ossim: %s\n" % (fmt % args))

    def parse_request(self):
        # the request line is in: the call's arrival is when the kernel
        # received it (plain HTTP; a client does not pipeline, so the line
        # came with the latest read), else now, before its headers, body
        # and sim.lock: how busy the simulator is is not the client's
        # spacing of its calls
        st = getattr(self, "stamped", None)
        self.arrived = st.last if st is not None and st.last is not None else time.time()
        # A well-formed HTTP/1.x request line takes the fast path: its
        # headers read into a Headers (below) instead of the stdlib's email
        # parser, a third of a call's CPU; anything else (HTTP/0.9, a bad
        # line, another version) the stdlib's parse_request, errors and all
        requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = requestline.split()
        if len(words) != 3 or words[2] not in ("HTTP/1.1", "HTTP/1.0"):
            return super().parse_request()
        self.requestline = requestline
        command, path, version = words
        self.command, self.path, self.request_version = command, path, version
        # as the stdlib: keep-alive by default from HTTP/1.1 on
        self.close_connection = version != "HTTP/1.1"
        if path.startswith("//"):  # gh-87389, as the stdlib
            self.path = "/" + path.lstrip("/")
        try:
            self.headers = Headers.read(self.rfile)
        except http.client.LineTooLong as err:
            self.send_error(http.HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Line too long",
                            str(err))
            return False
        except http.client.HTTPException as err:
            self.send_error(http.HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Too many headers",
                            str(err))
            return False
        conntype = self.headers.get("Connection", "").lower()
        if conntype == "close":
            self.close_connection = True
        elif conntype == "keep-alive":
            self.close_connection = False
        if (self.headers.get("Expect", "").lower() == "100-continue" and
                version == "HTTP/1.1"):
            if not self.handle_expect_100():
                return False
        return True

    def setup(self):
        super().setup()
        if not isinstance(self.connection, ssl.SSLSocket):
            self.stamped = StampedReader(self.connection)
            self.rfile.close()  # the makefile() one, unused
            self.rfile = io.BufferedReader(self.stamped)
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.settimeout(30)
            try:
                self.connection.do_handshake()
            except (ssl.SSLError, OSError):
                self.close_connection = True
                raise
            self.connection.settimeout(None)

    def _read_body(self):
        te = self.headers.get("Transfer-Encoding", "")
        if "chunked" in te.lower():
            return ChunkedReader(self.rfile)
        n = int(self.headers.get("Content-Length") or 0)
        return LengthReader(self.rfile, n)

    def _handle(self):
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        reader = self._read_body()
        streaming = self.command == "PUT" and path.endswith("/file")
        body = reader if streaming else reader.read_all()
        req = Request(self, self.command, path, query, body, self.headers)
        req.arrived = self.arrived
        if not getattr(self, "counted", False) and not path.startswith("/_sim"):
            # one handler per connection: the connections the cloud's API
            # accepted (GET /_sim/calls: "connections"), as a load balancer
            # in front of a real one would count them
            self.counted = True
            with self.sim.lock:
                self.sim.connections += 1
        try:
            resp = dispatch(self.sim, req, control_only=self.control_only)
        except HTTPError as e:
            resp = Response(e.status, e.body, e.headers)
        except Drop:
            self.close_connection = True
            return
        except Hang as h:
            h.wait()
            if h.then == "close":
                self.close_connection = True
                return
            try:
                resp = dispatch(self.sim, req, control_only=self.control_only, skip_faults=True)
            except HTTPError as e:
                resp = Response(e.status, e.body, e.headers)
        except Exception as e:  # a simulator bug: say so, loudly
            import traceback
            traceback.print_exc()
            resp = Response(500, {"computeFault": {"code": 500, "message": "ossim bug: %r" % e}})
        if streaming:
            reader.drain()
        self._send(resp)

    def _send(self, resp):
        body = resp.body
        headers = dict(resp.headers)
        if body is None:
            data = b""
        elif isinstance(body, (bytes, bytearray)):
            data = bytes(body)
        else:
            data = json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
        # the stdlib's send_response, send_header and end_headers, the
        # same bytes in the same order (status line, Server, Date, the
        # response's headers, Content-Length, the request id), written
        # with the body in one send
        code = resp.status
        if DEBUG:
            self.log_request(code)
        reason = self.responses[code][0] if code in self.responses else ""
        out = ["%s %d %s\r\n" % (self.protocol_version, code, reason),
               "Server: %s\r\n" % self.version_string(),
               "Date: %s\r\n" % http_date()]
        for k, v in headers.items():
            v = str(v)
            out.append("%s: %s\r\n" % (k, v))
            if k.lower() == "connection":
                if v.lower() == "close":
                    self.close_connection = True
                elif v.lower() == "keep-alive":
                    self.close_connection = False
        if code not in (204, 304):  # RFC 9110: no Content-Length on 204
            out.append("Content-Length: %d\r\n" % len(data))
        out.append("X-Openstack-Request-Id: req-%s\r\n\r\n" % new_id())
        msg = "".join(out).encode("latin-1", "strict")
        if self.command != "HEAD" and data and code not in (204, 304):
            msg += data
        self.wfile.write(msg)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle


class LengthReader:
    def __init__(self, f, n):
        self.f = f
        self.left = n

    def read(self, size=65536):
        if self.left <= 0:
            return b""
        b = self.f.read(min(size, self.left))
        if not b:
            self.left = 0
            return b""
        self.left -= len(b)
        return b

    def read_all(self):
        out = []
        while True:
            b = self.read()
            if not b:
                return b"".join(out)
            out.append(b)

    def drain(self):
        while self.read():
            pass


class ChunkedReader(LengthReader):
    def __init__(self, f):
        self.f = f
        self.left = 0
        self.done = False

    def read(self, size=65536):
        if self.done:
            return b""
        if self.left == 0:
            line = self.f.readline()
            n = int(line.split(b";")[0].strip() or b"0", 16)
            if n == 0:
                while self.f.readline() not in (b"\r\n", b"\n", b""):
                    pass
                self.done = True
                return b""
            self.left = n
        b = self.f.read(min(size, self.left))
        self.left -= len(b)
        if self.left == 0:
            self.f.readline()
        return b


class Drop(Exception):
    """Close the connection without an answer."""


class Hang(Exception):
    def __init__(self, fault, sim):
        self.fault = fault
        self.sim = sim
        self.then = fault.spec.get("then", "close")

    def wait(self):
        while not self.fault.released.wait(0.2):
            if self.sim.stopping:
                return


# ---------------------------------------------------------------- dispatch

ID_RE = re.compile(r"^([0-9a-f]{32}|[0-9a-f-]{36}|req-.*|appcred-.*)$")


def route_of(path):
    """A path with ids replaced by {id}, for per-endpoint call counts."""
    segs = path.split("/")
    return "/".join("{id}" if ID_RE.match(s) or s.isdigit() else s for s in segs)


def dispatch(sim, req, control_only=False, skip_faults=False):
    p = req.path
    if p.startswith("/_sim/") or p == "/_sim":
        return control(sim, req)
    if control_only:
        raise HTTPError(404, {"error": "control port serves /_sim/ only"})
    segs = [s for s in p.split("/") if s != ""]
    if not segs:
        return Response(200, {"clouds": list(sim.clouds)})
    cloud = sim.clouds.get(segs[0])
    if cloud is None:
        raise HTTPError(404, {"error": "no such cloud %r" % segs[0]})
    if len(segs) >= 2 and segs[1] == "identity":
        service, region, interface, rest = "identity", None, "public", segs[2:]
    else:
        if len(segs) < 3 or segs[1] not in cloud.regions:
            raise HTTPError(404, {"error": "no such region or service: %s" % p})
        region = segs[1]
        rest = segs[2:]
        interface = "public"
        if rest and rest[0] == "internal":
            interface = "internal"
            rest = rest[1:]
        if not rest or rest[0] not in SERVICES:
            raise HTTPError(404, {"error": "no such service: %s" % p})
        service = rest[0]
        rest = rest[1:]
    sub = "/" + "/".join(rest)
    with sim.lock:
        if not skip_faults:
            key = (cloud.name, region or "-", interface, service, req.method, route_of(sub))
            sim.calls[key] += 1
            sim.log.append((req.arrived or time.time(),) + key)
            for f in list(sim.faults.values()):
                if not f.matches(cloud.name, region, interface, service, req.method, sub):
                    continue
                f.seen += 1
                if f.seen <= f.after:
                    continue
                if f.count is not None:
                    if f.count <= 0:
                        continue
                    f.count -= 1
                f.hits += 1
                if f.spec.get("hang"):
                    raise Hang(f, sim)
                if f.spec.get("drop"):
                    raise Drop()
                if f.spec.get("delay"):
                    d = float(f.spec["delay"])
                    sim.lock.release()
                    try:
                        time.sleep(d)
                    finally:
                        sim.lock.acquire()
                    if not f.spec.get("status"):
                        continue
                raise fault_error(f, service)
    if service == "identity":
        return keystone(sim, cloud, req, rest)
    reg = cloud.regions[region]
    with sim.lock:
        reg.advance(time.time())
        ctx = Ctx(sim, cloud, reg, interface, req)
        if len(rest) >= 2:
            token_check(cloud, req, service, rest)
        try:
            if service == "compute":
                return nova(ctx, rest)
            if service == "image":
                return glance(ctx, rest)
            if service == "network":
                return neutron(ctx, rest)
            return cinder(ctx, rest)
        except IndexError:
            # a path the routes do not know (e.g. PUT on a collection)
            if os.environ.get("OSSIM_DEBUG"):
                import traceback
                traceback.print_exc()
            raise service_error(service, 404, "The resource could not be found.")
        except (AttributeError, TypeError, KeyError, ValueError) as e:
            # a body of the wrong shape: the services' schema validation
            # answers 400
            if os.environ.get("OSSIM_DEBUG"):
                import traceback
                traceback.print_exc()
            raise service_error(service, 400, "Invalid input for the request body: %s" % e)


def service_error(service, status, msg):
    if service == "network":
        return neutron_error(status, "HTTPBadRequest" if status == 400 else "HTTPNotFound", msg)
    if service == "image":
        return glance_error(status, msg)
    return nova_error(status, msg)


def fault_error(f, service):
    st = int(f.spec["status"])
    hdrs = dict(f.spec.get("headers") or {})
    if f.spec.get("retry_after") is not None:
        hdrs["Retry-After"] = str(f.spec["retry_after"])
    body = f.spec.get("body")
    if body is None:
        msg = {429: "Rate limit exceeded: too many requests.",
               500: "Unexpected API Error. Please report this at "
                    "http://bugs.launchpad.net/nova/ and attach the Nova API log if possible.",
               503: "The server is currently unavailable. Please try again at a later time."
               }.get(st, "Simulated fault %d" % st)
        if service == "network":
            return neutron_error(st, "SimulatedFault", msg)
        if service == "image":
            return glance_error(st, msg)
        if service == "identity":
            return HTTPError(st, {"error": {"code": st, "title": "Fault", "message": msg}}, hdrs)
        e = nova_error(st, msg)
        e.headers.update(hdrs)
        return e
    if isinstance(body, str):
        body = body.encode()
    return HTTPError(st, body, hdrs)


def token_check(cloud, req, service, rest):
    tok = req.headers.get("X-Auth-Token")
    t = cloud.tokens.get(tok) if tok else None
    if t is None or t["expires"] <= time.time():
        raise keystone_unauthorized()
    if not t.get("project"):
        raise HTTPError(403, {"error": {"code": 403, "title": "Forbidden",
                                        "message": "Token is not scoped to a project"}})


class Ctx:
    def __init__(self, sim, cloud, reg, interface, req):
        self.sim = sim
        self.cloud = cloud
        self.reg = reg
        self.interface = interface
        self.req = req

    def base(self, service):
        pre = "internal/" if self.interface == "internal" else ""
        return "%s/%s/%s/%s%s" % (self.sim.base(), self.cloud.name, self.reg.name, pre, service)


# ---------------------------------------------------------------- Keystone


def keystone_version(sim, cloud):
    return {"id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
            "links": [{"rel": "self", "href": "%s/%s/identity/v3/" % (sim.base(), cloud.name)}],
            "media-types": [{"base": "application/json",
                             "type": "application/vnd.openstack.identity-v3+json"}]}


def keystone(sim, cloud, req, rest):
    if not rest:
        return Response(300, {"versions": {"values": [keystone_version(sim, cloud)]}})
    if rest[0] != "v3":
        raise HTTPError(404, {"error": {"code": 404, "title": "Not Found",
                                        "message": "Could not find version"}})
    r = rest[1:]
    if not r:
        return Response(200, {"version": keystone_version(sim, cloud)})
    if r == ["auth", "tokens"]:
        if req.method == "POST":
            return issue_token(sim, cloud, req)
        with sim.lock:
            tok = cloud.tokens.get(req.headers.get("X-Auth-Token") or "")
            sub = cloud.tokens.get(req.headers.get("X-Subject-Token") or "")
            if not tok or tok["expires"] <= time.time():
                raise keystone_unauthorized()
            if not sub or sub["expires"] <= time.time():
                raise HTTPError(404, {"error": {"code": 404, "title": "Not Found",
                                                "message": "Could not find token."}})
            if req.method == "DELETE":
                cloud.tokens.pop(req.headers["X-Subject-Token"], None)
                return Response(204)
            return Response(200, {"token": sub["body"]},
                            {"X-Subject-Token": req.headers["X-Subject-Token"]})
    with sim.lock:
        tok = cloud.tokens.get(req.headers.get("X-Auth-Token") or "")
        if not tok or tok["expires"] <= time.time():
            raise keystone_unauthorized()
        if r == ["auth", "catalog"]:
            return Response(200, {"catalog": sim.catalog(cloud)})
        if r in (["auth", "projects"], ["projects"]):
            return Response(200, {"projects": [project_body(cloud)], "links": {}})
        if len(r) == 2 and r[0] == "projects" and r[1] in (cloud.project_id, cloud.project_name):
            return Response(200, {"project": project_body(cloud)})
        if len(r) == 2 and r[0] == "users" and r[1] == cloud.user_id:
            return Response(200, {"user": {"id": cloud.user_id, "name": cloud.user_name,
                                           "domain_id": "default", "enabled": True}})
        if r == ["regions"]:
            return Response(200, {"regions": [{"id": n, "description": "", "parent_region_id": None}
                                              for n in cloud.regions]})
    raise HTTPError(404, {"error": {"code": 404, "title": "Not Found",
                                    "message": "The resource could not be found."}})


def project_body(cloud):
    return {"id": cloud.project_id, "name": cloud.project_name, "domain_id": "default",
            "enabled": True, "is_domain": False, "parent_id": "default", "description": "",
            "tags": []}


def issue_token(sim, cloud, req):
    try:
        body = json.loads(req.body or b"null")
        ident = body["auth"]["identity"]
        methods = ident["methods"]
    except (ValueError, KeyError, TypeError):
        raise HTTPError(400, {"error": {"code": 400, "title": "Bad Request",
                                        "message": "Expecting to find identity in auth."}})
    appcred = None
    if "application_credential" in methods:
        ac = ident.get("application_credential") or {}
        cred = cloud.app_creds.get(ac.get("id"))
        if cred is None and ac.get("name"):
            for c in cloud.app_creds.values():
                u = ac.get("user") or {}
                if c.get("name") == ac["name"] and u.get("name", cloud.user_name) == cloud.user_name:
                    cred = c
        if cred is None or ac.get("secret") != cred["secret"]:
            raise keystone_unauthorized("The request you have made requires authentication.")
        appcred = cred
        scoped = True
    elif "password" in methods:
        u = (ident.get("password") or {}).get("user") or {}
        ok_user = (u.get("id") == cloud.user_id or
                   (u.get("name") == cloud.user_name and cloud.domain_ok(u.get("domain"))))
        if not ok_user or u.get("password") != cloud.password:
            raise keystone_unauthorized("The request you have made requires authentication.")
        scope = body["auth"].get("scope")
        scoped = False
        if scope:
            pr = scope.get("project")
            if pr is None or not (pr.get("id") == cloud.project_id or
                                  (pr.get("name") == cloud.project_name and
                                   cloud.domain_ok(pr.get("domain")))):
                raise keystone_unauthorized("User %s has no access to project" % cloud.user_id)
            scoped = True
    elif "token" in methods:
        t = cloud.tokens.get(((ident.get("token") or {}).get("id")) or "")
        if t is None or t["expires"] <= time.time():
            raise keystone_unauthorized()
        scoped = bool(body["auth"].get("scope")) or t.get("project")
    else:
        raise keystone_unauthorized("Unsupported authentication method")
    now = time.time()
    exp = now + cloud.token_ttl
    dom = {"id": "default", "name": cloud.domain}
    tb = {
        "methods": methods, "audit_ids": [base64.urlsafe_b64encode(os.urandom(16)).decode()[:22]],
        "user": {"domain": dom, "id": cloud.user_id, "name": cloud.user_name,
                 "password_expires_at": None},
        "issued_at": now_iso(now, micro=True), "expires_at": now_iso(exp, micro=True),
    }
    if scoped:
        tb["project"] = {"domain": dom, "id": cloud.project_id, "name": cloud.project_name}
        tb["is_domain"] = False
        tb["roles"] = [{"id": "r-member", "name": "member"}, {"id": "r-reader", "name": "reader"}]
        tb["catalog"] = sim.catalog(cloud)
    if appcred:
        tb["application_credential"] = {"id": appcred["id"], "name": appcred.get("name"),
                                        "restricted": True}
    tok = "gAAAAA" + uuid.uuid4().hex + uuid.uuid4().hex
    with sim.lock:
        cloud.tokens[tok] = {"expires": exp, "project": scoped, "body": tb}
    return Response(201, {"token": tb}, {"X-Subject-Token": tok})


# ---------------------------------------------------------------- paging/filter helpers


def paginate(ctx, items, key, collection_url, default_limit=None, max_limit=1000):
    """limit/marker paging as Nova/Cinder/Neutron do (a <key>_links next)."""
    req = ctx.req
    limit = req.q("limit")
    marker = req.q("marker")
    if marker:
        ids = [i["id"] for i in items]
        if marker not in ids:
            raise HTTPError(400, {"badRequest": {"code": 400,
                                                 "message": "marker [%s] not found" % marker}})
        items = items[ids.index(marker) + 1:]
    lim = int(limit) if limit else default_limit
    if lim is not None:
        lim = min(lim, max_limit)
    out = {}
    if lim is not None and len(items) > lim:
        items = items[:lim]
        q = {k: v[-1] for k, v in req.query.items() if k != "marker"}
        q["limit"] = str(lim)
        q["marker"] = items[-1]["id"]
        if ctx.sim.links_base:
            collection_url = ctx.sim.links_base + urllib.parse.urlsplit(collection_url).path
        out[key + "_links"] = [{"rel": "next", "href": collection_url + "?" +
                                urllib.parse.urlencode(q)}]
    out[key] = items
    return out


def truthy(v):
    return str(v).lower() in ("1", "true", "yes", "on")


# ---------------------------------------------------------------- Nova


def nova_microversion(req):
    v = None
    h = req.headers.get("OpenStack-API-Version")
    if h:
        parts = h.split()
        if len(parts) == 2 and parts[0].lower() == "compute":
            v = parts[1]
    if v is None:
        v = req.headers.get("X-OpenStack-Nova-API-Version")
    if v is None:
        return NOVA_MIN
    if v.strip().lower() == "latest":
        return NOVA_MAX
    try:
        mv = parse_version(v)
    except ValueError:
        raise nova_error(400, "Invalid API version request: %s" % v)
    if mv < NOVA_MIN or mv > NOVA_MAX:
        raise HTTPError(406, {"computeFault": {
            "code": 406, "message": "Version %s is not supported by the API. Minimum is %d.%d "
            "and maximum is %d.%d." % ((v,) + NOVA_MIN + NOVA_MAX)}})
    return mv


def nova_version_doc(ctx):
    return {"id": "v2.1", "status": "CURRENT", "version": "%d.%d" % NOVA_MAX,
            "min_version": "%d.%d" % NOVA_MIN, "updated": "2013-07-23T11:33:21Z",
            "links": [{"rel": "self", "href": ctx.base("compute") + "/v2.1/"},
                      {"rel": "describedby", "type": "text/html",
                       "href": "http://docs.openstack.org/"}],
            "media-types": [{"base": "application/json",
                             "type": "application/vnd.openstack.compute+json;version=2.1"}]}


def flavor_view(ctx, f, mv, detail=True):
    base = ctx.base("compute")
    links = [{"rel": "self", "href": "%s/v2.1/flavors/%s" % (base, f["id"])},
             {"rel": "bookmark", "href": "%s/flavors/%s" % (base, f["id"])}]
    if not detail:
        d = {"id": f["id"], "name": f["name"], "links": links}
        if mv >= (2, 55):
            d["description"] = f["description"]
        return d
    d = {"id": f["id"], "name": f["name"], "ram": f["ram"], "vcpus": f["vcpus"],
         "disk": f["disk"], "OS-FLV-EXT-DATA:ephemeral": f["ephemeral"],
         "swap": f["swap"] if (f["swap"] or mv >= (2, 75)) else "",
         "rxtx_factor": f["rxtx_factor"], "os-flavor-access:is_public": True,
         "OS-FLV-DISABLED:disabled": False, "links": links}
    if mv >= (2, 55):
        d["description"] = f["description"]
    if mv >= (2, 61):
        d["extra_specs"] = dict(f["extra_specs"])
    return d


def server_view(ctx, s, mv, detail=True):
    base = ctx.base("compute")
    links = [{"rel": "self", "href": "%s/v2.1/servers/%s" % (base, s["id"])},
             {"rel": "bookmark", "href": "%s/servers/%s" % (base, s["id"])}]
    if not detail:
        return {"id": s["id"], "name": s["name"], "links": links}
    reg = ctx.reg
    f = s["_flavor"]
    if mv >= (2, 47):
        flavor = {"vcpus": f["vcpus"], "ram": f["ram"], "disk": f["disk"],
                  "ephemeral": f["ephemeral"], "swap": f["swap"], "original_name": f["name"],
                  "extra_specs": dict(f["extra_specs"])}
    else:
        flavor = {"id": f["id"], "links": [{"rel": "bookmark",
                                            "href": "%s/flavors/%s" % (base, f["id"])}]}
    if s["_image"]:
        image = {"id": s["_image"], "links": [{"rel": "bookmark",
                                               "href": "%s/images/%s" % (base, s["_image"])}]}
    else:
        image = ""
    addresses = {}
    if s["status"] != "BUILD" or s["_addresses_in_build"]:
        for pid in s["_ports"]:
            port = reg.ports.get(pid)
            if port is None:
                continue
            net = reg.networks[port["network_id"]]
            lst = addresses.setdefault(net["name"], [])
            for ip in port["fixed_ips"]:
                lst.append({"version": ipaddress.ip_address(ip["ip_address"]).version,
                            "addr": ip["ip_address"], "OS-EXT-IPS:type": "fixed",
                            "OS-EXT-IPS-MAC:mac_addr": port["mac_address"]})
            for fip in reg.fips.values():
                if fip["port_id"] == pid:
                    lst.append({"version": 4, "addr": fip["floating_ip_address"],
                                "OS-EXT-IPS:type": "floating",
                                "OS-EXT-IPS-MAC:mac_addr": port["mac_address"]})
    d = {
        "id": s["id"], "name": s["name"], "status": s["status"],
        "tenant_id": ctx.cloud.project_id, "user_id": ctx.cloud.user_id,
        "metadata": dict(s["metadata"]), "hostId": s["hostId"], "image": image,
        "flavor": flavor, "created": s["created"], "updated": s["updated"],
        "addresses": addresses, "accessIPv4": "", "accessIPv6": "", "links": links,
        "OS-DCF:diskConfig": "MANUAL", "progress": s["progress"],
        "OS-EXT-AZ:availability_zone": s["az"] if s["status"] != "BUILD" else "",
        "config_drive": "True" if s["config_drive"] else "",
        "key_name": s["key_name"],
        "OS-SRV-USG:launched_at": s["OS-SRV-USG:launched_at"],
        "OS-SRV-USG:terminated_at": None,
        "security_groups": [{"name": n} for n in s["security_groups"]],
        "OS-EXT-STS:task_state": "deleting" if s["_deleting_at"] is not None
        else s["OS-EXT-STS:task_state"],
        "OS-EXT-STS:vm_state": s["OS-EXT-STS:vm_state"],
        "OS-EXT-STS:power_state": s["OS-EXT-STS:power_state"],
        "os-extended-volumes:volumes_attached": [
            dict({"id": v}, **({"delete_on_termination": s["_vol_delete"].get(v, False)}
                               if mv >= (2, 3) else {})) for v in s["_volumes"]],
    }
    if s["status"] == "ERROR" and s.get("fault"):
        d["fault"] = dict(s["fault"])
    if mv >= (2, 9):
        d["locked"] = False
    if mv >= (2, 19):
        d["description"] = s.get("description")
    if mv >= (2, 26):
        d["tags"] = list(s.get("tags", []))
    if mv >= (2, 63):
        d["trusted_image_certificates"] = None
    if mv >= (2, 73):
        d["locked_reason"] = None
    if mv >= (2, 90):
        d["OS-EXT-SRV-ATTR:hostname"] = s["name"]
    return d


def get_server(ctx, sid):
    s = ctx.reg.servers.get(sid)
    if s is None:
        raise nova_error(404, "Instance %s could not be found." % sid)
    return s


def nova(ctx, rest):
    req = ctx.req
    mv_hdr = None
    if not rest:
        return Response(200, {"versions": [nova_version_doc(ctx)]})
    if rest[0] != "v2.1":
        raise nova_error(404, "Unknown API version")
    r = rest[1:]
    if not r:
        return Response(200, {"version": nova_version_doc(ctx)})
    mv = nova_microversion(req)
    mv_hdr = "%d.%d" % mv
    resp = nova_route(ctx, r, mv)
    resp.headers["OpenStack-API-Version"] = "compute " + mv_hdr
    resp.headers["X-OpenStack-Nova-API-Version"] = mv_hdr
    resp.headers["Vary"] = "OpenStack-API-Version, X-OpenStack-Nova-API-Version"
    return resp


def nova_route(ctx, r, mv):
    req = ctx.req
    reg = ctx.reg
    m = req.method
    base = ctx.base("compute") + "/v2.1"
    try:
        return _nova_route(ctx, r, mv, req, reg, m, base)
    except HTTPError as e:
        mvh = "%d.%d" % mv
        e.headers.setdefault("OpenStack-API-Version", "compute " + mvh)
        e.headers.setdefault("X-OpenStack-Nova-API-Version", mvh)
        raise


def _nova_route(ctx, r, mv, req, reg, m, base):
    n = len(r)
    if r[0] == "flavors":
        if n == 1 or (n == 2 and r[1] == "detail"):
            if m != "GET":
                raise nova_error(405, "Method not allowed")
            detail = n == 2
            fl = list(reg.flavors.values())
            if req.q("minRam"):
                fl = [f for f in fl if f["ram"] >= int(req.q("minRam"))]
            if req.q("minDisk"):
                fl = [f for f in fl if f["disk"] >= int(req.q("minDisk"))]
            out = paginate(ctx, [flavor_view(ctx, f, mv, detail) for f in fl], "flavors",
                           base + "/flavors" + ("/detail" if detail else ""),
                           default_limit=ctx.sim.page_size["compute"])
            return Response(200, out)
        f = reg.flavors.get(r[1])
        if f is None:
            raise nova_error(404, "Flavor %s could not be found." % r[1])
        if n == 2:
            return Response(200, {"flavor": flavor_view(ctx, f, mv)})
        if n >= 3 and r[2] == "os-extra_specs":
            if n == 3:
                return Response(200, {"extra_specs": dict(f["extra_specs"])})
            k = r[3]
            if k not in f["extra_specs"]:
                raise nova_error(404, "Flavor %s has no extra specs with key %s." % (f["id"], k))
            return Response(200, {k: f["extra_specs"][k]})
        if n == 3 and r[2] == "os-flavor-access":
            raise nova_error(404, "Access list not available for public flavors.")
    if r[0] == "servers":
        if n == 1 and m == "POST":
            return create_server(ctx, mv)
        if (n == 1 or (n == 2 and r[1] == "detail")) and m == "GET":
            detail = n == 2
            ss = list(reg.servers.values())
            if req.q("name"):
                rx = re.compile(req.q("name"))
                ss = [s for s in ss if rx.search(s["name"])]
            if req.q("status"):
                ss = [s for s in ss if s["status"] == req.q("status").upper()]
            if req.q("changes-since"):
                pass
            views = [server_view(ctx, s, mv, detail) for s in ss]
            return Response(200, paginate(ctx, views, "servers",
                                          base + "/servers" + ("/detail" if detail else ""),
                                          default_limit=ctx.sim.page_size["compute"]))
        s = get_server(ctx, r[1])
        if n == 2:
            if m == "GET":
                return Response(200, {"server": server_view(ctx, s, mv)})
            if m == "DELETE":
                delete_server(ctx, s)
                return Response(204)
            if m == "PUT":
                upd = (req.json() or {}).get("server") or {}
                if "name" in upd:
                    s["name"] = upd["name"]
                if "description" in upd and mv >= (2, 19):
                    s["description"] = upd["description"]
                s["updated"] = now_iso()
                return Response(200, {"server": server_view(ctx, s, mv)})
        if r[2] == "metadata":
            return server_metadata(ctx, s, r[3:], m)
        if n == 3 and r[2] == "action" and m == "POST":
            return server_action(ctx, s, mv)
        if n == 3 and r[2] == "ips" and m == "GET":
            v = server_view(ctx, s, mv)
            return Response(200, {"addresses": {k: [{"version": a["version"], "addr": a["addr"]}
                                                     for a in lst]
                                                for k, lst in v["addresses"].items()}})
        if n == 3 and r[2] == "os-interface" and m == "GET":
            atts = []
            for pid in s["_ports"]:
                p = reg.ports.get(pid)
                if p:
                    atts.append({"port_id": p["id"], "net_id": p["network_id"],
                                 "mac_addr": p["mac_address"], "port_state": p["status"],
                                 "fixed_ips": p["fixed_ips"]})
            return Response(200, {"interfaceAttachments": atts})
        if n == 3 and r[2] == "os-volume_attachments" and m == "GET":
            return Response(200, {"volumeAttachments": [
                {"id": v, "volumeId": v, "serverId": s["id"], "device": "/dev/vda"}
                for v in s["_volumes"]]})
        if n == 3 and r[2] == "tags" and m == "GET":
            return Response(200, {"tags": list(s.get("tags", []))})
    if r == ["limits"] and m == "GET":
        inst, cores, ram = reg.used()
        ab = dict(reg.compute_limits)
        ab.update(totalInstancesUsed=inst, totalCoresUsed=cores, totalRAMUsed=ram,
                  totalSecurityGroupsUsed=0, totalFloatingIpsUsed=0, totalServerGroupsUsed=0)
        if mv >= (2, 36):
            for k in ("maxSecurityGroups", "maxSecurityGroupRules", "maxTotalFloatingIps",
                      "totalSecurityGroupsUsed", "totalFloatingIpsUsed"):
                ab.pop(k, None)
        if mv >= (2, 57):
            for k in ("maxPersonality", "maxPersonalitySize"):
                ab.pop(k, None)
        return Response(200, {"limits": {"absolute": ab, "rate": []}})
    if r[0] == "os-availability-zone" and m == "GET":
        zones = [{"zoneName": z, "zoneState": {"available": True}, "hosts": None}
                 for z in reg.azs]
        return Response(200, {"availabilityZoneInfo": zones})
    if r[0] == "os-keypairs":
        if n == 1 and m == "GET":
            return Response(200, {"keypairs": [{"keypair": dict(k)} for k in reg.keypairs.values()]})
        if n == 1 and m == "POST":
            kp = (req.json() or {}).get("keypair") or {}
            name = kp.get("name")
            if not name:
                raise nova_error(400, "Keypair data is invalid: name is required")
            if name in reg.keypairs:
                raise nova_error(409, "Key pair '%s' already exists." % name)
            reg.keypairs[name] = {"name": name, "public_key": kp.get("public_key", "ssh-ed25519 AAAA"),
                                  "fingerprint": "00:00", "type": kp.get("type", "ssh")}
            return Response(200, {"keypair": dict(reg.keypairs[name])})
        if n == 2:
            kp = reg.keypairs.get(r[1])
            if kp is None:
                raise nova_error(404, "Keypair %s not found for user %s" % (r[1], ctx.cloud.user_id))
            if m == "DELETE":
                del reg.keypairs[r[1]]
                return Response(202)
            return Response(200, {"keypair": dict(kp)})
    if r[0] == "os-server-groups" and m == "GET":
        return Response(200, {"server_groups": []})
    if r[0] in ("images", "os-floating-ips", "os-security-groups", "os-networks") and mv >= (2, 36):
        raise nova_error(404, "The resource could not be found.")
    if r[0] == "extensions" and m == "GET":
        return Response(200, {"extensions": []})
    raise nova_error(404, "The resource could not be found.")


def create_server(ctx, mv):
    reg = ctx.reg
    body = ctx.req.json() or {}
    sv = body.get("server")
    if not isinstance(sv, dict):
        raise nova_error(400, "Invalid input for field/attribute server.")
    name = sv.get("name")
    if not name or not isinstance(name, str):
        raise nova_error(400, "Invalid input for field/attribute name.")
    fref = str(sv.get("flavorRef", "")).rstrip("/").split("/")[-1]
    flavor = reg.flavors.get(fref)
    if flavor is None:
        raise nova_error(400, "Flavor %s could not be found." % fref)
    image_id = str(sv.get("imageRef") or "").rstrip("/").split("/")[-1]
    bdm = sv.get("block_device_mapping_v2") or []
    boot_vol = None
    for b in bdm:
        if str(b.get("boot_index")) == "0" and b.get("destination_type") == "volume":
            boot_vol = b
    if boot_vol is None:
        if not image_id:
            raise nova_error(400, "Missing imageRef attribute")
        img = reg.images.get(image_id)
        if img is None:
            raise nova_error(400, "Image %s could not be found." % image_id)
        if img["status"] != "active":
            raise nova_error(400, "Image %s is not active." % image_id)
    else:
        if boot_vol.get("source_type") == "image":
            if boot_vol.get("uuid") not in reg.images:
                raise nova_error(400, "Image %s could not be found." % boot_vol.get("uuid"))
        elif boot_vol.get("source_type") == "volume":
            if boot_vol.get("uuid") not in reg.volumes:
                raise nova_error(400, "Volume %s could not be found." % boot_vol.get("uuid"))
    az = sv.get("availability_zone")
    if az and az not in reg.azs:
        raise nova_error(400, "The requested availability zone is not available")
    key_name = sv.get("key_name")
    if key_name and reg.keypairs and key_name not in reg.keypairs:
        raise nova_error(400, "Invalid key_name provided.")
    sgs = []
    for g in sv.get("security_groups") or []:
        gname = g.get("name") if isinstance(g, dict) else g
        if not any(x["name"] == gname or x["id"] == gname for x in reg.secgroups.values()):
            raise nova_error(400, "Unable to find security_group with name or id '%s'" % gname)
        sgs.append(gname)
    if not sgs:
        sgs = ["default"]
    md = sv.get("metadata") or {}
    if not isinstance(md, dict) or any(not isinstance(v, str) for v in md.values()):
        raise nova_error(400, "Invalid input for field/attribute metadata.")
    if any(len(k) > 255 or len(v) > 255 for k, v in md.items()):
        raise nova_error(400, "Invalid input for field/attribute metadata: too long")
    if len(md) > reg.compute_limits.get("maxServerMeta", 128) >= 0:
        raise nova_error(403, "Quota exceeded for metadata_items: Requested %d, but "
                         "already used 0 of %d metadata_items"
                         % (len(md), reg.compute_limits["maxServerMeta"]))
    nets = sv.get("networks")
    if mv >= (2, 37) and nets is None:
        raise nova_error(400, "Invalid input for field/attribute networks.")
    net_ids = []
    port_ids = []
    if isinstance(nets, list):
        for nn in nets:
            if nn.get("port"):
                if nn["port"] not in reg.ports:
                    raise nova_error(400, "Port id %s could not be found." % nn["port"])
                port_ids.append(nn["port"])
            elif nn.get("uuid"):
                if nn["uuid"] not in reg.networks:
                    raise nova_error(400, "Network %s could not be found." % nn["uuid"])
                net_ids.append(nn["uuid"])
    elif nets in (None, "auto"):
        net_ids = list(reg.default_nets)
    # Quota, as Nova checks it at the API: 403 (413 before 2.? in old clouds)
    inst, cores, ram = reg.used()
    lim = reg.compute_limits
    for res, used, want, cap in (("instances", inst, 1, lim["maxTotalInstances"]),
                                 ("cores", cores, flavor["vcpus"], lim["maxTotalCores"]),
                                 ("ram", ram, flavor["ram"], lim["maxTotalRAMSize"])):
        if cap >= 0 and used + want > cap:
            msg = ("Quota exceeded for %s: Requested %d, but already used %d of %d %s"
                   % (res, want, used, cap, res))
            if reg.behavior["quota_status"] == 413:
                raise HTTPError(413, {"overLimit": {"code": 413, "message": msg,
                                                    "retryAfter": "0"}})
            raise nova_error(403, msg)
    now = time.time()
    sid = new_id()
    outcome = reg.outcomes.popleft() if reg.outcomes else {}
    status = outcome.get("status", reg.behavior["boot_outcome"])
    s = {
        "id": sid, "name": name, "status": "BUILD", "metadata": dict(md),
        "hostId": hashlib.sha224((ctx.cloud.project_id + reg.name).encode()).hexdigest(),
        "_image": image_id if boot_vol is None else "", "_flavor": flavor,
        "created": now_iso(now), "updated": now_iso(now), "progress": 0,
        "az": az or reg.azs[0] if reg.azs else "nova", "config_drive": bool(sv.get("config_drive")),
        "key_name": key_name, "OS-SRV-USG:launched_at": None,
        "security_groups": sgs, "OS-EXT-STS:task_state": "scheduling",
        "OS-EXT-STS:vm_state": "building", "OS-EXT-STS:power_state": 0,
        "user_data": sv.get("user_data"), "description": sv.get("description"),
        "tags": list(sv.get("tags") or []),
        "_ports": [], "_volumes": [], "_vol_delete": {}, "_deleting_at": None,
        "_ready_at": now + float(outcome.get("boot_delay", reg.behavior["boot_delay"])),
        "_outcome": {"ACTIVE": "active", "ERROR": "error"}.get(status, status),
        "_fault": outcome.get("fault", reg.behavior["error_fault"]),
        "_addresses_in_build": False,
        "_console": outcome.get("console_output"),
    }
    if s["_outcome"] not in ("active", "error", "never"):
        raise HTTPError(500, {"computeFault": {"code": 500,
                                               "message": "ossim: bad outcome %r" % status}})
    owner = "compute:%s" % s["az"]
    for nid in net_ids:
        try:
            p = reg.make_port(nid, device_id=sid, device_owner=owner, status="DOWN")
        except HTTPError:
            # Nova allocates networks on the compute host: an exhausted
            # network is a build failure, not an API error
            s["_outcome"] = "error"
            s["_fault"] = ("Build of instance %s aborted: Failed to allocate the network(s), "
                           "not rescheduling." % sid)
            continue
        s["_ports"].append(p["id"])
    for pid in port_ids:
        reg.ports[pid].update(device_id=sid, device_owner=owner)
        s["_ports"].append(pid)
    for b in bdm:
        if b.get("destination_type") != "volume":
            continue
        if b.get("source_type") == "volume":
            vid = b["uuid"]
            v = reg.volumes[vid]
        else:
            size = int(b.get("volume_size") or flavor["disk"] or 1)
            nv, gb = reg.volume_used()
            vl = reg.volume_limits
            if (0 <= vl["maxTotalVolumes"] < nv + 1 or
                    0 <= vl["maxTotalVolumeGigabytes"] < gb + size):
                s["_outcome"] = "error"
                s["_fault"] = ("Build of instance %s aborted: VolumeSizeExceedsAvailableQuota: "
                               "Requested volume or snapshot exceeds allowed gigabytes quota."
                               % sid)
                continue
            v = make_volume(reg, "", size, b.get("uuid") if b.get("source_type") == "image" else None,
                            az=s["az"])
            vid = v["id"]
        v["status"] = "attaching"
        v["attachments"] = [{"server_id": sid, "attachment_id": new_id(), "volume_id": vid,
                             "id": vid, "device": "/dev/vda", "host_name": None,
                             "attached_at": now_iso(now, micro=True)}]
        s["_volumes"].append(vid)
        s["_vol_delete"][vid] = truthy(b.get("delete_on_termination", False))
    reg.servers[sid] = s
    reg.created.append((now, sid, name, dict(md)))
    base = ctx.base("compute")
    body = {"server": {"id": sid, "links": [
        {"rel": "self", "href": "%s/v2.1/servers/%s" % (base, sid)},
        {"rel": "bookmark", "href": "%s/servers/%s" % (base, sid)}],
        "OS-DCF:diskConfig": "MANUAL",
        "security_groups": [{"name": g} for g in sgs],
        "adminPass": "simPass" + sid[:8]}}
    return Response(202, body, {"Location": "%s/v2.1/servers/%s" % (base, sid)})


def make_volume(reg, name, size, image_id=None, az=None, description=None, metadata=None):
    vid = new_id()
    t = now_iso(micro=True)
    v = {"id": vid, "name": name, "status": "available", "size": size,
         "availability_zone": az or (reg.azs[0] if reg.azs else "nova"),
         "created_at": t, "updated_at": t, "attachments": [],
         "bootable": "true" if image_id else "false", "encrypted": False, "multiattach": False,
         "volume_type": "__DEFAULT__", "metadata": dict(metadata or {}),
         "description": description, "snapshot_id": None, "source_volid": None,
         "user_id": reg.cloud.user_id, "os-vol-tenant-attr:tenant_id": reg.cloud.project_id,
         "replication_status": None, "consistencygroup_id": None, "group_id": None,
         "links": []}
    if image_id:
        img = reg.images.get(image_id) or {}
        v["volume_image_metadata"] = {"image_id": image_id, "image_name": img.get("name") or ""}
    reg.volumes[vid] = v
    return v


def delete_server(ctx, s):
    reg = ctx.reg
    if s["_deleting_at"] is not None:
        return
    s["_deleting_at"] = time.time() + reg.behavior["delete_delay"]
    if reg.behavior["delete_delay"] <= 0:
        reg.finish_delete(s)


def server_metadata(ctx, s, r, m):
    req = ctx.req
    md = s["metadata"]
    if not r:
        if m == "GET":
            return Response(200, {"metadata": dict(md)})
        new = (req.json() or {}).get("metadata")
        if not isinstance(new, dict):
            raise nova_error(400, "Malformed request body")
        if m == "PUT":
            md.clear()
        md.update({k: str(v) for k, v in new.items()})
        return Response(200, {"metadata": dict(md)})
    k = r[0]
    if m == "GET":
        if k not in md:
            raise nova_error(404, "Metadata item was not found")
        return Response(200, {"meta": {k: md[k]}})
    if m == "PUT":
        new = (req.json() or {}).get("meta") or {}
        if list(new) != [k]:
            raise nova_error(400, "Request body and URI mismatch")
        md[k] = str(new[k])
        return Response(200, {"meta": {k: md[k]}})
    if m == "DELETE":
        if k not in md:
            raise nova_error(404, "Metadata item was not found")
        del md[k]
        return Response(204)
    raise nova_error(405, "Method not allowed")


def server_action(ctx, s, mv):
    body = ctx.req.json() or {}
    if "os-getConsoleOutput" in body:
        out = s["_console"] or ctx.reg.behavior["console_output"]
        if out is None:
            out = ("[    0.000000] Linux version 6.1.0 (ossim)\n"
                   "[    1.000000] cloud-init: instance %s (%s)\n"
                   "%s login:\n" % (s["id"], s["name"], s["name"]))
            if s["status"] == "ERROR":
                out += "[   10.000000] Kernel panic - not syncing: simulated\n"
        length = (body["os-getConsoleOutput"] or {}).get("length")
        if length not in (None, -1):
            out = "\n".join(out.splitlines()[-int(length):]) + "\n"
        return Response(200, {"output": out})
    if "addFloatingIp" in body and mv < (2, 44):
        raise nova_error(400, "addFloatingIp is not supported by the simulator; use Neutron")
    for k in ("reboot", "os-stop", "os-start"):
        if k in body:
            return Response(202)
    raise nova_error(400, "There is no such action: %s" % ",".join(body))


# ---------------------------------------------------------------- Glance


def glance_version_doc(ctx):
    b = ctx.base("image")
    return [{"id": "v2.%d" % i, "status": "CURRENT" if i == 16 else "SUPPORTED",
             "links": [{"rel": "self", "href": b + "/v2/"}]} for i in range(16, -1, -1)]


PROP_RESERVED = {"id", "status", "self", "file", "schema", "created_at", "updated_at",
                 "size", "virtual_size", "checksum", "os_hash_algo", "os_hash_value",
                 "owner", "locations", "direct_url"}


def image_view(img):
    return {k: v for k, v in img.items() if not k.startswith("_")}


def glance(ctx, rest):
    req = ctx.req
    reg = ctx.reg
    m = req.method
    if not rest:
        return Response(300, {"versions": glance_version_doc(ctx)})
    if rest[0] != "v2":
        raise glance_error(404, "Unknown version")
    r = rest[1:]
    n = len(r)
    if not r:
        return Response(300, {"versions": glance_version_doc(ctx)})
    if r[0] == "schemas":
        return Response(200, {"name": r[-1], "properties": {}, "additionalProperties":
                              {"type": "string"}, "links": []})
    if r[0] != "images":
        raise glance_error(404, "The resource could not be found.")
    if n == 1 and m == "GET":
        imgs = list(reg.images.values())
        for k in ("name", "status", "visibility", "disk_format", "container_format",
                  "owner", "id"):
            v = req.q(k)
            if v is not None:
                if v.startswith("in:"):
                    vals = v[3:].split(",")
                    imgs = [i for i in imgs if i.get(k) in vals]
                else:
                    imgs = [i for i in imgs if str(i.get(k)) == v]
        if req.q("visibility") is None:
            imgs = [i for i in imgs if i["visibility"] != "private" or
                    i["owner"] == ctx.cloud.project_id]
        for tag in req.query.get("tag", []):
            imgs = [i for i in imgs if tag in i["tags"]]
        for k, vs in req.query.items():
            if k not in ("name", "status", "visibility", "disk_format", "container_format",
                         "owner", "id", "tag", "limit", "marker", "sort", "sort_key",
                         "sort_dir", "member_status", "os_hidden"):
                imgs = [i for i in imgs if str(i.get(k)) == vs[-1]]
        views = [image_view(i) for i in imgs]
        limit = min(int(req.q("limit") or ctx.sim.page_size["image"]), 1000)
        marker = req.q("marker")
        if marker:
            ids = [i["id"] for i in views]
            if marker not in ids:
                raise glance_error(400, "marker not found")
            views = views[ids.index(marker) + 1:]
        out = {"schema": "/v2/schemas/images", "first": "/v2/images"}
        if len(views) > limit:
            views = views[:limit]
            q = {k: v[-1] for k, v in req.query.items() if k != "marker"}
            q["marker"] = views[-1]["id"]
            out["next"] = "/v2/images?" + urllib.parse.urlencode(q)
        out["images"] = views
        return Response(200, out)
    if n == 1 and m == "POST":
        b = req.json() or {}
        if not isinstance(b, dict):
            raise glance_error(400, "Invalid body")
        bad = set(b) & (PROP_RESERVED - {"id"})
        if bad:
            raise glance_error(403, "Attribute '%s' is read-only." % sorted(bad)[0])
        if b.get("id") in reg.images:
            raise glance_error(409, "Image with identifier %s already exists!" % b["id"])
        spec = {"name": b.get("name"), "id": b.get("id"),
                "visibility": b.get("visibility", "shared"),
                "disk_format": b.get("disk_format"), "container_format": b.get("container_format"),
                "tags": b.get("tags", []), "min_disk": b.get("min_disk", 0),
                "min_ram": b.get("min_ram", 0), "size": None,
                "properties": {k: v for k, v in b.items()
                               if k not in ("name", "id", "visibility", "disk_format",
                                            "container_format", "tags", "min_disk",
                                            "min_ram")}}
        img = reg.add_image(spec, active=False)
        img["protected"] = bool(b.get("protected", False))
        return Response(201, image_view(img), {"Location": ctx.base("image") + img["self"]})
    img = reg.images.get(r[1])
    if img is None:
        raise glance_error(404, "No image found with ID %s" % r[1])
    if n == 2:
        if m == "GET":
            return Response(200, image_view(img))
        if m == "DELETE":
            if img["protected"]:
                raise glance_error(403, "Image %s is protected and cannot be deleted." % img["id"])
            reg.images.pop(img["id"])
            if img.get("_path"):
                try:
                    os.unlink(img["_path"])
                except OSError:
                    pass
            return Response(204)
        if m == "PATCH":
            ops = req.json()
            if not isinstance(ops, list):
                raise glance_error(400, "Invalid JSON patch")
            for op in ops:
                path = op.get("path", "").lstrip("/")
                if path in PROP_RESERVED:
                    raise glance_error(403, "Attribute '%s' is read-only." % path)
                if op.get("op") in ("add", "replace"):
                    if path == "tags":
                        img["tags"] = list(op.get("value") or [])
                    else:
                        img[path] = op.get("value")
                elif op.get("op") == "remove":
                    if path not in img:
                        raise glance_error(409, "Property %s does not exist." % path)
                    del img[path]
                else:
                    raise glance_error(400, "Invalid operation: %r" % op.get("op"))
            img["updated_at"] = now_iso()
            return Response(200, image_view(img))
    if n == 3 and r[2] == "file":
        if m == "PUT":
            return image_upload(ctx, img)
        if m == "GET":
            if img["status"] != "active":
                raise glance_error(409, "Image %s has no data." % img["id"])
            data = b""
            if img.get("_path"):
                with open(img["_path"], "rb") as f:
                    data = f.read()
            return Response(200, data, {"Content-Type": "application/octet-stream",
                                        "Content-MD5": img.get("checksum") or ""})
    if n == 4 and r[2] == "tags":
        if m == "PUT":
            if r[3] not in img["tags"]:
                img["tags"].append(r[3])
            return Response(204)
        if m == "DELETE":
            if r[3] not in img["tags"]:
                raise glance_error(404, "Tag %s not found" % r[3])
            img["tags"].remove(r[3])
            return Response(204)
    raise glance_error(404, "The resource could not be found.")


def image_upload(ctx, img):
    """PUT /v2/images/{id}/file: the body streamed to disk (the lock is
    released while bytes arrive), then the image goes active."""
    sim = ctx.sim
    if img["status"] not in ("queued",):
        raise glance_error(409, "Image status transition from %s to saving is not allowed"
                           % img["status"])
    img["status"] = "saving"
    d = sim.data_dir
    path = os.path.join(d, img["id"]) if d else None
    md5 = hashlib.md5()
    sha = hashlib.sha512()
    size = 0
    reader = ctx.req.body
    sim.lock.release()
    try:
        f = open(path, "wb") if path else None
        try:
            while True:
                b = reader.read(1 << 16)
                if not b:
                    break
                md5.update(b)
                sha.update(b)
                size += len(b)
                if f:
                    f.write(b)
        finally:
            if f:
                f.close()
    finally:
        sim.lock.acquire()
    if ctx.reg.images.get(img["id"]) is not img:
        raise glance_error(404, "Image %s was deleted during upload" % img["id"])
    img.update(status="active", size=size, checksum=md5.hexdigest(), os_hash_algo="sha512",
               os_hash_value=sha.hexdigest(), updated_at=now_iso())
    img["_path"] = path
    return Response(204)


# ---------------------------------------------------------------- Neutron

NEUTRON_EXTENSIONS = ["agent", "allowed-address-pairs", "binding", "external-net",
                      "extra_dhcp_opt", "extraroute", "network_availability_zone",
                      "port-security", "project-id", "provider", "quotas", "router",
                      "security-group", "standard-attr-description",
                      "standard-attr-revisions", "standard-attr-tag",
                      "standard-attr-timestamp", "subnet_allocation", "dns-integration",
                      "fip-port-details"]

NEUTRON_NOFILTER = {"limit", "marker", "fields", "sort_key", "sort_dir", "page_reverse",
                    "tags", "tags-any", "not-tags", "not-tags-any"}


def neutron_filter(req, items):
    for k, vs in req.query.items():
        if k in NEUTRON_NOFILTER:
            continue
        if k == "fixed_ips":
            # fixed_ips=ip_address=1.2.3.4 / subnet_id=...
            out = []
            for v in vs:
                fk, _, fv = v.partition("=")
                out = [i for i in items if any(str(ip.get(fk)) == fv for ip in i.get(k, []))]
            items = out
            continue
        wanted = set(vs) | {w.lower() for w in vs if w.lower() in ("true", "false")}
        items = [i for i in items if _neutron_val(i.get(k)) in wanted]
    for t in req.query.get("tags", []):
        items = [i for i in items if set(t.split(",")) <= set(i.get("tags", []))]
    fields = req.query.get("fields")
    if fields:
        items = [{k: v for k, v in i.items() if k in fields} for i in items]
    return items


def _neutron_val(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return "" if v is None else str(v)


def neutron_view(o):
    return {k: v for k, v in o.items() if not k.startswith("_")}


def fip_view(reg, f):
    d = neutron_view(f)
    if f["port_id"] and f["port_id"] in reg.ports:
        p = reg.ports[f["port_id"]]
        d["port_details"] = {"name": p["name"], "network_id": p["network_id"],
                             "mac_address": p["mac_address"], "admin_state_up": True,
                             "status": p["status"], "device_id": p["device_id"],
                             "device_owner": p["device_owner"]}
    else:
        d["port_details"] = None
    return d


def neutron(ctx, rest):
    req = ctx.req
    reg = ctx.reg
    m = req.method
    if not rest:
        return Response(200, {"versions": [{"id": "v2.0", "status": "CURRENT", "links": [
            {"rel": "self", "href": ctx.base("network") + "/v2.0/"}]}]})
    if rest[0] != "v2.0":
        raise neutron_error(404, "HTTPNotFound", "The resource could not be found.")
    r = rest[1:]
    n = len(r)
    if not r:
        return Response(200, {"resources": [
            {"name": x[:-1], "collection": x, "links": [
                {"rel": "self", "href": ctx.base("network") + "/v2.0/" + x}]}
            for x in ("networks", "subnets", "ports", "floatingips", "security-groups")]})
    res = r[0]
    if res.endswith(".json"):
        res = res[:-5]
    base = ctx.base("network") + "/v2.0/" + res
    if res == "extensions" and m == "GET":
        return Response(200, {"extensions": [
            {"alias": a, "name": a, "description": "", "updated": "2023-01-01T00:00:00-00:00",
             "links": []} for a in NEUTRON_EXTENSIONS]})
    tables = {"networks": (reg.networks, "network", "Network"),
              "subnets": (reg.subnets, "subnet", "Subnet"),
              "ports": (reg.ports, "port", "Port"),
              "floatingips": (reg.fips, "floatingip", "FloatingIP"),
              "security-groups": (reg.secgroups, "security_group", "SecurityGroup")}
    if res in ("routers", "security-group-rules", "qos-policies", "trunks", "availability_zones"):
        if n == 1 and m == "GET":
            return Response(200, {res.replace("-", "_"): []})
    if res == "quotas" and m == "GET":
        return Response(200, {"quota": {"network": 100, "subnet": 100, "port": 500,
                                        "floatingip": reg.compute_limits["maxTotalFloatingIps"],
                                        "router": 10, "security_group": 10,
                                        "security_group_rule": 100}})
    if res not in tables:
        raise neutron_error(404, "HTTPNotFound", "The resource could not be found.")
    table, single, typ = tables[res]
    key = res.replace("-", "_")
    view = (lambda o: fip_view(reg, o)) if res == "floatingips" else neutron_view
    if n == 1 and m == "GET":
        items = neutron_filter(req, [view(o) for o in table.values()])
        return Response(200, paginate(ctx, items, key, base, max_limit=100000))
    if n == 1 and m == "POST":
        b = (req.json() or {}).get(single)
        if not isinstance(b, dict):
            raise neutron_error(400, "HTTPBadRequest", "Resource body required")
        if res == "floatingips":
            return Response(201, {single: fip_view(reg, create_fip(ctx, b))})
        if res == "ports":
            net = reg.networks.get(b.get("network_id") or "")
            if net is None:
                raise neutron_error(404, "NetworkNotFound",
                                    "Network %s could not be found." % b.get("network_id"))
            p = reg.make_port(net["id"], device_id=b.get("device_id", ""),
                              device_owner=b.get("device_owner", ""), status="DOWN",
                              name=b.get("name", ""))
            return Response(201, {single: neutron_view(p)})
        raise neutron_error(400, "HTTPBadRequest", "Creating %s is not simulated" % res)
    o = table.get(r[1])
    if o is None:
        raise neutron_error(404, typ + "NotFound", "%s %s could not be found." % (typ, r[1]))
    if n == 2 and m == "GET":
        return Response(200, {single: view(o)})
    if n == 2 and m == "DELETE":
        if res == "floatingips":
            del table[r[1]]
            return Response(204)
        if res == "ports":
            if o["device_owner"].startswith("network:"):
                raise neutron_error(409, "PortInUse", "Port %s cannot be deleted directly." % o["id"])
            for f in reg.fips.values():
                if f["port_id"] == o["id"]:
                    f.update(port_id=None, fixed_ip_address=None, status="DOWN", router_id=None)
            del table[r[1]]
            for s in reg.servers.values():
                if o["id"] in s["_ports"]:
                    s["_ports"].remove(o["id"])
            return Response(204)
        raise neutron_error(409, "InUse", "Deleting %s is not simulated" % res)
    if n == 2 and m == "PUT":
        b = (req.json() or {}).get(single)
        if not isinstance(b, dict):
            raise neutron_error(400, "HTTPBadRequest", "Resource body required")
        if res == "floatingips":
            if "port_id" in b:
                fip_associate(ctx, o, b.get("port_id"), b.get("fixed_ip_address"))
            if "description" in b:
                o["description"] = b["description"]
            o["updated_at"] = now_iso()
            o["revision_number"] += 1
            return Response(200, {single: fip_view(reg, o)})
        for k, v in b.items():
            if k in ("name", "description", "admin_state_up", "device_owner", "device_id"):
                o[k] = v
        o["updated_at"] = now_iso()
        o["revision_number"] = o.get("revision_number", 0) + 1
        return Response(200, {single: neutron_view(o)})
    if n == 3 and r[2] == "tags" and m == "GET":
        return Response(200, {"tags": list(o.get("tags", []))})
    raise neutron_error(404, "HTTPNotFound", "The resource could not be found.")


def create_fip(ctx, b):
    reg = ctx.reg
    net = reg.networks.get(b.get("floating_network_id") or "")
    if net is None:
        raise neutron_error(404, "NetworkNotFound",
                            "Network %s could not be found." % b.get("floating_network_id"))
    if not net["router:external"]:
        raise neutron_error(400, "BadRequest", "Network %s is not a valid external network"
                            % net["id"])
    cap = reg.compute_limits.get("maxTotalFloatingIps", -1)
    if 0 <= cap <= len(reg.fips):
        raise neutron_error(409, "OverQuota", "Quota exceeded for resources: ['floatingip'].")
    sub = reg.subnets[net["subnets"][0]]
    fid = new_id()
    t = now_iso()
    f = {"id": fid, "floating_ip_address": reg.alloc_ip(sub), "floating_network_id": net["id"],
         "router_id": None, "port_id": None, "fixed_ip_address": None, "status": "DOWN",
         "tenant_id": ctx.cloud.project_id, "project_id": ctx.cloud.project_id,
         "description": b.get("description", ""), "dns_domain": "", "dns_name": "",
         "tags": [], "port_forwardings": [], "qos_policy_id": None,
         "created_at": t, "updated_at": t, "revision_number": 0, "_active_at": None}
    reg.fips[fid] = f
    if b.get("port_id"):
        fip_associate(ctx, f, b["port_id"], b.get("fixed_ip_address"))
    return f


def fip_associate(ctx, f, port_id, fixed):
    reg = ctx.reg
    if port_id is None:
        f.update(port_id=None, fixed_ip_address=None, router_id=None, status="DOWN",
                 _active_at=None)
        return
    port = reg.ports.get(port_id)
    if port is None:
        raise neutron_error(404, "PortNotFound", "Port %s could not be found." % port_id)
    if reg.networks[port["network_id"]]["router:external"]:
        raise neutron_error(400, "BadRequest", "Port %s is on an external network" % port_id)
    for other in reg.fips.values():
        if other is not f and other["port_id"] == port_id:
            raise neutron_error(409, "FloatingIPPortAlreadyAssociated",
                                "Cannot associate floating IP %s with port %s: already has "
                                "floating IP %s" % (f["floating_ip_address"], port_id,
                                                    other["floating_ip_address"]))
    ips = [i["ip_address"] for i in port["fixed_ips"]]
    if fixed and fixed not in ips:
        raise neutron_error(400, "BadRequest", "Port %s does not have fixed ip %s" % (port_id, fixed))
    f.update(port_id=port_id, fixed_ip_address=fixed or ips[0], router_id="router-sim")
    d = reg.behavior["fip_delay"]
    if d > 0:
        f["status"] = "DOWN"
        f["_active_at"] = time.time() + d
    else:
        f["status"] = "ACTIVE"


# ---------------------------------------------------------------- Cinder


def cinder_microversion(req):
    h = req.headers.get("OpenStack-API-Version")
    if h:
        parts = h.split()
        if len(parts) == 2 and parts[0].lower() in ("volume", "block-storage"):
            v = parts[1]
            if v.lower() == "latest":
                return CINDER_MAX
            try:
                mv = parse_version(v)
            except ValueError:
                raise cinder_error(400, "Invalid API version %s" % v)
            if mv < CINDER_MIN or mv > CINDER_MAX:
                raise HTTPError(406, {"computeFault": {"code": 406, "message":
                                                       "Version %s is not supported" % v}})
            return mv
    return CINDER_MIN


def cinder_version_doc(ctx):
    return {"id": "v3.0", "status": "CURRENT", "version": "%d.%d" % CINDER_MAX,
            "min_version": "%d.%d" % CINDER_MIN, "updated": "2023-01-01T00:00:00Z",
            "links": [{"rel": "self", "href": ctx.base("volume") + "/v3/"}],
            "media-types": [{"base": "application/json",
                             "type": "application/vnd.openstack.volume+json;version=3"}]}


def cinder(ctx, rest):
    req = ctx.req
    reg = ctx.reg
    m = req.method
    if not rest:
        return Response(300, {"versions": [cinder_version_doc(ctx)]})
    if rest[0] != "v3":
        raise cinder_error(404, "Unknown API version")
    r = rest[1:]
    if r and r[0] == ctx.cloud.project_id:
        r = r[1:]
    if not r:
        return Response(200, {"version": cinder_version_doc(ctx)})
    mv = cinder_microversion(req)
    resp = _cinder_route(ctx, r, reg, m, req, mv)
    resp.headers["OpenStack-API-Version"] = "volume %d.%d" % mv
    resp.headers["Vary"] = "OpenStack-API-Version"
    return resp


def _cinder_route(ctx, r, reg, m, req, mv):
    n = len(r)
    base = "%s/v3/%s" % (ctx.base("volume"), ctx.cloud.project_id)
    if r == ["limits"] and m == "GET":
        nv, gb = reg.volume_used()
        ab = dict(reg.volume_limits)
        ab.update(totalVolumesUsed=nv, totalGigabytesUsed=gb, totalSnapshotsUsed=0,
                  totalBackupsUsed=0, totalBackupGigabytesUsed=0)
        return Response(200, {"limits": {"rate": [], "absolute": ab}})
    if r[0] == "volumes":
        if (n == 1 or (n == 2 and r[1] == "detail")) and m == "GET":
            vs = list(reg.volumes.values())
            for k in ("name", "status"):
                if req.q(k) is not None:
                    vs = [v for v in vs if v.get(k) == req.q(k)]
            if n == 1:
                vs = [{"id": v["id"], "name": v["name"], "links": []} for v in vs]
            else:
                vs = [dict(v) for v in vs]
            return Response(200, paginate(ctx, vs, "volumes", base + "/volumes" +
                                          ("/detail" if n == 2 else ""),
                                          default_limit=ctx.sim.page_size["volume"]))
        if n == 1 and m == "POST":
            b = (req.json() or {}).get("volume")
            if not isinstance(b, dict) or not b.get("size"):
                raise cinder_error(400, "Invalid input received: size is required")
            size = int(b["size"])
            nv, gb = reg.volume_used()
            vl = reg.volume_limits
            if 0 <= vl["maxTotalVolumes"] < nv + 1:
                raise HTTPError(413, {"overLimit": {"code": 413, "message":
                                                    "VolumeLimitExceeded: Maximum number of "
                                                    "volumes allowed (%d) exceeded for quota "
                                                    "'volumes'." % vl["maxTotalVolumes"],
                                                    "retryAfter": "0"}})
            if 0 <= vl["maxTotalVolumeGigabytes"] < gb + size:
                raise HTTPError(413, {"overLimit": {"code": 413, "message":
                                                    "VolumeSizeExceedsAvailableQuota: Requested "
                                                    "volume or snapshot exceeds allowed "
                                                    "gigabytes quota. Requested %dG, quota is "
                                                    "%dG and %dG has been consumed."
                                                    % (size, vl["maxTotalVolumeGigabytes"], gb),
                                                    "retryAfter": "0"}})
            v = make_volume(reg, b.get("name") or "", size, b.get("imageRef"),
                            az=b.get("availability_zone"), description=b.get("description"),
                            metadata=b.get("metadata"))
            return Response(202, {"volume": dict(v)})
        v = reg.volumes.get(r[1])
        if v is None:
            raise cinder_error(404, "Volume %s could not be found." % r[1])
        if n == 2 and m == "GET":
            return Response(200, {"volume": dict(v)})
        if n == 2 and m == "DELETE":
            if v["attachments"]:
                raise cinder_error(400, "Invalid volume: Volume status must be available or "
                                   "error or error_restoring or error_extending or "
                                   "error_managing and must not be migrating, attached, "
                                   "belong to a group, have snapshots or be disassociated "
                                   "from snapshots after volume transfer.")
            del reg.volumes[r[1]]
            return Response(202)
        if n == 3 and r[2] == "metadata" and m == "GET":
            return Response(200, {"metadata": dict(v["metadata"])})
    if r[0] == "types" and m == "GET":
        return Response(200, {"volume_types": [{"id": "vt-default", "name": "__DEFAULT__",
                                                "is_public": True, "extra_specs": {},
                                                "description": "Default Volume Type"}]})
    if r[0] == "os-availability-zone" and m == "GET":
        return Response(200, {"availabilityZoneInfo": [
            {"zoneName": z, "zoneState": {"available": True}} for z in reg.azs]})
    raise cinder_error(404, "The resource could not be found.")


# ---------------------------------------------------------------- control API


def ctl_regions(sim, b):
    """The regions a control call names: cloud and region optional (all)."""
    out = []
    for cn, c in sim.clouds.items():
        if b.get("cloud") and b["cloud"] != cn:
            continue
        for rn, r in c.regions.items():
            if b.get("region") and b["region"] != rn:
                continue
            out.append(r)
    if not out:
        raise HTTPError(404, {"error": "no region matches cloud=%r region=%r"
                              % (b.get("cloud"), b.get("region"))})
    return out


def region_state(sim, reg):
    now = time.time()
    reg.advance(now)
    ctx = Ctx(sim, reg.cloud, reg, "public", None)
    return {
        "servers": [dict(server_view(ctx, s, NOVA_MAX),
                         user_data=s["user_data"], deleting=s["_deleting_at"] is not None)
                    for s in reg.servers.values()],
        "ports": [neutron_view(p) for p in reg.ports.values()],
        "floating_ips": [fip_view(reg, f) for f in reg.fips.values()],
        "volumes": [dict(v) for v in reg.volumes.values()],
        "images": [dict(image_view(i), path=i.get("_path")) for i in reg.images.values()],
        "networks": [neutron_view(x) for x in reg.networks.values()],
        "subnets": [neutron_view(x) for x in reg.subnets.values()],
        "flavors": [dict(f) for f in reg.flavors.values()],
        "behavior": dict(reg.behavior),
        "compute_limits": dict(reg.compute_limits),
        "volume_limits": dict(reg.volume_limits),
    }


def control(sim, req):
    segs = [s for s in req.path.split("/") if s][1:]
    m = req.method
    b = {}
    if req.body:
        try:
            b = json.loads(req.body)
        except ValueError:
            raise HTTPError(400, {"error": "control body must be JSON"})
    for k, v in req.query.items():
        b.setdefault(k, v[-1])
    with sim.lock:
        if segs == ["ping"]:
            return Response(200, {"ok": True, "pid": os.getpid(), "base": sim.base()})
        if segs == ["faults"]:
            if m == "GET":
                return Response(200, {"faults": [f.view() for f in sim.faults.values()]})
            if m == "POST":
                sim.fault_seq += 1
                try:
                    f = Fault(sim.fault_seq, b)
                except (ValueError, re.error) as e:
                    raise HTTPError(400, {"error": str(e)})
                sim.faults[f.id] = f
                return Response(201, f.view())
            if m == "DELETE":
                for f in sim.faults.values():
                    f.released.set()
                sim.faults.clear()
                return Response(204)
        if len(segs) == 2 and segs[0] == "faults":
            f = sim.faults.get(int(segs[1])) if segs[1].isdigit() else None
            if f is None:
                raise HTTPError(404, {"error": "no fault %s" % segs[1]})
            if m == "DELETE":
                f.released.set()
                del sim.faults[f.id]
                return Response(204)
            return Response(200, f.view())
        if segs == ["calls"]:
            if m == "DELETE":
                sim.calls.clear()
                sim.log.clear()
                sim.connections = 0
                return Response(204)
            calls = []
            for (c, r, i, s, meth, route), cnt in sorted(sim.calls.items()):
                if b.get("cloud") and b["cloud"] != c:
                    continue
                if b.get("region") and b["region"] not in (r, "-"):
                    continue
                calls.append({"cloud": c, "region": None if r == "-" else r, "interface": i,
                              "service": s, "method": meth, "route": route, "count": cnt})
            return Response(200, {"total": sum(x["count"] for x in calls), "calls": calls,
                                  "connections": sim.connections})
        if segs == ["calls", "log"]:
            return Response(200, {"log": [
                {"time": t, "cloud": c, "region": None if r == "-" else r, "interface": i,
                 "service": s, "method": meth, "route": route}
                # in arrival order (the log is in sim.lock's order)
                for (t, c, r, i, s, meth, route) in sorted(sim.log)]})
        if segs == ["state"]:
            out = {}
            for reg in ctl_regions(sim, b):
                out.setdefault(reg.cloud.name, {})[reg.name] = region_state(sim, reg)
            return Response(200, {"clouds": out})
        if len(segs) == 1 and segs[0] in ("servers", "ports", "floating_ips", "volumes",
                                          "images", "networks") and m == "GET":
            out = []
            for reg in ctl_regions(sim, b):
                for o in region_state(sim, reg)[segs[0]]:
                    o["cloud"] = reg.cloud.name
                    o["region"] = reg.name
                    out.append(o)
            return Response(200, {segs[0]: out})
        if segs == ["servers", "created"] and m == "GET":
            return Response(200, {"created": [
                {"time": t, "id": sid, "name": n, "metadata": md,
                 "cloud": reg.cloud.name, "region": reg.name}
                for reg in ctl_regions(sim, b) for (t, sid, n, md) in reg.created]})
        if segs == ["behavior"] and m in ("POST", "PUT"):
            regs = ctl_regions(sim, b)
            for reg in regs:
                for k, v in b.items():
                    if k in ("cloud", "region"):
                        continue
                    if k not in reg.behavior:
                        raise HTTPError(400, {"error": "unknown behavior key %r" % k})
                    cur = reg.behavior[k]
                    if isinstance(cur, bool):
                        v = truthy(v) if isinstance(v, str) else bool(v)
                    elif cur is not None and v is not None and k != "console_output":
                        v = type(cur)(v)
                    reg.behavior[k] = v
            return Response(200, {"behavior": [dict(r.behavior, cloud=r.cloud.name, region=r.name)
                                               for r in regs]})
        if segs == ["outcomes"] and m == "POST":
            for reg in ctl_regions(sim, b):
                for o in b.get("outcomes", []):
                    reg.outcomes.append(dict(o))
            return Response(200, {"queued": len(b.get("outcomes", []))})
        if segs == ["limits"] and m in ("POST", "PUT"):
            for reg in ctl_regions(sim, b):
                reg.compute_limits.update(b.get("compute") or {})
                reg.volume_limits.update(b.get("volume") or {})
            return Response(200, {})
        if segs == ["tokens", "expire"] and m == "POST":
            n = 0
            for c in sim.clouds.values():
                if b.get("cloud") and b["cloud"] != c.name:
                    continue
                for t in c.tokens.values():
                    t["expires"] = 0
                    n += 1
            return Response(200, {"expired": n})
        if segs == ["token_ttl"] and m == "POST":
            for c in sim.clouds.values():
                if not b.get("cloud") or b["cloud"] == c.name:
                    c.token_ttl = float(b["ttl"])
            return Response(200, {})
        if segs == ["images"] and m == "POST":
            out = []
            for reg in ctl_regions(sim, b):
                out.append(image_view(reg.add_image(b.get("image") or {}, active=True)))
            return Response(201, {"images": out})
        if segs == ["ports"] and m == "POST":
            out = []
            for reg in ctl_regions(sim, b):
                net = reg.find_network(b.get("network", "private"))
                if net is None:
                    raise HTTPError(404, {"error": "no network %r" % b.get("network")})
                p = reg.make_port(net["id"], device_id=b.get("device_id", ""),
                                  device_owner=b.get("device_owner", "compute:nova"),
                                  status=b.get("status", "DOWN"))
                out.append(neutron_view(p))
            return Response(201, {"ports": out})
        if segs == ["floating_ips"] and m == "POST":
            out = []
            for reg in ctl_regions(sim, b):
                ext = [x for x in reg.networks.values() if x["router:external"]]
                if not ext:
                    raise HTTPError(404, {"error": "region %s has no external network" % reg.name})
                ctx = Ctx(sim, reg.cloud, reg, "public", None)
                out.append(fip_view(reg, create_fip(ctx, {"floating_network_id": ext[0]["id"]})))
            return Response(201, {"floating_ips": out})
        if segs == ["servers", "error"] and m == "POST":
            # An ACTIVE server breaks: goes ERROR with a fault.
            for reg in ctl_regions(sim, b):
                s = reg.servers.get(b.get("id"))
                if s:
                    reg.set_error(s, b.get("fault", "simulated failure"), time.time())
                    return Response(200, {})
            raise HTTPError(404, {"error": "no server %r" % b.get("id")})
    raise HTTPError(404, {"error": "no control endpoint %s %s" % (m, req.path)})


# ---------------------------------------------------------------- TLS


def make_tls(d, host):
    """A self-signed CA and a server certificate for host (IP or name) in
    directory d, made with the openssl command; reused when present.
    Returns (ca.pem, server.pem, server.key)."""
    os.makedirs(d, exist_ok=True)
    ca, ck = os.path.join(d, "ca.pem"), os.path.join(d, "ca.key")
    crt, key = os.path.join(d, "server.pem"), os.path.join(d, "server.key")
    if all(os.path.exists(p) for p in (ca, crt, key)):
        return ca, crt, key
    run = lambda *a: subprocess.run(a, check=True, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
        "-subj", "/CN=ossim test CA", "-keyout", ck, "-out", ca)
    csr = os.path.join(d, "server.csr")
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=%s" % host,
        "-keyout", key, "-out", csr)
    try:
        ipaddress.ip_address(host)
        san = "IP:%s,DNS:localhost,IP:127.0.0.1" % host
    except ValueError:
        san = "DNS:%s,DNS:localhost,IP:127.0.0.1" % host
    ext = os.path.join(d, "san.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=%s\nbasicConstraints=CA:FALSE\n"
                "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n" % san)
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ck, "-CAcreateserial",
        "-days", "30", "-extfile", ext, "-out", crt)
    return ca, crt, key


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr, handler, tls_ctx=None):
        self.tls_ctx = tls_ctx
        super().__init__(addr, handler)

    def get_request(self):
        sock, addr = self.socket.accept()
        if self.tls_ctx is not None:
            sock = self.tls_ctx.wrap_socket(sock, server_side=True,
                                            do_handshake_on_connect=False)
        return sock, addr

    def handle_error(self, request, client_address):
        if os.environ.get("OSSIM_DEBUG"):
            super().handle_error(request, client_address)

    def process_request_thread(self, request, client_address):
        # OSSIM_PROFILE=FILE: each connection's thread under its own
        # cProfile profiler (a profiler sees one thread) timing the
        # thread's CPU (not wall time, which counts waits for the GIL and
        # for the next request), merged into FILE at exit (main); a
        # diagnostic, off unless asked
        if PROFILES is None:
            return super().process_request_thread(request, client_address)
        import cProfile
        prof = cProfile.Profile(time.thread_time)
        prof.enable()
        try:
            super().process_request_thread(request, client_address)
        finally:
            prof.disable()
            with PROFILES_LOCK:
                PROFILES.append(prof)


# OSSIM_PROFILE: the finished threads' profilers (Server), dumped by main
PROFILES = [] if os.environ.get("OSSIM_PROFILE") else None
PROFILES_LOCK = threading.Lock()


def dump_profiles(path):
    """Merges the connection threads' cProfile stats (OSSIM_PROFILE) into
    path (pstats format, read with `python3 -m pstats path`)."""
    import pstats
    with PROFILES_LOCK:
        profs = list(PROFILES)
    if not profs:
        return
    st = pstats.Stats(profs[0])
    for pr in profs[1:]:
        st.add(pr)
    st.dump_stats(path)


def serve(cfg, host="127.0.0.1", port=0, tls_dir=None, control_port=None, ready_file=None):
    """Start the simulator; returns (sim, [servers]) with threads running."""
    scheme = "https" if tls_dir else "http"
    sim = Sim(cfg, scheme=scheme, host=host)
    sim.stopping = False
    tls_ctx = None
    info = {"pid": os.getpid()}
    if tls_dir:
        ca, crt, key = make_tls(tls_dir, host)
        tls_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls_ctx.load_cert_chain(crt, key)
        info["cacert"] = ca
    H = type("H", (Handler,), {"sim": sim})
    srv = Server((host, port), H, tls_ctx)
    sim.port = srv.server_address[1]
    servers = [srv]
    info.update(port=sim.port, base=sim.base(), scheme=scheme,
                clouds={c: {"auth_url": "%s/%s/identity/v3" % (sim.base(), c),
                            "project_id": cl.project_id, "project_name": cl.project_name,
                            "username": cl.user_name, "password": cl.password,
                            "user_domain_name": cl.domain, "project_domain_name": cl.domain,
                            "application_credentials": list(cl.app_creds.values()),
                            "regions": list(cl.regions)}
                        for c, cl in sim.clouds.items()})
    if tls_dir or control_port is not None:
        HC = type("HC", (Handler,), {"sim": sim, "control_only": True})
        csrv = Server((host, control_port or 0), HC)
        servers.append(csrv)
        info["control_port"] = csrv.server_address[1]
        info["control"] = "http://%s:%d/_sim" % (host, info["control_port"])
    else:
        info["control_port"] = sim.port
        info["control"] = sim.base() + "/_sim"
    if sim.data_dir is None and cfg.get("data_dir") is None and ready_file:
        sim.data_dir = os.path.join(os.path.dirname(os.path.abspath(ready_file)), "ossim-images")
    if sim.data_dir:
        os.makedirs(sim.data_dir, exist_ok=True)
    for s in servers:
        threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
    sim.info = info
    if ready_file:
        tmp = ready_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(info, f, indent=1)
        os.rename(tmp, ready_file)
    return sim, servers


def main(argv=None):
    ap = argparse.ArgumentParser(prog="ossim", description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: a free port (see --ready-file)")
    ap.add_argument("--config", help="JSON (or YAML) simulator configuration file")
    ap.add_argument("--regions", help="comma-separated region names (single cloud 'sim')")
    ap.add_argument("--cloud", default="sim", help="cloud name when --regions is used")
    ap.add_argument("--boot-delay", type=float, help="seconds in BUILD before ACTIVE")
    ap.add_argument("--floating-ips", action="store_true",
                    help="regions without a provider network: servers need floating IPs")
    ap.add_argument("--tls-dir", help="serve HTTPS with a self-signed CA made (or reused) here")
    ap.add_argument("--control-port", type=int, help="also serve /_sim/ on this plain-HTTP port")
    ap.add_argument("--data-dir", help="where uploaded image data is written")
    ap.add_argument("--ready-file", help="write {port, control_port, pid, ...} JSON here when up")
    a = ap.parse_args(argv)
    cfg = {}
    if a.config:
        with open(a.config) as f:
            text = f.read()
        try:
            cfg = json.loads(text)
        except ValueError:
            import yaml  # python3-yaml, Debian
            cfg = yaml.safe_load(text)
    if a.regions:
        rc = {}
        for r in a.regions.split(","):
            rc[r] = {}
        cfg.setdefault("clouds", {})
        cfg["clouds"].setdefault(a.cloud, {})["regions"] = rc
    if a.boot_delay is not None or a.floating_ips:
        clouds = cfg.get("clouds") or {cfg.get("cloud", "sim"): cfg}
        for c in clouds.values():
            regs = c.setdefault("regions", {"RegionOne": {}})
            if isinstance(regs, list):
                regs = c["regions"] = {r: {} for r in regs}
            for r in regs.values():
                if a.boot_delay is not None:
                    r.setdefault("boot_delay", a.boot_delay)
                if a.floating_ips:
                    r.setdefault("floating_ips", True)
    if a.data_dir:
        cfg["data_dir"] = a.data_dir
    sim, servers = serve(cfg, host=a.host, port=a.port, tls_dir=a.tls_dir,
                         control_port=a.control_port, ready_file=a.ready_file)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    sys.stderr.write("ossim: serving %s (control %s), pid %d\n"
                     % (sim.base(), sim.info["control"], os.getpid()))
    sys.stderr.flush()
    while not stop.wait(0.05):
        pass
    sim.stopping = True
    for s in servers:
        s.shutdown()
        s.server_close()
    if PROFILES is not None:
        dump_profiles(os.environ["OSSIM_PROFILE"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
