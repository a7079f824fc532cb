"""The AWS simulator held to the EC2 and Service Quotas API references,
through Debian's python3-boto3: the reads upstream Nodepool's AWS adapter
makes (nodepool/driver/aws/adapter.py: list_service_quotas for `ec2` and
`ebs`, describe_instance_types, the describe_images / describe_snapshots /
describe_instances / describe_volumes / describe_hosts paginators), each
answer checked for the members the reference documents for it. A client
that reads a documented member (VCpuInfo.DefaultCores for quota, the EBS
quotas for volume limits) must find it, as it would on AWS.

The reference pages are listed call by call in tests/sim/aws/README.md."""
import io

import pytest

boto3 = pytest.importorskip("boto3")
import botocore.config  # noqa: E402
import botocore.exceptions  # noqa: E402

from awssim_fixture import AwsSim  # noqa: E402
from conftest import wait_for  # noqa: E402

IMAGE = "ami-0sim0debian12"

# upstream Nodepool's instance type -> quota code tables name these
# families; the ebs codes are its VOLUME_QUOTA_CODES
EBS_CODES = {"gp2": ["L-D18FCD1D"], "gp3": ["L-7A658B76"], "io1": ["L-B3A130E6", "L-FD252861"],
             "io2": ["L-8D977E7E", "L-09BD8365"], "sc1": ["L-17AF77E8"],
             "st1": ["L-82ACEF56"], "standard": ["L-9CF3C2EB"]}
EC2_CODES = ["L-1216C47A", "L-34B43A08", "L-DB2E81BA", "L-3819A6DF", "L-417A185B",
             "L-7212CCBC", "L-43DA4232"]

# API_ServiceQuota
QUOTA_MEMBERS = {"ServiceCode", "ServiceName", "QuotaArn", "QuotaCode", "QuotaName", "Value",
                 "Unit", "Adjustable", "GlobalQuota"}
# API_InstanceTypeInfo and the structures in it (API_VCpuInfo, API_MemoryInfo,
# API_ProcessorInfo, API_NetworkInfo, API_NetworkCardInfo, API_EbsInfo,
# API_EbsOptimizedInfo, API_PlacementGroupInfo); GpuInfo, FpgaInfo,
# InferenceAcceleratorInfo and InstanceStorageInfo only for types that
# have such devices
ITYPE_MEMBERS = {"InstanceType", "CurrentGeneration", "FreeTierEligible",
                 "SupportedUsageClasses", "SupportedRootDeviceTypes",
                 "SupportedVirtualizationTypes", "BareMetal", "Hypervisor", "ProcessorInfo",
                 "VCpuInfo", "MemoryInfo", "InstanceStorageSupported", "EbsInfo", "NetworkInfo",
                 "PlacementGroupInfo", "HibernationSupported", "BurstablePerformanceSupported",
                 "DedicatedHostsSupported", "AutoRecoverySupported", "SupportedBootModes"}
VCPU_MEMBERS = {"DefaultVCpus", "DefaultCores", "DefaultThreadsPerCore", "ValidCores",
                "ValidThreadsPerCore"}
PROCESSOR_MEMBERS = {"SupportedArchitectures", "SustainedClockSpeedInGhz"}
NETWORK_MEMBERS = {"NetworkPerformance", "MaximumNetworkInterfaces", "MaximumNetworkCards",
                   "DefaultNetworkCardIndex", "NetworkCards", "Ipv4AddressesPerInterface",
                   "Ipv6AddressesPerInterface", "Ipv6Supported", "EnaSupport", "EfaSupported",
                   "EncryptionInTransitSupported"}
EBS_MEMBERS = {"EbsOptimizedSupport", "EncryptionSupport", "EbsOptimizedInfo", "NvmeSupport"}
EBSOPT_MEMBERS = {"BaselineBandwidthInMbps", "BaselineThroughputInMBps", "BaselineIops",
                  "MaximumBandwidthInMbps", "MaximumThroughputInMBps", "MaximumIops"}
# API_Image for an EBS-backed HVM Linux AMI
IMAGE_MEMBERS = {"Architecture", "CreationDate", "ImageId", "ImageLocation", "ImageType",
                 "Public", "OwnerId", "PlatformDetails", "UsageOperation", "ProductCodes",
                 "State", "BlockDeviceMappings", "Description", "EnaSupport", "Hypervisor",
                 "Name", "RootDeviceName", "RootDeviceType", "SriovNetSupport",
                 "VirtualizationType", "BootMode"}
# API_EbsBlockDevice in an image's mapping
IMAGE_EBS_MEMBERS = {"DeleteOnTermination", "SnapshotId", "VolumeSize", "VolumeType",
                     "Encrypted"}
# API_Snapshot
SNAPSHOT_MEMBERS = {"Description", "Encrypted", "OwnerId", "Progress", "SnapshotId",
                    "StartTime", "State", "VolumeId", "VolumeSize", "StorageTier", "Tags"}
# API_Volume (gp3: Iops and Throughput)
VOLUME_MEMBERS = {"Attachments", "AvailabilityZone", "CreateTime", "Encrypted", "Size",
                  "SnapshotId", "State", "VolumeId", "Iops", "VolumeType", "MultiAttachEnabled",
                  "Tags"}
# API_Instance for a running HVM Linux instance in a VPC
INSTANCE_MEMBERS = {"AmiLaunchIndex", "ImageId", "InstanceId", "InstanceType", "KeyName",
                    "LaunchTime", "Monitoring", "Placement", "PrivateDnsName",
                    "PrivateIpAddress", "ProductCodes", "PublicDnsName", "State", "SubnetId",
                    "VpcId", "Architecture", "BlockDeviceMappings", "ClientToken",
                    "EbsOptimized", "EnaSupport", "Hypervisor", "NetworkInterfaces",
                    "RootDeviceName", "RootDeviceType", "SecurityGroups", "SourceDestCheck",
                    "Tags", "VirtualizationType", "CpuOptions", "CapacityReservationSpecification",
                    "HibernationOptions", "MetadataOptions", "EnclaveOptions", "PlatformDetails",
                    "UsageOperation", "UsageOperationUpdateTime", "PrivateDnsNameOptions",
                    "MaintenanceOptions", "CurrentInstanceBootMode", "StateTransitionReason"}
# API_InstanceNetworkInterface
ENI_MEMBERS = {"Attachment", "Description", "Groups", "Ipv6Addresses", "MacAddress",
               "NetworkInterfaceId", "OwnerId", "PrivateDnsName", "PrivateIpAddress",
               "PrivateIpAddresses", "SourceDestCheck", "Status", "SubnetId", "VpcId",
               "InterfaceType"}
# API_InstanceMetadataOptionsResponse
IMDS_MEMBERS = {"State", "HttpTokens", "HttpPutResponseHopLimit", "HttpEndpoint",
                "HttpProtocolIpv6", "InstanceMetadataTags"}


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    s = AwsSim(tmp_path_factory.mktemp("awssim"), {"boot_delay": 0.1, "page_size": 2,
                                                   "import_delay": 0.1}).start()
    yield s
    s.stop()


def client(sim, service):
    cfg = botocore.config.Config(s3={"addressing_style": "path"},
                                 retries={"total_max_attempts": 1, "mode": "standard"})
    return boto3.Session(aws_access_key_id=sim.info["access_key_id"],
                         aws_secret_access_key=sim.info["secret_access_key"],
                         region_name="us-east-1").client(service, endpoint_url=sim.endpoint,
                                                         config=cfg)


def missing(obj, members):
    """The documented members absent from obj. Only members Debian's
    botocore model knows can be seen through it (it drops the rest), so a
    newer member the model lacks is not asked for."""
    return sorted(m for m in members - set(obj) if m in KNOWN)


def _known_members():
    import botocore.session
    s = botocore.session.get_session()
    out = set()
    for svc in ("ec2", "service-quotas"):
        model = s.get_service_model(svc)
        for name in model.shape_names:
            sh = model.shape_for(name)
            if sh.type_name == "structure":
                out.update(sh.members)
    return out


KNOWN = _known_members()


def pages(c, op, key, **kw):
    """Every item of every page of op, as upstream's paginators read them;
    one unpaged call where this botocore has no paginator for op (Debian's
    model of DescribeImages predates its MaxResults/NextToken)."""
    if c.can_paginate(op):
        return [x for p in c.get_paginator(op).paginate(**kw) for x in p[key]]
    return getattr(c, op)(**kw)[key]


def list_quotas(sq, service):
    """upstream's _listServiceQuotas: every page of ListServiceQuotas."""
    return [q for page in sq.get_paginator("list_service_quotas").paginate(
        ServiceCode=service) for q in page["Quotas"]]


def test_quotas_ec2_and_ebs(sim):
    """AWS serves the `ebs` service code next to `ec2`; upstream reads both
    listings (getQuotaLimits) and maps volume types to the ebs codes."""
    sq = client(sim, "service-quotas")
    for service, want in (("ec2", EC2_CODES), ("ebs", [c for cs in EBS_CODES.values()
                                                      for c in cs])):
        quotas = list_quotas(sq, service)
        codes = {q["QuotaCode"]: q for q in quotas}
        assert set(want) <= set(codes), (service, sorted(set(want) - set(codes)))
        for q in quotas:
            assert missing(q, QUOTA_MEMBERS) == [], q
            assert q["ServiceCode"] == service
            assert q["QuotaArn"].endswith(":%s/%s" % (service, q["QuotaCode"]))
            assert isinstance(q["Value"], float) and q["Value"] >= 0
        one = sq.get_service_quota(ServiceCode=service, QuotaCode=want[0])["Quota"]
        assert one["Value"] == codes[want[0]]["Value"]
        assert missing(one, QUOTA_MEMBERS) == []
    # a code asked under the wrong service is not found, as on AWS
    with pytest.raises(botocore.exceptions.ClientError) as e:
        sq.get_service_quota(ServiceCode="ec2", QuotaCode="L-7A658B76")
    assert e.value.response["Error"]["Code"] == "NoSuchResourceException"
    with pytest.raises(botocore.exceptions.ClientError) as e:
        list_quotas(sq, "nosuchservice")
    assert e.value.response["Error"]["Code"] == "NoSuchResourceException"


@pytest.mark.parametrize("itype", ["t3.small", "t3.2xlarge", "m5.large", "c5.xlarge",
                                   "p3.2xlarge", "g4dn.xlarge"])
def test_describe_instance_types(sim, itype):
    """upstream's _getQuotaForInstanceType reads VCpuInfo.DefaultCores,
    DefaultVCpus and MemoryInfo.SizeInMiB of describe_instance_types."""
    ec2 = client(sim, "ec2")
    got = ec2.describe_instance_types(InstanceTypes=[itype])["InstanceTypes"]
    assert len(got) == 1
    t = got[0]
    assert t["InstanceType"] == itype
    assert missing(t, ITYPE_MEMBERS) == []
    v = t["VCpuInfo"]
    assert missing(v, VCPU_MEMBERS) == []
    assert v["DefaultVCpus"] == v["DefaultCores"] * v["DefaultThreadsPerCore"]
    assert v["DefaultCores"] in v["ValidCores"]
    assert v["DefaultThreadsPerCore"] in v["ValidThreadsPerCore"]
    assert t["MemoryInfo"]["SizeInMiB"] >= 512
    assert missing(t["ProcessorInfo"], PROCESSOR_MEMBERS) == []
    assert missing(t["NetworkInfo"], NETWORK_MEMBERS) == []
    assert t["NetworkInfo"]["NetworkCards"][0]["NetworkCardIndex"] == 0
    assert missing(t["EbsInfo"], EBS_MEMBERS) == []
    assert missing(t["EbsInfo"]["EbsOptimizedInfo"], EBSOPT_MEMBERS) == []
    assert t["PlacementGroupInfo"]["SupportedStrategies"]
    assert t["SupportedUsageClasses"] and t["SupportedBootModes"]
    if itype.startswith(("p3", "g4dn")):
        gpu = t["GpuInfo"]
        assert gpu["Gpus"][0]["Count"] >= 1 and gpu["TotalGpuMemoryInMiB"] > 0
    if t["InstanceStorageSupported"]:
        assert t["InstanceStorageInfo"]["TotalSizeInGB"] > 0


def test_describe_instance_types_all_pages(sim):
    ec2 = client(sim, "ec2")
    types = [t for p in ec2.get_paginator("describe_instance_types").paginate()
             for t in p["InstanceTypes"]]
    assert len(types) > 2  # page_size 2: followed nextToken
    for t in types:
        assert missing(t["VCpuInfo"], VCPU_MEMBERS) == [], t["InstanceType"]


def test_image_and_snapshot_listings(sim):
    """upstream's _listAmis / _listSnapshots (paginators with Owners /
    OwnerIds self) and _getLatestImageIdByFilters (describe_images with
    filters, sorted by CreationDate), on an image imported as upstream's
    snapshot import method makes it."""
    s3 = client(sim, "s3")
    ec2 = client(sim, "ec2")
    s3.upload_fileobj(io.BytesIO(b"\0" * 4096), "nodepool-images", "ref.raw")
    tid = ec2.import_snapshot(DiskContainer={
        "Format": "raw", "UserBucket": {"S3Bucket": "nodepool-images",
                                        "S3Key": "ref.raw"}})["ImportTaskId"]

    def done():
        t = ec2.describe_import_snapshot_tasks(ImportTaskIds=[tid])["ImportSnapshotTasks"][0]
        d = t["SnapshotTaskDetail"]
        return d.get("SnapshotId") if d["Status"] == "completed" else None
    sid = wait_for(done, 5)
    ec2.create_tags(Resources=[sid], Tags=[{"Key": "nodepool_provider_name",
                                            "Value": "ref"}])
    ami = ec2.register_image(
        Name="ref-image", Architecture="x86_64", RootDeviceName="/dev/xvda",
        VirtualizationType="hvm", EnaSupport=True, ImdsSupport="v2.0",
        BlockDeviceMappings=[{"DeviceName": "/dev/xvda", "Ebs": {
            "SnapshotId": sid, "VolumeSize": 8, "VolumeType": "gp3",
            "DeleteOnTermination": True}}])["ImageId"]

    snaps = [s for p in ec2.get_paginator("describe_snapshots").paginate(OwnerIds=["self"])
             for s in p["Snapshots"]]
    assert sid in [s["SnapshotId"] for s in snaps]
    for s in snaps:
        assert missing(s, SNAPSHOT_MEMBERS) == [], s
        assert s["Progress"].endswith("%")

    mine = pages(ec2, "describe_images", "Images", Owners=["self"])
    assert ami in [i["ImageId"] for i in mine]
    for img in mine:
        assert missing(img, IMAGE_MEMBERS) == [], img
        root = [b for b in img["BlockDeviceMappings"]
                if b["DeviceName"] == img["RootDeviceName"]]
        assert root and missing(root[0]["Ebs"], IMAGE_EBS_MEMBERS) == [], img
    reg = [i for i in mine if i["ImageId"] == ami][0]
    assert reg["ImdsSupport"] == "v2.0"
    assert reg["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"] == sid

    # a public image found by filter: the members and a root mapping too
    pub = ec2.describe_images(Filters=[{"Name": "name", "Values": ["debian-12-*"]}])["Images"]
    pub = sorted(pub, key=lambda k: k["CreationDate"], reverse=True)
    assert pub[0]["ImageId"] == IMAGE
    assert missing(pub[0], IMAGE_MEMBERS) == [], pub[0]
    assert pub[0]["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"].startswith("snap-")


def test_instances_volumes_hosts(sim):
    """upstream's _listInstances / _listVolumes / _listHosts paginators,
    reading State, Tags, Placement, BlockDeviceMappings' VolumeId,
    NetworkInterfaces' Ipv6Addresses, a volume's Iops and Size."""
    ec2 = client(sim, "ec2")
    tags = [{"Key": "nodepool_provider_name", "Value": "ref"}]
    iid = ec2.run_instances(
        ImageId=IMAGE, InstanceType="m5.large", MinCount=1, MaxCount=1, KeyName="zuul",
        NetworkInterfaces=[{"AssociatePublicIpAddress": True, "DeviceIndex": 0}],
        BlockDeviceMappings=[{"DeviceName": "/dev/xvda", "Ebs": {
            "VolumeSize": 20, "VolumeType": "gp3", "DeleteOnTermination": True}}],
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags},
                           {"ResourceType": "volume", "Tags": tags}])["Instances"][0][
        "InstanceId"]
    wait_for(lambda: ec2.describe_instances(InstanceIds=[iid])["Reservations"][0][
        "Instances"][0]["State"]["Name"] == "running", 5)
    insts = [i for p in ec2.get_paginator("describe_instances").paginate()
             for r in p["Reservations"] for i in r["Instances"]]
    i = [i for i in insts if i["InstanceId"] == iid][0]
    assert missing(i, INSTANCE_MEMBERS) == [], i
    assert i["CpuOptions"] == {"CoreCount": 1, "ThreadsPerCore": 2}
    assert missing(i["MetadataOptions"], IMDS_MEMBERS) == []
    assert {"AvailabilityZone", "Tenancy"} <= set(i["Placement"])
    eni = i["NetworkInterfaces"][0]
    assert missing(eni, ENI_MEMBERS) == [], eni
    assert eni["Attachment"]["DeviceIndex"] == 0
    assert eni["PrivateIpAddresses"][0]["PrivateIpAddress"] == i["PrivateIpAddress"]
    assert eni["Association"]["PublicIp"] == i["PublicIpAddress"]
    vid = i["BlockDeviceMappings"][0]["Ebs"]["VolumeId"]

    vols = [v for p in ec2.get_paginator("describe_volumes").paginate() for v in p["Volumes"]]
    v = [v for v in vols if v["VolumeId"] == vid][0]
    assert missing(v, VOLUME_MEMBERS) == [], v
    assert (v["VolumeType"], v["Size"], v["Iops"], v["Throughput"]) == ("gp3", 20, 3000, 125)
    assert v["Attachments"][0]["InstanceId"] == iid
    for other in vols:
        assert missing(other, VOLUME_MEMBERS - {"Iops"} if other["VolumeType"] in
                       ("st1", "sc1", "standard") else VOLUME_MEMBERS) == [], other

    hid = ec2.allocate_hosts(InstanceType="c5.large", AvailabilityZone="us-east-1a",
                             Quantity=1)["HostIds"][0]
    hosts = [h for p in ec2.get_paginator("describe_hosts").paginate() for h in p["Hosts"]]
    h = [h for h in hosts if h["HostId"] == hid][0]
    assert {"HostId", "State", "AvailabilityZone", "HostProperties", "Instances",
            "AutoPlacement", "AllocationTime", "HostRecovery", "AllowsMultipleInstanceTypes",
            "OwnerId", "AvailabilityZoneId", "MemberOfServiceLinkedResourceGroup"} <= set(h), h
    assert {"InstanceType", "Cores", "Sockets", "TotalVCpus"} <= set(h["HostProperties"])
    ec2.release_hosts(HostIds=[hid])
    ec2.terminate_instances(InstanceIds=[iid])
