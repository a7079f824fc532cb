"""The OpenStack simulator held to the Nova, Neutron, Glance, Cinder and
Keystone API references, through Debian's python3-openstacksdk: the calls
upstream Nodepool's OpenStack adapter makes (nodepool/driver/openstack/
adapter.py: get_compute_limits, get_volume_limits, list_flavors,
get_image / list_images, get_network, list_availability_zone_names,
create_server, list_servers / get_server_by_id, list_volumes, list_ports,
list_floating_ips, get_server_console, delete_server), each raw answer
checked for the members the reference documents for it (the SDK's
objects default a missing member to None, so the JSON is read as the
session received it). The reference pages are listed call by call in
tests/sim/openstack/README.md."""
import pytest

openstack = pytest.importorskip("openstack")

from conftest import wait_for  # noqa: E402
from ossim_fixture import OSSim  # noqa: E402
from test_openstack_sim import connect, nodepool_create  # noqa: E402

# Nova "List Servers Detailed" at 2.1 (the non-admin members), and the
# members later microversions add (2.9 locked, 2.19 description, 2.26
# tags, 2.63 trusted_image_certificates, 2.73 locked_reason)
SERVER = {"accessIPv4", "accessIPv6", "addresses", "config_drive", "created", "flavor",
          "hostId", "id", "image", "key_name", "links", "metadata", "name", "OS-DCF:diskConfig",
          "OS-EXT-AZ:availability_zone", "OS-EXT-STS:power_state", "OS-EXT-STS:task_state",
          "OS-EXT-STS:vm_state", "os-extended-volumes:volumes_attached",
          "OS-SRV-USG:launched_at", "OS-SRV-USG:terminated_at", "progress", "security_groups",
          "status", "tenant_id", "updated", "user_id"}
SERVER_273 = SERVER | {"locked", "description", "tags", "trusted_image_certificates",
                       "locked_reason"}
# "List Flavors With Details" at 2.61
FLAVOR = {"id", "name", "ram", "disk", "vcpus", "links", "OS-FLV-EXT-DATA:ephemeral",
          "OS-FLV-DISABLED:disabled", "swap", "rxtx_factor", "os-flavor-access:is_public",
          "description", "extra_specs"}
# "Show Rate And Absolute Limits" at 2.1
COMPUTE_LIMITS = {"maxImageMeta", "maxPersonality", "maxPersonalitySize",
                  "maxSecurityGroupRules", "maxSecurityGroups", "maxServerGroupMembers",
                  "maxServerGroups", "maxServerMeta", "maxTotalCores", "maxTotalFloatingIps",
                  "maxTotalInstances", "maxTotalKeypairs", "maxTotalRAMSize", "totalCoresUsed",
                  "totalFloatingIpsUsed", "totalInstancesUsed", "totalRAMUsed",
                  "totalSecurityGroupsUsed", "totalServerGroupsUsed"}
# Cinder v3 "Show absolute limits for project"
VOLUME_LIMITS = {"maxTotalVolumes", "maxTotalSnapshots", "maxTotalVolumeGigabytes",
                 "maxTotalBackups", "maxTotalBackupGigabytes", "totalVolumesUsed",
                 "totalGigabytesUsed", "totalSnapshotsUsed", "totalBackupsUsed",
                 "totalBackupGigabytesUsed"}
# Glance v2 "Show image" / "List images"
IMAGE = {"id", "name", "status", "visibility", "protected", "os_hidden", "checksum",
         "os_hash_algo", "os_hash_value", "owner", "size", "virtual_size", "min_ram",
         "min_disk", "disk_format", "container_format", "created_at", "updated_at", "tags",
         "self", "file", "schema"}
# Cinder v3 "List accessible volumes with details" (non-admin members)
VOLUME = {"id", "name", "status", "size", "availability_zone", "created_at", "updated_at",
          "attachments", "bootable", "encrypted", "links", "metadata", "multiattach",
          "replication_status", "snapshot_id", "source_volid", "user_id", "volume_type",
          "description"}
# Neutron "List ports", "List floating IPs", "Show network details"
PORT = {"id", "name", "network_id", "project_id", "tenant_id", "mac_address",
        "admin_state_up", "status", "device_id", "device_owner", "fixed_ips",
        "allowed_address_pairs", "extra_dhcp_opts", "security_groups", "description",
        "created_at", "updated_at", "revision_number", "tags", "binding:vnic_type",
        "port_security_enabled"}
FLOATING_IP = {"id", "floating_ip_address", "floating_network_id", "router_id", "port_id",
               "fixed_ip_address", "status", "project_id", "tenant_id", "description",
               "created_at", "updated_at", "revision_number", "tags"}
NETWORK = {"id", "name", "status", "subnets", "admin_state_up", "shared", "project_id",
           "tenant_id", "router:external", "mtu", "description", "created_at", "updated_at",
           "revision_number", "tags", "availability_zones", "availability_zone_hints",
           "port_security_enabled"}


@pytest.fixture
def sim(tmp_path):
    s = OSSim(tmp_path, {"clouds": {"sim": {"regions": {"RegionOne": {"boot_delay": 0.2}}},
                                    "fipcloud": {"regions": {"RegionOne": {
                                        "boot_delay": 0.2, "floating_ips": True}}}}}).start()
    yield s
    s.stop()


def missing(obj, members):
    return sorted(members - set(obj))


def raw(proxy, path, key, microversion=None):
    r = proxy.get(path, microversion=microversion)
    assert r.status_code == 200, (path, r.status_code, r.text)
    return r.json()[key] if key else r.json()


def test_limits_flavors_images_networks(sim, tmp_path, monkeypatch):
    """getQuotaLimits (compute and volume limits), _listFlavors,
    _findImage, _findNetwork, _listAZs."""
    conn = connect(sim, tmp_path, monkeypatch)
    conn.get_compute_limits()
    lim = raw(conn.compute, "/limits", "limits", "2.1")
    assert missing(lim["absolute"], COMPUTE_LIMITS) == []
    assert lim["rate"] == []
    conn.get_volume_limits()
    vlim = raw(conn.block_storage, "/limits", "limits")
    assert missing(vlim["absolute"], VOLUME_LIMITS) == []
    assert conn.list_flavors(get_extra=False)
    for f in raw(conn.compute, "/flavors/detail", "flavors", "2.61"):
        assert missing(f, FLAVOR) == [], f
    assert conn.get_image("cirros", filters={"status": "active"}) is not None
    for img in raw(conn.image, "/images", "images"):
        assert missing(img, IMAGE) == [], img
    net = conn.get_network("public")
    assert missing(raw(conn.network, "/networks/%s" % net["id"], "network"), NETWORK) == []
    assert conn.list_availability_zone_names() == ["nova"]
    azs = raw(conn.compute, "/os-availability-zone", "availabilityZoneInfo")
    assert all({"zoneName", "zoneState", "hosts"} <= set(z) for z in azs), azs
    assert azs[0]["zoneState"] == {"available": True}


def test_server_volume_port_fip_members(sim, tmp_path, monkeypatch):
    """_createServer, _refreshServer (list_servers), the leak listings
    (list_volumes, list_ports, list_floating_ips), the console."""
    conn = connect(sim, tmp_path, monkeypatch)
    image = conn.get_image("cirros", filters={"status": "active"})
    flavor = sorted(conn.list_flavors(get_extra=False), key=lambda f: f["ram"])[0]
    net = conn.get_network("public")
    s = nodepool_create(conn, "ref", image, flavor, nics=[{"net-id": net["id"]}],
                        key_name="zuul", meta={"nodepool_node_id": "0000000001"})
    wait_for(lambda: conn.get_server_by_id(s.id).status == "ACTIVE", 15, what="ACTIVE")
    conn.list_servers()
    for mv, want in (("2.1", SERVER), ("2.73", SERVER_273)):
        servers = raw(conn.compute, "/servers/detail", "servers", mv)
        got = [x for x in servers if x["id"] == s.id][0]
        assert missing(got, want) == [], (mv, got)
        assert got["OS-EXT-STS:vm_state"] == "active" and got["OS-EXT-STS:power_state"] == 1
        assert got["OS-SRV-USG:launched_at"]
    bfv = nodepool_create(conn, "ref-bfv", image, flavor, boot_from_volume=True,
                          volume_size=5, terminate_volume=True)
    wait_for(lambda: conn.get_server_by_id(bfv.id).status == "ACTIVE", 15, what="ACTIVE")
    assert conn.list_volumes()
    vols = raw(conn.block_storage, "/volumes/detail", "volumes")
    assert vols
    for v in vols:
        assert missing(v, VOLUME) == [], v
    assert conn.list_ports()
    for p in raw(conn.network, "/ports", "ports"):
        assert missing(p, PORT) == [], p
    fconn = connect(sim, tmp_path, monkeypatch, cloud="fipcloud")
    fs = nodepool_create(fconn, "ref-fip", fconn.get_image("cirros"),
                         fconn.list_flavors(get_extra=False)[0])
    wait_for(lambda: fconn.get_server_by_id(fs.id).status == "ACTIVE", 15, what="ACTIVE")
    fip = fconn.create_floating_ip(server=fconn.get_server_by_id(fs.id), wait=True)
    fconn.list_floating_ips()
    fips = raw(fconn.network, "/floatingips", "floatingips")
    assert fip["id"] in [f["id"] for f in fips]
    for f in fips:
        assert missing(f, FLOATING_IP) == [], f
    assert isinstance(conn.get_server_console(s.id), str)
    fconn.delete_floating_ip(fip["id"])
    fconn.delete_server(fs.id)
    conn.delete_server(s.id)
    conn.delete_server(bfv.id)
