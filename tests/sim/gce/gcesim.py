"""gcesim: a Google Compute Engine simulator for nodepoold's gce driver.

One process serves, over HTTPS (a self-signed CA made with the openssl
command) on one loopback port:

- the OAuth2 token endpoint (POST /token): RFC 7523 JWT bearer grants
  signed RS256 with the service account key the simulator made (checked
  with the openssl command against its public key), and RFC 6749 refresh
  token grants of an authorized user; access tokens expire after
  token_ttl seconds;
- the Compute Engine API v1 under /compute/v1/ (bearer tokens checked):
  instances insert/get/list/delete/getSerialPortOutput, zoneOperations
  get/wait, machineTypes get/list, images get/getFromFamily, regions get,
  zones get;
- its discovery document (/discovery/v1/apis/compute/v1/rest), so
  google-api-python-client builds its client from the simulator;
- and, on a second plain-HTTP port, the control API under /_sim/ (faults,
  behaviour, quotas, state, call counts), as the other simulators.

Stdlib only (http.server, ssl, json, threading). See README.md.
"""
import argparse
import base64
import http.server
import itertools
import json
import os
import random
import re
import signal
import socketserver
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

API = "/compute/v1/"


def now_rfc3339(t=None):
    t = time.time() if t is None else t
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".000-00:00"


class HTTPError(Exception):
    def __init__(self, status, body=None, headers=None):
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers or {}


def gerror(status, reason, message, domain="global"):
    """Google's JSON error body, as the Compute API answers it."""
    st = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
          404: "NOT_FOUND", 409: "ALREADY_EXISTS", 429: "RESOURCE_EXHAUSTED",
          500: "INTERNAL", 503: "UNAVAILABLE"}.get(status, "UNKNOWN")
    return HTTPError(status, {"error": {"code": status, "message": message, "status": st,
                                        "errors": [{"message": message, "domain": domain,
                                                    "reason": reason}]}})


MACHINE_TYPES = {
    # name: (guestCpus, memoryMb)
    "f1-micro": (1, 614), "g1-small": (1, 1740), "e2-micro": (2, 1024),
    "e2-small": (2, 2048), "e2-medium": (2, 4096), "e2-standard-2": (2, 8192),
    "e2-standard-4": (4, 16384), "e2-standard-8": (8, 32768),
    "e2-standard-16": (16, 65536), "n1-standard-1": (1, 3840), "n1-standard-2": (2, 7680),
    "n1-standard-4": (4, 15360), "n1-standard-8": (8, 30720),
    "n1-standard-16": (16, 61440), "n2-standard-2": (2, 8192),
}

DEFAULT_IMAGES = [
    {"project": "debian-cloud", "name": "debian-12-bookworm-v20240110", "family": "debian-12"},
    {"project": "debian-cloud", "name": "debian-11-bullseye-v20240110", "family": "debian-11"},
    {"project": "debian-cloud", "name": "debian-9-stretch-v20200805", "family": "debian-9"},
    {"project": "ubuntu-os-cloud", "name": "ubuntu-2204-jammy-v20240112",
     "family": "ubuntu-2204-lts"},
]

NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


class Fault:
    """An injected fault: requests matching method/path (a regex on the
    path)/api ("compute", "oauth2") get `status` (with reason, message,
    Retry-After), hang (until removed: then the connection closes), drop
    the connection, or wait `delay` s, `count` times (None: until removed),
    after skipping the first `after` matches."""

    FIELDS = ("api", "method", "path", "status", "reason", "message", "retry_after", "count",
              "after", "hang", "delay", "drop")

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
        self.hits = 0
        self.seen = 0
        self.released = threading.Event()

    def matches(self, api, method, path):
        s = self.spec
        if s.get("api") and s["api"] != api:
            return False
        if s.get("method") and s["method"].upper() != method:
            return False
        return not self.path_re or bool(self.path_re.search(path))

    def view(self):
        d = dict(self.spec)
        d.update(id=self.id, hits=self.hits, remaining=self.count)
        return d


class Sim:
    def __init__(self, cfg, base, keydir):
        self.lock = threading.RLock()
        self.base = base
        self.project = cfg.get("project", "sim-project")
        self.zones = cfg.get("zones", {"us-central1-a": "us-central1",
                                       "us-central1-b": "us-central1"})
        regions = sorted(set(self.zones.values()))
        self.quotas = {r: {"CPUS": 24.0, "INSTANCES": 100.0, "DISKS_TOTAL_GB": 4096.0}
                       for r in regions}
        for r, q in (cfg.get("quotas") or {}).items():
            self.quotas.setdefault(r, {}).update({k: float(v) for k, v in q.items()})
        self.behavior = {
            "boot_delay": float(cfg.get("boot_delay", 0.5)),
            "op_delay": float(cfg.get("op_delay", 0.1)),
            "terminate_delay": float(cfg.get("terminate_delay", 0.2)),
            "error_op_delay": float(cfg.get("error_op_delay", 0)),
            "token_ttl": int(cfg.get("token_ttl", 3600)),
            "page_size": int(cfg.get("page_size", 500)),
            "interface_ip": cfg.get("interface_ip"),
            "nat_ip": cfg.get("nat_ip"),
            "console_output": cfg.get("console_output"),
        }
        self.outcomes = list(cfg.get("outcomes") or [])
        self.ids = itertools.count(int(time.time()) * 1000)
        self.images = {}
        for im in DEFAULT_IMAGES + list(cfg.get("images") or []):
            self.add_image(im)
        self.instances = {}   # (zone, name) -> dict
        self.disks = {}       # (zone, name) -> dict
        self.operations = {}  # (zone, name) -> dict
        self.tokens = {}      # token -> expiry
        self.tokens_issued = 0
        self.calls = {}
        self.log = []
        self.faults = {}
        self.fault_ids = itertools.count(1)
        self.ip_seq = itertools.count(2)
        self.keydir = keydir
        self.stopping = False
        self.make_keys(cfg)

    # ---- identity
    def make_keys(self, cfg):
        d = self.keydir
        key = os.path.join(d, "sa-key.pem")
        pub = os.path.join(d, "sa-pub.pem")
        if not os.path.exists(key):
            subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt",
                            "rsa_keygen_bits:2048", "-out", key], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(["openssl", "pkey", "-in", key, "-pubout", "-out", pub], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.pubkey = pub
        self.client_email = "nodepool@%s.iam.gserviceaccount.com" % self.project
        self.key_id = "%040x" % random.getrandbits(160)
        with open(key) as f:
            self.private_key = f.read()
        self.refresh_token = "1//sim-refresh-%x" % random.getrandbits(64)
        self.client_id = "sim-client.apps.googleusercontent.com"
        self.client_secret = "sim-secret"

    def credentials(self):
        return {"type": "service_account", "project_id": self.project,
                "private_key_id": self.key_id, "private_key": self.private_key,
                "client_email": self.client_email, "client_id": "1%020d" % 7,
                "auth_uri": self.base + "/auth", "token_uri": self.base + "/token",
                "auth_provider_x509_cert_url": self.base + "/certs",
                "client_x509_cert_url": self.base + "/certs/" + self.client_email}

    def user_credentials(self):
        return {"type": "authorized_user", "client_id": self.client_id,
                "client_secret": self.client_secret, "refresh_token": self.refresh_token,
                "token_uri": self.base + "/token"}

    def issue_token(self):
        tok = "ya29.sim-%032x" % random.getrandbits(128)
        self.tokens[tok] = time.time() + self.behavior["token_ttl"]
        self.tokens_issued += 1
        return {"access_token": tok, "expires_in": self.behavior["token_ttl"],
                "token_type": "Bearer"}

    def check_jwt(self, assertion):
        """RS256 JWT bearer assertion: signature by the service account's
        key (openssl), iss, aud, exp. Returns an error string or None."""
        parts = assertion.split(".")
        if len(parts) != 3:
            return "malformed assertion"

        def unb64(s):
            return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
        try:
            hdr = json.loads(unb64(parts[0]))
            claims = json.loads(unb64(parts[1]))
            sig = unb64(parts[2])
        except ValueError:
            return "malformed assertion"
        if hdr.get("alg") != "RS256":
            return "alg must be RS256"
        with tempfile.NamedTemporaryFile() as sf, tempfile.NamedTemporaryFile() as df:
            sf.write(sig)
            sf.flush()
            df.write(("%s.%s" % (parts[0], parts[1])).encode())
            df.flush()
            r = subprocess.run(["openssl", "dgst", "-sha256", "-verify", self.pubkey,
                                "-signature", sf.name, df.name],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if r.returncode != 0:
            return "Invalid JWT Signature."
        if claims.get("iss") != self.client_email:
            return "Invalid issuer"
        if claims.get("aud") != self.base + "/token":
            return "Invalid audience: %s" % claims.get("aud")
        t = time.time()
        if not (claims.get("iat", 0) - 300 <= t <= claims.get("exp", 0) + 300):
            return "Invalid JWT: Token must be a short-lived token and in a reasonable timeframe"
        if claims.get("exp", 0) - claims.get("iat", 0) > 3600:
            return "Invalid JWT: exp too far from iat"
        return None

    # ---- model helpers
    def url(self, path):
        return self.base + API + path

    def new_id(self):
        return str(next(self.ids))

    def add_image(self, im):
        proj = im.get("project", self.project)
        name = im["name"]
        d = {"kind": "compute#image", "id": self.new_id(), "name": name, "family": im.get("family"),
             "status": "READY", "creationTimestamp": now_rfc3339(),
             "diskSizeGb": str(im.get("diskSizeGb", 10)), "archiveSizeBytes": "1234567",
             "selfLink": self.url("projects/%s/global/images/%s" % (proj, name)),
             "labels": im.get("labels", {}),
             # the members a public image carries (Image resource, v1): its
             # license, UEFI/virtio features, multi-regional storage
             "description": im.get("description", "%s built on %s" % (
                 im.get("family") or name, now_rfc3339()[:10])),
             "sourceType": "RAW", "labelFingerprint": "42WmSpB8rSM=",
             "licenses": [self.url("projects/%s/global/licenses/%s" % (
                 proj, im.get("license", (im.get("family") or name).split("-")[0])))],
             "licenseCodes": [str(abs(hash(proj + name)) % 10 ** 19)],
             "guestOsFeatures": [{"type": t} for t in (
                 "UEFI_COMPATIBLE", "VIRTIO_SCSI_MULTIQUEUE", "GVNIC", "SEV_CAPABLE")],
             "storageLocations": ["us", "eu", "asia"],
             "architecture": im.get("architecture", "X86_64")}
        if im.get("deprecated"):
            d["deprecated"] = {"state": "DEPRECATED"}
        self.images[(proj, name)] = d
        return d

    def resolve_image(self, src):
        """sourceImage: a URL, projects/P/global/images/(NAME|family/F), or
        global/images/NAME (this project)."""
        if src.startswith(self.base + API):
            src = src[len(self.base + API):]
        m = re.match(r"^(?:projects/([^/]+)/)?global/images/(family/)?([^/]+)$", src)
        if not m:
            return None
        proj = m.group(1) or self.project
        if m.group(2):
            return self.family_image(proj, m.group(3))
        return self.images.get((proj, m.group(3)))

    def family_image(self, proj, family):
        cands = [im for (p, _), im in self.images.items()
                 if p == proj and im.get("family") == family and "deprecated" not in im]
        if not cands:
            return None
        return sorted(cands, key=lambda im: im["creationTimestamp"] + im["name"])[-1]

    def mtype(self, zone, name):
        if name not in MACHINE_TYPES:
            return None
        cpus, mem = MACHINE_TYPES[name]
        return {"kind": "compute#machineType", "id": str(abs(hash(name)) % 10 ** 10),
                "creationTimestamp": "2015-01-16T09:25:43.000-08:00", "name": name,
                "description": "%d vCPU, %g GB RAM" % (cpus, mem / 1024.0),
                "guestCpus": cpus, "memoryMb": mem, "imageSpaceGb": 0,
                "maximumPersistentDisks": 128, "maximumPersistentDisksSizeGb": "263168",
                "zone": zone, "isSharedCpu": name in ("f1-micro", "g1-small"),
                "selfLink": self.url("projects/%s/zones/%s/machineTypes/%s"
                                     % (self.project, zone, name))}

    def usage(self, region):
        cpus = inst = 0
        for (z, _), i in self.instances.items():
            if self.zones.get(z) != region or i["status"] in ("TERMINATED",):
                continue
            inst += 1
            cpus += MACHINE_TYPES.get(i["machineType"].rsplit("/", 1)[-1], (1, 0))[0]
        return {"CPUS": cpus, "INSTANCES": inst}

    def advance(self, now):
        b = self.behavior
        for key, op in list(self.operations.items()):
            if op["status"] != "DONE" and now >= op["_done_at"]:
                self.finish_op(op, now)
        for key, i in list(self.instances.items()):
            if i["_gone_at"] is not None:
                if now >= i["_gone_at"]:
                    del self.instances[key]
                    for dk in [dk for dk, d in self.disks.items()
                               if d.get("_owner") == key and d.get("_autodelete")]:
                        del self.disks[dk]
                continue
            if i["status"] == "PROVISIONING" and now >= i["_t0"] + min(0.1, b["boot_delay"]):
                i["status"] = "STAGING"
            if i["status"] == "STAGING" and now >= i["_ready_at"]:
                if i["_outcome"] == "never":
                    continue
                i["status"] = "TERMINATED" if i["_outcome"] == "terminated" else "RUNNING"
                i["lastStartTimestamp"] = now_rfc3339(now)

    def finish_op(self, op, now):
        op["status"] = "DONE"
        op["progress"] = 100
        op["endTime"] = now_rfc3339(now)
        if op.get("_error"):
            op["error"] = op["_error"]
            op["httpErrorStatusCode"] = 403
            op["httpErrorMessage"] = "FORBIDDEN"

    def new_op(self, zone, optype, target, status="RUNNING", error=None):
        name = "operation-%d-%s-%08x" % (int(time.time() * 1000), "sim",
                                         random.getrandbits(32))
        now = time.time()
        op = {"kind": "compute#operation", "id": self.new_id(), "name": name,
              "zone": self.url("projects/%s/zones/%s" % (self.project, zone)),
              "operationType": optype, "targetLink": target,
              "targetId": self.new_id(), "status": status,
              "user": self.client_email, "progress": 0,
              "insertTime": now_rfc3339(now), "startTime": now_rfc3339(now),
              "selfLink": self.url("projects/%s/zones/%s/operations/%s"
                                   % (self.project, zone, name)),
              "_done_at": now + self.behavior["op_delay"]}
        if error is not None:
            # failed at once (the default), or RUNNING for error_op_delay s
            # and then DONE with the error
            op["_error"] = {"errors": [error]}
            op["_done_at"] = now + float(self.behavior["error_op_delay"])
            if op["_done_at"] <= now:
                self.finish_op(op, now)
        self.operations[(zone, name)] = op
        return op

    def view_instance(self, i):
        return {k: v for k, v in i.items() if not k.startswith("_")}

    def create_instance(self, zone, body, op_for=True):
        name = body.get("name") or ""
        if not NAME_RE.match(name):
            raise gerror(400, "invalid", "Invalid value for field 'resource.name': '%s'. Must "
                         "be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'" % name)
        if (zone, name) in self.instances:
            raise gerror(409, "alreadyExists", "The resource 'projects/%s/zones/%s/instances/%s'"
                         " already exists" % (self.project, zone, name))
        mt_name = (body.get("machineType") or "").rsplit("/", 1)[-1]
        mt = self.mtype(zone, mt_name)
        if mt is None:
            raise gerror(400, "invalid", "Invalid value for field 'resource.machineType': "
                         "'%s'. Machine type with name '%s' does not exist in zone '%s'."
                         % (body.get("machineType"), mt_name, zone))
        disks = body.get("disks") or []
        boot = [d for d in disks if d.get("boot")]
        if len(boot) != 1:
            raise gerror(400, "invalid", "Invalid value for field 'resource.disks': "
                         "exactly one boot disk is required.")
        ip = boot[0].get("initializeParams") or {}
        image = self.resolve_image(ip.get("sourceImage") or "")
        if image is None:
            raise gerror(404, "notFound", "The resource '%s' was not found"
                         % ip.get("sourceImage"))
        dtype = (ip.get("diskType") or "zones/%s/diskTypes/pd-standard" % zone)
        dtype_name = dtype.rsplit("/", 1)[-1]
        if dtype_name not in ("pd-standard", "pd-balanced", "pd-ssd", "pd-extreme",
                              "standard"):
            raise gerror(400, "invalid", "Invalid value for field 'resource.disks[0]."
                         "initializeParams.diskType': '%s'. Disk type does not exist." % dtype)
        size = int(ip.get("diskSizeGb") or image["diskSizeGb"])
        region = self.zones[zone]
        q = self.quotas.get(region, {})
        use = self.usage(region)
        target = self.url("projects/%s/zones/%s/instances/%s" % (self.project, zone, name))
        for metric, need in (("CPUS", mt["guestCpus"]), ("INSTANCES", 1)):
            lim = q.get(metric)
            if lim is not None and use[metric] + need > lim:
                return self.new_op(zone, "insert", target, error={
                    "code": "QUOTA_EXCEEDED",
                    "message": "Quota '%s' exceeded.  Limit: %.1f in region %s."
                               % (metric, lim, region)})
        now = time.time()
        outcome = self.outcomes.pop(0) if self.outcomes else {}
        nics = []
        for n, nic in enumerate(body.get("networkInterfaces") or [{}]):
            net = nic.get("network") or "global/networks/default"
            pip = self.behavior["interface_ip"] or "10.128.%d.%d" % divmod(next(self.ip_seq), 250)
            d = {"kind": "compute#networkInterface", "name": "nic%d" % n,
                 "network": self.url("projects/%s/%s" % (self.project, net.split(
                     "projects/%s/" % self.project)[-1])) if not net.startswith("http") else net,
                 "networkIP": pip, "fingerprint": "sim=", "stackType": "IPV4_ONLY"}
            # an auto-mode network has a subnetwork per region: GCE names it
            d["subnetwork"] = nic.get("subnetwork") or self.url(
                "projects/%s/regions/%s/subnetworks/%s" % (
                    self.project, self.zones.get(zone, zone[:-2]), net.split("/")[-1]))
            acs = []
            for ac in nic.get("accessConfigs") or []:
                nat = self.behavior["nat_ip"] or "34.%d.%d.%d" % (
                    random.randint(1, 250), random.randint(1, 250), random.randint(1, 250))
                acs.append({"kind": "compute#accessConfig", "type": ac.get("type",
                                                                        "ONE_TO_ONE_NAT"),
                            "name": ac.get("name", "External NAT"), "natIP": nat,
                            "networkTier": "PREMIUM"})
            if acs:
                d["accessConfigs"] = acs
            nics.append(d)
        disk_name = name
        self.disks[(zone, disk_name)] = {
            "kind": "compute#disk", "id": self.new_id(), "name": disk_name,
            "sizeGb": str(size), "zone": self.url("projects/%s/zones/%s" % (self.project, zone)),
            "status": "READY", "sourceImage": image["selfLink"],
            "type": self.url("projects/%s/zones/%s/diskTypes/%s"
                             % (self.project, zone, dtype_name)),
            "users": [target], "_owner": (zone, name),
            "_autodelete": bool(boot[0].get("autoDelete"))}
        meta = body.get("metadata") or {}
        inst = {
            "kind": "compute#instance", "id": self.new_id(),
            "creationTimestamp": now_rfc3339(now), "name": name,
            "machineType": mt["selfLink"], "status": "PROVISIONING",
            "zone": self.url("projects/%s/zones/%s" % (self.project, zone)),
            "networkInterfaces": nics,
            "disks": [{"kind": "compute#attachedDisk", "type": "PERSISTENT", "mode": "READ_WRITE",
                       "source": self.url("projects/%s/zones/%s/disks/%s"
                                          % (self.project, zone, disk_name)),
                       "deviceName": "persistent-disk-0", "index": 0, "boot": True,
                       "autoDelete": bool(boot[0].get("autoDelete")), "diskSizeGb": str(size),
                       "interface": "SCSI", "licenses": image.get("licenses", []),
                       "guestOsFeatures": image.get("guestOsFeatures", []),
                       "architecture": image.get("architecture", "X86_64")}],
            "metadata": {"kind": "compute#metadata", "fingerprint": "sim=",
                         "items": [dict(key=str(it.get("key")), value=str(it.get("value")))
                                   for it in meta.get("items") or []]},
            "serviceAccounts": body.get("serviceAccounts") or [],
            "labels": body.get("labels") or {},
            "scheduling": {"onHostMaintenance": "MIGRATE", "automaticRestart": True,
                           "preemptible": False, "provisioningModel": "STANDARD"},
            "cpuPlatform": "Intel Broadwell", "labelFingerprint": "sim=",
            "startRestricted": False, "deletionProtection": False,
            # defaults GCE fills in (Instance resource, v1)
            "description": body.get("description", ""),
            "tags": {"items": (body.get("tags") or {}).get("items", []),
                     "fingerprint": "42WmSpB8rSM="} if (body.get("tags") or {}).get("items")
            else {"fingerprint": "42WmSpB8rSM="},
            "canIpForward": bool(body.get("canIpForward", False)),
            "fingerprint": "sim=",
            "shieldedInstanceConfig": {"enableSecureBoot": False, "enableVtpm": True,
                                       "enableIntegrityMonitoring": True},
            "shieldedInstanceIntegrityPolicy": {"updateAutoLearnPolicy": True},
            "selfLink": target,
            "_t0": now, "_ready_at": now + self.behavior["boot_delay"],
            "_gone_at": None, "_outcome": outcome.get("status", "boot"),
            "_console": outcome.get("console")}
        self.instances[(zone, name)] = inst
        return self.new_op(zone, "insert", target) if op_for else inst

    def delete_instance(self, zone, name):
        i = self.instances.get((zone, name))
        if i is None:
            raise gerror(404, "notFound", "The resource 'projects/%s/zones/%s/instances/%s'"
                         " was not found" % (self.project, zone, name))
        i["status"] = "STOPPING"
        if i["_gone_at"] is None:
            i["_gone_at"] = time.time() + self.behavior["terminate_delay"]
        return self.new_op(zone, "delete", i["selfLink"])


# ---------------------------------------------------------------- the API


def route_of(path):
    """The method id of a Compute path (for call counts)."""
    p = path[len(API):] if path.startswith(API) else path
    segs = p.split("/")
    pat = [
        (r"^projects/[^/]+/zones/[^/]+/instances$", "instances"),
        (r"^projects/[^/]+/zones/[^/]+/instances/[^/]+$", "instances.one"),
        (r"^projects/[^/]+/zones/[^/]+/instances/[^/]+/serialPort$",
         "instances.getSerialPortOutput"),
        (r"^projects/[^/]+/zones/[^/]+/operations/[^/]+$", "zoneOperations.get"),
        (r"^projects/[^/]+/zones/[^/]+/operations/[^/]+/wait$", "zoneOperations.wait"),
        (r"^projects/[^/]+/zones/[^/]+/machineTypes$", "machineTypes.list"),
        (r"^projects/[^/]+/zones/[^/]+/machineTypes/[^/]+$", "machineTypes.get"),
        (r"^projects/[^/]+/global/images/family/[^/]+$", "images.getFromFamily"),
        (r"^projects/[^/]+/global/images/[^/]+$", "images.get"),
        (r"^projects/[^/]+/global/images$", "images.list"),
        (r"^projects/[^/]+/regions/[^/]+$", "regions.get"),
        (r"^projects/[^/]+/zones/[^/]+$", "zones.get"),
    ]
    del segs
    for rx, name in pat:
        if re.match(rx, p):
            return name
    return "unknown"


def method_id(route, method):
    if route == "instances":
        return {"POST": "instances.insert", "GET": "instances.list"}.get(method, "instances.?")
    if route == "instances.one":
        return {"GET": "instances.get", "DELETE": "instances.delete"}.get(method,
                                                                          "instances.?")
    return route


def compute(sim, method, path, query, body):
    p = path[len(API):]
    segs = p.split("/")
    if len(segs) < 2 or segs[0] != "projects":
        raise gerror(404, "notFound", "Not Found")
    if segs[1] != sim.project and not (len(segs) >= 4 and segs[2] == "global"
                                       and segs[3] == "images"):
        raise gerror(403, "forbidden", "Required 'compute.instances.list' permission for "
                     "'projects/%s'" % segs[1])
    rest = segs[2:]
    if rest[:1] == ["regions"] and len(rest) == 2:
        r = rest[1]
        if r not in sim.quotas:
            raise gerror(404, "notFound", "The resource 'projects/%s/regions/%s' was not found"
                         % (sim.project, r))
        use = sim.usage(r)
        return 200, {"kind": "compute#region", "id": str(abs(hash(r)) % 10 ** 10), "name": r,
                     "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
                     "description": r, "supportsPzs": True,
                     "status": "UP", "zones": [sim.url("projects/%s/zones/%s" % (sim.project, z))
                                               for z, rr in sim.zones.items() if rr == r],
                     "quotas": [{"metric": m, "limit": lim, "usage": float(use.get(m, 0))}
                                for m, lim in sorted(sim.quotas[r].items())],
                     "selfLink": sim.url("projects/%s/regions/%s" % (sim.project, r))}
    if rest[:2] == ["global", "images"]:
        proj = segs[1]
        if len(rest) == 4 and rest[2] == "family":
            im = sim.family_image(proj, rest[3])
            if im is None:
                raise gerror(404, "notFound", "The resource 'projects/%s/global/images/family/"
                             "%s' was not found" % (proj, rest[3]))
            return 200, im
        if len(rest) == 2 and method == "GET":
            # images.list: the project's own images, by name, paged
            # (maxResults at most 500, pageToken) as the real API
            items = sorted((im for (p, _), im in sim.images.items() if p == proj),
                           key=lambda im: im["name"])
            size = min(int((query.get("maxResults") or ["500"])[-1]), 500,
                       sim.behavior["page_size"])
            start = int((query.get("pageToken") or ["0"])[-1] or 0)
            page = items[start:start + size]
            out = {"kind": "compute#imageList", "id": "projects/%s/global/images" % proj,
                   "items": page, "selfLink": sim.url("projects/%s/global/images" % proj)}
            if not page:
                del out["items"]
            if start + size < len(items):
                out["nextPageToken"] = str(start + size)
            return 200, out
        if len(rest) == 3:
            im = sim.images.get((proj, rest[2]))
            if im is None:
                raise gerror(404, "notFound", "The resource 'projects/%s/global/images/%s' was "
                             "not found" % (proj, rest[2]))
            return 200, im
    if rest[:1] != ["zones"] or len(rest) < 2:
        raise gerror(404, "notFound", "Not Found")
    zone = rest[1]
    if zone not in sim.zones:
        raise gerror(400, "invalid", "Invalid value for field 'zone': '%s'. Unknown zone."
                     % zone)
    rest = rest[2:]
    if not rest:
        return 200, {"kind": "compute#zone", "name": zone, "status": "UP",
                     "region": sim.url("projects/%s/regions/%s" % (sim.project, sim.zones[zone])),
                     "selfLink": sim.url("projects/%s/zones/%s" % (sim.project, zone))}
    coll = rest[0]
    if coll == "machineTypes":
        if len(rest) == 1:
            return 200, {"kind": "compute#machineTypeList",
                         "items": [sim.mtype(zone, n) for n in sorted(MACHINE_TYPES)]}
        mt = sim.mtype(zone, rest[1])
        if mt is None:
            raise gerror(404, "notFound", "The resource 'projects/%s/zones/%s/machineTypes/%s' "
                         "was not found" % (sim.project, zone, rest[1]))
        return 200, mt
    if coll == "operations" and len(rest) >= 2:
        op = sim.operations.get((zone, rest[1]))
        if op is None:
            raise gerror(404, "notFound", "The resource 'projects/%s/zones/%s/operations/%s' "
                         "was not found" % (sim.project, zone, rest[1]))
        if len(rest) == 3 and rest[2] == "wait" and method == "POST":
            deadline = time.time() + 120
            while op["status"] != "DONE" and time.time() < deadline:
                sim.lock.release()
                try:
                    time.sleep(0.05)
                finally:
                    sim.lock.acquire()
                sim.advance(time.time())
        return 200, {k: v for k, v in op.items() if not k.startswith("_")}
    if coll == "instances":
        if len(rest) == 1 and method == "POST":
            op = sim.create_instance(zone, body or {})
            return 200, {k: v for k, v in op.items() if not k.startswith("_")}
        if len(rest) == 1 and method == "GET":
            items = sorted((i for (z, _), i in sim.instances.items() if z == zone),
                           key=lambda i: i["name"])
            flt = (query.get("filter") or [""])[-1]
            m = re.match(r'^\s*name\s*(=|eq)\s*"?([^"\s]+)"?\s*$', flt)
            if m:
                items = [i for i in items if re.fullmatch(m.group(2), i["name"])
                         or i["name"] == m.group(2)]
            size = min(int((query.get("maxResults") or ["500"])[-1]), 500,
                       sim.behavior["page_size"])
            start = int((query.get("pageToken") or ["0"])[-1] or 0)
            page = items[start:start + size]
            out = {"kind": "compute#instanceList",
                   "id": "projects/%s/zones/%s/instances" % (sim.project, zone),
                   "items": [sim.view_instance(i) for i in page],
                   "selfLink": sim.url("projects/%s/zones/%s/instances" % (sim.project, zone))}
            if not page:
                del out["items"]
            if start + size < len(items):
                out["nextPageToken"] = str(start + size)
            return 200, out
        if len(rest) >= 2:
            name = rest[1]
            i = sim.instances.get((zone, name))
            if len(rest) == 2 and method == "DELETE":
                op = sim.delete_instance(zone, name)
                return 200, {k: v for k, v in op.items() if not k.startswith("_")}
            if i is None:
                raise gerror(404, "notFound", "The resource 'projects/%s/zones/%s/instances/%s'"
                             " was not found" % (sim.project, zone, name))
            if len(rest) == 2 and method == "GET":
                return 200, sim.view_instance(i)
            if len(rest) == 3 and rest[2] == "serialPort" and method == "GET":
                text = (i["_console"] or sim.behavior["console_output"] or
                        "SeaBIOS (version 1.8.2)\r\nBooting from Hard Disk 0...\r\n"
                        "[    0.000000] Linux version 6.1.0-17-cloud-amd64\r\n")
                return 200, {"kind": "compute#serialPortOutput", "contents": text,
                             "start": "0", "next": str(len(text)),
                             "selfLink": i["selfLink"] + "/serialPort"}
    raise gerror(404, "notFound", "Not Found")


def discovery(sim):
    """The discovery document of the methods the simulator serves (as
    https://compute.googleapis.com/$discovery/rest?version=v1 has them)."""
    def param(loc="path", required=True, typ="string", **kw):
        d = {"type": typ, "location": loc}
        if required:
            d["required"] = True
        d.update(kw)
        return d

    pz = {"project": param(), "zone": param()}
    listp = {"filter": param("query", False), "maxResults": param("query", False, "integer",
                                                                  format="uint32"),
             "pageToken": param("query", False), "orderBy": param("query", False)}

    def m(mid, http, path, params, order, request=None, response="Operation"):
        d = {"id": "compute." + mid, "httpMethod": http, "path": path, "flatPath": path,
             "parameters": params, "parameterOrder": order,
             "response": {"$ref": response},
             "scopes": ["https://www.googleapis.com/auth/cloud-platform",
                        "https://www.googleapis.com/auth/compute"]}
        if request:
            d["request"] = {"$ref": request}
        return d

    inst = "projects/{project}/zones/{zone}/instances"
    res = {
        "instances": {"methods": {
            "insert": m("instances.insert", "POST", inst,
                        dict(pz, requestId=param("query", False)), ["project", "zone"],
                        request="Instance"),
            "get": m("instances.get", "GET", inst + "/{instance}", dict(pz, instance=param()),
                     ["project", "zone", "instance"], response="Instance"),
            "list": m("instances.list", "GET", inst, dict(pz, **listp), ["project", "zone"],
                      response="InstanceList"),
            "delete": m("instances.delete", "DELETE", inst + "/{instance}",
                        dict(pz, instance=param(), requestId=param("query", False)),
                        ["project", "zone", "instance"]),
            "getSerialPortOutput": m(
                "instances.getSerialPortOutput", "GET", inst + "/{instance}/serialPort",
                dict(pz, instance=param(), port=param("query", False, "integer"),
                     start=param("query", False, format="int64")),
                ["project", "zone", "instance"], response="SerialPortOutput")}},
        "zoneOperations": {"methods": {
            "get": m("zoneOperations.get", "GET",
                     "projects/{project}/zones/{zone}/operations/{operation}",
                     dict(pz, operation=param()), ["project", "zone", "operation"]),
            "wait": m("zoneOperations.wait", "POST",
                      "projects/{project}/zones/{zone}/operations/{operation}/wait",
                      dict(pz, operation=param()), ["project", "zone", "operation"])}},
        "machineTypes": {"methods": {
            "get": m("machineTypes.get", "GET",
                     "projects/{project}/zones/{zone}/machineTypes/{machineType}",
                     dict(pz, machineType=param()), ["project", "zone", "machineType"],
                     response="MachineType"),
            "list": m("machineTypes.list", "GET", "projects/{project}/zones/{zone}/machineTypes",
                      dict(pz, **listp), ["project", "zone"], response="MachineTypeList")}},
        "images": {"methods": {
            "get": m("images.get", "GET", "projects/{project}/global/images/{image}",
                     {"project": param(), "image": param()}, ["project", "image"],
                     response="Image"),
            "getFromFamily": m("images.getFromFamily", "GET",
                               "projects/{project}/global/images/family/{family}",
                               {"project": param(), "family": param()}, ["project", "family"],
                               response="Image"),
            "list": m("images.list", "GET", "projects/{project}/global/images",
                      dict({"project": param()}, **listp), ["project"],
                      response="ImageList")}},
        "regions": {"methods": {
            "get": m("regions.get", "GET", "projects/{project}/regions/{region}",
                     {"project": param(), "region": param()}, ["project", "region"],
                     response="Region")}},
        "zones": {"methods": {
            "get": m("zones.get", "GET", "projects/{project}/zones/{zone}", pz,
                     ["project", "zone"], response="Zone")}},
    }
    schemas = {n: {"id": n, "type": "object", "properties": {}} for n in (
        "Instance", "InstanceList", "Operation", "MachineType", "MachineTypeList", "Image",
        "Region", "Zone", "SerialPortOutput", "ImageList")}
    for n in ("InstanceList", "MachineTypeList", "ImageList"):
        schemas[n]["properties"] = {"nextPageToken": {"type": "string"},
                                    "items": {"type": "array",
                                              "items": {"$ref": n[:-len("List")]}}}
    return {"kind": "discovery#restDescription", "discoveryVersion": "v1", "id": "compute:v1",
            "name": "compute", "version": "v1", "title": "Compute Engine API (gcesim)",
            "protocol": "rest", "rootUrl": sim.base + "/", "servicePath": "compute/v1/",
            "baseUrl": sim.base + API, "basePath": API, "batchPath": "batch/compute/v1",
            "parameters": {"alt": {"type": "string", "default": "json", "location": "query",
                                   "enum": ["json"]},
                           "fields": {"type": "string", "location": "query"},
                           "key": {"type": "string", "location": "query"},
                           "prettyPrint": {"type": "boolean", "default": "true",
                                           "location": "query"},
                           "quotaUser": {"type": "string", "location": "query"},
                           "userIp": {"type": "string", "location": "query"}},
            "auth": {"oauth2": {"scopes": {
                "https://www.googleapis.com/auth/cloud-platform": {"description": "all"},
                "https://www.googleapis.com/auth/compute": {"description": "compute"}}}},
            "schemas": schemas, "resources": res}


# ---------------------------------------------------------------- control


def control(sim, method, path, query, body):
    segs = [s for s in path.split("/") if s][1:]  # after _sim
    b = body or {}
    with sim.lock:
        sim.advance(time.time())
        if segs == ["state"]:
            return 200, {
                "project": sim.project,
                "instances": [dict(sim.view_instance(i), zone_name=z)
                              for (z, _), i in sorted(sim.instances.items())],
                "disks": [dict({k: v for k, v in d.items() if not k.startswith("_")},
                               zone_name=z) for (z, _), d in sorted(sim.disks.items())],
                "operations": len(sim.operations), "tokens_issued": sim.tokens_issued,
                "quotas": sim.quotas, "behavior": sim.behavior}
        if segs == ["calls"]:
            if method == "DELETE":
                sim.calls.clear()
                sim.log.clear()
                return 200, {}
            return 200, {"calls": dict(sim.calls)}
        if segs == ["log"]:
            return 200, {"log": sim.log}
        if segs == ["faults"] and method == "POST":
            try:
                f = Fault(next(sim.fault_ids), b)
            except (ValueError, re.error) as e:
                return 400, {"error": str(e)}
            sim.faults[f.id] = f
            return 200, f.view()
        if segs == ["faults"] and method == "GET":
            return 200, {"faults": [f.view() for f in sim.faults.values()]}
        if segs[:1] == ["faults"] and method == "DELETE":
            ids = [int(segs[1])] if len(segs) > 1 else list(sim.faults)
            for fid in ids:
                f = sim.faults.pop(fid, None)
                if f:
                    f.released.set()
            return 200, {}
        if segs == ["behavior"]:
            if method == "POST":
                for k, v in b.items():
                    if k not in sim.behavior:
                        return 400, {"error": "unknown behaviour %s" % k}
                    sim.behavior[k] = v
            return 200, sim.behavior
        if segs == ["outcomes"] and method == "POST":
            sim.outcomes.extend(b.get("outcomes", []))
            return 200, {"outcomes": sim.outcomes}
        if segs == ["quotas"]:
            if method == "POST":
                for r, q in b.items():
                    sim.quotas.setdefault(r, {}).update({k: float(v) for k, v in q.items()})
            return 200, sim.quotas
        if segs == ["images"] and method == "POST":
            return 200, sim.add_image(b)
        if segs == ["instances"] and method == "POST":
            zone = b.get("zone") or sorted(sim.zones)[0]
            i = sim.create_instance(zone, {
                "name": b["name"], "machineType": b.get("machineType", "e2-micro"),
                "disks": [{"boot": True, "autoDelete": True, "initializeParams": {
                    "sourceImage": "projects/debian-cloud/global/images/family/debian-12"}}],
                "networkInterfaces": [{}],
                "metadata": {"items": [{"key": k, "value": v}
                                       for k, v in (b.get("metadata") or {}).items()]}},
                op_for=False)
            if isinstance(i, dict) and i.get("kind") == "compute#operation":
                return 400, {"error": "quota"}
            return 200, sim.view_instance(i)
        if segs == ["tokens"] and method == "DELETE":
            sim.tokens.clear()  # every access token revoked
            return 200, {}
    return 404, {"error": "no control endpoint %s %s" % (method, path)}


# ---------------------------------------------------------------- HTTP


class Hang(Exception):
    def __init__(self, fault):
        super().__init__("hang")
        self.fault = fault


class Drop(Exception):
    pass


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version = "gcesim/1"
    sim = None
    control_only = False

    def log_message(self, fmt, *args):
        if os.environ.get("GCESIM_DEBUG"):
            sys.stderr.write("gcesim: %s\n" % (fmt % args))

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

    def _send(self, status, body, headers=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)

    def _handle(self):
        sim = self.sim
        u = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(u.path)
        query = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if path.startswith("/_sim"):
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                return self._send(400, {"error": "not JSON"})
            st, out = control(sim, self.command, path, query, body)
            return self._send(st, out)
        if self.control_only:
            return self._send(404, {"error": "control port serves /_sim/ only"})
        try:
            st, out, hdrs = self.dispatch(path, query, raw)
        except HTTPError as e:
            st, out, hdrs = e.status, e.body, e.headers
        except Drop:
            self.close_connection = True
            return
        except Hang as h:
            while not h.fault.released.wait(0.2):
                if sim.stopping:
                    break
            self.close_connection = True
            return
        except Exception as e:  # a simulator bug: say so
            import traceback
            traceback.print_exc()
            st, out, hdrs = 500, {"error": {"code": 500, "message": "gcesim bug: %r" % e,
                                            "errors": [{"reason": "backendError"}]}}, {}
        self._send(st, out, hdrs)

    def apply_faults(self, api, path):
        sim = self.sim
        for f in list(sim.faults.values()):
            if not f.matches(api, self.command, path):
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
            st = int(f.spec["status"])
            reason = f.spec.get("reason") or {429: "rateLimitExceeded", 500: "backendError",
                                              503: "backendError",
                                              403: "quotaExceeded"}.get(st, "simulated")
            msg = f.spec.get("message") or {
                429: "Rate Limit Exceeded", 500: "Internal error. Please try again or contact "
                "Google Support.", 503: "The service is currently unavailable."}.get(
                    st, "Simulated fault %d" % st)
            e = gerror(st, reason, msg)
            if f.spec.get("retry_after") is not None:
                e.headers["Retry-After"] = str(f.spec["retry_after"])
            raise e

    def count(self, name):
        sim = self.sim
        sim.calls[name] = sim.calls.get(name, 0) + 1
        sim.log.append((time.time(), name))

    def dispatch(self, path, query, raw):
        sim = self.sim
        if path == "/discovery/v1/apis/compute/v1/rest" or path == "/$discovery/rest":
            with sim.lock:
                self.count("discovery")
            return 200, discovery(sim), {}
        if path == "/token" and self.command == "POST":
            with sim.lock:
                self.count("oauth2.token")
                self.apply_faults("oauth2", path)
                form = urllib.parse.parse_qs(raw.decode(), keep_blank_values=True)
                gt = (form.get("grant_type") or [""])[-1]
                if gt == "urn:ietf:params:oauth:grant-type:jwt-bearer":
                    err = sim.check_jwt((form.get("assertion") or [""])[-1])
                    if err:
                        return 400, {"error": "invalid_grant", "error_description": err}, {}
                    return 200, sim.issue_token(), {}
                if gt == "refresh_token":
                    if ((form.get("refresh_token") or [""])[-1] != sim.refresh_token or
                            (form.get("client_id") or [""])[-1] != sim.client_id or
                            (form.get("client_secret") or [""])[-1] != sim.client_secret):
                        return 400, {"error": "invalid_grant",
                                     "error_description": "Bad Request"}, {}
                    return 200, sim.issue_token(), {}
                return 400, {"error": "unsupported_grant_type",
                             "error_description": "Invalid grant_type: %s" % gt}, {}
        if not path.startswith(API):
            raise gerror(404, "notFound", "Not Found")
        with sim.lock:
            name = "compute." + method_id(route_of(path), self.command)
            self.count(name)
            self.apply_faults("compute", path)
            auth = self.headers.get("Authorization") or ""
            tok = auth[7:] if auth.startswith("Bearer ") else None
            if tok is None or sim.tokens.get(tok, 0) < time.time():
                e = gerror(401, "authError", "Request had invalid authentication credentials. "
                           "Expected OAuth 2 access token, login cookie or other valid "
                           "authentication credential.")
                e.headers["WWW-Authenticate"] = 'Bearer realm="https://accounts.google.com/"'
                raise e
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                raise gerror(400, "parseError", "Parse Error")
            sim.advance(time.time())
            st, out = compute(sim, self.command, path, query, body)
            return st, out, {}

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
        if os.environ.get("GCESIM_DEBUG"):
            super().handle_error(request, client_address)


def make_tls(d, host):
    """A self-signed CA and a server certificate for host in d (openssl);
    reused when present. Returns (ca.pem, server.pem, server.key)."""
    os.makedirs(d, exist_ok=True)
    ca, ck = os.path.join(d, "ca.pem"), os.path.join(d, "ca.key")
    crt, key = os.path.join(d, "server.pem"), os.path.join(d, "server.key")
    if all(os.path.exists(p) for p in (ca, crt, key)):
        return ca, crt, key

    def run(*a):
        subprocess.run(a, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
        "-subj", "/CN=gcesim test CA", "-keyout", ck, "-out", ca)
    csr = os.path.join(d, "server.csr")
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=%s" % host,
        "-keyout", key, "-out", csr)
    ext = os.path.join(d, "san.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:%s,DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
                % host)
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ck, "-CAcreateserial",
        "-days", "30", "-extfile", ext, "-out", crt)
    return ca, crt, key


def serve(cfg, host="127.0.0.1", port=0, state_dir=None, ready_file=None):
    state_dir = state_dir or tempfile.mkdtemp(prefix="gcesim-")
    os.makedirs(state_dir, exist_ok=True)
    ca, crt, key = make_tls(os.path.join(state_dir, "tls"), host)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    srv = Server((host, port), Handler, ctx)
    base = "https://%s:%d" % (host, srv.server_address[1])
    sim = Sim(cfg, base, state_dir)
    srv.RequestHandlerClass = type("H", (Handler,), {"sim": sim})
    csrv = Server((host, 0), type("HC", (Handler,), {"sim": sim, "control_only": True}))
    creds = os.path.join(state_dir, "service-account.json")
    with open(creds, "w") as f:
        json.dump(sim.credentials(), f, indent=1)
    os.chmod(creds, 0o600)
    ucreds = os.path.join(state_dir, "application_default_credentials.json")
    with open(ucreds, "w") as f:
        json.dump(sim.user_credentials(), f, indent=1)
    info = {"pid": os.getpid(), "port": srv.server_address[1], "base": base,
            "endpoint": base + API, "discovery": base + "/discovery/v1/apis/{api}/{apiVersion}/rest",
            "token_uri": base + "/token", "cacert": ca, "credentials": creds,
            "user_credentials": ucreds, "project": sim.project, "zones": sim.zones,
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
    ap = argparse.ArgumentParser(prog="gcesim", description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: a free port (see --ready-file)")
    ap.add_argument("--config", help="JSON simulator configuration file")
    ap.add_argument("--boot-delay", type=float, help="seconds before an instance is RUNNING")
    ap.add_argument("--state-dir", help="TLS files and credentials go here (default: beside "
                    "the ready-file)")
    ap.add_argument("--ready-file", help="write {port, control, credentials, ...} JSON here")
    a = ap.parse_args(argv)
    cfg = {}
    if a.config:
        with open(a.config) as f:
            cfg = json.load(f)
    if a.boot_delay is not None:
        cfg["boot_delay"] = a.boot_delay
    state_dir = a.state_dir
    if state_dir is None and a.ready_file:
        state_dir = os.path.dirname(os.path.abspath(a.ready_file))
    sim, servers = serve(cfg, host=a.host, port=a.port, state_dir=state_dir,
                         ready_file=a.ready_file)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    sys.stderr.write("gcesim: serving %s (control %s), pid %d\n"
                     % (sim.base, sim.info["control"], os.getpid()))
    sys.stderr.flush()
    while not stop.wait(0.05):
        pass
    sim.stopping = True
    for f in list(sim.faults.values()):
        f.released.set()
    for s in servers:
        s.shutdown()
        s.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
