"""The IBM Cloud VPC simulator held to IBM's VPC API reference
(https://cloud.ibm.com/apidocs/vpc/latest, version 2023-01-31). IBM's SDK
is not packaged for Debian, so the calls upstream Nodepool's ibmvpc
adapter makes through it (nodepool/driver/ibmvpc/adapter.py: list_vpcs,
list_subnets, list_keys, list_images / get_image, list_instance_profiles,
list_instances, create_instance, list_floating_ips / create_floating_ip /
get_floating_ip, add_instance_network_interface_floating_ip) are made here
with plain HTTP, and each answer is checked for the members the reference
documents for the resource. The reference pages are listed call by call
in tests/sim/ibmvpc/README.md."""
import pytest

from conftest import wait_for
from ibmvpcsim_fixture import IbmVpcSim
from test_ibmvpc_sim import VERSION, Client

COLLECTION = {"first", "limit", "total_count"}
VPC = {"id", "crn", "href", "name", "classic_access", "created_at", "default_network_acl",
       "default_routing_table", "default_security_group", "resource_group", "status",
       "cse_source_ips"}
SUBNET = {"id", "crn", "href", "name", "available_ipv4_address_count", "created_at",
          "ip_version", "ipv4_cidr_block", "network_acl", "resource_group", "resource_type",
          "routing_table", "status", "total_ipv4_address_count", "vpc", "zone"}
KEY = {"id", "crn", "href", "name", "created_at", "fingerprint", "length", "public_key",
       "resource_group", "type"}
IMAGE = {"id", "crn", "href", "name", "created_at", "status", "status_reasons", "visibility",
         "encryption", "file", "operating_system", "resource_group", "resource_type",
         "catalog_offering", "minimum_provisioned_size"}
OPERATING_SYSTEM = {"name", "architecture", "dedicated_host_only", "display_name", "family",
                    "href", "vendor", "version"}
PROFILE = {"name", "href", "family", "vcpu_count", "vcpu_architecture", "vcpu_manufacturer",
           "memory", "bandwidth", "port_speed", "disks", "os_architecture",
           "network_interface_count", "total_volume_bandwidth"}
INSTANCE = {"id", "crn", "href", "name", "created_at", "status", "status_reasons",
            "lifecycle_state", "lifecycle_reasons", "profile", "vcpu", "memory", "bandwidth",
            "total_network_bandwidth", "total_volume_bandwidth", "disks", "image",
            "boot_volume_attachment", "volume_attachments", "network_interfaces",
            "primary_network_interface", "vpc", "zone", "resource_group", "resource_type",
            "startable", "metadata_service", "availability_policy"}
NIC_REF = {"id", "href", "name", "primary_ip", "subnet", "resource_type"}
FLOATING_IP = {"id", "crn", "href", "name", "address", "created_at", "status", "zone",
               "resource_group"}


@pytest.fixture
def sim(tmp_path):
    s = IbmVpcSim(tmp_path, {"boot_delay": 0.1, "delete_delay": 0.1, "fip_delay": 0.0}).start()
    yield s
    s.stop()


def missing(obj, members):
    return sorted(members - set(obj))


def listing(c, coll, key=None, paged=True):
    st, b = c.json("GET", "/v1/%s?%s" % (coll, VERSION))
    assert st == 200, b
    if paged:  # the instance profile collection is not paginated
        assert missing(b, COLLECTION) == [], b
    return b[key or coll]


def test_upstream_reads_have_documented_members(sim):
    c = Client(sim)
    c.login(sim.info["apikey"])
    ids = {}
    for coll, members in (("vpcs", VPC), ("subnets", SUBNET), ("keys", KEY),
                          ("images", IMAGE)):
        items = listing(c, coll)
        assert items
        for o in items:
            assert missing(o, members) == [], (coll, o)
        ids[coll] = {o["name"]: o["id"] for o in items}
    for img in listing(c, "images"):
        assert missing(img["operating_system"], OPERATING_SYSTEM) == [], img
        assert {"size"} <= set(img["file"]), img
    one = list(ids["images"].values())[0]
    st, img = c.json("GET", "/v1/images/%s?%s" % (one, VERSION))
    assert st == 200 and missing(img, IMAGE) == []
    profiles = listing(c, "instance/profiles", "profiles", paged=False)
    for p in profiles:
        assert missing(p, PROFILE) == [], p
        assert {"type", "value"} <= set(p["vcpu_count"]) and {"type", "value"} <= set(
            p["memory"])

    body = {"keys": [{"id": ids["keys"]["testuser"]}], "name": "np0000000001",
            "profile": {"name": "cx2-2x4"}, "vpc": {"id": ids["vpcs"]["nodepool"]},
            "image": {"id": ids["images"]["ibm-debian-9-13-minimal-amd64-4"]},
            "primary_network_interface": {"name": "eth0",
                                          "subnet": {"id": ids["subnets"]["sn-nodepool"]}},
            "zone": {"name": "us-south-1"},
            "boot_volume_attachment": {"volume": {"name": "np0000000001",
                                                  "profile": {"name": "general-purpose"}},
                                       "delete_volume_on_instance_delete": True}}
    st, i = c.json("POST", "/v1/instances?" + VERSION, body)
    assert st == 201, i
    assert missing(i, INSTANCE) == [], i

    def running():
        for x in listing(c, "instances"):
            if x["id"] == i["id"] and x["status"] == "running":
                return x
    inst = wait_for(running, 10, what="running")
    assert missing(inst, INSTANCE) == [], inst
    assert missing(inst["primary_network_interface"], NIC_REF) == [], inst
    assert inst["vcpu"]["count"] == 2 and inst["memory"] == 4
    st, f = c.json("POST", "/v1/floating_ips?" + VERSION,
                   {"name": "np0000000001", "zone": {"name": "us-south-1"}})
    assert st == 201 and missing(f, FLOATING_IP) == [], f
    for x in listing(c, "floating_ips"):
        assert missing(x, FLOATING_IP) == [], x
    st, got = c.json("GET", "/v1/floating_ips/%s?%s" % (f["id"], VERSION))
    assert st == 200 and missing(got, FLOATING_IP) == []
    c.call("DELETE", "/v1/floating_ips/%s?%s" % (f["id"], VERSION))
    c.call("DELETE", "/v1/instances/%s?%s" % (i["id"], VERSION))
