"""Throttling made visible (issue 24): a Kubernetes API server answering
429 with Retry-After once, then serving. The launcher waits as told and
succeeds, and the retry shows: a debug line naming the API and the wait,
nodepool_api_retries_total{provider, api} on /metrics, and the statsd
counter nodepool.provider.<p>.api.<api>.retries. (The other clouds'
retry paths are checked in test_gce.py test_faults_500_and_429 and
test_aws.py test_throttling_is_retried.)"""
import os
import re

from conftest import Proc, bin_path, wait_for
from operator_helpers import webapp
from test_kubernetes_driver import k8s_config, release_and_check_gone, serve, sim  # noqa: F401
from test_statsd import Receiver, Seen
from test_web import get, parse_metrics


def test_kubernetes_429_is_logged_and_counted(deployment, zuul, sim):  # noqa: F811
    fid = sim.fault(method="POST", path="/api/v1/namespaces$", status=429, retry_after=1,
                    count=1)
    w = webapp()
    cfg = k8s_config([{"name": "ns", "type": "namespace"}])
    cfg.update(w)
    rx = Receiver()
    try:
        log = os.path.join(deployment.dir, "launcher-k8s.log")
        p = Proc([bin_path("nodepool-launcher"), "-d", "-p", "k8s", "-c",
                  deployment.write_config(cfg)], log, env=rx.env())
        deployment.procs.append(p)
        rid, nid, node = serve(deployment, zuul, sim, "ns")
        assert sim.ctl("GET", "/faults/%d" % fid)["hits"] == 1
        out = p.output()
        assert re.search(r"API core/v1/namespaces: HTTP 429, retry 1 in 1\.00 s", out), out
        sample = 'nodepool_api_retries_total{provider="k8s",api="core/v1/namespaces"}'

        def scraped():
            status, _, body = get(w["webapp"]["port"], "/metrics")
            return status == 200 and parse_metrics(body).get(sample)
        assert wait_for(scraped, what="the retry on /metrics") == 1
        seen = Seen(rx)
        key = "nodepool.provider.k8s.api.core_v1_namespaces.retries"
        wait_for(lambda: key in seen.poll().lines, 10, what="the statsd counter")
        assert seen.lines[key] == [("1", "c")]
        release_and_check_gone(zuul, sim, rid)
    finally:
        rx.close()
