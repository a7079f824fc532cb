"""The AWS simulator (tests/sim/aws) judged by AWS's own SDK: Debian's
python3-boto3 making the calls upstream Nodepool's AWS adapter makes
(nodepool/driver/aws/adapter.py): run_instances, describe_instances with
its paginator, create_fleet with launch templates, terminate_instances,
create_tags, describe_images, the image import (S3 upload, import_snapshot,
register_image) and Service Quotas. If boto3 disagrees with the simulator,
the simulator is wrong."""
import io

import pytest

boto3 = pytest.importorskip("boto3")
import botocore  # noqa: E402
import botocore.config  # noqa: E402
import botocore.exceptions  # noqa: E402

from awssim_fixture import AwsSim  # noqa: E402
from conftest import wait_for  # noqa: E402

IMAGE = "ami-0sim0debian12"


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    s = AwsSim(tmp_path_factory.mktemp("awssim"), {
        "boot_delay": 0.2, "page_size": 3, "terminate_delay": 0.1,
        # a permanent key pair, and temporary credentials (as STS gives)
        "credentials": {"AKIDSIMULATOR": "simsecret", "ASIATEMPORARY": "tempsecret"},
        "session_tokens": {"ASIATEMPORARY": "FQoGZXIvYXdzEtemporarytoken"}}).start()
    yield s
    s.stop()


@pytest.fixture(autouse=True)
def no_faults(sim):
    yield
    sim.ctl("DELETE", "/faults")


def session(sim, secret=None):
    return boto3.Session(aws_access_key_id=sim.info["access_key_id"],
                         aws_secret_access_key=secret or sim.info["secret_access_key"],
                         region_name="us-east-1")


def client(sim, service, secret=None, **kw):
    kw.setdefault("retries", {"total_max_attempts": 1, "mode": "standard"})
    cfg = botocore.config.Config(s3={"addressing_style": "path"}, **kw)
    return session(sim, secret).client(service, endpoint_url=sim.endpoint, config=cfg)


def tags(d):
    return [{"Key": k, "Value": v} for k, v in d.items()]


def run(ec2, node_id, **kw):
    t = {"nodepool_node_id": node_id, "nodepool_provider_name": "aws-test", "Name": "np" + node_id}
    args = dict(ImageId=IMAGE, InstanceType="t3.small", MinCount=1, MaxCount=1, KeyName="zuul",
                TagSpecifications=[{"ResourceType": "instance", "Tags": tags(t)},
                                   {"ResourceType": "volume", "Tags": tags(t)}])
    args.update(kw)
    return ec2.run_instances(**args)["Instances"][0]


def describe_all(ec2, **kw):
    out = []
    for page in ec2.get_paginator("describe_instances").paginate(**kw):
        for r in page["Reservations"]:
            out.extend(r["Instances"])
    return out


def test_run_describe_terminate(sim):
    ec2 = client(sim, "ec2")
    inst = run(ec2, "0000000001",
               NetworkInterfaces=[{"AssociatePublicIpAddress": True, "DeviceIndex": 0,
                                   "SubnetId": "subnet-aaa", "Groups": ["sg-1"]}],
               BlockDeviceMappings=[{"DeviceName": "/dev/xvda", "Ebs": {
                   "VolumeSize": 40, "VolumeType": "gp3", "Iops": 3000, "Throughput": 150,
                   "DeleteOnTermination": True}}],
               UserData="IyEvYmluL3NoCg==", MetadataOptions={"HttpTokens": "required",
                                                             "HttpEndpoint": "enabled"},
               IamInstanceProfile={"Name": "zuul-node"})
    assert inst["State"]["Name"] == "pending"
    iid = inst["InstanceId"]
    # pending -> running after the boot delay, found by id and by tag filter
    wait_for(lambda: ec2.describe_instances(InstanceIds=[iid])["Reservations"][0][
        "Instances"][0]["State"]["Name"] == "running", 5)
    got = describe_all(ec2, Filters=[{"Name": "tag:nodepool_node_id", "Values": ["0000000001"]}])
    assert [i["InstanceId"] for i in got] == [iid]
    i = got[0]
    assert i["PublicIpAddress"] and i["PrivateIpAddress"]
    assert i["SubnetId"] == "subnet-aaa"
    assert i["MetadataOptions"]["HttpTokens"] == "required"
    assert i["IamInstanceProfile"]["Arn"].endswith("instance-profile/zuul-node")
    assert {t["Key"]: t["Value"] for t in i["Tags"]}["nodepool_provider_name"] == "aws-test"
    vols = ec2.describe_volumes(Filters=[{"Name": "tag:nodepool_node_id",
                                          "Values": ["0000000001"]}])["Volumes"]
    assert [(v["Size"], v["VolumeType"], v["Iops"], v["Throughput"]) for v in vols] == \
        [(40, "gp3", 3000, 150)]
    ec2.create_tags(Resources=[iid], Tags=[{"Key": "extra", "Value": "x"}])
    got = describe_all(ec2, Filters=[{"Name": "tag:extra", "Values": ["x"]}])
    assert [i["InstanceId"] for i in got] == [iid]
    r = ec2.terminate_instances(InstanceIds=[iid])
    assert r["TerminatingInstances"][0]["CurrentState"]["Name"] == "shutting-down"
    wait_for(lambda: ec2.describe_instances(InstanceIds=[iid])["Reservations"][0][
        "Instances"][0]["State"]["Name"] == "terminated", 5)
    # the root volume went with it (DeleteOnTermination)
    assert ec2.describe_volumes(Filters=[{"Name": "tag:nodepool_node_id",
                                          "Values": ["0000000001"]}])["Volumes"] == []


def test_client_token_id_filters_and_reaping(sim):
    """What the launcher's calls rest on, as EC2 answers them: a
    RunInstances repeated with its ClientToken gets the same instance
    (idempotency); a describe filtered by instance ids (the launcher's
    shared poll) answers exactly the instances named that exist, alone or
    with a wildcard or another filter, and shows a tag added since the
    last; a terminated instance leaves the describes after it lingers
    (terminated_linger)."""
    ec2 = client(sim, "ec2")
    a = run(ec2, "0000000201", ClientToken="tok-0000000201")
    again = run(ec2, "0000000201", ClientToken="tok-0000000201")
    assert again["InstanceId"] == a["InstanceId"]
    b = run(ec2, "0000000202")
    ids = [a["InstanceId"], b["InstanceId"]]

    def listed(filters):
        return sorted(i["InstanceId"] for i in describe_all(ec2, Filters=filters))

    assert listed([{"Name": "instance-id", "Values": ids + ["i-0000000000000dead"]}]) == \
        sorted(ids)
    assert listed([{"Name": "instance-id", "Values": [ids[0]]},
                   {"Name": "instance-id", "Values": ids}]) == [ids[0]]
    assert listed([{"Name": "instance-id", "Values": [ids[1][:-3] + "*"]},
                   {"Name": "tag:nodepool_node_id", "Values": ["0000000202"]}]) == [ids[1]]
    assert listed([{"Name": "instance-id", "Values": ids},
                   {"Name": "tag:nodepool_node_id", "Values": ["0000000201"]}]) == [ids[0]]
    # a describe after a change shows it (the items are kept between calls)
    ec2.create_tags(Resources=[ids[0]], Tags=[{"Key": "extra", "Value": "y"}])
    got = describe_all(ec2, Filters=[{"Name": "instance-id", "Values": ids}])
    assert {i["InstanceId"]: {t["Key"]: t["Value"] for t in i["Tags"]}.get("extra")
            for i in got} == {ids[0]: "y", ids[1]: None}
    sim.ctl("POST", "/behavior", {"terminated_linger": 0.3})
    try:
        ec2.terminate_instances(InstanceIds=ids)
        wait_for(lambda: listed([{"Name": "instance-id", "Values": ids}]) == [], 10)
        assert not [i for i in sim.instances(alive=False) if i["id"] in ids]
    finally:
        sim.ctl("POST", "/behavior", {"terminated_linger": 60.0})


def test_paginator_follows_next_token(sim):
    ec2 = client(sim, "ec2")
    ids = {run(ec2, "00000001%02d" % n)["InstanceId"] for n in range(7)}
    pages = list(ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]))
    assert len(pages) >= 3  # page_size 3
    seen = {i["InstanceId"] for p in pages for r in p["Reservations"] for i in r["Instances"]}
    assert ids <= seen
    ec2.terminate_instances(InstanceIds=sorted(ids))


def test_images(sim):
    ec2 = client(sim, "ec2")
    imgs = ec2.describe_images(ImageIds=[IMAGE])["Images"]
    assert imgs[0]["Name"] == "debian-12-amd64-sim" and imgs[0]["State"] == "available"
    by_filter = ec2.describe_images(Filters=[{"Name": "name", "Values": ["debian-12-*"]}])
    assert [i["ImageId"] for i in by_filter["Images"]] == [IMAGE]
    with pytest.raises(botocore.exceptions.ClientError) as e:
        ec2.describe_images(ImageIds=["ami-00000000000000bad"])
    assert e.value.response["Error"]["Code"] == "InvalidAMIID.NotFound"


def test_fleet_spot_and_interruption(sim):
    ec2 = client(sim, "ec2")
    ec2.create_launch_template(LaunchTemplateName="np-fleet", LaunchTemplateData={
        "ImageId": IMAGE, "KeyName": "zuul",
        "TagSpecifications": [{"ResourceType": "instance",
                               "Tags": [{"Key": "nodepool_node_id", "Value": "0000000200"}]}]})
    lts = ec2.describe_launch_templates(LaunchTemplateNames=["np-fleet"])["LaunchTemplates"]
    assert lts[0]["LaunchTemplateName"] == "np-fleet"
    sim.fault(action="CreateFleet", instance_type="m5.large", market="spot",
              code="InsufficientInstanceCapacity", count=1)
    r = ec2.create_fleet(
        Type="instant",
        LaunchTemplateConfigs=[{
            "LaunchTemplateSpecification": {"LaunchTemplateName": "np-fleet", "Version": "$Latest"},
            "Overrides": [{"InstanceType": "m5.large", "Priority": 1},
                          {"InstanceType": "t3.large", "Priority": 2}]}],
        TargetCapacitySpecification={"TotalTargetCapacity": 1,
                                     "DefaultTargetCapacityType": "spot"},
        SpotOptions={"AllocationStrategy": "price-capacity-optimized"},
        TagSpecifications=[{"ResourceType": "instance",
                            "Tags": [{"Key": "nodepool_node_id", "Value": "0000000200"}]}])
    assert [e["ErrorCode"] for e in r["Errors"]] == ["InsufficientInstanceCapacity"]
    (iid,) = r["Instances"][0]["InstanceIds"]
    i = ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]
    assert i["InstanceType"] == "t3.large" and i["InstanceLifecycle"] == "spot"
    sir = i["SpotInstanceRequestId"]
    # an interruption: the two-minute notice, then termination
    sim.ctl("POST", "/interrupt", {"instance_id": iid, "notice": 0.3})
    req = ec2.describe_spot_instance_requests(SpotInstanceRequestIds=[sir])
    assert req["SpotInstanceRequests"][0]["Status"]["Code"] == "marked-for-termination"
    wait_for(lambda: ec2.describe_instances(InstanceIds=[iid])["Reservations"][0][
        "Instances"][0]["State"]["Name"] in ("shutting-down", "terminated"), 5)
    i = ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]
    assert i["StateReason"]["Code"] == "Server.SpotInstanceTermination"


def test_faults_throttling_capacity_quota(sim):
    ec2 = client(sim, "ec2")
    sim.fault(action="RunInstances", code="RequestLimitExceeded", count=1)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        run(ec2, "0000000300")
    assert e.value.response["Error"]["Code"] == "RequestLimitExceeded"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    # boto3's own retry mode treats it as throttling and retries through it
    sim.fault(action="RunInstances", code="RequestLimitExceeded", count=1)
    retrying = client(sim, "ec2", retries={"total_max_attempts": 3, "mode": "standard"})
    inst = run(retrying, "0000000301")
    sim.fault(action="RunInstances", code="InsufficientInstanceCapacity", count=1)
    with pytest.raises(botocore.exceptions.ClientError) as e:
        run(ec2, "0000000302")
    assert e.value.response["Error"]["Code"] == "InsufficientInstanceCapacity"
    # quota: the on-demand standard vCPU limit is enforced at launch
    sim.ctl("POST", "/quotas", {"L-1216C47A": 0})
    try:
        with pytest.raises(botocore.exceptions.ClientError) as e:
            run(ec2, "0000000303")
        assert e.value.response["Error"]["Code"] == "VcpuLimitExceeded"
    finally:
        sim.ctl("POST", "/quotas", {"L-1216C47A": 1000})
    ec2.terminate_instances(InstanceIds=[inst["InstanceId"]])


def test_bad_signature_refused(sim):
    ec2 = client(sim, "ec2", secret="not-the-secret")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        ec2.describe_instances()
    assert e.value.response["Error"]["Code"] in ("SignatureDoesNotMatch", "AuthFailure")
    s3 = client(sim, "s3", secret="not-the-secret")
    with pytest.raises(botocore.exceptions.ClientError) as e:
        s3.list_objects_v2(Bucket="nodepool-images")
    assert e.value.response["Error"]["Code"] == "SignatureDoesNotMatch"


def test_image_import(sim):
    """upstream's uploadImage: the file to S3 (multipart past the threshold),
    import_snapshot, wait for the task, register_image, then the S3 object
    is deleted; snapshots and AMIs are found by tag for leak cleanup."""
    s3 = client(sim, "s3")
    ec2 = client(sim, "ec2")
    data = bytes(range(256)) * (40 * 1024)  # 10 MiB: multipart at 8 MiB
    meta = {"nodepool_build_id": "0000000001", "nodepool_upload_id": "0000000001",
            "nodepool_provider_name": "aws-test"}
    s3.upload_fileobj(io.BytesIO(data), "nodepool-images", "img-1.raw",
                      ExtraArgs={"Tagging": "&".join("%s=%s" % kv for kv in meta.items())})
    assert sim.state()["_objects"]["nodepool-images"]["img-1.raw"]["size"] == len(data)
    tagging = s3.get_object_tagging(Bucket="nodepool-images", Key="img-1.raw")
    assert {t["Key"]: t["Value"] for t in tagging["TagSet"]} == meta
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="nodepool-images")["Contents"]]
    assert "img-1.raw" in keys
    task = ec2.import_snapshot(
        DiskContainer={"Format": "raw", "UserBucket": {"S3Bucket": "nodepool-images",
                                                       "S3Key": "img-1.raw"}},
        TagSpecifications=[{"ResourceType": "import-snapshot-task", "Tags": tags(meta)}])
    tid = task["ImportTaskId"]

    def done():
        t = ec2.describe_import_snapshot_tasks(ImportTaskIds=[tid])["ImportSnapshotTasks"][0]
        return t["SnapshotTaskDetail"].get("SnapshotId") if \
            t["SnapshotTaskDetail"]["Status"] == "completed" else None
    sid = wait_for(done, 5)
    ec2.create_tags(Resources=[sid], Tags=tags(meta))
    img = ec2.register_image(
        Name="img-1", Architecture="x86_64", RootDeviceName="/dev/sda1",
        VirtualizationType="hvm", EnaSupport=True,
        BlockDeviceMappings=[{"DeviceName": "/dev/sda1", "Ebs": {
            "SnapshotId": sid, "VolumeSize": 20, "VolumeType": "gp3",
            "DeleteOnTermination": True}}])
    ami = img["ImageId"]
    ec2.create_tags(Resources=[ami], Tags=tags(meta))
    s3.delete_object(Bucket="nodepool-images", Key="img-1.raw")
    assert "img-1.raw" not in sim.state()["_objects"]["nodepool-images"]
    f = [{"Name": "tag:nodepool_provider_name", "Values": ["aws-test"]}]
    assert [i["ImageId"] for i in ec2.describe_images(Owners=["self"], Filters=f)["Images"]] \
        == [ami]
    assert [s["SnapshotId"] for s in ec2.describe_snapshots(OwnerIds=["self"],
                                                            Filters=f)["Snapshots"]] == [sid]
    # an instance boots from it
    inst = run(ec2, "0000000400", ImageId=ami)
    ec2.terminate_instances(InstanceIds=[inst["InstanceId"]])
    # deleting: AMI first, then its snapshot
    with pytest.raises(botocore.exceptions.ClientError):
        ec2.delete_snapshot(SnapshotId=sid)
    ec2.deregister_image(ImageId=ami)
    ec2.delete_snapshot(SnapshotId=sid)
    assert ec2.describe_snapshots(OwnerIds=["self"], Filters=f)["Snapshots"] == []


def test_service_quotas(sim):
    sq = client(sim, "service-quotas")
    q = sq.get_service_quota(ServiceCode="ec2", QuotaCode="L-1216C47A")["Quota"]
    assert q["Value"] == 1000.0 and q["QuotaCode"] == "L-1216C47A"
    codes = [q["QuotaCode"] for p in sq.get_paginator("list_service_quotas").paginate(
        ServiceCode="ec2", PaginationConfig={"PageSize": 5}) for q in p["Quotas"]]
    assert "L-34B43A08" in codes and "L-DB2E81BA" in codes
    with pytest.raises(botocore.exceptions.ClientError) as e:
        sq.get_service_quota(ServiceCode="ec2", QuotaCode="L-NOPE")
    assert e.value.response["Error"]["Code"] == "NoSuchResourceException"


def test_session_token_required_for_temporary_credentials(sim):
    """Temporary credentials work only with their session token, which the
    SDKs send (signed) as X-Amz-Security-Token."""
    def temp(service, token):
        return boto3.Session(aws_access_key_id="ASIATEMPORARY",
                             aws_secret_access_key="tempsecret", aws_session_token=token,
                             region_name="us-east-1").client(
            service, endpoint_url=sim.endpoint, config=botocore.config.Config(
                s3={"addressing_style": "path"},
                retries={"total_max_attempts": 1, "mode": "standard"}))
    ok = "FQoGZXIvYXdzEtemporarytoken"
    assert temp("ec2", ok).describe_images(ImageIds=[IMAGE])["Images"]
    s3 = temp("s3", ok)
    s3.put_object(Bucket="nodepool-images", Key="token-check.raw", Body=b"image")
    listed = s3.list_objects_v2(Bucket="nodepool-images")
    assert "token-check.raw" in [o["Key"] for o in listed.get("Contents", [])]
    assert s3.get_object(Bucket="nodepool-images", Key="token-check.raw")["Body"].read() == b"image"
    s3.delete_object(Bucket="nodepool-images", Key="token-check.raw")
    assert temp("service-quotas", ok).get_service_quota(
        ServiceCode="ec2", QuotaCode="L-1216C47A")["Quota"]["Value"] > 0
    for token in (None, "not-the-token"):
        with pytest.raises(botocore.exceptions.ClientError) as e:
            temp("ec2", token).describe_images(ImageIds=[IMAGE])
        assert e.value.response["Error"]["Code"] == "AuthFailure"
    with pytest.raises(botocore.exceptions.ClientError):
        temp("s3", None).list_objects_v2(Bucket="nodepool-images")


def test_dedicated_host_limit_and_tags(sim):
    """describe_hosts (paginator, tag filters) and the host limit of a
    family's quota (HostLimitExceeded, as upstream's adapter expects)."""
    ec2 = client(sim, "ec2")
    sim.ctl("POST", "/quotas", {"L-81657574": 2})  # running dedicated c5 hosts
    spec = [{"ResourceType": "dedicated-host",
             "Tags": [{"Key": "nodepool_provider_name", "Value": "aws-hosts"}]}]
    hids = [ec2.allocate_hosts(InstanceType="c5.large", AvailabilityZone="us-east-1b",
                               Quantity=1, AutoPlacement="off", HostRecovery="off",
                               TagSpecifications=spec)["HostIds"][0] for _ in range(2)]
    with pytest.raises(botocore.exceptions.ClientError) as e:
        ec2.allocate_hosts(InstanceType="c5.xlarge", AvailabilityZone="us-east-1b", Quantity=1)
    assert e.value.response["Error"]["Code"] == "HostLimitExceeded"
    f = [{"Name": "tag:nodepool_provider_name", "Values": ["aws-hosts"]}]
    hosts = [h for p in ec2.get_paginator("describe_hosts").paginate(
        Filters=f, PaginationConfig={"PageSize": 5}) for h in p["Hosts"]]
    assert sorted(h["HostId"] for h in hosts) == sorted(hids)
    h = hosts[0]
    assert h["State"] == "available" and h["AvailabilityZone"] == "us-east-1b"
    assert h["HostProperties"]["InstanceType"] == "c5.large"
    assert {t["Key"]: t["Value"] for t in h["Tags"]} == {"nodepool_provider_name": "aws-hosts"}
    assert sorted(ec2.release_hosts(HostIds=hids)["Successful"]) == sorted(hids)
    assert ec2.describe_hosts(Filters=f)["Hosts"] == []
    r = ec2.release_hosts(HostIds=[hids[0]])
    assert r["Unsuccessful"][0]["Error"]["Code"] == "Client.InvalidHostID.NotFound"


def test_dedicated_hosts(sim):
    ec2 = client(sim, "ec2")
    hid = ec2.allocate_hosts(InstanceType="m5.large", AvailabilityZone="us-east-1a", Quantity=1,
                             TagSpecifications=[{"ResourceType": "dedicated-host",
                                                 "Tags": [{"Key": "nodepool_node_id",
                                                           "Value": "0000000500"}]}])["HostIds"][0]
    inst = run(ec2, "0000000500", InstanceType="m5.large",
               Placement={"AvailabilityZone": "us-east-1a", "HostId": hid, "Tenancy": "host"})
    r = ec2.release_hosts(HostIds=[hid])
    assert r["Unsuccessful"] and not r["Successful"]  # in use
    ec2.terminate_instances(InstanceIds=[inst["InstanceId"]])
    wait_for(lambda: ec2.describe_instances(InstanceIds=[inst["InstanceId"]])[
        "Reservations"][0]["Instances"][0]["State"]["Name"] == "terminated", 5)
    assert ec2.release_hosts(HostIds=[hid])["Successful"] == [hid]


def test_sdk_endpoint_from_environment(sim, monkeypatch):
    """AWS_ENDPOINT_URL, as the SDKs read it (and nodepoold does); botocore
    reads it from 1.31 on (Debian 12 has 1.29: skipped there)."""
    if tuple(int(x) for x in botocore.__version__.split(".")[:2]) < (1, 31):
        pytest.skip("botocore %s predates AWS_ENDPOINT_URL" % botocore.__version__)
    for k, v in sim.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    ec2 = boto3.client("ec2")
    assert ec2.describe_images(ImageIds=[IMAGE])["Images"]
