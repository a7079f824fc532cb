"""awssim: an EC2 + S3 + Service Quotas simulator for nodepoold's tests.

One process, one loopback port, one region (or several), serving:

  EC2 Query API (POST form, Action=..., XML answers, 2016-11-15)
  S3 REST, path-style (/<bucket>/<key>): PutObject, multipart upload,
      GetObject, HeadObject, DeleteObject, ListObjectsV2, object tagging
  Service Quotas (JSON 1.1, X-Amz-Target ServiceQuotasV20190624.*)

Every call must carry a valid AWS Signature Version 4 (Authorization
header), checked with the secret key of the access key it names; the
credential scope's service picks the API (ec2, s3, servicequotas) and its
region the region. Unsigned or badly signed calls get the service's own
error (AuthFailure / SignatureDoesNotMatch).

A control API for tests lives under /_sim/ (unsigned, plain JSON): faults,
spot interruptions, state and call counts. See README.md next to this file.

Stdlib only. Judged by boto3 (tests/process/test_aws_sim.py): if boto3
disagrees, the simulator is wrong.
"""
import argparse
import base64
import datetime
import functools
import hashlib
import hmac
import http.server
import json
import os
import re
import signal
import socketserver
import sys
import threading
import time
import urllib.parse
import uuid
from xml.sax.saxutils import escape

EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
OWNER = "123456789012"

# The instance types the simulator knows, as DescribeInstanceTypes
# answers them (values of the real types: vCPUs, cores and threads,
# memory, clock, network, EBS bandwidth; AWS's instance type pages).
# Columns: vcpus, cores, valid cores, memory MiB, GHz, network performance,
# max ENIs, IPv4 per ENI, EBS baseline/maximum Mbps, baseline/maximum IOPS,
# hypervisor, burstable, local NVMe GB (0: none), GPU (count, maker,
# model, MiB each) or None. Launching an unknown type counts 2 vCPUs.
ITYPES = {
    "t3.nano": (2, 1, [1], 512, 2.5, "Up to 5 Gigabit", 2, 2, 32, 2085, 250, 11800),
    "t3.micro": (2, 1, [1], 1024, 2.5, "Up to 5 Gigabit", 2, 2, 64, 2085, 500, 11800),
    "t3.small": (2, 1, [1], 2048, 2.5, "Up to 5 Gigabit", 3, 4, 174, 2085, 1000, 11800),
    "t3.medium": (2, 1, [1], 4096, 2.5, "Up to 5 Gigabit", 3, 6, 347, 2085, 2000, 11800),
    "t3.large": (2, 1, [1], 8192, 2.5, "Up to 5 Gigabit", 3, 12, 695, 2780, 4000, 15700),
    "t3.xlarge": (4, 2, [2], 16384, 2.5, "Up to 5 Gigabit", 4, 15, 695, 2780, 4000, 15700),
    "t3.2xlarge": (8, 4, [2, 4], 32768, 2.5, "Up to 5 Gigabit", 4, 15, 695, 2780, 4000,
                   15700),
    "m5.large": (2, 1, [1], 8192, 3.1, "Up to 10 Gigabit", 3, 10, 650, 4750, 3600, 18750),
    "m5.xlarge": (4, 2, [2], 16384, 3.1, "Up to 10 Gigabit", 4, 15, 1150, 4750, 6000, 18750),
    "m5.2xlarge": (8, 4, [2, 4], 32768, 3.1, "Up to 10 Gigabit", 4, 15, 2300, 4750, 12000,
                   18750),
    "m6i.large": (2, 1, [1], 8192, 3.5, "Up to 12.5 Gigabit", 3, 10, 650, 10000, 3600, 40000),
    "m6i.xlarge": (4, 2, [1, 2], 16384, 3.5, "Up to 12.5 Gigabit", 4, 15, 1250, 10000, 6000,
                   40000),
    "c5.large": (2, 1, [1], 4096, 3.4, "Up to 10 Gigabit", 3, 10, 650, 4750, 4000, 20000),
    "c5.xlarge": (4, 2, [2], 8192, 3.4, "Up to 10 Gigabit", 4, 15, 1150, 4750, 6000, 20000),
    "c6i.large": (2, 1, [1], 4096, 3.5, "Up to 12.5 Gigabit", 3, 10, 650, 10000, 3600, 40000),
    "r5.large": (2, 1, [1], 16384, 3.1, "Up to 10 Gigabit", 3, 10, 650, 4750, 3600, 18750),
    "p3.2xlarge": (8, 4, [1, 2, 3, 4], 62464, 2.7, "Up to 10 Gigabit", 4, 15, 1750, 1750,
                   10000, 10000, "xen", False, 0, (1, "NVIDIA", "V100", 16384)),
    "g4dn.xlarge": (4, 2, [1, 2], 16384, 2.5, "Up to 25 Gigabit", 3, 10, 950, 3500, 3000,
                    20000, "nitro", False, 125, (1, "NVIDIA", "T4", 15360)),
    "z1d.large": (2, 1, [1], 16384, 4.0, "Up to 10 Gigabit", 3, 10, 800, 3170, 3333, 13333,
                  "nitro", False, 75, None),
}
VCPUS = {k: v[0] for k, v in ITYPES.items()}
MEMORY = {k: v[3] for k, v in ITYPES.items()}


def instance_type_info(name):
    """One InstanceTypeInfo (API_InstanceTypeInfo) with every member a
    real answer carries for that type: the optional GpuInfo and
    InstanceStorageInfo only where the type has them, as EC2 does."""
    row = ITYPES[name] + ("nitro", None, 0, None)[len(ITYPES[name]) - 12:]
    (vcpus, cores, valid, mem, ghz, net, enis, ipv4, bw, bwmax, iops, iopsmax, hyper, burst,
     nvme, gpu) = row
    fam = name.split(".")[0]
    if burst is None:
        burst = fam.startswith("t")
    ebsopt = {"BaselineBandwidthInMbps": bw, "BaselineThroughputInMBps": round(bw / 8, 3),
              "BaselineIops": iops, "MaximumBandwidthInMbps": bwmax,
              "MaximumThroughputInMBps": round(bwmax / 8, 3), "MaximumIops": iopsmax}
    info = {
        "InstanceType": name, "CurrentGeneration": True,
        "FreeTierEligible": name == "t3.micro",
        "SupportedUsageClasses": ["on-demand", "spot"],
        "SupportedRootDeviceTypes": ["ebs"], "SupportedVirtualizationTypes": ["hvm"],
        "BareMetal": False, "Hypervisor": hyper,
        "ProcessorInfo": {"SupportedArchitectures": ["x86_64"],
                          "SustainedClockSpeedInGhz": ghz},
        "VCpuInfo": {"DefaultVCpus": vcpus, "DefaultCores": cores,
                     "DefaultThreadsPerCore": vcpus // cores, "ValidCores": valid,
                     "ValidThreadsPerCore": [1, 2]},
        "MemoryInfo": {"SizeInMiB": mem},
        "InstanceStorageSupported": bool(nvme),
        "EbsInfo": {"EbsOptimizedSupport": "default", "EncryptionSupport": "supported",
                    "EbsOptimizedInfo": ebsopt,
                    "NvmeSupport": "required" if hyper == "nitro" else "unsupported"},
        "NetworkInfo": {
            "NetworkPerformance": net, "MaximumNetworkInterfaces": enis,
            "MaximumNetworkCards": 1, "DefaultNetworkCardIndex": 0,
            "NetworkCards": [{"NetworkCardIndex": 0, "NetworkPerformance": net,
                              "MaximumNetworkInterfaces": enis}],
            "Ipv4AddressesPerInterface": ipv4, "Ipv6AddressesPerInterface": ipv4,
            "Ipv6Supported": True, "EnaSupport": "required" if hyper == "nitro" else
            "supported", "EfaSupported": False, "EncryptionInTransitSupported":
            fam in ("m6i", "c6i", "g4dn"), "EnaSrdSupported": False},
        "PlacementGroupInfo": {"SupportedStrategies": ["partition", "spread"] if burst else
                               ["cluster", "partition", "spread"]},
        "HibernationSupported": gpu is None,
        "BurstablePerformanceSupported": burst,
        "DedicatedHostsSupported": not burst or fam == "t3",
        "AutoRecoverySupported": not nvme,
        "SupportedBootModes": ["legacy-bios", "uefi"] if hyper == "nitro" else
        ["legacy-bios"],
    }
    if nvme:
        info["InstanceStorageInfo"] = {
            "TotalSizeInGB": nvme, "Disks": [{"SizeInGB": nvme, "Count": 1, "Type": "ssd"}],
            "NvmeSupport": "required", "EncryptionSupport": "required"}
    if gpu:
        n, maker, model, gmem = gpu
        info["GpuInfo"] = {"Gpus": [{"Name": model, "Manufacturer": maker, "Count": n,
                                     "MemoryInfo": {"SizeInMiB": gmem}}],
                           "TotalGpuMemoryInMiB": n * gmem}
    return info


def ec2_xml(v):
    """A value in the EC2 query protocol's XML: a dict's members as
    lowerCamel elements (the locationName of every InstanceTypeInfo
    member), a list as <item>s, booleans as true/false."""
    if isinstance(v, dict):
        return "".join("<%s>%s</%s>" % (k[0].lower() + k[1:], ec2_xml(w), k[0].lower() + k[1:])
                       for k, w in v.items())
    if isinstance(v, list):
        return "".join("<item>%s</item>" % ec2_xml(w) for w in v)
    if isinstance(v, bool):
        return "true" if v else "false"
    return escape(str(v))


# Dedicated hosts: instance family -> the Service Quotas code of
# "Running Dedicated <family> Hosts" (AWS's codes; a few families). A host
# limit is enforced (HostLimitExceeded) only when the quota is configured.
HOST_QUOTAS = {"m5": "L-8B7BF662", "c5": "L-81657574", "t3": "L-1586174D",
               "r5": "L-EA4FD6CF", "mac1": "L-A8448DC5"}

# Service Quotas: code -> (name, default value), by service code, as
# AWS lists them (ListServiceQuotas): for `ec2` the vCPU quotas by instance
# family, as upstream Nodepool's adapter maps them (on-demand and spot)
# and the dedicated host ones; for `ebs` the storage (TiB) and IOPS quotas
# by volume type that upstream Nodepool reads for volume quota.
QUOTAS_BY_SERVICE = {
    "ec2": {
        "L-1216C47A": ("Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
                       1000.0),
        "L-43DA4232": ("Running On-Demand High Memory instances", 0.0),
        "L-DB2E81BA": ("Running On-Demand G and VT instances", 64.0),
        "L-417A185B": ("Running On-Demand P instances", 64.0),
        "L-74FC7D96": ("Running On-Demand F instances", 0.0),
        "L-7295265B": ("Running On-Demand X instances", 0.0),
        "L-1945791B": ("Running On-Demand Inf instances", 0.0),
        "L-6E869C2A": ("Running On-Demand DL instances", 0.0),
        "L-2C3B7624": ("Running On-Demand Trn instances", 0.0),
        "L-F7808C92": ("Running On-Demand HPC instances", 0.0),
        "L-34B43A08": ("All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests",
                       1000.0),
        "L-3819A6DF": ("All G and VT Spot Instance Requests", 64.0),
        "L-7212CCBC": ("All P Spot Instance Requests", 64.0),
        "L-88CF9481": ("All F Spot Instance Requests", 0.0),
        "L-E3A00192": ("All X Spot Instance Requests", 0.0),
        "L-B5D1601B": ("All Inf Spot Instance Requests", 0.0),
        "L-85EED4F7": ("All DL Spot Instance Requests", 0.0),
        "L-6B0D517C": ("All Trn Spot Instance Requests", 0.0),
    },
    "ebs": {
        "L-D18FCD1D": ("Storage for General Purpose SSD (gp2) volumes, in TiB", 50.0),
        "L-7A658B76": ("Storage for General Purpose SSD (gp3) volumes, in TiB", 50.0),
        "L-FD252861": ("Storage for Provisioned IOPS SSD (io1) volumes, in TiB", 50.0),
        "L-B3A130E6": ("IOPS for Provisioned IOPS SSD (io1) volumes", 300000.0),
        "L-09BD8365": ("Storage for Provisioned IOPS SSD (io2) volumes, in TiB", 50.0),
        "L-8D977E7E": ("IOPS for Provisioned IOPS SSD (io2) volumes", 100000.0),
        "L-82ACEF56": ("Storage for Throughput Optimized HDD (st1) volumes, in TiB", 50.0),
        "L-17AF77E8": ("Storage for Cold HDD (sc1) volumes, in TiB", 50.0),
        "L-9CF3C2EB": ("Storage for Magnetic (standard) volumes, in TiB", 50.0),
        "L-309BACF6": ("Number of EBS snapshots", 100000.0),
    },
}
SERVICE_NAMES = {"ec2": "Amazon Elastic Compute Cloud (Amazon EC2)",
                 "ebs": "Amazon Elastic Block Store (Amazon EBS)"}
# the dedicated host quotas: listed under ec2 with AWS's default, enforced
# only when configured (config `quotas` or POST /_sim/quotas)
HOST_QUOTA_DEFAULT = 2.0
QUOTAS = {c: v for svc in QUOTAS_BY_SERVICE.values() for c, v in svc.items()}
QUOTAS.update({c: ("Running Dedicated %s Hosts" % fam, HOST_QUOTA_DEFAULT)
               for fam, c in HOST_QUOTAS.items()})


def quota_service(code):
    """The service code a quota code belongs to (unknown codes: ec2)."""
    for svc, codes in QUOTAS_BY_SERVICE.items():
        if code in codes:
            return svc
    return "ec2"


STANDARD = set("acdhimrtz")


@functools.lru_cache(maxsize=None)
def quota_code(itype, spot=False):
    """The Service Quotas code an instance type's vCPUs count against
    (None: none). Pure, so cached: every RunInstances sums the live
    instances' vCPUs by it."""
    fam = re.match(r"([a-z\-]+)\d", itype or "")
    fam = fam.group(1) if fam else ""
    table = [("u-", "L-43DA4232", None), ("inf", "L-1945791B", "L-B5D1601B"),
             ("trn", "L-2C3B7624", "L-6B0D517C"), ("hpc", "L-F7808C92", None),
             ("dl", "L-6E869C2A", "L-85EED4F7"), ("vt", "L-DB2E81BA", "L-3819A6DF"),
             ("g", "L-DB2E81BA", "L-3819A6DF"), ("p", "L-417A185B", "L-7212CCBC"),
             ("f", "L-74FC7D96", "L-88CF9481"), ("x", "L-7295265B", "L-E3A00192")]
    for pre, od, sp in table:
        if fam.startswith(pre):
            return sp if spot else od
    if fam[:1] in STANDARD:
        return "L-34B43A08" if spot else "L-1216C47A"
    return None


def iso(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.000Z")


def rfc1123(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime(
        "%a, %d %b %Y %H:%M:%S GMT")


class ApiError(Exception):
    def __init__(self, status, code, message):
        super().__init__(code)
        self.status, self.code, self.message = status, code, message


# ---------------------------------------------------------------- SigV4 (server side)

def uri_encode(s, keep_slash=False):
    safe = "-_.~" + ("/" if keep_slash else "")
    return urllib.parse.quote(s, safe=safe)


def canonical_query(qs):
    pairs = []
    for part in qs.split("&") if qs else []:
        if not part:
            continue
        k, _, v = part.partition("=")
        k = urllib.parse.unquote_plus(k) if "+" not in k else urllib.parse.unquote(k)
        v = urllib.parse.unquote(v)
        pairs.append((uri_encode(k), uri_encode(v)))
    pairs.sort()
    return "&".join("%s=%s" % p for p in pairs)


def hmac256(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def check_sigv4(method, raw_path, headers, body, secrets, tokens=None):
    """Verify an Authorization: AWS4-HMAC-SHA256 header. Returns
    (access_key, region, service); raises ApiError. headers: lower-case
    name -> value. tokens: access key -> session token, for temporary
    credentials: their requests must carry it, signed, in
    X-Amz-Security-Token (as AWS STS credentials)."""
    auth = headers.get("authorization", "")
    m = re.match(r"AWS4-HMAC-SHA256\s+Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),"
                 r"\s*Signature=([0-9a-f]+)", auth)
    if not m:
        raise ApiError(401 if not auth else 400, "MissingAuthenticationToken" if not auth
                       else "IncompleteSignature", "Request is missing a valid Authentication Token")
    cred, signed, sig = m.groups()
    parts = cred.split("/")
    if len(parts) != 5 or parts[4] != "aws4_request":
        raise ApiError(400, "IncompleteSignature", "Credential scope is malformed: " + cred)
    akid, date, region, service, _ = parts
    secret = secrets.get(akid)
    if secret is None:
        raise ApiError(401, "AuthFailure", "AWS was not able to validate the provided access "
                       "credentials (unknown access key %s)" % akid)
    token = (tokens or {}).get(akid)
    if token is not None and (headers.get("x-amz-security-token") != token or
                              "x-amz-security-token" not in signed.split(";")):
        raise ApiError(401, "AuthFailure", "AWS was not able to validate the provided access "
                       "credentials (the security token of temporary key %s is %s)" % (
                           akid, "wrong" if "x-amz-security-token" in headers else "missing"))
    amzdate = headers.get("x-amz-date") or ""
    if not amzdate.startswith(date):
        raise ApiError(400, "IncompleteSignature", "Date in Credential scope does not match "
                       "X-Amz-Date")
    path, _, qs = raw_path.partition("?")
    # S3 signs the path as sent; other services encode the (already
    # encoded) path once more.
    curi = path if service == "s3" else uri_encode(path or "/", keep_slash=True)
    names = signed.split(";")
    for n in names:
        if n not in headers:
            raise ApiError(400, "IncompleteSignature", "signed header %s is missing" % n)
    chead = "".join("%s:%s\n" % (n, re.sub(r"\s+", " ", headers[n].strip())) for n in names)
    phash = headers.get("x-amz-content-sha256") or hashlib.sha256(body).hexdigest()
    creq = "\n".join([method, curi, canonical_query(qs), chead, signed, phash])
    sts = "\n".join(["AWS4-HMAC-SHA256", amzdate, "/".join(parts[1:]),
                     hashlib.sha256(creq.encode()).hexdigest()])
    k = hmac256(("AWS4" + secret).encode(), date)
    k = hmac256(k, region)
    k = hmac256(k, service)
    k = hmac256(k, "aws4_request")
    want = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, sig):
        raise ApiError(403, "SignatureDoesNotMatch",
                       "The request signature we calculated does not match the signature "
                       "you provided. Canonical request:\n" + creq)
    return akid, region, service


# ---------------------------------------------------------------- model

class Fault:
    FIELDS = ("service", "action", "region", "code", "status", "message", "count", "after",
              "instance_type", "market")

    def __init__(self, fid, spec):
        bad = set(spec) - set(self.FIELDS)
        if bad:
            raise ValueError("unknown fault keys: " + ", ".join(sorted(bad)))
        if not spec.get("code"):
            raise ValueError("a fault needs a code (RequestLimitExceeded...)")
        self.id = fid
        self.spec = spec
        self.count = spec.get("count")
        self.after = int(spec.get("after") or 0)
        self.seen = 0
        self.hits = 0

    def matches(self, service, action, region, itypes, market):
        s = self.spec
        if s.get("service") and s["service"] != service:
            return False
        if s.get("action") and s["action"] != action:
            return False
        if s.get("region") and s["region"] != region:
            return False
        if s.get("instance_type") and s["instance_type"] not in itypes:
            return False
        if s.get("market") and s["market"] != market:
            return False
        return True

    def view(self):
        d = dict(self.spec)
        d.update(id=self.id, hits=self.hits, remaining=self.count)
        return d


class Region:
    def __init__(self, name, cfg):
        self.name = name
        self.instances = {}   # id -> dict
        self.tokens = {}      # RunInstances ClientToken -> instance id
        self.xml = {}         # instance id -> (what it shows, its describe item)
        self.volumes = {}
        self.images = {}
        self.snapshots = {}
        self.templates = {}   # name -> dict
        self.fleets = {}
        self.hosts = {}
        self.import_tasks = {}
        self.spot_requests = {}
        self.subnets = cfg.get("subnets") or ["subnet-0123456789abcdef0"]
        self.azs = cfg.get("availability_zones") or [name + "a", name + "b"]
        self.ip_seq = 0
        for img in cfg.get("images") or []:
            self.add_image(img)

    def add_image(self, spec):
        iid = spec.get("id") or new_id("ami")
        img = {"id": iid, "name": spec.get("name", iid), "state": "available",
               "owner": spec.get("owner", OWNER), "architecture": spec.get("architecture",
                                                                           "x86_64"),
               "tags": dict(spec.get("tags") or {}), "created": time.time(),
               "snapshots": [], "root": "/dev/xvda", "public": spec.get("public", False),
               "description": spec.get("description", "")}
        self.images[iid] = img
        return img


SEQ = [0]
SEQ_LOCK = threading.Lock()


def new_id(prefix):
    with SEQ_LOCK:
        SEQ[0] += 1
        return "%s-%017x" % (prefix, 0x0a0000000000000 + SEQ[0])


class Sim:
    def __init__(self, cfg):
        self.lock = threading.RLock()
        self.cfg = cfg
        self.secrets = dict(cfg.get("credentials") or {"AKIDSIMULATOR": "simsecret"})
        self.tokens = dict(cfg.get("session_tokens") or {})
        self.behavior = {
            "boot_delay": float(cfg.get("boot_delay", 0.5)),
            "terminate_delay": float(cfg.get("terminate_delay", 0.2)),
            "terminated_linger": float(cfg.get("terminated_linger", 60.0)),
            "import_delay": float(cfg.get("import_delay", 0.2)),
            "interruption_notice": float(cfg.get("interruption_notice", 120.0)),
            "page_size": int(cfg.get("page_size", 1000)),
            # every EC2 page has a nextToken (to the first page again): a
            # cloud that would keep a client listing forever (issue 23)
            "endless_pages": bool(cfg.get("endless_pages", False)),
            "ip_base": cfg.get("ip_base", "10.1"),
            "public_ip_base": cfg.get("public_ip_base", "198.51"),
            "interface_ip": cfg.get("interface_ip"),  # e.g. 127.0.0.1 for nodescan
        }
        regions = cfg.get("regions") or {"us-east-1": {}}
        if isinstance(regions, list):
            regions = {r: {} for r in regions}
        self.regions = {n: Region(n, dict(cfg, **(c or {}))) for n, c in regions.items()}
        self.quotas = {c: v for c, (_, v) in QUOTAS.items()}
        self.quotas.update({k: float(v) for k, v in (cfg.get("quotas") or {}).items()})
        # quota codes set by config or /_sim/quotas: a dedicated host
        # limit is enforced only then
        self.quotas_set = set(cfg.get("quotas") or {})
        self.buckets = {b: {} for b in cfg.get("buckets") or []}
        self.uploads = {}
        self.faults = []
        self.fault_seq = 0
        self.calls = {}
        self.call_log = []
        # advance() scans every instance only when a transition is due:
        # the earliest time one is (0: scan at the next call). Whatever
        # sets a transition's time calls due().
        self.next_due = 0.0

    def due(self, t):
        """A transition (boot, shutdown, reaping, interruption, import) is
        due at time t."""
        if t is not None and t < self.next_due:
            self.next_due = t

    def count(self, service, action, region, params=None):
        k = "%s:%s" % (service, action)
        self.calls[k] = self.calls.get(k, 0) + 1
        self.call_log.append({"t": time.time(), "service": service, "action": action,
                              "region": region, "params": params or {}})
        if len(self.call_log) > 20000:
            del self.call_log[:10000]

    def fault_for(self, service, action, region, itypes=(), market="on-demand"):
        for f in self.faults:
            if not f.matches(service, action, region, itypes, market):
                continue
            f.seen += 1
            if f.seen <= f.after:
                continue
            if f.count is not None and f.count <= 0:
                continue
            f.hits += 1
            if f.count is not None:
                f.count -= 1
            return f
        return None

    def advance(self):
        """Move instances along their lifecycle (called under the lock).

        Every call advances first: scanning every instance (terminated ones
        linger a minute) cost each call of a 500-node bench up to a
        millisecond, so the scan runs only when a transition is due
        (next_due, the earliest the last scan left, lowered by due())."""
        now = time.time()
        if now < self.next_due:
            return
        nxt = float("inf")
        b = self.behavior
        for reg in self.regions.values():
            for i in list(reg.instances.values()):
                if i["state"] == "pending" and now >= i["ready_at"]:
                    i["state"] = "running"
                elif i["state"] == "shutting-down" and now >= i["gone_at"]:
                    i["state"] = "terminated"
                    for vid in i["volumes"]:
                        v = reg.volumes.get(vid)
                        if v and v["delete_on_termination"]:
                            reg.volumes.pop(vid, None)
                        elif v:
                            v["state"] = "available"
                            v["attached"] = None
                    if i.get("host"):
                        h = reg.hosts.get(i["host"])
                        if h and i["id"] in h["instances"]:
                            h["instances"].remove(i["id"])
                elif i["state"] == "terminated" and now >= i["gone_at"] + b["terminated_linger"]:
                    del reg.instances[i["id"]]
                    reg.xml.pop(i["id"], None)
                    ct = i.get("client_token")
                    if ct and reg.tokens.get(ct) == i["id"]:
                        del reg.tokens[ct]
                    continue
                if i.get("interrupt_at") and now >= i["interrupt_at"] and \
                        i["state"] in ("pending", "running"):
                    i["state"] = "shutting-down"
                    i["gone_at"] = now + b["terminate_delay"]
                    i["state_reason"] = ("Server.SpotInstanceTermination",
                                         "Server.SpotInstanceTermination: Spot instance "
                                         "termination")
                    sr = reg.spot_requests.get(i.get("spot_request"))
                    if sr:
                        sr["state"] = "closed"
                        sr["status"] = "instance-terminated-by-price"
                st = i["state"]
                if st == "pending":
                    nxt = min(nxt, i["ready_at"])
                elif st == "shutting-down":
                    nxt = min(nxt, i["gone_at"])
                elif st == "terminated":
                    nxt = min(nxt, i["gone_at"] + b["terminated_linger"])
                if i.get("interrupt_at") and st in ("pending", "running"):
                    nxt = min(nxt, i["interrupt_at"])
            for t in reg.import_tasks.values():
                if t["status"] == "active" and now >= t["done_at"]:
                    t["status"] = "completed"
                    t["snapshot"]["state"] = "completed"
                elif t["status"] == "active":
                    nxt = min(nxt, t["done_at"])
        self.next_due = nxt

    def used_vcpus(self, code):
        n = 0
        for reg in self.regions.values():
            for i in reg.instances.values():
                # instances on a dedicated host use the host's quota
                if i["state"] in ("pending", "running") and not i.get("host") and \
                        quota_code(i["type"], i["market"] == "spot") == code:
                    n += VCPUS.get(i["type"], 2)
        return n


# ---------------------------------------------------------------- EC2

def flat_list(p, prefix):
    """Values of prefix.1, prefix.2... in order."""
    out = []
    n = 1
    while prefix + "." + str(n) in p:
        out.append(p[prefix + "." + str(n)])
        n += 1
    return out


def flat_structs(p, prefix):
    """[{sub-key: value}] of prefix.N.* (N from 1), sub-keys kept dotted."""
    groups = {}
    pl = len(prefix) + 1
    for k, v in p.items():
        if not k.startswith(prefix + "."):
            continue
        rest = k[pl:]
        n, _, sub = rest.partition(".")
        if not n.isdigit():
            continue
        groups.setdefault(int(n), {})[sub] = v
    return [groups[n] for n in sorted(groups)]


def tag_specs(p, prefix="TagSpecification"):
    """{resource type: {key: value}}"""
    out = {}
    for ts in flat_structs(p, prefix):
        tags = out.setdefault(ts.get("ResourceType", ""), {})
        for t in flat_structs(ts, "Tag"):
            tags[t.get("Key", "")] = t.get("Value", "")
    return out


class Values(list):
    """A filter's values; .plain: those without wildcards, as a set."""

    def __init__(self, vals):
        super().__init__(vals)
        self.plain = frozenset(v for v in vals if "*" not in v and "?" not in v)


def filters_of(p):
    out = []
    for f in flat_structs(p, "Filter"):
        out.append((f.get("Name", ""), Values(flat_list(f, "Value"))))
    return out


def glob_match(pat, v):
    if "*" not in pat and "?" not in pat:
        return pat == (v or "")  # the common case, without a regex
    return re.fullmatch(re.escape(pat).replace(r"\*", ".*").replace(r"\?", "."), v or "") \
        is not None


def match_filters(filters, attrs, tags):
    for name, values in filters:
        if name.startswith("tag:"):
            v = tags.get(name[4:])
            if v is None or not any(glob_match(x, v) for x in values):
                return False
        elif name == "tag-key":
            if not any(glob_match(x, k) for x in values for k in tags):
                return False
        elif name in attrs:
            v = attrs[name]
            vs = v if isinstance(v, list) else [v]
            # a set lookup for plain values (a describe of 50 instance ids
            # matched each instance against each id, a regex apiece)
            if any(str(y) in values.plain for y in vs):
                continue
            if not any(glob_match(x, str(y)) for x in values if "*" in x or "?" in x
                       for y in vs):
                return False
        else:
            raise ApiError(400, "InvalidParameterValue",
                           "The filter '%s' is invalid" % name)
    return True


def tagset(tags, indent="    "):
    if not tags:
        return "<tagSet/>"
    return "<tagSet>" + "".join(
        "<item><key>%s</key><value>%s</value></item>" % (escape(k), escape(v))
        for k, v in sorted(tags.items())) + "</tagSet>"


def volume_iops(v):
    """A volume's IOPS as DescribeVolumes gives them (API_Volume): as
    provisioned for io1/io2/gp3 (gp3 default 3000), the gp2 baseline of 3
    per GiB (100 to 16000); none for the HDD types."""
    if v.get("iops") is not None:
        return int(v["iops"])
    if v["type"] == "gp3":
        return 3000
    if v["type"] == "gp2":
        return min(16000, max(100, 3 * int(v["size"])))
    return None


def volume_throughput(v):
    """gp3 only: as provisioned, default 125 MiB/s."""
    if v["type"] != "gp3":
        return None
    return int(v["throughput"]) if v.get("throughput") is not None else 125


def x(tag, v):
    if v is None:
        return ""
    if isinstance(v, bool):
        v = "true" if v else "false"
    return "<%s>%s</%s>" % (tag, escape(str(v)), tag)


STATE_CODES = {"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48,
               "stopping": 64, "stopped": 80}


def instance_xml_of(reg, i):
    """instance_xml(i), kept while what changes after a launch (its state,
    state reason and tags) stays: a describe of 100 instances built 100
    items of ~4 KB each, ~6 ms, on every poll (issue 25)."""
    key = (i["state"], i.get("state_reason"), tuple(sorted(i["tags"].items())))
    got = reg.xml.get(i["id"])
    if got is None or got[0] != key:
        got = (key, instance_xml(i))
        reg.xml[i["id"]] = got
    return got[1]


def instance_xml(i):
    st = i["state"]
    bdm = "".join(
        "<item><deviceName>%s</deviceName><ebs><volumeId>%s</volumeId><status>attached</status>"
        "<attachTime>%s</attachTime><deleteOnTermination>true</deleteOnTermination></ebs></item>"
        % (escape(i["root"]), v, iso(i["launched"])) for v in i["volumes"]
        if st != "terminated")
    groups = "".join("<item><groupId>%s</groupId><groupName>%s</groupName></item>" % (g, g)
                     for g in i["groups"])
    ni = ""
    if st != "terminated":
        assoc = ("<association><publicIp>%s</publicIp><publicDnsName/><ipOwnerId>amazon"
                 "</ipOwnerId></association>" % i["public_ip"]) if i["public_ip"] else ""
        pdns = "ip-%s.ec2.internal" % i["private_ip"].replace(".", "-")
        ni = ("<networkInterfaceSet><item><networkInterfaceId>%s</networkInterfaceId>"
              "<subnetId>%s</subnetId><vpcId>vpc-0sim</vpcId><description/>"
              "<ownerId>%s</ownerId><status>in-use</status><macAddress>%s</macAddress>%s"
              "<privateDnsName>%s</privateDnsName><sourceDestCheck>true</sourceDestCheck>"
              "<groupSet>%s</groupSet><attachment><attachmentId>eni-attach-%s</attachmentId>"
              "<deviceIndex>0</deviceIndex><status>attached</status><attachTime>%s"
              "</attachTime><deleteOnTermination>true</deleteOnTermination>"
              "<networkCardIndex>0</networkCardIndex></attachment>%s"
              "<privateIpAddressesSet><item>%s<privateDnsName>%s</privateDnsName><primary>true"
              "</primary>%s</item></privateIpAddressesSet>"
              "<ipv6AddressesSet>%s</ipv6AddressesSet><interfaceType>interface"
              "</interfaceType></item></networkInterfaceSet>") % (
            i["eni"], i["subnet"], OWNER,
            "0e:%s" % ":".join(i["eni"][-10:][k:k + 2] for k in range(0, 10, 2)),
            x("privateIpAddress", i["private_ip"]), pdns,
            "".join("<item><groupId>%s</groupId><groupName>%s</groupName></item>" % (g, g)
                    for g in i["groups"]), i["eni"][4:21], iso(i["launched"]), assoc,
            x("privateIpAddress", i["private_ip"]), pdns, assoc,
            ("<item><ipv6Address>%s</ipv6Address></item>" % i["ipv6"]) if i.get("ipv6") else "")
    cores = ITYPES[i["type"]][1] if i["type"] in ITYPES else 1
    threads = (VCPUS[i["type"]] // cores) if i["type"] in ITYPES else 2
    # the members every DescribeInstances item carries on a Nitro/Xen HVM
    # Linux instance (API_Instance), with AWS's defaults
    extra = (
        "<hypervisor>xen</hypervisor><enaSupport>true</enaSupport>"
        "<sourceDestCheck>true</sourceDestCheck><clientToken>%s</clientToken>"
        "<cpuOptions><coreCount>%d</coreCount><threadsPerCore>%d</threadsPerCore></cpuOptions>"
        "<capacityReservationSpecification><capacityReservationPreference>open"
        "</capacityReservationPreference></capacityReservationSpecification>"
        "<hibernationOptions><configured>false</configured></hibernationOptions>"
        "<enclaveOptions><enabled>false</enabled></enclaveOptions>"
        "<platformDetails>Linux/UNIX</platformDetails><usageOperation>RunInstances"
        "</usageOperation><usageOperationUpdateTime>%s</usageOperationUpdateTime>"
        "<privateDnsNameOptions><hostnameType>ip-name</hostnameType>"
        "<enableResourceNameDnsARecord>false</enableResourceNameDnsARecord>"
        "<enableResourceNameDnsAAAARecord>false</enableResourceNameDnsAAAARecord>"
        "</privateDnsNameOptions><maintenanceOptions><autoRecovery>default</autoRecovery>"
        "</maintenanceOptions><currentInstanceBootMode>legacy-bios</currentInstanceBootMode>"
        % (i["id"][2:], cores, threads, iso(i["launched"])))
    reason = ""
    if i.get("state_reason"):
        reason = "<stateReason><code>%s</code><message>%s</message></stateReason>" % (
            escape(i["state_reason"][0]), escape(i["state_reason"][1]))
    return ("<item><instanceId>%s</instanceId><imageId>%s</imageId>"
            "<instanceState><code>%d</code><name>%s</name></instanceState>"
            "<privateDnsName>%s</privateDnsName><dnsName>%s</dnsName>%s%s"
            "<amiLaunchIndex>0</amiLaunchIndex><productCodes/>"
            "<instanceType>%s</instanceType><launchTime>%s</launchTime>"
            "<placement><availabilityZone>%s</availabilityZone><tenancy>%s</tenancy>%s</placement>"
            "<monitoring><state>disabled</state></monitoring>%s%s%s%s"
            "<groupSet>%s</groupSet>%s<architecture>x86_64</architecture>"
            "<rootDeviceType>ebs</rootDeviceType><rootDeviceName>%s</rootDeviceName>"
            "<blockDeviceMapping>%s</blockDeviceMapping>%s%s%s"
            "<virtualizationType>hvm</virtualizationType>%s%s%s"
            "<metadataOptions><state>applied</state><httpTokens>%s</httpTokens>"
            "<httpPutResponseHopLimit>%d</httpPutResponseHopLimit>"
            "<httpEndpoint>enabled</httpEndpoint><httpProtocolIpv6>disabled"
            "</httpProtocolIpv6><instanceMetadataTags>disabled</instanceMetadataTags>"
            "</metadataOptions>%s</item>") % (
        i["id"], i["image"], STATE_CODES[st], st,
        ("ip-%s.ec2.internal" % i["private_ip"].replace(".", "-")) if st != "terminated" else "",
        "", x("reason", i.get("reason", "")), x("keyName", i["key"]),
        i["type"], iso(i["launched"]), i["az"], i["tenancy"], x("hostId", i.get("host")),
        x("subnetId", i["subnet"] if st != "terminated" else None),
        x("vpcId", "vpc-0sim" if st != "terminated" else None),
        x("privateIpAddress", i["private_ip"] if st != "terminated" else None),
        x("ipAddress", i["public_ip"] if st != "terminated" else None),
        groups, reason, escape(i["root"]), bdm,
        x("instanceLifecycle", "spot" if i["market"] == "spot" else None),
        x("spotInstanceRequestId", i.get("spot_request")),
        ("<iamInstanceProfile><arn>%s</arn><id>AIPASIM</id></iamInstanceProfile>"
         % escape(i["iam"])) if i.get("iam") else "",
        tagset(i["tags"]),
        ("<networkInterfaceSet/>" if not ni else ni),
        x("ebsOptimized", i.get("ebs_optimized", False)),
        i["http_tokens"], 2 if i["http_tokens"] == "required" else 1, extra)


class Ec2:
    def __init__(self, sim, region, params):
        self.sim = sim
        self.reg = sim.regions[region]
        self.p = params

    def ok(self, action, inner):
        return ('<?xml version="1.0" encoding="UTF-8"?>\n<%sResponse xmlns="%s">'
                "<requestId>%s</requestId>%s</%sResponse>" % (
                    action, EC2_NS, uuid.uuid4(), inner, action))

    def page(self, items, max_key="MaxResults"):
        p = self.p
        start = 0
        if p.get("NextToken"):
            try:
                start = int(base64.b64decode(p["NextToken"]).decode().split(":")[1])
            except Exception:
                raise ApiError(400, "InvalidParameterValue", "Invalid NextToken")
        size = self.sim.behavior["page_size"]
        if p.get(max_key):
            m = int(p[max_key])
            if m < 5 or m > 1000:
                raise ApiError(400, "InvalidParameterValue",
                               "Value ( %d ) for parameter maxResults is invalid. Expecting a "
                               "value between 5 and 1000." % m)
            size = min(size, m)
        chunk = items[start:start + size]
        tok = None
        if start + size < len(items):
            tok = base64.b64encode(("page:%d" % (start + size)).encode()).decode()
        elif self.sim.behavior["endless_pages"]:
            tok = base64.b64encode(b"page:0").decode()
        return chunk, x("nextToken", tok)

    # ---- instances

    def launch(self, itype, market, tags_by_type, lt=None, subnet=None, az=None):
        """Create one instance from self.p (RunInstances) or a template."""
        p = dict(lt or {})
        p.update(self.p if lt is None else {})
        reg = self.reg
        sim = self.sim
        image = p.get("ImageId")
        if not image or image not in reg.images or reg.images[image]["state"] != "available":
            raise ApiError(400, "InvalidAMIID.NotFound" if image else "MissingParameter",
                           "The image id '[%s]' does not exist" % image)
        spot = market == "spot"
        code = None if p.get("Placement.HostId") else quota_code(itype, spot)
        if code and sim.used_vcpus(code) + VCPUS.get(itype, 2) > sim.quotas.get(code, 0):
            if spot:
                raise ApiError(400, "MaxSpotInstanceCountExceeded",
                               "Max spot instance count exceeded")
            raise ApiError(400, "VcpuLimitExceeded",
                           "You have requested more vCPU capacity than your current vCPU limit "
                           "of %d allows for the instance bucket that the specified instance "
                           "type belongs to. Please visit http://aws.amazon.com/contact-us/ec2-"
                           "request to request an adjustment to this limit." %
                           sim.quotas.get(code, 0))
        host = p.get("Placement.HostId")
        if host and host not in reg.hosts:
            raise ApiError(400, "InvalidHostID.NotFound", "Host %s not found" % host)
        iid = new_id("i")
        reg.ip_seq += 1
        n = reg.ip_seq
        b = sim.behavior
        private_ip = b["interface_ip"] or "%s.%d.%d" % (b["ip_base"], n // 250, n % 250 + 2)
        public = p.get("NetworkInterface.1.AssociatePublicIpAddress")
        public_ip = None
        if public != "false":
            public_ip = b["interface_ip"] or "%s.%d.%d" % (b["public_ip_base"], n // 250,
                                                            n % 250 + 2)
        vols = []
        size = 8
        vtype = "gp2"
        iops = throughput = None
        for bd in flat_structs(p, "BlockDeviceMapping"):
            size = int(bd.get("Ebs.VolumeSize", size))
            vtype = bd.get("Ebs.VolumeType", vtype)
            iops = bd.get("Ebs.Iops", iops)
            throughput = bd.get("Ebs.Throughput", throughput)
        now = time.time()
        vid = new_id("vol")
        reg.volumes[vid] = {"id": vid, "size": size, "type": vtype, "iops": iops,
                            "throughput": throughput, "state": "in-use", "attached": iid,
                            "az": az or reg.azs[0], "created": now,
                            "tags": dict(tags_by_type.get("volume", {})),
                            "delete_on_termination": True}
        vols.append(vid)
        groups = flat_list(p, "SecurityGroupId") or flat_list(
            p, "NetworkInterface.1.SecurityGroupId") or ["sg-default"]
        inst = {
            "id": iid, "image": image, "type": itype, "state": "pending", "market": market,
            "ready_at": now + b["boot_delay"], "launched": now, "gone_at": None,
            "private_ip": private_ip, "public_ip": public_ip, "eni": new_id("eni"),
            "subnet": subnet or p.get("SubnetId") or p.get("NetworkInterface.1.SubnetId") or
            reg.subnets[0],
            "az": az or p.get("Placement.AvailabilityZone") or reg.azs[0],
            "tenancy": "host" if host else "default", "host": host,
            "key": p.get("KeyName"), "groups": groups, "root": "/dev/xvda", "volumes": vols,
            "tags": dict(tags_by_type.get("instance", {})),
            "userdata": p.get("UserData"),
            "iam": p.get("IamInstanceProfile.Arn") or (
                "arn:aws:iam::%s:instance-profile/%s" % (OWNER, p["IamInstanceProfile.Name"])
                if p.get("IamInstanceProfile.Name") else None),
            "http_tokens": p.get("MetadataOptions.HttpTokens", "optional"),
            "ebs_optimized": p.get("EbsOptimized") == "true",
            "block_devices": {"size": size, "type": vtype, "iops": iops,
                              "throughput": throughput},
        }
        if spot:
            sr = "sir-" + uuid.uuid4().hex[:8]
            inst["spot_request"] = sr
            reg.spot_requests[sr] = {"id": sr, "instance": iid, "state": "active",
                                     "status": "fulfilled", "type": itype, "created": now}
        if host:
            reg.hosts[host]["instances"].append(iid)
        reg.instances[iid] = inst
        sim.due(inst["ready_at"])
        return inst

    def RunInstances(self):
        p = self.p
        if not p.get("InstanceType"):
            raise ApiError(400, "MissingParameter", "The request must contain the parameter "
                           "InstanceType")
        if int(p.get("MinCount", 0)) < 1 or int(p.get("MaxCount", 0)) < 1:
            raise ApiError(400, "InvalidParameterValue", "MinCount and MaxCount must be >= 1")
        if p.get("ClientToken"):
            i = self.reg.instances.get(self.reg.tokens.get(p["ClientToken"]))
            if i is not None:
                return self.ok("RunInstances", self.reservation_xml([i]))
        market = "spot" if p.get("InstanceMarketOptions.MarketType") == "spot" else "on-demand"
        insts = [self.launch(p["InstanceType"], market, tag_specs(p))
                 for _ in range(int(p.get("MaxCount", 1)))]
        for i in insts:
            i["client_token"] = p.get("ClientToken")
        if p.get("ClientToken"):
            self.reg.tokens[p["ClientToken"]] = insts[0]["id"]
        return self.ok("RunInstances", self.reservation_xml(insts))

    def reservation_xml(self, insts):
        return ("<reservationId>r-%s</reservationId><ownerId>%s</ownerId><groupSet/>"
                "<instancesSet>%s</instancesSet>" % (
                    uuid.uuid4().hex[:17], OWNER,
                    "".join(instance_xml_of(self.reg, i) for i in insts)))

    def DescribeInstances(self):
        p = self.p
        ids = flat_list(p, "InstanceId")
        filters = filters_of(p)
        if ids and (p.get("MaxResults") or p.get("NextToken")):
            raise ApiError(400, "InvalidParameterCombination",
                           "The parameter instancesSet cannot be used with the parameter "
                           "maxResults")
        for iid in ids:
            if iid not in self.reg.instances:
                raise ApiError(400, "InvalidInstanceID.NotFound",
                               "The instance ID '%s' does not exist" % iid)
        out = []
        cand = self.reg.instances.values()
        byid = [v for n, v in filters if n == "instance-id"]
        if byid and all(len(v.plain) == len(v) for v in byid):
            # instance ids without wildcards (the launcher's poll): only
            # those instances, not every one a match apiece
            want = frozenset.intersection(*(v.plain for v in byid))
            cand = [self.reg.instances[k] for k in want if k in self.reg.instances]
        for i in sorted(cand, key=lambda i: i["launched"]):
            if ids and i["id"] not in ids:
                continue
            attrs = {"instance-state-name": i["state"], "instance-id": i["id"],
                     "instance-type": i["type"], "image-id": i["image"],
                     "availability-zone": i["az"], "instance-lifecycle": i["market"]
                     if i["market"] == "spot" else "", "subnet-id": i["subnet"],
                     "private-ip-address": i["private_ip"], "key-name": i["key"] or "",
                     "spot-instance-request-id": i.get("spot_request") or ""}
            if match_filters(filters, attrs, i["tags"]):
                out.append(i)
        chunk, tok = self.page(out)
        res = "".join(
            "<item><reservationId>r-%s</reservationId><ownerId>%s</ownerId><groupSet/>"
            "<instancesSet>%s</instancesSet></item>" % (i["id"][2:], OWNER,
                                                          instance_xml_of(self.reg, i))
            for i in chunk)
        return self.ok("DescribeInstances", "<reservationSet>%s</reservationSet>%s" % (res, tok))

    def TerminateInstances(self):
        ids = flat_list(self.p, "InstanceId")
        if not ids:
            raise ApiError(400, "MissingParameter", "The request must contain the parameter "
                           "InstanceId")
        for iid in ids:
            if iid not in self.reg.instances:
                raise ApiError(400, "InvalidInstanceID.NotFound",
                               "The instance ID '%s' does not exist" % iid)
        items = []
        now = time.time()
        for iid in ids:
            i = self.reg.instances[iid]
            prev = i["state"]
            if prev not in ("shutting-down", "terminated"):
                i["state"] = "shutting-down"
                i["gone_at"] = now + self.sim.behavior["terminate_delay"]
                self.sim.due(i["gone_at"])
                i.setdefault("state_reason", ("Client.UserInitiatedShutdown",
                                              "Client.UserInitiatedShutdown: User initiated "
                                              "shutdown"))
            items.append("<item><instanceId>%s</instanceId><currentState><code>%d</code>"
                         "<name>%s</name></currentState><previousState><code>%d</code>"
                         "<name>%s</name></previousState></item>" % (
                             iid, STATE_CODES[i["state"]], i["state"], STATE_CODES[prev], prev))
        return self.ok("TerminateInstances", "<instancesSet>%s</instancesSet>" % "".join(items))

    def find_resource(self, rid):
        reg = self.reg
        for coll in (reg.instances, reg.volumes, reg.images, reg.snapshots, reg.hosts,
                     reg.fleets):
            if rid in coll:
                return coll[rid]
        for t in reg.templates.values():
            if t["id"] == rid:
                return t
        return None

    def CreateTags(self):
        ids = flat_list(self.p, "ResourceId")
        tags = {t.get("Key", ""): t.get("Value", "") for t in flat_structs(self.p, "Tag")}
        objs = []
        for rid in ids:
            o = self.find_resource(rid)
            if o is None:
                kind = {"i": "InvalidInstanceID", "vol": "InvalidVolume", "ami": "InvalidAMIID",
                        "snap": "InvalidSnapshot"}.get(rid.split("-")[0], "InvalidID")
                raise ApiError(400, kind + ".NotFound",
                               "The ID '%s' does not exist" % rid)
            objs.append(o)
        for o in objs:
            o["tags"].update(tags)
        return self.ok("CreateTags", "<return>true</return>")

    # ---- images, snapshots, volumes

    def image_xml(self, i):
        """One Image (API_Image) with the members AWS returns for an EBS
        backed HVM Linux AMI: PlatformDetails/UsageOperation of Linux/UNIX,
        ENA and SR-IOV support, boot mode, IMDS support when registered
        with it, and a root block device mapping (an AMI of another owner
        names a snapshot the caller cannot see, as public AMIs do)."""
        snaps = i["snapshots"] or ([None] if i["owner"] == OWNER else
                                   ["snap-" + i["id"].split("-", 1)[1][:17]])
        bdm = ""
        for sid in snaps:
            size = self.reg.snapshots[sid]["size"] if sid in self.reg.snapshots else 8
            bdm += ("<item><deviceName>%s</deviceName><ebs>%s<volumeSize>%d</volumeSize>"
                    "<deleteOnTermination>true</deleteOnTermination><volumeType>gp2"
                    "</volumeType><encrypted>false</encrypted></ebs></item>" % (
                        i["root"], x("snapshotId", sid), size))
        return (
            "<item><imageId>%s</imageId><imageLocation>%s/%s</imageLocation>"
            "<imageState>%s</imageState><imageOwnerId>%s</imageOwnerId>"
            "<creationDate>%s</creationDate><isPublic>%s</isPublic>"
            "<architecture>%s</architecture><imageType>machine</imageType>"
            "<platformDetails>Linux/UNIX</platformDetails>"
            "<usageOperation>RunInstances</usageOperation><productCodes/>"
            "<name>%s</name><description>%s</description><rootDeviceType>ebs</rootDeviceType>"
            "<rootDeviceName>%s</rootDeviceName><blockDeviceMapping>%s</blockDeviceMapping>"
            "<virtualizationType>hvm</virtualizationType>%s<hypervisor>xen</hypervisor>"
            "<enaSupport>%s</enaSupport><sriovNetSupport>simple</sriovNetSupport>"
            "<bootMode>%s</bootMode>%s%s"
            "</item>" % (
                i["id"], i["owner"], escape(i["name"]), i["state"], i["owner"],
                iso(i["created"]), "true" if i["public"] else "false", i["architecture"],
                escape(i["name"]), escape(i["description"]), i["root"], bdm,
                tagset(i["tags"]), "false" if i.get("ena") == "false" else "true",
                "uefi" if i["architecture"] == "arm64" else "uefi-preferred",
                x("imdsSupport", i.get("imds")),
                x("deprecationTime", iso(i["created"] + 2 * 365 * 86400)
                  if i["public"] else None)))

    def DescribeImages(self):
        p = self.p
        ids = flat_list(p, "ImageId")
        owners = flat_list(p, "Owner")
        filters = filters_of(p)
        out = []
        for img in self.reg.images.values():
            if ids and img["id"] not in ids:
                continue
            if owners and not ({img["owner"], "self" if img["owner"] == OWNER else None} &
                               set(owners)):
                continue
            attrs = {"name": img["name"], "image-id": img["id"], "state": img["state"],
                     "architecture": img["architecture"], "owner-id": img["owner"],
                     "is-public": "true" if img["public"] else "false"}
            if match_filters(filters, attrs, img["tags"]):
                out.append(img)
        for iid in ids:
            if iid not in self.reg.images:
                raise ApiError(400, "InvalidAMIID.NotFound",
                               "The image id '[%s]' does not exist" % iid)
        chunk, tok = self.page(out)
        items = "".join(self.image_xml(i) for i in chunk)
        return self.ok("DescribeImages", "<imagesSet>%s</imagesSet>%s" % (items, tok))

    def RegisterImage(self):
        p = self.p
        name = p.get("Name")
        if not name:
            raise ApiError(400, "MissingParameter", "The request must contain the parameter "
                           "name")
        for img in self.reg.images.values():
            if img["name"] == name and img["owner"] == OWNER and img["state"] != "deregistered":
                raise ApiError(400, "InvalidAMIName.Duplicate",
                               "AMI name %s is already in use by AMI %s" % (name, img["id"]))
        snaps = []
        for bd in flat_structs(p, "BlockDeviceMapping"):
            sid = bd.get("Ebs.SnapshotId")
            if sid:
                if sid not in self.reg.snapshots:
                    raise ApiError(400, "InvalidSnapshot.NotFound",
                                   "The snapshot '%s' does not exist." % sid)
                snaps.append(sid)
        img = self.reg.add_image({"name": name, "architecture": p.get("Architecture",
                                                                     "x86_64"),
                                  "tags": tag_specs(p).get("image", {}),
                                  "description": p.get("Description", "")})
        img["snapshots"] = snaps
        img["root"] = p.get("RootDeviceName", "/dev/xvda")
        img["ena"] = p.get("EnaSupport")
        img["imds"] = p.get("ImdsSupport")
        return self.ok("RegisterImage", x("imageId", img["id"]))

    def DeregisterImage(self):
        iid = self.p.get("ImageId")
        if iid not in self.reg.images:
            raise ApiError(400, "InvalidAMIID.NotFound",
                           "The image id '[%s]' does not exist" % iid)
        del self.reg.images[iid]
        return self.ok("DeregisterImage", "<return>true</return>")

    def DescribeSnapshots(self):
        p = self.p
        ids = flat_list(p, "SnapshotId")
        owners = flat_list(p, "Owner")
        filters = filters_of(p)
        out = []
        for s in self.reg.snapshots.values():
            if ids and s["id"] not in ids:
                continue
            if owners and not (set(owners) & {"self", OWNER}):
                continue
            attrs = {"snapshot-id": s["id"], "status": s["state"], "volume-size": s["size"],
                     "owner-id": OWNER}
            if match_filters(filters, attrs, s["tags"]):
                out.append(s)
        chunk, tok = self.page(out)
        items = "".join(
            "<item><snapshotId>%s</snapshotId><volumeId>vol-ffffffff</volumeId>"
            "<status>%s</status><startTime>%s</startTime><progress>%s</progress>"
            "<ownerId>%s</ownerId><volumeSize>%d</volumeSize><description>%s</description>"
            "<encrypted>false</encrypted><storageTier>standard</storageTier>%s</item>" % (
                s["id"], s["state"], iso(s["created"]),
                "100%" if s["state"] == "completed" else "0%", OWNER, s["size"],
                escape(s.get("description", "")), tagset(s["tags"])) for s in chunk)
        return self.ok("DescribeSnapshots", "<snapshotSet>%s</snapshotSet>%s" % (items, tok))

    def DeleteSnapshot(self):
        sid = self.p.get("SnapshotId")
        if sid not in self.reg.snapshots:
            raise ApiError(400, "InvalidSnapshot.NotFound",
                           "The snapshot '%s' does not exist." % sid)
        for img in self.reg.images.values():
            if sid in img["snapshots"]:
                raise ApiError(400, "InvalidSnapshot.InUse",
                               "The snapshot %s is currently in use by %s" % (sid, img["id"]))
        del self.reg.snapshots[sid]
        return self.ok("DeleteSnapshot", "<return>true</return>")

    def DescribeVolumes(self):
        p = self.p
        ids = flat_list(p, "VolumeId")
        filters = filters_of(p)
        out = []
        for v in self.reg.volumes.values():
            if ids and v["id"] not in ids:
                continue
            attrs = {"volume-id": v["id"], "status": v["state"], "size": v["size"],
                     "volume-type": v["type"], "availability-zone": v["az"],
                     "attachment.instance-id": v["attached"] or ""}
            if match_filters(filters, attrs, v["tags"]):
                out.append(v)
        chunk, tok = self.page(out)
        items = "".join(
            "<item><volumeId>%s</volumeId><size>%d</size><snapshotId/>"
            "<availabilityZone>%s</availabilityZone><status>%s</status>"
            "<createTime>%s</createTime><attachmentSet>%s</attachmentSet>"
            "<volumeType>%s</volumeType>%s%s<encrypted>false</encrypted>"
            "<multiAttachEnabled>false</multiAttachEnabled><fastRestored>false"
            "</fastRestored>%s</item>" % (
                v["id"], v["size"], v["az"], v["state"], iso(v["created"]),
                ("<item><volumeId>%s</volumeId><instanceId>%s</instanceId><device>/dev/xvda"
                 "</device><status>attached</status><attachTime>%s</attachTime>"
                 "<deleteOnTermination>true</deleteOnTermination></item>" % (
                     v["id"], v["attached"], iso(v["created"]))) if v["attached"] else "",
                v["type"], x("iops", volume_iops(v)), x("throughput", volume_throughput(v)),
                tagset(v["tags"])) for v in chunk)
        return self.ok("DescribeVolumes", "<volumeSet>%s</volumeSet>%s" % (items, tok))

    def DeleteVolume(self):
        vid = self.p.get("VolumeId")
        v = self.reg.volumes.get(vid)
        if v is None:
            raise ApiError(400, "InvalidVolume.NotFound",
                           "The volume '%s' does not exist." % vid)
        if v["state"] == "in-use":
            raise ApiError(400, "VolumeInUse", "Volume %s is currently attached to %s" % (
                vid, v["attached"]))
        del self.reg.volumes[vid]
        return self.ok("DeleteVolume", "<return>true</return>")

    def ImportSnapshot(self):
        p = self.p
        bucket = p.get("DiskContainer.UserBucket.S3Bucket")
        key = p.get("DiskContainer.UserBucket.S3Key")
        obj = self.sim.buckets.get(bucket, {}).get(key)
        if obj is None:
            raise ApiError(400, "InvalidParameter",
                           "The given S3 object is not local to the region or does not exist")
        tid = "import-snap-" + uuid.uuid4().hex[:17]
        sid = new_id("snap")
        tags = tag_specs(p).get("import-snapshot-task", {})
        snap = {"id": sid, "state": "pending", "size": max(1, (len(obj["data"]) + 2**30 - 1)
                                                          // 2**30),
                "created": time.time(), "tags": {}, "description": "Created by AWS-VMImport"}
        self.reg.snapshots[sid] = snap
        self.reg.import_tasks[tid] = {
            "id": tid, "status": "active", "snapshot": snap, "tags": tags,
            "done_at": time.time() + self.sim.behavior["import_delay"],
            "format": p.get("DiskContainer.Format", "RAW").upper(), "bucket": bucket, "key": key,
            "description": p.get("Description", "")}
        self.sim.due(self.reg.import_tasks[tid]["done_at"])
        return self.ok("ImportSnapshot", "%s<snapshotTaskDetail><status>active</status>"
                       "<diskImageSize>0.0</diskImageSize><format>%s</format>"
                       "<userBucket><s3Bucket>%s</s3Bucket><s3Key>%s</s3Key></userBucket>"
                       "</snapshotTaskDetail>%s" % (
                           x("importTaskId", tid), p.get("DiskContainer.Format", "RAW").upper(),
                           escape(bucket), escape(key), tagset(tags)))

    def DescribeImportSnapshotTasks(self):
        ids = flat_list(self.p, "ImportTaskId")
        out = [t for t in self.reg.import_tasks.values() if not ids or t["id"] in ids]
        filters = filters_of(self.p)
        out = [t for t in out if match_filters(filters, {}, t["tags"])]
        chunk, tok = self.page(out)
        items = "".join(
            "<item><importTaskId>%s</importTaskId><snapshotTaskDetail>"
            "<diskImageSize>%d</diskImageSize><format>%s</format><status>%s</status>%s%s"
            "<userBucket><s3Bucket>%s</s3Bucket><s3Key>%s</s3Key></userBucket>"
            "</snapshotTaskDetail>%s</item>" % (
                t["id"], 1 << 20, t["format"], t["status"],
                x("snapshotId", t["snapshot"]["id"] if t["status"] == "completed" else None),
                x("progress", None if t["status"] == "completed" else "50"),
                escape(t["bucket"]), escape(t["key"]), tagset(t["tags"])) for t in chunk)
        return self.ok("DescribeImportSnapshotTasks",
                       "<importSnapshotTaskSet>%s</importSnapshotTaskSet>%s" % (items, tok))

    # ---- launch templates and fleets

    def CreateLaunchTemplate(self):
        p = self.p
        name = p.get("LaunchTemplateName")
        if not name:
            raise ApiError(400, "MissingParameter", "LaunchTemplateName is required")
        if name in self.reg.templates:
            raise ApiError(400, "InvalidLaunchTemplateName.AlreadyExistsException",
                           "Launch template name already in use.")
        data = {k[len("LaunchTemplateData."):]: v for k, v in p.items()
                if k.startswith("LaunchTemplateData.")}
        t = {"id": new_id("lt"), "name": name, "data": data, "created": time.time(),
             "tags": tag_specs(p).get("launch-template", {}), "version": 1}
        self.reg.templates[name] = t
        return self.ok("CreateLaunchTemplate", "<launchTemplate>%s</launchTemplate>" % (
            self.template_xml(t)))

    def template_xml(self, t):
        return ("%s%s<createTime>%s</createTime><createdBy>arn:aws:iam::%s:user/sim</createdBy>"
                "<defaultVersionNumber>1</defaultVersionNumber><latestVersionNumber>1"
                "</latestVersionNumber>%s") % (
                    x("launchTemplateId", t["id"]), x("launchTemplateName", t["name"]),
                    iso(t["created"]), OWNER, tagset(t["tags"]))

    def DescribeLaunchTemplates(self):
        names = flat_list(self.p, "LaunchTemplateName")
        ids = flat_list(self.p, "LaunchTemplateId")
        filters = filters_of(self.p)
        out = []
        for t in self.reg.templates.values():
            if names and t["name"] not in names:
                continue
            if ids and t["id"] not in ids:
                continue
            if match_filters(filters, {"launch-template-name": t["name"]}, t["tags"]):
                out.append(t)
        for n in names:
            if n not in self.reg.templates:
                raise ApiError(400, "InvalidLaunchTemplateName.NotFoundException",
                               "At least one of the launch templates specified in the request "
                               "does not exist.")
        chunk, tok = self.page(out)
        return self.ok("DescribeLaunchTemplates",
                       "<launchTemplates>%s</launchTemplates>%s" % (
                           "".join("<item>%s</item>" % self.template_xml(t) for t in chunk),
                           tok))

    def DeleteLaunchTemplate(self):
        name = self.p.get("LaunchTemplateName")
        t = self.reg.templates.pop(name, None)
        if t is None:
            raise ApiError(400, "InvalidLaunchTemplateName.NotFoundException",
                           "The specified launch template does not exist.")
        return self.ok("DeleteLaunchTemplate", "<launchTemplate>%s</launchTemplate>" %
                       self.template_xml(t))

    def CreateFleet(self):
        p = self.p
        if p.get("Type", "maintain") != "instant":
            raise ApiError(400, "InvalidParameterValue", "the simulator serves Type=instant "
                           "fleets only")
        cap = int(p.get("TargetCapacitySpecification.TotalTargetCapacity", 0))
        market = p.get("TargetCapacitySpecification.DefaultTargetCapacityType", "on-demand")
        tags = tag_specs(p)
        launched, errors = [], []
        for cfgs in flat_structs(p, "LaunchTemplateConfigs"):
            name = cfgs.get("LaunchTemplateSpecification.LaunchTemplateName")
            tid = cfgs.get("LaunchTemplateSpecification.LaunchTemplateId")
            t = self.reg.templates.get(name) if name else next(
                (t for t in self.reg.templates.values() if t["id"] == tid), None)
            if t is None:
                raise ApiError(400, "InvalidLaunchTemplateName.NotFoundException",
                               "The specified launch template, with template name %s, does "
                               "not exist." % name)
            overrides = flat_structs(cfgs, "Overrides")
            if not overrides:
                overrides = [{"InstanceType": t["data"].get("InstanceType")}]
            if market == "spot":
                strategy = p.get("SpotOptions.AllocationStrategy", "lowest-price")
            else:
                strategy = p.get("OnDemandOptions.AllocationStrategy", "lowest-price")
            if strategy == "prioritized":
                overrides.sort(key=lambda o: float(o.get("Priority", 0)))
            for ov in overrides:
                if len(launched) >= cap:
                    break
                itype = ov.get("InstanceType")
                f = self.sim.fault_for("ec2", "CreateFleet", self.reg.name, [itype], market)
                if f:
                    errors.append((itype, f.spec["code"], f.spec.get("message") or
                                   "There is no %s capacity available" % market))
                    continue
                try:
                    launched.append(self.launch(itype, market, tags, lt=t["data"],
                                                subnet=ov.get("SubnetId"),
                                                az=ov.get("AvailabilityZone")))
                except ApiError as e:
                    errors.append((itype, e.code, e.message))
        fid = "fleet-" + str(uuid.uuid4())
        self.reg.fleets[fid] = {"id": fid, "tags": tags.get("fleet", {}),
                                "instances": [i["id"] for i in launched]}
        errs = "".join(
            "<item><launchTemplateAndOverrides><overrides><instanceType>%s</instanceType>"
            "</overrides></launchTemplateAndOverrides><lifecycle>%s</lifecycle>"
            "<errorCode>%s</errorCode><errorMessage>%s</errorMessage></item>" % (
                escape(it or ""), market, escape(c), escape(m)) for it, c, m in errors)
        insts = "".join(
            "<item><launchTemplateAndOverrides><overrides><instanceType>%s</instanceType>"
            "</overrides></launchTemplateAndOverrides><lifecycle>%s</lifecycle>"
            "<instanceIds><item>%s</item></instanceIds><instanceType>%s</instanceType>"
            "</item>" % (i["type"], market, i["id"], i["type"]) for i in launched)
        return self.ok("CreateFleet", "%s<errorSet>%s</errorSet><fleetInstanceSet>%s"
                       "</fleetInstanceSet>" % (x("fleetId", fid), errs, insts))

    def DescribeSpotInstanceRequests(self):
        ids = flat_list(self.p, "SpotInstanceRequestId")
        filters = filters_of(self.p)
        out = []
        for s in self.reg.spot_requests.values():
            if ids and s["id"] not in ids:
                continue
            if match_filters(filters, {"state": s["state"], "status-code": s["status"],
                                       "instance-id": s["instance"]}, {}):
                out.append(s)
        chunk, tok = self.page(out)
        items = "".join(
            "<item><spotInstanceRequestId>%s</spotInstanceRequestId><state>%s</state>"
            "<status><code>%s</code><updateTime>%s</updateTime><message>%s</message></status>"
            "<instanceId>%s</instanceId><type>one-time</type>"
            "<launchSpecification><instanceType>%s</instanceType></launchSpecification>"
            "<createTime>%s</createTime><productDescription>Linux/UNIX</productDescription>"
            "</item>" % (s["id"], s["state"], s["status"], iso(time.time()),
                         escape(s["status"]), s["instance"], s["type"], iso(s["created"]))
            for s in chunk)
        return self.ok("DescribeSpotInstanceRequests",
                       "<spotInstanceRequestSet>%s</spotInstanceRequestSet>%s" % (items, tok))

    # ---- dedicated hosts

    def AllocateHosts(self):
        p = self.p
        n = int(p.get("Quantity", 1))
        ids = []
        itype = p.get("InstanceType")
        if not itype:
            raise ApiError(400, "MissingParameter", "The request must contain the parameter "
                           "InstanceType or InstanceFamily")
        if p.get("AvailabilityZone") and p["AvailabilityZone"] not in self.reg.azs:
            raise ApiError(400, "InvalidParameterValue", "Invalid availability zone: [%s]" %
                           p["AvailabilityZone"])
        family = itype.split(".")[0]
        code = HOST_QUOTAS.get(family)
        if code and code in self.sim.quotas_set:
            used = sum(1 for r in self.sim.regions.values() for h in r.hosts.values()
                       if (h["type"] or "").split(".")[0] == family)
            if used + n > self.sim.quotas[code]:
                raise ApiError(400, "HostLimitExceeded", "You have requested more dedicated "
                               "hosts of family %s than your current limit of %d allows" % (
                                   family, self.sim.quotas[code]))
        for _ in range(n):
            hid = new_id("h")
            self.reg.hosts[hid] = {"id": hid, "type": p.get("InstanceType"),
                                   "az": p.get("AvailabilityZone") or self.reg.azs[0],
                                   "state": "available", "instances": [], "created": time.time(),
                                   "tags": tag_specs(p).get("dedicated-host", {})}
            ids.append(hid)
        return self.ok("AllocateHosts", "<hostIdSet>%s</hostIdSet>" % "".join(
            "<item>%s</item>" % h for h in ids))

    def ReleaseHosts(self):
        ok, bad = [], []
        for hid in flat_list(self.p, "HostId"):
            h = self.reg.hosts.get(hid)
            if h is None:
                bad.append((hid, "Client.InvalidHostID.NotFound", "The specified host ID "
                            "was not found"))
            elif h["instances"]:
                bad.append((hid, "Client.InvalidHost.InUse", "Host has instances"))
            else:
                del self.reg.hosts[hid]
                ok.append(hid)
        return self.ok("ReleaseHosts", "<successful>%s</successful><unsuccessful>%s"
                       "</unsuccessful>" % (
                           "".join("<item>%s</item>" % h for h in ok),
                           "".join("<item><resourceId>%s</resourceId><error><code>%s</code>"
                                   "<message>%s</message></error></item>" % b for b in bad)))

    def host_xml(self, h):
        """One Host (API_Host) with AWS's members: a Nitro host of the
        type's family, its sockets, cores and vCPUs (a c5/m5/r5 host: 2
        sockets, 48 cores, 96 vCPUs; others scaled from the type), the
        instance capacity left, auto-placement and host recovery off."""
        itype = h["type"] or ""
        per = VCPUS.get(itype, 2)
        total = 96
        cap = total // per
        used = len(h["instances"])
        return (
            "<item><hostId>%s</hostId><autoPlacement>off</autoPlacement>"
            "<availabilityZone>%s</availabilityZone><availabilityZoneId>use1-az%d"
            "</availabilityZoneId><availableCapacity><availableInstanceCapacity><item>"
            "<availableCapacity>%d</availableCapacity><instanceType>%s</instanceType>"
            "<totalCapacity>%d</totalCapacity></item></availableInstanceCapacity>"
            "<availableVCpus>%d</availableVCpus></availableCapacity>"
            "<hostProperties><cores>48</cores><instanceType>%s</instanceType><sockets>2"
            "</sockets><totalVCpus>%d</totalVCpus></hostProperties>"
            "<instances>%s</instances><state>%s</state><allocationTime>%s</allocationTime>"
            "<hostRecovery>off</hostRecovery><allowsMultipleInstanceTypes>off"
            "</allowsMultipleInstanceTypes><ownerId>%s</ownerId>"
            "<memberOfServiceLinkedResourceGroup>false</memberOfServiceLinkedResourceGroup>"
            "<hostMaintenance>off</hostMaintenance>%s</item>" % (
                h["id"], h["az"], self.reg.azs.index(h["az"]) + 1
                if h["az"] in self.reg.azs else 1, cap - used, escape(itype), cap,
                total - used * per, escape(itype), total,
                "".join("<item><instanceId>%s</instanceId><instanceType>%s</instanceType>"
                        "<ownerId>%s</ownerId></item>" % (i, escape(itype), OWNER)
                        for i in h["instances"]),
                h["state"], iso(h.get("created", time.time())), OWNER, tagset(h["tags"])))

    def DescribeHosts(self):
        ids = flat_list(self.p, "HostId")
        filters = filters_of(self.p)
        out = [h for h in self.reg.hosts.values() if (not ids or h["id"] in ids) and
               match_filters(filters, {"state": h["state"]}, h["tags"])]
        chunk, tok = self.page(out)
        items = "".join(self.host_xml(h) for h in chunk)
        return self.ok("DescribeHosts", "<hostSet>%s</hostSet>%s" % (items, tok))

    def DescribeInstanceTypes(self):
        types = flat_list(self.p, "InstanceType") or sorted(VCPUS)
        for t in types:
            if t not in VCPUS:
                raise ApiError(400, "InvalidInstanceType",
                               "The following supplied instance types do not exist: [%s]" % t)
        chunk, tok = self.page(types)
        return self.ok("DescribeInstanceTypes", "<instanceTypeSet>%s</instanceTypeSet>%s" % (
            "".join("<item>%s</item>" % ec2_xml(instance_type_info(t)) for t in chunk), tok))

    def DescribeAvailabilityZones(self):
        return self.ok("DescribeAvailabilityZones", "<availabilityZoneInfo>%s"
                       "</availabilityZoneInfo>" % "".join(
                           "<item><zoneName>%s</zoneName><zoneState>available</zoneState>"
                           "<regionName>%s</regionName></item>" % (z, self.reg.name)
                           for z in self.reg.azs))


EC2_ACTIONS = {n for n in dir(Ec2) if n[0].isupper()}
MUTATING = {"RunInstances", "TerminateInstances", "CreateTags", "CreateFleet",
            "CreateLaunchTemplate", "DeleteLaunchTemplate", "DeleteVolume", "ImportSnapshot",
            "RegisterImage", "DeregisterImage", "DeleteSnapshot", "AllocateHosts",
            "ReleaseHosts"}


def ec2_error(e):
    body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>%s</Code>'
            "<Message>%s</Message></Error></Errors><RequestID>%s</RequestID></Response>" % (
                escape(e.code), escape(e.message), uuid.uuid4()))
    return e.status, "text/xml;charset=UTF-8", body.encode(), {}


# Error codes and the HTTP status EC2 answers them with.
EC2_FAULT_STATUS = {"RequestLimitExceeded": 503, "InsufficientInstanceCapacity": 500,
                    "InternalError": 500, "Unavailable": 503, "ServiceUnavailable": 503}


def handle_ec2(sim, region, body):
    p = dict(urllib.parse.parse_qsl(body.decode(), keep_blank_values=True))
    action = p.get("Action", "")
    with sim.lock:
        sim.count("ec2", action, region,
                  {k: v for k, v in p.items() if k not in ("Action", "Version")})
        sim.advance()
        if action not in EC2_ACTIONS:
            return ec2_error(ApiError(400, "InvalidAction",
                                      "The action %s is not valid for this web service." %
                                      action))
        if region not in sim.regions:
            return ec2_error(ApiError(401, "AuthFailure", "unknown region " + region))
        itypes = [p.get("InstanceType")] if p.get("InstanceType") else []
        market = "spot" if p.get("InstanceMarketOptions.MarketType") == "spot" or \
            p.get("TargetCapacitySpecification.DefaultTargetCapacityType") == "spot" \
            else "on-demand"
        f = None if action == "CreateFleet" else sim.fault_for("ec2", action, region, itypes,
                                                                market)
        if f:
            code = f.spec["code"]
            return ec2_error(ApiError(int(f.spec.get("status") or
                                          EC2_FAULT_STATUS.get(code, 400)), code,
                                      f.spec.get("message") or {
                                          "RequestLimitExceeded": "Request limit exceeded.",
                                          "InsufficientInstanceCapacity":
                                          "We currently do not have sufficient %s capacity in "
                                          "the Availability Zone you requested." % (
                                              itypes[0] if itypes else "instance")}.get(
                                          code, code)))
        try:
            return 200, "text/xml;charset=UTF-8", getattr(Ec2(sim, region, p), action)(
            ).encode(), {}
        except ApiError as e:
            return ec2_error(e)


# ---------------------------------------------------------------- S3

def s3_error(status, code, message, resource=""):
    body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code><Message>%s</Message>'
            "<Resource>%s</Resource><RequestId>%s</RequestId></Error>" % (
                code, escape(message), escape(resource), uuid.uuid4().hex))
    return status, "application/xml", body.encode(), {}


def decode_aws_chunked(data):
    """aws-chunked bodies: hex-size[;chunk-signature=..]\\r\\n data \\r\\n ... 0 \\r\\n
    trailers \\r\\n"""
    out = bytearray()
    pos = 0
    while True:
        eol = data.index(b"\r\n", pos)
        size = int(data[pos:eol].split(b";")[0], 16)
        pos = eol + 2
        if size == 0:
            break
        out += data[pos:pos + size]
        pos += size + 2
    return bytes(out)


def handle_s3(sim, method, path, qs, headers, body):
    q = dict(urllib.parse.parse_qsl(qs, keep_blank_values=True))
    parts = path.lstrip("/").split("/", 1)
    bucket = urllib.parse.unquote(parts[0])
    key = urllib.parse.unquote(parts[1]) if len(parts) > 1 else ""
    if "aws-chunked" in headers.get("content-encoding", "") or \
            headers.get("x-amz-content-sha256", "").startswith("STREAMING-"):
        body = decode_aws_chunked(body)
    action = {"PUT": "PutObject", "GET": "GetObject", "HEAD": "HeadObject",
              "DELETE": "DeleteObject", "POST": "PostObject"}.get(method, method)
    if not key and method == "GET":
        action = "ListObjectsV2"
    if "uploads" in q:
        action = "CreateMultipartUpload"
    elif "uploadId" in q:
        action = {"PUT": "UploadPart", "POST": "CompleteMultipartUpload",
                  "DELETE": "AbortMultipartUpload", "GET": "ListParts"}[method]
    elif "tagging" in q:
        action = {"GET": "GetObjectTagging", "PUT": "PutObjectTagging"}.get(method, action)
    with sim.lock:
        sim.count("s3", action, "")
        f = sim.fault_for("s3", action, "")
        if f:
            return s3_error(int(f.spec.get("status") or 503), f.spec["code"],
                            f.spec.get("message") or "Please reduce your request rate.")
        if bucket not in sim.buckets:
            return s3_error(404, "NoSuchBucket", "The specified bucket does not exist", bucket)
        objs = sim.buckets[bucket]
        now = time.time()

        def tags_of_header():
            t = headers.get("x-amz-tagging")
            return dict(urllib.parse.parse_qsl(t, keep_blank_values=True)) if t else {}

        if action == "ListObjectsV2":
            prefix = q.get("prefix", "")
            keys = sorted(k for k in objs if k.startswith(prefix))
            start = q.get("continuation-token") or q.get("start-after") or ""
            keys = [k for k in keys if k > start]
            mx = int(q.get("max-keys", 1000))
            chunk = keys[:mx]
            trunc = len(keys) > mx
            items = "".join(
                "<Contents><Key>%s</Key><LastModified>%s</LastModified><ETag>&quot;%s&quot;"
                "</ETag><Size>%d</Size><StorageClass>STANDARD</StorageClass></Contents>" % (
                    escape(k), iso(objs[k]["mtime"]), objs[k]["etag"], len(objs[k]["data"]))
                for k in chunk)
            body = ('<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="%s">'
                    "<Name>%s</Name><Prefix>%s</Prefix><KeyCount>%d</KeyCount>"
                    "<MaxKeys>%d</MaxKeys><IsTruncated>%s</IsTruncated>%s%s</ListBucketResult>"
                    % (S3_NS, escape(bucket), escape(prefix), len(chunk), mx,
                       "true" if trunc else "false", items,
                       ("<NextContinuationToken>%s</NextContinuationToken>" % escape(chunk[-1]))
                       if trunc else ""))
            return 200, "application/xml", body.encode(), {}
        if action == "PutObject":
            etag = hashlib.md5(body).hexdigest()
            objs[key] = {"data": body, "etag": etag, "mtime": now, "tags": tags_of_header()}
            return 200, None, b"", {"ETag": '"%s"' % etag}
        if action in ("GetObject", "HeadObject"):
            o = objs.get(key)
            if o is None:
                return s3_error(404, "NoSuchKey", "The specified key does not exist.", key)
            return 200, "binary/octet-stream", o["data"] if method == "GET" else b"", {
                "ETag": '"%s"' % o["etag"], "Last-Modified": rfc1123(o["mtime"]),
                "X-Content-Length": str(len(o["data"]))}
        if action == "DeleteObject":
            objs.pop(key, None)
            return 204, None, b"", {}
        if action == "GetObjectTagging":
            o = objs.get(key)
            if o is None:
                return s3_error(404, "NoSuchKey", "The specified key does not exist.", key)
            body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Tagging xmlns="%s"><TagSet>%s'
                    "</TagSet></Tagging>" % (S3_NS, "".join(
                        "<Tag><Key>%s</Key><Value>%s</Value></Tag>" % (escape(k), escape(v))
                        for k, v in o["tags"].items())))
            return 200, "application/xml", body.encode(), {}
        if action == "CreateMultipartUpload":
            uid = uuid.uuid4().hex
            sim.uploads[uid] = {"bucket": bucket, "key": key, "parts": {},
                                "tags": tags_of_header()}
            body = ('<?xml version="1.0" encoding="UTF-8"?>\n<InitiateMultipartUploadResult '
                    'xmlns="%s"><Bucket>%s</Bucket><Key>%s</Key><UploadId>%s</UploadId>'
                    "</InitiateMultipartUploadResult>" % (S3_NS, escape(bucket), escape(key),
                                                          uid))
            return 200, "application/xml", body.encode(), {}
        up = sim.uploads.get(q.get("uploadId"))
        if up is None:
            return s3_error(404, "NoSuchUpload", "The specified upload does not exist.", key)
        if action == "UploadPart":
            etag = hashlib.md5(body).hexdigest()
            up["parts"][int(q["partNumber"])] = (body, etag)
            return 200, None, b"", {"ETag": '"%s"' % etag}
        if action == "AbortMultipartUpload":
            del sim.uploads[q["uploadId"]]
            return 204, None, b"", {}
        if action == "CompleteMultipartUpload":
            nums = [int(n) for n in re.findall(rb"<PartNumber>(\d+)</PartNumber>", body)]
            data = b"".join(up["parts"][n][0] for n in nums)
            etag = "%s-%d" % (hashlib.md5(b"".join(
                bytes.fromhex(up["parts"][n][1]) for n in nums)).hexdigest(), len(nums))
            objs[key] = {"data": data, "etag": etag, "mtime": now, "tags": up["tags"]}
            del sim.uploads[q["uploadId"]]
            body = ('<?xml version="1.0" encoding="UTF-8"?>\n<CompleteMultipartUploadResult '
                    'xmlns="%s"><Location>/%s/%s</Location><Bucket>%s</Bucket><Key>%s</Key>'
                    "<ETag>&quot;%s&quot;</ETag></CompleteMultipartUploadResult>" % (
                        S3_NS, escape(bucket), escape(key), escape(bucket), escape(key), etag))
            return 200, "application/xml", body.encode(), {}
        return s3_error(501, "NotImplemented", "not served by the simulator: " + action)


# ---------------------------------------------------------------- Service Quotas

def sq_quota(code, value, region):
    """One ServiceQuota (Service Quotas API_ServiceQuota) with the members
    AWS returns: the vCPU quotas carry their CloudWatch UsageMetric (as
    AWS/Usage ResourceCount), and no quota here is a rate (no Period)."""
    svc = quota_service(code)
    name = QUOTAS.get(code, ("quota " + code, 0))[0]
    q = {"ServiceCode": svc, "ServiceName": SERVICE_NAMES[svc],
         "QuotaArn": "arn:aws:servicequotas:%s:%s:%s/%s" % (region, OWNER, svc, code),
         "QuotaCode": code, "QuotaName": name, "Value": value, "Unit": "None",
         "Adjustable": True, "GlobalQuota": False,
         "QuotaAppliedAtLevel": "ACCOUNT"}
    if svc == "ec2" and code not in HOST_QUOTAS.values():
        spot = "Spot" in name
        cls = re.search(r"(?:On-Demand|All) (\w+)", name).group(1)
        q["UsageMetric"] = {
            "MetricNamespace": "AWS/Usage", "MetricName": "ResourceCount",
            "MetricDimensions": {"Class": "%s/%s" % (cls, "Spot" if spot else "OnDemand"),
                                 "Resource": "vCPU", "Service": "EC2", "Type": "Resource"},
            "MetricStatisticRecommendation": "Maximum"}
    elif svc == "ec2":
        q["UsageMetric"] = {
            "MetricNamespace": "AWS/Usage", "MetricName": "ResourceCount",
            "MetricDimensions": {"Class": name.split()[2], "Resource": "DedicatedHosts",
                                 "Service": "EC2", "Type": "Resource"},
            "MetricStatisticRecommendation": "Maximum"}
    return q


def sq_error(status, typ, msg):
    return status, "application/x-amz-json-1.1", json.dumps(
        {"__type": typ, "message": msg}).encode(), {}


def handle_quotas(sim, region, headers, body):
    target = headers.get("x-amz-target", "")
    action = target.rpartition(".")[2]
    try:
        req = json.loads(body or b"{}")
    except ValueError:
        return sq_error(400, "SerializationException", "body is not JSON")
    with sim.lock:
        sim.count("servicequotas", action, region)
        f = sim.fault_for("servicequotas", action, region)
        if f:
            return sq_error(int(f.spec.get("status") or 400), f.spec["code"],
                            f.spec.get("message") or "Rate exceeded")
        svc = req.get("ServiceCode")
        if action in ("GetServiceQuota", "GetAWSDefaultServiceQuota"):
            code = req.get("QuotaCode")
            if svc not in SERVICE_NAMES or code not in sim.quotas or \
                    quota_service(code) != svc:
                return sq_error(400, "NoSuchResourceException",
                                "The request failed because the specified service does not "
                                "exist or the quota %s does not exist." % code)
            val = sim.quotas[code] if action == "GetServiceQuota" else \
                QUOTAS.get(code, (None, sim.quotas[code]))[1]
            return 200, "application/x-amz-json-1.1", json.dumps(
                {"Quota": sq_quota(code, val, region)}).encode(), {}
        if action in ("ListServiceQuotas", "ListAWSDefaultServiceQuotas"):
            if svc not in SERVICE_NAMES:
                return sq_error(400, "NoSuchResourceException",
                                "The request failed because the specified service does "
                                "not exist.")
            codes = sorted(c for c in sim.quotas if quota_service(c) == svc)
            try:
                start = int(req.get("NextToken") or 0)
                n = int(req.get("MaxResults") or 100)
            except ValueError:
                return sq_error(400, "InvalidPaginationTokenException",
                                "Invalid pagination token")
            if n < 1 or n > 100:
                return sq_error(400, "ValidationException", "1 validation error detected: "
                                "Value at 'maxResults' failed to satisfy constraint: Member "
                                "must have value less than or equal to 100")
            default = action == "ListAWSDefaultServiceQuotas"
            out = {"Quotas": [sq_quota(c, QUOTAS.get(c, (None, sim.quotas[c]))[1] if default
                                       else sim.quotas[c], region)
                              for c in codes[start:start + n]]}
            if start + n < len(codes):
                out["NextToken"] = str(start + n)
            return 200, "application/x-amz-json-1.1", json.dumps(out).encode(), {}
        if action == "ListServices":
            return 200, "application/x-amz-json-1.1", json.dumps({"Services": [
                {"ServiceCode": c, "ServiceName": n} for c, n in sorted(SERVICE_NAMES.items())
            ]}).encode(), {}
        return sq_error(400, "UnknownOperationException", "Unknown operation " + target)


# ---------------------------------------------------------------- control API

def instance_view(i):
    return {k: v for k, v in i.items() if k not in ("ready_at", "gone_at", "interrupt_at")} | {
        "interrupting": bool(i.get("interrupt_at"))}


def control(sim, method, path, body):
    req = json.loads(body or b"null") if body else None
    parts = path.strip("/").split("/")[1:]   # after _sim
    with sim.lock:
        sim.advance()
        what = parts[0] if parts else ""
        if what == "state" and method == "GET":
            return {r.name: {"instances": [instance_view(i) for i in r.instances.values()],
                             "volumes": list(r.volumes.values()),
                             "images": list(r.images.values()),
                             "snapshots": list(r.snapshots.values()),
                             "templates": list(r.templates.values()),
                             "hosts": list(r.hosts.values()),
                             "fleets": list(r.fleets.values())}
                    for r in sim.regions.values()} | {
                "_objects": {b: {k: {"size": len(o["data"]), "tags": o["tags"]}
                                 for k, o in objs.items()} for b, objs in sim.buckets.items()},
                "_uploads": len(sim.uploads)}
        if what == "calls":
            if method == "DELETE":
                sim.calls.clear()
                sim.call_log.clear()
                return {}
            if parts[1:] == ["log"]:
                return {"log": list(sim.call_log)}
            return {"calls": dict(sim.calls), "total": sum(sim.calls.values())}
        if what == "faults":
            if method == "POST":
                sim.fault_seq += 1
                f = Fault(sim.fault_seq, req or {})
                sim.faults.append(f)
                return f.view()
            if method == "DELETE":
                if len(parts) > 1:
                    sim.faults = [f for f in sim.faults if str(f.id) != parts[1]]
                else:
                    sim.faults = []
                return {}
            return {"faults": [f.view() for f in sim.faults]}
        if what == "behavior":
            if method in ("POST", "PUT"):
                for k, v in (req or {}).items():
                    if k not in sim.behavior:
                        raise ValueError("unknown behavior key " + k)
                    sim.behavior[k] = v
                sim.next_due = 0.0  # delays changed: look again
            return sim.behavior
        if what == "quotas":
            if method in ("POST", "PUT"):
                sim.quotas.update({k: float(v) for k, v in (req or {}).items()})
                sim.quotas_set.update(req or {})
            return sim.quotas
        if what == "images" and method == "POST":
            reg = sim.regions[req.pop("region", next(iter(sim.regions)))]
            return reg.add_image(req)
        if what == "buckets" and method == "POST":
            sim.buckets.setdefault(req["name"], {})
            return {}
        if what == "interrupt" and method == "POST":
            # A spot interruption: the spot request is marked for termination
            # now (the two-minute notice) and the instance is terminated after
            # `notice` seconds (interruption_notice by default).
            for reg in sim.regions.values():
                i = reg.instances.get(req["instance_id"])
                if i is None:
                    continue
                if i["market"] != "spot":
                    raise ValueError("%s is not a spot instance" % i["id"])
                notice = float(req.get("notice", sim.behavior["interruption_notice"]))
                i["interrupt_at"] = time.time() + notice
                sim.due(i["interrupt_at"])
                sr = reg.spot_requests.get(i.get("spot_request"))
                if sr:
                    sr["status"] = "marked-for-termination"
                return instance_view(i)
            raise KeyError(req["instance_id"])
        if what == "instances" and method == "POST":
            # an instance somebody else made (unmanaged), or ours left behind
            reg = sim.regions[req.get("region", next(iter(sim.regions)))]
            p = {"ImageId": req.get("image") or next(iter(reg.images)), "InstanceType":
                 req.get("type", "t3.small")}
            i = Ec2(sim, reg.name, p).launch(p["InstanceType"], req.get("market", "on-demand"),
                                             {"instance": req.get("tags", {}),
                                              "volume": req.get("volume_tags", {})})
            return instance_view(i)
    raise KeyError(path)


# ---------------------------------------------------------------- HTTP

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "awssim"
    sim = None
    # As a real endpoint: the answer leaves in one write (the status line,
    # headers and body buffered, flushed after each request by
    # handle_one_request) on a TCP_NODELAY socket. Unbuffered, the headers
    # and the body went out as two small writes, and Nagle held the second
    # until the client acknowledged the first: up to a delayed ACK (40 ms)
    # per call for a client that sends its request in two writes too.
    wbufsize = -1
    disable_nagle_algorithm = True

    def handle_expect_100(self):
        # the interim 100 Continue must not wait in the buffer
        ok = super().handle_expect_100()
        self.wfile.flush()
        return ok

    def log_message(self, fmt, *args):
        if os.environ.get("AWSSIM_DEBUG"):
            sys.stderr.write("awssim: " + fmt % args + "\n")

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def handle_one(self):
        body = self.read_body()
        if self.headers.get("Expect", "").lower() == "100-continue":
            pass  # the body was read already (handled by send_response_only below)
        path, _, qs = self.path.partition("?")
        if path.startswith("/_sim"):
            try:
                out = control(self.sim, self.command, path, body)
                return self.reply(200, "application/json", json.dumps(out, default=str).encode())
            except KeyError as e:
                return self.reply(404, "application/json", json.dumps(
                    {"error": "not found: %s" % e}).encode())
            except (ValueError, TypeError) as e:
                return self.reply(400, "application/json", json.dumps(
                    {"error": str(e)}).encode())
        headers = {}
        for k, v in self.headers.items():
            k = k.lower()
            headers[k] = headers[k] + "," + v.strip() if k in headers else v.strip()
        service = "ec2"
        try:
            _, region, service = check_sigv4(self.command, self.path, headers, body,
                                             self.sim.secrets, self.sim.tokens)
        except ApiError as e:
            with self.sim.lock:
                self.sim.count("auth", e.code, "")
            if "x-amz-target" in headers:
                return self.reply(*sq_error(e.status, e.code, e.message))
            if self.command != "POST" or path != "/":
                return self.reply(*s3_error(e.status if e.code != "AuthFailure" else 403,
                                            "SignatureDoesNotMatch"
                                            if e.code != "AuthFailure" else
                                            "InvalidAccessKeyId", e.message))
            return self.reply(*ec2_error(e))
        if service == "ec2":
            return self.reply(*handle_ec2(self.sim, region, body))
        if service == "s3":
            # S3 wants the payload hash in a header (and checks it)
            ph = headers.get("x-amz-content-sha256")
            if ph is None:
                return self.reply(*s3_error(400, "InvalidRequest", "Missing required header "
                                            "for this request: x-amz-content-sha256"))
            if not ph.startswith(("UNSIGNED-", "STREAMING-")) and \
                    ph != hashlib.sha256(body).hexdigest():
                return self.reply(*s3_error(400, "XAmzContentSHA256Mismatch",
                                            "The provided 'x-amz-content-sha256' header does "
                                            "not match what was computed."))
            return self.reply(*handle_s3(self.sim, self.command, path, qs, headers, body))
        if service == "servicequotas":
            return self.reply(*handle_quotas(self.sim, region, headers, body))
        return self.reply(*ec2_error(ApiError(400, "InvalidAction", "unknown service " +
                                              service)))

    def reply(self, status, ctype, body, headers=None):
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        for k, v in (headers or {}).items():
            if k == "X-Content-Length":
                continue
            self.send_header(k, v)
        if self.command == "HEAD":
            self.send_header("Content-Length", (headers or {}).get("X-Content-Length", "0"))
            self.end_headers()
            return
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.handle_one()

    do_POST = do_PUT = do_DELETE = do_HEAD = do_GET


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def main(argv=None):
    ap = argparse.ArgumentParser(prog="awssim", description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ready-file", required=True)
    ap.add_argument("--config", help="JSON file (see README.md)")
    ap.add_argument("--boot-delay", type=float)
    ap.add_argument("--regions", help="comma-separated region names (us-east-1)")
    a = ap.parse_args(argv)
    cfg = {}
    if a.config:
        with open(a.config) as f:
            cfg = json.load(f)
    if a.boot_delay is not None:
        cfg["boot_delay"] = a.boot_delay
    if a.regions:
        cfg["regions"] = {r: {} for r in a.regions.split(",")}
    cfg.setdefault("images", [{"id": "ami-0sim0debian12", "name": "debian-12-amd64-sim",
                               "owner": "136693071363", "public": True}])
    cfg.setdefault("buckets", ["nodepool-images"])
    sim = Sim(cfg)
    Handler.sim = sim
    srv = Server((a.host, a.port), Handler)
    port = srv.server_address[1]
    base = "http://%s:%d" % (a.host, port)
    key = next(iter(sim.secrets))
    info = {"pid": os.getpid(), "port": port, "endpoint": base, "control": base + "/_sim",
            "access_key_id": key, "secret_access_key": sim.secrets[key],
            "regions": list(sim.regions), "buckets": list(sim.buckets)}
    tmp = a.ready_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.rename(tmp, a.ready_file)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=srv.shutdown).start())
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    return 0
