"""ibmvpcsim: an IBM Cloud VPC simulator (VPC API v1, IAM tokens, Resource
Manager and Resource Controller v2) over HTTPS, with a /_sim/ control API
for tests (faults, behaviour, state). Stdlib only (http.server, ssl, json);
the TLS certificates are made with the openssl command.

IBM's SDKs are not packaged for Debian, so the wire format follows IBM's API
reference request by request (README.md names the pages).
"""
import argparse
import http.server
import ipaddress
import json
import os
import re
import signal
import socketserver
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from collections import Counter

ACCOUNT = "a1b2c3d4e5f60718293a4b5c6d7e8f90"
VERSION_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
DEFAULT_OS = {
    "debian-9-amd64": {
        "name": "debian-9-amd64", "architecture": "amd64",
        "display_name": "Debian GNU/Linux 9.x Stretch/Stable - Minimal Install (amd64)",
        "family": "Debian GNU/Linux", "vendor": "Debian",
        "version": "9.x Stretch/Stable - Minimal Install", "dedicated_host_only": False},
    "debian-12-amd64": {
        "name": "debian-12-amd64", "architecture": "amd64",
        "display_name": "Debian GNU/Linux 12.x Bookworm/Stable - Minimal Install (amd64)",
        "family": "Debian GNU/Linux", "vendor": "Debian",
        "version": "12.x Bookworm/Stable - Minimal Install", "dedicated_host_only": False},
}


def now_iso(t=None):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t or time.time()))


def new_id(prefix="0717"):
    return "%s-%s" % (prefix, uuid.uuid4())


class HTTPError(Exception):
    def __init__(self, status, body, headers=None):
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers or {}


def vpc_error(status, code, message):
    """The VPC API's error body (errors[].code/message/more_info, trace)."""
    return HTTPError(status, {
        "errors": [{"code": code, "message": message,
                    "more_info": "https://cloud.ibm.com/docs/vpc?topic=vpc-rias-error-messages"}],
        "trace": str(uuid.uuid4()), "status_code": status})


def rm_error(status, message):
    """The resource APIs' error body."""
    return HTTPError(status, {"message": message, "status_code": status,
                              "error_code": "RG%d" % status, "transaction_id": str(uuid.uuid4())})


class Hang(Exception):
    def __init__(self, fault):
        super().__init__("hang")
        self.fault = fault


class Drop(Exception):
    pass


class Fault:
    FIELDS = ("api", "method", "path", "status", "body", "retry_after", "count", "after",
              "hang", "delay", "drop", "code", "message")

    def __init__(self, fid, spec):
        unknown = set(spec) - set(self.FIELDS)
        if unknown:
            raise ValueError("unknown fault keys: %s" % ", ".join(sorted(unknown)))
        if not any(spec.get(k) for k in ("hang", "status", "delay", "drop")):
            raise ValueError("a fault needs status, hang, drop or delay")
        self.id = fid
        self.spec = dict(spec)
        self.path_re = re.compile(spec["path"]) if spec.get("path") else None
        self.count = spec.get("count")
        self.after = int(spec.get("after") or 0)
        self.seen = 0
        self.hits = 0
        self.released = threading.Event()

    def matches(self, api, method, path):
        s = self.spec
        if s.get("api") and s["api"] != api:
            return False
        if s.get("method") and s["method"].upper() != method:
            return False
        return not (self.path_re and not self.path_re.search(path))

    def view(self):
        d = dict(self.spec)
        d.update(id=self.id, hits=self.hits, remaining=self.count)
        return d


class Sim:
    """The account: one region of VPC objects, resource groups, tokens."""

    def __init__(self, cfg, base):
        self.lock = threading.RLock()
        self.cfg = cfg
        self.base = base
        self.region = cfg.get("region", "us-south")
        self.apikey = cfg.get("apikey", "simapikey")
        self.behavior = {
            "boot_delay": float(cfg.get("boot_delay", 0.5)),
            "boot_outcome": cfg.get("boot_outcome", "running"),
            "delete_delay": float(cfg.get("delete_delay", 0.2)),
            "fip_delay": float(cfg.get("fip_delay", 0.1)),
            "token_ttl": float(cfg.get("token_ttl", 3600)),
            "interface_ip": cfg.get("interface_ip"),
            "image_delay": float(cfg.get("image_delay", 0.5)),
            "image_outcome": cfg.get("image_outcome", "available"),
        }
        self.quota = dict(cfg.get("quota") or {})  # instances, vcpu
        self.page_max = int(cfg.get("page_size", 50))
        self.tokens = {}  # token -> expiry
        self.unauthorized = 0  # calls refused for a missing, unknown or expired token
        self.faults = {}
        self.fault_seq = 0
        self.calls = Counter()
        self.ip_seq = 0
        self.fip_seq = 0
        self.oses = dict(DEFAULT_OS)
        self.oses.update(cfg.get("operating_systems") or {})
        self.rgs = []
        for n in cfg.get("resource_groups", ["Default"]):
            self.add_rg(n)
        default_rg = self.rgs[0]
        self.vpcs = [self.make_vpc(n, default_rg) for n in cfg.get("vpcs", ["nodepool"])]
        self.subnets = []
        for s in cfg.get("subnets", [{"name": "sn-nodepool", "zone": self.region + "-1",
                                       "vpc": self.vpcs[0]["name"],
                                       "cidr": "10.240.0.0/24"}]):
            self.subnets.append(self.make_subnet(s))
        self.keys = [self.make_key(k, default_rg) for k in cfg.get("keys", ["testuser"])]
        self.profiles = [self.make_profile(p) for p in cfg.get("profiles", [
            {"name": "cx2-2x4", "vcpu": 2, "memory": 4},
            {"name": "bx2-4x16", "vcpu": 4, "memory": 16}])]
        self.images = []
        for im in cfg.get("images", [{"name": "ibm-debian-9-13-minimal-amd64-4",
                                      "os": "debian-9-amd64", "owner_type": "provider"},
                                     {"name": "ibm-debian-12-2-minimal-amd64-1",
                                      "os": "debian-12-amd64", "owner_type": "provider"}]):
            self.add_image(im)
        self.instances = []
        self.fips = []
        self.storage = [self.make_storage(n, default_rg)
                        for n in cfg.get("object_storage", ["Cloud Object Storage-r6"])]
        # Cloud Object Storage: bucket -> {"location": constraint, "objects": {key: size}}
        self.buckets = {b: {"location": loc, "objects": {}}
                        for b, loc in (cfg.get("buckets") or
                                       {"np-testbucket": "us-south-smart"}).items()}

    # ---------------------------------------------------------- objects

    def href(self, path):
        return "%s/v1%s" % (self.base, path)

    def zone_ref(self, name):
        return {"name": name, "href": self.href("/regions/%s/zones/%s" % (self.region, name))}

    def crn(self, kind, uid):
        return "crn:v1:bluemix:public:is:%s:a/%s::%s:%s" % (self.region, ACCOUNT, kind, uid)

    def rg_ref(self, rg):
        return {"id": rg["id"], "name": rg["name"],
                "href": "%s/v2/resource_groups/%s" % (self.base, rg["id"])}

    def add_rg(self, name):
        uid = uuid.uuid4().hex
        rg = {"id": uid, "name": name,
              "crn": "crn:v1:bluemix:public:resource-controller::a/%s::resource-group:%s"
                     % (ACCOUNT, uid),
              "account_id": ACCOUNT, "state": "ACTIVE", "default": not self.rgs,
              "enable_reclamation": False, "quota_id": uuid.uuid4().hex,
              "created_at": now_iso(), "updated_at": now_iso()}
        self.rgs.append(rg)
        return rg

    def make_vpc(self, name, rg):
        uid = new_id("r006")
        return {"id": uid, "crn": self.crn("vpc", uid), "href": self.href("/vpcs/" + uid),
                "name": name, "resource_type": "vpc", "status": "available",
                "classic_access": False, "created_at": now_iso(),
                "resource_group": self.rg_ref(rg),
                # the defaults a VPC is created with (VPC API reference)
                "cse_source_ips": [{"ip": {"address": "10.12.%d.%d" % (k, k + 9)},
                                    "zone": self.zone_ref("%s-%d" % (self.region, k))}
                                   for k in (1, 2, 3)],
                "default_network_acl": self.default_ref("network_acls", "acl", name),
                "default_routing_table": dict(self.default_ref(
                    "vpcs/%s/routing_tables" % uid, None, name), resource_type="routing_table"),
                "default_security_group": self.default_ref("security_groups",
                                                           "security-group", name)}

    def default_ref(self, coll, crn_kind, vpc_name):
        """A reference to one of a VPC's default objects (ACL, routing
        table, security group): named after the VPC as IBM names them."""
        uid = new_id("r006")
        ref = {"id": uid, "href": self.href("/%s/%s" % (coll, uid)),
               "name": "%s-default-%s" % (vpc_name, coll.split("/")[-1].rstrip("s")
                                          .replace("_", "-"))}
        if crn_kind:
            ref["crn"] = self.crn(crn_kind, uid)
        return ref

    def make_subnet(self, s):
        vpc = self.find(self.vpcs, name=s.get("vpc", self.vpcs[0]["name"]))
        uid = new_id("0717")
        net = ipaddress.ip_network(s.get("cidr", "10.240.0.0/24"))
        return {"id": uid, "crn": self.crn("subnet", uid), "href": self.href("/subnets/" + uid),
                "name": s["name"], "resource_type": "subnet", "status": "available",
                "ipv4_cidr_block": str(net), "ip_version": "ipv4",
                "available_ipv4_address_count": net.num_addresses - 5,
                "total_ipv4_address_count": net.num_addresses,
                "zone": self.zone_ref(s.get("zone", self.region + "-1")),
                "vpc": {"id": vpc["id"], "crn": vpc["crn"], "href": vpc["href"],
                        "name": vpc["name"], "resource_type": "vpc"},
                "resource_group": vpc["resource_group"], "created_at": now_iso(),
                "network_acl": vpc["default_network_acl"],
                "routing_table": vpc["default_routing_table"],
                "_hosts": [str(h) for h in list(net.hosts())[3:]]}

    def make_key(self, name, rg):
        uid = new_id("r006")
        return {"id": uid, "crn": self.crn("key", uid), "href": self.href("/keys/" + uid),
                "name": name, "type": "rsa", "length": 2048,
                "fingerprint": "SHA256:" + uid.replace("-", "")[:43],
                "public_key": "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ sim", "created_at": now_iso(),
                "resource_group": self.rg_ref(rg)}

    def make_profile(self, p):
        return {"name": p["name"], "href": self.href("/instance/profiles/" + p["name"]),
                "family": p.get("family", "balanced"),
                "vcpu_count": {"type": "fixed", "value": int(p["vcpu"])},
                "vcpu_architecture": {"type": "fixed", "value": "amd64"},
                "memory": {"type": "fixed", "value": int(p["memory"])},
                "bandwidth": {"type": "fixed", "value": 4000},
                "port_speed": {"type": "fixed", "value": 16000},
                "os_architecture": {"default": "amd64", "type": "enum", "values": ["amd64"]},
                "disks": [],
                "network_interface_count": {"type": "range", "min": 1, "max": 5},
                "total_volume_bandwidth": {"type": "dependent"},
                "vcpu_manufacturer": {"type": "fixed", "value": "intel"}}

    def add_image(self, im):
        uid = im.get("id") or new_id("r006")
        rg = self.find(self.rgs, name=im["resource_group"]) if im.get("resource_group") else None
        osd = self.oses.get(im.get("os", "debian-12-amd64"), {"name": im.get("os")})
        d = {"id": uid, "crn": self.crn("image", uid), "href": self.href("/images/" + uid),
             "name": im["name"], "status": im.get("status", "available"),
             "visibility": "public" if im.get("owner_type", "user") == "provider" else "private",
             "owner_type": im.get("owner_type", "user"), "encryption": "none",
             "minimum_provisioned_size": 100, "created_at": now_iso(),
             "file": {"checksums": {"sha256": "0" * 64}, "size": 2},
             "operating_system": dict(osd, href=self.href("/operating_systems/%s"
                                                          % osd.get("name"))),
             "status_reasons": [], "resource_type": "image",
             "catalog_offering": {"managed": False},
             # as upstream notes, the image list's resource group reference
             # carries no name
             "resource_group": ({"id": rg["id"],
                                 "href": "%s/v2/resource_groups/%s" % (self.base, rg["id"])}
                                if rg else {"id": uuid.uuid4().hex})}
        self.images.append(d)
        return d

    def make_storage(self, name, rg):
        uid = uuid.uuid4().hex
        crn = "crn:v1:bluemix:public:cloud-object-storage:global:a/%s:%s::" % (ACCOUNT, uid)
        return {"id": crn, "guid": uid, "crn": crn, "name": name, "state": "active",
                "type": "service_instance", "region_id": "global",
                "resource_group_id": rg["id"], "account_id": ACCOUNT}

    @staticmethod
    def find(items, **kw):
        for it in items:
            if all(it.get(k) == v for k, v in kw.items()):
                return it
        return None

    def rg_by_id(self, rid):
        return self.find(self.rgs, id=rid)

    # ---------------------------------------------------------- time passes

    def advance(self):
        now = time.time()
        for i in list(self.instances):
            if i["status"] == "pending" and now >= i["_ready_at"]:
                out = i["_outcome"]
                if out == "running":
                    i["status"] = "running"
                elif out == "failed":
                    i["status"] = "failed"
                    i["status_reasons"] = [{"code": "cannot_start_capacity",
                                            "message": "The instance cannot start: "
                                                       "insufficient capacity in the zone"}]
            if i["status"] == "deleting" and now >= i["_gone_at"]:
                self.instances.remove(i)
                for f in self.fips:
                    if f.get("target", {}).get("id") == i["primary_network_interface"]["id"]:
                        del f["target"]
        for im in self.images:
            if im["status"] == "pending" and now >= im.get("_ready_at", 0):
                im["status"] = im.get("_outcome", "available")
        for f in list(self.fips):
            if f["status"] == "pending" and now >= f["_ready_at"]:
                f["status"] = "available"
            if f["status"] == "deleting" and now >= f["_gone_at"]:
                self.fips.remove(f)

    def vcpus_used(self):
        n = 0
        for i in self.instances:
            if i["status"] != "deleting":
                n += i["vcpu"]["count"]
        return n

    # ---------------------------------------------------------- VPC API

    def page(self, req, path, key, items):
        try:
            limit = int(req.q("limit", self.page_max))
        except ValueError:
            raise vpc_error(400, "bad_field", "limit must be an integer")
        if limit < 1 or limit > 100:
            raise vpc_error(400, "bad_field", "limit must be between 1 and 100")
        limit = min(limit, self.page_max)
        start = req.q("start")
        idx = 0
        if start is not None:
            ids = [it["id"] for it in items]
            if start not in ids:
                raise vpc_error(400, "bad_field", "start is not a valid page token")
            idx = ids.index(start)
        chunk = items[idx:idx + limit]
        out = {"limit": limit, "first": {"href": self.href("%s?limit=%d" % (path, limit))},
               "total_count": len(items), key: [public(i) for i in chunk]}
        if idx + limit < len(items):
            out["next"] = {"href": self.href("%s?start=%s&limit=%d"
                                             % (path, items[idx + limit]["id"], limit))}
        return out

    def vpc_call(self, req, segs):
        method = req.method
        v = req.q("version")
        if v is None:
            raise vpc_error(400, "missing_version", "The version query parameter is required.")
        if not VERSION_RE.match(v):
            raise vpc_error(400, "bad_version", "The version %r is not a date (YYYY-MM-DD)." % v)
        g = req.q("generation", "2")
        if g != "2":
            raise vpc_error(400, "bad_generation",
                            "Generation %s is not supported: use generation=2." % g)
        coll = {"vpcs": self.vpcs, "subnets": self.subnets, "keys": self.keys,
                "images": self.images, "instances": self.instances,
                "floating_ips": self.fips}
        if segs == ["instance", "profiles"] and method == "GET":
            return 200, {"first": {"href": self.href("/instance/profiles")},
                         "total_count": len(self.profiles), "profiles": self.profiles}
        if len(segs) == 3 and segs[:2] == ["instance", "profiles"] and method == "GET":
            p = self.find(self.profiles, name=segs[2])
            if p is None:
                raise vpc_error(404, "not_found", "Instance profile not found")
            return 200, p
        if not segs or segs[0] not in coll:
            raise vpc_error(404, "not_found", "The requested resource was not found")
        items = coll[segs[0]]
        if len(segs) == 1:
            if method == "GET":
                view = items
                if segs[0] == "images" and req.q("visibility"):
                    view = [i for i in items if i["visibility"] == req.q("visibility")]
                if req.q("name"):
                    view = [i for i in view if i["name"] == req.q("name")]
                return 200, self.page(req, "/" + segs[0], segs[0], view)
            if method == "POST":
                fn = {"instances": self.create_instance, "floating_ips": self.create_fip,
                      "images": self.create_image}.get(segs[0])
                if fn is None:
                    raise vpc_error(405, "method_not_allowed", "Method not allowed")
                return fn(req.json())
            raise vpc_error(405, "method_not_allowed", "Method not allowed")
        it = self.find(items, id=segs[1])
        if it is None or it.get("status") == "deleted":
            raise vpc_error(404, "not_found", "%s %s not found" % (segs[0][:-1], segs[1]))
        if len(segs) == 2:
            if method == "GET":
                return 200, public(it)
            if method == "DELETE":
                return self.delete(segs[0], it)
            raise vpc_error(405, "method_not_allowed", "Method not allowed")
        # /instances/{id}/network_interfaces/{nic}/floating_ips/{fip}
        if (segs[0] == "instances" and len(segs) == 6 and segs[2] == "network_interfaces"
                and segs[4] == "floating_ips" and method == "PUT"):
            nic = it["primary_network_interface"]
            if segs[3] != nic["id"]:
                raise vpc_error(404, "not_found", "Network interface not found")
            fip = self.find(self.fips, id=segs[5])
            if fip is None:
                raise vpc_error(404, "not_found", "Floating IP not found")
            if fip.get("target"):
                raise vpc_error(409, "floating_ip_in_use", "The floating IP is already bound")
            if fip["status"] != "available":
                raise vpc_error(409, "floating_ip_not_available",
                                "The floating IP is %s" % fip["status"])
            fip["target"] = {"id": nic["id"], "name": nic["name"], "href": nic["href"],
                             "primary_ipv4_address": nic["primary_ipv4_address"],
                             "resource_type": "network_interface"}
            return 201, public(fip)
        raise vpc_error(404, "not_found", "The requested resource was not found")

    def ref_rg(self, body):
        ref = body.get("resource_group")
        if ref is None:
            return self.rgs[0]
        rg = self.rg_by_id(ref.get("id"))
        if rg is None:
            raise vpc_error(400, "bad_field", "resource_group %s not found" % ref.get("id"))
        return rg

    def create_instance(self, b):
        for k in ("name", "profile", "vpc", "zone", "image", "primary_network_interface"):
            if k not in b:
                raise vpc_error(400, "missing_field", "%s is required" % k)
        name = b["name"]
        if not re.match(r"^([a-z]|[a-z][-a-z0-9]*[a-z0-9])$", name):
            raise vpc_error(400, "bad_field", "name %r is not a valid name" % name)
        if any(i["name"] == name for i in self.instances):
            raise vpc_error(409, "validation_unique_failed",
                            "Instance name %s is already in use" % name)
        profile = self.find(self.profiles, name=b["profile"].get("name"))
        if profile is None:
            raise vpc_error(400, "bad_field", "profile %s not found" % b["profile"])
        vpc = self.find(self.vpcs, id=b["vpc"].get("id"))
        if vpc is None:
            raise vpc_error(400, "bad_field", "vpc not found")
        ref = b["image"]
        img = self.find(self.images, id=ref["id"]) if "id" in ref else \
            self.find(self.images, href=ref.get("href"))
        if img is None or img["status"] != "available":
            raise vpc_error(400, "bad_field", "image %s not found or not available" % ref)
        pni = b["primary_network_interface"]
        subnet = self.find(self.subnets, id=(pni.get("subnet") or {}).get("id"))
        if subnet is None:
            raise vpc_error(400, "bad_field", "subnet not found")
        zone = b["zone"].get("name")
        if subnet["zone"]["name"] != zone:
            raise vpc_error(400, "bad_field", "subnet is not in zone %s" % zone)
        keys = []
        for k in b.get("keys", []):
            key = self.find(self.keys, id=k.get("id"))
            if key is None:
                raise vpc_error(400, "bad_field", "key %s not found" % k)
            keys.append(key["id"])
        rg = self.ref_rg(b)
        vcpu = profile["vcpu_count"]["value"]
        q = self.quota
        alive = [i for i in self.instances if i["status"] != "deleting"]
        if q.get("instances") is not None and len(alive) + 1 > q["instances"]:
            raise vpc_error(400, "over_quota", "Quota exceeded: the account's instance quota "
                            "(%d) is used up" % q["instances"])
        if q.get("vcpu") is not None and self.vcpus_used() + vcpu > q["vcpu"]:
            raise vpc_error(400, "over_quota", "Quota exceeded: %d vCPUs requested, %d of the "
                            "vCPU quota %d in use" % (vcpu, self.vcpus_used(), q["vcpu"]))
        bva = b.get("boot_volume_attachment") or {}
        uid = new_id("0717")
        nic_id = new_id("0717")
        if self.behavior["interface_ip"]:
            ip = self.behavior["interface_ip"]
        else:
            ip = subnet["_hosts"][self.ip_seq % len(subnet["_hosts"])]
            self.ip_seq += 1
        nic = {"id": nic_id, "name": pni.get("name", "eth0"), "resource_type": "network_interface",
               "href": self.href("/instances/%s/network_interfaces/%s" % (uid, nic_id)),
               "primary_ipv4_address": ip, "primary_ip": {"address": ip},
               "subnet": {"id": subnet["id"], "crn": subnet["crn"], "href": subnet["href"],
                          "name": subnet["name"], "resource_type": "subnet"}}
        vol_id = new_id("r006")
        vol = {"id": vol_id, "name": (bva.get("volume") or {}).get("name", name + "-boot"),
               "href": self.href("/volumes/" + vol_id), "crn": self.crn("volume", vol_id)}
        now = time.time()
        i = {"id": uid, "crn": self.crn("instance", uid), "href": self.href("/instances/" + uid),
             "name": name, "resource_type": "instance", "status": "pending",
             "status_reasons": [], "created_at": now_iso(now), "startable": True,
             "profile": {"name": profile["name"], "href": profile["href"]},
             "vcpu": {"architecture": "amd64", "count": vcpu},
             "memory": profile["memory"]["value"], "bandwidth": 4000,
             # the profile's bandwidth split, no instance storage, the
             # metadata service off and restart on host failure: the
             # defaults the Instance reference documents
             "total_network_bandwidth": 3000, "total_volume_bandwidth": 1000, "disks": [],
             "metadata_service": {"enabled": False, "protocol": "http",
                                  "response_hop_limit": 1},
             "availability_policy": {"host_failure": "restart"},
             "lifecycle_state": "pending", "lifecycle_reasons": [],
             "image": {"id": img["id"], "crn": img["crn"], "href": img["href"],
                       "name": img["name"]},
             "vpc": {"id": vpc["id"], "crn": vpc["crn"], "href": vpc["href"],
                     "name": vpc["name"], "resource_type": "vpc"},
             "zone": self.zone_ref(zone),
             "primary_network_interface": nic, "network_interfaces": [nic],
             "boot_volume_attachment": {"id": new_id("0717"), "name": "boot",
                                        "volume": vol, "device": {"id": new_id("dev")}},
             "volume_attachments": [],
             "resource_group": self.rg_ref(rg),
             "_keys": keys, "_user_data": b.get("user_data"),
             "_delete_volume": bool(bva.get("delete_volume_on_instance_delete")),
             "_boot_volume": bva,
             "_ready_at": now + self.behavior["boot_delay"],
             "_outcome": self.behavior["boot_outcome"]}
        i["volume_attachments"] = [i["boot_volume_attachment"]]
        self.instances.append(i)
        return 201, public(i)

    def create_fip(self, b):
        rg = self.ref_rg(b)
        if "zone" not in b and "target" not in b:
            raise vpc_error(400, "missing_field", "zone or target is required")
        zone = (b.get("zone") or {}).get("name", self.region + "-1")
        name = b.get("name") or "fip-" + uuid.uuid4().hex[:8]
        if any(f["name"] == name for f in self.fips):
            raise vpc_error(409, "validation_unique_failed",
                            "Floating IP name %s is already in use" % name)
        q = self.quota
        if q.get("floating_ips") is not None and len(self.fips) + 1 > q["floating_ips"]:
            raise vpc_error(400, "over_quota", "Quota exceeded: floating IP quota (%d) "
                            "is used up" % q["floating_ips"])
        self.fip_seq += 1
        uid = new_id("r006")
        addr = self.behavior["interface_ip"] or "169.63.%d.%d" % (self.fip_seq // 250,
                                                                 self.fip_seq % 250 + 1)
        now = time.time()
        f = {"id": uid, "crn": self.crn("floating-ip", uid),
             "href": self.href("/floating_ips/" + uid), "name": name, "address": addr,
             "status": "pending", "created_at": now_iso(now), "zone": self.zone_ref(zone),
             "resource_group": self.rg_ref(rg), "_ready_at": now + self.behavior["fip_delay"]}
        self.fips.append(f)
        return 201, public(f)

    def create_image(self, b):
        """An image imported from a COS object, cos://<region>/<bucket>/<key>:
        pending for image_delay, then available (or image_outcome)."""
        rg = self.ref_rg(b)
        if "name" not in b or "file" not in b or "operating_system" not in b:
            raise vpc_error(400, "missing_field", "name, file and operating_system are required")
        href = b["file"].get("href") or ""
        m = re.match(r"^cos://([^/]+)/([^/]+)/(.+)$", href)
        if not m:
            raise vpc_error(400, "bad_field", "file.href %r is not a cos:// URL" % href)
        region, bucket, key = m.groups()
        bk = self.buckets.get(bucket)
        if bk is None or key not in bk["objects"]:
            raise vpc_error(400, "image_file_not_found", "No object %s in bucket %s"
                            % (key, bucket))
        if not bk["location"].startswith(region + "-") and bk["location"] != region:
            raise vpc_error(400, "image_file_not_found", "Bucket %s is not in %s"
                            % (bucket, region))
        if b["operating_system"].get("name") not in self.oses:
            raise vpc_error(400, "bad_field", "operating system %s not found"
                            % b["operating_system"].get("name"))
        if any(i["name"] == b["name"] for i in self.images):
            raise vpc_error(409, "validation_unique_failed",
                            "Image name %s is already in use" % b["name"])
        img = self.add_image({"name": b["name"], "os": b["operating_system"].get("name"),
                              "owner_type": "user", "resource_group": rg["name"],
                              "status": "pending"})
        img["file"]["href"] = href
        img["_ready_at"] = time.time() + self.behavior["image_delay"]
        img["_outcome"] = self.behavior["image_outcome"]
        return 201, public(img)

    # ---------------------------------------------------------- COS (S3, path style)

    def cos_call(self, req, segs):
        if not segs or segs[0] not in self.buckets:
            raise HTTPError(404, cos_error("NoSuchBucket", "The specified bucket does not "
                                           "exist."), {"Content-Type": "application/xml"})
        bk = self.buckets[segs[0]]
        key = "/".join(segs[1:])
        if req.headers.get("ibm-service-instance-id") not in [x["crn"] for x in self.storage]:
            # the SDK sends the storage instance with every call
            raise HTTPError(403, cos_error("AccessDenied", "ibm-service-instance-id missing "
                                           "or unknown"), {"Content-Type": "application/xml"})
        if not key:
            if req.method == "GET" and "location" in req.query:
                return 200, XML('<?xml version="1.0" encoding="UTF-8"?>\n'
                                '<LocationConstraint>%s</LocationConstraint>' % bk["location"])
            if req.method == "GET":
                items = "".join("<Contents><Key>%s</Key><Size>%d</Size></Contents>"
                                % (xml_escape(k), n) for k, n in sorted(bk["objects"].items()))
                return 200, XML('<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult>'
                                '<Name>%s</Name><IsTruncated>false</IsTruncated>%s'
                                '</ListBucketResult>' % (segs[0], items))
            raise HTTPError(405, cos_error("MethodNotAllowed", "Not allowed"),
                            {"Content-Type": "application/xml"})
        if req.method == "PUT":
            bk["objects"][key] = len(req.body or b"")
            return 200, None
        if req.method == "DELETE":
            bk["objects"].pop(key, None)
            return 204, None
        if req.method in ("GET", "HEAD") and key in bk["objects"]:
            return 200, None
        raise HTTPError(404, cos_error("NoSuchKey", "The specified key does not exist."),
                        {"Content-Type": "application/xml"})

    def delete(self, kind, it):
        now = time.time()
        if kind == "instances":
            if it["status"] != "deleting":
                it["status"] = "deleting"
                it["_gone_at"] = now + self.behavior["delete_delay"]
            return 204, None
        if kind == "floating_ips":
            if it.get("target"):
                del it["target"]
            it["status"] = "deleting"
            it["_gone_at"] = now + self.behavior["delete_delay"]
            return 204, None
        if kind == "images":
            self.images.remove(it)
            return 202, None
        raise vpc_error(405, "method_not_allowed", "Method not allowed")

    # ---------------------------------------------------------- IAM, resources

    def iam_token(self, req):
        ct = req.headers.get("Content-Type", "")
        if "application/x-www-form-urlencoded" not in ct:
            raise HTTPError(400, {"errorCode": "BXNIM0109E",
                                  "errorMessage": "Property missing or empty. Property name: "
                                                  "grant_type", "context": {}})
        form = urllib.parse.parse_qs((req.body or b"").decode(), keep_blank_values=True)
        grant = (form.get("grant_type") or [""])[0]
        if grant != "urn:ibm:params:oauth:grant-type:apikey":
            raise HTTPError(400, {"errorCode": "BXNIM0109E",
                                  "errorMessage": "Unsupported grant type %s" % grant})
        key = (form.get("apikey") or [""])[0]
        if key != self.apikey:
            raise HTTPError(400, {"errorCode": "BXNIM0415E",
                                  "errorMessage": "Provided API key could not be found."})
        ttl = self.behavior["token_ttl"]
        tok = "simtok-" + uuid.uuid4().hex
        now = time.time()
        self.tokens[tok] = now + ttl
        return 200, {"access_token": tok, "refresh_token": "not_supported",
                     "token_type": "Bearer", "expires_in": int(ttl),
                     "expiration": int(now + ttl), "scope": "ibm openid"}

    def check_token(self, req, api):
        h = req.headers.get("Authorization", "")
        tok = h[7:] if h.startswith("Bearer ") else None
        exp = self.tokens.get(tok) if tok else None
        if exp is None or exp < time.time():
            self.unauthorized += 1
            if api == "vpc":
                raise vpc_error(401, "not_authorized", "The request is not authorized.")
            raise rm_error(401, "The IAM token is invalid or expired")

    def rm_call(self, req, segs):
        if segs == ["v2", "resource_groups"]:
            if req.method == "GET":
                name = req.q("name")
                rows = [r for r in self.rgs if name is None or r["name"] == name]
                return 200, {"resources": rows}
            if req.method == "POST":
                b = req.json() or {}
                if not b.get("name"):
                    raise rm_error(400, "name is required")
                if self.find(self.rgs, name=b["name"]):
                    raise rm_error(400, "A resource group named %s exists" % b["name"])
                rg = self.add_rg(b["name"])
                return 201, {"id": rg["id"], "crn": rg["crn"]}
        if segs == ["v2", "resource_instances"] and req.method == "GET":
            rows = [s for s in self.storage
                    if (req.q("name") is None or s["name"] == req.q("name"))
                    and (req.q("type") is None or s["type"] == req.q("type"))]
            return 200, {"rows_count": len(rows), "next_url": None, "resources": rows}
        raise rm_error(404, "Not found")


class XML(str):
    """An XML answer body (COS)."""


def xml_escape(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def cos_error(code, message):
    return XML('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code>'
               '<Message>%s</Message></Error>' % (code, message))


LIFECYCLE = {"pending": "pending", "starting": "pending", "running": "stable",
             "stopping": "updating", "stopped": "stable", "restarting": "updating",
             "failed": "failed", "deleting": "deleting"}


def public(obj):
    """What the API shows of a resource: no simulator-private ("_") keys;
    an instance's lifecycle_state follows its status (Instance, VPC API
    reference: lifecycle_state pending/stable/updating/deleting/failed)."""
    out = {k: v for k, v in obj.items() if not k.startswith("_")}
    if out.get("resource_type") == "instance" and "status" in out:
        out["lifecycle_state"] = LIFECYCLE.get(out["status"], "stable")
        out["lifecycle_reasons"] = [] if out["status"] != "failed" else [
            {"code": "internal_error", "message": "The instance failed to start.",
             "more_info": "https://cloud.ibm.com/docs/vpc?topic=vpc-instance-status-messages"}]
    return out


def route_of(method, path):
    segs = []
    for s in path.strip("/").split("/"):
        if re.match(r"^(0717|r006|dev)-|^[0-9a-f]{32}$", s):
            s = "{id}"
        segs.append(s)
    return "%s /%s" % (method, "/".join(segs))


class Request:
    def __init__(self, method, path, query, body, headers):
        self.method = method
        self.path = path
        self.query = query
        self.body = body
        self.headers = headers

    def q(self, k, default=None):
        v = self.query.get(k)
        return v[-1] if v else default

    def json(self):
        try:
            return json.loads(self.body or b"null")
        except ValueError:
            raise vpc_error(400, "bad_json", "The request body is not valid JSON")


def api_of(path):
    if path.startswith("/identity/"):
        return "iam"
    if path.startswith("/v1/"):
        return "vpc"
    if path.startswith("/v2/resource_groups"):
        return "rm"
    if path.startswith("/v2/resource_instances"):
        return "rc"
    if path.startswith("/_sim"):
        return None
    return "cos"  # path-style S3: /<bucket>/<key>


def dispatch(sim, req, skip_faults=False):
    api = api_of(req.path)
    if api is None:
        raise HTTPError(404, {"message": "no such API: %s" % req.path})
    with sim.lock:
        if not skip_faults:
            sim.calls[route_of(req.method, req.path)] += 1
            for f in list(sim.faults.values()):
                if not f.matches(api, req.method, req.path):
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
                    raise Hang(f)
                if f.spec.get("drop"):
                    raise Drop()
                if f.spec.get("delay"):
                    sim.lock.release()
                    try:
                        time.sleep(float(f.spec["delay"]))
                    finally:
                        sim.lock.acquire()
                    if not f.spec.get("status"):
                        continue
                raise fault_error(f, api)
        sim.advance()
        if api == "iam":
            if req.path.rstrip("/") != "/identity/token" or req.method != "POST":
                raise HTTPError(404, {"errorCode": "BXNIM0404E", "errorMessage": "Not found"})
            return sim.iam_token(req)
        sim.check_token(req, api)
        if api == "cos":
            return sim.cos_call(req, [x for x in req.path.split("/") if x])
        if api == "vpc":
            try:
                return sim.vpc_call(req, req.path.strip("/").split("/")[1:])
            except (AttributeError, TypeError, KeyError, ValueError) as e:
                raise vpc_error(400, "bad_request", "The request body is invalid: %s" % e)
        return sim.rm_call(req, req.path.strip("/").split("/"))


def fault_error(f, api):
    st = int(f.spec["status"])
    hdrs = {}
    if f.spec.get("retry_after") is not None:
        hdrs["Retry-After"] = str(f.spec["retry_after"])
    if f.spec.get("body") is not None:
        return HTTPError(st, f.spec["body"], hdrs)
    code = f.spec.get("code") or {429: "rate_limit_exceeded", 500: "internal_error",
                                  503: "service_unavailable"}.get(st, "simulated_fault")
    msg = f.spec.get("message") or {
        429: "Too many requests: the request rate limit was exceeded.",
        500: "An internal error occurred. Try the request again later.",
        503: "The service is temporarily unavailable. Try the request again later."
    }.get(st, "simulated fault %d" % st)
    if api == "vpc":
        e = vpc_error(st, code, msg)
    elif api == "iam":
        e = HTTPError(st, {"errorCode": "BXNIM0%d" % st, "errorMessage": msg})
    else:
        e = rm_error(st, msg)
    e.headers.update(hdrs)
    return e


# ---------------------------------------------------------------- control API


def control(sim, method, path, body):
    segs = [s for s in path.split("/") if s][1:]  # after _sim
    with sim.lock:
        sim.advance()
        if segs == ["ping"]:
            return 200, {"ok": True, "pid": os.getpid()}
        if segs == ["state"] and method == "GET":
            return 200, {"instances": sim.instances, "floating_ips": sim.fips,
                         "images": sim.images, "resource_groups": sim.rgs, "vpcs": sim.vpcs,
                         "subnets": [public(s) for s in sim.subnets], "keys": sim.keys,
                         "profiles": sim.profiles, "behavior": sim.behavior,
                         "quota": sim.quota, "unauthorized": sim.unauthorized,
                         "buckets": sim.buckets,
                         "tokens_issued": len(sim.tokens),
                         "tokens_live": sum(1 for e in sim.tokens.values()
                                            if e >= time.time())}
        if segs == ["calls"]:
            if method == "DELETE":
                sim.calls.clear()
                return 200, {}
            return 200, {"total": sum(sim.calls.values()), "calls": dict(sim.calls)}
        if segs and segs[0] == "faults":
            if method == "POST":
                sim.fault_seq += 1
                try:
                    f = Fault(sim.fault_seq, body or {})
                except (ValueError, re.error) as e:
                    return 400, {"error": str(e)}
                sim.faults[f.id] = f
                return 200, f.view()
            if method == "GET":
                if len(segs) == 2:
                    f = sim.faults.get(int(segs[1]))
                    return (200, f.view()) if f else (404, {"error": "no such fault"})
                return 200, {"faults": [f.view() for f in sim.faults.values()]}
            if method == "DELETE":
                ids = [int(segs[1])] if len(segs) == 2 else list(sim.faults)
                for i in ids:
                    f = sim.faults.pop(i, None)
                    if f:
                        f.released.set()
                return 200, {}
        if segs == ["behavior"] and method == "POST":
            for k, v in (body or {}).items():
                if k not in sim.behavior:
                    return 400, {"error": "unknown behavior %s" % k}
                sim.behavior[k] = v
            return 200, sim.behavior
        if segs == ["quota"] and method == "POST":
            sim.quota = dict(body or {})
            return 200, sim.quota
        if segs == ["tokens", "expire"] and method == "POST":
            for t in sim.tokens:
                sim.tokens[t] = 0
            return 200, {"expired": len(sim.tokens)}
        if segs == ["resource_groups"] and method == "POST":
            rg = sim.find(sim.rgs, name=body["name"]) or sim.add_rg(body["name"])
            return 200, rg
        if segs == ["images"] and method == "POST":
            return 200, sim.add_image(body)
        if segs == ["instances"] and method == "POST":
            # an instance made behind nodepool's back (leak tests)
            rg = sim.find(sim.rgs, name=body.get("resource_group", "Default")) or \
                sim.add_rg(body["resource_group"])
            st, i = sim.create_instance({
                "name": body["name"], "profile": {"name": body.get("profile", "cx2-2x4")},
                "vpc": {"id": sim.vpcs[0]["id"]}, "zone": sim.subnets[0]["zone"],
                "image": {"id": sim.images[0]["id"]}, "resource_group": {"id": rg["id"]},
                "primary_network_interface": {"subnet": {"id": sim.subnets[0]["id"]}}})
            return 200, i
        if segs == ["floating_ips"] and method == "POST":
            rg = sim.find(sim.rgs, name=body.get("resource_group", "Default")) or \
                sim.add_rg(body["resource_group"])
            st, f = sim.create_fip({"name": body["name"], "zone": sim.subnets[0]["zone"],
                                    "resource_group": {"id": rg["id"]}})
            return 200, f
    return 404, {"error": "no control endpoint %s %s" % (method, path)}


# ---------------------------------------------------------------- HTTP


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version = "ibmvpcsim/1"
    sim = None
    control_only = False

    def log_message(self, fmt, *args):
        if os.environ.get("IBMVPCSIM_DEBUG"):
            sys.stderr.write("ibmvpcsim: %s\n" % (fmt % args))

    def setup(self):
        super().setup()
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.settimeout(30)
            try:
                self.connection.do_handshake()
            except (ssl.SSLError, OSError):
                self.close_connection = True
                raise
            self.connection.settimeout(None)

    def _handle(self):
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        headers = {}
        if path.startswith("/_sim/") or path == "/_sim":
            try:
                data = json.loads(body) if body else None
                st, out = control(self.sim, self.command, path, data)
            except Exception as e:  # a bad control call: say why
                import traceback
                traceback.print_exc()
                st, out = 500, {"error": repr(e)}
            return self._send(st, out, headers)
        if self.control_only:
            return self._send(404, {"error": "the control port serves /_sim/ only"}, headers)
        req = Request(self.command, path, query, body, self.headers)
        try:
            st, out = dispatch(self.sim, req)
        except HTTPError as e:
            st, out, headers = e.status, e.body, e.headers
        except Drop:
            self.close_connection = True
            return
        except Hang as h:
            h.fault.released.wait()
            self.close_connection = True
            return
        except Exception as e:
            import traceback
            traceback.print_exc()
            st, out = 500, {"errors": [{"code": "internal_error",
                                        "message": "ibmvpcsim bug: %r" % e}]}
        self._send(st, out, headers)

    def _send(self, status, body, headers):
        if isinstance(body, XML):
            data = body.encode()
            headers = dict(headers, **{"Content-Type": "application/xml"})
        else:
            data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, str(v))
        if body is not None and not isinstance(body, XML):
            self.send_header("Content-Type", "application/json")
        if status != 204:
            self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Request-Id", str(uuid.uuid4()))
        self.end_headers()
        if data and status != 204:
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle


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
        if os.environ.get("IBMVPCSIM_DEBUG"):
            super().handle_error(request, client_address)


def make_tls(d, host):
    """A self-signed CA and a server certificate for host in d (openssl
    command); reused when present. Returns (ca.pem, server.pem, server.key)."""
    os.makedirs(d, exist_ok=True)
    ca, ck = os.path.join(d, "ca.pem"), os.path.join(d, "ca.key")
    crt, key = os.path.join(d, "server.pem"), os.path.join(d, "server.key")
    if all(os.path.exists(p) for p in (ca, crt, key)):
        return ca, crt, key

    def run(*a):
        subprocess.run(a, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
        "-subj", "/CN=ibmvpcsim test CA", "-keyout", ck, "-out", ca)
    csr = os.path.join(d, "server.csr")
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=%s" % host,
        "-keyout", key, "-out", csr)
    ext = os.path.join(d, "san.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
                "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ck, "-CAcreateserial",
        "-days", "30", "-extfile", ext, "-out", crt)
    return ca, crt, key


def serve(cfg, host="127.0.0.1", port=0, tls_dir=None, ready_file=None):
    if tls_dir is None:
        tls_dir = os.path.join(os.path.dirname(os.path.abspath(ready_file or ".")), "tls")
    ca, crt, key = make_tls(tls_dir, host)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    H = type("H", (Handler,), {})
    srv = Server((host, port), H, ctx)
    base = "https://%s:%d" % (host, srv.server_address[1])
    sim = Sim(cfg, base)
    H.sim = sim
    HC = type("HC", (Handler,), {"sim": sim, "control_only": True})
    csrv = Server((host, 0), HC)
    info = {"pid": os.getpid(), "port": srv.server_address[1], "base": base,
            "vpc_url": base + "/v1", "auth_url": base, "resource_url": base,
            "cacert": ca, "apikey": sim.apikey, "region": sim.region,
            "control_port": csrv.server_address[1],
            "control": "http://%s:%d/_sim" % (host, csrv.server_address[1])}
    for s in (srv, csrv):
        threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
    sim.info = info
    if ready_file:
        tmp = ready_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(info, f, indent=1)
        os.rename(tmp, ready_file)
    return sim, [srv, csrv]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="ibmvpcsim", description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--config", help="JSON simulator configuration file")
    ap.add_argument("--boot-delay", type=float, help="seconds pending before running")
    ap.add_argument("--tls-dir", help="where the CA and server certificate are made "
                                      "(default: tls/ beside the ready-file)")
    ap.add_argument("--ready-file", help="write {port, base, control, cacert, ...} here when up")
    a = ap.parse_args(argv)
    cfg = {}
    if a.config:
        with open(a.config) as f:
            cfg = json.load(f)
    if a.boot_delay is not None:
        cfg["boot_delay"] = a.boot_delay
    sim, servers = serve(cfg, host=a.host, port=a.port, tls_dir=a.tls_dir,
                         ready_file=a.ready_file)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    sys.stderr.write("ibmvpcsim: serving %s (control %s), pid %d\n"
                     % (sim.base, sim.info["control"], os.getpid()))
    sys.stderr.flush()
    while not stop.wait(0.05):
        pass
    for s in servers:
        s.shutdown()
        s.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
