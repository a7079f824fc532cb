"""Upgrading to a nodepoold with several launchers per provider (issue 22):
a nodepoold from before the provider lock registers its pool component
without the `nodepoold` key, as upstream Nodepool does, but with its own
version (0.x; Nodepool's releases with pool components are 3.x and later).
The new nodepoold refuses to co-serve the provider with it (its launches
would not see the quota lock), names it as the earlier nodepoold it is, and
serves once it is gone: what happens on one host during an upgrade while
the old worker's ephemeral component outlives it by the session timeout."""
import json

from conftest import wait_for
from fakecloud import fake_config


def test_earlier_nodepoold_on_the_same_provider_is_named_and_waited_for(deployment, zuul):
    cfg = fake_config(deployment, top={"zookeeper-timeout": 4})
    # an earlier nodepoold's pool component (worker/launcher.c's
    # pool_component_json before the marker key): upstream's keys only
    earlier = {"hostname": "nl01.example.org", "id":
               "nl01.example.org-PoolWorker.sim-main-00112233445566778899aabbccddeeff",
               "kind": "pool", "model_api": 0, "name": "main", "paused": False,
               "priority": 100, "provider_name": "sim", "state": "running",
               "supported_labels": ["small"], "version": "0.1.0"}
    path = zuul.zk.create("/nodepool/components/pool/nl01.example.org-",
                          json.dumps(earlier, sort_keys=True).encode(),
                          sequence=True, makepath=True)
    p = deployment.start_launcher("sim", deployment.write_config(cfg))
    wait_for(lambda: "also served by an earlier nodepoold nl01.example.org" in p.output(), 30,
             what="the refusal naming the earlier nodepoold")
    assert "upstream Nodepool launcher" not in p.output()
    rid = zuul.submit(["small"])
    wait_for(lambda: len(zuul.zk.get_children("/nodepool/components/pool")) == 2, 30,
             what="our pool component")
    assert zuul.request(rid)["state"] == "requested"
    assert "sim" not in {n.get("provider") for n in zuul.nodes().values()}
    # the old worker's session ends: its component goes, we serve
    zuul.zk.delete(path)
    assert zuul.wait_request(rid, timeout=60)["state"] == "fulfilled"
    assert "the earlier nodepoold is gone" in p.output()
