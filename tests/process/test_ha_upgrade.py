"""Upgrading to a nodepoold with several launchers per provider (issue 22):
a nodepoold from before the provider lock registers its pool component
without the `nodepoold` key, as upstream Nodepool does, but with its own
version (0.x; Nodepool's releases with pool components are 3.x and later).
The new nodepoold refuses to co-serve the provider with it (its launches
would not see the quota lock), names it as the earlier nodepoold it is, and
serves once it is gone: what happens on one host during an upgrade while
the old worker's ephemeral component outlives it by the session timeout."""
from ha_helpers import pool_component, served_only_once_gone


def test_earlier_nodepoold_on_the_same_provider_is_named_and_waited_for(deployment, zuul):
    # an earlier nodepoold's pool component (worker/launcher.c's
    # pool_component_json before the marker key): upstream's keys only
    earlier = pool_component("nl01.example.org", "sim", "00112233445566778899aabbccddeeff",
                             "0.1.0")
    p = served_only_once_gone(deployment, zuul, earlier,
                              "also served by an earlier nodepoold nl01.example.org",
                              "the earlier nodepoold is gone")
    assert "upstream Nodepool launcher" not in p.output()
