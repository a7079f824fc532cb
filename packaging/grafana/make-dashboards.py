#!/usr/bin/python3
"""Writes the Grafana dashboards of nodepoold (packaging/grafana/*.json):

  nodepoold-prometheus.json  the Prometheus metrics of nodepool-web's /metrics
  nodepoold-graphite.json    upstream Nodepool's statsd names, as statsd
                             stores them in Graphite (stats.gauges.*,
                             stats.timers.*, stats_counts.*)

with the same panels as the status page (lib/ops/statuspage.h): providers,
nodes by state and label, quota use against the limits, launch phases,
requests, diskimages. Each dashboard is provisionable as it is (Grafana's
dashboard JSON model, schemaVersion 39): its datasource is a variable
(${datasource}), and provider and label variables filter every panel.

Run it after changing a panel: python3 packaging/grafana/make-dashboards.py
(tests/process/test_grafana.py checks the files and every metric name they
query against what nodepoold exports).
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
PHASES = ["quota_wait", "create", "boot", "keyscan", "total"]


class Board:
    def __init__(self, uid, title, ds_type, variables):
        self.uid, self.title, self.ds_type = uid, title, ds_type
        self.variables = variables
        self.panels = []
        self.y = 0
        self.x = 0
        self.row_h = 0
        self.next_id = 1

    def ds(self):
        return {"type": self.ds_type, "uid": "${datasource}"}

    def row(self, title):
        self.newline()
        self.panels.append({"id": self.next_id, "type": "row", "title": title,
                            "collapsed": False,
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}, "panels": []})
        self.next_id += 1
        self.y += 1

    def newline(self):
        if self.x:
            self.y += self.row_h
            self.x, self.row_h = 0, 0

    def panel(self, kind, title, targets, w=12, h=8, unit=None, stack=False, desc=None,
              extra=None):
        if self.x + w > 24:
            self.newline()
        p = {"id": self.next_id, "type": kind, "title": title, "datasource": self.ds(),
             "gridPos": {"h": h, "w": w, "x": self.x, "y": self.y},
             "targets": [dict(t, refId=chr(ord("A") + i), datasource=self.ds())
                         for i, t in enumerate(targets)],
             "fieldConfig": {"defaults": {}, "overrides": []}, "options": {}}
        if desc:
            p["description"] = desc
        if unit:
            p["fieldConfig"]["defaults"]["unit"] = unit
        if kind == "timeseries":
            p["fieldConfig"]["defaults"]["custom"] = {
                "drawStyle": "line", "lineWidth": 1, "fillOpacity": 60 if stack else 10,
                "stacking": {"mode": "normal" if stack else "none", "group": "A"}}
            p["options"] = {"legend": {"displayMode": "table", "placement": "right",
                                       "calcs": ["lastNotNull"]},
                            "tooltip": {"mode": "multi", "sort": "desc"}}
        if extra:
            for k, v in extra.items():
                p[k] = v
        self.next_id += 1
        self.panels.append(p)
        self.x += w
        self.row_h = max(self.row_h, h)

    def doc(self):
        ds_var = {"name": "datasource", "label": "Data source", "type": "datasource",
                  "query": self.ds_type, "current": {}, "hide": 0, "refresh": 1,
                  "regex": "", "options": []}
        return {
            "uid": self.uid, "title": self.title, "tags": ["nodepool", "nodepoold", "zuul"],
            "timezone": "browser", "editable": True, "graphTooltip": 1,
            "schemaVersion": 39, "version": 1, "refresh": "30s",
            "time": {"from": "now-6h", "to": "now"}, "timepicker": {},
            "annotations": {"list": []}, "links": [],
            "templating": {"list": [ds_var] + [dict(v, datasource=self.ds()) for v in
                                               self.variables]},
            "panels": self.panels,
        }


def var(name, query, label, regex=""):
    return {"name": name, "label": label, "type": "query", "query": query,
            "definition": query if isinstance(query, str) else query.get("query", ""),
            "refresh": 2, "includeAll": True, "multi": True, "allValue": None,
            "current": {"text": "All", "value": "$__all"}, "regex": regex, "sort": 1,
            "hide": 0, "options": []}


def prometheus():
    P = 'provider=~"$provider"'
    b = Board("nodepoold-prometheus", "Nodepool (nodepoold, Prometheus)", "prometheus", [
        var("provider", {"query": "label_values(nodepool_nodes, provider)",
                         "refId": "provider"}, "Provider"),
        var("label", {"query": "label_values(nodepool_label_nodes, label)",
                      "refId": "label"}, "Label"),
    ])

    def q(expr, legend):
        return {"expr": expr, "legendFormat": legend, "range": True}

    b.row("Providers")
    b.panel("stat", "Web API ready", [q("nodepool_launcher_ready", "ready")], w=4, h=4,
            desc="nodepool-web's view is complete (its caches synced).")
    b.panel("timeseries", "Worker starts and restarts", [
        q('increase(nodepool_worker_restarts_total{%s}[$__rate_interval])' % P,
          "{{provider}} restarts"),
        q('increase(nodepool_worker_starts_total{%s}[$__rate_interval])' % P,
          "{{provider}} starts")], w=10, h=6)
    b.panel("timeseries", "ZooKeeper events", [
        q('sum by (provider, event) (increase(nodepool_zookeeper_events_total{%s}'
          '[$__rate_interval]))' % P, "{{provider}} {{event}}")], w=10, h=6)
    b.row("Nodes")
    b.panel("timeseries", "Nodes by state", [
        q('sum by (state) (nodepool_nodes{%s})' % P, "{{state}}")], stack=True)
    b.panel("timeseries", "Nodes by label and state", [
        q('sum by (label, state) (nodepool_label_nodes{label=~"$label"})',
          "{{label}} {{state}}")], stack=True)
    b.panel("timeseries", "Nodes by provider", [
        q('sum by (provider) (nodepool_nodes{%s, state!="deleted"})' % P,
          "{{provider}}")], stack=True)
    b.row("Quota")
    b.panel("bargauge", "Servers against max-servers (provider)", [
        q('sum by (provider) (nodepool_nodes{%s, state!="deleted"}) / on (provider) '
          'nodepool_quota_limit{%s, pool="", resource="servers"}' % (P, P),
          "{{provider}}")], unit="percentunit",
        extra={"options": {"orientation": "horizontal", "displayMode": "gradient",
                           "reduceOptions": {"calcs": ["lastNotNull"]}},
               "fieldConfig": {"defaults": {"unit": "percentunit", "min": 0, "max": 1},
                               "overrides": []}})
    b.panel("table", "Configured limits", [
        dict(q('nodepool_quota_limit{%s}' % P, ""), format="table", instant=True)])
    b.row("Launches")
    for ph in PHASES:
        b.panel("heatmap", "Launch phase: %s" % ph, [
            dict(q('sum by (le) (increase(nodepool_launch_duration_seconds_bucket'
                   '{%s, phase="%s"}[$__rate_interval]))' % (P, ph), "{{le}}"),
                 format="heatmap")], w=8 if ph != "total" else 8, h=7,
            extra={"options": {"calculate": False, "yAxis": {"unit": "s"},
                               "color": {"scheme": "Blues", "mode": "scheme"}}})
    b.panel("timeseries", "Launch phase p95", [
        q('histogram_quantile(0.95, sum by (le, phase) (rate('
          'nodepool_launch_duration_seconds_bucket{%s}[$__rate_interval])))' % P,
          "{{phase}}")], unit="s", w=16)
    b.panel("timeseries", "Launch results", [
        q('sum by (result) (increase(nodepool_launches_total{%s}[$__rate_interval]))' % P,
          "{{result}}")], stack=True)
    b.row("Requests")
    b.panel("timeseries", "Requests by state", [
        q('nodepool_requests', "{{state}}")], stack=True)
    b.panel("timeseries", "Requests handled", [
        q('sum by (outcome) (increase(nodepool_requests_handled_total{%s}'
          '[$__rate_interval]))' % P, "{{outcome}}")], stack=True)
    b.row("Diskimages and held nodes")
    b.panel("text", "Diskimages, held nodes, requests by age", [], w=24, h=3, extra={
        "options": {"mode": "markdown", "content":
                    "nodepoold's Prometheus metrics carry no per-image or per-node "
                    "records: nodepool-web's status page (`/`) shows diskimages with "
                    "their builds and uploads, held nodes with their expiry and "
                    "waiting requests by age. The Graphite dashboard has the "
                    "builders' statsd figures."}})
    b.panel("timeseries", "Image rollbacks", [
        q('sum by (image) (increase(nodepool_image_rollbacks_total{%s}[$__rate_interval]))' % P,
          "{{image}}")], w=24, h=6,
        desc="Launchers fell back to an image's previous upload after its newest "
             "failed launches rollback-after times in a row (nodepool.yaml(5)).")
    b.panel("timeseries", "Cloud API retries", [
        q('sum by (provider, api) (increase(nodepool_api_retries_total{%s}[$__rate_interval]))'
          % P, "{{provider}} {{api}}")], w=24, h=6,
        desc="Cloud API calls tried again: throttled (HTTP 429/503, after the "
             "cloud's Retry-After) and the server or connection errors a driver "
             "retries. A steady rate means the provider's `rate` is above what the "
             "cloud allows.")
    return b.doc()


def graphite():
    b = Board("nodepoold-graphite", "Nodepool (statsd / Graphite)", "graphite", [
        var("provider", "stats.gauges.nodepool.provider.*", "Provider"),
        var("label", "stats.gauges.nodepool.label.*", "Label"),
        var("image", "stats.gauges.nodepool.dib_image_build.*", "Diskimage"),
    ])

    def t(target):
        return {"target": target}

    b.row("Providers")
    b.panel("timeseries", "Launch errors by provider", [
        t('aliasByNode(sumSeriesWithWildcards(stats_counts.nodepool.launch.provider.'
          '$provider.error.*, 6), 4)')], w=12)
    b.panel("timeseries", "Leaked resources cleaned", [
        t('aliasByNode(stats_counts.nodepool.provider.$provider.leaked.*, 4, 6)')], w=12)
    b.row("Nodes")
    b.panel("timeseries", "Nodes by state", [
        t('aliasByNode(stats.gauges.nodepool.nodes.*, 4)')], stack=True)
    b.panel("timeseries", "Nodes by label and state", [
        t('aliasByNode(stats.gauges.nodepool.label.$label.nodes.*, 4, 6)')], stack=True)
    b.panel("timeseries", "Nodes by provider and state", [
        t('aliasByNode(stats.gauges.nodepool.provider.$provider.nodes.*, 4, 6)')],
        stack=True)
    b.row("Quota")
    b.panel("timeseries", "Servers against max-servers", [
        t('aliasByNode(sumSeriesWithWildcards(stats.gauges.nodepool.provider.$provider.'
          'nodes.{building,ready,in-use,used,hold,deleting,testing,failed,init}, 6), 4)'),
        t('aliasSub(aliasByNode(stats.gauges.nodepool.provider.$provider.max_servers, 4, 5),'
          ' "$", " limit")')], w=12)
    b.panel("timeseries", "Tenant limits", [
        t('aliasByNode(stats.gauges.nodepool.tenant_limits.*.*, 4, 5)')], w=12)
    b.row("Launches")
    for ph in ("ready", "error.*"):
        b.panel("timeseries", "Launch time: %s (mean, p90)" % ph, [
            t('aliasByNode(stats.timers.nodepool.launch.provider.$provider.%s.mean, 4, 5)'
              % ph),
            t('aliasByNode(stats.timers.nodepool.launch.provider.$provider.%s.upper_90, 4, 5)'
              % ph)], unit="ms", w=12)
    b.panel("timeseries", "Launch results", [
        t('aliasByNode(stats_counts.nodepool.launch.{ready,error.*}, 3, 4)')], stack=True)
    b.panel("timeseries", "Launches by requestor", [
        t('aliasByNode(stats_counts.nodepool.launch.requestor.*.ready, 4)')])
    b.row("Requests")
    b.panel("timeseries", "Addressable requests by pool", [
        t('aliasByNode(stats.gauges.nodepool.provider.$provider.pool.*.addressable_requests,'
          ' 4, 6)')], w=24)
    b.row("Diskimages")
    b.panel("timeseries", "Build duration", [
        t('aliasByNode(stats.timers.nodepool.dib_image_build.$image.status.duration.mean,'
          ' 4)')], unit="ms")
    b.panel("timeseries", "Build result (rc)", [
        t('aliasByNode(stats.gauges.nodepool.dib_image_build.$image.status.rc, 4)')])
    b.panel("timeseries", "Last build", [
        t('aliasByNode(scale(stats.gauges.nodepool.dib_image_build.$image.status.last_build,'
          ' 1000), 4)')],
        unit="dateTimeFromNow")
    b.panel("timeseries", "Image sizes", [
        t('aliasByNode(stats.gauges.nodepool.dib_image_build.$image.*.size, 4, 5)')],
        unit="bytes")
    b.panel("timeseries", "Image build requests", [
        t('aliasByNode(stats.gauges.nodepool.image_build_requests, 2)')])
    b.panel("timeseries", "Image rollbacks", [
        t('aliasByNode(stats_counts.nodepool.provider.$provider.image.*.rollbacks, 4, 6)')],
        w=24, h=6)
    b.panel("timeseries", "Cloud API retries", [
        t('aliasByNode(stats_counts.nodepool.provider.$provider.api.*.retries, 3, 5)')],
        w=24, h=6)
    return b.doc()


def main():
    for name, doc in (("nodepoold-prometheus.json", prometheus()),
                      ("nodepoold-graphite.json", graphite())):
        with open(os.path.join(HERE, name), "w") as f:
            json.dump(doc, f, indent=2, sort_keys=True)
            f.write("\n")


if __name__ == "__main__":
    main()
