/*
 * Launch and request metrics of a launcher process, the statsd launch
 * stats, and the Prometheus text of the web API's /metrics.
 *
 * Recording (any code of a worker process, on its loop; no locking):
 *   metrics_launch_phase(provider, phase, seconds)  one phase of a launch
 *   metrics_launch_result(provider, az, requestor, "ready", seconds)
 *   metrics_launch_result(provider, az, requestor, "error.keyscan", seconds)
 * The launcher reports the quota wait and every launch's end (with the
 * whole launch as the "total" phase; lc_launch_result_key names a driver's
 * result); drivers that know more report those
 * phases: the state machine framework (drivers/statemachine/runner.c)
 * records, per attempt, create (the create call until the cloud names the
 * server), boot (named until the create machine is done: active,
 * addressable) and keyscan (host keys scanned, when host-key-checking). A
 * driver may also end a launch with a precise upstream result name through
 * metrics_launch_result instead (then the launcher's call is not made for
 * that launch: exactly one end per launch).
 *
 * A launch end also goes to statsd (metrics_set_statsd), as upstream's
 * recordLaunchStats: a timer (ms) and a counter under each of
 *   nodepool.launch.<result>
 *   nodepool.launch.provider.<provider>.<result>
 *   nodepool.launch.provider.<provider>.<az>.<result>   (when az is set)
 *   nodepool.launch.requestor.<requestor>.<result>      (when set; '.' and
 *                                                         ':' become '_')
 * with results "ready", "error.quota", "error.unknown", ... as upstream.
 *
 * Sharing between processes: there is one worker process per provider but
 * one web API. Each worker keeps its figures in a persistent znode
 * /nodepoold/metrics/<provider> (JSON; a nodepoold path, untouched by
 * upstream Nodepool and Zuul), written every stats-interval when changed.
 * A starting worker reads its record first and continues from it, so the
 * counters survive restarts and `starts` counts the worker's starts; the
 * web API reads every record when /metrics is asked for.
 * Figures since the last write are lost when a worker dies.
 *
 * Under nodepoold the web API is a process of its own (nodepool-web) and
 * the figures reach it fresher than that: each worker's STATUS reply to
 * the supervisor's poll carries its record (metrics_pub_live), and the
 * supervisor passes it on to nodepool-web as a METRICS message
 * (protocol/ipc_types.h); those live records replace the stored ones of
 * the same provider. The znodes remain what makes counters continue
 * across restarts, and what a web process that (re)started reads for the
 * providers whose workers have not reported to it yet.
 */
#ifndef NP_METRICS_H
#define NP_METRICS_H

#include <stddef.h>
#include <jansson.h>

#include "lib/ops/status.h"

struct event_base;
struct statsd;
struct zk;

#define NP_METRICS_ROOT "/nodepoold/metrics"

enum metrics_phase {
	METRICS_PHASE_QUOTA_WAIT, /* request accepted -> node creation started */
	METRICS_PHASE_CREATE,	  /* create call -> the cloud has the server */
	METRICS_PHASE_BOOT,	  /* server created -> it is active/addressable */
	METRICS_PHASE_KEYSCAN,	  /* active -> host keys scanned */
	METRICS_PHASE_TOTAL,	  /* node creation started -> launch ended */
	METRICS_PHASE_COUNT
};
/* "quota_wait", "create", "boot", "keyscan", "total"; NULL out of range. */
const char *metrics_phase_name(int phase);

/* Histogram bucket bounds, seconds (the +Inf bucket is implicit). */
#define METRICS_NBUCKETS 13
extern const double metrics_buckets[METRICS_NBUCKETS];

/* Where launch ends also go (NULL: nowhere). Not owned. */
void metrics_set_statsd(struct statsd *s);
/* A statsd counter (name: the whole key, e.g.
 * "nodepool.provider.<p>.leaked.instances"), sent at once; nothing
 * without statsd. */
void metrics_statsd_incr(const char *name, long long n);

void metrics_launch_phase(const char *provider, enum metrics_phase phase, double seconds);
/* result: upstream's name ("ready", "error.quota", "error.unknown",
 * "error.keyscan"...). seconds: the whole launch. */
void metrics_launch_result(const char *provider, const char *az, const char *requestor,
			   const char *result, double seconds);
/* ZooKeeper connection counters of this process (absolute since it
 * started), as zk_counters (zk.h): record "zookeeper": {connection_losses,
 * expirations, connect_errors, resent, lock_lost}; /metrics
 * nodepool_zookeeper_events_total{provider, event}. */
#define METRICS_ZK_COUNT 5
void metrics_set_zookeeper(const char *provider, const unsigned long long counts[METRICS_ZK_COUNT]);
/* Request handling counters of this process (absolute since it started). */
/* A launcher fell back from image's newest upload in provider to the
 * previous one (rollback-after): nodepool_image_rollbacks_total on
 * /metrics, statsd counter nodepool.provider.<provider>.image.<image>.rollbacks. */
void metrics_image_rollback(const char *provider, const char *image);
/* A cloud API call of provider was tried again (lib/net/http.h's retry
 * observer): record "api_retries": {api: n}; nodepool_api_retries_total
 * {provider, api} on /metrics; statsd counter
 * nodepool.provider.<provider>.api.<api>.retries ('.', ':', '/' in api
 * become '_'). api NULL or "": "unknown". */
void metrics_api_retry(const char *provider, const char *api);
void metrics_set_requests(const char *provider, unsigned long long accepted,
			  unsigned long long fulfilled, unsigned long long declined,
			  unsigned long long failed);

/*
 * This process's record for provider (what goes to ZooKeeper), added to
 * base (a record read back, may be NULL): new reference.
 * {"provider", "starts", "launches": {result: n}, "phases": {phase:
 * {"buckets": [n per bound, then +Inf; not cumulative], "sum", "count"}},
 * "requests": {"accepted", "fulfilled", "declined", "failed"}}
 */
json_t *metrics_record(const char *provider, const json_t *base);
/* Forget everything recorded (tests). */
void metrics_clear(void);

/* ---- publishing the record (every worker) ------------------------------------- */

struct metrics_pub;
/* Reads the provider's record (the base), then writes base + this process
 * every interval seconds when it changed. view gives the session. */
struct metrics_pub *metrics_pub_new(struct event_base *base, const char *provider, double interval,
				    status_view_fn view, void *arg);
/* The session is about to go: forget reads in flight. */
void metrics_pub_reset(struct metrics_pub *p);
void metrics_pub_free(struct metrics_pub *p);
/* The record as last written (or NULL before the base was read). */
const json_t *metrics_pub_record(const struct metrics_pub *p);
/* The record as it stands now: base + this process's figures (new
 * reference), or NULL before the base was read (a record then would look
 * like counters starting from zero). */
json_t *metrics_pub_live(const struct metrics_pub *p);

/* ---- /metrics (the web-serving worker) ------------------------------------------ */

/* Read every record under NP_METRICS_ROOT; cb gets a JSON array (owned by
 * the callee) or NULL with a ZooKeeper error. Cancel before the zk goes. */
struct metrics_load;
typedef void (*metrics_load_cb)(int rc, json_t *records, void *arg);
struct metrics_load *metrics_load_start(struct zk *zk, metrics_load_cb cb, void *arg);
void metrics_load_cancel(struct metrics_load *l);

/*
 * The Prometheus text exposition (format 0.0.4): nodes by provider and
 * state, by label and state, requests by state (from the view's caches),
 * the launcher's readiness, and from the records (an array; live, when
 * given, is one record or an array of them, each replacing the stored
 * record of the same provider): launches by provider and result, launch
 * phase histograms, request outcomes, worker starts and restarts; with the
 * view's status_config (nodepool-web), the configured limits as
 * nodepool_quota_limit{provider, pool ("" for the provider's own), resource
 * (servers, cores, ram)}, unlimited ones left out (the Grafana dashboards'
 * quota panels divide by it). malloc'd.
 */
char *metrics_render(const struct status_view *v, const json_t *records, const json_t *live);

#endif
