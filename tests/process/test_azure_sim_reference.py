"""The Azure simulator held to the Azure REST API reference (Compute,
Network, Resource SKUs, Usage), through Debian's python3-azure: the calls
upstream Nodepool's azure adapter makes through its azul.py
(nodepool/driver/azure/adapter.py: subnets.get, compute_skus.list,
compute_usages.list, virtual_machines create/list/delete,
network_interfaces.list, public_ip_addresses.list, disks.list,
images.get/list), made with the management clients, and each answer read
as the SDK's pipeline received it (its models default a missing member to
None) and checked for the members the reference documents. Faster than
test_azure_sim.py: no `az` process. The reference pages are listed call
by call in tests/sim/azure/README.md."""
import os

import pytest

pytest.importorskip("azure.mgmt.compute")
from azure.core.rest import HttpRequest  # noqa: E402

from azuresim_fixture import AzureSim  # noqa: E402

RG = "nodepool"
# Virtual Machines - Get
VM = {"id", "name", "type", "location", "tags", "properties"}
VM_PROPS = {"vmId", "hardwareProfile", "storageProfile", "osProfile", "networkProfile",
            "provisioningState", "timeCreated"}
OS_DISK = {"osType", "name", "createOption", "caching", "managedDisk", "deleteOption",
           "diskSizeGB"}
OS_PROFILE = {"computerName", "adminUsername", "linuxConfiguration", "secrets",
              "allowExtensionOperations", "requireGuestProvisionSignal"}
# Network Interfaces - List
NIC = {"id", "name", "type", "location", "etag", "properties"}
NIC_PROPS = {"provisioningState", "resourceGuid", "ipConfigurations", "dnsSettings",
             "macAddress", "enableAcceleratedNetworking", "enableIPForwarding",
             "virtualMachine", "primary", "hostedWorkloads", "tapConfigurations", "nicType",
             "vnetEncryptionSupported"}
IPCONF = {"id", "name", "etag", "type", "properties"}
IPCONF_PROPS = {"provisioningState", "privateIPAddress", "privateIPAllocationMethod", "subnet",
                "publicIPAddress", "primary", "privateIPAddressVersion"}
# Public IP Addresses - List
PIP = {"id", "name", "type", "location", "etag", "sku", "properties"}
PIP_PROPS = {"provisioningState", "resourceGuid", "ipAddress", "publicIPAddressVersion",
             "publicIPAllocationMethod", "idleTimeoutInMinutes", "ipTags", "ipConfiguration"}
# Images - Get / List
IMAGE = {"id", "name", "type", "location", "tags", "properties"}
IMAGE_PROPS = {"storageProfile", "provisioningState", "hyperVGeneration"}
# Disks - List By Resource Group
DISK = {"id", "name", "type", "location", "sku", "managedBy", "properties"}
DISK_PROPS = {"osType", "hyperVGeneration", "creationData", "diskSizeGB", "diskIOPSReadWrite",
              "diskMBpsReadWrite", "encryption", "timeCreated", "provisioningState",
              "diskState", "diskSizeBytes", "uniqueId", "networkAccessPolicy"}
# Usage - List
USAGE = {"unit", "currentValue", "limit", "name"}
# Resource Skus - List
SKU = {"resourceType", "name", "tier", "size", "family", "locations", "locationInfo",
       "capabilities", "restrictions"}
# Subnets - Get
SUBNET = {"id", "name", "etag", "type", "properties"}
SUBNET_PROPS = {"provisioningState", "addressPrefix", "delegations",
                "privateEndpointNetworkPolicies", "privateLinkServiceNetworkPolicies"}


@pytest.fixture
def sim(tmp_path):
    s = AzureSim(tmp_path, {"boot_delay": 0.2, "delete_delay": 0.1,
                            "images": [{"name": "test1", "tags": {"foo": "bar"}}]}).start()
    os.environ["REQUESTS_CA_BUNDLE"] = s.info["cacert"]
    yield s
    os.environ.pop("REQUESTS_CA_BUNDLE", None)
    s.stop()


def missing(obj, members):
    return sorted(members - set(obj))


class Clients:
    def __init__(self, sim):
        from azure.identity import ClientSecretCredential
        from azure.mgmt.compute import ComputeManagementClient
        from azure.mgmt.network import NetworkManagementClient
        a = sim.info["auth"]
        self.sim, self.sub = sim, a["subscriptionId"]
        cred = ClientSecretCredential("adfs", a["clientId"], a["clientSecret"],
                                      authority=sim.base)
        kw = dict(base_url=sim.base, credential_scopes=[sim.base + "/.default"])
        self.compute = {v: ComputeManagementClient(cred, self.sub, api_version=v, **kw)
                        for v in ("2022-08-01", "2020-12-01", "2019-04-01", "2020-06-30")}
        self.net = NetworkManagementClient(cred, self.sub, api_version="2020-11-01", **kw)

    def raw(self, client, path, api_version):
        """GET through the SDK's own pipeline (its credential, retries):
        the JSON as the cloud sent it."""
        r = client._client.send_request(HttpRequest(
            "GET", "%s/subscriptions/%s%s?api-version=%s" % (self.sim.base, self.sub, path,
                                                            api_version)))
        assert r.status_code == 200, (path, r.status_code, r.text())
        return r.json()


def vm_spec(subnet_id, image_id):
    """The VM upstream's adapter PUTs (upstream's _createVirtualMachine)."""
    return {
        "location": "centralus", "tags": {"nodepool_provider_name": "ref"},
        "properties": {
            "osProfile": {"computerName": "np0000000001", "adminUsername": "zuul"},
            "hardwareProfile": {"vmSize": "Standard_B1ls"},
            "storageProfile": {"imageReference": {"id": image_id},
                               "osDisk": {"createOption": "FromImage", "deleteOption": "Delete"}},
            "networkProfile": {
                "networkApiVersion": "2020-11-01",
                "networkInterfaceConfigurations": [{
                    "name": "np0000000001-nic",
                    "properties": {"deleteOption": "Delete", "ipConfigurations": [{
                        "name": "np0000000001-v4-config",
                        "properties": {
                            "privateIPAddressVersion": "IPv4", "subnet": {"id": subnet_id},
                            "publicIPAddressConfiguration": {
                                "name": "np0000000001-v4-ip",
                                "properties": {"deleteOption": "Delete",
                                               "publicIPAllocationMethod": "Static"},
                                "sku": {"name": "Standard"}}}}]}}]}}}


def test_quota_image_subnet_reads(sim):
    c = Clients(sim)
    subnet = c.net.subnets.get(RG, "NodePool", "default")
    raw = c.raw(c.net, "/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/"
                "NodePool/subnets/default" % RG, "2020-11-01")
    assert raw["id"] == subnet.id
    assert missing(raw, SUBNET) == [] and missing(raw["properties"], SUBNET_PROPS) == [], raw
    assert list(c.compute["2019-04-01"].resource_skus.list())
    skus = c.raw(c.compute["2019-04-01"], "/providers/Microsoft.Compute/skus",
                 "2019-04-01")["value"]
    for s in skus:
        assert missing(s, SKU) == [], s
    assert list(c.compute["2020-12-01"].usage.list("centralus"))
    usages = c.raw(c.compute["2020-12-01"],
                   "/providers/Microsoft.Compute/locations/centralus/usages",
                   "2020-12-01")["value"]
    for u in usages:
        assert missing(u, USAGE) == [] and {"value", "localizedValue"} <= set(u["name"]), u
    img = c.compute["2020-12-01"].images.get(RG, "test1")
    images = c.raw(c.compute["2020-12-01"], "/resourceGroups/%s/providers/Microsoft.Compute/"
                   "images" % RG, "2020-12-01")["value"]
    assert img.id in [i["id"] for i in images]
    for i in images:
        assert missing(i, IMAGE) == [] and missing(i["properties"], IMAGE_PROPS) == [], i
        assert {"osType", "osState"} <= set(i["properties"]["storageProfile"]["osDisk"]), i


def test_vm_nic_pip_disk_members(sim):
    c = Clients(sim)
    comp = c.compute["2022-08-01"]
    subnet = c.net.subnets.get(RG, "NodePool", "default")
    image = c.compute["2020-12-01"].images.get(RG, "test1")
    vm = comp.virtual_machines.begin_create_or_update(
        RG, "np0000000001", vm_spec(subnet.id, image.id)).result()
    assert vm.provisioning_state == "Succeeded"
    assert list(comp.virtual_machines.list(RG))
    vms = c.raw(comp, "/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines" % RG,
                "2022-08-01")["value"]
    (v,) = vms
    assert missing(v, VM) == [] and missing(v["properties"], VM_PROPS) == [], v
    assert missing(v["properties"]["storageProfile"]["osDisk"], OS_DISK) == [], v
    assert missing(v["properties"]["osProfile"], OS_PROFILE) == [], v
    assert list(c.net.network_interfaces.list(RG))
    nics = c.raw(c.net, "/resourceGroups/%s/providers/Microsoft.Network/networkInterfaces" % RG,
                 "2020-11-01")["value"]
    for n in nics:
        assert missing(n, NIC) == [] and missing(n["properties"], NIC_PROPS) == [], n
        for ic in n["properties"]["ipConfigurations"]:
            assert missing(ic, IPCONF) == [] and missing(ic["properties"], IPCONF_PROPS) == [], ic
    assert list(c.net.public_ip_addresses.list(RG))
    pips = c.raw(c.net, "/resourceGroups/%s/providers/Microsoft.Network/publicIPAddresses" % RG,
                 "2020-11-01")["value"]
    for p in pips:
        assert missing(p, PIP) == [] and missing(p["properties"], PIP_PROPS) == [], p
    assert list(c.compute["2020-06-30"].disks.list_by_resource_group(RG))
    disks = c.raw(c.compute["2020-06-30"], "/resourceGroups/%s/providers/Microsoft.Compute/"
                  "disks" % RG, "2020-06-30")["value"]
    for d in disks:
        assert missing(d, DISK) == [] and missing(d["properties"], DISK_PROPS) == [], d
    comp.virtual_machines.begin_delete(RG, "np0000000001").result()
    assert list(comp.virtual_machines.list(RG)) == []
