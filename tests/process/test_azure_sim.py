"""The Azure simulator (tests/sim/azure) judged by Microsoft's own clients,
as Debian packages them:

- azure-cli (`az`): `az cloud register` pointed at the simulator (it reads
  the simulator's /metadata/endpoints), `az login --service-principal`
  (MSAL: OpenID discovery, client-credentials token), then `az group
  show/create`, `az vm list/show/delete`, `az network nic list`, `az
  network public-ip list`, `az image list`, over HTTPS trusting the
  simulator's CA through REQUESTS_CA_BUNDLE. The cloud is registered with
  Azure Stack Hub's profile 2020-09-01-hybrid: Debian 12's azure-cli 2.45
  asks its default profile for API versions (compute 2022-11-01) that
  Debian's python3-azure does not ship ("API version 2022-11-01 does not
  have operation group 'virtual_machines'"), whatever the server.
- python3-azure's management clients at upstream Nodepool's api-versions
  (VMs at 2022-08-01, the newest Debian ships; upstream's is 2023-03-01) with azure-identity's ClientSecretCredential against
  the simulator's ADFS authority: the VM shape upstream's adapter PUTs,
  created and deleted through the SDK's long-running-operation pollers
  (Azure-AsyncOperation).

And nodepoold's VMs, made from upstream's fixture, read back with az.
"""
import json
import os
import shutil
import subprocess

import pytest

from azuresim_fixture import AzureSim
from conftest import wait_for
from test_azure import PROVIDER, SUBNET, fixture_config, launcher

AZ = shutil.which("az") or "/usr/bin/az"

pytestmark = pytest.mark.skipif(not os.path.exists(AZ), reason="azure-cli not installed "
                                "(mk/deps.sh installs it)")


@pytest.fixture
def sim(tmp_path):
    s = AzureSim(tmp_path, {"boot_delay": 0.3, "delete_delay": 0.2,
                            "images": [{"name": "test1", "tags": {"foo": "bar"}}]}).start()
    yield s
    s.stop()


class Az:
    """azure-cli with a configuration directory of its own, logged in to
    the simulator as its service principal."""

    def __init__(self, sim, tmp_path):
        self.env = dict(os.environ, AZURE_CONFIG_DIR=str(tmp_path / "azcfg"),
                        AZURE_CORE_COLLECT_TELEMETRY="no", AZURE_CORE_NO_COLOR="1",
                        AZURE_CORE_ONLY_SHOW_ERRORS="1", **sim.env())
        self.run("cloud", "register", "-n", "azuresim", "--endpoint-resource-manager",
                 sim.base + "/", "--profile", "2020-09-01-hybrid", out=False)
        self.run("cloud", "set", "-n", "azuresim", out=False)
        a = sim.info["auth"]
        self.login = self.run("login", "--service-principal", "-u", a["clientId"], "-p",
                              a["clientSecret"], "--tenant", a["tenantId"])

    def run(self, *args, out=True):
        r = subprocess.run([AZ, *args] + (["-o", "json"] if out else []), env=self.env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, "az %s: %s %s" % (" ".join(args), r.stdout, r.stderr)
        return json.loads(r.stdout) if out and r.stdout.strip() else None

    def fails(self, *args):
        r = subprocess.run([AZ, *args], env=self.env, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode != 0, r.stdout
        return r.stderr


def test_azure_cli_logs_in_and_reads_resource_groups(sim, tmp_path):
    az = Az(sim, tmp_path)
    (sub,) = az.login
    assert sub["id"] == sim.info["auth"]["subscriptionId"]
    assert sub["user"] == {"name": sim.info["auth"]["clientId"], "type": "servicePrincipal"}
    g = az.run("group", "show", "-n", "nodepool")
    assert g["name"] == "nodepool" and g["location"] == "centralus"
    az.run("group", "create", "-n", "extra", "-l", "eastus", "--tags", "team=ci")
    assert {x["name"]: x["tags"] for x in az.run("group", "list")} == \
        {"nodepool": {}, "extra": {"team": "ci"}}
    assert "ResourceGroupNotFound" in az.fails("group", "show", "-n", "nope")
    assert az.run("vm", "list") == [] and az.run("network", "nic", "list", "-g", "nodepool") == []
    (img,) = az.run("image", "list")
    assert img["name"] == "test1" and img["tags"] == {"foo": "bar"}
    calls = sim.calls()
    assert calls["POST token"] >= 1 and calls["GET openid-configuration"] >= 1


def test_azure_cli_reads_and_deletes_what_nodepoold_made(deployment, zuul, sim, tmp_path):
    launcher(deployment, sim, fixture_config(sim))
    rid = zuul.submit(["bionic"], tenant="tenant-1")
    assert zuul.wait_request(rid, timeout=40)["state"] == "fulfilled"
    (nid, node), = zuul.nodes().items()
    az = Az(sim, tmp_path)
    (vm,) = az.run("vm", "list", "-g", "nodepool")
    assert vm["name"] == node["external_id"] and vm["provisioningState"] == "Succeeded"
    assert vm["hardwareProfile"]["vmSize"] == "Standard_B1ls"
    assert vm["tags"]["nodepool_node_id"] == nid
    assert vm["tags"]["nodepool_provider_name"] == PROVIDER
    assert vm["storageProfile"]["imageReference"]["offer"] == "UbuntuServer"
    assert vm["osProfile"]["adminUsername"] == "zuul"
    (nic,) = az.run("network", "nic", "list", "-g", "nodepool")
    assert nic["name"] == node["external_id"] + "-nic"
    ipc = nic["ipConfigurations"][0]
    assert ipc["privateIpAddress"] == node["private_ipv4"]
    assert ipc["subnet"]["id"] == SUBNET
    (pip,) = az.run("network", "public-ip", "list", "-g", "nodepool")
    assert pip["ipAddress"] == node["interface_ip"]
    assert pip["sku"]["name"] == "Standard" and pip["publicIpAllocationMethod"] == "Static"
    shown = az.run("vm", "show", "-g", "nodepool", "-n", node["external_id"])
    assert shown["id"] == vm["id"]
    # az's own delete (a long-running operation it polls): the NIC, the
    # public IP and the OS disk go with the VM (deleteOption Delete)
    az.run("vm", "delete", "-g", "nodepool", "-n", node["external_id"], "--yes", out=False)
    assert az.run("vm", "list") == []
    st = sim.state()
    assert st["networkInterfaces"] == [] and st["publicIPAddresses"] == [] and st["disks"] == []
    assert sim.calls()["GET operations"] >= 1
    # nodepoold finds its VM gone once Zuul returns the node
    zuul.finish(zuul.accept(rid))
    wait_for(lambda: zuul.nodes() == {}, timeout=30, what="node deleted")


def test_python_azure_mgmt_clients_make_upstreams_calls(sim):
    """The calls upstream's azul.py makes, made by the SDK: the subnet,
    SKUs and usages, a VM PUT in upstream's shape polled to Succeeded, its
    NIC and public IP listed, the VM deleted through the poller."""
    from azure.identity import ClientSecretCredential
    from azure.mgmt.compute import ComputeManagementClient
    from azure.mgmt.network import NetworkManagementClient
    from azure.mgmt.resource import ResourceManagementClient

    a = sim.info["auth"]
    os.environ["REQUESTS_CA_BUNDLE"] = sim.info["cacert"]
    try:
        cred = ClientSecretCredential("adfs", a["clientId"], a["clientSecret"],
                                      authority=sim.base)
        kw = dict(base_url=sim.base, credential_scopes=[sim.base + "/.default"])
        def compute(v):
            return ComputeManagementClient(cred, a["subscriptionId"], api_version=v, **kw)
        # upstream's api-versions (skus 2019-04-01, usages and images
        # 2020-12-01, disks 2020-06-30); VMs at Debian's newest, 2022-08-01
        comp, comp_img = compute("2022-08-01"), compute("2020-12-01")
        comp_sku, comp_disk = compute("2019-04-01"), compute("2020-06-30")
        net = NetworkManagementClient(cred, a["subscriptionId"], api_version="2020-11-01", **kw)
        res = ResourceManagementClient(cred, a["subscriptionId"], **kw)
        assert res.resource_groups.get("nodepool").location == "centralus"
        subnet = net.subnets.get("nodepool", "NodePool", "default")
        assert subnet.id == SUBNET
        skus = {s.name: s for s in comp_sku.resource_skus.list()}
        caps = {c.name: c.value for c in skus["Standard_B1ls"].capabilities}
        assert caps["vCPUs"] == "1" and caps["MemoryGB"] == "0.5"
        usages = {u.name.value: u.limit for u in comp_img.usage.list("centralus")}
        assert usages["cores"] == 350 and usages["virtualMachines"] == 25000
        spec = {
            "location": "centralus", "tags": {"nodepool_provider_name": "sdk"},
            "properties": {
                "osProfile": {"computerName": "np0000000001", "adminUsername": "zuul"},
                "hardwareProfile": {"vmSize": "Standard_B1ls"},
                "storageProfile": {"imageReference": {"id": comp_img.images.get("nodepool",
                                                                            "test1").id},
                                   "osDisk": {"createOption": "FromImage",
                                              "deleteOption": "Delete"}},
                "networkProfile": {
                    "networkApiVersion": "2020-11-01",
                    "networkInterfaceConfigurations": [{
                        "name": "np0000000001-nic",
                        "properties": {"deleteOption": "Delete", "ipConfigurations": [{
                            "name": "np0000000001-v4-config",
                            "properties": {
                                "privateIPAddressVersion": "IPv4",
                                "subnet": {"id": subnet.id},
                                "publicIPAddressConfiguration": {
                                    "name": "np0000000001-v4-ip",
                                    "properties": {"deleteOption": "Delete",
                                                   "publicIPAllocationMethod": "Static"},
                                    "sku": {"name": "Standard"}}}}]}}]}}}
        vm = comp.virtual_machines.begin_create_or_update(
            "nodepool", "np0000000001", spec).result()
        assert vm.provisioning_state == "Succeeded" and vm.tags == {"nodepool_provider_name":
                                                                    "sdk"}
        nic_id = vm.network_profile.network_interfaces[0].id
        (nic,) = list(net.network_interfaces.list("nodepool"))
        assert nic.id.lower() == nic_id.lower()
        pip_id = nic.ip_configurations[0].public_ip_address.id
        (pip,) = list(net.public_ip_addresses.list("nodepool"))
        assert pip.id == pip_id and pip.ip_address and pip.public_ip_address_version == "IPv4"
        comp.virtual_machines.begin_delete("nodepool", "np0000000001").result()
        assert list(comp.virtual_machines.list("nodepool")) == []
        assert list(net.network_interfaces.list("nodepool")) == []
        assert list(comp_disk.disks.list_by_resource_group("nodepool")) == []
    finally:
        os.environ.pop("REQUESTS_CA_BUNDLE", None)
