"""The `fake` driver with OpenStack's keys, as upstream's fake driver (its
OpenStack driver against an in-process cloud) takes them: what each does in
the simulated cloud, as the cloud's state-file and the node in ZooKeeper
show it (nodepool.yaml(5), fake driver)."""
import pytest

from conftest import wait_for
from fakecloud import Cloud, fake_config

FLAVORS = [{"name": "m1.small", "cores": 1, "ram": 2048},
           {"name": "m1.large", "cores": 4, "ram": 8192},
           {"name": "Unreal Flavor", "cores": 8, "ram": 16384}]


def served(zuul, labels, **kw):
    rid = zuul.submit(labels, **kw)
    req = zuul.wait_request(rid)
    assert req["state"] == "fulfilled", req
    return rid, req


def test_openstack_keys_shape_the_server(deployment, zuul):
    cfg = fake_config(
        deployment,
        labels={
            "named": {"cloud-image": "debian", "flavor-name": "Unreal Flavor",
                      "key-name": "np-key", "userdata": "#cloud-config\n",
                      "networks": ["private-net"],
                      "instance-properties": {"owner": "ci"},
                      "dynamic-instance-properties": {
                          "tenant": "Tenant is {request.tenant_name}",
                          "broken": "{request.no_such_attribute}"}},
            "bfv": {"cloud-image": "debian", "min-ram": 2000,
                    "boot-from-volume": True, "volume-size": 80}},
        provider={"cloud": "mycloud", "region-name": "r1", "rate": 0.001,
                  "nodepool-id": "legacy", "port-cleanup-interval": 60,
                  "clean-floating-ips": True, "flavors": FLAVORS,
                  "cloud-images": [{"name": "debian", "image-name": "Debian 12",
                                    "config-drive": True}]},
        pool={"networks": ["public-net"], "security-groups": ["default", "ssh"],
              "auto-floating-ip": False})
    deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)

    _, req = served(zuul, ["named"], tenant="t1")
    (nid,) = req["nodes"]
    n = zuul.node(nid)
    inst = wait_for(lambda: cloud.by_node().get(nid), what="instance")
    # flavor-name: the flavor of that name gives the size
    assert inst["flavor"] == "Unreal Flavor"
    assert n["resources"] == {"cores": 8, "instances": 1, "ram": 16384}
    # the label's networks replace the pool's; the pool's security groups
    assert inst["networks"] == ["private-net"]
    assert inst["security_groups"] == ["default", "ssh"]
    assert inst["key_name"] == "np-key" and inst["user_data"] == "#cloud-config\n"
    # the cloud image's config-drive and image-name
    assert inst["config_drive"] is True and inst["image"] == "Debian 12"
    assert inst["boot_from_volume"] is False
    # instance properties, dynamic ones formatted with the request; one that
    # does not format is left out; nodepool's own keys are there
    assert inst["metadata"]["owner"] == "ci"
    assert inst["metadata"]["tenant"] == "Tenant is t1"
    assert "broken" not in inst["metadata"]
    assert inst["metadata"]["nodepool_node_id"] == nid
    # auto-floating-ip false: no public address, the node is reached privately
    assert not n["public_ipv4"] and not n["public_ipv6"]
    assert n["interface_ip"] == n["private_ipv4"] == inst["private_ipv4"]
    # cloud and region-name
    assert n["cloud"] == "mycloud" and n["region"] == "r1"

    _, req = served(zuul, ["bfv"])
    (nid,) = req["nodes"]
    n = zuul.node(nid)
    inst = wait_for(lambda: cloud.by_node().get(nid), what="instance")
    # min-ram: the smallest flavor with at least that much ram
    assert inst["flavor"] == "m1.small"
    assert inst["networks"] == ["public-net"]
    # boot-from-volume: an 80 GB boot volume, counted as a volume
    assert inst["boot_from_volume"] is True
    (vol,) = [v for v in cloud.volumes() if v["server"] == inst["id"]]
    assert vol["size"] == 80
    assert n["resources"] == {"cores": 1, "instances": 1, "ram": 2048,
                              "volumes": 1, "volume-gb": 80}


@pytest.mark.parametrize("limit", [
    {"provider": {"quota": {"volumes": 1, "volume-gb": 100}}},  # the cloud's
    {"provider": {"quota": {"volume-gb": 30}}},
    {"pool": {"max-volumes": 1}},  # the pool's, as upstream's hasRemainingQuota
    {"pool": {"max-volume-gb": 39}},
], ids=["cloud-volumes", "cloud-volume-gb", "pool-max-volumes", "pool-max-volume-gb"])
def test_volume_quota(deployment, zuul, limit):
    """Boot volumes count against the simulated cloud's volume limits and the
    pool's max-volumes/max-volume-gb: a second 20 GB boot-from-volume node
    waits (the pool pauses) until the first is gone."""
    cfg = fake_config(
        deployment,
        labels={"bfv": {"boot-from-volume": True, "volume-size": 20}}, **limit)
    deployment.start_launcher("sim", deployment.write_config(cfg))
    cloud = Cloud(deployment)
    r1, _ = served(zuul, ["bfv"])
    r2 = zuul.submit(["bfv"])
    wait_for(lambda: zuul.pools() and zuul.pools()[0]["paused"], what="pool paused")
    assert zuul.request(r2)["state"] == "pending"
    wait_for(lambda: len(cloud.instances()) == 1, what="1 instance")
    held = zuul.accept(r1)
    zuul.finish(held)
    assert zuul.wait_request(r2)["state"] == "fulfilled"


def test_no_flavor_fits(deployment, zuul):
    """A label no flavor of the cloud fits is an error label, as upstream's
    adapter fails it ("Unable to find flavor"); the others are served."""
    cfg = fake_config(
        deployment,
        labels={"huge": {"min-ram": 1000000}, "small": {"flavor-name": "Fake Flavor"}})
    p = deployment.start_launcher("sim", deployment.write_config(cfg))
    rid = zuul.submit(["huge"])
    assert zuul.wait_request(rid)["state"] == "failed"
    wait_for(lambda: "Unable to find flavor with min ram: 1000000" in p.output(),
             what="the reason logged")
    _, req = served(zuul, ["small"])
    # upstream's fake cloud's flavors when the provider names none
    assert zuul.node(req["nodes"][0])["resources"] == {"cores": 4, "instances": 1,
                                                       "ram": 8192}


def test_unknown_network_refused(deployment, zuul):
    """With cloud-networks, the simulated cloud knows only those: a label on
    another network fails as upstream's _findNetwork does."""
    cfg = fake_config(
        deployment, labels={"lost": {"networks": ["nowhere"]}, "small": {}},
        provider={"cloud-networks": ["public-net"], "launch-retries": 1},
        pool={"networks": ["public-net"]})
    p = deployment.start_launcher("sim", deployment.write_config(cfg))
    rid = zuul.submit(["lost"])
    assert zuul.wait_request(rid)["state"] == "failed"
    wait_for(lambda: "Unable to find network nowhere in provider sim" in p.output(),
             what="the reason logged")
    served(zuul, ["small"])
