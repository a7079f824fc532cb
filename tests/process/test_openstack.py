"""The openstack driver end to end: nodepoold (or one nodepool-launcher)
against the OpenStack simulator (tests/sim/openstack), played as Zuul
(conftest.Zuul). OpenDev's launcher configs serve their labels; the
floating-IP and boot-from-volume shapes; credentials (application
credentials, re-authentication on 401, the internal interface); quota from
the cloud's limits; and faults: 500s, 429s, boot timeouts, servers in
ERROR, quota errors, a cloud that stops answering, a worker killed
mid-launch. After cleanup the simulator holds no server, port or floating
IP without a node."""
import os
import signal
import time

import pytest
import yaml

from conftest import wait_for
from npd import Supervisor
from openstack_helpers import (for_test, load_opendev, servable_labels, sim_for,
                               wait_clean, write_clouds, write_uploads)
from ossim_fixture import OSSim

FAST = {"nodepoold": {"cleanup-interval": 1, "delete-interval": 0.5}}


@pytest.fixture
def sims():
    started = []
    yield started
    for s in started:
        s.stop()


def served(zuul, labels, timeout=60, **kw):
    rid = zuul.submit(labels, **kw)
    req = zuul.wait_request(rid, timeout=timeout)
    assert req["state"] == "fulfilled", req
    return rid, req


def use_and_return(zuul, rid):
    zuul.finish(zuul.accept(rid))


# ---- OpenDev's launchers --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["nl01.opendev.org.yaml", "nl02.opendev.org.yaml",
                                  "nl03.opendev.org.yaml", "nl04.opendev.org.yaml"])
def test_opendev_launcher_serves_its_labels(name, deployment, zk, zuul, sims, tmp_path,
                                            monkeypatch):
    cfg = for_test(load_opendev(name), deployment)
    sim, where, ids = sim_for(cfg, tmp_path)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    write_uploads(zk, cfg, ids)
    sup = Supervisor(deployment)
    sup.write(cfg)  # Supervisor.settings adds the fast cleanup intervals
    sup.start_fg()
    try:
        providers = [p["name"] for p in cfg["providers"]]
        # the configs have diskimages: nodepoold runs the builder too (its
        # images are paused here: the uploads are the records written above)
        sup.wait_running(providers + ["builder"], timeout=60)
        labels = sorted(servable_labels(cfg))
        rids = {lab: zuul.submit([lab]) for lab in labels}
        for lab, rid in rids.items():
            req = zuul.wait_request(rid, timeout=120)
            assert req["state"] == "fulfilled", (lab, req)
            (nid,) = req["nodes"]
            n = zuul.node(nid)
            assert n["state"] == "ready" and n["type"] == [lab]
            cloud, region = where[n["provider"]]
            assert n["cloud"] == cloud and n["region"] == region
            srv = [s for s in sim.servers(cloud=cloud, region=region)
                   if s["id"] == n["external_id"]]
            assert len(srv) == 1, (lab, n)
            s = srv[0]
            assert s["status"] == "ACTIVE" and s["name"] == "np" + nid
            assert s["metadata"]["nodepool_node_id"] == nid
            assert s["metadata"]["nodepool_provider_name"] == n["provider"]
            assert s["metadata"]["nodepool_pool_name"] == n["pool"]
            # a diskimage label boots the upload's image
            image = n["image_id"].split("/")[3]  # /nodepool/images/<image>/builds/...
            assert s["image"]["id"] == ids[(n["provider"], image)]
            assert s["metadata"]["groups"] == "%s,%s,%s" % (n["provider"], image, lab)
            assert n["interface_ip"] and n["resources"]["instances"] == 1
        for rid in rids.values():
            use_and_return(zuul, rid)
        wait_for(lambda: all(n["state"] != "used" for n in zuul.nodes().values()), 60,
                 what="used nodes deleted")
        wait_clean(sim, zuul)
        # OpenDev's shape: named networks where the pool names them
        for p in cfg["providers"]:
            for pool in p["pools"]:
                for net in pool.get("networks") or []:
                    cloud, region = where[p["name"]]
                    mine = [s for s in sim.servers(cloud=cloud, region=region)
                            if s["metadata"].get("nodepool_provider_name") == p["name"]]
                    for s in mine:
                        assert net in s["addresses"], s["addresses"]
        assert "AddressSanitizer" not in sup.log()
    finally:
        sup.stop()


# ---- one provider, small -------------------------------------------------------------------


def small_config(deployment, pool=None, label=None, provider=None, labels=None):
    lab = {"name": "small", "cloud-image": "debian", "flavor-name": "small"}
    lab.update(label or {})
    pl = {"name": "main", "max-servers": 10, "host-key-checking": False, "labels": [lab]}
    pl.update(pool or {})
    p = {"name": "os1", "cloud": "simc", "region-name": "R1", "rate": 0.001,
         "boot-timeout": 10, "launch-retries": 3,
         "cloud-images": [{"name": "debian"}], "pools": [pl]}
    p.update(provider or {})
    cfg = {"labels": labels or [{"name": "small"}], "providers": [p],
           "zookeeper-timeout": 4}  # a killed worker's session ends soon
    cfg.update(FAST)
    return cfg


def small_sim(tmp, **region):
    r = {"boot_delay": 0.2, "flavors": [{"name": "small", "ram": 2048, "vcpus": 2},
                                        {"name": "big", "ram": 8192, "vcpus": 4}],
         "images": [{"name": "debian"}]}
    r.update(region)
    return OSSim(tmp, {"clouds": {"simc": {"regions": {"R1": r}}}}).start()


def start(deployment, cfg, provider="os1"):
    return deployment.start_launcher(provider, deployment.write_config(cfg))


def test_floating_ip_cloud(deployment, zuul, sims, tmp_path, monkeypatch):
    sim = small_sim(tmp_path, floating_ips=True, fip_delay=0.3)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    start(deployment, small_config(deployment))
    rid, req = served(zuul, ["small"])
    n = zuul.node(req["nodes"][0])
    (fip,) = sim.floating_ips()
    assert n["public_ipv4"] == n["interface_ip"] == fip["floating_ip_address"]
    assert n["private_ipv4"].startswith("10.")
    port = [p for p in sim.ports() if p["id"] == fip["port_id"]][0]
    assert port["device_id"] == n["external_id"]
    use_and_return(zuul, rid)
    wait_for(lambda: not zuul.nodes(), 30, what="node deleted")
    wait_for(lambda: not sim.floating_ips() and not sim.servers(), 30,
             what="server and floating ip gone")
    wait_clean(sim, zuul)


def test_floating_ip_off_in_pool(deployment, zuul, sims, tmp_path, monkeypatch):
    sim = small_sim(tmp_path, floating_ips=True)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    start(deployment, small_config(deployment, pool={"auto-floating-ip": False}))
    rid, req = served(zuul, ["small"])
    n = zuul.node(req["nodes"][0])
    assert sim.floating_ips() == []
    assert n["interface_ip"] == n["private_ipv4"]


def test_boot_from_volume_cloud(deployment, zuul, sims, tmp_path, monkeypatch):
    sim = small_sim(tmp_path)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    start(deployment, small_config(deployment, label={"boot-from-volume": True,
                                                      "volume-size": 80}))
    rid, req = served(zuul, ["small"])
    n = zuul.node(req["nodes"][0])
    (vol,) = sim.volumes()
    assert vol["size"] == 80
    assert [a["server_id"] for a in vol["attachments"]] == [n["external_id"]]
    assert n["resources"]["volumes"] == 1 and n["resources"]["volume-gb"] == 80
    use_and_return(zuul, rid)
    wait_for(lambda: not sim.volumes() and not sim.servers(), 30,
             what="server and its volume gone")


def test_label_keys_reach_the_server(deployment, zuul, sims, tmp_path, monkeypatch):
    sim = small_sim(tmp_path, keypairs=["infra-root"], security_groups=["zuul"],
                    networks=[{"name": "public", "cidr": "203.0.113.0/24", "provider": True},
                              {"name": "private", "cidr": "10.0.0.0/16"}],
                    availability_zones=["az1", "az2"])
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    cfg = small_config(
        deployment,
        pool={"networks": ["public"], "security-groups": ["zuul"],
              "availability-zones": ["az2"]},
        label={"flavor-name": None, "min-ram": 4000, "key-name": "infra-root",
               "userdata": "#cloud-config\n", "instance-properties": {"team": "infra"},
               "dynamic-instance-properties": {"who": "{request.requestor}"}},
        provider={"cloud-images": [{"name": "debian", "config-drive": True}]})
    del cfg["providers"][0]["pools"][0]["labels"][0]["flavor-name"]
    start(deployment, cfg)
    rid, req = served(zuul, ["small"], requestor="zuul-sched")
    n = zuul.node(req["nodes"][0])
    (s,) = sim.servers()
    assert s["flavor"]["original_name"] == "big"  # smallest with ram >= 4000
    assert s["key_name"] == "infra-root"
    assert [g["name"] for g in s["security_groups"]] == ["zuul"]
    assert list(s["addresses"]) == ["public"]
    assert s["OS-EXT-AZ:availability_zone"] == "az2" == n["az"]
    assert s["config_drive"] in (True, "True")
    assert s["user_data"] == "I2Nsb3VkLWNvbmZpZwo="
    assert s["metadata"]["team"] == "infra" and s["metadata"]["who"] == "zuul-sched"
    assert n["resources"] == {"cores": 4, "instances": 1, "ram": 8192}


def test_application_credential_internal_interface_and_reauth(deployment, zuul, sims,
                                                              tmp_path, monkeypatch):
    sim = small_sim(tmp_path)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch, auth="application-credential",
                 interface="internal")
    start(deployment, small_config(deployment))
    served(zuul, ["small"])
    sim.ctl("POST", "/tokens/expire")  # the next call gets a 401
    served(zuul, ["small"])
    calls = sim.calls()["calls"]
    assert sum(c["count"] for c in calls if c["route"] == "/v3/auth/tokens") == 2
    assert {c["interface"] for c in calls if c["service"] == "compute"} == {"internal"}


def test_quota_from_cloud_limits(deployment, zuul, sims, tmp_path, monkeypatch):
    sim = small_sim(tmp_path, compute_limits={"maxTotalInstances": 2})
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    start(deployment, small_config(deployment))
    first = [served(zuul, ["small"])[0] for _ in range(2)]
    rid = zuul.submit(["small"])
    time.sleep(2)  # the pool is paused at the cloud's quota: no 3rd server
    assert zuul.request(rid)["state"] in ("requested", "pending")
    assert len(sim.servers()) == 2
    use_and_return(zuul, first[0])
    req = zuul.wait_request(rid, timeout=30)
    assert req["state"] == "fulfilled"


# ---- faults ----------------------------------------------------------------------------------


def all_settled(zuul, rids, timeout=90):
    out = {}
    for rid in rids:
        out[rid] = zuul.wait_request(rid, timeout=timeout)
        assert out[rid]["state"] in ("fulfilled", "failed")
    return out


def finish_all(zuul, reqs):
    for rid, req in reqs.items():
        if req["state"] == "fulfilled":
            use_and_return(zuul, rid)
        else:
            zuul.zk.delete("/nodepool/requests/" + rid)


def test_faults_500_and_429(deployment, zuul, sims, tmp_path, monkeypatch):
    sim = small_sim(tmp_path)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    sim.fault(service="compute", method="POST", path="/servers$", status=500, count=2)
    sim.fault(service="compute", method="GET", path="/servers/detail", status=429,
              retry_after=1, count=3)
    sim.fault(service="network", status=503, retry_after=1, count=1)
    start(deployment, small_config(deployment))
    reqs = all_settled(zuul, [zuul.submit(["small"]) for _ in range(4)])
    assert all(r["state"] == "fulfilled" for r in reqs.values()), reqs
    faults = {f["status"]: f for f in sim.ctl("GET", "/faults")["faults"]}
    assert faults[500]["hits"] == 2 and faults[429]["hits"] == 3
    finish_all(zuul, reqs)
    wait_for(lambda: not zuul.nodes(), 60, what="nodes deleted")
    wait_clean(sim, zuul)


def test_faults_boot_error_and_timeout(deployment, zuul, sims, tmp_path, monkeypatch):
    sim = small_sim(tmp_path)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    # the first server ends in ERROR, the second never boots (boot-timeout
    # and launch-timeout), then servers boot
    sim.ctl("POST", "/outcomes", {"outcomes": [{"status": "error"}, {"status": "never"}]})
    start(deployment, small_config(deployment, provider={"launch-timeout": 3}))
    reqs = all_settled(zuul, [zuul.submit(["small"])])
    (req,) = reqs.values()
    assert req["state"] == "fulfilled", req
    finish_all(zuul, reqs)
    wait_for(lambda: not zuul.nodes(), 60, what="nodes deleted")
    wait_clean(sim, zuul)
    assert sim.servers() == []


def test_faults_every_attempt_fails_cleanly(deployment, zuul, sims, tmp_path, monkeypatch):
    sim = small_sim(tmp_path, boot_outcome="error", error_fault="No valid host was found")
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    start(deployment, small_config(deployment))
    reqs = all_settled(zuul, [zuul.submit(["small"]) for _ in range(2)])
    assert all(r["state"] == "failed" for r in reqs.values()), reqs
    finish_all(zuul, reqs)
    wait_clean(sim, zuul)
    wait_for(lambda: sim.servers() == [], 30, what="failed attempts' servers deleted")


def test_faults_quota_error(deployment, zuul, sims, tmp_path, monkeypatch):
    sim = small_sim(tmp_path)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    # the cloud refuses one create for quota although its limits said yes
    sim.fault(service="compute", method="POST", path="/servers$", status=403, count=1,
              body={"forbidden": {"code": 403,
                                  "message": "Quota exceeded for instances: Requested 1, "
                                             "but already used 10 of 10 instances"}})
    start(deployment, small_config(deployment))
    reqs = all_settled(zuul, [zuul.submit(["small"]) for _ in range(3)])
    # a quota error aborts the launch; the request is retried, not failed
    assert all(r["state"] == "fulfilled" for r in reqs.values()), reqs
    finish_all(zuul, reqs)
    wait_for(lambda: not zuul.nodes(), 60, what="nodes deleted")
    wait_clean(sim, zuul)


def test_faults_cloud_stops_answering(deployment, zuul, sims, tmp_path, monkeypatch):
    sim = small_sim(tmp_path)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch, api_timeout=1)
    start(deployment, small_config(deployment))
    served(zuul, ["small"])
    fid = sim.fault(cloud="simc", hang=True)
    rids = [zuul.submit(["small"]) for _ in range(2)]
    time.sleep(3)
    for rid in rids:  # nothing is served while the cloud hangs; nothing crashes
        assert zuul.request(rid)["state"] in ("requested", "pending", "failed")
    sim.clear_fault(fid)
    reqs = all_settled(zuul, rids)
    finish_all(zuul, reqs)
    wait_for(lambda: all(n["state"] == "ready" for n in zuul.nodes().values()), 60,
             what="used nodes deleted")
    wait_clean(sim, zuul)


def test_worker_killed_mid_launch(deployment, zuul, sims, tmp_path, monkeypatch):
    sim = small_sim(tmp_path, boot_delay=3)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    cfg = small_config(deployment)
    p = start(deployment, cfg)
    rids = [zuul.submit(["small"]) for _ in range(3)]
    wait_for(lambda: len(sim.servers()) == 3, 30, what="three servers building")
    p.signal(signal.SIGKILL)
    p.p.wait()
    # a successor takes over: the dead launcher's nodes are cleaned up, the
    # requests served, and no server is left without a node
    start(deployment, cfg)
    reqs = all_settled(zuul, rids)
    assert all(r["state"] in ("fulfilled", "failed") for r in reqs.values())
    finish_all(zuul, reqs)
    wait_for(lambda: not zuul.nodes(), 60, what="nodes deleted")
    wait_clean(sim, zuul)
    wait_for(lambda: sim.servers() == [], 60, what="every server deleted")


def test_leaked_server_port_and_floating_ip_cleaned(deployment, zuul, sims, tmp_path,
                                                    monkeypatch):
    sim = small_sim(tmp_path, floating_ips=True)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    start(deployment, small_config(deployment, provider={"clean-floating-ips": True,
                                                         "port-cleanup-interval": 1}))
    served(zuul, ["small"])
    # a DOWN compute port of no server, an unattached floating IP
    sim.ctl("POST", "/ports", {"network": "private", "status": "DOWN"})
    sim.ctl("POST", "/floating_ips", {})
    wait_clean(sim, zuul)
    assert len(sim.servers()) == 1


def test_console_log_on_boot_failure(deployment, zuul, sims, tmp_path, monkeypatch):
    # host keys are scanned (nobody answers at the simulator's addresses):
    # the scan fails at boot-timeout, and with console-log the server's
    # console output is fetched and logged before the server is deleted
    sim = small_sim(tmp_path, console_output="simulated console: kernel panic")
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    cfg = small_config(deployment, pool={"host-key-checking": True},
                       label={"console-log": True},
                       provider={"boot-timeout": 1, "launch-retries": 1})
    p = start(deployment, cfg)
    rid = zuul.submit(["small"])
    req = zuul.wait_request(rid, timeout=60)
    assert req["state"] == "failed"
    wait_for(lambda: "simulated console: kernel panic" in p.output(), 30,
             what="console log in the launcher's log")
    assert sim.call_count(service="compute", method="POST",
                          route="/v2.1/servers/{id}/action") == 1
    zuul.zk.delete("/nodepool/requests/" + rid)
    wait_for(lambda: sim.servers() == [], 30, what="the failed server deleted")
    wait_clean(sim, zuul)


def test_rate_is_seconds_between_calls_per_api(deployment, zuul, sims, tmp_path, monkeypatch):
    sim = small_sim(tmp_path)
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    start(deployment, small_config(deployment, provider={"rate": 0.3}))
    reqs = all_settled(zuul, [zuul.submit(["small"]) for _ in range(3)])
    assert all(r["state"] == "fulfilled" for r in reqs.values())
    gaps = sim.call_gaps(cloud="simc", service="compute")
    assert len(gaps) >= 5
    # upstream's meaning: at least `rate` seconds from one compute call to
    # the next, as the simulator's host received them (the kernel's time,
    # however busy the simulator: ossim's StampedReader); a little less
    # for the launcher's own turn from a call's grant to its send
    assert min(gaps) >= 0.25, gaps


@pytest.mark.parametrize("trust", ["cacert", "verify-false", "neither"])
def test_https_cloud(trust, deployment, zuul, sims, tmp_path, monkeypatch):
    r = {"boot_delay": 0.2, "flavors": [{"name": "small", "ram": 2048, "vcpus": 2}],
         "images": [{"name": "debian"}]}
    sim = OSSim(tmp_path, {"clouds": {"simc": {"regions": {"R1": r}}}}, tls=True).start()
    sims.append(sim)
    assert sim.info["base"].startswith("https://")
    path = write_clouds(sim, tmp_path, monkeypatch,
                        verify=False if trust == "verify-false" else None)
    if trust != "cacert":
        with open(path) as f:
            doc = yaml.safe_load(f)
        del doc["clouds"]["simc"]["cacert"]
        with open(path, "w") as f:
            yaml.safe_dump(doc, f)
    p = start(deployment, small_config(deployment))
    rid = zuul.submit(["small"])
    if trust == "neither":
        # the cloud's certificate is not trusted: nothing is launched, and
        # the launcher says why
        wait_for(lambda: "certificate" in p.output().lower(), 30,
                 what="a TLS verification error in the log")
        assert sim.servers() == []
        return
    req = zuul.wait_request(rid, timeout=30)
    assert req["state"] == "fulfilled", req


def test_connections_kept_between_waves(deployment, zuul, sims, tmp_path, monkeypatch):
    """Waves of launches over HTTPS reuse the launcher's connections: the
    cloud sees a handful of TLS handshakes, not one per few calls (issue
    25: libcurl's default cache, four connections per transfer in flight,
    emptied at every lull, and a wave of calls opened them again)."""
    r = {"boot_delay": 0.2, "flavors": [{"name": "small", "ram": 2048, "vcpus": 2}],
         "images": [{"name": "debian"}]}
    sim = OSSim(tmp_path, {"clouds": {"simc": {"regions": {"R1": r}}}}, tls=True).start()
    sims.append(sim)
    write_clouds(sim, tmp_path, monkeypatch)
    start(deployment, small_config(deployment, provider={"rate": 0}))
    served(zuul, ["small"])  # authenticated, quota read: from here on, counted
    # each create and delete answered 0.2 s late: a wave's calls overlap,
    # in flight at once as a real cloud's slower answers keep them
    sim.fault(service="compute", method="POST", path="/servers$", delay=0.2)
    sim.fault(service="compute", method="DELETE", path="/servers/", delay=0.2)
    sim.ctl("DELETE", "/calls")
    for _ in range(4):
        # a wave: eight requests at once, served, used and returned; the
        # next comes once the cloud is idle again (its servers deleted)
        reqs = all_settled(zuul, [zuul.submit(["small"]) for _ in range(8)])
        assert all(q["state"] == "fulfilled" for q in reqs.values()), reqs
        finish_all(zuul, reqs)
        wait_for(lambda: len(sim.servers()) <= 1, 30, what="the wave's servers deleted")
    calls = sim.calls()
    compute = sum(c["count"] for c in calls["calls"] if c["service"] == "compute")
    assert compute >= 64, calls  # a create and a delete a node at least
    # at most one per call the compute client may have in flight (16) and
    # one for each other service it may have touched; before, every wave
    # opened its connections again (23 for these four waves; 5 now)
    assert calls["connections"] <= 16 + 3, calls


def test_missing_credentials_reported(deployment, tmp_path, monkeypatch):
    # the worker says why its provider cannot start (it stays up: the
    # launcher keeps the reason as its last error)
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(tmp_path / "nowhere.yaml"))
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.config/openstack either
    monkeypatch.chdir(tmp_path)
    p = start(deployment, small_config(deployment))
    wait_for(lambda: "no clouds.yaml" in p.output(), 30, what="the reason in the log")
    p.stop()
    (tmp_path / "clouds.yaml").write_text(
        "clouds:\n  simc:\n    auth: {auth_url: 'http://127.0.0.1:9/v3', password: x}\n"
        "    regions: [R2]\n")
    p = start(deployment, small_config(deployment))
    wait_for(lambda: "cloud simc has no region R1" in p.output(), 30,
             what="the reason in the log")


@pytest.mark.parametrize("fmt", [None, "raw"])
def test_builder_uploads_to_glance_and_the_launcher_boots_it(fmt, deployment, zk, zuul, sims,
                                                            tmp_path, monkeypatch):
    """nodepool-builder builds (stand-in dib-cmd) in the format the cloud's
    clouds.yaml image_format names (qcow2 unless set) and uploads to the
    simulated Glance through the openstack adapter (image streamed, named by
    image-name-format, the diskimage's meta and the upload's tags as
    properties); the launcher boots the upload."""
    from builder_helpers import Images, builder_config, start_builder
    sim = small_sim(tmp_path)
    sims.append(sim)
    path = write_clouds(sim, tmp_path, monkeypatch)
    if fmt:
        with open(path) as f:
            doc = yaml.safe_load(f)
        doc["clouds"]["simc"]["image_format"] = fmt
        with open(path, "w") as f:
            yaml.safe_dump(doc, f)
    cfg = builder_config(deployment)
    cfg["providers"] = [{
        "name": "os1", "cloud": "simc", "region-name": "R1", "rate": 0.001,
        "diskimages": [{"name": "img", "meta": {"os_distro": "debian"}}],
        "pools": [{"name": "main", "host-key-checking": False, "labels": [
            {"name": "img-label", "diskimage": "img", "flavor-name": "small"}]}]}]
    path = deployment.write_config(cfg)
    start_builder(deployment, path)
    images = Images(zk)
    (bid, prov, uid, up), = wait_for(lambda: images.ready_uploads("img"), 60,
                                     what="a ready upload")
    assert prov == "os1"
    (gi,) = [i for i in sim.images() if i["id"] == up["external_id"]]
    assert gi["status"] == "active" and gi["visibility"] == "private"
    assert gi["name"] == up["external_name"] and gi["name"].startswith("img-")
    assert gi["disk_format"] == (fmt or "qcow2") and gi["container_format"] == "bare"
    assert up["format"] == (fmt or "qcow2")
    assert gi["os_distro"] == "debian"
    assert gi["nodepool_build_id"] == bid and gi["nodepool_upload_id"] == uid
    assert gi["nodepool_provider_name"] == "os1"
    local = os.path.join(deployment.dir, "images", "img-%s.%s" % (bid, fmt or "qcow2"))
    assert gi["size"] == os.path.getsize(local)
    start(deployment, cfg)
    rid, req = served(zuul, ["img-label"])
    n = zuul.node(req["nodes"][0])
    (s,) = sim.servers()
    assert s["image"]["id"] == up["external_id"]
    assert n["image_id"] == "/nodepool/images/img/builds/%s/providers/os1/images/%s" % (bid, uid)
