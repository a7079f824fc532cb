"""The IBM Cloud VPC simulator (tests/sim/ibmvpc) against IBM's API
reference. IBM's SDKs are not packaged for Debian, so no vendor client can
judge it; these calls are the reference's own examples, made with the
standard library over the simulator's HTTPS (its CA trusted, nothing else):
the IAM API-key grant, the VPC API's version and generation parameters,
bearer tokens, pagination, the error shape, the create and bind calls
upstream Nodepool's adapter makes, the Resource Manager's resource groups
and Cloud Object Storage's bucket location."""
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request

import pytest

from ibmvpcsim_fixture import IbmVpcSim

VERSION = "version=2023-01-31&generation=2"


@pytest.fixture
def sim(tmp_path):
    s = IbmVpcSim(tmp_path, {"boot_delay": 0.1, "delete_delay": 0.1, "fip_delay": 0.0,
                             "page_size": 2}).start()
    yield s
    s.stop()


class Client:
    def __init__(self, sim):
        self.base = sim.info["base"]
        self.ctx = ssl.create_default_context(cafile=sim.info["cacert"])
        self.token = None

    def call(self, method, path, body=None, form=None, token=True, headers=None):
        h = dict(headers or {})
        data = None
        if form is not None:
            data = urllib.parse.urlencode(form).encode()
            h["Content-Type"] = "application/x-www-form-urlencoded"
        elif body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        if token and self.token:
            h["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=10) as r:
                raw = r.read()
                return r.status, dict(r.headers), raw
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def json(self, *a, **kw):
        st, h, raw = self.call(*a, **kw)
        return st, (json.loads(raw) if raw else None)

    def login(self, apikey):
        st, b = self.json("POST", "/identity/token", token=False, form={
            "grant_type": "urn:ibm:params:oauth:grant-type:apikey", "apikey": apikey})
        assert st == 200, b
        self.token = b["access_token"]
        return b


def test_iam_token_from_an_api_key(sim):
    c = Client(sim)
    st, b = c.json("POST", "/identity/token", token=False, form={
        "grant_type": "urn:ibm:params:oauth:grant-type:apikey", "apikey": "wrong"})
    assert st == 400 and b["errorCode"] == "BXNIM0415E"
    b = c.login(sim.info["apikey"])
    assert b["token_type"] == "Bearer" and b["expires_in"] == 3600
    assert b["expiration"] > 0 and b["refresh_token"]


def test_vpc_calls_need_token_version_and_generation(sim):
    c = Client(sim)
    st, b = c.json("GET", "/v1/vpcs?" + VERSION)
    assert st == 401 and b["errors"][0]["code"] == "not_authorized" and b["trace"]
    c.login(sim.info["apikey"])
    st, b = c.json("GET", "/v1/vpcs")
    assert st == 400 and b["errors"][0]["code"] == "missing_version"
    st, b = c.json("GET", "/v1/vpcs?version=2023-01-31&generation=1")
    assert st == 400
    st, b = c.json("GET", "/v1/vpcs?" + VERSION)
    assert st == 200 and [v["name"] for v in b["vpcs"]] == ["nodepool"]
    assert b["vpcs"][0]["resource_group"]["name"] == "Default"


def test_collections_are_paginated(sim):
    c = Client(sim)
    c.login(sim.info["apikey"])
    for i in range(5):
        sim.ctl("POST", "/floating_ips", {"name": "fip-%d" % i})
    seen, path, pages = [], "/v1/floating_ips?" + VERSION, 0
    while True:
        st, b = c.json("GET", path)
        assert st == 200 and b["total_count"] == 5 and b["limit"] == 2
        seen += [f["name"] for f in b["floating_ips"]]
        pages += 1
        if "next" not in b:
            break
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(b["next"]["href"]).query)
        path = "/v1/floating_ips?start=%s&%s" % (q["start"][0], VERSION)
    assert seen == ["fip-%d" % i for i in range(5)] and pages == 3
    st, b = c.json("GET", "/v1/floating_ips?limit=101&" + VERSION)
    assert st == 400


def test_instance_create_bind_and_delete_as_upstream_calls_them(sim):
    """The body upstream's _createInstance sends; the instance goes pending
    -> running; a floating IP is reserved, bound to its primary interface,
    released; the instance deleted."""
    from conftest import wait_for
    c = Client(sim)
    c.login(sim.info["apikey"])
    ids = {}
    for coll in ("vpcs", "subnets", "keys", "images"):
        st, b = c.json("GET", "/v1/%s?%s" % (coll, VERSION))
        ids[coll] = {o["name"]: o["id"] for o in b[coll]}
    st, b = c.json("GET", "/v1/instance/profiles?" + VERSION)
    assert b["profiles"][0]["vcpu_count"]["value"] == 2
    st, rgs = c.json("GET", "/v2/resource_groups")
    assert st == 200 and [g["name"] for g in rgs["resources"]] == ["Default"]
    st, rg = c.json("POST", "/v2/resource_groups", {"name": "np_p_main"})
    assert st == 201 and set(rg) == {"id", "crn"}
    body = {"keys": [{"id": ids["keys"]["testuser"]}], "name": "np0000000001",
            "profile": {"name": "cx2-2x4"}, "resource_group": {"id": rg["id"]},
            "vpc": {"id": ids["vpcs"]["nodepool"]},
            "image": {"id": ids["images"]["ibm-debian-9-13-minimal-amd64-4"]},
            "primary_network_interface": {"name": "eth0",
                                          "subnet": {"id": ids["subnets"]["sn-nodepool"]}},
            "zone": {"name": "us-south-1"},
            "boot_volume_attachment": {"volume": {"name": "np0000000001",
                                                  "profile": {"name": "general-purpose"}},
                                       "delete_volume_on_instance_delete": True}}
    st, i = c.json("POST", "/v1/instances?" + VERSION, body)
    assert st == 201 and i["status"] == "pending" and i["resource_group"]["id"] == rg["id"]
    st, dup = c.json("POST", "/v1/instances?" + VERSION, body)
    assert st == 409 and dup["errors"][0]["code"] == "validation_unique_failed"
    st, bad = c.json("POST", "/v1/instances?" + VERSION,
                     dict(body, name="np0000000002", zone={"name": "us-south-2"}))
    assert st == 400
    st, f = c.json("POST", "/v1/floating_ips?" + VERSION,
                   {"name": "np0000000001", "zone": {"name": "us-south-1"},
                    "resource_group": {"id": rg["id"]}})
    assert st == 201 and f["status"] in ("pending", "available") and "target" not in f
    path = "/v1/instances/%s?%s" % (i["id"], VERSION)
    i = wait_for(lambda: (lambda b: b if b["status"] == "running" else None)(
        c.json("GET", path)[1]), timeout=10, what="running")
    nic = i["primary_network_interface"]["id"]
    st, bound = c.json("PUT", "/v1/instances/%s/network_interfaces/%s/floating_ips/%s?%s"
                       % (i["id"], nic, f["id"], VERSION))
    assert st == 201 and bound["target"]["id"] == nic
    st, h, raw = c.call("DELETE", "/v1/floating_ips/%s?%s" % (f["id"], VERSION))
    assert st == 204 and raw == b""
    st, h, raw = c.call("DELETE", "/v1/instances/%s?%s" % (i["id"], VERSION))
    assert st == 204
    st, b = c.json("GET", "/v1/instances/%s?%s" % ("0717-nope", VERSION))
    assert st == 404 and b["errors"][0]["code"] == "not_found"


def test_object_storage_location_and_objects(sim):
    c = Client(sim)
    c.login(sim.info["apikey"])
    st, rows = c.json("GET", "/v2/resource_instances?name=Cloud%20Object%20Storage-r6"
                             "&type=service_instance")
    (inst,) = rows["resources"]
    crn = inst["crn"]
    assert crn.split(":")[4] == "cloud-object-storage"
    st, h, raw = c.call("GET", "/np-testbucket?location")
    assert st == 403  # no ibm-service-instance-id
    hdr = {"ibm-service-instance-id": crn}
    st, h, raw = c.call("GET", "/np-testbucket?location", headers=hdr)
    assert st == 200 and b"<LocationConstraint>us-south-smart</LocationConstraint>" in raw
    req = urllib.request.Request(c.base + "/np-testbucket/npimage1.qcow2", data=b"qcow",
                                 method="PUT", headers=dict(hdr, Authorization="Bearer "
                                                            + c.token))
    with urllib.request.urlopen(req, context=c.ctx) as r:
        assert r.status == 200
    st, h, raw = c.call("GET", "/np-testbucket", headers=hdr)
    assert b"<Key>npimage1.qcow2</Key>" in raw
