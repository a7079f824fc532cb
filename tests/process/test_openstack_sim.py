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
import sys
import time
import urllib.error
import urllib.request

import pytest

openstack = pytest.importorskip("openstack")
import keystoneauth1.exceptions  # noqa: E402
from openstack.cloud import meta  # noqa: E402

from conftest import wait_for  # noqa: E402
from ossim_fixture import SIM_DIR, OSSim, clouds_yaml  # noqa: E402

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
    started = time.time()
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
    assert active.public_v4 and active.public_v4.startswith("100.64.")
    assert active.interface_ip == active.public_v4
    assert active.location.zone == "nova"
    assert hasattr(active.flavor, "vcpus") and active.flavor.ram == flavor["ram"]
    assert conn.get_server_by_id(sid).id == sid
    # what the simulator holds: a port owned by the server, userdata b64
    st = sim.servers()
    assert [s["id"] for s in st] == [sid]
    assert sim.leaks(["0000000042"]) == {"servers": [], "ports": [], "floating_ips": []}
    assert [s["id"] for s in sim.leaks([])["servers"]] == [sid]
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
    # the call log, in order, with times (what a `rate` test reads): each
    # call stamped when it was served, within this test, in call order
    calls = sim.call_log(service="compute")
    log = [(c["method"], c["route"]) for c in calls]
    assert log.index(("POST", "/v2.1/servers")) < log.index(("DELETE", "/v2.1/servers/{id}"))
    times = [c["time"] for c in calls]
    assert started <= times[0] and times[-1] <= time.time()
    assert times == sorted(times)
    post = times[log.index(("POST", "/v2.1/servers"))]
    delete = times[log.index(("DELETE", "/v2.1/servers/{id}"))]
    assert post < delete, "the DELETE is stamped after the POST it follows"
    assert sim.call_gaps(service="compute") == [b - a for a, b in zip(times, times[1:])]


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
        assert [f["id"] for f in sim.leaks(["0"])["floating_ips"]] == [leaked["id"]]
        conn._floating_ips_time = 0
        assert len(conn.list_floating_ips()) == 2
        assert conn.delete_unattached_floating_ips() == 1
        assert [f["id"] for f in sim.floating_ips()] == [fip["id"]]
        assert leaked["id"] not in [f["id"] for f in sim.floating_ips()]
        # detach and attach again (PUT port_id null / port_id)
        assert conn.detach_ip_from_server(server_id=server.id, floating_ip_id=fip["id"])
        conn._floating_ips_time = 0
        detached = conn.get_floating_ip(fip["id"])
        assert detached["port_id"] is None and detached["status"] == "DOWN"
        assert not detached["attached"]
        assert raw_server(conn, server.id)["addresses"]["private"][-1]["OS-EXT-IPS:type"] == "fixed"
        port = conn.list_ports(filters={"device_id": server.id})[0]
        conn.network.update_ip(fip["id"], port_id=port.id)
        assert conn.get_floating_ip(fip["id"])["status"] == "ACTIVE"
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
    assert [p["id"] for p in sim.leaks([])["ports"]] == [compute[0].id]
    conn.delete_port(compute[0].id)
    left = sim.ports(region="RegionOne")
    assert [p["device_owner"] for p in left] == ["network:router_interface"]
    assert sim.leaks([]) == {"servers": [], "ports": [], "floating_ips": []}


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


def test_network_exhausted_is_a_build_failure(tmp_path, monkeypatch):
    sim = OSSim(tmp_path, {"regions": {"RegionOne": {"boot_delay": 0, "networks": [
        {"name": "tiny", "cidr": "192.168.5.0/29", "provider": True}]}}}).start()
    try:
        conn = connect(sim, tmp_path, monkeypatch)
        image = conn.get_image("cirros", filters={"status": "active"})
        flavor = conn.list_flavors()[0]
        # a /29 has 6 hosts: the gateway, and 5 for ports
        ok = [nodepool_create(conn, "n%d" % i, image, flavor) for i in range(5)]
        assert len({s.id for s in ok}) == 5
        with pytest.raises(openstack.cloud.exc.OpenStackCloudCreateException) as e:
            nodepool_create(conn, "n5", image, flavor)
        fault = raw_server(conn, e.value.resource_id)["fault"]["message"]
        assert "Failed to allocate the network" in fault
    finally:
        sim.stop()


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


def test_secrets_in_secure_yaml(sim, tmp_path, monkeypatch):
    # this SDK prepends OS_CLIENT_SECURE_FILE to its module-level list of
    # secure files (for good): work on a copy, so later tests do not
    # inherit this test's secrets
    loader = openstack.config.loader
    monkeypatch.setattr(loader, "SECURE_FILES", list(loader.SECURE_FILES))
    monkeypatch.setattr(loader, "CONFIG_FILES", list(loader.CONFIG_FILES))
    for auth in ("password", "application-credential"):
        sec = tmp_path / ("secure-%s.yaml" % auth)
        path = sim.write_clouds_yaml(str(tmp_path / "clouds.yaml"), secure=str(sec), auth=auth)
        text = open(path).read()
        assert "secret" not in text and "appsecret" not in text
        monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", path)
        monkeypatch.setenv("OS_CLIENT_SECURE_FILE", str(sec))
        conn = openstack.connect(cloud="sim", region_name="RegionTwo")
        assert conn.list_flavors()


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


def openstack_cli_many(tmp_path, clouds, commands):
    env = dict(os.environ, OS_CLIENT_CONFIG_FILE=clouds, HOME=str(tmp_path))
    procs = [subprocess.Popen(["openstack", "--os-cloud", "sim", "--os-region-name",
                               "RegionOne"] + c + ["-f", "json"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for c in commands]
    out = []
    for p in procs:
        o, e = p.communicate(timeout=60)
        assert p.returncode == 0, e.decode()
        out.append(json.loads(o))
    return out


def test_openstack_cli(sim, tmp_path, monkeypatch):
    clouds = sim.write_clouds_yaml(str(tmp_path / "clouds.yaml"))
    conn = connect(sim, tmp_path, monkeypatch)
    image = conn.get_image("cirros", filters={"status": "active"})
    s = nodepool_create(conn, "cli-node", image, conn.list_flavors()[1],
                        meta={"nodepool_node_id": "0000000007"})
    wait_status(conn, s.id, "ACTIVE")
    servers, shown, images = openstack_cli_many(tmp_path, clouds, [
        ["server", "list"], ["server", "show", s.id], ["image", "list"]])
    assert [(x["ID"], x["Name"], x["Status"]) for x in servers] == [(s.id, "cli-node", "ACTIVE")]
    assert servers[0]["Flavor"] == "m1.small" and servers[0]["Image"] == "cirros"
    assert "nodepool_node_id" in json.dumps(shown["properties"])
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
        data = tmp_path / "tiny.raw"
        data.write_bytes(b"\0" * 4096)
        # three commands at once (each takes seconds to start)
        fips, vols, made = openstack_cli_many(tmp_path, clouds, [
            ["floating", "ip", "list"], ["volume", "list"],
            ["image", "create", "--disk-format", "raw", "--file", str(data),
             "--property", "nodepool_build_id=7", "uploaded"]])
        assert [(f["Floating IP Address"], f["Port"]) for f in fips] == \
            [(fip["floating_ip_address"], fip["port_id"])]
        assert [(v["Size"], v["Status"]) for v in vols] == [(5, "in-use")]
        # this client prints the image as created, before its upload
        shown = conn.get_image(made["id"])
        assert shown.status == "active" and shown.size == 4096
        assert shown.checksum == hashlib.md5(data.read_bytes()).hexdigest()
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


def test_malformed_requests_get_4xx(sim):
    """Whatever a client sends (unknown routes, methods, bodies of the
    wrong shape), the simulator answers as the service would, 4xx, and
    never with a 5xx that a test would take for an injected fault."""
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", sim.info["port"], timeout=10)

    def call(method, path, body=None, tok=None):
        h = {"Content-Type": "application/json"}
        if tok:
            h["X-Auth-Token"] = tok
        c.request(method, "/sim" + path, body=body, headers=h)
        r = c.getresponse()
        return r.status, r.getheader("X-Subject-Token"), r.read()

    auth = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": "nodepool", "domain": {"name": "Default"}, "password": "secret"}}},
        "scope": {"project": {"name": "nodepool", "domain": {"name": "Default"}}}}}
    st, tok, _ = call("POST", "/identity/v3/auth/tokens", json.dumps(auth))
    assert st == 201
    img = json.loads(call("GET", "/RegionOne/image/v2/images", tok=tok)[2])["images"][0]["id"]
    st, _, b = call("POST", "/RegionOne/compute/v2.1/servers", json.dumps({"server": {
        "name": "x", "imageRef": img, "flavorRef": "1", "networks": "auto"}}), tok)
    sid = json.loads(b)["server"]["id"]
    port = json.loads(call("GET", "/RegionOne/network/v2.0/ports", tok=tok)[2])["ports"][0]["id"]
    pid = sim.info["clouds"]["sim"]["project_id"]
    paths = ["/identity/v3/auth/tokens", "/identity/v3/projects", "/identity/v2.0",
             "/RegionOne/compute/v2.1/servers", "/RegionOne/compute/v2.1/servers/detail",
             "/RegionOne/compute/v2.1/servers/S", "/RegionOne/compute/v2.1/servers/S/metadata",
             "/RegionOne/compute/v2.1/servers/S/metadata/k",
             "/RegionOne/compute/v2.1/servers/S/action", "/RegionOne/compute/v2.1/flavors/1",
             "/RegionOne/compute/v2.1/os-keypairs", "/RegionOne/compute/v2.1/limits",
             "/RegionOne/image/v2/images", "/RegionOne/image/v2/images/I",
             "/RegionOne/image/v2/images/I/file", "/RegionOne/image/v2/images/I/tags/t",
             "/RegionOne/network/v2.0/networks", "/RegionOne/network/v2.0/ports/P",
             "/RegionOne/network/v2.0/floatingips", "/RegionOne/network/v2.0/floatingips/F",
             "/RegionOne/volume/v3/%s/volumes" % pid, "/RegionOne/volume/v3/%s/volumes/V" % pid,
             "/RegionOne/compute", "/RegionOne/nothing", "/Nowhere/compute/v2.1/servers"]
    bodies = [b"{", b"[]", b"1", b'{"server": {"name": 1, "networks": [1]}}',
              b'{"server": {"name": "a", "flavorRef": "1", "imageRef": "%s", '
              b'"networks": [{"uuid": 5}], "block_device_mapping_v2": [1]}}' % img.encode(),
              b'{"floatingip": {"port_id": 1}}', b'{"volume": {"size": "x"}}',
              b'[{"op": "add"}]', b'{"os-getConsoleOutput": 5}', b'{"metadata": []}']
    bad = []
    for p in paths:
        p = p.replace("/S", "/" + sid).replace("/I", "/" + img).replace("/P", "/" + port)
        for m in ("GET", "HEAD", "DELETE", "POST", "PUT", "PATCH"):
            for body in [None] if m in ("GET", "HEAD", "DELETE") else bodies:
                st, _, b = call(m, p, body, tok)
                if st >= 500:
                    bad.append((m, p, body, st, b[:200]))
    assert bad == []
    assert sim.calls()["total"] > 700  # every route above, each method and body
    c.close()


def test_shell_fixture_from_nodepool_yaml(tmp_path):
    """The path `make demo` and bench/ take: clouds_yaml.py derives the
    simulator's config from a nodepool.yaml, ossim.sh starts it and writes
    clouds.yaml and env, the `openstack` command reaches a provider's
    region through it, ossim.sh stops exactly that pid."""
    d = tmp_path / "sh"
    np = os.path.join(TOP, "tests/data/configs/opendev/nl04.opendev.org.yaml")
    subprocess.run([sys.executable, os.path.join(SIM_DIR, "clouds_yaml.py"), "--from-nodepool",
                    np, "--sim-config", str(tmp_path / "sim.json")], check=True)
    fixture = os.path.join(SIM_DIR, "ossim.sh")
    subprocess.run(["sh", fixture, "start", str(d), "--config", str(tmp_path / "sim.json")],
                   check=True, timeout=60)
    try:
        env = {}
        for line in (d / "env").read_text().splitlines():
            k, v = line.replace("export ", "").split("=", 1)
            env[k] = v
        pid = int(env["OSSIM_PID"])
        os.kill(pid, 0)
        e = dict(os.environ, HOME=str(tmp_path), **env)
        out = subprocess.run(["openstack", "--os-cloud", "ovh-GRA1", "flavor", "list", "-f",
                              "json"], env=e, capture_output=True, timeout=60)
        assert out.returncode == 0, out.stderr.decode()
        assert "ssd-osFoundation-3" in [f["Name"] for f in json.loads(out.stdout)]
        with urllib.request.urlopen(env["OSSIM_CONTROL"] + "/calls") as r:
            calls = json.loads(r.read())["calls"]
        assert {(c["cloud"], c["region"]) for c in calls if c["service"] == "compute"} == \
            {("ovh", "GRA1")}
    finally:
        subprocess.run(["sh", fixture, "stop", str(d)], check=True, timeout=30)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


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
