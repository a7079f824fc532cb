/*
 * The worker process around one launcher: where its configuration comes
 * from (a file when standalone, CONFIG messages from nodepoold), its exit
 * code, graceful stop.
 */
#include "worker/launcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "lib/core/childproc.h"
#include "lib/core/clock.h"
#include "lib/config/config.h"
#include "protocol/ipc.h"
#include "lib/core/log.h"
#include "lib/core/memtrim.h"
#include "lib/net/http.h"
#include "lib/ops/metrics.h"
#include "lib/config/slice.h"
#include "lib/ops/statsd.h"
#include "lib/core/version.h"
#include "lib/ops/web.h"
#include "lib/zk/zk_status.h"

struct worker {
	struct event_base *base;
	char *provider;
	int channel_fd;
	struct childproc_link *link; /* to nodepoold, or NULL when standalone */
	struct launcher *lc;
	json_t *slice;
	int64_t generation; /* of the config in force */
	int ready_sent;
	int exit_code;
	int stopping;
	double start;
	/* operator interfaces (lib/ops/web.h, lib/ops/statsd.h, lib/ops/metrics.h) */
	struct web *web;       /* only when the slice has `webapp` */
	json_t *webapp;	       /* the webapp section it serves */
	struct statsd *statsd; /* STATSD_HOST/STATSD_PORT, or NULL */
	struct statsd_reporter *reporter;
	struct metrics_pub *metrics_pub;
};

static void lc_worker_on_change(struct launcher *lc);

/* ---- the channel to nodepoold ----------------------------------------------- */

static void
send_ready(struct worker *w)
{
	struct ipc_msg m;

	childproc_ready(&m, w->provider, w->lc ? zk_session_id(w->lc->zk) : 0);
	childproc_link_send(w->link, &m);
	ipc_msg_clear(&m);
	w->ready_sent = 1;
	log_info("ready: ZooKeeper session live, provider started");
	np_mem_trim_startup("provider started");
}

static void
send_status(void *arg, int64_t seq)
{
	struct worker *w = arg;
	struct ipc_msg m;
	struct ipc_status *st = &m.u.status;
	struct launcher *lc = w->lc;
	long counts[NP_NODE_STATE_COUNT] = {0};
	size_t i;
	int k, all_paused = 1;

	childproc_status_init(&m, seq, w->generation, w->start);
	st->zk_state = lc != NULL ? zk_ipc_state(lc->zk, lc->zk_state) : IPC_ZK_CONNECTING;
	if (w->stopping)
		st->state = IPC_WS_STOPPING;
	else if (lc == NULL || !lc->started)
		st->state = IPC_WS_STARTING;
	else
		st->state = IPC_WS_RUNNING;
	if (lc != NULL) {
		const struct np_node **nodes;
		size_t n = lc->nodes ? drv_provider_nodes(&lc->host, &nodes) : 0;
		st->accepted = (int64_t)lc->counters.accepted;
		st->fulfilled = (int64_t)lc->counters.fulfilled;
		st->declined = (int64_t)lc->counters.declined;
		st->failed = (int64_t)lc->counters.failed;
		for (i = 0; i < n; i++)
			if (nodes[i]->state >= 0 && nodes[i]->state < NP_NODE_STATE_COUNT)
				counts[nodes[i]->state]++;
		for (k = 0; k < NP_NODE_STATE_COUNT; k++)
			if (counts[k] > 0)
				ipc_counts_add(&st->nodes, np_node_state_name(k), counts[k]);
		{
			/* node znodes that are not JSON objects (any provider's:
			 * none can be told): skipped, left in place */
			const struct zk_cache_entry *const *ents;
			int e, ne = lc->nodes ? zk_cache_entries(lc->nodes, &ents) : 0, bad = 0;
			for (e = 0; e < ne; e++)
				bad += ents[e]->obj == NULL && ents[e]->len > 0;
			if (bad > 0)
				ipc_counts_add(&st->nodes, "unreadable", bad);
		}
		for (i = 0; i < lc->prov.n_pools; i++) {
			struct lc_pool *pool = &lc->prov.pools[i];
			struct ipc_pool *ip = ipc_pools_add(&st->pools, pool->name);
			struct handler *h;
			ip->paused = pool->paused;
			ip->requests = pool->n_handlers;
			all_paused &= pool->paused;
			TAILQ_FOREACH(h, &pool->handlers, entry)
			st->launching += lc_handler_active_launches(h);
		}
		if (st->state == IPC_WS_RUNNING && lc->prov.n_pools > 0 && all_paused)
			st->state = IPC_WS_PAUSED;
		if (lc->last_error[0] != '\0')
			ipc_set_str(&st->last_error, lc->last_error);
		st->lock_attempts = (int64_t)lc->counters.req_lock_attempts;
		st->lock_lost = (int64_t)lc->counters.req_lock_lost;
		lc_peers(lc, &st->peers);
	}
	if (lc != NULL && lc->zk != NULL)
		st->zk_queue = zk_pending(lc->zk);
	/* the figures nodepool-web serves on /metrics (through nodepoold) */
	if (lc != NULL) {
		struct zk_counters zc;
		unsigned long long zv[METRICS_ZK_COUNT];

		metrics_set_requests(w->provider, lc->counters.accepted, lc->counters.fulfilled,
				     lc->counters.declined, lc->counters.failed);
		zk_counters(lc->zk, &zc);
		zv[0] = zc.losses;
		zv[1] = zc.expirations;
		zv[2] = zc.connect_errors;
		zv[3] = zc.resent;
		zv[4] = zc.lock_lost;
		metrics_set_zookeeper(w->provider, zv);
	}
	{
		json_t *rec = metrics_pub_live(w->metrics_pub);
		if (rec != NULL)
			st->metrics = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS |
							  JSON_REAL_PRECISION(17));
		json_decref(rec);
	}
	childproc_link_send(w->link, &m);
	ipc_msg_clear(&m);
}

/* lc_worker_apply_config as a childproc_apply_fn */
static int
lc_worker_apply_cb(void *arg, const json_t *slice, char *err, size_t errlen)
{
	return lc_worker_apply_config(arg, slice, err, errlen);
}

static void
on_config(void *arg, const struct ipc_config *c)
{
	struct worker *w = arg;
	struct ipc_msg ack;
	char err[512];
	bool ok;

	ok =
	    childproc_config(c, "config slice", lc_worker_apply_cb, w, &ack, err, sizeof(err)) == 0;
	if (ok)
		w->generation = c->generation;
	childproc_link_send(w->link, &ack);
	ipc_msg_clear(&ack); /* zeroes ack: decide on ok */
	if (!ok && w->lc == NULL) {
		/* nothing running and this config cannot run: permanent */
		log_error("%s", err);
		w->exit_code = 100;
		event_base_loopexit(w->base, NULL);
	}
}

/* lc_worker_dump as a childproc_dump_fn */
static void
lc_worker_dump_cb(void *arg, struct evbuffer *out)
{
	lc_worker_dump(arg, out);
}

/* STOP, or the channel closed (childproc.h) */
static void
on_stop(void *arg)
{
	lc_worker_stop(arg);
}

static const struct childproc_ops lc_worker_link_ops = {
    .config = on_config,
    .status = send_status,
    .dump = lc_worker_dump_cb,
    .stop = on_stop,
};

static void
lc_worker_on_change(struct launcher *lc)
{
	struct worker *w = lc->hook_arg;

	if (childproc_link_up(w->link) && !w->ready_sent && lc->started && lc->prov.dp != NULL &&
	    zk_is_connected(lc->zk))
		send_ready(w);
}

/* ---- web API, statsd, metrics ------------------------------------------------ */

/* What the web API, statsd and metrics see of the launcher now. */
static void
lc_worker_view(void *arg, struct status_view *v)
{
	struct worker *w = arg;
	struct launcher *lc = w->lc;

	memset(v, 0, sizeof(*v));
	v->provider = w->provider;
	if (lc == NULL)
		return;
	v->zk = lc->zk;
	v->nodes = lc->nodes;
	v->node_sums = 1;
	v->requests = lc->requests;
	v->pools = lc->pool_components;
	v->ready = lc->ready;
	v->accepted = lc->counters.accepted;
	v->fulfilled = lc->counters.fulfilled;
	v->declined = lc->counters.declined;
	v->failed = lc->counters.failed;
}

static json_t *
lc_worker_live_metrics(void *arg)
{
	struct worker *w = arg;
	const json_t *r = metrics_pub_record(w->metrics_pub);

	return r != NULL ? json_deep_copy(r) : NULL;
}

/* Before the launcher (and its ZooKeeper session) goes. */
static void
interfaces_detach(struct worker *w)
{
	web_reset(w->web);
	statsd_reporter_free(w->reporter);
	w->reporter = NULL;
	metrics_pub_free(w->metrics_pub);
	w->metrics_pub = NULL;
}

/* After a launcher started with this slice. */
static void
interfaces_attach(struct worker *w, const json_t *slice)
{
	const json_t *webapp = json_object_get(slice, "webapp");
	const json_t *iv = json_object_get(json_object_get(slice, "nodepoold"), "stats-interval");
	double interval = json_is_number(iv) ? json_number_value(iv) : 5.0;

	if (w->web != NULL && !json_equal(w->webapp, webapp)) {
		web_free(w->web);
		w->web = NULL;
		json_decref(w->webapp);
		w->webapp = NULL;
	}
	if (w->web == NULL && json_is_object(webapp)) {
		struct web_options o = {0};
		char err[256];
		web_options_from_json(&o, webapp);
		w->web = web_new(w->base, &o, lc_worker_view, lc_worker_live_metrics, w, err,
				 sizeof(err));
		if (w->web == NULL)
			log_error("%s", err);
		else
			w->webapp = json_deep_copy(webapp);
	}
	if (w->statsd != NULL) {
		w->reporter = statsd_reporter_new(w->base, w->statsd, slice, lc_worker_view, w);
		/* under nodepoold, nodepoold sends the host's launcher gauges */
		statsd_reporter_set_local(w->reporter, w->channel_fd < 0);
	}
	w->metrics_pub = metrics_pub_new(w->base, w->provider, interval, lc_worker_view, w);
}

/* lib/net/http.h's retry observer: every cloud API call tried again by
 * this provider's drivers counts (nodepool_api_retries_total). */
static void
lc_worker_api_retry(const char *api, int status, double wait, void *arg)
{
	struct worker *w = arg;

	(void)status;
	(void)wait;
	metrics_api_retry(w->provider, api);
}

struct worker *
lc_worker_new(struct event_base *base, const char *provider, int channel_fd)
{
	struct worker *w = calloc(1, sizeof(*w));

	if (w == NULL)
		abort();
	w->base = base;
	w->provider = strdup(provider);
	w->channel_fd = channel_fd;
	w->start = np_mono_s();
	{
		char err[256];
		w->statsd = statsd_new_from_env(err, sizeof(err));
		if (w->statsd == NULL && err[0] != '\0')
			log_warn("statsd disabled: %s", err);
		metrics_set_statsd(w->statsd);
	}
	http_set_retry_observer(lc_worker_api_retry, w);
	if (channel_fd >= 0) {
		char err[256];
		w->link = childproc_link_new(base, channel_fd, &lc_worker_link_ops, w,
					     &w->exit_code, err, sizeof(err));
		if (w->link == NULL)
			fatalx("channel: %s", err);
	}
	return w;
}

int
lc_worker_apply_config(struct worker *w, const json_t *slice, char *err, size_t errlen)
{
	struct launcher *lc;

	if (w->slice != NULL && json_equal(w->slice, slice))
		return 0; /* unchanged: nothing to do */
	lc = lc_new(w->base, slice, w->provider, err, errlen);
	if (lc == NULL)
		return -1;
	interfaces_detach(w);
	if (w->lc != NULL) {
		/* a changed provider: the old launcher lets go of everything
		 * (components, request locks) before the new one registers */
		lc_stop(w->lc);
		lc_free(w->lc);
	}
	w->lc = lc;
	lc->on_change = lc_worker_on_change;
	lc->hook_arg = w;
	json_decref(w->slice);
	w->slice = json_deep_copy(slice);
	/* a worker serving the web API itself (a lone nodepool-launcher; under
	 * nodepoold it is nodepool-web's) lists every node in full
	 * (/node-list); the others keep full records of their own nodes only */
	lc->full_records = json_is_object(json_object_get(slice, "webapp")) ||
			   (lc->prov.drv != NULL && lc->prov.drv->full_records);
	if (lc_start(lc, slice, err, errlen) != 0)
		return -1;
	interfaces_attach(w, slice);
	return 0;
}

int
lc_worker_load_file(struct worker *w, const char *path, const char *secure, char *err,
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
	slice = np_cfg_worker_slice(cfg, w->provider);
	np_cfg_free(cfg);
	if (slice == NULL) {
		snprintf(err, errlen, "%s: no provider named %s", path, w->provider);
		return -1;
	}
	rc = lc_worker_apply_config(w, slice, err, errlen);
	json_decref(slice);
	return rc;
}

void
lc_worker_stop(struct worker *w)
{
	if (w->stopping)
		return;
	w->stopping = 1;
	if (w->lc != NULL)
		lc_stop(w->lc);
	event_base_loopexit(w->base, NULL);
}

void
lc_worker_dump(struct worker *w, struct evbuffer *out)
{
	if (w->lc != NULL)
		lc_dump(w->lc, out);
	else
		evbuffer_add_printf(out, "no configuration yet\n");
}

static void
drain_tick(evutil_socket_t fd, short what, void *arg)
{
}

void
lc_worker_drain(struct worker *w, double timeout)
{
	double deadline = np_mono_s() + timeout;
	struct timeval tv = {0, 50000};
	struct event *t;

	if (w->lc == NULL || w->lc->zk == NULL)
		return;
	if ((t = evtimer_new(w->base, drain_tick, NULL)) == NULL)
		return;
	while (zk_pending(w->lc->zk) > 0 && np_mono_s() < deadline) {
		evtimer_add(t, &tv);
		if (event_base_loop(w->base, EVLOOP_ONCE) < 0)
			break;
	}
	event_free(t);
}

int
lc_worker_exit_code(const struct worker *w)
{
	return w->exit_code;
}

void
lc_worker_free(struct worker *w)
{
	if (w == NULL)
		return;
	interfaces_detach(w);
	web_free(w->web);
	json_decref(w->webapp);
	metrics_set_statsd(NULL);
	statsd_free(w->statsd);
	lc_free(w->lc);
	http_set_retry_observer(NULL, NULL);
	childproc_link_free(w->link);
	json_decref(w->slice);
	free(w->provider);
	free(w);
}
