"""The azure driver end to end against the Azure simulator (tests/sim/azure):
upstream Nodepool's own azure test config (tests/data/upstream-fixtures/
azure.yaml, nodepool/tests/fixtures/azure.yaml in upstream) filled in as
upstream's test fills it, the service principal's auth file pointing at the
simulator (its endpoint keys) over HTTPS with the simulator's CA
(REQUESTS_CA_BUNDLE), serving its labels to the Zuul-faithful requester;
and the faults: 500s, throttling with Retry-After, a cloud that stops
answering, a VM that never boots, quota, a launcher killed mid-launch, and
leak cleanup by tags. After each, every request has ended fulfilled or
failed and the simulator holds nothing that no node accounts for."""
import base64
import os
import signal

import pytest
import yaml

from azuresim_fixture import AzureSim
from conftest import TOP, Proc, bin_path, wait_for
from operator_helpers import build_record, nodepool, upload_record, write_build, write_upload

FIXTURES = os.path.join(TOP, "tests", "data", "upstream-fixtures")
PROVIDER = "azure"
SUBNET = ("/subscriptions/c35cf7df-ed75-4c85-be00-535409a85120/resourceGroups/nodepool/"
          "providers/Microsoft.Network/virtualNetworks/NodePool/subnets/default")


@pytest.fixture
def sim(tmp_path):
    s = AzureSim(tmp_path, {
        "boot_delay": 0.3, "delete_delay": 0.1,
        "images": [{"name": "test1", "tags": {}},
                   {"name": "test2", "tags": {"foo": "bar"}},
                   {"name": "test0", "tags": {"foo": "bar"}}]}).start()
    yield s
    s.stop()


def fixture_config(sim, name="azure.yaml", provider=None, top=None):
    """An upstream fixture as upstream's test fills it (str.format with the
    auth file), minus its ZooKeeper and webapp sections (the deployment
    writes its own), with no host-key scan (simulated VMs have no sshd) and
    a rate the tests need not wait for (upstream's default is 1 call/s)."""
    with open(os.path.join(FIXTURES, name)) as f:
        text = f.read()
    text = text.format(zookeeper_host="", zookeeper_port=0, zookeeper_chroot="",
                       zookeeper_ca="", zookeeper_cert="", zookeeper_key="",
                       images_dir="/var/lib/nodepool/images",
                       build_log_dir="/var/log/nodepool/builds", auth_path=sim.auth_path)
    cfg = yaml.safe_load(text)
    for k in ("zookeeper-servers", "zookeeper-tls", "webapp"):
        cfg.pop(k, None)
    p = cfg["providers"][0]
    p["rate"] = 50
    p.update(provider or {})
    for pool in p["pools"]:
        pool["host-key-checking"] = False
    cfg.update(top or {})
    return cfg


def launcher(deployment, sim, cfg):
    log = os.path.join(deployment.dir, "launcher-%d.log" % len(deployment.procs))
    p = Proc([bin_path("nodepool-launcher"), "-d", "-p", PROVIDER, "-c",
              deployment.write_config(cfg)], log, env=sim.env())
    deployment.procs.append(p)
    return p


def vms(sim):
    return {v["name"]: v for v in sim.vms()}


def assert_nothing_left(zuul, sim, timeout=40):
    """Every node gone and the simulator holding nothing of ours: no VM,
    NIC, public IP or OS disk."""
    def left():
        st = sim.state()
        return [(t, r["name"]) for t in ("virtualMachines", "networkInterfaces",
                                          "publicIPAddresses", "disks")
                for r in st[t]]
    wait_for(lambda: zuul.nodes() == {} and left() == [], timeout=timeout,
             what="nodes and cloud resources deleted")


def assert_no_leak(zuul, sim, timeout=40):
    """Whatever the simulator holds belongs to a node."""
    wait_for(lambda: sim.leaks([n["external_id"] for n in zuul.nodes().values()
                                if n.get("external_id")]) == [],
             timeout=timeout, what="no cloud resource without a node")


def test_upstream_fixture_serves_its_labels(deployment, zuul, sim):
    p = launcher(deployment, sim, fixture_config(sim))
    labels = ("bionic", "windows-password", "windows-generate", "image-by-name",
              "image-by-tag")
    rids = {lb: zuul.submit([lb], tenant="tenant-1") for lb in labels}
    reqs = {lb: zuul.wait_request(rid, timeout=40) for lb, rid in rids.items()}
    assert {lb: r["state"] for lb, r in reqs.items()} == dict.fromkeys(labels, "fulfilled"), \
        p.output()[-3000:]
    nodes = zuul.nodes()
    by_label = {n["type"][0]: (nid, n) for nid, n in nodes.items()}
    st = sim.state()
    the_vms = {v["name"]: v for v in st["virtualMachines"]}
    pips = {r["name"]: r for r in st["publicIPAddresses"]}
    for lb, (nid, n) in by_label.items():
        vm = the_vms[n["external_id"]]
        assert n["external_id"] == "np" + nid and n["state"] == "ready"
        assert n["provider"] == PROVIDER and n["region"] == "centralus"
        assert n["cloud"] == "Azure"
        # upstream's public IPv4: Standard, static, named <vm>-v4-ip
        pip = pips[n["external_id"] + "-v4-ip"]
        assert n["interface_ip"] == pip["ip"] == n["public_ipv4"]
        assert n["private_ipv4"].startswith("10.0.")
        assert n["attributes"] == {"key1": "value1", "key2": "value2"}
        assert vm["tags"]["nodepool_provider_name"] == PROVIDER
        assert vm["tags"]["nodepool_node_id"] == nid
        assert vm["tags"]["nodepool_pool_name"] == "main"
        assert vm["size"] == "Standard_B1ls"
        assert vm["os_disk"]["deleteOption"] == "Delete"
    bionic = the_vms[by_label["bionic"][1]["external_id"]]
    assert bionic["tags"]["department"] == "R&D" and bionic["tags"]["team"] == "DevOps"
    assert bionic["tags"]["dynamic-tenant"] == "Tenant is tenant-1"
    assert base64.b64decode(bionic["user_data"]) == b"This is the user data"
    assert base64.b64decode(bionic["custom_data"]) == b"This is the custom data"
    assert bionic["image"] == {"sku": "18.04-LTS", "publisher": "Canonical",
                               "version": "latest", "offer": "UbuntuServer"}
    osp = bionic["os_profile"]
    assert osp["adminUsername"] == "zuul"
    assert osp["linuxConfiguration"]["ssh"]["publicKeys"][0]["path"] == \
        "/home/zuul/.ssh/authorized_keys"
    assert osp["linuxConfiguration"]["ssh"]["publicKeys"][0]["keyData"].startswith("ssh-rsa ")
    assert by_label["bionic"][1]["shell_type"] == "sh"
    win = the_vms[by_label["windows-password"][1]["external_id"]]
    assert win["admin_password"] == "reallybadpassword123"
    gen = the_vms[by_label["windows-generate"][1]["external_id"]]["admin_password"]
    assert len(gen) == 64 and gen.isalnum() and gen != gen.lower() and gen != gen.upper()
    images = {i["name"]: i["id"] for i in st["images"]}
    assert the_vms[by_label["image-by-name"][1]["external_id"]]["image"] == \
        {"id": images["test1"]}
    # image-filter by tag: the last of the matches by name
    assert the_vms[by_label["image-by-tag"][1]["external_id"]]["image"] == \
        {"id": images["test2"]}
    # Zuul uses them and gives them back: everything goes
    for rid in rids.values():
        zuul.finish(zuul.accept(rid))
    assert_nothing_left(zuul, sim)
    calls = sim.calls()
    assert calls["PUT virtualMachines"] == 5 and calls["DELETE virtualMachines"] == 5
    # shared listings: far fewer than one per machine per poll
    assert calls.get("GET virtualMachines", 0) < 40, calls


def test_diskimage_upload_boots(deployment, zuul, sim):
    """upstream's azure-diskimage.yaml: a label on a diskimage boots from
    the upload's image, looked up by its name (the upload's external id)."""
    img = sim.ctl("POST", "/images", {"name": "fake-image-0000000001"})
    bid = write_build(zuul.zk, "fake-image", build_record(formats="vhd"))
    write_upload(zuul.zk, "fake-image", bid, PROVIDER,
                 upload_record(external_id="fake-image-0000000001",
                               external_name="fake-image-0000000001"))
    cfg = fixture_config(sim, "azure-diskimage.yaml")
    launcher(deployment, sim, cfg)
    label = cfg["providers"][0]["pools"][0]["labels"][0]["name"]
    rid = zuul.submit([label])
    assert zuul.wait_request(rid, timeout=40)["state"] == "fulfilled"
    (nid, n), = zuul.nodes().items()
    vm = vms(sim)[n["external_id"]]
    assert vm["image"] == {"id": img["id"]}
    zuul.finish(zuul.accept(rid))
    assert_nothing_left(zuul, sim)


def test_external_and_gallery_images(deployment, zuul, sim):
    """upstream's azure-external-image.yaml (image-id of an image in the
    subscription) and azure-gallery-image.yaml (community and shared
    gallery images, referenced as upstream builds their ids)."""
    sim.ctl("POST", "/images", {"name": "test-image-1234"})
    ext = fixture_config(sim, "azure-external-image.yaml")
    gal = fixture_config(sim, "azure-gallery-image.yaml")
    gal["providers"][0]["name"] = "azure-gallery"
    cfg = dict(ext, labels=ext["labels"] + gal["labels"],
               providers=ext["providers"] + gal["providers"])
    launcher(deployment, sim, cfg)
    log = os.path.join(deployment.dir, "launcher-gallery.log")
    deployment.procs.append(Proc([bin_path("nodepool-launcher"), "-d", "-p", "azure-gallery",
                                  "-c", deployment.write_config(cfg)], log, env=sim.env()))
    # both pools registered first: a request whose label no registered pool
    # serves is declined by every pool and fails (upstream's rule), which a
    # slow start of the second launcher would otherwise let happen
    wait_for(lambda: {p["provider_name"] for p in zuul.pools()} == {"azure", "azure-gallery"},
             60, what="both providers' pools registered")
    rids = {lb: zuul.submit([lb]) for lb in ("bionic", "community-bionic", "shared-bionic")}
    for lb, rid in rids.items():
        assert zuul.wait_request(rid, timeout=40)["state"] == "fulfilled", lb
    images = {n["type"][0]: vms(sim)[n["external_id"]]["image"]
              for n in zuul.nodes().values()}
    assert images == {
        "bionic": {"id": "/subscriptions/c35cf7df-ed75-4c85-be00-535409a85120/resourceGroups/"
                         "nodepool/providers/Microsoft.Compute/images/test-image-1234"},
        "community-bionic": {"communityGalleryImageId": "/CommunityGalleries/community-gallery"
                                                        "/Images/community-image/Versions/latest"},
        "shared-bionic": {"sharedGalleryImageId": "/SharedGalleries/shared-gallery/Images/"
                                                  "shared-image/Versions/latest"}}
    for rid in rids.values():
        zuul.finish(zuul.accept(rid))
    assert_nothing_left(zuul, sim)


def test_min_ready(deployment, zuul, sim):
    """upstream's azure-min-ready.yaml: one node kept ready by the
    launcher's own min-ready request (which has no tenant: its dynamic tag
    reads None, as Python formats upstream's)."""
    launcher(deployment, sim, fixture_config(sim, "azure-min-ready.yaml"))

    def ready():
        return [(nid, n) for nid, n in zuul.nodes().items() if n["state"] == "ready"]
    ((nid, n),) = wait_for(ready, timeout=40, what="a min-ready node")
    vm = vms(sim)[n["external_id"]]
    # the tags upstream writes: the label's, then nodepool_* (no more)
    assert vm["tags"] == {"department": "R&D", "team": "DevOps", "systemPurpose": "CI",
                          "dynamic-tenant": "Tenant is None", "nodepool_node_id": nid,
                          "nodepool_pool_name": "main", "nodepool_provider_name": PROVIDER}


def test_network_by_name_and_a_missing_one(deployment, zuul, sim):
    """`network` instead of `subnet-id`: the subnet looked up (subnets.get,
    subnet "default"); a network that does not exist fails the request
    with the cloud's answer instead of holding it."""
    cfg = fixture_config(sim, provider={"network": "NodePool"})
    del cfg["providers"][0]["subnet-id"]
    p = launcher(deployment, sim, cfg)
    rid = zuul.submit(["bionic"])
    assert zuul.wait_request(rid, timeout=40)["state"] == "fulfilled"
    (n,) = zuul.nodes().values()
    st = sim.state()
    assert sim.calls()["GET subnets"] == 1
    (nic,) = [x for x in st["networkInterfaces"] if x["name"] == n["external_id"] + "-nic"]
    p.stop()
    cfg["providers"][0]["network"] = {"network": "nope", "subnet": "default"}
    p = launcher(deployment, sim, cfg)
    rid = zuul.submit(["bionic"])
    assert zuul.wait_request(rid, timeout=40)["state"] == "failed"
    assert "subnet lookup: ResourceNotFound" in p.output()


def test_server_errors_and_throttling_are_retried(deployment, zuul, sim):
    """500s are retried (ARM's PUT is idempotent: one VM); 429 and 503 wait
    the Retry-After the cloud gives, for the token endpoint as for ARM."""
    sim.fault(method="PUT", path="virtualMachines/", status=500, count=2)
    sim.fault(method="GET", path="virtualMachines$", status=429, retry_after=1, count=2)
    sim.fault(method="POST", path="oauth2/token", status=429, retry_after=1, count=1)
    sim.fault(method="GET", path="networkInterfaces$", status=503, retry_after=1, count=1)
    p = launcher(deployment, sim, fixture_config(sim))
    rid = zuul.submit(["bionic"])
    assert zuul.wait_request(rid, timeout=40)["state"] == "fulfilled", p.output()[-3000:]
    assert len(sim.vms()) == 1
    calls = sim.calls()
    assert calls["PUT virtualMachines"] == 3
    faults = sim.ctl("GET", "/faults")["faults"]
    assert [f["hits"] for f in faults] == [2, 2, 1, 1]
    zuul.finish(zuul.accept(rid))
    assert_nothing_left(zuul, sim)


def test_paged_listings(deployment, zuul, sim):
    """ARM lists in pages (nextLink): the shared listings, SKUs and leak
    cleanup follow every page."""
    sim.ctl("POST", "/behavior", {"page_size": 2})
    launcher(deployment, sim, fixture_config(sim, top={"nodepoold": {"cleanup-interval": 1}}))
    rids = [zuul.submit(["bionic"]) for _ in range(5)]
    for rid in rids:
        assert zuul.wait_request(rid, timeout=60)["state"] == "fulfilled"
    assert len(sim.vms()) == 5
    for rid in rids:
        zuul.finish(zuul.accept(rid))
    assert_nothing_left(zuul, sim)


def test_token_refused_is_renewed(deployment, zuul, sim):
    """A token the cloud stops taking (401 on ARM) is dropped and a new one
    fetched (client credentials again); the call is sent once more."""
    launcher(deployment, sim, fixture_config(sim))
    rid = zuul.submit(["bionic"])
    assert zuul.wait_request(rid, timeout=40)["state"] == "fulfilled"
    tokens = sim.calls()["POST token"]
    sim.ctl("POST", "/tokens/expire")
    rid2 = zuul.submit(["bionic"])
    assert zuul.wait_request(rid2, timeout=40)["state"] == "fulfilled"
    assert sim.calls()["POST token"] == tokens + 1
    assert len(sim.vms()) == 2


def test_failed_create_is_retried_then_fails_cleanly(deployment, zuul, sim):
    """A VM that goes Failed is deleted and the launch retried; when every
    attempt fails the request fails and nothing is left."""
    sim.ctl("POST", "/behavior", {"boot_outcome": "failed"})
    p = launcher(deployment, sim, fixture_config(sim, provider={"launch-retries": 2}))
    rid = zuul.submit(["bionic"])
    assert zuul.wait_request(rid, timeout=40)["state"] == "failed"
    assert "in failed state" in p.output()
    assert sim.calls()["PUT virtualMachines"] == 2
    assert_nothing_left(zuul, sim)


def test_vm_that_never_boots_times_out(deployment, zuul, sim):
    sim.ctl("POST", "/behavior", {"boot_outcome": "never"})
    launcher(deployment, sim, fixture_config(sim, provider={"launch-timeout": 3,
                                                             "launch-retries": 1}))
    rid = zuul.submit(["bionic"])
    assert zuul.wait_request(rid, timeout=40)["state"] == "failed"
    assert_nothing_left(zuul, sim)


def test_cloud_that_stops_answering(deployment, zuul, sim):
    """ARM holds every call unanswered, then answers again: the request in
    flight is served once it does, nothing left over."""
    fid = sim.fault(path="/subscriptions/", hang=True)
    p = launcher(deployment, sim, fixture_config(sim))
    rid = zuul.submit(["bionic"])
    wait_for(lambda: sim.ctl("GET", "/faults")["faults"][0]["hits"] >= 2, timeout=20,
             what="calls hanging")
    assert zuul.request(rid)["state"] in ("requested", "pending")
    sim.clear_fault(fid)  # hung calls are cut; the driver retries them
    assert zuul.wait_request(rid, timeout=60)["state"] == "fulfilled", p.output()[-3000:]
    zuul.finish(zuul.accept(rid))
    assert_nothing_left(zuul, sim)


def test_quota_from_usages_and_quota_refusal(deployment, zuul, sim):
    """The location's core limit (compute usages) at 2 with 1-vCPU
    Standard_B1ls (resource SKUs): two nodes at once, the third waits for
    one to go."""
    sim.ctl("POST", "/behavior", {"limits": {"cores": 2}})
    launcher(deployment, sim, fixture_config(sim))
    rids = [zuul.submit(["bionic"]) for _ in range(3)]

    def states():
        return [(zuul.request(r) or {}).get("state") for r in rids]
    wait_for(lambda: states().count("fulfilled") == 2, timeout=40, what="two fulfilled")
    waiting = [r for r, s in zip(rids, states()) if s != "fulfilled"]
    assert len(waiting) == 1 and "failed" not in states()
    assert len(sim.vms()) == 2
    zuul.finish(zuul.accept([r for r in rids if r not in waiting][0]))
    assert zuul.wait_request(waiting[0], timeout=40)["state"] == "fulfilled"
    assert_no_leak(zuul, sim)


def test_quota_error_at_create_aborts(deployment, zuul, sim):
    """A refusal for quota the launcher did not know (ARM's 409
    OperationNotAllowed naming a quota) aborts the launch, not fails it:
    the request is served once the cloud takes the VM."""
    sim.fault(method="PUT", path="virtualMachines/", status=409, code="OperationNotAllowed",
              message="Operation could not be completed as it results in exceeding approved "
                      "standardBSFamily Cores quota.", count=1)
    p = launcher(deployment, sim, fixture_config(sim))
    rid = zuul.submit(["bionic"])
    assert zuul.wait_request(rid, timeout=40)["state"] == "fulfilled"
    assert "quota" in p.output()
    assert len(sim.vms()) == 1


def test_launcher_killed_mid_launch_leaks_nothing(deployment, zuul, sim):
    sim.ctl("POST", "/behavior", {"boot_delay": 30})
    cfg = fixture_config(sim, top={"zookeeper-timeout": 2,
                                   "nodepoold": {"cleanup-interval": 2, "delete-interval": 0.5}})
    p = launcher(deployment, sim, cfg)
    rid = zuul.submit(["bionic"])
    wait_for(lambda: len(sim.vms()) == 1, timeout=20, what="VM created")
    p.signal(signal.SIGKILL)
    p.stop()
    sim.ctl("POST", "/behavior", {"boot_delay": 0.3})
    launcher(deployment, sim, cfg)
    assert zuul.wait_request(rid, timeout=60)["state"] == "fulfilled"
    assert_no_leak(zuul, sim, timeout=60)
    assert len(sim.vms()) == 1


def test_leaks_are_cleaned_up_by_tags(deployment, zuul, sim):
    """upstream's listResources: VMs, NICs, public IPs, disks and images
    tagged with this provider and no node (or upload) are deleted; another
    provider's and untagged ones are kept."""
    ours = {"nodepool_provider_name": PROVIDER, "nodepool_node_id": "0000099999",
            "nodepool_pool_name": "main"}
    theirs = {"nodepool_provider_name": "elsewhere", "nodepool_node_id": "0000099998"}
    for t in ("networkInterfaces", "publicIPAddresses", "disks"):
        sim.ctl("POST", "/resources", {"type": t, "name": "leaked-" + t, "tags": ours})
        sim.ctl("POST", "/resources", {"type": t, "name": "theirs-" + t, "tags": theirs})
    sim.ctl("POST", "/images", {"name": "leaked-image", "tags": dict(
        nodepool_provider_name=PROVIDER, nodepool_build_id="00ff", nodepool_upload_id="0000000007")})
    launcher(deployment, sim, fixture_config(sim, top={"nodepoold": {"cleanup-interval": 1}}))

    def names():
        st = sim.state()
        return sorted(r["name"] for t in ("networkInterfaces", "publicIPAddresses", "disks",
                                          "images") for r in st[t])
    wait_for(lambda: names() == sorted(["theirs-disks", "theirs-networkInterfaces",
                                        "theirs-publicIPAddresses", "test0", "test1",
                                        "test2"]),
             timeout=30, what="leaked resources deleted")


@pytest.mark.parametrize("size", [512 * 3, 9 * 1024 * 1024 + 512], ids=["one-page", "three-pages"])
def test_builder_uploads_through_a_disk_and_the_launcher_boots_it(deployment, zk, zuul, sim,
                                                                   size):
    """The builder's upload to an azure provider, as upstream's
    AzureSnapshotUploader: a disk created for upload (tagged), write
    access granted (its SAS URL), the file written as 4 MiB page-blob
    pages (a page failing once is written again), access revoked, an
    image made from the disk, the disk deleted. The launcher then boots
    the image; the upload deleted, the builder deletes the image."""
    import hashlib
    import json
    from builder_helpers import builder_config, start_builder
    sim.fault(method="PUT", path="^/_blob/", status=500, count=1)
    cfg = builder_config(deployment, providers=(), env={"FAKE_DIB_SIZE": str(size)})
    cfg["providers"] = [{
        "name": PROVIDER, "driver": "azure", "auth-path": sim.auth_path, "rate": 100,
        "location": "centralus", "resource-group": "nodepool",
        "resource-group-location": "centralus", "subnet-id": SUBNET,
        "diskimages": [{"name": "img", "username": "zuul", "tags": {"team": "ci"}}],
        "pools": [{"name": "main", "max-servers": 5, "host-key-checking": False, "labels": [
            {"name": "img-label", "diskimage": "img",
             "hardware-profile": {"vm-size": "Standard_B1s"}}]}]}]
    path = deployment.write_config(cfg)
    start_builder(deployment, path, env=sim.env())

    def upload():
        try:
            for b in zk.get_children("/nodepool/images/img/builds"):
                base = "/nodepool/images/img/builds/%s/providers/%s/images" % (b, PROVIDER)
                for u in zk.get_children(base) if zk.exists(base) else []:
                    rec = json.loads(zk.get(base + "/" + u)[0] or b"{}")
                    if rec.get("state") == "ready":
                        return b, u, rec
        except Exception:
            return None
    bid, uid, rec = wait_for(upload, timeout=90, what="a ready upload")
    st = sim.state()
    (img,) = [i for i in st["images"] if i["name"] == rec["external_id"]]
    # the provider diskimage's tags, then the upload's (upstream's builder)
    assert img["tags"] == {"team": "ci", "nodepool_build_id": bid, "nodepool_upload_id": uid,
                           "nodepool_provider_name": PROVIDER}
    # the image holds the file's bytes, as written page by page
    (vhd,) = [os.path.join(dp, f) for dp, _, fs in os.walk(cfg["images-dir"]) for f in fs
              if f.endswith(".vhd")]
    with open(vhd, "rb") as f:
        assert img["sha256"] == hashlib.sha256(f.read()).hexdigest()
    assert st["disks"] == []  # the upload disk went once the image was made
    calls = sim.calls()
    pages = -(-size // (4 << 20))
    assert calls["PUT page"] == pages + 1  # one written twice
    assert calls["POST disks/beginGetAccess"] == 1 and calls["POST disks/endGetAccess"] == 1
    assert calls["PUT images"] == 1 and calls["DELETE disks"] == 1
    # the launcher boots it
    launcher(deployment, sim, cfg)
    rid = zuul.submit(["img-label"])
    assert zuul.wait_request(rid, timeout=40)["state"] == "fulfilled"
    (nid,) = zuul.request(rid)["nodes"]
    vm = vms(sim)[zuul.node(nid)["external_id"]]
    assert vm["image"] == {"id": img["id"]}
    # an upload deleted (`nodepool image-delete`): the builder deletes its
    # image, polling the long-running operation
    r = nodepool(path, "image-delete", "--provider", PROVIDER, "--image", "img",
                 "--build-id", bid, "--upload-id", uid)
    assert r.returncode == 0, r.stderr
    wait_for(lambda: rec["external_id"] not in [i["name"] for i in sim.state()["images"]],
             timeout=60, what="the image deleted")
    assert sim.calls()["DELETE images"] == 1
