/*
 * The operator's status page of nodepool-web: `/` (HTML, rendered here,
 * readable without JavaScript) and `/status-summary` (the JSON it is made
 * from, which the page's script fetches every few seconds to redraw
 * itself). Nodepool has no such page (upstream's webapp serves the text
 * and JSON listings only); its panels follow what OpenDev's Grafana
 * dashboards show of upstream's statsd figures.
 *
 * The summary (one JSON object; `?provider=P` and/or `?label=L` keep only
 * what concerns that provider or label, in every panel):
 *   "generated": epoch seconds, "filter": {"provider", "label"} (null when
 *   unset), "labels": [every label known], "providers": [{"name",
 *   "driver", "state": "up" | "paused" | "down", "starts" (its worker's,
 *   from the metrics records, or null), "pools": [{"name", "labels", "launchers":
 *   [{"id", "hostname", "state", "priority", "nodepoold"}]}], "launchers":
 *   [the same, of every pool: each launcher serving the provider, peers
 *   included (several nodepoold instances may serve one provider)], "nodes":
 *   {state: n}, "total"}] (a launcher's "nodepoold": the version of the
 *   nodepoold that registered it, null for an upstream Nodepool launcher),
 *   "nodes": {"total", "by_state": {state: n}, "by_label": {label: {state: n}}},
 *   "quota": [{"provider", "pool" (null: the provider), "resource":
 *   "servers" | "cores" | "ram", "used", "limit" (null: unlimited)}],
 *   "tenants": [{"tenant", "resource", "limit"}],
 *   "phases": {phase: {"bounds": [s...], "buckets": [n per bound, then
 *   +Inf; not cumulative], "count", "sum"}} (the launch-phase histograms
 *   of /metrics, summed over the providers shown),
 *   "requests": {"waiting", "by_age": [{"le": seconds or null, "label",
 *   "n"}], "oldest": [{"id", "state", "age", "node_types", "requestor"}]},
 *   "images": [{"image", "builds": [{"id", "state", "age"}], "uploads":
 *   [{"provider", "build", "id", "state", "age"}]}],
 *   "held_total": n, "held": [{"id", "provider", "label", "hold_job",
 *   "comment", "age", "expires_in" (seconds, null: never)}] (the
 *   STATUSPAGE_HELD_MAX soonest to expire),
 *   "history": {"interval", "window", "samples": [{"t", "by_state": {state: n}}]}
 *
 * A provider is "down" when no pool of it is registered (a worker's pool
 * components are ephemeral znodes: they go with its ZooKeeper session, a
 * session timeout after the worker died, and a restarted worker
 * registers them again), "paused" when every pool is paused.
 *
 * The sample ring (the only state the page adds to nodepool-web): every
 * interval seconds the node counts by (provider, label, state), an hour's
 * worth; statuspage_history_sample() takes one.
 */
#ifndef NP_STATUSPAGE_H
#define NP_STATUSPAGE_H

#include <jansson.h>

#include "lib/ops/status.h"

struct imgtree;

#define STATUSPAGE_SAMPLE_INTERVAL 10.0 /* seconds */
#define STATUSPAGE_WINDOW	   3600.0
#define STATUSPAGE_HELD_MAX	   50

/* A ring of node-count samples. */
struct statuspage_history *statuspage_history_new(double interval, double window);
void statuspage_history_free(struct statuspage_history *h); /* NULL: no-op */
/* Take a sample of v's nodes at epoch now (nothing when v has no synced
 * node cache). */
void statuspage_history_sample(struct statuspage_history *h, const struct status_view *v,
			       double now);
double statuspage_history_interval(const struct statuspage_history *h);

/*
 * The summary (new reference) of v (its caches, status_config and history),
 * tree (the image snapshot, may be NULL), records and live (arrays of
 * workers' metric records, metrics.h; either may be NULL; a live record
 * replaces the stored one of its provider) for the filter in query (a URL query string, may
 * be NULL), at epoch now.
 */
json_t *statuspage_summary(const struct status_view *v, const struct imgtree *tree,
			   const json_t *records, const json_t *live, const char *query,
			   double now);
/* The page (malloc'd HTML) for a summary. */
char *statuspage_html(const json_t *summary);

#endif
