"""The OpenStack simulator (tests/sim/openstack) judged by OpenStack's own
clients: Debian's python3-openstacksdk making the calls upstream Nodepool's
OpenStack adapter makes (nodepool/driver/openstack/adapter.py), and the
`openstack` command (python3-openstackclient). If a client disagrees with
the simulator, the simulator is wrong."""
import base64
import hashlib
import json
import os
import subprocess
import time
import urllib.error
import urllib.request

import pytest

openstack = pytest.importorskip("openstack")
import keystoneauth1.exceptions  # noqa: E402
from openstack.cloud import meta  # noqa: E402

from conftest import wait_for  # noqa: E402
from ossim_fixture import OSSim, clouds_yaml  # noqa: E402

REGIONS = {"RegionOne": {"boot_delay": 0.3}, "RegionTwo": {"boot_delay": 0.3}}


@pytest.fixture
def sim(tmp_path):
    s = OSSim(tmp_path, {"clouds": {"sim": {"regions": REGIONS}}}).start()
    yield s
    s.stop()


def connect(sim, tmp_path, monkeypatch, cloud="sim", region="RegionOne", **kw):
    """An SDK connection configured as Nodepool's is: from clouds.yaml
    (OS_CLIENT_CONFIG_FILE), use_direct_get=False, app_name nodepool."""
    path = sim.write_clouds_yaml(str(tmp_path / "clouds.yaml"), **kw)
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", path)
    cfg = openstack.config.OpenStackConfig().get_one(cloud=cloud, region_name=region)
    return openstack.connection.Connection(config=cfg, use_direct_get=False,
                                           app_name="nodepool", app_version="test")


def wait_status(conn, sid, status, timeout=15):
    def check():
        for s in conn.list_servers():
            if s.id == sid and s.status == status:
                return s
        conn._servers_time = 0  # the cloud layer caches the list
        return None
    return wait_for(check, timeout=timeout, what="server %s %s" % (sid, status))


def raw_server(conn, sid):
    r = conn.compute.get("/servers/%s" % sid, microversion="2.73")
    assert r.status_code == 200
    return r.json()["server"]


def nodepool_create(conn, name, image, flavor, **kw):
    """create_server as upstream's OpenStackAdapter._createServer calls it."""
    args = dict(name=name, image=image, flavor=flavor, config_drive=True)
    args.update(kw)
    return conn.create_server(wait=False, **args)


def test_server_lifecycle_as_nodepool(sim, tmp_path, monkeypatch):
    conn = connect(sim, tmp_path, monkeypatch)
    # _listFlavors / _findFlavorByRam: list_flavors(get_extra=False), by ram
    flavors = sorted(conn.list_flavors(get_extra=False), key=lambda f: f["ram"])
    assert [f["name"] for f in flavors][:2] == ["m1.tiny", "m1.small"]
    flavor = next(f for f in flavors if f["ram"] >= 2000)
    assert (flavor["vcpus"], flavor["disk"]) == (1, 20)
    # _findImage, _findNetwork, _listAZs
    image = conn.get_image("cirros", filters={"status": "active"})
    assert image is not None and image.status == "active"
    assert conn.get_image("no-such-image", filters={"status": "active"}) is None
    net = conn.get_network("public")  # a provider network: addresses routable
    assert net["name"] == "public" and net.provider_physical_network
    assert conn.list_availability_zone_names() == ["nova"]
    meta_in = {"groups": "sim,cirros,small", "nodepool_node_id": "0000000042",
               "nodepool_pool_name": "main", "nodepool_provider_name": "sim-one"}
    server = nodepool_create(conn, "np0000000042", image, flavor,
                             availability_zone="nova", security_groups=["default"],
                             userdata="#cloud-config\n", nics=[{"net-id": net["id"]}],
                             meta=meta_in)
    assert server.status == "BUILD"
    sid = server.id
    # _refreshServer: list_servers until ACTIVE
    active = wait_status(conn, sid, "ACTIVE")
    assert active.metadata == meta_in
    assert active.public_v4 and active.public_v4.startswith("203.0.113.")
    assert active.interface_ip == active.public_v4
    assert active.location.zone == "nova"
    assert hasattr(active.flavor, "vcpus") and active.flavor.ram == flavor["ram"]
    assert conn.get_server_by_id(sid).id == sid
    # what the simulator holds: a port owned by the server, userdata b64
    st = sim.servers()
    assert [s["id"] for s in st] == [sid]
    assert base64.b64decode(st[0]["user_data"]) == b"#cloud-config\n"
    assert st[0]["config_drive"] == "True"
    ports = conn.list_ports(filters={"device_id": sid})
    assert len(ports) == 1 and ports[0].device_owner == "compute:nova"
    assert ports[0].status == "ACTIVE"
    # getQuotaLimits
    lim = conn.get_compute_limits()
    assert lim.total_instances_used == 1 and lim.total_ram_used == flavor["ram"]
    assert lim.max_total_instances == 100
    # _deleteServer / _refreshServerDelete
    conn.delete_server(sid)
    conn._servers_time = 0
    assert [s for s in conn.list_servers() if s.id == sid] == []
    assert sim.ports() == [] or all(p["device_id"] != sid for p in sim.ports())


def test_boot_from_volume(sim, tmp_path, monkeypatch):
    conn = connect(sim, tmp_path, monkeypatch)
    image = conn.get_image("cirros", filters={"status": "active"})
    flavor = conn.list_flavors(get_extra=False)[1]
    server = nodepool_create(conn, "bfv", image, flavor, boot_from_volume=True,
                             volume_size=80, terminate_volume=True)
    active = wait_status(conn, server.id, "ACTIVE")
    vols = conn.list_volumes()
    assert len(vols) == 1 and vols[0].size == 80 and vols[0].status == "in-use"
    assert vols[0].attachments[0]["server_id"] == server.id
    assert active.image.id is None or active.image.id == ""
    vl = conn.get_volume_limits()
    assert vl["absolute"]["totalVolumesUsed"] == 1
    assert vl["absolute"]["totalGigabytesUsed"] == 80
    conn.delete_server(server.id)
    assert sim.volumes() == []


def test_floating_ip_cloud(tmp_path, monkeypatch):
    sim = OSSim(tmp_path, {"clouds": {"fipcloud": {"regions": {
        "RegionOne": {"boot_delay": 0.2, "floating_ips": True}}}}}).start()
    try:
        conn = connect(sim, tmp_path, monkeypatch, cloud="fipcloud")
        image = conn.get_image("cirros", filters={"status": "active"})
        flavor = conn.list_flavors(get_extra=False)[0]
        server = nodepool_create(conn, "fip", image, flavor)
        server = wait_status(conn, server.id, "ACTIVE")
        assert server.public_v4 in ("", None)
        # the create state machine: _needsFloatingIp, _createFloatingIp,
        # _refreshFloatingIp, _attachIpToServer
        assert conn._has_floating_ips()
        assert conn._needs_floating_ip(server=server, nat_destination=None)
        fip = conn.create_floating_ip(server=server, wait=True)
        assert fip["port_id"] and fip["status"] == "ACTIVE"
        assert fip["attached"]
        conn._attach_ip_to_server(server=server, floating_ip=fip, skip_attach=True)
        conn._servers_time = 0
        server = [s for s in conn.list_servers() if s.id == server.id][0]
        ext = meta.get_server_ip(server, ext_tag="floating", public=True)
        assert ext == fip["floating_ip_address"]
        assert server.public_v4 == ext and server.interface_ip == ext
        assert not conn._needs_floating_ip(server=server, nat_destination=None)
        # a leaked, unattached floating IP: delete_unattached_floating_ips
        leaked = sim.ctl("POST", "/floating_ips", {})["floating_ips"][0]
        conn._floating_ips_time = 0
        assert len(conn.list_floating_ips()) == 2
        assert conn.delete_unattached_floating_ips() == 1
        assert [f["id"] for f in sim.floating_ips()] == [fip["id"]]
        assert leaked["id"] not in [f["id"] for f in sim.floating_ips()]
        # the delete state machine: find the server's floating IPs, delete them
        fips = meta.find_nova_interfaces(server["addresses"], ext_tag="floating")
        found = [conn.get_floating_ip(id=None, filters={"floating_ip_address": f["addr"]})
                 for f in fips]
        assert [f["id"] for f in found] == [fip["id"]]
        conn.delete_floating_ip(found[0]["id"], retry=0)
        conn.delete_server(server.id)
        assert sim.floating_ips() == [] and sim.servers() == []
        assert sim.ports() == []
    finally:
        sim.stop()


def test_down_port_cleanup(sim, tmp_path, monkeypatch):
    conn = connect(sim, tmp_path, monkeypatch)
    # a port Nova leaked on delete, and a router port that is not ours
    sim.ctl("POST", "/behavior", {"leak_ports": True})
    image = conn.get_image("cirros", filters={"status": "active"})
    s = nodepool_create(conn, "leaky", image, conn.list_flavors()[0])
    wait_status(conn, s.id, "ACTIVE")
    conn.delete_server(s.id)
    sim.ctl("POST", "/ports", {"network": "private", "device_owner": "network:router_interface",
                               "region": "RegionOne"})
    down = conn.list_ports(filters={"status": "DOWN"})
    assert len(down) == 2
    compute = [p for p in down if not p.device_owner or p.device_owner.startswith("compute:")]
    assert len(compute) == 1 and compute[0].device_id == ""
    conn.delete_port(compute[0].id)
    left = sim.ports(region="RegionOne")
    assert [p["device_owner"] for p in left] == ["network:router_interface"]


def test_image_upload_and_delete(sim, tmp_path, monkeypatch):
    conn = connect(sim, tmp_path, monkeypatch)
    data = os.urandom(300000)
    fn = tmp_path / "disk.qcow2"
    fn.write_bytes(data)
    md5 = hashlib.md5(data).hexdigest()
    sha256 = hashlib.sha256(data).hexdigest()
    # uploadImage, as upstream's adapter calls it
    image = conn.create_image(name="ubuntu-jammy-1700000000", filename=str(fn),
                              is_public=False, wait=True, md5=md5, sha256=sha256,
                              disk_format="qcow2", diskimage_metadata="x",
                              nodepool_build_id="0000000001",
                              nodepool_upload_id="0000000002")
    assert image.status == "active"
    got = conn.get_image(image.id)
    assert got.checksum == md5 and got.size == len(data)
    assert got.disk_format == "qcow2" and got.visibility == "private"
    st = [i for i in sim.images() if i["id"] == image.id][0]
    assert st["nodepool_build_id"] == "0000000001"
    assert st["owner_specified.openstack.sha256"] == sha256
    with open(st["path"], "rb") as f:
        assert f.read() == data
    # a server boots from it
    s = nodepool_create(conn, "fromdib", {"id": image.id}, conn.list_flavors()[0])
    wait_status(conn, s.id, "ACTIVE")
    conn.delete_server(s.id)
    assert conn.delete_image(image.id)
    assert conn.get_image(image.id) is None
    assert not os.path.exists(st["path"])


def test_glance_pages(sim, tmp_path, monkeypatch):
    for i in range(30):
        sim.ctl("POST", "/images", {"region": "RegionOne", "image": {"name": "img-%02d" % i}})
    conn = connect(sim, tmp_path, monkeypatch)
    names = [i.name for i in conn.list_images()]
    assert len(names) == 31 and "img-29" in names
    assert sim.call_count(service="image", method="GET", route="/v2/images") >= 2


def test_quota_exceeded(sim, tmp_path, monkeypatch):
    conn = connect(sim, tmp_path, monkeypatch)
    sim.ctl("POST", "/limits", {"region": "RegionOne", "compute": {"maxTotalInstances": 1}})
    image = conn.get_image("cirros", filters={"status": "active"})
    flavor = conn.list_flavors()[0]
    nodepool_create(conn, "one", image, flavor)
    with pytest.raises(openstack.exceptions.HttpException) as e:
        nodepool_create(conn, "two", image, flavor)
    assert e.value.status_code == 403
    assert "quota exceeded" in str(e.value).lower()
    sim.ctl("POST", "/behavior", {"region": "RegionOne", "quota_status": 413})
    with pytest.raises(openstack.exceptions.HttpException) as e:
        nodepool_create(conn, "three", image, flavor)
    assert e.value.status_code == 413 and "quota exceeded" in str(e.value).lower()
    lim = conn.get_compute_limits()
    assert lim.max_total_instances == 1 and lim.total_instances_used == 1


def test_boot_failure_and_console(sim, tmp_path, monkeypatch):
    conn = connect(sim, tmp_path, monkeypatch)
    sim.ctl("POST", "/outcomes", {"region": "RegionOne", "outcomes": [
        {"status": "ERROR", "fault": "No valid host was found."},
        {"status": "never"}]})
    image = conn.get_image("cirros", filters={"status": "active"})
    flavor = conn.list_flavors()[0]
    bad = nodepool_create(conn, "bad", image, flavor)
    hung = nodepool_create(conn, "hung", image, flavor)
    wait_status(conn, bad.id, "ERROR")
    # this SDK's Server has no `fault` attribute (newer ones do): read the
    # body as upstream's _handleServerFault does through them
    assert raw_server(conn, bad.id)["fault"]["message"] == "No valid host was found."
    out = conn.get_server_console(bad.id)
    assert "bad" in out and "Kernel panic" in out
    time.sleep(0.5)
    assert conn.get_server_by_id(hung.id).status == "BUILD"
    # a create that fails at once (status ERROR on the first GET) raises
    # OpenStackCloudCreateException with the server's id, as upstream expects
    sim.ctl("POST", "/outcomes", {"region": "RegionOne", "outcomes": [
        {"status": "ERROR", "boot_delay": 0, "fault": "Quota exceeded for cores"}]})
    with pytest.raises(openstack.cloud.exc.OpenStackCloudCreateException) as e:
        nodepool_create(conn, "instant", image, flavor)
    assert e.value.resource_id
    assert "quota" in raw_server(conn, e.value.resource_id)["fault"]["message"].lower()


def test_application_credential_and_reauth(sim, tmp_path, monkeypatch):
    conn = connect(sim, tmp_path, monkeypatch, auth="application-credential")
    assert conn.list_servers() == []
    before = sim.call_count(service="identity", method="POST", route="/v3/auth/tokens")
    assert before == 1
    # every token the cloud issued expires: the next call gets a 401, and
    # keystoneauth authenticates again and retries
    assert sim.ctl("POST", "/tokens/expire", {})["expired"] >= 1
    conn._servers_time = 0
    assert conn.list_flavors(get_extra=False)
    assert sim.call_count(service="identity", method="POST", route="/v3/auth/tokens") == 2
    assert sim.call_count(service="compute", route="/v2.1/flavors/detail") == 2


def test_wrong_password_is_401(sim, tmp_path, monkeypatch):
    doc = sim.clouds()
    doc["clouds"]["sim"]["auth"]["password"] = "wrong"
    path = tmp_path / "clouds.yaml"
    path.write_text(json.dumps(doc))
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(path))
    conn = openstack.connect(cloud="sim", region_name="RegionOne")
    with pytest.raises(keystoneauth1.exceptions.http.Unauthorized) as e:
        conn.list_flavors()
    assert e.value.http_status == 401


def test_regions_and_internal_interface(sim, tmp_path, monkeypatch):
    conn = connect(sim, tmp_path, monkeypatch, region="RegionTwo", interface="internal")
    image = conn.get_image("cirros", filters={"status": "active"})
    s = nodepool_create(conn, "r2", image, conn.list_flavors()[0])
    assert [x["id"] for x in sim.servers(region="RegionTwo")] == [s.id]
    assert sim.servers(region="RegionOne") == []
    assert sim.call_count(service="compute", method="POST", route="/v2.1/servers",
                          interface="internal", region="RegionTwo") == 1
    assert sim.call_count(interface="public", service="compute") == 0


def test_faults_500_429_and_hang(sim, tmp_path, monkeypatch):
    conn = connect(sim, tmp_path, monkeypatch, api_timeout=1)
    conn.list_flavors()
    fid = sim.fault(service="compute", method="GET", path="/servers/detail", status=500, count=1)
    with pytest.raises(openstack.exceptions.HttpException) as e:
        conn._list_servers()
    assert e.value.status_code == 500
    assert conn._list_servers() == []  # count was 1
    assert sim.ctl("GET", "/faults/%d" % fid)["hits"] == 1
    sim.fault(service="compute", method="POST", path="/servers$", status=429, retry_after=3,
              count=1)
    image = conn.get_image("cirros", filters={"status": "active"})
    with pytest.raises(openstack.exceptions.HttpException) as e:
        nodepool_create(conn, "limited", image, conn.list_flavors()[0])
    assert e.value.status_code == 429
    assert e.value.response.headers["Retry-After"] == "3"
    # a cloud that stops answering: the request hangs until the client's
    # api_timeout; once the fault is removed the cloud answers again
    hid = sim.fault(region="RegionOne", hang=True)
    with pytest.raises(keystoneauth1.exceptions.connection.ConnectTimeout):
        conn._list_servers()
    assert sim.ctl("GET", "/faults/%d" % hid)["hits"] >= 1
    sim.clear_fault(hid)
    assert conn._list_servers() == []


def test_microversions_raw(sim, tmp_path, monkeypatch):
    conn = connect(sim, tmp_path, monkeypatch)
    image = conn.get_image("cirros", filters={"status": "active"})
    s = nodepool_create(conn, "mv", image, conn.list_flavors()[0])
    tok = conn.session.get_token()
    url = conn.compute.get_endpoint() + "/servers/" + s.id

    def get(version):
        req = urllib.request.Request(url, headers={"X-Auth-Token": tok})
        if version:
            req.add_header("OpenStack-API-Version", "compute " + version)
        try:
            with urllib.request.urlopen(req) as r:
                return r.status, dict(r.headers), json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), json.loads(e.read())

    st, h, b = get(None)
    assert h["OpenStack-API-Version"] == "compute 2.1"
    assert set(b["server"]["flavor"]) == {"id", "links"}
    st, h, b = get("2.47")
    assert h["X-OpenStack-Nova-API-Version"] == "2.47"
    assert b["server"]["flavor"]["original_name"] == "m1.tiny"
    st, h, b = get("latest")
    assert h["OpenStack-API-Version"] == "compute 2.95"
    st, h, b = get("2.999")
    assert st == 406
    st, h, b = get(None) if False else (None, None, None)
    req = urllib.request.Request(url)
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req)
    assert e.value.code == 401


def test_https_with_cacert(tmp_path, monkeypatch):
    sim = OSSim(tmp_path, {"clouds": {"tls": {"regions": {"RegionOne": {}}}}}, tls=True).start()
    try:
        assert sim.info["base"].startswith("https://")
        assert sim.info["control"].startswith("http://")
        doc = sim.clouds()
        assert doc["clouds"]["tls"]["cacert"].endswith("ca.pem")
        conn = connect(sim, tmp_path, monkeypatch, cloud="tls")
        assert conn.list_flavors()
        assert sim.call_count(service="compute") >= 1
    finally:
        sim.stop()


def openstack_cli(tmp_path, clouds, *args):
    env = dict(os.environ, OS_CLIENT_CONFIG_FILE=clouds, HOME=str(tmp_path))
    out = subprocess.run(["openstack", "--os-cloud", "sim", "--os-region-name", "RegionOne"]
                         + list(args) + ["-f", "json"], env=env, capture_output=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr.decode()
    return json.loads(out.stdout)


def test_openstack_cli(sim, tmp_path, monkeypatch):
    clouds = sim.write_clouds_yaml(str(tmp_path / "clouds.yaml"))
    conn = connect(sim, tmp_path, monkeypatch)
    image = conn.get_image("cirros", filters={"status": "active"})
    s = nodepool_create(conn, "cli-node", image, conn.list_flavors()[1],
                        meta={"nodepool_node_id": "0000000007"})
    wait_status(conn, s.id, "ACTIVE")
    servers = openstack_cli(tmp_path, clouds, "server", "list")
    assert [(x["ID"], x["Name"], x["Status"]) for x in servers] == [(s.id, "cli-node", "ACTIVE")]
    assert servers[0]["Flavor"] == "m1.small" and servers[0]["Image"] == "cirros"
    shown = openstack_cli(tmp_path, clouds, "server", "show", s.id)
    assert "nodepool_node_id" in json.dumps(shown["properties"])
    images = openstack_cli(tmp_path, clouds, "image", "list")
    assert [(x["Name"], x["Status"]) for x in images] == [("cirros", "active")]


def test_nova_pages_and_dropped_connection(tmp_path, monkeypatch):
    sim = OSSim(tmp_path, {"nova_page_size": 2, "regions": {"RegionOne": {}}}).start()
    try:
        conn = connect(sim, tmp_path, monkeypatch)
        image = conn.get_image("cirros", filters={"status": "active"})
        ids = {nodepool_create(conn, "p%d" % i, image, conn.list_flavors()[0]).id
               for i in range(5)}
        assert {s.id for s in conn._list_servers()} == ids
        assert sim.call_count(service="compute", method="GET",
                              route="/v2.1/servers/detail") == 3
        # a connection closed without an answer (urllib3 retries a GET
        # once on a reused connection, so drop every one for a while)
        fid = sim.fault(service="compute", path="/servers/detail", drop=True)
        t0 = time.time()
        with pytest.raises(keystoneauth1.exceptions.connection.ConnectFailure):
            conn._list_servers()
        sim.clear_fault(fid)
        assert len(conn._list_servers()) == 5
    finally:
        sim.stop()


OPENDEV = ["nl01.opendev.org.yaml", "nl02.opendev.org.yaml", "nl03.opendev.org.yaml",
           "nl04.opendev.org.yaml"]


def find_flavor(flavors, label):
    """upstream's OpenStackAdapter._findFlavor over list_flavors()."""
    flavors = sorted(flavors, key=lambda f: f["ram"])
    name, min_ram = label.get("flavor-name"), label.get("min-ram")
    for f in flavors:
        if min_ram:
            if f["ram"] >= min_ram and (not name or name in f["name"]):
                return f
        elif name in (f["name"], f["id"]):
            return f
    raise AssertionError("no flavor for %r" % label)


@pytest.mark.parametrize("config", OPENDEV)
def test_opendev_launcher_config(config, tmp_path, monkeypatch):
    """Every OpenStack provider of an OpenDev launcher config gets its own
    simulated region, in which the SDK finds every label's flavor (by name
    or min-ram), diskimage (by id), network and key; one label per config
    boots, with a floating IP where the cloud needs one."""
    import yaml
    with open(os.path.join(TOP, "tests/data/configs/opendev", config)) as f:
        np = yaml.safe_load(f)
    cfg, where = clouds_yaml.sim_config_from_nodepool(np, boot_delay=0.1)
    sim = OSSim(tmp_path, cfg).start()
    try:
        path = sim.write_clouds_yaml(str(tmp_path / "clouds.yaml"))
        monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", path)
        booted = 0
        for p in np["providers"]:
            cloud, region = where[p["name"]]
            ccfg = openstack.config.OpenStackConfig().get_one(cloud=cloud, region_name=region)
            conn = openstack.connection.Connection(config=ccfg, use_direct_get=False,
                                                   rate_limit=1 / p["rate"] if p.get("rate")
                                                   else None)
            flavors = conn.list_flavors(get_extra=False)
            azs = conn.list_availability_zone_names()
            for pool in p.get("pools", []):
                nets = [conn.get_network(n) for n in pool.get("networks", [])]
                assert all(nets)
                for lab in pool["labels"]:
                    flavor = find_flavor(flavors, lab)
                    image_id = clouds_yaml.diskimage_image_id(cloud, region, lab["diskimage"])
                    assert conn.get_image(image_id).name == lab["diskimage"]
                    if booted == 0:
                        booted += 1
                        s = nodepool_create(conn, "np-" + p["name"], {"id": image_id}, flavor,
                                            key_name=lab.get("key-name"),
                                            nics=[{"net-id": n["id"]} for n in nets],
                                            boot_from_volume=lab.get("boot-from-volume", False),
                                            volume_size=lab.get("volume-size", 50),
                                            meta={"nodepool_provider_name": p["name"]})
                        s = wait_status(conn, s.id, "ACTIVE")
                        if (pool.get("auto-floating-ip", True) and
                                conn._needs_floating_ip(server=s, nat_destination=None)):
                            conn.create_floating_ip(server=s, wait=True)
                            conn._servers_time = 0
                            s = wait_status(conn, s.id, "ACTIVE")
                        assert s.interface_ip, s
                        assert azs
        assert booted == 1
        assert [x["metadata"]["nodepool_provider_name"] for x in sim.servers()] == \
            [np["providers"][0]["name"]]
    finally:
        sim.stop()


TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_openstack_cli_more(tmp_path, monkeypatch):
    """Floating IPs, volumes (cinderclient), an image upload and a server
    delete through the `openstack` command."""
    sim = OSSim(tmp_path, {"regions": {"RegionOne": {"boot_delay": 0.1,
                                                     "floating_ips": True}}}).start()
    try:
        clouds = sim.write_clouds_yaml(str(tmp_path / "clouds.yaml"))
        conn = connect(sim, tmp_path, monkeypatch)
        image = conn.get_image("cirros", filters={"status": "active"})
        s = nodepool_create(conn, "vol", image, conn.list_flavors()[0], boot_from_volume=True,
                            volume_size=5, terminate_volume=True)
        s = wait_status(conn, s.id, "ACTIVE")
        fip = conn.create_floating_ip(server=s, wait=True)
        fips = openstack_cli(tmp_path, clouds, "floating", "ip", "list")
        assert [(f["Floating IP Address"], f["Port"]) for f in fips] == \
            [(fip["floating_ip_address"], fip["port_id"])]
        vols = openstack_cli(tmp_path, clouds, "volume", "list")
        assert [(v["Size"], v["Status"]) for v in vols] == [(5, "in-use")]
        data = tmp_path / "tiny.raw"
        data.write_bytes(b"\0" * 4096)
        made = openstack_cli(tmp_path, clouds, "image", "create", "--disk-format", "raw",
                             "--file", str(data), "--property", "nodepool_build_id=7",
                             "uploaded")
        # this client prints the image as created, before its upload
        shown = openstack_cli(tmp_path, clouds, "image", "show", made["id"])
        assert shown["status"] == "active" and shown["size"] == 4096
        assert shown["checksum"] == hashlib.md5(data.read_bytes()).hexdigest()
        got = [i for i in sim.images() if i["name"] == "uploaded"][0]
        assert got["nodepool_build_id"] == "7"
        with open(got["path"], "rb") as f:
            assert f.read() == data.read_bytes()
        env = dict(os.environ, OS_CLIENT_CONFIG_FILE=clouds, HOME=str(tmp_path))
        subprocess.run(["openstack", "--os-cloud", "sim", "server", "delete", s.id],
                       env=env, check=True, capture_output=True, timeout=60)
        assert sim.servers() == [] and sim.volumes() == []
        assert [f["port_id"] for f in sim.floating_ips()] == [None]
    finally:
        sim.stop()


def test_sdk_details(sim, tmp_path, monkeypatch):
    """auth_url without /v3 (Keystone version discovery), application
    credential by name, server metadata calls, delete while BUILD, a
    lingering delete (task_state deleting)."""
    doc = sim.clouds(auth="application-credential")
    a = doc["clouds"]["sim"]["auth"]
    a["auth_url"] = a["auth_url"][:-len("/v3")]
    ac = sim.info["clouds"]["sim"]["application_credentials"][0]
    del a["application_credential_id"]
    a.update(application_credential_name=ac["name"], username="nodepool",
             user_domain_name="Default")
    path = tmp_path / "clouds.yaml"
    path.write_text(json.dumps(doc))
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(path))
    conn = openstack.connect(cloud="sim", region_name="RegionOne")
    image = conn.get_image("cirros", filters={"status": "active"})
    flavor = conn.list_flavors()[0]
    s = nodepool_create(conn, "md", image, flavor, meta={"a": "1"})
    conn.set_server_metadata(s.id, {"b": "2"})
    conn.delete_server_metadata(s.id, ["a"])
    assert conn.get_server_by_id(s.id).metadata == {"b": "2"}
    conn.delete_server(s.id)  # still BUILD
    assert sim.servers() == []
    sim.ctl("POST", "/behavior", {"region": "RegionOne", "delete_delay": 30})
    s = nodepool_create(conn, "slow", image, flavor)
    conn.delete_server(s.id)
    lingering = sim.servers(region="RegionOne")
    assert [x["OS-EXT-STS:task_state"] for x in lingering] == ["deleting"]
    assert conn.get_server_by_id(s.id).task_state == "deleting"


def test_clouds_from_nodepool_config():
    import yaml
    with open(os.path.join(TOP, "tests/data/configs/opendev/nl01.opendev.org.yaml")) as f:
        np = yaml.safe_load(f)
    cfg, where = clouds_yaml.sim_config_from_nodepool(np)
    provs = [p for p in np["providers"] if p.get("driver", "openstack") == "openstack"]
    assert set(where) == {p["name"] for p in provs}
    # one simulated region per provider
    assert len(set(where.values())) == len(provs)
    for p in provs:
        c, r = where[p["name"]]
        reg = cfg["clouds"][c]["regions"][r]
        for pool in p.get("pools", []):
            for lab in pool.get("labels", []):
                if lab.get("flavor-name"):
                    assert lab["flavor-name"] in [f["name"] for f in reg["flavors"]]
