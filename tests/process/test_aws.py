"""The aws driver end to end against the AWS simulator (tests/sim/aws):
the AWS config of the wild configs upstream Nodepool accepts
(tests/data/configs/wild/TinxHQ__wazo-production-sf-config__nodepool__nodepool.yaml),
pointed at the simulator through the SDKs' environment (AWS_ENDPOINT_URL,
AWS_ACCESS_KEY_ID...), serving its labels to the Zuul-faithful requester,
plus a fleet label and a spot label; and the faults: throttling, capacity,
quota, spot interruption, a launcher killed mid-launch."""
import copy
import json
import os
import re
import signal

import pytest
import yaml

from awssim_fixture import AwsSim
from conftest import TOP, Proc, bin_path, wait_for
from operator_helpers import build_record, upload_record, webapp, write_build, write_upload
from test_web import get, parse_metrics

WILD = os.path.join(TOP, "tests/data/configs/wild/"
                    "TinxHQ__wazo-production-sf-config__nodepool__nodepool.yaml")
PROVIDER = "ec2-eu-west-1"


@pytest.fixture
def sim(tmp_path):
    s = AwsSim(tmp_path, {"regions": {"eu-west-1": {}}, "boot_delay": 0.3,
                          "terminate_delay": 0.1}).start()
    yield s
    s.stop()


def wild_config(extra_pool=True, provider=None, top=None):
    """The wild config as upstream accepts it, with our test changes:
    no host-key scan (simulated instances have no sshd), min-ready 0 (the
    test asks), and an extra pool with a fleet label and a spot label."""
    with open(WILD) as f:
        cfg = yaml.safe_load(f)
    cfg = copy.deepcopy(cfg)
    for lb in cfg["labels"]:
        lb["min-ready"] = 0
    cfg.update(top or {})
    p = cfg["providers"][0]
    p["rate"] = 100
    p.update(provider or {})
    for pool in p["pools"]:
        pool["host-key-checking"] = False
    if extra_pool:
        cfg["labels"] += [{"name": "fleet-debian", "min-ready": 0},
                          {"name": "spot-debian", "min-ready": 0}]
        p["cloud-images"] = [{"name": "debian-cloud", "username": "admin",
                              "image-filters": [{"name": "name",
                                                 "values": ["debian-12-*"]}]}]
        p["pools"].append({
            "name": "fleet", "max-servers": 10, "host-key-checking": False,
            "subnet-id": "subnet-0cda0d5056f892394",
            "labels": [
                {"name": "fleet-debian", "cloud-image": "debian-cloud", "key-name": "nodepool",
                 "fleet": {"instance-types": ["m5.large", "t3.large"],
                           "allocation-strategy": "prioritized"},
                 "tags": {"team": "ci"}, "dynamic-tags": {"zuul_tenant": "{request.tenant_name}"}},
                {"name": "spot-debian", "cloud-image": "debian-cloud", "key-name": "nodepool",
                 "instance-type": "t3.medium", "use-spot": True, "imdsv2": "required",
                 "volume-type": "gp3", "volume-size": 30, "iops": 3000, "throughput": 125}]})
    return cfg


def upload_image(sim, zuul):
    """What nodepool-builder would have left: an AMI and its READY upload."""
    ami = sim.ctl("POST", "/images", {"name": "img-debian-12-0000000001",
                                      "region": "eu-west-1"})["id"]
    bid = write_build(zuul.zk, "img-debian-12", build_record(formats="raw"))
    write_upload(zuul.zk, "img-debian-12", bid, PROVIDER,
                 upload_record(external_id=ami, external_name="img-debian-12-0000000001"))
    return ami


def launcher(deployment, sim, cfg):
    env = sim.env()
    env["HOME"] = deployment.dir  # no ~/.aws of the machine's
    log = os.path.join(deployment.dir, "launcher-%d.log" % len(deployment.procs))
    p = Proc([bin_path("nodepool-launcher"), "-d", "-p", PROVIDER, "-c",
              deployment.write_config(cfg)], log, env=env)
    deployment.procs.append(p)
    return p



def tags(i):
    return i["tags"]


def test_wild_config_serves_its_labels(deployment, zuul, sim):
    ami = upload_image(sim, zuul)
    p = launcher(deployment, sim, wild_config())
    rids = {lb: zuul.submit([lb], tenant="wazo") for lb in
            ("vm-debian-12-m1s", "vm-debian-12-m1m", "fleet-debian", "spot-debian")}
    reqs = {lb: zuul.wait_request(rid, timeout=30) for lb, rid in rids.items()}
    assert {lb: r["state"] for lb, r in reqs.items()} == dict.fromkeys(rids, "fulfilled"), \
        p.output()[-3000:]
    insts = {i["id"]: i for i in sim.instances()}
    nodes = zuul.nodes()
    by_label = {n["type"][0]: n for n in nodes.values()}
    for lb, n in by_label.items():
        i = insts[n["external_id"]]
        assert n["state"] == "ready" and n["provider"] == PROVIDER
        assert n["interface_ip"] == i["public_ip"] and n["region"] == "eu-west-1"
        assert tags(i)["nodepool_provider_name"] == PROVIDER
        assert tags(i)["nodepool_node_id"] == n["id"] if "id" in n else True
        assert tags(i)["Name"] == "np" + [k for k, v in nodes.items() if v is n][0]
    m1s, m1m = insts[by_label["vm-debian-12-m1s"]["external_id"]], \
        insts[by_label["vm-debian-12-m1m"]["external_id"]]
    assert (m1s["type"], m1s["image"], m1s["subnet"], m1s["groups"], m1s["key"]) == \
        ("t3.small", ami, "subnet-0cda0d5056f892394", ["sg-0fc30744a6f419196"], "nodepool")
    assert m1m["type"] == "t3.medium"
    fleet = insts[by_label["fleet-debian"]["external_id"]]
    # prioritized: the first type; the template carries the image from the filters
    assert fleet["type"] == "m5.large" and fleet["image"] == "ami-0sim0debian12"
    assert tags(fleet)["team"] == "ci" and tags(fleet)["zuul_tenant"] == "wazo"
    spot = insts[by_label["spot-debian"]["external_id"]]
    assert spot["market"] == "spot" and spot["http_tokens"] == "required"
    assert spot["block_devices"] == {"size": 30, "type": "gp3", "iops": "3000",
                                     "throughput": "125"}
    # Zuul uses them and gives them back: everything is terminated
    for rid in rids.values():
        zuul.finish(zuul.accept(rid))
    wait_for(lambda: zuul.nodes() == {} and sim.instances() == [] and sim.volumes() == [],
             timeout=30, what="nodes deleted")
    calls = sim.calls()
    # one shared describe per poll, terminates batched
    assert calls["ec2:RunInstances"] == 3 and calls["ec2:CreateFleet"] == 1
    assert calls["ec2:DescribeInstances"] < 30, calls


def image_lookups(sim):
    """The launches' DescribeImages calls in order: by filters ("filters")
    or by image id ("id"); the leak listing's (Owner self) left out."""
    return ["filters" if "Filter.1.Name" in c["params"] else "id"
            for c in sim.ctl("GET", "/calls/log")["log"]
            if c["action"] == "DescribeImages" and "Owner.1" not in c["params"]]


def test_image_looked_up_once_per_wave(deployment, zuul, sim):
    """Launches that start together share one DescribeImages per image, as
    upstream caches the answer (by filters for five minutes, by image id for
    good): a wave of eight (four by filters, four of an uploaded image) asks
    twice, where each launch used to ask for itself."""
    ami = upload_image(sim, zuul)
    launcher(deployment, sim, wild_config())
    rids = [zuul.submit([lb]) for lb in ["spot-debian", "vm-debian-12-m1s"] * 4]
    assert [zuul.wait_request(r, timeout=30)["state"] for r in rids] == ["fulfilled"] * 8
    assert sorted(image_lookups(sim)) == ["filters", "id"]
    assert sorted(i["image"] for i in sim.instances()) == [ami] * 4 + ["ami-0sim0debian12"] * 4
    # the next wave asks nothing
    more = [zuul.submit([lb]) for lb in ["spot-debian", "vm-debian-12-m1s"] * 2]
    assert [zuul.wait_request(r, timeout=30)["state"] for r in more] == ["fulfilled"] * 4
    assert sorted(image_lookups(sim)) == ["filters", "id"]


def test_failed_image_lookup_is_asked_again(deployment, zuul, sim):
    """The wave's one DescribeImages fails (an error not retried): its
    launch's attempt fails, the launches that waited for its answer ask
    again (one of them, for all), and every request is served."""
    upload_image(sim, zuul)
    launcher(deployment, sim, wild_config(extra_pool=False))
    wait_for(lambda: "ec2:DescribeInstanceTypes" in sim.calls(), timeout=20,
             what="the launcher up")
    sim.fault(action="DescribeImages", code="AuthFailure", count=1)
    rids = [zuul.submit(["vm-debian-12-m1s"]) for _ in range(4)]
    assert [zuul.wait_request(r, timeout=30)["state"] for r in rids] == ["fulfilled"] * 4
    assert image_lookups(sim) == ["id", "id"]
    assert len(sim.instances()) == 4


def test_throttling_is_retried(deployment, zuul, sim):
    upload_image(sim, zuul)
    sim.fault(action="RunInstances", code="RequestLimitExceeded", count=3)
    sim.fault(action="DescribeInstances", code="RequestLimitExceeded", count=2)
    w = webapp()
    p = launcher(deployment, sim, wild_config(extra_pool=False, top=w))
    rid = zuul.submit(["vm-debian-12-m1s"])
    assert zuul.wait_request(rid, timeout=30)["state"] == "fulfilled"
    # one instance despite three throttled RunInstances (ClientToken)
    assert len(sim.instances()) == 1
    assert sim.calls()["ec2:RunInstances"] == 4
    # each retry visible (issue 24): a debug line naming the API call and
    # the wait, a counter per API on /metrics
    out = p.output()
    assert len(re.findall(r"API ec2:RunInstances: HTTP 503 \(RequestLimitExceeded: [^)]*\), "
                          r"retry \d in [\d.]+ s", out)) == 3, out[-3000:]
    assert len(re.findall(r"API ec2:DescribeInstances: HTTP 503 \(RequestLimitExceeded",
                          out)) == 2

    def retries():
        status, _, body = get(w["webapp"]["port"], "/metrics")
        return {k: v for k, v in parse_metrics(body).items()
                if k.startswith("nodepool_api_retries_total")} if status == 200 else {}
    sample = 'nodepool_api_retries_total{provider="%s",api="ec2:%%s"}' % PROVIDER
    assert wait_for(lambda: retries() == {sample % "RunInstances": 3,
                                          sample % "DescribeInstances": 2} or None,
                    what="the retries on /metrics")


def test_capacity_error_retried_then_failed_cleanly(deployment, zuul, sim):
    upload_image(sim, zuul)
    sim.fault(action="RunInstances", code="InsufficientInstanceCapacity", count=1)
    launcher(deployment, sim, wild_config(extra_pool=False))
    rid = zuul.submit(["vm-debian-12-m1s"])
    assert zuul.wait_request(rid, timeout=30)["state"] == "fulfilled"
    # every attempt refused: the request fails, nothing is left behind
    sim.fault(action="RunInstances", code="InsufficientInstanceCapacity")
    rid2 = zuul.submit(["vm-debian-12-m1m"])
    assert zuul.wait_request(rid2, timeout=30)["state"] == "failed"
    wait_for(lambda: len(zuul.nodes()) == 1 and len(sim.instances()) == 1, timeout=20,
             what="only the first node left")


def test_quota_from_service_quotas(deployment, zuul, sim):
    """L-1216C47A at 4 vCPUs: two t3 (2 vCPUs) nodes at once, the third
    waits for one to go."""
    upload_image(sim, zuul)
    sim.ctl("POST", "/quotas", {"L-1216C47A": 4})
    launcher(deployment, sim, wild_config(extra_pool=False))
    rids = [zuul.submit(["vm-debian-12-m1s"]) for _ in range(3)]

    def states():
        return [(zuul.request(r) or {}).get("state") for r in rids]
    wait_for(lambda: states().count("fulfilled") == 2, timeout=30, what="two fulfilled")
    # (a launch that raced the first quota read is refused by the cloud
    # with VcpuLimitExceeded and aborted: its request waits all the same)
    waiting = [r for r, st in zip(rids, states()) if st != "fulfilled"]
    assert len(waiting) == 1 and states().count("failed") == 0
    wait_for(lambda: len(sim.instances()) == 2, timeout=10, what="two instances")
    zuul.finish(zuul.accept([r for r in rids if r not in waiting][0]))
    assert zuul.wait_request(waiting[0], timeout=30)["state"] == "fulfilled"


def test_quota_error_at_launch(deployment, zuul, sim):
    """The cloud refuses for quota (a limit the launcher did not know): the
    launch is aborted, not failed, and the request served once it fits."""
    upload_image(sim, zuul)
    sim.fault(action="RunInstances", code="VcpuLimitExceeded", count=1)
    p = launcher(deployment, sim, wild_config(extra_pool=False))
    rid = zuul.submit(["vm-debian-12-m1s"])
    assert zuul.wait_request(rid, timeout=30)["state"] == "fulfilled"
    assert "VcpuLimitExceeded" in p.output()


def test_launcher_killed_mid_launch_leaks_nothing(deployment, zuul, sim):
    upload_image(sim, zuul)
    sim.ctl("POST", "/behavior", {"boot_delay": 15})
    cfg = wild_config(extra_pool=False, top={
        "zookeeper-timeout": 2, "nodepoold": {"cleanup-interval": 2, "delete-interval": 0.5}})
    p = launcher(deployment, sim, cfg)
    rid = zuul.submit(["vm-debian-12-m1s"])
    wait_for(lambda: len(sim.instances()) == 1, timeout=20, what="instance created")
    p.signal(signal.SIGKILL)
    p.stop()
    sim.ctl("POST", "/behavior", {"boot_delay": 0.3})
    launcher(deployment, sim, cfg)
    assert zuul.wait_request(rid, timeout=40)["state"] == "fulfilled"
    # the instance the killed launcher started is adopted with its node
    # (launches survive, issue 22), or deleted (its node record, or leak
    # cleanup): one instance, the node's
    wait_for(lambda: len(sim.instances()) == 1 and
             sim.instances()[0]["id"] == list(zuul.nodes().values())[0]["external_id"],
             timeout=40, what="abandoned instance deleted")


def test_leaked_instance_and_volume_are_cleaned_up(deployment, zuul, sim):
    ours = {"nodepool_provider_name": PROVIDER, "nodepool_node_id": "0000099999",
            "nodepool_pool_name": "m1s-bookworm"}
    sim.ctl("POST", "/instances", {"region": "eu-west-1", "tags": ours, "volume_tags": ours})
    sim.ctl("POST", "/instances", {"region": "eu-west-1", "tags": {"owner": "someone-else"}})
    launcher(deployment, sim, wild_config(extra_pool=False, top={
        "nodepoold": {"cleanup-interval": 1}}))
    wait_for(lambda: [i["tags"].get("owner") for i in sim.instances()] == ["someone-else"],
             timeout=30, what="leaked instance deleted")
    wait_for(lambda: [v["tags"].get("nodepool_node_id") for v in sim.volumes()] ==
             [None], timeout=30, what="leaked volume deleted")


def test_leaked_s3_objects_are_deleted(deployment, zuul, sim):
    """As upstream's listResources: the objects of the object-storage
    bucket, by their S3 tags. One left by an upload ZooKeeper has no record
    of (a builder stopped before its cleanup) is deleted; the object of a
    known upload, another provider's and an untagged one are kept."""
    import urllib.parse
    import boto3
    import botocore.config
    s3 = boto3.client("s3", endpoint_url=sim.endpoint, region_name="eu-west-1",
                      aws_access_key_id=sim.info["access_key_id"],
                      aws_secret_access_key=sim.info["secret_access_key"],
                      config=botocore.config.Config(s3={"addressing_style": "path"}))
    bid = write_build(zuul.zk, "img-debian-12", build_record(formats="raw"))
    uid = write_upload(zuul.zk, "img-debian-12", bid, PROVIDER,
                       upload_record(external_id="ami-0123", external_name="img-debian-12-1"))

    def put(key, tags_):
        s3.put_object(Bucket="nodepool-images", Key=key, Body=b"qcow",
                      Tagging=urllib.parse.urlencode(tags_))
    put("leaked/img-debian-12-0000000099.raw", {
        "nodepool_provider_name": PROVIDER, "nodepool_build_id": "0123456789abcdef",
        "nodepool_upload_id": "0000000007"})
    put("img-debian-12-known.raw", {"nodepool_provider_name": PROVIDER,
                                    "nodepool_build_id": bid, "nodepool_upload_id": uid})
    put("other-provider.raw", {"nodepool_provider_name": "elsewhere",
                               "nodepool_build_id": "0123456789abcdef",
                               "nodepool_upload_id": "0000000007"})
    put("untagged.raw", {})
    launcher(deployment, sim, wild_config(
        extra_pool=False, provider={"object-storage": {"bucket-name": "nodepool-images"}},
        top={"nodepoold": {"cleanup-interval": 1}}))
    wait_for(lambda: sorted(sim.state()["_objects"]["nodepool-images"]) ==
             ["img-debian-12-known.raw", "other-provider.raw", "untagged.raw"],
             timeout=30, what="the leaked object deleted")
    assert sim.calls()["s3:GetObjectTagging"] >= 4


def test_untagged_imported_image_is_tagged_then_cleaned_up(deployment, zuul, sim):
    """As upstream's _tagSnapshots/_tagAmis: a snapshot and its AMI left
    untagged (a builder stopped between the import and the tagging) get
    their import task's tags; that upload being unknown to ZooKeeper, they
    are then deleted as leaked. An untagged AMI from another provider's
    import is left alone."""
    import urllib.parse
    import boto3
    import botocore.config
    kw = dict(endpoint_url=sim.endpoint, region_name="eu-west-1",
              aws_access_key_id=sim.info["access_key_id"],
              aws_secret_access_key=sim.info["secret_access_key"],
              config=botocore.config.Config(s3={"addressing_style": "path"}))
    s3, ec2 = boto3.client("s3", **kw), boto3.client("ec2", **kw)

    def imported(provider):
        key = "img-%s.raw" % provider
        s3.put_object(Bucket="nodepool-images", Key=key, Body=b"raw")
        meta = {"nodepool_provider_name": provider, "nodepool_build_id": "00ff00ff",
                "nodepool_upload_id": "0000000042"}
        tid = ec2.import_snapshot(
            DiskContainer={"Format": "raw", "UserBucket": {"S3Bucket": "nodepool-images",
                                                           "S3Key": key}},
            TagSpecifications=[{"ResourceType": "import-snapshot-task", "Tags": [
                {"Key": k, "Value": v} for k, v in meta.items()]}])["ImportTaskId"]

        def snap():
            t = ec2.describe_import_snapshot_tasks(ImportTaskIds=[tid])["ImportSnapshotTasks"][0]
            return t["SnapshotTaskDetail"].get("SnapshotId")
        sid = wait_for(snap, timeout=10, what="import done")
        ami = ec2.register_image(Name="img-" + provider, Architecture="x86_64",
                                 RootDeviceName="/dev/sda1", VirtualizationType="hvm",
                                 BlockDeviceMappings=[{"DeviceName": "/dev/sda1",
                                                       "Ebs": {"SnapshotId": sid}}])["ImageId"]
        return ami, sid
    ours = imported(PROVIDER)
    theirs = imported("elsewhere")
    launcher(deployment, sim, wild_config(extra_pool=False, top={
        "nodepoold": {"cleanup-interval": 1}}))

    def left():
        st = sim.state()["eu-west-1"]
        return sorted(i["id"] for i in st["images"] if i["owner"] != "136693071363"), \
            sorted(s["id"] for s in st["snapshots"])
    wait_for(lambda: left() == ([theirs[0]], [theirs[1]]), timeout=30,
             what="our untagged AMI and snapshot tagged and deleted")
    st = sim.state()["eu-west-1"]
    assert [i["tags"] for i in st["images"] if i["id"] == theirs[0]] == [{}]
    assert sim.calls()["ec2:CreateTags"] >= 2 and ours


def host_config(top=None):
    """The wild config plus a pool whose label runs on a dedicated host."""
    cfg = wild_config(extra_pool=False, top=top)
    cfg["labels"].append({"name": "host-debian", "min-ready": 0})
    p = cfg["providers"][0]
    p["cloud-images"] = [{"name": "debian-cloud", "username": "admin",
                          "image-filters": [{"name": "name", "values": ["debian-12-*"]}]}]
    p["pools"].append({
        "name": "hosts", "max-servers": 10, "host-key-checking": False,
        "availability-zone": "eu-west-1b", "subnet-id": "subnet-0cda0d5056f892394",
        "labels": [{"name": "host-debian", "cloud-image": "debian-cloud",
                    "key-name": "nodepool", "instance-type": "m5.large",
                    "dedicated-host": True, "tags": {"team": "ci"}}]})
    return cfg


def hosts(sim):
    return sim.state()["eu-west-1"]["hosts"]


def test_dedicated_host_node(deployment, zuul, sim):
    """As upstream: a host allocated for the node (its type and AZ, the
    node's tags), the instance launched on it, the node's external_id the
    object {instance, host}; given back: the instance terminated, then the
    host released."""
    launcher(deployment, sim, host_config())
    rid = zuul.submit(["host-debian"])
    assert zuul.wait_request(rid, timeout=30)["state"] == "fulfilled"
    (nid, n), = zuul.nodes().items()
    (h,) = hosts(sim)
    (i,) = sim.instances()
    assert n["external_id"] == {"instance": i["id"], "host": h["id"]}
    assert n["host_id"] == h["id"] and n["az"] == "eu-west-1b"
    assert (h["type"], h["az"]) == ("m5.large", "eu-west-1b")
    assert h["tags"]["nodepool_node_id"] == nid and h["tags"]["team"] == "ci"
    assert h["tags"]["nodepool_provider_name"] == PROVIDER
    assert (i["host"], i["tenancy"], i["type"]) == (h["id"], "host", "m5.large")
    assert h["instances"] == [i["id"]]
    zuul.finish(zuul.accept(rid))
    wait_for(lambda: zuul.nodes() == {} and sim.instances() == [] and hosts(sim) == [],
             timeout=30, what="instance terminated and host released")
    calls = sim.calls()
    assert calls["ec2:AllocateHosts"] == 1 and calls["ec2:ReleaseHosts"] >= 1


def test_dedicated_host_released_when_launch_fails(deployment, zuul, sim):
    """RunInstances refused on the new host (capacity): the attempt's host
    is released before the retry allocates another; nothing is left."""
    sim.fault(action="RunInstances", code="InsufficientInstanceCapacity", count=1)
    launcher(deployment, sim, host_config())
    rid = zuul.submit(["host-debian"])
    assert zuul.wait_request(rid, timeout=30)["state"] == "fulfilled"
    (n,) = zuul.nodes().values()
    assert [h["id"] for h in hosts(sim)] == [n["external_id"]["host"]]
    calls = sim.calls()
    assert calls["ec2:AllocateHosts"] == 2 and calls["ec2:ReleaseHosts"] == 1
    zuul.finish(zuul.accept(rid))
    wait_for(lambda: hosts(sim) == [] and sim.instances() == [], timeout=30,
             what="host released")


def test_dedicated_host_quota(deployment, zuul, sim):
    """Hosts count against their family's dedicated host quota (m5:
    L-8B7BF662), not the vCPU quota: at one m5 host, the second node waits
    for the first one's host to be released."""
    sim.ctl("POST", "/quotas", {"L-8B7BF662": 1, "L-1216C47A": 1})
    launcher(deployment, sim, host_config())
    rids = [zuul.submit(["host-debian"]) for _ in range(2)]

    def states():
        return [(zuul.request(r) or {}).get("state") for r in rids]
    wait_for(lambda: "fulfilled" in states(), timeout=30, what="one fulfilled")
    # (a launch racing the first quota read is refused by the cloud with
    # HostLimitExceeded and aborted: its request waits all the same)
    done = rids[states().index("fulfilled")]
    waiting = [r for r in rids if r != done]
    assert states().count("failed") == 0 and len(hosts(sim)) == 1
    zuul.finish(zuul.accept(done))
    assert zuul.wait_request(waiting[0], timeout=30)["state"] == "fulfilled"
    assert len(hosts(sim)) == 1


def test_leaked_dedicated_host_is_released(deployment, zuul, sim):
    """A host carrying our tags and no node (a launcher died between
    AllocateHosts and its first save) is released by leak cleanup; one
    with another owner's tags is left alone."""
    import boto3
    ec2 = boto3.client("ec2", endpoint_url=sim.endpoint, region_name="eu-west-1",
                       aws_access_key_id=sim.info["access_key_id"],
                       aws_secret_access_key=sim.info["secret_access_key"])

    def allocate(tags_):
        return ec2.allocate_hosts(
            InstanceType="m5.large", AvailabilityZone="eu-west-1a", Quantity=1,
            TagSpecifications=[{"ResourceType": "dedicated-host", "Tags": [
                {"Key": k, "Value": v} for k, v in tags_.items()]}])["HostIds"][0]
    allocate({"nodepool_provider_name": PROVIDER, "nodepool_node_id": "0000099998",
              "nodepool_pool_name": "hosts"})
    theirs = allocate({"owner": "someone-else"})
    launcher(deployment, sim, host_config(top={"nodepoold": {"cleanup-interval": 1}}))
    wait_for(lambda: [h["id"] for h in hosts(sim)] == [theirs], timeout=30,
             what="leaked host released")


def test_session_token_is_sent(deployment, zuul, tmp_path):
    """Temporary credentials (AWS_SESSION_TOKEN, as STS and SSO give them):
    the simulator refuses their key without its token (AuthFailure), so a
    node served at all proves every call carried it, signed."""
    token = "IQoJb3JpZ2luX2VjEtemporary/token+with=chars"
    s = AwsSim(tmp_path, {"regions": {"eu-west-1": {}}, "boot_delay": 0.3,
                          "terminate_delay": 0.1,
                          "credentials": {"ASIATEMPORARY": "tempsecret"},
                          "session_tokens": {"ASIATEMPORARY": token}}).start()
    try:
        env = dict(s.env(), HOME=deployment.dir, AWS_SESSION_TOKEN=token)
        p = Proc([bin_path("nodepool-launcher"), "-d", "-p", PROVIDER, "-c",
                  deployment.write_config(host_config())],
                 os.path.join(deployment.dir, "launcher-token.log"), env=env)
        deployment.procs.append(p)
        assert env["AWS_ACCESS_KEY_ID"] == "ASIATEMPORARY"
        rid = zuul.submit(["host-debian"])
        assert zuul.wait_request(rid, timeout=30)["state"] == "fulfilled", p.output()[-2000:]
        zuul.finish(zuul.accept(rid))
        wait_for(lambda: zuul.nodes() == {} and s.instances() == [], timeout=30,
                 what="node deleted")
        calls = s.calls()
        assert calls["ec2:RunInstances"] == 1 and calls.get("servicequotas:GetServiceQuota")
        assert not [k for k in calls if k.startswith("auth:")], calls
    finally:
        s.stop()


def test_spot_interruption_notice(deployment, zuul, sim):
    """Beyond upstream: a spot interruption notice (the spot request marked
    for termination, two minutes before AWS takes the instance) deletes a
    ready node before Zuul can take it, and is written in the comment of a
    node in use, which keeps its state (Zuul owns it)."""
    upload_image(sim, zuul)
    cfg = wild_config()
    for lb in cfg["labels"]:
        if lb["name"] == "spot-debian":
            lb["min-ready"] = 1  # a ready node nobody has taken
    p = launcher(deployment, sim, cfg)
    r_used = zuul.submit(["spot-debian"])
    assert zuul.wait_request(r_used, timeout=30)["state"] == "fulfilled"
    held = zuul.accept(r_used)
    (used_id, _), = held

    def min_ready():
        ids = [k for k, n in zuul.nodes().items() if n["state"] == "ready" and
               n["type"] == ["spot-debian"] and not n.get("allocated_to")]
        return ids and ids[0]
    ready_id = wait_for(min_ready, timeout=30, what="a min-ready spot node")
    ready_inst = zuul.node(ready_id)["external_id"]
    used_inst = zuul.node(used_id)["external_id"]
    for iid in (ready_inst, used_inst):
        sim.ctl("POST", "/interrupt", {"instance_id": iid, "notice": 120})
    wait_for(lambda: zuul.node(ready_id) is None, timeout=20, what="the ready node deleted")
    wait_for(lambda: ready_inst not in [i["id"] for i in sim.instances()], timeout=10,
             what="its instance terminated")
    used = wait_for(lambda: "spot interruption" in (zuul.node(used_id).get("comment") or "")
                    and zuul.node(used_id), timeout=20, what="the in-use node noted")
    assert used["state"] == "in-use"
    assert "marked-for-termination" in used["comment"]
    out = p.output()
    assert "node %s (spot-debian): AWS spot interruption notice" % ready_id in out
    zuul.finish(held)
    wait_for(lambda: used_inst not in [i["id"] for i in sim.instances()], timeout=20,
             what="the used node's instance deleted")


@pytest.mark.parametrize("size", [0, 9 * 1024 * 1024 + 5], ids=["put", "multipart"])
def test_builder_uploads_through_s3_and_import_snapshot(deployment, zk, zuul, sim, size):
    """The builder's upload to an aws provider, as upstream's uploadImage
    (import-method snapshot): the image to S3 (tagged), ImportSnapshot,
    RegisterImage, the snapshot and AMI tagged, the S3 object deleted;
    the launcher then boots the AMI. A file over 8 MiB goes up in parts,
    one in memory at a time."""
    from builder_helpers import builder_config, start_builder
    cfg = builder_config(deployment, providers=(),
                         env={"FAKE_DIB_SIZE": str(size)} if size else None)
    cfg["providers"] = [{
        "name": "ec2", "driver": "aws", "region-name": "eu-west-1", "rate": 100,
        "image-format": "raw", "object-storage": {"bucket-name": "nodepool-images"},
        "diskimages": [{"name": "img", "username": "zuul", "volume-size": 20,
                        "volume-type": "gp3", "imds-support": "v2.0"}],
        "pools": [{"name": "main", "host-key-checking": False, "labels": [
            {"name": "img-label", "diskimage": "img", "instance-type": "t3.small",
             "key-name": "zuul"}]}]}]
    path = deployment.write_config(cfg)
    env = sim.env()
    env["HOME"] = deployment.dir
    start_builder(deployment, path, env=env)

    def upload():
        try:
            for b in zk.get_children("/nodepool/images/img/builds"):
                base = "/nodepool/images/img/builds/%s/providers/ec2/images" % b
                for u in zk.get_children(base) if zk.exists(base) else []:
                    rec = json.loads(zk.get(base + "/" + u)[0] or b"{}")
                    if rec.get("state") == "ready":
                        return b, u, rec
        except Exception:
            return None
    bid, uid, rec = wait_for(upload, timeout=60, what="a ready upload")
    ami = rec["external_id"]
    st = sim.state()
    (img,) = [i for i in st["eu-west-1"]["images"] if i["id"] == ami]
    meta = {"nodepool_build_id": bid, "nodepool_upload_id": uid,
            "nodepool_provider_name": "ec2"}
    assert img["name"] == rec["external_name"] and img["tags"] == meta
    assert img["imds"] == "v2.0" and img["ena"] == "true"
    (snap,) = st["eu-west-1"]["snapshots"]
    assert img["snapshots"] == [snap["id"]] and snap["tags"] == meta
    # the S3 object went once imported
    assert st["_objects"]["nodepool-images"] == {}
    calls = sim.calls()
    assert calls["ec2:ImportSnapshot"] == 1 and calls["ec2:RegisterImage"] == 1
    if size:
        assert calls["s3:UploadPart"] == 2 and calls["s3:CompleteMultipartUpload"] == 1
        assert "s3:PutObject" not in calls and st["_uploads"] == 0
    else:
        assert calls["s3:PutObject"] == 1
    assert calls["s3:DeleteObject"] == 1
    # the launcher boots it
    env2 = sim.env()
    env2["HOME"] = deployment.dir
    lp = os.path.join(deployment.dir, "launcher-ec2.log")
    deployment.procs.append(Proc([bin_path("nodepool-launcher"), "-p", "ec2", "-c", path],
                                 lp, env=env2))
    rid = zuul.submit(["img-label"])
    assert zuul.wait_request(rid, timeout=30)["state"] == "fulfilled"
    (nid,) = zuul.request(rid)["nodes"]
    inst = [i for i in sim.instances() if i["id"] == zuul.node(nid)["external_id"]][0]
    assert inst["image"] == ami
