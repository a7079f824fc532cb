"""The ibmvpc driver end to end against the IBM Cloud VPC simulator
(tests/sim/ibmvpc, HTTPS): upstream Nodepool's own ibmvpc fixture
(tests/data/upstream-fixtures/ibmvpc.yaml, upstream's schema) pointed at the
simulator through an ibm-credentials.env (its `credentials-file`), serving
its labels to the Zuul-faithful requester; then the faults: a 500, 429s with
Retry-After, a cloud that stops answering, a VM that never boots (and one
that fails), quota, an IAM token that expires, a launcher killed mid-launch,
and leak cleanup by name and resource group, as upstream encodes metadata.
After each, every request is fulfilled or failed and the account holds
nothing no node accounts for."""
import copy
import os
import signal
import subprocess

import pytest
import yaml

from conftest import TOP, bin_path, wait_for
from ibmvpcsim_fixture import IbmVpcSim

FIXTURE = os.path.join(TOP, "tests/data/upstream-fixtures/ibmvpc.yaml")
PROVIDER = "ibmvpc"
# what upstream's tests put in the fixture's {placeholders}; the ZooKeeper
# keys are replaced by the deployment's own
PLACEHOLDERS = dict(images_dir="/tmp/np-images", build_log_dir="/tmp/np-build-logs",
                    zookeeper_host="localhost", zookeeper_port=2281, zookeeper_chroot="/x",
                    zookeeper_ca="ca", zookeeper_cert="cert", zookeeper_key="key")


@pytest.fixture
def sim(tmp_path):
    s = IbmVpcSim(tmp_path, {"boot_delay": 0.3, "delete_delay": 0.1, "fip_delay": 0.1,
                             "interface_ip": "127.0.0.1"}).start()
    yield s
    s.stop()


@pytest.fixture
def sshd(tmp_path):
    d = str(tmp_path / "sshd")
    port = int(subprocess.check_output(
        ["sh", os.path.join(TOP, "tests/sshd-fixture.sh"), "start", d]).decode().split()[-1])
    with open(os.path.join(d, "host_keys")) as f:
        keys = [line.strip() for line in f if line.strip()]
    yield port, keys
    subprocess.call(["sh", os.path.join(TOP, "tests/sshd-fixture.sh"), "stop", d])


def upstream_config(deployment, sim, provider=None, top=None, ssh_port=None):
    """Upstream's ibmvpc fixture as its tests fill it in, plus what this
    deployment needs: the credentials file pointing at the simulator, and
    (for the public pool, which scans host keys) the sshd's port."""
    with open(FIXTURE) as f:
        cfg = yaml.safe_load(f.read().format(**PLACEHOLDERS))
    for k in ("zookeeper-servers", "zookeeper-tls", "webapp"):
        cfg.pop(k, None)
    cfg = copy.deepcopy(cfg)
    p = cfg["providers"][0]
    p["credentials-file"] = sim.write_credentials(
        os.path.join(deployment.dir, "ibm-credentials.env"))
    if ssh_port is not None:
        for im in p["cloud-images"]:
            im["connection-port"] = ssh_port
    else:
        for pool in p["pools"]:
            pool["host-key-checking"] = False
    p.update(provider or {})
    cfg.update(top or {})
    return cfg


def launcher(deployment, sim, cfg):
    env = sim.env()
    env["HOME"] = deployment.dir  # no ~/ibm-credentials.env of the machine's
    return deployment.start([bin_path("nodepool-launcher"), "-d", "-p", PROVIDER, "-c",
                             deployment.write_config(cfg)], "launcher", env=env)


def by_name(objs):
    return {o["name"]: o for o in objs}


def assert_clean(sim, zuul):
    wait_for(lambda: sim.leaks(zuul.nodes()) == [], timeout=30,
             what="nothing in the account without a node")


def test_upstream_fixture_serves_its_labels(deployment, zuul, sim, sshd):
    port, host_keys = sshd
    p = launcher(deployment, sim, upstream_config(deployment, sim, ssh_port=port))
    rids = {lb: zuul.submit([lb]) for lb in ("debian-private", "debian-public", "debian-filter")}
    reqs = {lb: zuul.wait_request(rid, timeout=40) for lb, rid in rids.items()}
    assert {lb: r["state"] for lb, r in reqs.items()} == dict.fromkeys(rids, "fulfilled"), \
        p.output()[-3000:]
    st = sim.state()
    insts, fips = by_name(st["instances"]), by_name(st["floating_ips"])
    rgs = {rg["id"]: rg["name"] for rg in st["resource_groups"]}
    images = {i["id"]: i["name"] for i in st["images"]}
    keys = {k["id"]: k["name"] for k in st["keys"]}
    for lb, r in reqs.items():
        (nid,) = r["nodes"]
        n = zuul.node(nid)
        i = insts["np" + nid]
        # upstream's metadata: the name and the pool's resource group
        assert n["external_id"] == "np" + nid
        pool = "public" if lb == "debian-public" else "private"
        assert rgs[i["resource_group"]["id"]] == "np_ibmvpc_" + pool
        assert n["provider"] == PROVIDER and n["pool"] == pool
        assert (n["cloud"], n["region"], n["az"]) == ("IBM", "us-south", "us-south-1")
        assert i["status"] == "running" and i["profile"]["name"] == "cx2-2x4"
        assert [keys[k] for k in i["_keys"]] == ["testuser"]
        assert i["_boot_volume"] == {"volume": {"name": "np" + nid,
                                                "profile": {"name": "general-purpose"}},
                                     "delete_volume_on_instance_delete": True}
        assert i["primary_network_interface"]["name"] == "eth0"
        assert n["private_ipv4"] == i["primary_network_interface"]["primary_ipv4_address"]
        assert n["username"] == "zuul"
    # image-name and image-filter (operating-system family + version)
    assert images[insts["np" + reqs["debian-private"]["nodes"][0]]["image"]["id"]] == \
        "ibm-debian-9-13-minimal-amd64-4"
    assert images[insts["np" + reqs["debian-filter"]["nodes"][0]]["image"]["id"]] == \
        "ibm-debian-9-13-minimal-amd64-4"
    # the public pool: a floating IP named like the instance, bound to its
    # primary interface, is the node's address; its host keys were scanned
    pub = zuul.node(reqs["debian-public"]["nodes"][0])
    fip = fips["np" + reqs["debian-public"]["nodes"][0]]
    assert fip["target"]["id"] == insts[fip["name"]]["primary_network_interface"]["id"]
    assert pub["public_ipv4"] == fip["address"] == pub["interface_ip"]
    assert pub["connection_port"] == port and sorted(pub["host_keys"]) == sorted(host_keys)
    assert set(fips) == {fip["name"]}
    calls = sim.calls()
    # the resource groups upstream creates, one per pool; IAM once
    assert calls["POST /v2/resource_groups"] == 2 and calls["POST /identity/token"] == 1
    assert calls["POST /v1/instances"] == 3 and calls["POST /v1/floating_ips"] == 1
    assert calls["PUT /v1/instances/{id}/network_interfaces/{id}/floating_ips/{id}"] == 1
    # Zuul uses them and gives them back: everything goes
    for rid in rids.values():
        zuul.finish(zuul.accept(rid))
    wait_for(lambda: zuul.nodes() == {} and sim.instances() == [] and sim.fips() == [],
             timeout=30, what="nodes deleted")
    calls = sim.calls()
    assert calls["DELETE /v1/instances/{id}"] == 3 and calls["DELETE /v1/floating_ips/{id}"] == 1


def test_every_call_carries_version_generation_and_token(deployment, zuul, sim):
    """Every VPC call names the API version and generation 2 and carries
    an IAM bearer token: the simulator refuses any that does not, so a node
    served proves them; an expired token is answered 401 and replaced."""
    p = launcher(deployment, sim, upstream_config(deployment, sim))
    rid = zuul.submit(["debian-private"])
    assert zuul.wait_request(rid, timeout=30)["state"] == "fulfilled", p.output()[-2000:]
    sim.ctl("POST", "/tokens/expire")
    rid2 = zuul.submit(["debian-filter"])
    assert zuul.wait_request(rid2, timeout=30)["state"] == "fulfilled", p.output()[-2000:]
    assert sim.calls()["POST /identity/token"] == 2
    assert sim.state()["unauthorized"] >= 1  # the expired token's call


def test_token_renewed_before_it_expires(deployment, zuul, sim):
    """Tokens living 4 s: once the first has expired, the next call fetches
    a new one first (the IBM SDK refreshes after 80% of the lifetime), so
    the cloud never refuses a call for its token."""
    sim.ctl("POST", "/behavior", {"token_ttl": 4})
    launcher(deployment, sim, upstream_config(deployment, sim))
    rid = zuul.submit(["debian-private"])
    assert zuul.wait_request(rid, timeout=30)["state"] == "fulfilled"
    assert sim.state()["tokens_issued"] == 1
    wait_for(lambda: sim.state()["tokens_live"] == 0, timeout=20, what="the token expired")
    rid = zuul.submit(["debian-filter"])
    assert zuul.wait_request(rid, timeout=30)["state"] == "fulfilled"
    st = sim.state()
    assert st["tokens_issued"] >= 2 and st["unauthorized"] == 0


def test_server_error_is_retried(deployment, zuul, sim):
    sim.fault(api="vpc", method="POST", path="/v1/instances$", status=500, count=1)
    launcher(deployment, sim, upstream_config(deployment, sim))
    rid = zuul.submit(["debian-private"])
    assert zuul.wait_request(rid, timeout=30)["state"] == "fulfilled"
    assert sim.calls()["POST /v1/instances"] == 2
    assert len(sim.instances()) == 1
    assert_clean(sim, zuul)


def test_throttling_honours_retry_after(deployment, zuul, sim):
    """429s with Retry-After on the create and the listing are retried by
    the HTTP client after the delay; the launch never sees them."""
    f1 = sim.fault(api="vpc", method="POST", path="/v1/instances$", status=429,
                   retry_after=1, count=2)
    f2 = sim.fault(api="vpc", method="GET", path="/v1/instances$", status=429,
                   retry_after=1, count=2)
    p = launcher(deployment, sim, upstream_config(deployment, sim))
    rid = zuul.submit(["debian-private"])
    assert zuul.wait_request(rid, timeout=40)["state"] == "fulfilled", p.output()[-2000:]
    assert sim.ctl("GET", "/faults/%d" % f1)["hits"] == 2
    assert sim.ctl("GET", "/faults/%d" % f2)["hits"] == 2
    # one instance: the throttled creates made none, the third did
    assert sim.calls()["POST /v1/instances"] == 3 and len(sim.instances()) == 1
    assert "instance create" not in p.output()
    assert_clean(sim, zuul)


def test_cloud_that_stops_answering(deployment, zuul, sim):
    """The VPC API holds every call without answering: launches wait (no
    request is lost or doubled); once it answers again they are served and
    nothing is left over."""
    launcher(deployment, sim, upstream_config(deployment, sim))
    rid0 = zuul.submit(["debian-private"])
    assert zuul.wait_request(rid0, timeout=30)["state"] == "fulfilled"
    fid = sim.fault(api="vpc", hang=True)
    rids = [zuul.submit(["debian-private"]), zuul.submit(["debian-filter"])]
    wait_for(lambda: sim.ctl("GET", "/faults/%d" % fid)["hits"] >= 2, timeout=20,
             what="calls held")
    assert all((zuul.request(r) or {}).get("state") != "fulfilled" for r in rids)
    sim.clear_fault(fid)
    for r in rids:
        assert zuul.wait_request(r, timeout=90)["state"] in ("fulfilled", "failed")
    zuul.finish(zuul.accept(rid0))
    assert_clean(sim, zuul)


def test_vm_that_never_boots_fails_cleanly(deployment, zuul, sim):
    sim.ctl("POST", "/behavior", {"boot_outcome": "never"})
    p = launcher(deployment, sim, upstream_config(deployment, sim, provider={
        "launch-timeout": 3, "launch-retries": 2}))
    rid = zuul.submit(["debian-private"])
    assert zuul.wait_request(rid, timeout=60)["state"] == "failed"
    assert sim.calls()["POST /v1/instances"] == 2
    wait_for(lambda: sim.instances() == [], timeout=30, what="both attempts deleted")
    assert "np" in p.output()


def test_vm_in_failed_state_fails_cleanly(deployment, zuul, sim):
    sim.ctl("POST", "/behavior", {"boot_outcome": "failed"})
    p = launcher(deployment, sim, upstream_config(deployment, sim, provider={
        "launch-retries": 2}))
    rid = zuul.submit(["debian-public"])
    assert zuul.wait_request(rid, timeout=60)["state"] == "failed"
    assert "Server in failed state" in p.output()
    wait_for(lambda: sim.instances() == [] and sim.fips() == [], timeout=30,
             what="instances and floating IPs deleted")
    assert sim.calls()["DELETE /v1/floating_ips/{id}"] == 2


def test_quota_exceeded_at_the_cloud(deployment, zuul, sim):
    """The cloud refuses a create for quota (a limit the provider config
    does not know): the launch is aborted, not failed, and the request is
    served once the first node is gone."""
    sim.ctl("POST", "/quota", {"instances": 1})
    p = launcher(deployment, sim, upstream_config(deployment, sim))
    rids = [zuul.submit(["debian-private"]), zuul.submit(["debian-filter"])]

    def states():
        return [(zuul.request(r) or {}).get("state") for r in rids]
    wait_for(lambda: states().count("fulfilled") == 1, timeout=30, what="one fulfilled")
    wait_for(lambda: "over_quota" in p.output(), timeout=30, what="the quota refusal")
    assert "failed" not in states()
    done = rids[states().index("fulfilled")]
    other = [r for r in rids if r != done][0]
    zuul.finish(zuul.accept(done))
    assert zuul.wait_request(other, timeout=60)["state"] == "fulfilled"
    assert_clean(sim, zuul)


def test_provider_quota(deployment, zuul, sim):
    """upstream's getQuotaLimits: the provider's quota (cores 2: one
    cx2-2x4 at a time); the second request waits for the first node."""
    p = launcher(deployment, sim, upstream_config(deployment, sim, provider={
        "quota": {"cores": 2}}))
    # (the framework counts no limit before its first quota read; requests
    # racing it are the cloud's to refuse, which a config quota is not)
    wait_for(lambda: "quota available to nodepool: cores 2" in p.output(), timeout=30,
             what="the quota read")
    rids = [zuul.submit(["debian-private"]), zuul.submit(["debian-filter"])]

    def states():
        return [(zuul.request(r) or {}).get("state") for r in rids]
    wait_for(lambda: states().count("fulfilled") == 1, timeout=30, what="one fulfilled")
    assert len(sim.instances()) == 1 and "failed" not in states()
    done = rids[states().index("fulfilled")]
    zuul.finish(zuul.accept(done))
    other = [r for r in rids if r != done][0]
    assert zuul.wait_request(other, timeout=60)["state"] == "fulfilled"
    assert sim.calls()["POST /v1/instances"] == 2


def test_launcher_killed_mid_launch_leaks_nothing(deployment, zuul, sim):
    sim.ctl("POST", "/behavior", {"boot_delay": 30})
    cfg = upstream_config(deployment, sim, top={
        "zookeeper-timeout": 2, "nodepoold": {"cleanup-interval": 2, "delete-interval": 0.5}})
    p = launcher(deployment, sim, cfg)
    rid = zuul.submit(["debian-public"])
    wait_for(lambda: len(sim.instances()) == 1, timeout=30, what="instance created")
    p.signal(signal.SIGKILL)
    p.stop()
    sim.ctl("POST", "/behavior", {"boot_delay": 0.3})
    launcher(deployment, sim, cfg)
    req = zuul.wait_request(rid, timeout=60)
    assert req["state"] == "fulfilled"
    (nid,) = req["nodes"]  # the abandoned node may still be being deleted
    wait_for(lambda: [i["name"] for i in sim.instances()] == ["np" + nid] and
             [f["name"] for f in sim.fips()] == ["np" + nid], timeout=60,
             what="the abandoned instance and floating IP deleted")
    wait_for(lambda: list(zuul.nodes()) == [nid], timeout=30, what="the abandoned node gone")


def test_leaks_found_by_name_and_resource_group(deployment, zuul, sim):
    """As upstream's listResources: an instance and a floating IP named
    np<id> in our pool's resource group with no such node are deleted; the
    same name in another resource group, and another name in ours, are
    not ours or not a node's, and stay."""
    for name, rg in (("np0000099999", "np_ibmvpc_private"), ("np0000099998", "Default"),
                     ("builder-vm", "np_ibmvpc_private")):
        sim.ctl("POST", "/instances", {"name": name, "resource_group": rg})
    sim.ctl("POST", "/floating_ips", {"name": "np0000099999", "resource_group": "np_ibmvpc_public"})
    launcher(deployment, sim, upstream_config(deployment, sim, top={
        "nodepoold": {"cleanup-interval": 1}}))
    wait_for(lambda: sorted(i["name"] for i in sim.instances()) ==
             ["builder-vm", "np0000099998"] and sim.fips() == [], timeout=40,
             what="the leaked instance and floating IP deleted")


def ibm_builder_config(deployment, sim):
    from builder_helpers import builder_config
    cfg = builder_config(deployment, providers=())
    cfg["providers"] = [{
        "name": "ibm", "driver": "ibmvpc", "vpc": "nodepool", "region": "us-south",
        "subnet": "sn-nodepool", "zone": "us-south-1", "rate": 100,
        "credentials-file": sim.write_credentials(os.path.join(deployment.dir, "creds.env")),
        "object-storage": {"instance-name": "Cloud Object Storage-r6",
                           "endpoint": sim.info["base"], "bucket-name": "np-testbucket"},
        "diskimages": [{"name": "img", "operating-system": "debian-9-amd64"}],
        "pools": [{"name": "main", "max-servers": 2, "host-key-checking": False,
                   "labels": [{"name": "img-label", "diskimage": "img",
                               "profile": "cx2-2x4"}]}]}]
    return cfg


def test_builder_uploads_through_object_storage(deployment, zk, zuul, sim):
    """The builder's upload, as upstream's uploadImage: the image file to
    the Cloud Object Storage bucket (the bearer token and the storage
    instance's CRN on each call), the resource group npimages_<provider>,
    POST /images from cos://<location>/<bucket>/<object>, waited available,
    the object deleted; the launcher then boots the image; image-delete has
    the builder delete the image."""
    import json
    from builder_helpers import start_builder
    path = deployment.write_config(ibm_builder_config(deployment, sim))
    env = dict(sim.env(), HOME=deployment.dir)
    b = start_builder(deployment, path, env=env)

    def upload():
        try:
            for bid in zk.get_children("/nodepool/images/img/builds"):
                base = "/nodepool/images/img/builds/%s/providers/ibm/images" % bid
                for u in zk.get_children(base) if zk.exists(base) else []:
                    rec = json.loads(zk.get(base + "/" + u)[0] or b"{}")
                    if rec.get("state") == "ready":
                        return bid, u, rec
        except Exception:
            return None
    bid, uid, rec = wait_for(upload, timeout=90, what="a ready upload")
    st = sim.state()
    (img,) = [i for i in st["images"] if i["id"] == rec["external_id"]]
    rgs = {g["id"]: g["name"] for g in st["resource_groups"]}
    # upstream's name format npimage{upload_id}; its metadata is that name
    # and the provider's image resource group
    assert img["name"] == rec["external_name"] == "npimage" + uid
    assert img["status"] == "available" and img["owner_type"] == "user"
    assert rgs[img["resource_group"]["id"]] == "npimages_ibm"
    assert img["file"]["href"] == "cos://us-south/np-testbucket/npimage%s.qcow2" % uid
    assert img["operating_system"]["name"] == "debian-9-amd64"
    assert st["buckets"]["np-testbucket"]["objects"] == {}, "the object was not deleted"
    calls = sim.calls()
    assert calls["GET /np-testbucket"] >= 1  # ?location
    assert calls["PUT /np-testbucket/npimage%s.qcow2" % uid] == 1
    assert calls["DELETE /np-testbucket/npimage%s.qcow2" % uid] == 1
    assert calls["POST /v1/images"] == 1
    b.stop()
    # the launcher boots it
    lp = launcher_for(deployment, sim, path, "ibm")
    rid = zuul.submit(["img-label"])
    assert zuul.wait_request(rid, timeout=40)["state"] == "fulfilled", lp.output()[-2000:]
    (nid,) = zuul.request(rid)["nodes"]
    (inst,) = [i for i in sim.instances() if i["name"] == "np" + nid]
    assert inst["image"]["id"] == rec["external_id"]
    # image-delete: the builder deletes the image (upstream's deleteImage)
    from operator_helpers import nodepool
    r = nodepool(path, "image-delete", "--provider", "ibm", "--image", "img",
                 "--build-id", bid, "--upload-id", uid)
    assert r.returncode == 0, r.stderr
    start_builder(deployment, path, env=env, name="builder2")
    wait_for(lambda: rec["external_id"] not in [i["id"] for i in sim.state()["images"]],
             timeout=60, what="the image deleted")
    assert sim.calls()["DELETE /v1/images/{id}"] == 1


def launcher_for(deployment, sim, path, provider):
    env = dict(sim.env(), HOME=deployment.dir)
    return deployment.start([bin_path("nodepool-launcher"), "-d", "-p", provider, "-c", path],
                            "launcher-" + provider, env=env)


def test_failed_image_import_leaves_nothing(deployment, zk, zuul, sim):
    """The image import fails (the cloud marks it failed): the upload is
    failed, and neither the half-made image nor the object stays behind."""
    from builder_helpers import start_builder
    sim.ctl("POST", "/behavior", {"image_outcome": "failed"})
    path = deployment.write_config(ibm_builder_config(deployment, sim))
    b = start_builder(deployment, path, env=dict(sim.env(), HOME=deployment.dir))
    wait_for(lambda: "Image status of npimage" in b.output(), timeout=90,
             what="the failed import reported")
    wait_for(lambda: [i for i in sim.state()["images"] if i["owner_type"] == "user"] == [] and
             sim.state()["buckets"]["np-testbucket"]["objects"] == {}, timeout=30,
             what="image and object deleted")


@pytest.mark.parametrize("what", ["apikey", "vpc"])
def test_refused_key_or_missing_vpc_fails_requests_cleanly(deployment, zuul, sim, tmp_path, what):
    """IAM refusing the API key, or a vpc the account does not have
    (upstream's adapter would not start): every request fails at once with
    the reason in the log, nothing is created, and the worker keeps
    running (it tries again, for an operator who fixes the account)."""
    cfg = upstream_config(deployment, sim)
    p0 = cfg["providers"][0]
    if what == "apikey":
        sim.write_credentials(p0["credentials-file"], apikey="not-the-key")
        reason = "BXNIM0415E"
    else:
        p0["vpc"] = "missing"
        reason = "Unable to find vpc missing"
    p = launcher(deployment, sim, cfg)
    wait_for(lambda: reason in p.output(), timeout=30, what="the reason logged")
    rid = zuul.submit(["debian-private"])
    assert zuul.wait_request(rid, timeout=30)["state"] == "failed"
    assert sim.instances() == [] and "POST /v1/instances" not in sim.calls()
    assert p.alive()


def test_unreadable_credentials_file_is_reported(deployment, zuul, sim):
    """No credentials at all: the provider does not start (the worker's
    error state, as for any driver that cannot start), the log names the
    file, and the cloud is never called."""
    cfg = upstream_config(deployment, sim)
    nope = os.path.join(deployment.dir, "nope.env")
    cfg["providers"][0]["credentials-file"] = nope
    p = launcher(deployment, sim, cfg)
    wait_for(lambda: "provider ibmvpc: cannot read credentials-file %s" % nope in p.output(),
             timeout=30, what="the reason logged")
    assert sim.calls() == {} and p.alive()
