"""ZooKeeper session loss: a launcher whose session expires re-registers
its components (new ephemeral znodes, new session) and keeps serving
(reference 1.1, 'Reconnect re-registration')."""
import time

from conftest import TcpProxy, wait_for
from test_static_launcher import FAST, host, ready_nodes, static_config


def test_session_expiry_reregisters_components(deployment, zuul, zk_server):
    host_, port, _ = zk_server
    proxy = TcpProxy(host_, port)
    try:
        cfg = static_config([host("host-a", ["small"])],
                            extra={"zookeeper-timeout": 2})
        path = deployment.write_config(cfg)
        # point the launcher at the proxy
        import json
        with open(path) as f:
            c = json.load(f)
        c["zookeeper-servers"][0]["port"] = proxy.port
        with open(path, "w") as f:
            json.dump(c, f)
        p = deployment.start_launcher("static-a", path)
        pool = wait_for(lambda: zuul.pools(), what="pool component")[0]
        comp = zuul.zk.get_children("/nodepool/components/pool")[0]
        _, st = zuul.zk.get("/nodepool/components/pool/" + comp)
        old_owner = st.ephemeralOwner
        wait_for(lambda: ready_nodes(zuul), what="ready node")

        proxy.cut()
        # the server expires the session after the 2 s timeout: our
        # ephemeral pool component goes away
        wait_for(lambda: zuul.pools() == [], timeout=15, what="components expired")
        proxy.restore()

        def new_component():
            kids = zuul.zk.get_children("/nodepool/components/pool")
            if not kids:
                return None
            _, s = zuul.zk.get("/nodepool/components/pool/" + kids[0])
            return s.ephemeralOwner != old_owner and s
        wait_for(new_component, timeout=30, what="pool component re-registered")
        new_pool = zuul.pools()[0]
        assert new_pool["provider_name"] == "static-a"
        assert new_pool["id"] == pool["id"]  # same worker process, same pool id
        assert zuul.zk.get_children("/nodepool/components/launcher") != []
        rid = zuul.submit(["small"])
        assert zuul.wait_request(rid)["state"] == "fulfilled"
        assert p.alive()
        assert "expired" in p.output()
    finally:
        proxy.close()
