/*
 * nodepool-web: the web API's own process (see webproc.h).
 */
#include "lib/zk/cachecodec.h"
#include "web/webproc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "lib/core/childproc.h"
#include "lib/core/clock.h"
#include "lib/config/config.h"
#include "protocol/ipc.h"
#include "lib/core/log.h"
#include "lib/core/memtrim.h"
#include "protocol/model.h"
#include "lib/ops/nodeview.h"
#include "lib/config/slice.h"
#include "lib/ops/status.h"
#include "lib/ops/statuspage.h"
#include "lib/core/version.h"
#include "lib/ops/web.h"
#include "lib/core/xalloc.h"
#include "lib/zk/zk.h"
#include "lib/zk/zk_status.h"

#define EXIT_PERMANENT 100

struct webproc {
	struct event_base *base;
	struct childproc_link *link; /* to nodepoold, or NULL when standalone */
	json_t *slice;		     /* in force, or NULL */
	int64_t generation;
	struct zk *zk;	      /* the main session: pools, images, metric records */
	struct zk_options zo; /* the slice's (strings borrowed from slice) */
	enum zk_event zk_state;
	struct zk_cache *pools;
	/* the view of nodes and requests, on a session of its own that is
	 * closed while nobody reads (see "Asleep while idle" below): vzk and
	 * the caches are NULL while asleep */
	struct zk *vzk;
	struct zk_cache *nodes, *requests;
	double idle_timeout; /* seconds; 0: never asleep */
	double last_read;    /* np_mono_s() of the last listing that read the view */
	int loaded;	     /* the view synced since its session was opened */
	int waking;	     /* listings wait for that first sync */
	struct event *idle_ev, *wake_ev;
	unsigned long long wakes, sleeps;
	struct web *web;
	json_t *live;		    /* provider -> its worker's metrics record (METRICS) */
	struct event *listen_retry; /* the address could not be bound: try again */
	char listen_error[256];	    /* why, or "" */
	int ready_sent;
	int trimmed; /* trimmed (np_mem_trim_startup) since the last sync */
	int exit_code;
	int stopping;
	double start;
	/* the status page: its sample ring, the timer that fills it, and the
	 * slice's "status" */
	struct statuspage_history *history;
	struct event *sample_ev;
	json_t *status_cfg;
	/* the caches of nodes and requests read on demand (ZK_CACHE_LAZY):
	 * refreshes under way, the timer that stops waiting for them, and
	 * whether the page's sample waits for one */
	int refreshing;
	struct event *refresh_ev;
	int sample_due;
};

static double
wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- caches -> objects (malformed records are logged and skipped) ------------- */

/* A node record: only what the endpoints show (nodeview.h). */
static void *
decode_node(const char *name, const char *data, int len)
{
	struct np_node *n = NULL;
	struct np_node_view *v;
	char err[256];
	int taken;

	if (data == NULL || len == 0)
		return NULL;
	if (np_node_decode(name, data, (size_t)len, &n, err, sizeof(err)) != 0) {
		log_warn("node %s: malformed record skipped: %s", name, err);
		return NULL;
	}
	v = np_node_view_new(n, &taken);
	if (!taken)
		np_node_free(n);
	return v;
}

static void
free_node(void *o)
{
	np_node_view_free(o);
}

/* ---- the view the web API reads ------------------------------------------------- */

/* The main session connected and the pools listed. */
static int
main_ready(const struct webproc *wp)
{
	return wp->zk != NULL && zk_is_connected(wp->zk) && wp->pools != NULL &&
	       zk_cache_synced(wp->pools);
}

/* The view awake, its session connected and both caches synced. */
static int
view_ready(const struct webproc *wp)
{
	return wp->vzk != NULL && zk_is_connected(wp->vzk) && wp->nodes != NULL &&
	       zk_cache_synced(wp->nodes) && zk_cache_synced(wp->requests);
}

/* /ready and STATUS: the main session is up and the view is complete, or
 * asleep (read in full when asked), or being woken for a listing (which
 * waits for it). */
static int
is_ready(const struct webproc *wp)
{
	return main_ready(wp) && (wp->vzk == NULL || wp->waking || view_ready(wp));
}

static void
view(void *arg, struct status_view *v)
{
	struct webproc *wp = arg;

	memset(v, 0, sizeof(*v));
	v->zk = wp->zk;
	v->nodes = wp->nodes;
	v->node_views = 1;
	v->requests = wp->requests;
	v->pools = wp->pools;
	v->ready = is_ready(wp);
	v->status_config = wp->status_cfg;
	v->history = wp->history;
}

static void
sample_now(struct webproc *wp)
{
	struct status_view v;

	if (!main_ready(wp) || !view_ready(wp))
		return;
	view(wp, &v);
	statuspage_history_sample(wp->history, &v, wall_now());
}

/*
 * Reading on demand (issue 25): the caches of nodes and requests read what
 * changed only when something reads them (a listing, the status page's
 * sample every STATUSPAGE_SAMPLE_INTERVAL), so ZooKeeper's churn costs this
 * process one event per change and one read per record changed between two
 * readers, not a read and a decode per change. A reader waits for the
 * reads, at most REFRESH_MAX seconds (a connection lost meanwhile: then it
 * is shown what is held, as while disconnected).
 */
#define REFRESH_MAX 2.0

static void
refresh_over(struct webproc *wp)
{
	wp->refreshing = 0;
	evtimer_del(wp->refresh_ev);
	if (wp->sample_due) {
		wp->sample_due = 0;
		sample_now(wp);
	}
	web_view_current(wp->web);
}

static void
cache_refreshed(struct zk_cache *c, void *arg)
{
	struct webproc *wp = arg;

	(void)c;
	if (wp->refreshing > 0 && --wp->refreshing == 0)
		refresh_over(wp);
}

static void
refresh_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct webproc *wp = arg;

	log_warn("web: the view's reads took over %g s; answering from what is held", REFRESH_MAX);
	refresh_over(wp);
}

/* The awake view made current: 1 now, 0 reads started (web_view_current
 * follows), -1 not synced (the listing shows what is held). The sampler's;
 * a listing's through refresh(). */
static int
refresh_view(struct webproc *wp)
{
	struct timeval tv = {(time_t)REFRESH_MAX, 0};

	if (!main_ready(wp) || !view_ready(wp))
		return -1;
	if (wp->refreshing > 0)
		return 0;
	wp->refreshing = 2;
	if (zk_cache_refresh(wp->nodes, cache_refreshed, wp) == 1)
		wp->refreshing--;
	if (zk_cache_refresh(wp->requests, cache_refreshed, wp) == 1)
		wp->refreshing--;
	if (wp->refreshing == 0)
		return 1;
	evtimer_add(wp->refresh_ev, &tv);
	return 0;
}

/*
 * Asleep while idle (issue 25): the recursive watches of the nodes and
 * requests caches bring every change of every node and request (its
 * locks' too: about 20 events per node request), whether or not anyone
 * reads the API, and ZooKeeper offers no way to drop a persistent watch
 * short of closing its session. So the view has a session of its own
 * (vzk), opened by the first listing that reads it (it waits for the
 * first sync: a listing of everything, as at start-up) and closed once no
 * listing has read it for idle_timeout seconds (webapp view_idle_timeout,
 * 60; 0: always awake, opened at start). While asleep nodepool-web holds
 * no watch on nodes or requests and no record of them, so the churn costs
 * it nothing; a client polling more often than the window keeps it awake
 * and pays what it paid before: the events and the reads of what changed
 * between two polls, not a re-sync per poll. The status page's sample
 * (every STATUSPAGE_SAMPLE_INTERVAL) is taken while awake only, and does
 * not keep the view awake: its history shows the times someone read.
 */
#define WAKE_MAX 10.0 /* seconds a listing waits for the view's first sync */

static void view_session_event(struct zk *zk, enum zk_event ev, void *arg);

static void
arm_idle(struct webproc *wp, double in)
{
	struct timeval tv = np_tv_of(in < 0.05 ? 0.05 : in);

	evtimer_add(wp->idle_ev, &tv);
}

/* Open the view's session; its caches are made once it is connected.
 * for_reader: a listing asked (logged). */
static int
view_wake(struct webproc *wp, int for_reader)
{
	char err[256];

	wp->vzk = zk_new(wp->base, &wp->zo, view_session_event, wp, err, sizeof(err));
	if (wp->vzk == NULL) {
		log_warn("web: the view's ZooKeeper session: %s", err);
		return -1;
	}
	wp->wakes++;
	wp->loaded = 0;
	wp->trimmed = 0; /* the first read is a load phase: trimmed after it */
	if (for_reader)
		log_info("web: view awake: watching nodes and requests again (a listing asked)");
	if (wp->idle_timeout > 0)
		arm_idle(wp, wp->idle_timeout);
	return 0;
}

/* Listings wait for the view's first sync, at most WAKE_MAX seconds from
 * the first of them. */
static void
view_wait(struct webproc *wp)
{
	struct timeval tv = {(time_t)WAKE_MAX, 0};

	if (wp->waking)
		return;
	wp->waking = 1;
	evtimer_add(wp->wake_ev, &tv);
}

/* Close the view's session: the server drops its watches. */
static void
view_sleep(struct webproc *wp)
{
	evtimer_del(wp->wake_ev);
	evtimer_del(wp->idle_ev);
	wp->waking = wp->loaded = 0;
	zk_cache_free(wp->nodes);
	zk_cache_free(wp->requests);
	wp->nodes = wp->requests = NULL;
	zk_free(wp->vzk);
	wp->vzk = NULL;
}

static void
idle_cb(evutil_socket_t fd, short what, void *arg)
{
	struct webproc *wp = arg;
	double left = wp->last_read + wp->idle_timeout - np_mono_s();

	if (wp->vzk == NULL || wp->idle_timeout <= 0)
		return;
	if (left > 0 || wp->waking || wp->refreshing > 0) {
		arm_idle(wp, left > 0 ? left : 1.0);
		return;
	}
	view_sleep(wp);
	wp->sleeps++;
	log_info("web: view asleep: no listing for %g s; nodes and requests are not watched "
		 "until the next one",
		 wp->idle_timeout);
	np_mem_trim_startup("web API view asleep");
}

static void
wake_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct webproc *wp = arg;

	wp->waking = 0;
	log_warn("web: the view's first read took over %g s; answering 503 (the reading goes "
		 "on)",
		 WAKE_MAX);
	web_view_failed(wp->web);
}

/* A cache synced: once the view is, the listings waiting for its first
 * sync go on. */
static void
view_synced(struct webproc *wp)
{
	if (!view_ready(wp))
		return;
	wp->loaded = 1;
	if (!wp->waking)
		return;
	wp->waking = 0;
	evtimer_del(wp->wake_ev);
	web_view_current(wp->web);
}

/* web_refresh_fn (web.h): a listing reads the view */
static int
refresh(void *arg)
{
	struct webproc *wp = arg;

	wp->last_read = np_mono_s();
	/* asleep while the main session is down: nothing held, nothing to
	 * read (503, where an awake view shows what it holds) */
	if (wp->vzk == NULL && (!main_ready(wp) || view_wake(wp, 1) != 0))
		return -2;
	if (!wp->loaded) {
		view_wait(wp);
		return 0;
	}
	return refresh_view(wp);
}

static void
sample_cb(evutil_socket_t fd, short what, void *arg)
{
	struct webproc *wp = arg;

	if (!view_ready(wp))
		return; /* asleep (or not synced): no sample */
	if (refresh_view(wp) == 0)
		wp->sample_due = 1; /* once the reads are back */
	else
		sample_now(wp);
}

/* Every worker's live record, as an array (new reference). */
static json_t *
live_metrics(void *arg)
{
	struct webproc *wp = arg;
	json_t *out = json_array(), *r;
	const char *k;

	json_object_foreach(wp->live, k, r) json_array_append(out, r);
	return out;
}

/* ---- the channel to nodepoold ------------------------------------------------------ */

static void
maybe_ready(struct webproc *wp)
{
	struct ipc_msg m;

	if (!childproc_link_up(wp->link) || wp->ready_sent || wp->zk == NULL ||
	    !zk_is_connected(wp->zk))
		return;
	childproc_ready(&m, "web", zk_session_id(wp->zk));
	childproc_link_send(wp->link, &m);
	ipc_msg_clear(&m);
	wp->ready_sent = 1;
	if (wp->web != NULL)
		log_info("ready: ZooKeeper session live, serving on port %d", web_port(wp->web));
	else
		log_info("ready: ZooKeeper session live, not listening yet (%s)", wp->listen_error);
}

static void
send_status(void *arg, int64_t seq)
{
	struct webproc *wp = arg;
	struct ipc_msg m;
	struct ipc_status *st = &m.u.status;

	childproc_status_init(&m, seq, wp->generation, wp->start);
	st->zk_state = zk_ipc_state(wp->zk, wp->zk_state);
	st->state = wp->stopping   ? IPC_WS_STOPPING
		    : is_ready(wp) ? IPC_WS_RUNNING
				   : IPC_WS_STARTING;
	if (wp->listen_error[0] != '\0')
		ipc_set_str(&st->last_error, wp->listen_error);
	childproc_link_send(wp->link, &m);
	ipc_msg_clear(&m);
}

/* webproc_apply as a childproc_apply_fn */
static int
webproc_apply_cb(void *arg, const json_t *slice, char *err, size_t errlen)
{
	return webproc_apply(arg, slice, err, errlen);
}

static void
on_config(void *arg, const struct ipc_config *c)
{
	struct webproc *wp = arg;
	struct ipc_msg ack;
	char err[512];
	int had = wp->slice != NULL;
	bool ok;

	ok = childproc_config(c, "web slice", webproc_apply_cb, wp, &ack, err, sizeof(err)) == 0;
	if (ok)
		wp->generation = c->generation;
	childproc_link_send(wp->link, &ack);
	ipc_msg_clear(&ack);
	if (!ok && !had) {
		/* nothing serves: exit, and let nodepoold restart us with back-off
		 * (an address in use may come free; a slice without ZooKeeper
		 * servers cannot: 100, set by webproc_apply) */
		log_error("%s", err);
		if (wp->exit_code == 0)
			wp->exit_code = 1;
		event_base_loopexit(wp->base, NULL);
	}
}

static void
on_metrics(void *arg, const struct ipc_metrics *m)
{
	struct webproc *wp = arg;
	json_error_t jerr;
	json_t *rec = json_loads(m->record, 0, &jerr);

	if (!json_is_object(rec)) {
		log_warn("METRICS for %s: not a JSON object: %s", m->provider,
			 rec == NULL ? jerr.text : "wrong type");
		json_decref(rec);
		return;
	}
	/* the record names its provider; the supervisor's name is the key */
	json_object_set_new(rec, "provider", json_string(m->provider));
	json_object_set_new(wp->live, m->provider, rec);
}

/* webproc_dump as a childproc_dump_fn */
static void
webproc_dump_cb(void *arg, struct evbuffer *out)
{
	webproc_dump(arg, out);
}

/* STOP, or the channel closed (childproc.h): a child exits when its
 * supervisor goes */
static void
on_stop(void *arg)
{
	webproc_stop(arg);
}

static const struct childproc_ops webproc_link_ops = {
    .config = on_config,
    .status = send_status,
    .metrics = on_metrics,
    .dump = webproc_dump_cb,
    .stop = on_stop,
};

/* ---- the session ------------------------------------------------------------------ */

/*
 * A cache's event: only SYNCED matters here (the endpoints read the caches
 * when asked). When the last of the three syncs, start-up (or the re-sync
 * after a lost connection: a TLS handshake, the catch-up's buffers) is
 * done, and what only it ran leaves the resident set (memtrim.h).
 */
static void
cache_event(struct zk_cache *c, enum zk_cache_event ev, const struct zk_cache_entry *e, void *arg)
{
	struct webproc *wp = arg;

	(void)e;
	if (ev == ZK_CACHE_SYNCED)
		view_synced(wp);
	if (ev == ZK_CACHE_SYNCED && main_ready(wp) && view_ready(wp))
		sample_now(wp); /* the page's first sample at once */
	if (ev == ZK_CACHE_SYNCED && !wp->trimmed && main_ready(wp) && view_ready(wp)) {
		wp->trimmed = 1;
		np_mem_trim_startup("web API view synced");
		/* again after a lost connection: see session_event */
	}
}

static void
session_event(struct zk *zk, enum zk_event ev, void *arg)
{
	struct webproc *wp = arg;
	int suspended = wp->zk_state == ZK_EV_SUSPENDED;

	/* a failed TLS handshake while suspended is still a suspension */
	if (ev != ZK_EV_AUTH_FAILED || !suspended)
		wp->zk_state = ev;
	switch (ev) {
	case ZK_EV_CONNECTED:
		log_info("ZooKeeper session established (0x%llx)",
			 (unsigned long long)zk_session_id(zk));
		if (wp->pools == NULL) {
			wp->pools = zk_cache_new(zk, "/nodepool/components/pool", ZK_CACHE_DATA,
						 cache_event, wp);
			zk_cache_set_codec(wp->pools, np_component_cache_decode,
					   np_component_cache_free);
		}
		if (wp->idle_timeout <= 0 && wp->vzk == NULL)
			view_wake(wp, 0); /* always awake */
		maybe_ready(wp);
		break;
	case ZK_EV_RECONNECTED:
		log_info("ZooKeeper connection restored");
		maybe_ready(wp);
		break;
	case ZK_EV_SUSPENDED:
		log_warn("ZooKeeper connection suspended: /ready answers 503 until it is back");
		wp->trimmed = 0; /* trimmed again once re-synced */
		break;
	case ZK_EV_EXPIRED:
		log_warn("ZooKeeper session expired: reading everything again");
		wp->trimmed = 0;
		break;
	case ZK_EV_AUTH_FAILED:
		/* a warning, as in every process: also a server away behind a
		 * proxy (the TCP connection taken, the handshake failing);
		 * while suspended lib/zk's own line says so, once an outage */
		if (!suspended)
			log_warn("ZooKeeper TLS handshake or authentication failed; retrying");
		break;
	}
}

/* The view's session (vzk): its caches are made once it is first
 * connected; lost connections and expiries re-sync them (zk.h). */
static void
view_session_event(struct zk *zk, enum zk_event ev, void *arg)
{
	struct webproc *wp = arg;

	switch (ev) {
	case ZK_EV_CONNECTED:
		log_debug("web: the view's ZooKeeper session established (0x%llx)",
			  (unsigned long long)zk_session_id(zk));
		if (wp->nodes == NULL) {
			/* nodes: of each record only what the endpoints
			 * show, compact (nodeview.h) */
			wp->nodes = zk_cache_new(zk, "/nodepool/nodes",
						 ZK_CACHE_DATA | ZK_CACHE_LOCKS | ZK_CACHE_LAZY,
						 cache_event, wp);
			zk_cache_set_codec(wp->nodes, decode_node, free_node);
			wp->requests = zk_cache_new(zk, "/nodepool/requests",
						    ZK_CACHE_DATA | ZK_CACHE_LAZY, cache_event, wp);
			zk_cache_set_codec(wp->requests, np_request_cache_decode,
					   np_request_cache_free);
		}
		break;
	case ZK_EV_RECONNECTED:
		break;
	case ZK_EV_SUSPENDED:
		log_warn("web: the view's ZooKeeper connection suspended: listings show what is "
			 "held until it is back");
		wp->trimmed = 0;
		break;
	case ZK_EV_EXPIRED:
		log_warn("web: the view's ZooKeeper session expired: reading everything again");
		wp->trimmed = 0;
		break;
	case ZK_EV_AUTH_FAILED:
		break; /* lib/zk logs it; the main session's line says more */
	}
}

/* ---- configuration ---------------------------------------------------------------- */

#define LISTEN_RETRY 2.0 /* seconds between tries to bind the address */

/* Bind the webapp address of the slice in force; on failure, try again in
 * LISTEN_RETRY seconds (an address in use, e.g. by a web process that is
 * still stopping, comes free; exiting would only make nodepoold restart us
 * into the same failure). */
static void
try_listen(struct webproc *wp)
{
	const json_t *webapp = json_object_get(wp->slice, "webapp");
	struct web_options wo = {0};
	struct timeval tv = {(time_t)LISTEN_RETRY, 0};
	char err[256];

	if (wp->web != NULL || wp->slice == NULL)
		return;
	web_options_from_json(&wo, webapp);
	wp->web = web_new(wp->base, &wo, view, live_metrics, wp, err, sizeof(err));
	if (wp->web != NULL) {
		web_set_refresh(wp->web, refresh);
		if (wp->listen_error[0] != '\0')
			log_info("web: listening after all");
		wp->listen_error[0] = '\0';
		return;
	}
	if (strcmp(err, wp->listen_error) != 0)
		log_error("%s; trying again every %g s", err, LISTEN_RETRY);
	snprintf(wp->listen_error, sizeof(wp->listen_error), "%s", err);
	evtimer_add(wp->listen_retry, &tv);
}

static void
listen_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	try_listen(arg);
}

/* Let go of the session, the caches and the listener. */
static void
teardown(struct webproc *wp)
{
	evtimer_del(wp->listen_retry);
	evtimer_del(wp->refresh_ev);
	wp->refreshing = wp->sample_due = 0;
	wp->listen_error[0] = '\0';
	web_free(wp->web);
	wp->web = NULL;
	view_sleep(wp);
	zk_cache_free(wp->pools);
	wp->pools = NULL;
	zk_free(wp->zk);
	wp->zk = NULL;
}

int
webproc_apply(struct webproc *wp, const json_t *slice, char *err, size_t errlen)
{
	const json_t *zkc = json_object_get(slice, "zookeeper");
	const json_t *tls = json_object_get(zkc, "tls");
	const json_t *webapp = json_object_get(slice, "webapp");
	const json_t *t = json_object_get(zkc, "timeout");
	const json_t *idle = json_object_get(webapp, "view_idle_timeout");
	struct zk_options zo;

	if (wp->slice != NULL && json_equal(wp->slice, slice))
		return 0;
	memset(&zo, 0, sizeof(zo));
	zo.hosts = json_string_value(json_object_get(zkc, "hosts"));
	zo.timeout = json_is_number(t) ? json_number_value(t) : 10.0;
	zo.tls_ca = json_string_value(json_object_get(tls, "ca"));
	zo.tls_cert = json_string_value(json_object_get(tls, "cert"));
	zo.tls_key = json_string_value(json_object_get(tls, "key"));
	if (zo.hosts == NULL || !json_is_object(webapp)) {
		snprintf(err, errlen, "web slice: %s",
			 zo.hosts == NULL ? "no zookeeper-servers configured"
					  : "no webapp section");
		wp->exit_code = EXIT_PERMANENT;
		return -1;
	}
	teardown(wp);
	json_decref(wp->slice);
	wp->slice = NULL;
	wp->ready_sent = 0;
	wp->idle_timeout =
	    json_is_number(idle) && json_number_value(idle) >= 0 ? json_number_value(idle) : 60.0;
	wp->last_read = np_mono_s();
	wp->zk = zk_new(wp->base, &zo, session_event, wp, err, errlen);
	if (wp->zk == NULL)
		return -1;
	wp->slice = json_deep_copy(slice);
	/* the view's session is made by the same options, later: its
	 * strings point into our copy */
	zkc = json_object_get(wp->slice, "zookeeper");
	tls = json_object_get(zkc, "tls");
	wp->zo = zo;
	wp->zo.hosts = json_string_value(json_object_get(zkc, "hosts"));
	wp->zo.tls_ca = json_string_value(json_object_get(tls, "ca"));
	wp->zo.tls_cert = json_string_value(json_object_get(tls, "cert"));
	wp->zo.tls_key = json_string_value(json_object_get(tls, "key"));
	json_decref(wp->status_cfg);
	wp->status_cfg = json_deep_copy(json_object_get(slice, "status"));
	if (wp->status_cfg == NULL)
		wp->status_cfg = json_object();
	if (wp->status_cfg == NULL || wp->slice == NULL)
		np_oom();
	try_listen(wp);
	return 0;
}

int
webproc_load_file(struct webproc *wp, const char *path, const char *secure, char *err,
		  size_t errlen)
{
	struct np_config *cfg = NULL;
	struct np_cfg_errors *errs = NULL;
	json_t *slice;
	int rc;

	if (np_cfg_load(path, secure, &cfg, &errs) != 0) {
		np_cfg_errors_print(errs, stderr);
		snprintf(err, errlen, "%s: %zu configuration error(s)", path,
			 np_cfg_errors_count(errs));
		np_cfg_errors_free(errs);
		return -1;
	}
	slice = np_cfg_web_slice(cfg);
	np_cfg_free(cfg);
	rc = webproc_apply(wp, slice, err, errlen);
	json_decref(slice);
	return rc;
}

/* ---- life cycle -------------------------------------------------------------------- */

struct webproc *
webproc_new(struct event_base *base, int channel_fd)
{
	struct webproc *wp = calloc(1, sizeof(*wp));
	char err[256];

	if (wp == NULL || (wp->live = json_object()) == NULL)
		abort();
	wp->base = base;
	wp->start = np_mono_s();
	if ((wp->listen_retry = evtimer_new(base, listen_retry_cb, wp)) == NULL ||
	    (wp->refresh_ev = evtimer_new(base, refresh_timeout, wp)) == NULL ||
	    (wp->idle_ev = evtimer_new(base, idle_cb, wp)) == NULL ||
	    (wp->wake_ev = evtimer_new(base, wake_timeout, wp)) == NULL)
		abort();
	wp->history = statuspage_history_new(STATUSPAGE_SAMPLE_INTERVAL, STATUSPAGE_WINDOW);
	if ((wp->sample_ev = event_new(base, -1, EV_PERSIST, sample_cb, wp)) == NULL)
		abort();
	{
		struct timeval tv = {(time_t)STATUSPAGE_SAMPLE_INTERVAL, 0};
		event_add(wp->sample_ev, &tv);
	}
	if (channel_fd >= 0) {
		wp->link = childproc_link_new(base, channel_fd, &webproc_link_ops, wp,
					      &wp->exit_code, err, sizeof(err));
		if (wp->link == NULL)
			fatalx("channel: %s", err);
	}
	return wp;
}

void
webproc_stop(struct webproc *wp)
{
	if (wp->stopping)
		return;
	wp->stopping = 1;
	event_base_loopexit(wp->base, NULL);
}

void
webproc_dump(struct webproc *wp, struct evbuffer *out)
{
	const char *k;
	json_t *r;

	evbuffer_add_printf(out, "web API on port %d, ZooKeeper %s, session 0x%llx, %s\n",
			    web_port(wp->web),
			    ipc_zk_state_name(zk_ipc_state(wp->zk, wp->zk_state)),
			    wp->zk ? (unsigned long long)zk_session_id(wp->zk) : 0ULL,
			    is_ready(wp) ? "ready" : "not ready");
	evbuffer_add_printf(out, "caches: %d nodes, %d requests, %d pool components\n",
			    wp->nodes ? zk_cache_count(wp->nodes) : 0,
			    wp->requests ? zk_cache_count(wp->requests) : 0,
			    wp->pools ? zk_cache_count(wp->pools) : 0);
	/* reading on demand: the records read since the session began, and
	 * those changed since the last reader (read at the next) */
	evbuffer_add_printf(out, "records read: %zu; changed records waiting for a reader: %zu\n",
			    zk_cache_reads(wp->nodes) + zk_cache_reads(wp->requests),
			    zk_cache_held(wp->nodes) + zk_cache_held(wp->requests));
	evbuffer_add_printf(out,
			    "view: %s (asleep after %g s without a listing%s); woken %llu, "
			    "put to sleep %llu times\n",
			    wp->vzk == NULL ? "asleep, nothing watched"
			    : wp->waking    ? "waking"
					    : "awake",
			    wp->idle_timeout, wp->idle_timeout > 0 ? "" : ": never", wp->wakes,
			    wp->sleeps);
	json_object_foreach(wp->live, k, r)
	    evbuffer_add_printf(out, "metrics of %s: starts %lld\n", k,
				(long long)json_integer_value(json_object_get(r, "starts")));
}

int
webproc_exit_code(const struct webproc *wp)
{
	return wp->exit_code;
}

int
webproc_port(const struct webproc *wp)
{
	return web_port(wp->web);
}

void
webproc_free(struct webproc *wp)
{
	if (wp == NULL)
		return;
	teardown(wp);
	event_free(wp->listen_retry);
	event_free(wp->refresh_ev);
	event_free(wp->idle_ev);
	event_free(wp->wake_ev);
	event_free(wp->sample_ev);
	statuspage_history_free(wp->history);
	json_decref(wp->status_cfg);
	childproc_link_free(wp->link);
	json_decref(wp->slice);
	json_decref(wp->live);
	free(wp);
}
