"""The aws driver's listings are capped in pages (issue 23, finding 6): a
cloud whose every DescribeInstances page has a nextToken (the simulator's
endless_pages) cannot keep a launcher listing forever; the listing fails
after 1000 pages, logged, and the launcher goes on."""
import pytest

from awssim_fixture import AwsSim
from conftest import wait_for
from test_aws import launcher, wild_config


@pytest.fixture
def endless(tmp_path):
    s = AwsSim(tmp_path, {"regions": {"eu-west-1": {}}, "boot_delay": 0.3,
                          "terminate_delay": 0.1, "page_size": 5,
                          "endless_pages": True}).start()
    yield s
    s.stop()


def test_endless_pagination_is_capped(deployment, zuul, endless):
    p = launcher(deployment, endless, wild_config(extra_pool=False,
                                                  top={"nodepoold": {"cleanup-interval": 1}}))
    wait_for(lambda: "DescribeInstances: more than 1000 pages" in p.output(), 180,
             interval=0.5, what="the listing given up after 1000 pages")
    assert p.alive()
