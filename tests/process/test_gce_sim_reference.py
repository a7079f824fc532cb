"""The GCE simulator held to the Compute Engine API reference (v1),
through Debian's python3-googleapi: the calls upstream Nodepool's gce
adapter makes (nodepool/driver/gce/adapter.py: regions.get for quota,
images.getFromFamily, machineTypes.get, instances.insert / list / delete),
each answer checked for the members the reference documents for the
resource (googleapiclient hands the JSON over as it came, so a missing
member is missing for every client). The reference pages are listed call
by call in tests/sim/gce/README.md."""
import pytest

from conftest import wait_for
from gcesim_fixture import GceSim
from test_gce_sim import LABEL, ZONE, compute, upstream_insert

# compute#region (regions.get)
REGION = {"kind", "id", "creationTimestamp", "name", "description", "status", "zones",
          "quotas", "selfLink", "supportsPzs"}
QUOTA = {"metric", "limit", "usage"}
# compute#machineType (machineTypes.get)
MACHINE_TYPE = {"kind", "id", "creationTimestamp", "name", "description", "guestCpus",
                "memoryMb", "imageSpaceGb", "maximumPersistentDisks",
                "maximumPersistentDisksSizeGb", "zone", "selfLink", "isSharedCpu"}
# compute#image (images.getFromFamily)
IMAGE = {"kind", "id", "creationTimestamp", "name", "description", "sourceType", "status",
         "archiveSizeBytes", "diskSizeGb", "licenses", "family", "selfLink",
         "labelFingerprint", "guestOsFeatures", "licenseCodes", "storageLocations",
         "architecture"}
# compute#operation (instances.insert / delete)
OPERATION = {"kind", "id", "name", "zone", "operationType", "targetLink", "targetId", "status",
             "user", "progress", "insertTime", "startTime", "selfLink"}
# compute#instance (instances.list), a running instance
INSTANCE = {"kind", "id", "creationTimestamp", "name", "description", "tags", "machineType",
            "status", "zone", "canIpForward", "networkInterfaces", "disks", "metadata",
            "serviceAccounts", "selfLink", "scheduling", "cpuPlatform", "labelFingerprint",
            "startRestricted", "deletionProtection", "fingerprint", "lastStartTimestamp",
            "shieldedInstanceConfig", "shieldedInstanceIntegrityPolicy"}
NIC = {"kind", "network", "subnetwork", "networkIP", "name", "accessConfigs", "fingerprint",
       "stackType"}
ACCESS_CONFIG = {"kind", "type", "name", "natIP", "networkTier"}
ATTACHED_DISK = {"kind", "type", "mode", "source", "deviceName", "index", "boot", "autoDelete",
                 "interface", "diskSizeGb", "licenses", "guestOsFeatures", "architecture"}
SCHEDULING = {"onHostMaintenance", "automaticRestart", "preemptible", "provisioningModel"}


@pytest.fixture
def sim(tmp_path):
    s = GceSim(tmp_path, {"project": "gcloud-project", "boot_delay": 0.2,
                          "terminate_delay": 0.1, "op_delay": 0.1}).start()
    yield s
    s.stop()


def missing(obj, members):
    return sorted(members - set(obj))


def test_upstream_reads_have_documented_members(sim):
    c = compute(sim)
    p = sim.info["project"]
    region = c.regions().get(project=p, region="us-central1").execute()
    assert missing(region, REGION) == [], region
    quotas = {q["metric"]: q for q in region["quotas"]}
    assert {"CPUS", "INSTANCES"} <= set(quotas)
    for q in region["quotas"]:
        assert missing(q, QUOTA) == [], q
    img = c.images().getFromFamily(project="debian-cloud", family="debian-12").execute()
    assert missing(img, IMAGE) == [], img
    mt = c.machineTypes().get(project=p, zone=ZONE, machineType="n1-standard-2").execute()
    assert missing(mt, MACHINE_TYPE) == [], mt
    assert (mt["guestCpus"], mt["memoryMb"]) == (2, 7680)
    op = upstream_insert(c, p, ZONE, "nodepool-0000000001", LABEL,
                         {"nodepool_node_id": "0000000001"})
    assert missing(op, OPERATION) == [], op

    def running():
        items = c.instances().list(project=p, zone=ZONE).execute().get("items", [])
        return [i for i in items if i["status"] == "RUNNING"]
    (inst,) = wait_for(running, 10, what="RUNNING")
    assert missing(inst, INSTANCE) == [], inst
    nic = inst["networkInterfaces"][0]
    assert missing(nic, NIC) == [], nic
    assert missing(nic["accessConfigs"][0], ACCESS_CONFIG) == [], nic
    assert missing(inst["disks"][0], ATTACHED_DISK) == [], inst["disks"][0]
    assert missing(inst["scheduling"], SCHEDULING) == [], inst["scheduling"]
    assert {"kind", "fingerprint", "items"} <= set(inst["metadata"])
    op = c.instances().delete(project=p, zone=ZONE, instance=inst["name"]).execute()
    assert missing(op, OPERATION) == [], op
