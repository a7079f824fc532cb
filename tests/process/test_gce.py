"""The gce driver end to end against the GCE simulator (tests/sim/gce):
configs in upstream's schema (GerritCodeReview's zuul_ops launcher,
tests/data/configs/wild/GerritCodeReview__zuul_ops__nodepool__nodepool.yaml,
and upstream's own gce fixture, tests/data/upstream-fixtures/gce.yaml)
served to the Zuul-faithful requester with credentials found as Google's
libraries find them (GOOGLE_APPLICATION_CREDENTIALS naming the simulator's
service account key, its token_uri the simulator); and the faults: 500s,
429 with Retry-After, a cloud that stops answering, a VM that never boots,
quota (from the cloud's region quotas, and refused by the cloud), a worker
killed with SIGKILL mid-launch, revoked tokens. Every request ends
fulfilled or cleanly failed, and once cleanup has run the simulator holds
no instance (and no disk) without a node."""
import copy
import os
import re
import signal
import subprocess
import time

import pytest
import yaml

from conftest import TOP, Proc, bin_path, wait_for
from operator_helpers import webapp
from test_statsd import Receiver, Seen
from test_web import get, parse_metrics
from gcesim_fixture import GceSim
from npd import Supervisor

GERRIT = os.path.join(TOP, "tests/data/configs/wild/"
                      "GerritCodeReview__zuul_ops__nodepool__nodepool.yaml")
UPSTREAM = os.path.join(TOP, "tests/data/upstream-fixtures/gce.yaml")
PROVIDER = "gcloud-provider"
FAST = {"nodepoold": {"cleanup-interval": 1, "delete-interval": 0.5}}


@pytest.fixture
def sshd(tmp_path):
    """A real sshd on a loopback port: every simulated instance's network
    IP is 127.0.0.1, so the launcher's host-key scans (always on for gce:
    upstream's gce schema has no host-key-checking) reach it."""
    d = str(tmp_path / "sshd")
    port = int(subprocess.check_output(
        ["sh", os.path.join(TOP, "tests/sshd-fixture.sh"), "start", d]).decode().split()[-1])
    with open(os.path.join(d, "host_keys")) as f:
        keys = [line.strip() for line in f if line.strip()]
    yield port, keys
    subprocess.call(["sh", os.path.join(TOP, "tests/sshd-fixture.sh"), "stop", d])


def start_sim(tmp_path, project="gerritcodereview-ci", **cfg):
    c = {"project": project, "boot_delay": 0.3, "terminate_delay": 0.1, "op_delay": 0.1,
         "interface_ip": "127.0.0.1"}
    c.update(cfg)
    return GceSim(tmp_path, c).start()


@pytest.fixture
def sims():
    started = []
    yield started
    for s in started:
        s.stop()


def load(path, ssh_port, provider=None, pool=None, label=None, top=None):
    """An upstream-schema config with our test changes: the deployment's
    ZooKeeper (write_config), rate-limit raised (upstream's default is one
    call a second), min-ready 0 (the test asks), the cloud images'
    connection-port the test's sshd. GerritCodeReview's pools set
    host-key-checking, a key upstream's gce schema does not have (its
    validator rejects the file: tests/data/configs/wild/README.md), and
    nodepoold's as well: it is left out, so host keys are scanned."""
    with open(path) as f:
        cfg = copy.deepcopy(yaml.safe_load(f))
    for k in ("zookeeper-servers", "zookeeper-tls"):
        cfg.pop(k, None)
    for lb in cfg.get("labels", []):
        lb["min-ready"] = 0
    p = cfg["providers"][0]
    p["rate-limit"] = 50
    p.update(provider or {})
    for im in p.get("cloud-images", []):
        im["connection-port"] = ssh_port
    for pl in p["pools"]:
        pl.pop("host-key-checking", None)
        pl.update(pool or {})
        for lb in pl["labels"]:
            lb.update(label or {})
    cfg.update(top or {})
    return cfg


def launcher(deployment, sim, cfg, env=None):
    e = sim.env()
    e["HOME"] = deployment.dir  # no ~/.config/gcloud of the machine's
    e.update(env or {})
    log = os.path.join(deployment.dir, "launcher-%d.log" % len(deployment.procs))
    p = Proc([bin_path("nodepool-launcher"), "-d", "-p", PROVIDER, "-c",
              deployment.write_config(cfg)], log, env=e)
    deployment.procs.append(p)
    return p


def scrape(port):
    """/metrics as {sample: value}, or {} while it cannot be read."""
    try:
        status, _, body = get(port, "/metrics")
    except OSError:
        return {}
    return parse_metrics(body) if status == 200 else {}


def meta(inst):
    return {it["key"]: it["value"] for it in inst["metadata"].get("items", [])}


def all_settled(zuul, rids, timeout=90):
    return {rid: zuul.wait_request(rid, timeout=timeout) for rid in rids}


def finish_all(zuul, reqs):
    for rid, req in reqs.items():
        if req["state"] == "fulfilled":
            zuul.finish(zuul.accept(rid))
        else:
            zuul.zk.delete("/nodepool/requests/" + rid)


def orphans(sim, zuul):
    """Instances and disks of the simulator that no node names."""
    names = {n.get("external_id") for n in zuul.nodes().values()}
    st = sim.state()
    return ([i["name"] for i in st["instances"] if i["name"] not in names],
            [d["name"] for d in st["disks"] if d["name"] not in names])


def wait_clean(sim, zuul, timeout=60):
    wait_for(lambda: orphans(sim, zuul) == ([], []), timeout,
             what="no instance or disk without a node")


# ---- configs in upstream's schema ------------------------------------------------------------


def test_gerrit_config_serves_every_label(deployment, zuul, sims, tmp_path, sshd):
    port, keys = sshd
    sim = start_sim(tmp_path)
    sims.append(sim)
    cfg = load(GERRIT, port, top=FAST)
    p = launcher(deployment, sim, cfg)
    labels = [lb["name"] for lb in cfg["labels"]]
    types = {lb["name"]: lb["instance-type"] for lb in cfg["providers"][0]["pools"][0]["labels"]}
    for label in labels:  # max-servers 1: one at a time
        rid = zuul.submit([label])
        req = zuul.wait_request(rid, timeout=60)
        assert req["state"] == "fulfilled", (label, req, p.output()[-3000:])
        (nid,) = req["nodes"]
        node = zuul.node(nid)
        (inst,) = [i for i in sim.instances() if i["name"] == node["external_id"]]
        # upstream's instance name and external id
        assert node["external_id"] == "nodepool-" + nid and node["provider"] == PROVIDER
        # use-internal-ip: the instance's network IP, not its NAT address
        nic = inst["networkInterfaces"][0]
        assert node["interface_ip"] == nic["networkIP"] != nic["accessConfigs"][0]["natIP"]
        assert node["region"] == "us-central1" and node["az"] == "us-central1-a"
        assert node["username"] == "zuul" and node["connection_type"] == "ssh"
        assert node["connection_port"] == port and sorted(node["host_keys"]) == sorted(keys)
        assert inst["machineType"].endswith("/machineTypes/" + types[label])
        disk = inst["disks"][0]
        assert disk["boot"] and disk["autoDelete"] and disk["diskSizeGb"] == "40"
        # the metadata upstream writes: its three keys and the image's key
        assert meta(inst) == {"nodepool_node_id": nid, "nodepool_pool_name": "main",
                              "nodepool_provider_name": PROVIDER,
                              "ssh-keys": "zuul:" + cfg["providers"][0]["cloud-images"][0]["key"]}
        (d,) = [d for d in sim.disks() if d["name"] == inst["name"]]
        # the newest image of family debian-12 in project debian-cloud
        assert d["sourceImage"].endswith(
            "/projects/debian-cloud/global/images/debian-12-bookworm-v20240110")
        assert d["type"].endswith("/diskTypes/pd-standard")
        mt = {"n1-standard-2": (2, 7680), "n1-standard-8": (8, 30720),
              "n1-standard-16": (16, 61440), "e2-standard-2": (2, 8192),
              "e2-standard-8": (8, 32768), "e2-standard-16": (16, 65536)}[types[label]]
        assert node["resources"] == {"cores": mt[0], "instances": 1, "ram": mt[1]}
        zuul.finish(zuul.accept(rid))
        wait_for(lambda: sim.instances() == [], 30, what="instance deleted")
    wait_for(lambda: zuul.nodes() == {}, 30, what="nodes deleted")
    assert sim.disks() == []  # autoDelete: the boot disks went with them
    calls = sim.calls()
    assert calls["compute.instances.insert"] == len(labels)
    assert calls["compute.instances.delete"] == len(labels)
    # the family is resolved once (cached), machine types once each
    assert calls["compute.images.getFromFamily"] == 1
    assert calls["compute.machineTypes.get"] == len(set(types.values()))
    assert calls["oauth2.token"] == 1
    assert calls.get("compute.regions.get", 0) >= 1


def test_gerrit_config_under_nodepoold(deployment, zuul, sims, tmp_path, sshd):
    """What the issue found: nodepoold's worker refused the gce provider.
    Under nodepoold (worker forked by the supervisor, READY, status), the
    file serves a request; nodepoolctl shows the provider running."""
    sim = start_sim(tmp_path)
    sims.append(sim)
    cfg = load(GERRIT, sshd[0])
    sup = Supervisor(deployment)
    try:
        sup.write(cfg)
        env = sim.env()
        env["HOME"] = deployment.dir
        sup.start_fg(env=env)
        st = sup.wait_running([PROVIDER])
        assert st[PROVIDER]["state"] == "running"
        rid = zuul.submit(["debian-bookworm-e2-standard-2"])
        req = zuul.wait_request(rid, timeout=60)
        assert req["state"] == "fulfilled", (req, sup.log()[-3000:])
        (inst,) = sim.instances()
        assert inst["name"] == zuul.node(req["nodes"][0])["external_id"]
        zuul.finish(zuul.accept(rid))
        wait_for(lambda: sim.instances() == [] and not zuul.nodes(), 30, what="deleted")
    finally:
        sup.stop()


def test_upstream_fixture_serves_its_label(deployment, zuul, sims, tmp_path, sshd):
    sim = start_sim(tmp_path, project="gcloud-project")
    sims.append(sim)
    # upstream's pool keys network and subnetwork (its fixture has neither)
    cfg = load(UPSTREAM, sshd[0], top=FAST, pool={
        "network": "global/networks/ci", "subnetwork": "regions/us-central1/subnetworks/ci-a"})
    launcher(deployment, sim, cfg)
    rid = zuul.submit(["debian-stretch-f1-micro"])
    req = zuul.wait_request(rid, timeout=60)
    assert req["state"] == "fulfilled", req
    node = zuul.node(req["nodes"][0])
    (inst,) = sim.instances()
    assert node["attributes"] == {"key1": "value1", "key2": "value2"}
    assert node["resources"] == {"cores": 1, "instances": 1, "ram": 614}
    assert inst["machineType"].endswith("/f1-micro")
    nic = inst["networkInterfaces"][0]
    assert nic["network"].endswith("/projects/gcloud-project/global/networks/ci")
    assert nic["subnetwork"] == "regions/us-central1/subnetworks/ci-a"
    # volume-type as written: standard
    (d,) = sim.disks()
    assert d["type"].endswith("/diskTypes/standard") and d["sizeGb"] == "10"
    assert "/debian-9-" in d["sourceImage"] or "debian-9" in d["sourceImage"]
    zuul.finish(zuul.accept(rid))
    wait_clean(sim, zuul)
    wait_for(lambda: sim.instances() == [], 30, what="instance deleted")


# ---- faults ---------------------------------------------------------------------------------


def small(port, **kw):
    """GerritCodeReview's config with room for several nodes at once."""
    pool = {"max-servers": 10}
    pool.update(kw.pop("pool", {}))
    top = dict(FAST)
    top.update(kw.pop("top", {}))
    return load(GERRIT, port, pool=pool, top=top, **kw)


LABEL = "debian-bookworm-n1-standard-2"  # 2 vCPUs


def test_faults_500_and_429(deployment, zuul, sims, tmp_path, sshd):
    sim = start_sim(tmp_path)
    sims.append(sim)
    sim.fault(api="compute", method="POST", path="/instances$", status=500, count=2)
    sim.fault(api="compute", method="GET", path="/instances$", status=429, retry_after=1,
              count=3)
    sim.fault(api="oauth2", status=503, retry_after=1, count=1)
    w = webapp()
    rx = Receiver()
    p = launcher(deployment, sim, small(sshd[0], top=w), env=rx.env())
    reqs = all_settled(zuul, [zuul.submit([LABEL]) for _ in range(4)])
    assert all(r["state"] == "fulfilled" for r in reqs.values()), (reqs, p.output()[-3000:])
    hits = {(f["api"], f["status"]): f["hits"] for f in sim.faults()}
    assert hits == {("compute", 500): 2, ("compute", 429): 3, ("oauth2", 503): 1}
    # every retry visible (issue 24): a debug line naming the API and the
    # wait (the 429s and 503 after their Retry-After, by the HTTP client;
    # the 500s by the driver's own back-off), a counter per API on
    # /metrics and in statsd
    want = {"instances.insert": 2, "instances.list": 3, "oauth2.token": 1}
    m = wait_for(lambda: (lambda m: all(m.get(
        'nodepool_api_retries_total{provider="%s",api="%s"}' % (PROVIDER, a)) == n
        for a, n in want.items()) and m)(scrape(w["webapp"]["port"])), 20,
        what="the retries on /metrics")
    assert {k: v for k, v in m.items() if k.startswith("nodepool_api_retries_total")} == {
        'nodepool_api_retries_total{provider="%s",api="%s"}' % (PROVIDER, a): n
        for a, n in want.items()}
    out = p.output()
    assert len(re.findall(r"API instances\.list: HTTP 429, retry \d in 1\.00 s", out)) == 3, out
    assert len(re.findall(r"API instances\.insert: HTTP 500 \(.*\), retry \d in \d", out)) \
        == 2, out
    assert len(re.findall(r"API oauth2\.token: HTTP 503, retry 1 in 1\.00 s", out)) == 1, out
    seen = Seen(rx)
    key = "nodepool.provider.%s.api.%s.retries"
    wait_for(lambda: len(seen.poll().lines.get(key % (PROVIDER, "instances_list"), [])) >= 3,
             10, what="statsd retries")
    seen.poll(0.5)
    rx.close()
    assert seen.lines[key % (PROVIDER, "instances_list")] == [("1", "c")] * 3
    assert seen.lines[key % (PROVIDER, "instances_insert")] == [("1", "c")] * 2
    # a 500 on insert is retried under the same name: one instance per node
    assert len(sim.instances()) == 4
    finish_all(zuul, reqs)
    wait_for(lambda: not zuul.nodes(), 60, what="nodes deleted")
    wait_clean(sim, zuul)
    assert sim.instances() == []


def test_faults_cloud_stops_answering(deployment, zuul, sims, tmp_path, sshd):
    sim = start_sim(tmp_path)
    sims.append(sim)
    p = launcher(deployment, sim, small(sshd[0]))
    reqs = all_settled(zuul, [zuul.submit([LABEL])])
    assert all(r["state"] == "fulfilled" for r in reqs.values())
    fid = sim.fault(api="compute", hang=True)
    rids = [zuul.submit([LABEL]) for _ in range(2)]
    time.sleep(3)
    # nothing is served while the cloud hangs; nothing crashes
    for rid in rids:
        assert zuul.request(rid)["state"] in ("requested", "pending")
    assert p.alive()
    sim.clear_fault(fid)
    reqs.update(all_settled(zuul, rids))
    assert all(r["state"] == "fulfilled" for r in reqs.values()), reqs
    finish_all(zuul, reqs)
    wait_for(lambda: not zuul.nodes(), 60, what="nodes deleted")
    wait_clean(sim, zuul)


def test_faults_vm_never_boots(deployment, zuul, sims, tmp_path, sshd):
    sim = start_sim(tmp_path, outcomes=[{"status": "never"}, {"status": "terminated"}])
    sims.append(sim)
    # the first instance stays STAGING (launch-timeout), the second stops
    # (TERMINATED); the third boots: each failed attempt's instance is
    # deleted before the next
    p = launcher(deployment, sim, small(sshd[0], provider={"launch-timeout": 3}))
    reqs = all_settled(zuul, [zuul.submit([LABEL])])
    (req,) = reqs.values()
    assert req["state"] == "fulfilled", (req, p.output()[-3000:])
    assert sim.calls()["compute.instances.insert"] == 3
    assert len(sim.instances()) == 1
    finish_all(zuul, reqs)
    wait_for(lambda: not zuul.nodes(), 60, what="nodes deleted")
    wait_clean(sim, zuul)


def test_faults_every_attempt_fails_cleanly(deployment, zuul, sims, tmp_path, sshd):
    sim = start_sim(tmp_path, outcomes=[{"status": "terminated"}] * 6)
    sims.append(sim)
    launcher(deployment, sim, small(sshd[0]))
    reqs = all_settled(zuul, [zuul.submit([LABEL]) for _ in range(2)])
    assert all(r["state"] == "failed" for r in reqs.values()), reqs
    assert sim.calls()["compute.instances.insert"] == 6  # launch-retries 3 each
    finish_all(zuul, reqs)
    wait_clean(sim, zuul)
    wait_for(lambda: sim.instances() == [], 30, what="failed attempts' instances deleted")


def test_quota_from_region_quotas(deployment, zuul, sims, tmp_path, sshd):
    """CPUS at 4: two 2-vCPU nodes at once, the third waits for one to go
    (regions.get, upstream's getQuotaLimits)."""
    sim = start_sim(tmp_path, quotas={"us-central1": {"CPUS": 4}})
    sims.append(sim)
    launcher(deployment, sim, small(sshd[0]))
    rids = [zuul.submit([LABEL]) for _ in range(3)]

    def states():
        return [(zuul.request(r) or {}).get("state") for r in rids]
    wait_for(lambda: states().count("fulfilled") == 2, 60, what="two fulfilled")
    time.sleep(1)
    assert states().count("fulfilled") == 2 and "failed" not in states()
    assert len(sim.instances()) == 2
    done = [r for r, st in zip(rids, states()) if st == "fulfilled"]
    waiting = [r for r in rids if r not in done]
    zuul.finish(zuul.accept(done[0]))
    assert zuul.wait_request(waiting[0], timeout=60)["state"] == "fulfilled"


def test_quota_refused_by_the_cloud(deployment, zuul, sims, tmp_path, sshd):
    """The cloud refuses for quota what the launcher thought fits: an
    insert answered 403 quotaExceeded, and an operation ending in
    QUOTA_EXCEEDED. Each launch is aborted, not failed, and its request
    served once it fits."""
    sim = start_sim(tmp_path)
    sims.append(sim)
    sim.fault(api="compute", method="POST", path="/instances$", status=403,
              reason="quotaExceeded", message="Quota 'CPUS' exceeded.", count=1)
    p = launcher(deployment, sim, small(sshd[0]))
    rid = zuul.submit([LABEL])
    first = zuul.wait_request(rid, timeout=60)
    assert first["state"] == "fulfilled", first
    assert "quotaExceeded" in p.output()
    # the region's CPUS drop to what the first node uses, behind the
    # launcher's back: the next insert's operation fails QUOTA_EXCEEDED
    sim.ctl("POST", "/quotas", {"us-central1": {"CPUS": 2}})
    rid2 = zuul.submit([LABEL])
    wait_for(lambda: "QUOTA_EXCEEDED" in p.output(), 60, what="the quota error")
    time.sleep(1)
    assert zuul.request(rid2)["state"] in ("requested", "pending")
    zuul.finish(zuul.accept(rid))
    assert zuul.wait_request(rid2, timeout=60)["state"] == "fulfilled"
    zuul.finish(zuul.accept(rid2))
    wait_for(lambda: not zuul.nodes(), 60, what="nodes deleted")
    wait_clean(sim, zuul)


def test_quota_error_in_a_later_operation(deployment, zuul, sims, tmp_path, sshd):
    """The insert's operation is RUNNING, then DONE with QUOTA_EXCEEDED (no
    instance): the launcher, not finding the instance listed, asks the
    operation, and aborts the launch as a quota error."""
    sim = start_sim(tmp_path, error_op_delay=0.5)
    sims.append(sim)
    p = launcher(deployment, sim, small(sshd[0]))
    rid = zuul.submit([LABEL])
    assert zuul.wait_request(rid, timeout=60)["state"] == "fulfilled"
    sim.ctl("POST", "/quotas", {"us-central1": {"CPUS": 2}})
    rid2 = zuul.submit([LABEL])
    wait_for(lambda: "QUOTA_EXCEEDED" in p.output(), 60, what="the quota error")
    assert sim.calls()["compute.zoneOperations.get"] >= 1
    assert zuul.request(rid2)["state"] in ("requested", "pending")
    zuul.finish(zuul.accept(rid))
    assert zuul.wait_request(rid2, timeout=60)["state"] == "fulfilled"
    zuul.finish(zuul.accept(rid2))
    wait_for(lambda: not zuul.nodes(), 60, what="nodes deleted")
    wait_clean(sim, zuul)


def test_worker_killed_mid_launch(deployment, zuul, sims, tmp_path, sshd):
    sim = start_sim(tmp_path, boot_delay=30)
    sims.append(sim)
    cfg = small(sshd[0], top={"zookeeper-timeout": 2})
    p = launcher(deployment, sim, cfg)
    rids = [zuul.submit([LABEL]) for _ in range(3)]
    wait_for(lambda: len(sim.instances()) == 3, 30, what="three instances staging")
    p.signal(signal.SIGKILL)
    p.stop()
    sim.ctl("POST", "/behavior", {"boot_delay": 0.3})
    # a successor takes over: the dead launcher's nodes are deleted with
    # their instances, the requests served, and nothing is left behind
    launcher(deployment, sim, cfg)
    reqs = all_settled(zuul, rids)
    assert all(r["state"] == "fulfilled" for r in reqs.values()), reqs
    wait_clean(sim, zuul)
    finish_all(zuul, reqs)
    wait_for(lambda: not zuul.nodes(), 60, what="nodes deleted")
    wait_clean(sim, zuul)
    wait_for(lambda: sim.instances() == [], 60, what="every instance deleted")


def test_leaked_instance_is_deleted(deployment, zuul, sims, tmp_path, sshd):
    sim = start_sim(tmp_path)
    sims.append(sim)
    ours = {"nodepool_provider_name": PROVIDER, "nodepool_node_id": "0000099999",
            "nodepool_pool_name": "main"}
    sim.ctl("POST", "/instances", {"name": "nodepool-0000099999", "metadata": ours,
                                   "zone": "us-central1-a"})
    sim.ctl("POST", "/instances", {"name": "someone-elses", "zone": "us-central1-a",
                                   "metadata": {"owner": "someone-else"}})
    sim.ctl("POST", "/instances", {"name": "other-provider", "zone": "us-central1-a",
                                   "metadata": dict(ours, nodepool_provider_name="other")})
    launcher(deployment, sim, small(sshd[0]))
    wait_for(lambda: sorted(i["name"] for i in sim.instances()) ==
             ["other-provider", "someone-elses"], 30, what="the leaked instance deleted")
    assert sorted(d["name"] for d in sim.disks()) == ["other-provider", "someone-elses"]


def test_console_log_on_failed_keyscan(deployment, zuul, sims, tmp_path, sshd):
    """Nothing answers SSH (the cloud image's port is closed): the keyscan
    fails at boot-timeout and the instance's serial console
    (getSerialPortOutput) goes to the launcher's log before the instance
    is deleted."""
    sim = start_sim(tmp_path, console_output="simulated console: kernel panic - not syncing")
    sims.append(sim)
    cfg = small(sshd[0], provider={"boot-timeout": 1, "launch-retries": 1})
    cfg["providers"][0]["cloud-images"][0]["connection-port"] = 9  # discard: closed
    p = launcher(deployment, sim, cfg)
    rid = zuul.submit([LABEL])
    assert zuul.wait_request(rid, timeout=60)["state"] == "failed"
    wait_for(lambda: "simulated console: kernel panic" in p.output(), 30,
             what="the console in the launcher's log")
    assert sim.calls()["compute.instances.getSerialPortOutput"] == 1
    zuul.zk.delete("/nodepool/requests/" + rid)
    wait_for(lambda: sim.instances() == [], 30, what="the failed instance deleted")
    wait_clean(sim, zuul)


# ---- credentials -------------------------------------------------------------------------------


def test_tokens_renewed_and_revoked(deployment, zuul, sims, tmp_path, sshd):
    """Access tokens are renewed before they expire (token_ttl 302 s: 300
    s early means every 2 s here), and a token the server revoked (401) is
    replaced at once."""
    sim = start_sim(tmp_path, token_ttl=302)
    sims.append(sim)
    launcher(deployment, sim, small(sshd[0]))
    served = all_settled(zuul, [zuul.submit([LABEL])])
    time.sleep(2.5)
    sim.ctl("DELETE", "/tokens")
    served.update(all_settled(zuul, [zuul.submit([LABEL]) for _ in range(2)]))
    assert all(r["state"] == "fulfilled" for r in served.values()), served
    assert sim.state()["tokens_issued"] >= 3
    finish_all(zuul, served)
    wait_for(lambda: not zuul.nodes(), 60, what="nodes deleted")
    wait_clean(sim, zuul)


def test_authorized_user_credentials(deployment, zuul, sims, tmp_path, sshd):
    """No GOOGLE_APPLICATION_CREDENTIALS: gcloud's well-known file
    ($CLOUDSDK_CONFIG/application_default_credentials.json), an authorized
    user's refresh token."""
    sim = start_sim(tmp_path)
    sims.append(sim)
    launcher(deployment, sim, small(sshd[0]), env={
        "GOOGLE_APPLICATION_CREDENTIALS": "",
        "CLOUDSDK_CONFIG": os.path.dirname(sim.info["user_credentials"])})
    reqs = all_settled(zuul, [zuul.submit([LABEL])])
    assert all(r["state"] == "fulfilled" for r in reqs.values()), reqs


def test_missing_credentials_reported(deployment, sims, tmp_path, sshd):
    sim = start_sim(tmp_path)
    sims.append(sim)
    p = launcher(deployment, sim, small(sshd[0]), env={
        "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "nowhere.json")})
    wait_for(lambda: "nowhere.json" in p.output(), 30, what="the reason in the log")
    p2 = launcher(deployment, sim, small(sshd[0]), env={"GOOGLE_APPLICATION_CREDENTIALS": ""})
    wait_for(lambda: "no Google credentials" in p2.output(), 30, what="the reason in the log")
    assert sim.state()["instances"] == []
