"""The GCE simulator (tests/sim/gce) judged by Google's own client,
google-api-python-client (Debian's python3-googleapi, the library upstream
Nodepool's gce driver uses) with google-auth: the client is built from the
simulator's discovery document, authorised with the simulator's service
account key through its token endpoint (a real RS256 JWT bearer grant), and
makes the calls upstream's adapter (nodepool/driver/gce/adapter.py) makes,
with its arguments: instances list/insert/delete, images.getFromFamily,
machineTypes.get, regions.get; and what nodepoold adds: zone operations,
getSerialPortOutput, images.get."""
import json
import os
import time

import pytest

from conftest import wait_for
from gcesim_fixture import GceSim

import google_auth_httplib2
import googleapiclient.discovery
import httplib2
from google.auth.exceptions import RefreshError
from google.oauth2 import credentials as user_credentials
from google.oauth2 import service_account
from googleapiclient.errors import HttpError

SCOPES = ["https://www.googleapis.com/auth/compute"]
ZONE = "us-central1-a"


@pytest.fixture
def sim(tmp_path):
    s = GceSim(tmp_path, {"project": "gcloud-project", "boot_delay": 0.3,
                          "terminate_delay": 0.2, "op_delay": 0.2}).start()
    yield s
    s.stop()


def compute(sim, creds=None):
    if creds is None:
        creds = service_account.Credentials.from_service_account_file(
            sim.info["credentials"], scopes=SCOPES)
    http = google_auth_httplib2.AuthorizedHttp(
        creds, http=httplib2.Http(ca_certs=sim.info["cacert"]))
    return googleapiclient.discovery.build("compute", "v1", http=http,
                                           discoveryServiceUrl=sim.info["discovery"],
                                           cache_discovery=False)


def upstream_insert(c, project, zone, hostname, label, metadata):
    """upstream's GCEAdapter.createInstance, call for call."""
    result = c.images().getFromFamily(project=label["image_project"],
                                      family=label["image_family"]).execute()
    image_id = result["selfLink"]
    disk_init = dict(sourceImage=image_id,
                     diskType="zones/{}/diskTypes/{}".format(zone, label["volume_type"]),
                     diskSizeGb=str(label["volume_size"]))
    disk = dict(boot=True, autoDelete=True, initializeParams=disk_init)
    mtype = c.machineTypes().get(project=project, zone=zone,
                                 machineType=label["instance_type"]).execute()
    network = dict(network="global/networks/default", subnetwork=None,
                   accessConfigs=[dict(type="ONE_TO_ONE_NAT", name="External NAT")])
    meta = dict(items=[dict(key=k, value=v) for k, v in metadata.items()])
    args = dict(name=hostname, machineType=mtype["selfLink"], disks=[disk],
                networkInterfaces=[network], serviceAccounts=[], metadata=meta)
    return c.instances().insert(project=project, zone=zone, body=args).execute()


LABEL = {"image_project": "debian-cloud", "image_family": "debian-12",
         "volume_type": "pd-standard", "volume_size": 40, "instance_type": "n1-standard-2"}


def test_upstream_adapter_calls(sim):
    c = compute(sim)
    p = sim.info["project"]
    meta = {"nodepool_node_id": "0000000001", "nodepool_pool_name": "main",
            "nodepool_provider_name": "gcloud-provider"}
    op = upstream_insert(c, p, ZONE, "nodepool-0000000001", LABEL, meta)
    assert op["kind"] == "compute#operation" and op["operationType"] == "insert"
    assert op["targetLink"].endswith("/zones/%s/instances/nodepool-0000000001" % ZONE)
    wait_for(lambda: c.zoneOperations().get(project=p, zone=ZONE, operation=op["name"])
             .execute()["status"] == "DONE", 10, what="operation done")

    # upstream's listInstances -> GCEInstance.load
    def listed():
        return c.instances().list(project=p, zone=ZONE).execute().get("items", [])
    wait_for(lambda: [i["status"] for i in listed()] == ["RUNNING"], 10, what="RUNNING")
    (inst,) = listed()
    assert inst["name"] == "nodepool-0000000001"
    assert inst["zone"].endswith("/zones/" + ZONE)
    assert {it["key"]: it["value"] for it in inst["metadata"]["items"]} == meta
    nic = inst["networkInterfaces"][0]
    assert nic["networkIP"] and nic["accessConfigs"][0]["natIP"]
    assert nic["accessConfigs"][0]["type"] == "ONE_TO_ONE_NAT"
    # upstream's _getMachineType on the listed instance's machineType
    mt = c.machineTypes().get(project=p, zone=ZONE,
                              machineType=inst["machineType"].split("/")[-1]).execute()
    assert (mt["guestCpus"], mt["memoryMb"]) == (2, 7680)
    assert inst["disks"][0]["diskSizeGb"] == "40" and inst["disks"][0]["autoDelete"]
    # upstream's getQuotaLimits
    quotas = {q["metric"]: q for q in
              c.regions().get(project=p, region="us-central1").execute()["quotas"]}
    assert quotas["CPUS"]["limit"] == 24 and quotas["CPUS"]["usage"] == 2
    assert quotas["INSTANCES"]["usage"] == 1
    # the serial console (nodepoold's keyscan-failure log)
    out = c.instances().getSerialPortOutput(project=p, zone=ZONE,
                                            instance="nodepool-0000000001", port=1).execute()
    assert "Linux version" in out["contents"]
    # upstream's deleteInstance; the instance is STOPPING, then gone
    dop = c.instances().delete(project=p, zone=ZONE, instance="nodepool-0000000001").execute()
    assert dop["operationType"] == "delete"
    assert c.instances().get(project=p, zone=ZONE,
                             instance="nodepool-0000000001").execute()["status"] == "STOPPING"
    wait_for(lambda: listed() == [], 10, what="instance gone")
    assert sim.disks() == []
    with pytest.raises(HttpError) as e:
        c.instances().get(project=p, zone=ZONE, instance="nodepool-0000000001").execute()
    assert e.value.resp.status == 404
    assert json.loads(e.value.content)["error"]["errors"][0]["reason"] == "notFound"


def test_errors_as_google_answers_them(sim):
    c = compute(sim)
    p = sim.info["project"]
    upstream_insert(c, p, ZONE, "np1", LABEL, {})
    with pytest.raises(HttpError) as e:
        upstream_insert(c, p, ZONE, "np1", LABEL, {})
    assert e.value.resp.status == 409
    assert json.loads(e.value.content)["error"]["errors"][0]["reason"] == "alreadyExists"
    with pytest.raises(HttpError) as e:
        c.machineTypes().get(project=p, zone=ZONE, machineType="n9-huge").execute()
    assert e.value.resp.status == 404
    with pytest.raises(HttpError) as e:
        c.images().getFromFamily(project="debian-cloud", family="no-such-family").execute()
    assert e.value.resp.status == 404
    im = c.images().get(project="debian-cloud", image="debian-11-bullseye-v20240110").execute()
    assert im["family"] == "debian-11"
    # a region over its CPUS quota: the insert is accepted, its operation
    # ends DONE with QUOTA_EXCEEDED (as Compute Engine does)
    sim.ctl("POST", "/quotas", {"us-central1": {"CPUS": 3}})
    op = upstream_insert(c, p, ZONE, "np2", LABEL, {})
    op = c.zoneOperations().get(project=p, zone=ZONE, operation=op["name"]).execute()
    assert op["status"] == "DONE"
    assert op["error"]["errors"][0]["code"] == "QUOTA_EXCEEDED"
    assert [i["name"] for i in sim.instances()] == ["np1"]


def test_faults_seen_by_the_client(sim):
    c = compute(sim)
    p = sim.info["project"]
    sim.fault(api="compute", method="GET", path="/instances$", status=429, retry_after=1,
              count=1)
    with pytest.raises(HttpError) as e:
        c.instances().list(project=p, zone=ZONE).execute()
    assert e.value.resp.status == 429 and e.value.resp["retry-after"] == "1"
    assert json.loads(e.value.content)["error"]["errors"][0]["reason"] == "rateLimitExceeded"
    # the client's own retries ride over passing 500s
    sim.fault(api="compute", method="GET", path="/instances$", status=500, count=2)
    assert c.instances().list(project=p, zone=ZONE).execute(num_retries=3)["kind"] == \
        "compute#instanceList"
    assert [f["hits"] for f in sim.faults()] == [1, 2]


def test_pages(tmp_path):
    s = GceSim(tmp_path, {"page_size": 2, "boot_delay": 0}).start()
    try:
        c = compute(s)
        p = s.info["project"]
        for n in range(5):
            s.ctl("POST", "/instances", {"name": "vm%d" % n, "zone": ZONE})
        req = c.instances().list(project=p, zone=ZONE)
        names = []
        while req is not None:
            page = req.execute()
            names += [i["name"] for i in page.get("items", [])]
            req = c.instances().list_next(req, page)
        assert names == ["vm0", "vm1", "vm2", "vm3", "vm4"]
        # images.list pages the same way, each image with its labels
        for n in range(3):
            s.ctl("POST", "/images", {"project": p, "name": "img%d" % n,
                                      "labels": {"nodepool_upload_id": "%010d" % n}})
        req = c.images().list(project=p)
        seen = []
        while req is not None:
            page = req.execute()
            seen += [(i["name"], i["labels"]) for i in page.get("items", [])]
            req = c.images().list_next(req, page)
        assert seen == [("img%d" % n, {"nodepool_upload_id": "%010d" % n}) for n in range(3)]
    finally:
        s.stop()


def test_tokens(sim):
    # google-auth's service account flow: the JWT bearer grant
    creds = service_account.Credentials.from_service_account_file(
        sim.info["credentials"], scopes=SCOPES)
    compute(sim, creds).zones().get(project=sim.info["project"], zone=ZONE).execute()
    assert creds.valid and creds.token.startswith("ya29.")
    # an authorized user's refresh token (gcloud's well-known file)
    with open(sim.info["user_credentials"]) as f:
        u = json.load(f)
    ucreds = user_credentials.Credentials(None, refresh_token=u["refresh_token"],
                                          token_uri=u["token_uri"], client_id=u["client_id"],
                                          client_secret=u["client_secret"])
    compute(sim, ucreds).zones().get(project=sim.info["project"], zone=ZONE).execute()
    assert sim.state()["tokens_issued"] == 2
    # a key the simulator did not issue is refused (invalid_grant)
    with open(sim.info["credentials"]) as f:
        info = json.load(f)
    other = os.path.join(os.path.dirname(sim.info["credentials"]), "other.pem")
    os.system("openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out %s "
              "2>/dev/null" % other)
    with open(other) as f:
        info["private_key"] = f.read()
    bad = service_account.Credentials.from_service_account_info(info, scopes=SCOPES)
    with pytest.raises(RefreshError) as e:
        compute(sim, bad).zones().get(project=sim.info["project"], zone=ZONE).execute()
    assert "invalid_grant" in str(e.value)
    # a revoked token: 401 with Google's answer
    sim.ctl("DELETE", "/tokens")
    c = compute(sim, creds)  # creds still holds the revoked token
    time.sleep(0)
    try:
        c.zones().get(project=sim.info["project"], zone=ZONE).execute()
    except HttpError as e2:  # google_auth_httplib2 refreshes once on 401
        pytest.fail("not refreshed after 401: %s" % e2)
    assert sim.state()["tokens_issued"] == 3
