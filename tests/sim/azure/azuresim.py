"""azuresim: an Azure Resource Manager + Entra ID token simulator for
nodepoold's tests.

One process serving, over HTTPS with a CA of its own (or plain HTTP with
--no-tls), what upstream Nodepool's azure driver (azul.py) and azure-cli
call:

  OAuth2 tokens: POST /<tenant>/oauth2/token (v1, client_credentials with
      resource, as azul.py), POST /<tenant>/oauth2/v2.0/token and
      /adfs/oauth2/token (v2, scope, as MSAL / azure-cli), with their
      OpenID discovery documents (/<tenant>/v2.0/.well-known/openid-configuration,
      /adfs/.well-known/openid-configuration);
  cloud metadata: GET /metadata/endpoints (what `az cloud register
      --endpoint-resource-manager` reads);
  ARM: subscriptions, tenants, resource groups, Microsoft.Compute
      virtualMachines / disks / images / skus / usages / operations,
      Microsoft.Network networkInterfaces / publicIPAddresses /
      virtualNetworks and their subnets; every call needs a bearer token
      this simulator issued and an api-version.

A control API for tests lives under /_sim/ (plain JSON, no token), on a
second, plain-HTTP port: faults, behaviour, state, call counts. See
README.md next to this file.

Stdlib only. Judged by azure-cli and python3-azure
(tests/process/test_azure_sim.py): if they disagree, the simulator is wrong.
"""
import argparse
import base64
import collections
import http.server
import ipaddress
import json
import os
import re
import secrets
import signal
import socketserver
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid

SKUS = [  # name, vCPUs, MemoryGB, family
    ("Standard_B1ls", 1, 0.5, "standardBSFamily"),
    ("Standard_B1s", 1, 1, "standardBSFamily"),
    ("Standard_B2s", 2, 4, "standardBSFamily"),
    ("Standard_B2ms", 2, 8, "standardBSFamily"),
    ("Standard_D2s_v3", 2, 8, "standardDSv3Family"),
    ("Standard_D4s_v3", 4, 16, "standardDSv3Family"),
    ("Standard_D8s_v3", 8, 32, "standardDSv3Family"),
    ("Standard_F8s_v2", 8, 16, "standardFSv2Family"),
]

# resource type (lowercase "namespace/type") -> short name used in call counts
TYPES = {
    "microsoft.compute/virtualmachines": "virtualMachines",
    "microsoft.compute/disks": "disks",
    "microsoft.compute/images": "images",
    "microsoft.network/networkinterfaces": "networkInterfaces",
    "microsoft.network/publicipaddresses": "publicIPAddresses",
    "microsoft.network/virtualnetworks": "virtualNetworks",
}
CANON = {"virtualMachines": "Microsoft.Compute/virtualMachines",
         "disks": "Microsoft.Compute/disks", "images": "Microsoft.Compute/images",
         "networkInterfaces": "Microsoft.Network/networkInterfaces",
         "publicIPAddresses": "Microsoft.Network/publicIPAddresses",
         "virtualNetworks": "Microsoft.Network/virtualNetworks"}


def now_iso(t=None):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t or time.time())) + ".0000000Z"


class HTTPError(Exception):
    def __init__(self, status, code, message, headers=None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


class Response:
    def __init__(self, status=200, body=None, headers=None):
        self.status = status
        self.body = body
        self.headers = headers or {}


class Fault:
    """An injected fault: ARM/token requests whose method and path match get
    `status` (with ARM's error body: `code`, `message`; `retry_after` sets
    Retry-After), hang, drop or delay; `count` times (None: until removed),
    after skipping the first `after` matches."""
    FIELDS = ("method", "path", "status", "code", "message", "retry_after", "count", "after",
              "hang", "drop", "delay", "then")

    def __init__(self, fid, spec):
        unknown = set(spec) - set(self.FIELDS)
        if unknown:
            raise ValueError("unknown fault keys: %s" % ", ".join(sorted(unknown)))
        if not any(spec.get(k) for k in ("hang", "status", "delay", "drop")):
            raise ValueError("a fault needs status, hang, drop or delay")
        self.id = fid
        self.spec = dict(spec)
        self.path_re = re.compile(spec["path"], re.I) if spec.get("path") else None
        self.count = spec.get("count")
        self.after = int(spec.get("after") or 0)
        self.hits = self.seen = 0
        self.released = threading.Event()

    def matches(self, method, path):
        if self.spec.get("method") and self.spec["method"].upper() != method:
            return False
        return not self.path_re or bool(self.path_re.search(path))

    def view(self):
        d = dict(self.spec)
        d.update(id=self.id, hits=self.hits, remaining=self.count)
        return d


class Hang(Exception):
    def __init__(self, fault, sim):
        self.fault, self.sim = fault, sim


class Drop(Exception):
    pass


class Sim:
    def __init__(self, cfg, base):
        self.lock = threading.RLock()
        self.base = base
        self.stopping = False
        self.subscription = cfg.get("subscription_id", "c35cf7df-ed75-4c85-be00-535409a85120")
        self.tenant = cfg.get("tenant_id", "9a0e53e1-9a57-4f3e-9e5b-1e5a5d8d2b57")
        self.client_id = cfg.get("client_id", "6d9f5bcf-2c53-4b0a-9d37-0b6b5b8b7a11")
        self.client_secret = cfg.get("client_secret", "simsecret")
        self.token_ttl = float(cfg.get("token_ttl", 3600))
        self.tokens = {}  # token -> expiry
        self.location = cfg.get("location", "centralus")
        self.behavior = {"boot_delay": float(cfg.get("boot_delay", 1.0)),
                         "boot_outcome": cfg.get("boot_outcome", "succeeded"),
                         "delete_delay": float(cfg.get("delete_delay", 0.2)),
                         "interface_ip": cfg.get("interface_ip")}
        self.limits = {"cores": 350, "virtualMachines": 25000}
        self.limits.update(cfg.get("limits") or {})
        self.page_size = int(cfg.get("page_size", 0))
        # Retry-After on long-running operations' answers (ARM sends one;
        # without it the SDKs poll every 30 s)
        self.async_retry_after = cfg.get("async_retry_after", 1)
        self.skus = [dict(name=s[0], vcpus=s[1], memory=s[2], family=s[3]) for s in SKUS]
        for s in cfg.get("skus") or []:
            self.skus.append(dict(s))
        self.groups = collections.OrderedDict()  # lower name -> group
        self.res = collections.OrderedDict()     # lower id -> resource
        self.ops = {}                            # operation id -> {kind, target, ...}
        self.faults = collections.OrderedDict()
        self.fault_seq = 0
        self.calls = collections.Counter()
        self.ip_seq = 3
        for g in cfg.get("resource_groups") or [{"name": "nodepool"}]:
            self.add_group(g["name"], g.get("location", self.location), g.get("tags"))
        for n in cfg.get("networks") or [{"resource_group": "nodepool", "name": "NodePool",
                                          "subnets": ["default"]}]:
            self.add_vnet(n["resource_group"], n["name"], n.get("subnets", ["default"]))
        for im in cfg.get("images") or []:
            self.add_image(im.get("resource_group", "nodepool"), im["name"], im.get("tags"),
                           im.get("location", self.location))

    # -- model helpers --

    def rid(self, rg, type_, name):
        return "/subscriptions/%s/resourceGroups/%s/providers/%s/%s" % (
            self.subscription, rg, CANON[type_], name)

    def add_group(self, name, location, tags=None):
        g = {"id": "/subscriptions/%s/resourceGroups/%s" % (self.subscription, name),
             "name": name, "type": "Microsoft.Resources/resourceGroups", "location": location,
             "tags": tags or {}, "properties": {"provisioningState": "Succeeded"}}
        self.groups[name.lower()] = g
        return g

    def group(self, name):
        g = self.groups.get(name.lower())
        if g is None:
            raise HTTPError(404, "ResourceGroupNotFound",
                            "Resource group '%s' could not be found." % name)
        return g

    def put(self, r, type_, rg):
        r["_type"], r["_rg"] = type_, rg.lower()
        if CANON.get(type_, "").startswith("Microsoft.Network/"):
            # every Network resource, and its sub-resources, carries a
            # weak etag that changes with it (Network REST reference)
            tag = 'W/"%s"' % uuid.uuid4()
            r["etag"] = tag
            for sub in (r.get("properties") or {}).get("subnets", []) + \
                    (r.get("properties") or {}).get("ipConfigurations", []):
                sub["etag"] = tag
        self.res[r["id"].lower()] = r
        return r

    def find(self, rid):
        return self.res.get(rid.lower())

    def of_type(self, type_, rg=None):
        return [r for r in self.res.values()
                if r["_type"] == type_ and (rg is None or r["_rg"] == rg.lower())]

    def add_vnet(self, rg, name, subnets):
        vid = self.rid(rg, "virtualNetworks", name)
        v = {"id": vid, "name": name, "type": CANON["virtualNetworks"], "location": self.location,
             "tags": {}, "properties": {"provisioningState": "Succeeded",
                                        "addressSpace": {"addressPrefixes": ["10.0.0.0/16",
                                                                             "fd00::/48"]},
                                        "subnets": []}}
        for i, s in enumerate(subnets):
            v["properties"]["subnets"].append({
                "id": vid + "/subnets/" + s, "name": s,
                "type": "Microsoft.Network/virtualNetworks/subnets",
                "properties": {"provisioningState": "Succeeded",
                               "addressPrefix": "10.0.%d.0/24" % i,
                               "addressPrefixes": ["10.0.%d.0/24" % i, "fd00:0:0:%x::/64" % i],
                               "delegations": [],
                               "privateEndpointNetworkPolicies": "Disabled",
                               "privateLinkServiceNetworkPolicies": "Enabled"}})
        self.put(v, "virtualNetworks", rg)

    def subnet(self, sid):
        for v in self.of_type("virtualNetworks"):
            for s in v["properties"]["subnets"]:
                if s["id"].lower() == (sid or "").lower():
                    return s
        return None

    def add_image(self, rg, name, tags=None, location=None, state="Succeeded"):
        r = {"id": self.rid(rg, "images", name), "name": name, "type": CANON["images"],
             "location": location or self.location, "tags": tags or {},
             "properties": {"provisioningState": state, "hyperVGeneration": "V2",
                            "storageProfile": {"osDisk": {"osType": "Linux",
                                                          "osState": "Generalized"}}}}
        return self.put(r, "images", rg)

    def next_ip(self, version):
        self.ip_seq += 1
        n = self.ip_seq
        if version == "IPv6":
            return "fd00::%x" % n
        return "10.0.%d.%d" % (n // 250, 4 + n % 250)

    def public_ip(self, version):
        if self.behavior.get("interface_ip"):
            return self.behavior["interface_ip"]
        n = self.ip_seq
        if version == "IPv6":
            return "2001:db8::%x" % n
        return "203.0.%d.%d" % (113 + n // 250, 1 + n % 250)

    def sku(self, name, location):
        for s in self.skus:
            if s["name"].lower() == (name or "").lower():
                return s
        return None

    def usage(self):
        vms = [r for r in self.of_type("virtualMachines")]
        cores = 0
        for v in vms:
            s = self.sku(v["properties"]["hardwareProfile"]["vmSize"], v["location"])
            cores += s["vcpus"] if s else 1
        return cores, len(vms)

    # -- time passes --

    def advance(self):
        now = time.time()
        for r in list(self.res.values()):
            if r["_type"] != "virtualMachines":
                continue
            st = r["properties"]["provisioningState"]
            if st == "Creating" and r.get("_outcome") != "never" and now >= r["_ready_at"]:
                if r.get("_outcome") == "failed":
                    r["properties"]["provisioningState"] = "Failed"
                else:
                    r["properties"]["provisioningState"] = "Succeeded"
                    for pid in r.get("_pips", []):
                        p = self.find(pid)
                        if p is not None:
                            p["properties"]["provisioningState"] = "Succeeded"
                            p["properties"]["ipAddress"] = p["_ip"]
            elif st == "Deleting" and now >= r["_gone_at"]:
                self.remove_vm(r)

    def remove_vm(self, vm):
        self.res.pop(vm["id"].lower(), None)
        for dep in vm.get("_cascade", []):
            self.res.pop(dep.lower(), None)
        for dep in vm.get("_detach", []):
            d = self.find(dep)
            if d is not None:
                d.pop("managedBy", None)
                d["properties"].pop("virtualMachine", None)

    # -- operations --

    def new_op(self, kind, target, api_version):
        oid = str(uuid.uuid4())
        self.ops[oid] = {"kind": kind, "target": target.lower(), "start": time.time()}
        url = "%s/subscriptions/%s/providers/Microsoft.Compute/locations/%s/operations/%s" \
              "?api-version=%s" % (self.base, self.subscription, self.location, oid, api_version)
        return url

    def op_status(self, oid):
        op = self.ops.get(oid)
        if op is None:
            raise HTTPError(404, "NotFound", "operation %s not found" % oid)
        r = self.find(op["target"])
        body = {"name": oid, "startTime": now_iso(op["start"])}
        if op.get("sas"):
            body.update(status="Succeeded", properties={"output": {"accessSAS": op["sas"]}})
        elif op["kind"] == "delete":
            body["status"] = "InProgress" if r is not None else "Succeeded"
        else:
            st = r["properties"]["provisioningState"] if r is not None else "Failed"
            body["status"] = {"Creating": "InProgress", "Updating": "InProgress",
                              "Succeeded": "Succeeded"}.get(st, "Failed")
            if body["status"] == "Succeeded" and r is not None:
                body["properties"] = {"output": public(r)}
        if body["status"] != "InProgress":
            body["endTime"] = now_iso()
        return body


def public(r):
    """A resource as ARM shows it: without the simulator's own fields."""
    return {k: v for k, v in r.items() if not k.startswith("_")}


# ---------------------------------------------------------------- the handler


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version = "azuresim/1"
    sim = None
    control_only = False

    def log_message(self, fmt, *args):
        if os.environ.get("AZURESIM_DEBUG"):
            sys.stderr.write("azuresim: %s\n" % (fmt % args))

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
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query,
                                                            keep_blank_values=True).items()}
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        sim = self.sim
        try:
            if path.startswith("/_sim"):
                resp = control(sim, self.command, path, query, body)
            elif self.control_only:
                raise HTTPError(404, "NotFound", "the control port serves /_sim/ only")
            else:
                resp = self.serve(sim, path, query, body)
        except HTTPError as e:
            hdrs = dict(e.headers)
            resp = Response(e.status, {"error": {"code": e.code, "message": e.message}}, hdrs)
        except Drop:
            self.close_connection = True
            return
        except Hang as h:
            while not h.fault.released.wait(0.2):
                if sim.stopping:
                    break
            if h.fault.spec.get("then", "close") == "close":
                self.close_connection = True
                return
            try:
                resp = self.serve(sim, path, query, body, skip_faults=True)
            except HTTPError as e:
                resp = Response(e.status, {"error": {"code": e.code, "message": e.message}},
                                e.headers)
        except Exception as e:  # a simulator bug: say so, loudly
            import traceback
            traceback.print_exc()
            resp = Response(500, {"error": {"code": "InternalServerError",
                                            "message": "azuresim bug: %r" % e}})
        self._send(resp)

    def _send(self, resp):
        headers = dict(resp.headers)
        if resp.body is None:
            data = b""
        elif isinstance(resp.body, bytes):
            data = resp.body
        else:
            data = json.dumps(resp.body).encode()
            headers.setdefault("Content-Type", "application/json; charset=utf-8")
        self.send_response(resp.status)
        for k, v in headers.items():
            self.send_header(k, str(v))
        if resp.status != 204:
            self.send_header("Content-Length", str(len(data)))
        self.send_header("x-ms-request-id", str(uuid.uuid4()))
        self.end_headers()
        if data and resp.status != 204 and self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle

    def serve(self, sim, path, query, body, skip_faults=False):
        m = self.command
        with sim.lock:
            route = route_of(m, path)
            if not skip_faults:
                sim.calls[route] += 1
                for f in list(sim.faults.values()):
                    if not f.matches(m, path):
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
                        sim.lock.release()
                        try:
                            time.sleep(float(f.spec["delay"]))
                        finally:
                            sim.lock.acquire()
                        if not f.spec.get("status"):
                            continue
                    st = int(f.spec["status"])
                    hdrs = {}
                    if f.spec.get("retry_after") is not None:
                        hdrs["Retry-After"] = str(f.spec["retry_after"])
                    raise HTTPError(st, f.spec.get("code") or {
                        429: "TooManyRequests", 500: "InternalServerError",
                        503: "ServiceUnavailable"}.get(st, "SimulatedFault"),
                        f.spec.get("message") or "Simulated fault %d" % st, hdrs)
        segs = [s for s in path.split("/") if s]
        # identity
        if m == "POST" and path.endswith("/oauth2/token") or path.endswith("/oauth2/v2.0/token"):
            return token(sim, segs, body)
        if path.endswith("/.well-known/openid-configuration"):
            return openid(sim, segs)
        if path.startswith("/metadata/endpoints"):
            return metadata(sim)
        if path.startswith("/_blob/"):
            with sim.lock:
                return blob_put(sim, self.command, segs[1], query, self.headers, body)
        # ARM
        with sim.lock:
            check_token(sim, self.headers.get("Authorization", ""))
            if "api-version" not in query:
                raise HTTPError(400, "MissingApiVersionParameter",
                                "The api-version query parameter (?api-version=) is required "
                                "for all requests.")
            sim.advance()
            try:
                data = json.loads(body) if body else None
            except ValueError:
                raise HTTPError(400, "InvalidRequestContent",
                                "The request content was invalid and could not be deserialized")
            return arm(sim, m, segs, query, data)


def route_of(method, path):
    """METHOD and the resource type (and action) a path names, for counts:
    "PUT virtualMachines", "GET virtualMachines" (a list or one), "POST
    token", "GET operations"."""
    p = path.lower()
    if p.startswith("/_blob/"):
        return method + " page"
    if p.endswith("/token"):
        return "POST token"
    segs = [s for s in path.split("/") if s]
    low = [s.lower() for s in segs]
    if "operations" in low:
        return method + " operations"
    if "providers" in low:
        i = len(low) - 1 - low[::-1].index("providers")
        rest = segs[i + 2:]
        if len(rest) >= 3 and rest[2].lower() in ("subnets",):
            return method + " subnets"
        if len(rest) >= 3:
            return "%s %s/%s" % (method, rest[0], rest[2])
        if rest:
            return method + " " + (rest[0] if rest[0].lower() != "locations"
                                   else segs[-1])
        return method + " providers"
    if "resourcegroups" in low:
        return method + " resourceGroups"
    return method + " " + (segs[-1] if segs else "/")


def check_token(sim, auth):
    tok = auth[7:] if auth.lower().startswith("bearer ") else None
    exp = sim.tokens.get(tok)
    if exp is None or exp < time.time():
        raise HTTPError(401, "InvalidAuthenticationToken" if tok else "AuthenticationFailed",
                        "The access token is invalid or has expired." if tok else
                        "Authentication failed. The 'Authorization' header is missing.",
                        {"WWW-Authenticate": 'Bearer authorization_uri="%s/%s", error="invalid_token"'
                         % (sim.base, sim.tenant)})


def token(sim, segs, body):
    form = {k: v[-1] for k, v in urllib.parse.parse_qs(body.decode()).items()}
    tenant = segs[0] if segs else ""
    if tenant not in (sim.tenant, "adfs", "organizations"):
        return Response(400, {"error": "invalid_request", "error_codes": [90002],
                              "error_description": "AADSTS90002: Tenant '%s' not found." % tenant})
    if form.get("grant_type") != "client_credentials":
        return Response(400, {"error": "unsupported_grant_type",
                              "error_description": "AADSTS70003: grant_type not supported"})
    cid, sec = form.get("client_id"), form.get("client_secret")
    if cid is None and "client_assertion" not in form:
        return Response(400, {"error": "invalid_request",
                              "error_description": "AADSTS900144: no client_id"})
    if cid != sim.client_id or sec != sim.client_secret:
        return Response(401, {"error": "invalid_client",
                              "error_description": "AADSTS7000215: Invalid client secret "
                                                   "provided."})
    tok = secrets.token_urlsafe(24)
    with sim.lock:
        sim.tokens[tok] = time.time() + sim.token_ttl
    now = int(time.time())
    out = {"token_type": "Bearer", "expires_in": int(sim.token_ttl),
           "ext_expires_in": int(sim.token_ttl), "access_token": tok}
    if "resource" in form:  # v1
        out.update(expires_in=str(int(sim.token_ttl)), expires_on=str(now + int(sim.token_ttl)),
                   not_before=str(now), resource=form["resource"])
    return Response(200, out, {"Cache-Control": "no-store"})


def openid(sim, segs):
    ten = segs[0]
    prefix = "%s/%s" % (sim.base, ten)
    v2 = "" if ten == "adfs" else "/v2.0"
    return Response(200, {
        "token_endpoint": "%s/oauth2%s/token" % (prefix, v2),
        "authorization_endpoint": "%s/oauth2%s/authorize" % (prefix, v2),
        "issuer": prefix + v2, "jwks_uri": prefix + "/discovery/keys",
        "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic"],
        "response_types_supported": ["code", "id_token", "token"],
        "subject_types_supported": ["pairwise"],
        "id_token_signing_alg_values_supported": ["RS256"], "tenant_region_scope": "NA"})


def metadata(sim):
    return Response(200, {
        "galleryEndpoint": sim.base + "/gallery/", "graphEndpoint": sim.base + "/graph/",
        "portalEndpoint": sim.base + "/portal/",
        "authentication": {"loginEndpoint": sim.base + "/adfs",
                           "audiences": [sim.base + "/"]}})


def page(sim, items, query, base_url):
    items = [public(i) for i in items]
    if not sim.page_size:
        return Response(200, {"value": items})
    start = int(query.get("$skiptoken") or 0)
    out = {"value": items[start:start + sim.page_size]}
    if start + sim.page_size < len(items):
        q = dict(query)
        q["$skiptoken"] = str(start + sim.page_size)
        out["nextLink"] = "%s%s?%s" % (sim.base, base_url, urllib.parse.urlencode(q))
    return Response(200, out)


def arm(sim, m, segs, query, data):
    low = [s.lower() for s in segs]
    if low == ["subscriptions"]:
        return Response(200, {"value": [sub_view(sim)]})
    if low == ["tenants"]:
        return Response(200, {"value": [{"id": "/tenants/" + sim.tenant,
                                         "tenantId": sim.tenant, "displayName": "azuresim"}]})
    if len(low) < 2 or low[0] != "subscriptions":
        raise HTTPError(404, "NotFound", "no route for /%s" % "/".join(segs))
    if low[1] != sim.subscription.lower():
        raise HTTPError(404, "SubscriptionNotFound",
                        "The subscription '%s' could not be found." % segs[1])
    rest, lrest = segs[2:], low[2:]
    if not rest:
        return Response(200, sub_view(sim))
    if lrest[0] == "resourcegroups":
        if len(rest) == 1:
            return page(sim, list(sim.groups.values()), query,
                        "/subscriptions/%s/resourcegroups" % sim.subscription)
        rg = rest[1]
        if len(rest) == 2:
            return group_call(sim, m, rg, data)
        if len(rest) >= 5 and lrest[2] == "providers":
            sim.group(rg)
            return resource_call(sim, m, rg, rest[3], rest[4], rest[5:], query, data)
        raise HTTPError(404, "NotFound", "no route")
    if lrest[0] == "providers" and len(rest) >= 3:
        ns, typ = rest[1], rest[2]
        key = (ns + "/" + typ).lower()
        if key == "microsoft.compute/skus":
            return page(sim, sku_views(sim), query,
                        "/subscriptions/%s/providers/Microsoft.Compute/skus" % sim.subscription)
        if key == "microsoft.compute/locations" and len(rest) >= 5:
            if lrest[4] == "usages":
                return Response(200, {"value": usage_views(sim)})
            if lrest[4] == "operations" and len(rest) == 6:
                return Response(200, sim.op_status(rest[5]))
            if lrest[4] == "operationresults" and len(rest) == 6:
                # the Location form: 202 while running, 204 when done
                st = sim.op_status(rest[5])
                if st["status"] == "InProgress":
                    return Response(202, None, {"Location": sim.base + "/" + "/".join(segs) +
                                                "?api-version=" + query["api-version"],
                                                "Retry-After": str(sim.async_retry_after)})
                if st["status"] == "Succeeded":
                    return Response(204)
                raise HTTPError(500, "OperationFailed", "the operation failed")
        if key in TYPES and len(rest) == 3 and m == "GET":
            return page(sim, sim.of_type(TYPES[key]), query,
                        "/subscriptions/%s/providers/%s" % (sim.subscription, CANON[TYPES[key]]))
    raise HTTPError(404, "NotFound", "no route for /%s" % "/".join(segs))


def sub_view(sim):
    return {"id": "/subscriptions/" + sim.subscription, "subscriptionId": sim.subscription,
            "tenantId": sim.tenant, "displayName": "azuresim", "state": "Enabled",
            "subscriptionPolicies": {"locationPlacementId": "Public_2014-09-01",
                                     "quotaId": "PayAsYouGo_2014-09-01",
                                     "spendingLimit": "Off"},
            "authorizationSource": "RoleBased"}


def sku_views(sim):
    out = []
    for s in sim.skus:
        out.append({
            "resourceType": "virtualMachines", "name": s["name"], "tier": "Standard",
            "size": s["name"].split("_", 1)[-1], "family": s["family"],
            "locations": [sim.location],
            "locationInfo": [{"location": sim.location, "zones": ["1", "2", "3"],
                              "zoneDetails": []}],
            "capabilities": [{"name": "vCPUs", "value": str(s["vcpus"])},
                             {"name": "MemoryGB", "value": str(s["memory"])},
                             {"name": "HyperVGenerations", "value": "V1,V2"},
                             {"name": "MaxNetworkInterfaces", "value": "2"}],
            "restrictions": []})
    return out


def usage_views(sim):
    cores, vms = sim.usage()
    return [{"limit": sim.limits["cores"], "unit": "Count", "currentValue": cores,
             "name": {"value": "cores", "localizedValue": "Total Regional vCPUs"}},
            {"limit": sim.limits["virtualMachines"], "unit": "Count", "currentValue": vms,
             "name": {"value": "virtualMachines", "localizedValue": "Virtual Machines"}}]


def group_call(sim, m, rg, data):
    if m == "GET":
        return Response(200, public(sim.group(rg)))
    if m == "HEAD":
        sim.group(rg)
        return Response(204)
    if m == "PUT":
        if not data or not data.get("location"):
            raise HTTPError(400, "LocationRequired", "The location property is required.")
        old = sim.groups.get(rg.lower())
        g = sim.add_group(old["name"] if old else rg, data["location"], data.get("tags"))
        return Response(200 if old else 201, g)
    if m == "DELETE":
        if rg.lower() not in sim.groups:
            return Response(204)
        for k in [k for k, r in sim.res.items() if r["_rg"] == rg.lower()]:
            del sim.res[k]
        del sim.groups[rg.lower()]
        return Response(202, None, {"Location": sim.base + "/subscriptions/%s/operationresults/"
                                    "rg-%s?api-version=2020-06-01" % (sim.subscription, rg)})
    raise HTTPError(405, "MethodNotAllowed", m)


def resource_call(sim, m, rg, ns, typ, rest, query, data):
    key = (ns + "/" + typ).lower()
    if key not in TYPES:
        raise HTTPError(400, "InvalidResourceType",
                        "The resource type '%s' could not be found in the namespace '%s'."
                        % (typ, ns))
    t = TYPES[key]
    if not rest:
        if m != "GET":
            raise HTTPError(405, "MethodNotAllowed", m)
        return page(sim, sim.of_type(t, rg), query, "/subscriptions/%s/resourceGroups/%s/"
                    "providers/%s" % (sim.subscription, rg, CANON[t]))
    name = rest[0]
    rid = sim.rid(rg, t, name)
    if t == "virtualNetworks" and len(rest) >= 2 and rest[1].lower() == "subnets":
        v = sim.find(rid)
        if v is None:
            raise HTTPError(404, "ResourceNotFound",
                            "The Resource '%s/%s' under resource group '%s' was not found."
                            % (CANON[t], name, rg))
        subs = v["properties"]["subnets"]
        if len(rest) == 2:
            return Response(200, {"value": subs})
        for s in subs:
            if s["name"].lower() == rest[2].lower():
                return Response(200, s)
        raise HTTPError(404, "NotFound", "Resource %s/subnets/%s not found." % (rid, rest[2]))
    if len(rest) == 2 and m == "POST" and t == "disks":
        return disk_access(sim, rid, rest[1], query)
    if len(rest) != 1:
        raise HTTPError(404, "NotFound", "no route")
    r = sim.find(rid)
    if m == "GET":
        if r is None:
            raise HTTPError(404, "ResourceNotFound",
                            "The Resource '%s/%s' under resource group '%s' was not found."
                            % (CANON[t], name, rg))
        return Response(200, public(r))
    if m == "DELETE":
        return delete(sim, t, r, query)
    if m == "PUT":
        if data is None or not isinstance(data, dict):
            raise HTTPError(400, "InvalidRequestContent", "no body")
        if t == "virtualMachines":
            return put_vm(sim, rg, name, data, query)
        return put_other(sim, t, rg, name, data, query)
    raise HTTPError(405, "MethodNotAllowed", m)


def put_vm(sim, rg, name, data, query):
    rid = sim.rid(rg, "virtualMachines", name)
    old = sim.find(rid)
    if old is not None:
        if isinstance(data.get("tags"), dict):
            old["tags"] = data["tags"]
        return Response(200, public(old))
    props = data.get("properties") or {}
    loc = data.get("location")
    if not loc:
        raise HTTPError(400, "LocationRequired", "The location property is required.")
    size = (props.get("hardwareProfile") or {}).get("vmSize")
    sku = sim.sku(size, loc)
    if sku is None:
        raise HTTPError(409, "SkuNotAvailable",
                        "The requested VM size '%s' is not available in location '%s'."
                        % (size, loc))
    cores, vms = sim.usage()
    if cores + sku["vcpus"] > sim.limits["cores"]:
        raise HTTPError(409, "OperationNotAllowed",
                        "Operation could not be completed as it results in exceeding approved "
                        "Total Regional Cores quota. Location: %s, Current Limit: %d, Current "
                        "Usage: %d, Additional Required: %d, (Minimum) New Limit Required: %d."
                        % (loc, sim.limits["cores"], cores, sku["vcpus"], cores + sku["vcpus"]))
    if vms + 1 > sim.limits["virtualMachines"]:
        raise HTTPError(409, "OperationNotAllowed",
                        "Operation could not be completed as it results in exceeding approved "
                        "Virtual Machines quota. Current Limit: %d."
                        % sim.limits["virtualMachines"])
    storage = props.get("storageProfile") or {}
    ref = storage.get("imageReference") or {}
    if ref.get("id") and "/providers/microsoft.compute/images/" in ref["id"].lower():
        img = sim.find(ref["id"])
        if img is None or img["properties"]["provisioningState"] != "Succeeded":
            raise HTTPError(404, "NotFound", "The Image '%s' cannot be found in '%s' region."
                            % (ref["id"], loc))
    elif not (ref.get("id") or ref.get("communityGalleryImageId") or
              ref.get("sharedGalleryImageId") or
              all(ref.get(k) for k in ("publisher", "offer", "sku", "version"))):
        raise HTTPError(400, "InvalidParameter", "Required parameter 'imageReference' is "
                        "missing (null).")
    osp = dict(props.get("osProfile") or {})
    if not osp.get("adminUsername"):
        raise HTTPError(400, "InvalidParameter",
                        "Required parameter 'adminUsername' is missing (null).")
    net = props.get("networkProfile") or {}
    nics_cfg = net.get("networkInterfaceConfigurations") or []
    if not nics_cfg and not net.get("networkInterfaces"):
        raise HTTPError(400, "InvalidParameter", "Required parameter 'networkProfile' is missing.")
    outcome = sim.behavior["boot_outcome"]
    vm = {"id": rid, "name": name, "type": CANON["virtualMachines"], "location": loc,
          "tags": data.get("tags") or {},
          "properties": {"vmId": str(uuid.uuid4()), "hardwareProfile": {"vmSize": size},
                         "provisioningState": "Creating",
                         "timeCreated": now_iso()}}
    if data.get("zones"):
        vm["zones"] = data["zones"]
    cascade, detach, pips, nic_refs = [], [], [], []
    # the NIC(s) and public addresses the VM's network configurations ask for
    for nc in nics_cfg:
        ncp = nc.get("properties") or {}
        nic_id = sim.rid(rg, "networkInterfaces", nc["name"])
        ipcs = []
        for ic in ncp.get("ipConfigurations") or []:
            icp = ic.get("properties") or {}
            sub = sim.subnet((icp.get("subnet") or {}).get("id"))
            if sub is None:
                raise HTTPError(400, "InvalidResourceReference",
                                "Resource %s referenced by resource %s was not found."
                                % ((icp.get("subnet") or {}).get("id"), nic_id))
            ver = icp.get("privateIPAddressVersion", "IPv4")
            ipc = {"name": ic["name"], "id": nic_id + "/ipConfigurations/" + ic["name"],
                   "type": "Microsoft.Network/networkInterfaces/ipConfigurations",
                   "properties": {"provisioningState": "Succeeded",
                                  "privateIPAddress": sim.next_ip(ver),
                                  "privateIPAllocationMethod": "Dynamic",
                                  "privateIPAddressVersion": ver,
                                  "subnet": {"id": sub["id"]}, "primary": not ipcs}}
            pc = icp.get("publicIPAddressConfiguration")
            if pc:
                pid = sim.rid(rg, "publicIPAddresses", pc["name"])
                pp = pc.get("properties") or {}
                pip = {"id": pid, "name": pc["name"], "type": CANON["publicIPAddresses"],
                       "location": loc, "tags": {},
                       "sku": {"name": (pc.get("sku") or {}).get("name", "Basic"),
                               "tier": "Regional"},
                       "properties": {"provisioningState": "Updating",
                                      "resourceGuid": str(uuid.uuid4()),
                                      "publicIPAddressVersion": ver,
                                      "publicIPAllocationMethod":
                                          pp.get("publicIPAllocationMethod", "Dynamic"),
                                      "idleTimeoutInMinutes": 4, "ipTags": [],
                                      "ipConfiguration": {"id": ipc["id"]}},
                       "_ip": sim.public_ip(ver)}
                sim.put(pip, "publicIPAddresses", rg)
                pips.append(pid)
                ipc["properties"]["publicIPAddress"] = {"id": pid}
                (cascade if pp.get("deleteOption") == "Delete" else detach).append(pid)
            ipcs.append(ipc)
        nic = {"id": nic_id, "name": nc["name"], "type": CANON["networkInterfaces"],
               "location": loc, "tags": {},
               "properties": {"provisioningState": "Succeeded", "resourceGuid": str(uuid.uuid4()),
                              "ipConfigurations": ipcs, "virtualMachine": {"id": rid},
                              "enableAcceleratedNetworking": False, "nicType": "Standard",
                              # ARM's defaults for a VM's NIC
                              "dnsSettings": {"dnsServers": [], "appliedDnsServers": [],
                                              "internalDomainNameSuffix":
                                              "sim.dx.internal.cloudapp.net"},
                              "macAddress": "00-0D-3A-%02X-%02X-%02X" % tuple(
                                  uuid.uuid4().bytes[:3]),
                              "enableIPForwarding": False, "primary": True,
                              "hostedWorkloads": [], "tapConfigurations": [],
                              "vnetEncryptionSupported": False}}
        sim.put(nic, "networkInterfaces", rg)
        (cascade if ncp.get("deleteOption") == "Delete" else detach).append(nic_id)
        nic_refs.append({"id": nic_id, "properties": {"deleteOption": ncp.get("deleteOption",
                                                                              "Detach")}})
    for ni in net.get("networkInterfaces") or []:
        n = sim.find(ni.get("id", ""))
        if n is None:
            raise HTTPError(400, "InvalidResourceReference", "NIC %s not found" % ni.get("id"))
        nic_refs.append(ni)
    # the OS disk (carrying the VM's tags, as upstream's fake_azure)
    os_disk = dict(storage.get("osDisk") or {})
    dname = "%s_OsDisk_1_%s" % (name, uuid.uuid4().hex)
    did = sim.rid(rg, "disks", dname)
    sim.put({"id": did, "name": dname, "type": CANON["disks"], "location": loc,
             "tags": dict(vm["tags"]), "managedBy": rid,
             "sku": {"name": "Premium_LRS", "tier": "Premium"},
             "properties": {"provisioningState": "Succeeded", "diskState": "Attached",
                            "diskSizeGB": os_disk.get("diskSizeGB", 30), "osType": "Linux",
                            "creationData": {"createOption": "FromImage",
                                             "imageReference": ref},
                            # a P4 (30 GiB) Premium SSD's figures; the
                            # defaults the Disks reference documents
                            "hyperVGeneration": "V1",
                            "diskIOPSReadWrite": 120, "diskMBpsReadWrite": 25,
                            "diskSizeBytes": os_disk.get("diskSizeGB", 30) * 2 ** 30,
                            "encryption": {"type": "EncryptionAtRestWithPlatformKey"},
                            "timeCreated": now_iso(), "uniqueId": str(uuid.uuid4()),
                            "networkAccessPolicy": "AllowAll"}}, "disks", rg)
    (cascade if os_disk.get("deleteOption") == "Delete" else detach).append(did)
    osp.pop("adminPassword", None)
    osp.pop("customData", None)
    # the osProfile members ARM fills in for a Linux VM
    osp.setdefault("linuxConfiguration", {})
    osp["linuxConfiguration"].setdefault(
        "disablePasswordAuthentication", "adminPassword" not in
        ((props.get("osProfile") or {})))
    osp["linuxConfiguration"].setdefault("provisionVMAgent", True)
    osp["linuxConfiguration"].setdefault("patchSettings", {
        "patchMode": "ImageDefault", "assessmentMode": "ImageDefault"})
    osp.setdefault("secrets", [])
    osp.setdefault("allowExtensionOperations", True)
    osp.setdefault("requireGuestProvisionSignal", True)
    vm["properties"].update({
        "storageProfile": {"imageReference": ref,
                           "osDisk": {"osType": "Linux", "name": dname,
                                      "createOption": "FromImage", "caching": "ReadWrite",
                                      "managedDisk": {"id": did,
                                                      "storageAccountType": "Premium_LRS"},
                                      "deleteOption": os_disk.get("deleteOption", "Detach"),
                                      "diskSizeGB": os_disk.get("diskSizeGB", 30)},
                           "dataDisks": []},
        "osProfile": osp,
        "networkProfile": {"networkInterfaces": nic_refs,
                           **({"networkApiVersion": net["networkApiVersion"],
                               "networkInterfaceConfigurations": nics_cfg}
                              if nics_cfg else {})}})
    vm["_ready_at"] = time.time() + sim.behavior["boot_delay"]
    vm["_outcome"] = outcome
    vm["_cascade"], vm["_detach"], vm["_pips"] = cascade, detach, pips
    vm["_user_data"] = props.get("userData")
    vm["_custom_data"] = (props.get("osProfile") or {}).get("customData")
    vm["_admin_password"] = (props.get("osProfile") or {}).get("adminPassword")
    sim.put(vm, "virtualMachines", rg)
    op = sim.new_op("create", rid, query["api-version"])
    return Response(201, public(vm), {"Azure-AsyncOperation": op,
                                      "Retry-After": str(sim.async_retry_after)})


def put_other(sim, t, rg, name, data, query):
    rid = sim.rid(rg, t, name)
    old = sim.find(rid)
    loc = data.get("location")
    if not loc:
        raise HTTPError(400, "LocationRequired", "The location property is required.")
    props = dict(data.get("properties") or {})
    props["provisioningState"] = "Succeeded"
    r = {"id": rid, "name": name, "type": CANON[t], "location": loc,
         "tags": data.get("tags") or {}, "properties": props}
    if data.get("sku"):
        r["sku"] = data["sku"]
    if t == "images":
        md = (((props.get("storageProfile") or {}).get("osDisk") or {}).get("managedDisk")
              or {}).get("id")
        if md and sim.find(md) is None:
            raise HTTPError(404, "NotFound", "Disk %s not found" % md)
        if md:
            src = sim.find(md)
            if src["properties"].get("diskState") == "ActiveUpload":
                raise HTTPError(409, "OperationNotAllowed",
                                "Disk %s is being uploaded (revoke its access first)."
                                % src["name"])
            import hashlib
            r["_sha256"] = hashlib.sha256(bytes(src.get("_data", b""))).hexdigest()
    if t == "publicIPAddresses":
        props.setdefault("publicIPAddressVersion", "IPv4")
        props["ipAddress"] = sim.public_ip(props["publicIPAddressVersion"])
    if t == "disks":
        cd = props.get("creationData") or {}
        if cd.get("createOption") == "Upload":
            props["diskState"] = "ReadyToUpload"
            props["diskSizeBytes"] = cd.get("uploadSizeBytes", 0)
    if t == "networkInterfaces":
        for ic in props.get("ipConfigurations") or []:
            icp = ic.setdefault("properties", {})
            icp.setdefault("privateIPAddressVersion", "IPv4")
            icp.setdefault("privateIPAddress", sim.next_ip(icp["privateIPAddressVersion"]))
    sim.put(r, t, rg)
    hdrs = {}
    if t in ("disks", "images"):
        hdrs["Azure-AsyncOperation"] = sim.new_op("create", rid, query["api-version"])
        hdrs["Retry-After"] = str(sim.async_retry_after)
    return Response(200 if old else 201, public(r), hdrs)


def delete(sim, t, r, query):
    if r is None:
        return Response(204)
    if t == "virtualMachines":
        if r["properties"]["provisioningState"] != "Deleting":
            r["properties"]["provisioningState"] = "Deleting"
            r["_gone_at"] = time.time() + sim.behavior["delete_delay"]
        op = sim.new_op("delete", r["id"], query["api-version"])
        return Response(202, None, {"Azure-AsyncOperation": op,
                                    "Location": op.replace("/operations/", "/operationresults/"),
                                    "Retry-After": str(sim.async_retry_after)})
    if t == "networkInterfaces" and r["properties"].get("virtualMachine"):
        vm = sim.find(r["properties"]["virtualMachine"]["id"])
        if vm is not None:
            raise HTTPError(400, "NicInUse", "Network Interface %s is used by existing resource "
                            "%s." % (r["id"], vm["id"]))
    if t == "publicIPAddresses" and r["properties"].get("ipConfiguration"):
        nid = r["properties"]["ipConfiguration"]["id"].split("/ipConfigurations/")[0]
        if sim.find(nid) is not None:
            raise HTTPError(400, "PublicIPAddressCannotBeDeleted",
                            "Public IP address %s can not be deleted since it is still "
                            "allocated to resource %s." % (r["id"], nid))
    if t == "disks" and r.get("managedBy") and sim.find(r["managedBy"]) is not None:
        raise HTTPError(409, "OperationNotAllowed", "Disk %s is attached to VM %s."
                        % (r["name"], r["managedBy"]))
    del sim.res[r["id"].lower()]
    hdrs = {}
    if t in ("disks", "images"):
        hdrs["Azure-AsyncOperation"] = sim.new_op("delete", r["id"], query["api-version"])
        hdrs["Retry-After"] = str(sim.async_retry_after)
        return Response(202, None, hdrs)
    return Response(200)


def disk_access(sim, rid, action, query):
    d = sim.find(rid)
    if d is None:
        raise HTTPError(404, "ResourceNotFound", "disk %s not found" % rid)
    op = sim.new_op("create", rid, query["api-version"])
    if action.lower() == "begingetaccess":
        d["properties"]["diskState"] = "ActiveUpload"
        d["_sas"] = sim.base + "/_blob/" + d["name"] + "?sv=2018-03-28&sig=sim"
        sim.ops[op.split("/operations/")[1].split("?")[0]]["sas"] = d["_sas"]
    elif action.lower() == "endgetaccess":
        d["properties"]["diskState"] = "Unattached"
    else:
        raise HTTPError(404, "NotFound", action)
    return Response(202, None, {"Azure-AsyncOperation": op,
                                "Retry-After": str(sim.async_retry_after)})


def blob_put(sim, m, name, query, headers, body):
    """A page write to an upload disk through its SAS URL (Put Page:
    x-ms-blob-type PageBlob, x-ms-page-write Update, Range of 512-byte
    pages matching the body)."""
    def err(status, code, msg):
        return Response(status, ("<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>%s"
                                 "</Code><Message>%s</Message></Error>" % (code, msg)).encode(),
                        {"Content-Type": "application/xml", "x-ms-error-code": code})
    d = None
    for r in sim.of_type("disks"):
        if r["name"] == name and r.get("_sas") and query.get("sig") == "sim":
            d = r
    if d is None or d["properties"].get("diskState") != "ActiveUpload":
        return err(403, "AuthenticationFailed", "no write access to %s" % name)
    if m != "PUT" or query.get("comp") != "page":
        return err(400, "InvalidQueryParameterValue", "comp=page required")
    if headers.get("x-ms-page-write", "").lower() != "update":
        return err(400, "MissingRequiredHeader", "x-ms-page-write")
    rng = re.match(r"bytes=(\d+)-(\d+)$", headers.get("Range") or headers.get("x-ms-range") or "")
    if not rng:
        return err(400, "MissingRequiredHeader", "Range")
    start, end = int(rng.group(1)), int(rng.group(2))
    size = d["properties"].get("diskSizeBytes", 0)
    if start % 512 or (end + 1) % 512 or end - start + 1 != len(body) or end >= size:
        return err(416, "InvalidPageRange", "The page range specified is invalid.")
    data = d.setdefault("_data", bytearray(size))
    data[start:end + 1] = body
    return Response(201, None, {"ETag": '"0x%x"' % int(time.time() * 1e6)})


# ---------------------------------------------------------------- control API


def state_view(sim):
    out = {"resource_groups": [g["name"] for g in sim.groups.values()]}
    for t in ("virtualMachines", "networkInterfaces", "publicIPAddresses", "disks", "images"):
        items = []
        for r in sim.of_type(t):
            v = {"id": r["id"], "name": r["name"], "resource_group": r["_rg"],
                 "tags": r.get("tags") or {}, "location": r.get("location"),
                 "state": r["properties"].get("provisioningState")}
            if t == "virtualMachines":
                v.update(size=r["properties"]["hardwareProfile"]["vmSize"],
                         image=r["properties"]["storageProfile"]["imageReference"],
                         os_profile=r["properties"]["osProfile"],
                         admin_password=r.get("_admin_password"),
                         user_data=r.get("_user_data"), custom_data=r.get("_custom_data"),
                         os_disk=r["properties"]["storageProfile"]["osDisk"],
                         nics=[n["id"] for n in r["properties"]["networkProfile"]
                               ["networkInterfaces"]])
            if t == "images":
                v.update(sha256=r.get("_sha256"))
            if t == "disks":
                v.update(disk_state=r["properties"].get("diskState"))
            if t == "publicIPAddresses":
                v.update(ip=r["properties"].get("ipAddress"),
                         version=r["properties"].get("publicIPAddressVersion"))
            items.append(v)
        out[t] = items
    return out


def control(sim, m, path, query, body):
    segs = [s for s in path.split("/") if s][1:]
    try:
        b = json.loads(body) if body else {}
    except ValueError:
        raise HTTPError(400, "BadRequest", "body is not JSON")
    with sim.lock:
        sim.advance()
        if segs == ["ping"]:
            return Response(200, {"ok": True, "pid": os.getpid()})
        if segs == ["state"]:
            return Response(200, state_view(sim))
        if segs == ["calls"]:
            if m == "DELETE":
                sim.calls.clear()
                return Response(200, {})
            return Response(200, {"total": sum(sim.calls.values()), "calls": dict(sim.calls)})
        if segs == ["faults"]:
            if m == "GET":
                return Response(200, {"faults": [f.view() for f in sim.faults.values()]})
            if m == "POST":
                sim.fault_seq += 1
                try:
                    f = Fault(sim.fault_seq, b)
                except ValueError as e:
                    raise HTTPError(400, "BadRequest", str(e))
                sim.faults[f.id] = f
                return Response(200, f.view())
            if m == "DELETE":
                for f in sim.faults.values():
                    f.released.set()
                sim.faults.clear()
                return Response(200, {})
        if len(segs) == 2 and segs[0] == "faults" and m == "DELETE":
            f = sim.faults.pop(int(segs[1]), None)
            if f is None:
                raise HTTPError(404, "NotFound", "no fault %s" % segs[1])
            f.released.set()
            return Response(200, {})
        if segs == ["behavior"]:
            for k, v in b.items():
                if k == "limits":
                    sim.limits.update(v)
                elif k == "page_size":
                    sim.page_size = int(v)
                elif k in sim.behavior:
                    sim.behavior[k] = v
                else:
                    raise HTTPError(400, "BadRequest", "unknown behaviour %s" % k)
            return Response(200, dict(sim.behavior, limits=sim.limits))
        if segs == ["tokens", "expire"]:
            for t in sim.tokens:
                sim.tokens[t] = 0
            return Response(200, {})
        if segs == ["images"] and m == "POST":
            r = sim.add_image(b.get("resource_group", "nodepool"), b["name"], b.get("tags"),
                              b.get("location"))
            return Response(200, public(r))
        if segs == ["resources"] and m == "POST":
            # a resource made behind nodepool's back (a leak): nic, pip, disk
            t, rg, name = b["type"], b.get("resource_group", "nodepool"), b["name"]
            r = {"id": sim.rid(rg, t, name), "name": name, "type": CANON[t],
                 "location": sim.location, "tags": b.get("tags") or {},
                 "properties": {"provisioningState": "Succeeded"}}
            if t == "networkInterfaces":
                r["properties"]["ipConfigurations"] = []
            if t == "publicIPAddresses":
                r["properties"].update(publicIPAddressVersion="IPv4",
                                       ipAddress=sim.public_ip("IPv4"))
            sim.put(r, t, rg)
            return Response(200, public(r))
    raise HTTPError(404, "NotFound", "no control endpoint %s %s" % (m, path))


# ---------------------------------------------------------------- serving


def make_tls(d, host):
    """A self-signed CA and a server certificate for host in directory d,
    made with the openssl command; reused when present."""
    os.makedirs(d, exist_ok=True)
    ca, ck = os.path.join(d, "ca.pem"), os.path.join(d, "ca.key")
    crt, key = os.path.join(d, "server.pem"), os.path.join(d, "server.key")
    if all(os.path.exists(p) for p in (ca, crt, key)):
        return ca, crt, key

    def run(*a):
        subprocess.run(a, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
        "-subj", "/CN=azuresim test CA", "-keyout", ck, "-out", ca)
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
        if os.environ.get("AZURESIM_DEBUG"):
            super().handle_error(request, client_address)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="azuresim", description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ready-file", required=True)
    ap.add_argument("--config", help="JSON file (see README.md)")
    ap.add_argument("--boot-delay", type=float)
    ap.add_argument("--tls-dir", help="where the CA and certificate live (default: next to "
                    "the ready-file)")
    ap.add_argument("--no-tls", action="store_true", help="plain HTTP")
    a = ap.parse_args(argv)
    cfg = {}
    if a.config:
        with open(a.config) as f:
            cfg = json.load(f)
    if a.boot_delay is not None:
        cfg["boot_delay"] = a.boot_delay
    tls_ctx, ca = None, None
    if not a.no_tls:
        tls_dir = a.tls_dir or os.path.join(os.path.dirname(os.path.abspath(a.ready_file)),
                                            "azuresim-tls")
        ca, crt, key = make_tls(tls_dir, a.host)
        tls_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls_ctx.load_cert_chain(crt, key)
    srv = Server((a.host, a.port), Handler, tls_ctx)
    port = srv.server_address[1]
    base = "%s://%s:%d" % ("http" if a.no_tls else "https", a.host, port)
    sim = Sim(cfg, base)
    H = type("H", (Handler,), {"sim": sim})
    srv.RequestHandlerClass = H
    HC = type("HC", (Handler,), {"sim": sim, "control_only": True})
    csrv = Server((a.host, 0), HC)
    cport = csrv.server_address[1]
    auth = {"clientId": sim.client_id, "clientSecret": sim.client_secret,
            "subscriptionId": sim.subscription, "tenantId": sim.tenant,
            "activeDirectoryEndpointUrl": base,
            "resourceManagerEndpointUrl": base + "/",
            "activeDirectoryGraphResourceId": base + "/graph/",
            "sqlManagementEndpointUrl": base + "/sql/",
            "galleryEndpointUrl": base + "/gallery/",
            "managementEndpointUrl": base + "/"}
    info = {"pid": os.getpid(), "port": port, "base": base, "cacert": ca,
            "control_port": cport, "control": "http://%s:%d/_sim" % (a.host, cport),
            "auth": auth, "location": sim.location}
    auth_path = os.path.join(os.path.dirname(os.path.abspath(a.ready_file)), "azure-auth.json")
    with open(auth_path, "w") as f:
        json.dump(auth, f, indent=1)
        f.write("\n")
    info["auth_path"] = auth_path
    for s in (srv, csrv):
        threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
    tmp = a.ready_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump(info, f, indent=1)
    os.rename(tmp, a.ready_file)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    sim.stopping = True
    for f in list(sim.faults.values()):
        f.released.set()
    return 0
