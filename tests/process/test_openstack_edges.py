"""The openstack driver's TLS and link edges (issue 23, finding 6), against
the OpenStack simulator: `verify: false` in clouds.yaml is warned about;
a servers listing whose "next" link points at another origin is not
followed (the token would go with it): nothing connects there, and the
listing fails instead of ending short; next links on the endpoint's own
origin are followed."""
import socket
import threading

import yaml

from conftest import wait_for
from ossim_fixture import OSSim
from test_openstack import served, small_config

REGION = {"boot_delay": 0.1, "flavors": [{"name": "small", "ram": 2048, "vcpus": 2}],
          "images": [{"name": "debian"}]}


class Listener(threading.Thread):
    """A TCP port that counts who connects (and answers nothing)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.s = socket.socket()
        self.s.bind(("127.0.0.1", 0))
        self.s.listen(16)
        self.s.settimeout(0.2)
        self.port = self.s.getsockname()[1]
        self.connections = 0
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.is_set():
            try:
                c, _ = self.s.accept()
                self.connections += 1
                c.close()
            except socket.timeout:
                continue

    def stop(self):
        self.stopping.set()
        self.join(5)
        self.s.close()


def sim_and_clouds(tmp_path, monkeypatch, cloud_extra=None, **top):
    cfg = {"clouds": {"simc": {"regions": {"R1": dict(REGION)}}}}
    cfg.update(top)
    sim = OSSim(tmp_path, cfg).start()
    path = str(tmp_path / "clouds.yaml")
    sim.write_clouds_yaml(path)
    if cloud_extra:
        with open(path) as f:
            doc = yaml.safe_load(f)
        doc["clouds"]["simc"].update(cloud_extra)
        with open(path, "w") as f:
            yaml.safe_dump(doc, f)
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", path)
    return sim


def test_verify_false_is_warned(deployment, zuul, tmp_path, monkeypatch):
    sim = sim_and_clouds(tmp_path, monkeypatch, cloud_extra={"verify": False})
    try:
        p = deployment.start_launcher("os1", deployment.write_config(small_config(deployment)))
        served(zuul, ["small"])
        out = p.output()
        assert "cloud simc has verify: false" in out, out[-3000:]
        assert "Keystone's password exchange included" in out
    finally:
        sim.stop()


def test_next_links_followed_on_the_endpoint_only(deployment, zuul, tmp_path, monkeypatch):
    # one server a page: two servers make the listing page
    sim = sim_and_clouds(tmp_path, monkeypatch, nova_page_size=1)
    try:
        p = deployment.start_launcher("os1", deployment.write_config(small_config(deployment)))
        served(zuul, ["small", "small"])  # paged listings, followed on our origin
        assert len(sim.servers()) == 2
        assert "another origin" not in p.output()
    finally:
        sim.stop()


def test_next_link_to_another_origin_is_not_followed(deployment, zuul, tmp_path, monkeypatch):
    evil = Listener()
    evil.start()
    sim = sim_and_clouds(tmp_path, monkeypatch, nova_page_size=1,
                         links_base="http://127.0.0.1:%d" % evil.port)
    try:
        p = deployment.start_launcher("os1", deployment.write_config(small_config(deployment)))
        zuul.submit(["small", "small"])
        wait_for(lambda: 'listing servers failed: a "next" link to another origin' in
                 p.output(), 60, what="the foreign next link refused")
        assert evil.connections == 0
        assert p.alive()
    finally:
        sim.stop()
        evil.stop()
