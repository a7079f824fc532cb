/*
 * The launcher: ZooKeeper session, caches, components, event dispatch and
 * timers for one provider. See launcher.h.
 */
#include "lib/zk/cachecodec.h"
#include "worker/launcher.h"

#include <errno.h>
#include <malloc.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "lib/core/childproc.h"
#include "protocol/ipc.h"
#include "lib/core/log.h"
#include "lib/core/memtrim.h"
#include "protocol/paths.h"
#include "lib/core/strset.h"
#include "lib/core/version.h"
#include "lib/core/clock.h"
#include "lib/core/xalloc.h"

double
lc_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

const char *
lc_launch_result_key(enum drv_launch_result r)
{
	switch (r) {
	case DRV_LAUNCH_READY:
		return "ready";
	case DRV_LAUNCH_ABORTED:
		return "error.quota"; /* as upstream: an abort is a quota failure */
	default:
		return "error.unknown";
	}
}

double
lc_monotonic(void)
{
	return np_mono_s();
}

void
lc_set_error(struct launcher *lc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(lc->last_error, sizeof(lc->last_error), fmt, ap);
	va_end(ap);
	log_warn("%s", lc->last_error);
}

/* ---- caches -> objects ---------------------------------------------------- */

/* The launcher whose node cache decodes (one per worker process): which
 * records are kept whole depends on it. */
static const struct launcher *decoding_lc;

/* The node cache's object for record n (taken): the record is decoded
 * once, summarised, and kept whole only where we need it (our own nodes;
 * every node for the web API). */
static struct np_node_sum *
node_cache_obj(const struct launcher *lc, struct np_node *n)
{
	int whole = lc == NULL || lc->full_records ||
		    (n->provider != NULL && strcmp(n->provider, lc->prov.name) == 0);

	return np_node_sum_new(n, whole);
}

static void *
decode_node(const char *name, const char *data, int len)
{
	const struct launcher *lc = decoding_lc;
	struct np_node *n = NULL;
	char err[256];

	if (data == NULL || len == 0)
		return NULL; /* empty znode: cleanup removes it */
	if (np_node_decode(name, data, (size_t)len, &n, err, sizeof(err)) != 0) {
		/* not a JSON object: nothing of it can be used, and nothing
		 * of ours touches it (the cache decodes once per version) */
		log_warn("node %s: malformed record skipped: %s", name, err);
		return NULL;
	}
	if (err[0] != '\0')
		log_info("%s", err); /* a value of an odd type, kept as it is */
	return node_cache_obj(lc, n);
}

static void
free_node(void *o)
{
	np_node_sum_free(o);
}

const struct np_node_sum *
lc_node_sum(struct launcher *lc, const char *id)
{
	const struct zk_cache_entry *e = lc->nodes ? zk_cache_get(lc->nodes, id) : NULL;

	return e != NULL ? LC_SUM(e) : NULL;
}

const struct np_node *
lc_node(struct launcher *lc, const char *id)
{
	const struct np_node_sum *s = lc_node_sum(lc, id);

	return s != NULL ? np_node_sum_full(s) : NULL;
}

int
lc_node_adoptable(struct launcher *lc, const struct np_node *n)
{
	const struct driver *drv = lc->prov.drv;

	return n != NULL && n->state == NP_NODE_BUILDING && n->provider != NULL &&
	       strcmp(n->provider, lc->prov.name) == 0 && drv != NULL && lc->prov.dp != NULL &&
	       drv->launch_resumable != NULL && drv->launch_resumable(lc->prov.dp, n);
}

void
lc_peers(struct launcher *lc, struct ipc_strv *out)
{
	const struct zk_cache_entry *const *ents;
	int i, n = lc->pool_components ? zk_cache_entries(lc->pool_components, &ents) : 0;
	size_t p;
	char buf[512];

	for (i = 0; i < n; i++) {
		const struct np_component *c = ents[i]->obj;
		int mine = 0;
		if (c == NULL || c->id == NULL || c->provider_name == NULL ||
		    strcmp(c->provider_name, lc->prov.name) != 0)
			continue;
		for (p = 0; p < lc->prov.n_pools; p++)
			mine |= strcmp(c->id, lc->prov.pools[p].launcher_id) == 0;
		if (mine)
			continue;
		snprintf(buf, sizeof(buf), "%s %s %s", c->hostname ? c->hostname : "?",
			 c->pool_name ? c->pool_name : "?", c->id);
		ipc_strv_push(out, buf);
	}
}

int
lc_upstream_peer(struct launcher *lc, char *who, size_t wholen)
{
	const struct zk_cache_entry *const *ents;
	int i, n = lc->pool_components ? zk_cache_entries(lc->pool_components, &ents) : 0;

	for (i = 0; i < n; i++) {
		const struct np_component *c = ents[i]->obj;
		if (c == NULL || c->id == NULL || c->provider_name == NULL ||
		    strcmp(c->provider_name, lc->prov.name) != 0 ||
		    json_object_get(c->extra, "nodepoold") != NULL)
			continue;
		snprintf(who, wholen, "%s (%s)", c->hostname ? c->hostname : "?", c->id);
		return c->version != NULL && strncmp(c->version, "0.", 2) == 0 ? 2 : 1;
	}
	return 0;
}

int
lc_node_awaits_adoption(struct launcher *lc, const struct np_node *n)
{
	const struct np_request *r;

	if (n == NULL || n->allocated_to == NULL || !lc_node_adoptable(lc, n))
		return 0;
	r = lc_request(lc, n->allocated_to);
	return r != NULL && (r->state == NP_REQ_REQUESTED || r->state == NP_REQ_PENDING);
}

const struct np_request *
lc_request(struct launcher *lc, const char *id)
{
	const struct zk_cache_entry *e = lc->requests ? zk_cache_get(lc->requests, id) : NULL;

	return e != NULL ? e->obj : NULL;
}

int
lc_busy(struct launcher *lc, const char *node_id)
{
	return strset_has(lc->busy, node_id) || strset_has(lc->gone, node_id);
}

void
lc_node_gone(struct launcher *lc, const char *node_id)
{
	strset_add(lc->gone, node_id);
}

static void peers_barrier_for(struct launcher *lc, int lost);

void
lc_node_deleting(struct launcher *lc, const char *node_id)
{
	strset_add(lc->deleting, node_id);
}

void
lc_node_deleted(struct launcher *lc, const char *node_id, int ok)
{
	if (strset_has(lc->deleting, node_id)) {
		/* its REMOVED is still to come (not so far: ZooKeeper sends
		 * the event before the reply) */
		strset_del(lc->deleting, node_id);
		if (ok)
			lc_node_gone(lc, node_id);
		return;
	}
	/* its REMOVED came and was taken for ours: if our delete failed,
	 * someone else deleted it, which the driver hears of as REMOVED
	 * would have told it */
	if (!ok && lc->started && lc->prov.dp != NULL && lc->prov.drv->peers_changed != NULL &&
	    (lc->nodes == NULL || zk_cache_get(lc->nodes, node_id) == NULL))
		peers_barrier_for(lc, 0);
}

void
lc_busy_add(struct launcher *lc, const char *node_id)
{
	strset_add(lc->busy, node_id);
}

void
lc_busy_del(struct launcher *lc, const char *node_id)
{
	strset_del(lc->busy, node_id);
}

/* ---- contexts of asynchronous work ---------------------------------------- */

void *
lc_ctx_new(struct launcher *lc, size_t size, void (*cleanup)(void *ctx))
{
	struct lc_ctx_hdr *h = calloc(1, sizeof(*h) + size);

	if (h == NULL)
		abort();
	h->cleanup = cleanup;
	TAILQ_INSERT_TAIL(&lc->ctxs, h, entry);
	return h + 1;
}

void
lc_ctx_free(struct launcher *lc, void *ctx)
{
	struct lc_ctx_hdr *h;

	if (ctx == NULL)
		return;
	h = (struct lc_ctx_hdr *)ctx - 1;
	TAILQ_REMOVE(&lc->ctxs, h, entry);
	free(h);
}

static void
lc_ctx_reap_all(struct launcher *lc)
{
	struct lc_ctx_hdr *h;

	while ((h = TAILQ_FIRST(&lc->ctxs)) != NULL) {
		TAILQ_REMOVE(&lc->ctxs, h, entry);
		if (h->cleanup != NULL)
			h->cleanup(h + 1);
		free(h);
	}
}

/* ---- deferred passes ------------------------------------------------------ */

static void
schedule(struct event *ev)
{
	if (ev != NULL && !event_pending(ev, EV_TIMEOUT, NULL))
		event_active(ev, EV_TIMEOUT, 0);
}

void
lc_schedule_assign(struct launcher *lc)
{
	if (lc->started && !lc->stopping)
		schedule(lc->assign_ev);
}

static void timer_add(struct event *ev, double secs);

void
lc_schedule_assign_in(struct launcher *lc, double secs)
{
	double at = lc_monotonic() + secs;

	if (lc->assign_later_ev == NULL)
		return;
	/* the earliest asked for wins */
	if (event_pending(lc->assign_later_ev, EV_TIMEOUT, NULL) && lc->assign_later_at <= at)
		return;
	lc->assign_later_at = at;
	timer_add(lc->assign_later_ev, secs);
}

void
lc_schedule_delete(struct launcher *lc)
{
	if (lc->started && !lc->stopping && lc->deferred_delete_ev != NULL) {
		event_del(lc->deferred_delete_ev); /* a deferred one: now */
		schedule(lc->deferred_delete_ev);
	}
}

void
lc_delete_deferred_now(struct launcher *lc)
{
	if (lc->deferred_delete_ev != NULL && evtimer_pending(lc->deferred_delete_ev, NULL))
		lc_schedule_delete(lc);
}

static int
any_pool_paused(const struct launcher *lc)
{
	size_t i;

	for (i = 0; i < lc->prov.n_pools; i++)
		if (lc->prov.pools[i].paused)
			return 1;
	return 0;
}

void
lc_schedule_delete_soon(struct launcher *lc)
{
	if (!lc->started || lc->stopping || lc->deferred_delete_ev == NULL)
		return;
	if (lc->prov.drv->delete_at_once || any_pool_paused(lc)) {
		/* a driver whose deletions free what requests reuse (a
		 * static slot), or a pool waiting for room */
		lc->counters.delete_at_once++;
		lc_schedule_delete(lc);
		return;
	}
	if (!event_pending(lc->deferred_delete_ev, EV_TIMEOUT, NULL)) {
		timer_add(lc->deferred_delete_ev, LC_DELETE_DEFER);
		lc->counters.delete_deferred++;
	}
}

static void
notify_change(struct launcher *lc)
{
	if (lc->on_change != NULL)
		lc->on_change(lc);
}

int
lc_in_sync(const struct launcher *lc)
{
	return lc->zk != NULL && zk_is_connected(lc->zk) && lc->nodes != NULL &&
	       zk_cache_synced(lc->nodes) && zk_cache_synced(lc->requests) &&
	       zk_cache_synced(lc->pool_components);
}

static void
lc_assign_cb(evutil_socket_t fd, short what, void *arg)
{
	struct launcher *lc = arg;

	double t0;

	if (!lc->started || lc->stopping || !lc_in_sync(lc))
		return;
	t0 = np_mono_s();
	lc_assign_pass(lc);
	t0 = np_mono_s() - t0;
	if (t0 > lc->assign_max)
		lc->assign_max = t0;
	lc->ready = 1;
}

static void
deferred_delete_cb(evutil_socket_t fd, short what, void *arg)
{
	struct launcher *lc = arg;

	if (lc->started && !lc->stopping && lc_in_sync(lc))
		lc_delete_pass(lc);
}

static void
lc_minready_cb(evutil_socket_t fd, short what, void *arg)
{
	struct launcher *lc = arg;

	if (lc->started && !lc->stopping && lc_in_sync(lc))
		lc_minready_pass(lc);
}

static void
timer_add(struct event *ev, double secs)
{
	struct timeval tv;

	tv = np_tv_of(secs);
	event_add(ev, &tv);
}

static void
lc_cleanup_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct launcher *lc = arg;

	if (lc->started && !lc->stopping && lc_in_sync(lc)) {
		lc_cleanup_pass(lc);
		if (lc->prov.drv->cleanup != NULL && lc->prov.dp != NULL)
			lc->prov.drv->cleanup(lc->prov.dp);
	}
	timer_add(lc->cleanup_ev, lc->settings.cleanup_interval);
}

static void
delete_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct launcher *lc = arg;

	if (lc->started && !lc->stopping && lc_in_sync(lc)) {
		lc_delete_pass(lc);
		/* Safety net for events we could not act on (e.g. a lock we
		 * lost a race for): re-run assignment and min-ready too. */
		lc_assign_pass(lc);
		lc_minready_pass(lc);
	}
	timer_add(lc->delete_ev, lc->settings.delete_interval);
}

/* ---- components ----------------------------------------------------------- */

static char *
lc_component_json(struct launcher *lc)
{
	struct np_component *c = np_component_new("launcher");
	char *s;

	c->hostname = strdup(lc->hostname);
	free(c->state); /* np_component_new's default */
	c->state = strdup(lc->stopping ? "stopped" : "running");
	c->version = strdup(NP_VERSION);
	s = np_component_encode(c, NULL);
	np_component_free(c);
	return s;
}

static char *
pool_component_json(struct lc_pool *pool)
{
	struct np_component *c = np_component_new("pool");
	char *s;
	size_t i;

	c->hostname = strdup(pool->prov->lc->hostname);
	free(c->state); /* np_component_new's default */
	c->state = strdup("running");
	c->version = strdup(NP_VERSION);
	c->id = strdup(pool->launcher_id);
	c->pool_name = strdup(pool->name);
	c->provider_name = strdup(pool->prov->name);
	for (i = 0; i < pool->labels.n; i++)
		np_strv_push(&c->supported_labels, pool->labels.v[i]);
	c->priority = pool->priority;
	c->paused = pool->paused;
	/* beyond upstream's keys (which its readers ignore): tells a peer
	 * nodepoold from an upstream launcher (lc_upstream_peer) */
	json_decref(c->extra);
	c->extra = json_pack("{s:s}", "nodepoold", NP_VERSION);
	pool->reported_paused = pool->paused;
	s = np_component_encode(c, NULL);
	np_component_free(c);
	return s;
}

struct comp_ctx {
	struct launcher *lc;
	struct lc_pool *pool; /* NULL: the launcher component */
};

static void
component_created(int rc, const char *path, void *arg)
{
	struct comp_ctx *cc = arg;
	struct launcher *lc = cc->lc;

	if (cc->pool != NULL)
		cc->pool->component_pending = 0;
	if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT) {
		/* it may have been created: the re-sync looks (adopt_components) */
		log_warn("registering component: %s; looking again once re-synced",
			 zk_strerror(rc));
		lc_ctx_free(lc, cc);
		return;
	}
	if (rc != ZOK) {
		lc_set_error(lc, "registering component: %s", zk_strerror(rc));
		lc_ctx_free(lc, cc);
		return;
	}
	if (cc->pool != NULL) {
		free(cc->pool->component_path);
		cc->pool->component_path = strdup(path);
		log_info("pool %s registered as %s (%s)", cc->pool->name, path,
			 cc->pool->launcher_id);
		if (cc->pool->paused != cc->pool->reported_paused)
			lc_pool_update_component(cc->pool);
	} else {
		free(lc->launcher_component_path);
		lc->launcher_component_path = strdup(path);
	}
	lc_ctx_free(lc, cc);
	lc_schedule_assign(lc);
}

/*
 * A pool registration whose create we never heard back from (a lost
 * connection) may exist: the re-synced component cache shows one of our
 * session with our pool id. Adopt it rather than register twice.
 */
static void
adopt_components(struct launcher *lc)
{
	const struct zk_cache_entry *const *ents;
	int i, n = zk_cache_entries(lc->pool_components, &ents);
	size_t k;
	char path[512];

	for (k = 0; k < lc->prov.n_pools; k++) {
		struct lc_pool *pool = &lc->prov.pools[k];
		if (pool->component_path != NULL || pool->component_pending)
			continue;
		for (i = 0; i < n; i++) {
			const struct np_component *c = ents[i]->obj;
			if (c == NULL || c->id == NULL || strcmp(c->id, pool->launcher_id) != 0 ||
			    zk_cache_ephemeral_owner(lc->pool_components, ents[i]) !=
				zk_session_id(lc->zk))
				continue;
			snprintf(path, sizeof(path), "/nodepool/components/pool/%s", ents[i]->name);
			pool->component_path = strdup(path);
			log_info("pool %s registered as %s (%s), found after a lost connection",
				 pool->name, path, pool->launcher_id);
			break;
		}
	}
}

static void
register_components(struct launcher *lc)
{
	char path[512];
	struct comp_ctx *cc;
	size_t i;
	char *json;

	if (lc->launcher_component_path == NULL) {
		cc = lc_ctx_new(lc, sizeof(*cc), NULL);
		cc->lc = lc;
		json = lc_component_json(lc);
		snprintf(path, sizeof(path), "/nodepool/components/launcher/%s", lc->hostname);
		zk_create(lc->zk, path, json, (int)strlen(json), ZOO_EPHEMERAL | ZOO_SEQUENCE, 1,
			  component_created, cc);
		free(json);
	}
	for (i = 0; i < lc->prov.n_pools; i++) {
		struct lc_pool *pool = &lc->prov.pools[i];
		if (pool->component_path != NULL || pool->component_pending)
			continue;
		cc = lc_ctx_new(lc, sizeof(*cc), NULL);
		cc->lc = lc;
		cc->pool = pool;
		pool->component_pending = 1;
		json = pool_component_json(pool);
		snprintf(path, sizeof(path), "/nodepool/components/pool/%s", lc->hostname);
		zk_create(lc->zk, path, json, (int)strlen(json), ZOO_EPHEMERAL | ZOO_SEQUENCE, 1,
			  component_created, cc);
		free(json);
	}
}

void
lc_pool_update_component(struct lc_pool *pool)
{
	struct launcher *lc = pool->prov->lc;
	char *json;

	if (pool->component_path == NULL || lc->zk == NULL)
		return;
	json = pool_component_json(pool);
	zk_set(lc->zk, pool->component_path, json, (int)strlen(json), -1, NULL, NULL);
	free(json);
}

/* ---- cache events --------------------------------------------------------- */

static int
node_is_ours(struct launcher *lc, const struct np_node *n)
{
	return n != NULL && n->provider != NULL && strcmp(n->provider, lc->prov.name) == 0;
}

static int
sum_is_ours(struct launcher *lc, const struct np_node_sum *s)
{
	return np_node_sum_of_provider(s, lc->prov.name);
}

/*
 * The node cache's lock filter: a worker reads whether a node is locked
 * only for its own provider's nodes (reuse, cleanup, deletion, its static
 * slots; see protocol/nodesum.h), so only theirs are watched: the child and
 * lock watches of every other provider's node (two of the three watches a
 * node costs, in each worker) are left off. A record that cannot be
 * decoded is watched, as cleanup may look at it; a worker keeping every
 * record whole (serving the web API) watches every lock.
 */
static int
node_lock_wanted(const struct zk_cache_entry *e, void *arg)
{
	struct launcher *lc = arg;

	return lc->full_records || LC_SUM(e) == NULL || sum_is_ours(lc, LC_SUM(e));
}

/*
 * Every cache re-synced after a lost connection or an expiry: the view is
 * current again, so the decisions held back meanwhile (static slots,
 * declines, deletions, min-ready) are taken now, at once.
 */
static void
resynced(struct launcher *lc)
{
	lc->sync_epoch++;
	log_info("ZooKeeper view re-synced %.0f ms after the connection came back; resuming",
		 (lc_monotonic() - lc->connected_at) * 1000);
	adopt_components(lc);
	register_components(lc);
	if (lc->prov.dp != NULL && lc->prov.drv->provider_start != NULL)
		lc->prov.drv->provider_start(lc->prov.dp);
	lc_handler_resynced(lc);
	lc_schedule_assign(lc);
	lc_schedule_delete(lc);
	schedule(lc->minready_ev);
	notify_change(lc);
	/* what only the reconnection ran (a TLS handshake, the catch-up's
	 * buffers) leaves the resident set, as after start-up */
	np_mem_trim_startup("ZooKeeper view re-synced");
}

static void
maybe_started(struct launcher *lc)
{
	char err[256];

	if (!lc_in_sync(lc))
		return;
	if (lc->started) {
		if (!lc->stopping)
			resynced(lc);
		return;
	}
	lc->started = 1;
	lc->sync_epoch++;
	if (lc->prov.dp == NULL) {
		lc->prov.dp = lc->prov.drv->provider_new(&lc->host, err, sizeof(err));
		if (lc->prov.dp == NULL) {
			lc_set_error(lc, "provider %s: %s", lc->prov.name, err);
			return;
		}
	}
	if (lc->prov.drv->provider_start != NULL)
		lc->prov.drv->provider_start(lc->prov.dp);
	log_info("provider %s started (driver %s, %zu pools)", lc->prov.name, lc->prov.driver_name,
		 lc->prov.n_pools);
	lc_schedule_assign(lc);
	lc_schedule_delete(lc);
	schedule(lc->minready_ev);
	notify_change(lc);
}

static void
nodes_event(struct zk_cache *c, enum zk_cache_event ev, const struct zk_cache_entry *e, void *arg)
{
	struct launcher *lc = arg;
	const struct np_node_sum *n;

	if (ev == ZK_CACHE_SYNCED) {
		/* the start-up's transient buffers (raw reads, records
		 * decoded only to be summarised) back to the system */
		malloc_trim(0);
		maybe_started(lc);
		return;
	}
	lc_quota_nodes_read(lc);
	n = LC_SUM(e);
	if (ev == ZK_CACHE_REMOVED) {
		int by_us = strset_has(lc->gone, e->name) || strset_has(lc->deleting, e->name);
		strset_del(lc->gone, e->name);
		strset_del(lc->deleting, e->name);
		/* a peer deleted a node of our provider (a static slot it
		 * recycled): the driver looks again, so that the slot's owner
		 * (drv_duty_mine) registers it anew */
		if (!by_us && lc->started && sum_is_ours(lc, n) && lc->prov.dp != NULL &&
		    lc->prov.drv->peers_changed != NULL)
			peers_barrier_for(lc, 0);
	}
	if (ev == ZK_CACHE_REMOVED) {
		/* any provider's node gone: its tenant may have room again
		 * (tenant limits are global) */
		if (lc->n_tenant_limits > 0 && n != NULL && np_node_sum_tenant_name(n) != NULL)
			lc_schedule_assign(lc);
		if (sum_is_ours(lc, n)) {
			/* room freed: paused handlers may go on */
			lc_schedule_assign(lc);
			if (np_node_sum_state(n) == NP_NODE_READY)
				schedule(lc->minready_ev);
		}
		return;
	}
	if (!lc->started)
		return;
	if (n == NULL) {
		lc_schedule_delete_soon(lc); /* empty or malformed: cleanup looks */
		return;
	}
	switch (np_node_sum_state(n)) {
	case NP_NODE_READY:
		/* a node became available (or was deallocated): requests
		 * deferred for lack of nodes may be served now */
		if (np_node_sum_allocated_to(n) == NULL && e->locked == 0)
			lc_schedule_assign(lc);
		if (sum_is_ours(lc, n))
			schedule(lc->minready_ev);
		break;
	case NP_NODE_USED:
	case NP_NODE_IN_USE:
	case NP_NODE_FAILED:
	case NP_NODE_ABORTED:
	case NP_NODE_DELETING:
	case NP_NODE_DELETED:
	case NP_NODE_BUILDING:
		if (sum_is_ours(lc, n) && e->locked == 0)
			lc_schedule_delete_soon(lc);
		break;
	default:
		break;
	}
}

static void
requests_event(struct zk_cache *c, enum zk_cache_event ev, const struct zk_cache_entry *e,
	       void *arg)
{
	struct launcher *lc = arg;
	struct handler *h;

	if (ev == ZK_CACHE_SYNCED) {
		maybe_started(lc);
		return;
	}
	if (!lc->started)
		return;
	if (ev == ZK_CACHE_REMOVED) {
		lc_busy_del(lc, e->name); /* a completed min-ready request */
		h = lc_find_handler(lc, e->name);
		if (h != NULL)
			lc_handler_request_removed(h);
		schedule(lc->minready_ev);
		lc_schedule_assign(lc);
		return;
	}
	if (e->obj != NULL) {
		const struct np_request *r = e->obj;
		if (r->state == NP_REQ_REQUESTED)
			lc_schedule_assign(lc);
		else if (r->requestor != NULL && strcmp(r->requestor, "NodePool:min-ready") == 0)
			schedule(lc->minready_ev); /* fulfilled/failed: remove it */
	}
}

struct barrier {
	struct launcher *lc;
	int lost; /* a peer's registration went */
};

static void
peers_barrier_done(int rc, const struct zk_stat *st, void *arg)
{
	struct barrier *b = arg;
	struct launcher *lc = b->lc;
	int lost = b->lost;

	lc_ctx_free(lc, b);
	if (!lc->started || lc->stopping)
		return;
	if (lc->prov.dp != NULL && lc->prov.drv->peers_changed != NULL)
		lc->prov.drv->peers_changed(lc->prov.dp);
	if (lost) {
		/* the lost peer's duties (min-ready, ages, holds, leaks) are
		 * someone's now (lc_duty_mine): ours are done at once, not at
		 * the next timer */
		schedule(lc->minready_ev);
		timer_add(lc->cleanup_ev, 0);
	}
}

/*
 * Another session's pool registration of our provider is gone: writes that
 * session sent before it ended are all in ZooKeeper now, and the node
 * cache's reads of them were sent before this event reached us. One more
 * round trip on our session (answered in order) lets those reads land
 * before the driver looks at the nodes.
 */
static void
peers_barrier_for(struct launcher *lc, int lost)
{
	struct barrier *b = lc_ctx_new(lc, sizeof(*b), NULL);

	b->lc = lc;
	b->lost = lost;
	zk_exists(lc->zk, "/nodepool/nodes", NULL, NULL, peers_barrier_done, b);
}

static void
components_event(struct zk_cache *c, enum zk_cache_event ev, const struct zk_cache_entry *e,
		 void *arg)
{
	struct launcher *lc = arg;

	if (ev == ZK_CACHE_SYNCED) {
		maybe_started(lc);
		return;
	}
	if (ev == ZK_CACHE_REMOVED)
		lc->pools_removed_at = lc_monotonic();
	if (ev == ZK_CACHE_REMOVED && lc->started && e->obj != NULL &&
	    zk_cache_ephemeral_owner(c, e) != zk_session_id(lc->zk)) {
		const struct np_component *pc = e->obj;
		if (pc->provider_name != NULL && strcmp(pc->provider_name, lc->prov.name) == 0)
			peers_barrier_for(lc, 1);
	}
	lc_schedule_assign(lc);
}

/* ---- session -------------------------------------------------------------- */

static void
drop_all_handlers(struct launcher *lc)
{
	size_t i;
	struct handler *h, *tmp;

	for (i = 0; i < lc->prov.n_pools; i++) {
		struct lc_pool *pool = &lc->prov.pools[i];
		/* glibc's sys/queue.h has no TAILQ_FOREACH_SAFE */
		for (h = TAILQ_FIRST(&pool->handlers); h != NULL; h = tmp) {
			tmp = TAILQ_NEXT(h, entry);
			lc_handler_free(h);
		}
		pool->paused = 0;
	}
}

static void
session_event(struct zk *zk, enum zk_event ev, void *arg)
{
	struct launcher *lc = arg;
	size_t i;

	/* a failed TLS handshake while suspended is still a suspension */
	if (ev != ZK_EV_AUTH_FAILED || lc->zk_state != ZK_EV_SUSPENDED)
		lc->zk_state = ev;
	if (ev == ZK_EV_CONNECTED || ev == ZK_EV_RECONNECTED)
		lc->connected_at = lc_monotonic();
	switch (ev) {
	case ZK_EV_CONNECTED:
		log_info("ZooKeeper session established (0x%llx)",
			 (unsigned long long)zk_session_id(zk));
		if (lc->nodes == NULL) {
			lc->nodes = zk_cache_new(zk, "/nodepool/nodes",
						 ZK_CACHE_DATA | ZK_CACHE_LOCKS, nodes_event, lc);
			decoding_lc = lc;
			zk_cache_set_codec(lc->nodes, decode_node, free_node);
			zk_cache_set_lock_filter(lc->nodes, node_lock_wanted, lc);
			lc->requests = zk_cache_new(zk, "/nodepool/requests", ZK_CACHE_DATA,
						    requests_event, lc);
			zk_cache_set_codec(lc->requests, np_request_cache_decode,
					   np_request_cache_free);
			lc->pool_components = zk_cache_new(zk, "/nodepool/components/pool",
							   ZK_CACHE_DATA, components_event, lc);
			zk_cache_set_codec(lc->pool_components, np_component_cache_decode,
					   np_component_cache_free);
		}
		/* The pool registration says we are here; the driver (static
		 * slots) and every decision wait until the caches have re-synced
		 * (resynced()). */
		register_components(lc);
		break;
	case ZK_EV_RECONNECTED:
		log_info("ZooKeeper connection restored; re-syncing");
		break;
	case ZK_EV_SUSPENDED:
		log_warn("ZooKeeper connection suspended; pausing work");
		break;
	case ZK_EV_EXPIRED:
		lc_set_error(lc, "ZooKeeper session expired; re-registering");
		/* Our ephemerals (components, lock contenders) are gone: every
		 * request in hand is lost to us; lost-request cleanup (ours or
		 * another launcher's) returns them to `requested`. */
		lc->abandon_launches = 1;
		drop_all_handlers(lc);
		lc->abandon_launches = 0;
		free(lc->launcher_component_path);
		lc->launcher_component_path = NULL;
		for (i = 0; i < lc->prov.n_pools; i++) {
			free(lc->prov.pools[i].component_path);
			lc->prov.pools[i].component_path = NULL;
			lc->prov.pools[i].component_pending = 0;
		}
		strset_free(lc->busy);
		lc->busy = strset_new();
		json_object_clear(lc->req_seen);
		strset_free(lc->gone);
		lc->gone = strset_new();
		strset_free(lc->deleting);
		lc->deleting = strset_new();
		break;
	case ZK_EV_AUTH_FAILED:
		/* also a server that is away behind a proxy or load balancer
		 * (the TCP connection is taken, the handshake fails); while
		 * suspended, lib/zk's own line says so: one line per outage */
		snprintf(lc->last_error, sizeof(lc->last_error),
			 "ZooKeeper TLS handshake failed (server unreachable, or it refused our "
			 "certificate); retrying");
		if (lc->zk_state != ZK_EV_SUSPENDED)
			log_warn("%s", lc->last_error);
		break;
	}
	notify_change(lc);
}

/* ---- life cycle ----------------------------------------------------------- */

struct launcher *
lc_new(struct event_base *base, const json_t *config, const char *provider, char *err,
       size_t errlen)
{
	struct launcher *lc = calloc(1, sizeof(*lc));
	size_t i;

	if (lc == NULL)
		abort();
	lc->host.owner = lc;
	lc->base = base;
	lc->hostname = childproc_fqdn();
	lc->busy = strset_new();
	lc->req_seen = json_object();
	lc->gone = strset_new();
	lc->deleting = strset_new();
	TAILQ_INIT(&lc->ctxs);
	TAILQ_INIT(&lc->zombies);
	lc->start_time = lc_now();
	if (lc_config_load(lc, config, provider, err, errlen) != 0) {
		lc_free(lc);
		return NULL;
	}
	lc->prov.lc = lc;
	lc->prov.drv = driver_lookup(lc->prov.driver_name);
	if (lc->prov.drv == NULL) {
		snprintf(err, errlen, "provider %s: driver %s is not available in this build",
			 provider, lc->prov.driver_name);
		lc_free(lc);
		return NULL;
	}
	for (i = 0; i < lc->prov.n_pools; i++) {
		struct lc_pool *pool = &lc->prov.pools[i];
		char id[512];
		if (np_launcher_id(id, sizeof(id), lc->hostname, lc->prov.name, pool->name) < 0 ||
		    strlen(id) >= sizeof(id) - 1) {
			snprintf(err, errlen, "pool %s: cannot make a launcher id", pool->name);
			lc_free(lc);
			return NULL;
		}
		pool->launcher_id = strdup(id);
	}
	lc->assign_ev = event_new(base, -1, 0, lc_assign_cb, lc);
	lc->deferred_delete_ev = event_new(base, -1, 0, deferred_delete_cb, lc);
	lc->minready_ev = event_new(base, -1, 0, lc_minready_cb, lc);
	lc->assign_later_ev = event_new(base, -1, 0, lc_assign_cb, lc);
	lc->cleanup_ev = event_new(base, -1, 0, lc_cleanup_timer_cb, lc);
	lc->delete_ev = event_new(base, -1, 0, delete_timer_cb, lc);
	return lc;
}

/* "host:port[,host:port...][/chroot]" from zookeeper-servers, as upstream's
 * buildZooKeeperHosts (port 2281 when unset; IPv6 literals in brackets). */
static char *
zk_hosts_from_config(const json_t *config)
{
	const json_t *servers = json_object_get(config, "zookeeper-servers"), *s;
	char *out = NULL;
	size_t i, len = 0;
	const char *chroot = NULL;

	json_array_foreach(servers, i, s)
	{
		const char *host = json_string_value(json_object_get(s, "host"));
		const json_t *pv = json_object_get(s, "port");
		long port = json_is_integer(pv) ? (long)json_integer_value(pv) : 2281;
		char ent[600];
		int v6;

		if (json_is_string(pv))
			port = strtol(json_string_value(pv), NULL, 10);
		if (host == NULL)
			continue;
		v6 = strchr(host, ':') != NULL && host[0] != '[';
		snprintf(ent, sizeof(ent), "%s%s%s%s:%ld", i ? "," : "", v6 ? "[" : "", host,
			 v6 ? "]" : "", port);
		out = realloc(out, len + strlen(ent) + 1);
		memcpy(out + len, ent, strlen(ent) + 1);
		len += strlen(ent);
		if (chroot == NULL)
			chroot = json_string_value(json_object_get(s, "chroot"));
	}
	if (out == NULL)
		return NULL;
	if (chroot != NULL && *chroot != '\0') {
		out = realloc(out, len + strlen(chroot) + 2);
		snprintf(out + len, strlen(chroot) + 2, "%s%s", chroot[0] == '/' ? "" : "/",
			 chroot);
	}
	return out;
}

int
lc_start(struct launcher *lc, const json_t *config, char *err, size_t errlen)
{
	struct zk_options opt;
	const json_t *tls = json_object_get(config, "zookeeper-tls");
	char *hosts = zk_hosts_from_config(config);
	double timeout = 10.0;
	const json_t *t = json_object_get(config, "zookeeper-timeout");

	if (hosts == NULL) {
		snprintf(err, errlen, "no zookeeper-servers configured");
		return -1;
	}
	if (json_is_number(t))
		timeout = json_number_value(t);
	lc->zk_timeout = timeout;
	memset(&opt, 0, sizeof(opt));
	opt.hosts = hosts;
	opt.timeout = timeout;
	opt.tls_ca = json_string_value(json_object_get(tls, "ca"));
	opt.tls_cert = json_string_value(json_object_get(tls, "cert"));
	opt.tls_key = json_string_value(json_object_get(tls, "key"));
	lc->zk = zk_new(lc->base, &opt, session_event, lc, err, errlen);
	free(hosts);
	if (lc->zk == NULL)
		return -1;
	/* writes and reads interrupted by a lost connection are sent again
	 * once it is back, instead of failing (zk.h) */
	zk_set_retry(lc->zk, 1);
	/* launch decisions and static registrations of every launcher of
	 * the provider, one at a time (quota.c) */
	if (lc_quota_init(lc) != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	timer_add(lc->cleanup_ev, lc->settings.cleanup_interval);
	timer_add(lc->delete_ev, lc->settings.delete_interval);
	return 0;
}

void
lc_stop(struct launcher *lc)
{
	size_t i;

	lc->stopping = 1;
	drop_all_handlers(lc);
	if (lc->prov.dp != NULL && lc->prov.drv->provider_stop != NULL)
		lc->prov.drv->provider_stop(lc->prov.dp);
	if (lc->zk != NULL) {
		/* asynchronous: this runs from signal callbacks, and zk_free
		 * waits for requests in flight before closing the session */
		for (i = 0; i < lc->prov.n_pools; i++) {
			if (lc->prov.pools[i].component_path != NULL)
				zk_delete(lc->zk, lc->prov.pools[i].component_path, -1, 0, NULL,
					  NULL);
		}
		if (lc->launcher_component_path != NULL)
			zk_delete(lc->zk, lc->launcher_component_path, -1, 0, NULL, NULL);
	}
}

void
lc_free(struct launcher *lc)
{
	if (lc == NULL)
		return;
	drop_all_handlers(lc);
	if (lc->prov.dp != NULL && lc->prov.drv->provider_free != NULL)
		lc->prov.drv->provider_free(lc->prov.dp);
	/* work whose callbacks will never run now: release what it holds
	 * (locks are released fire-and-forget while the session lives) */
	lc_ctx_reap_all(lc);
	lc_handler_reap_zombies(lc);
	zk_cache_free(lc->nodes);
	zk_cache_free(lc->requests);
	zk_cache_free(lc->pool_components);
	lc_quota_free(lc);
	zk_free(lc->zk);
	if (lc->assign_ev)
		event_free(lc->assign_ev);
	if (lc->deferred_delete_ev)
		event_free(lc->deferred_delete_ev);
	if (lc->minready_ev)
		event_free(lc->minready_ev);
	if (lc->assign_later_ev)
		event_free(lc->assign_later_ev);
	if (lc->cleanup_ev)
		event_free(lc->cleanup_ev);
	if (lc->delete_ev)
		event_free(lc->delete_ev);
	lc_config_free(lc);
	json_decref(lc->req_seen);
	strset_free(lc->busy);
	strset_free(lc->gone);
	strset_free(lc->deleting);
	free(lc->launcher_component_path);
	free(lc->hostname);
	free(lc);
}

void
lc_dump(struct launcher *lc, struct evbuffer *out)
{
	size_t i;
	struct handler *h;

	evbuffer_add_printf(out, "provider %s (driver %s): zk %s, %d ops pending\n", lc->prov.name,
			    lc->prov.driver_name,
			    zk_is_connected(lc->zk) ? "connected" : "not connected",
			    zk_pending(lc->zk));
	{
		struct zk_counters zc;

		zk_counters(lc->zk, &zc);
		evbuffer_add_printf(out,
				    "  zk: %llu connections lost, %llu sessions expired, %llu "
				    "connection errors, %llu operations sent again, %llu writes "
				    "under a lost lock not sent\n",
				    zc.losses, zc.expirations, zc.connect_errors, zc.resent,
				    zc.lock_lost);
	}
	{
		struct zk_op_counts oc;
		char line[512];

		zk_op_counts(lc->zk, &oc);
		zk_op_counts_format(&oc, line, sizeof(line));
		evbuffer_add_printf(out, "  zk requests: %s\n", line);
	}
	{
		unsigned items;
		double ms;

		zk_dispatch_max(lc->zk, 1, &items, &ms);
		evbuffer_add_printf(out,
				    "  loop since the last dump: longest zk dispatch %.1f ms (%u "
				    "replies and events), longest assign pass %.1f ms\n",
				    ms, items, lc->assign_max * 1000.0);
		lc->assign_max = 0;
	}
	evbuffer_add_printf(
	    out,
	    "  counters: accepted %llu fulfilled %llu declined %llu failed %llu "
	    "deleted %llu\n",
	    (unsigned long long)lc->counters.accepted, (unsigned long long)lc->counters.fulfilled,
	    (unsigned long long)lc->counters.declined, (unsigned long long)lc->counters.failed,
	    (unsigned long long)lc->counters.deleted);
	evbuffer_add_printf(
	    out,
	    "  request locks: attempts %llu lost %llu; provider lock rounds %llu "
	    "(taken %llu times, %llu overlapping); peer-takeover-delay %gs; "
	    "nodes made with the accept for %llu requests\n",
	    (unsigned long long)lc->counters.req_lock_attempts,
	    (unsigned long long)lc->counters.req_lock_lost, (unsigned long long)lc_quota_rounds(lc),
	    (unsigned long long)lc_quota_taken(lc), (unsigned long long)lc_quota_overlapped(lc),
	    lc->settings.peer_takeover_delay, (unsigned long long)lc->counters.accept_launched);
	evbuffer_add_printf(out,
			    "  timers: cleanup every %.0fs, deletion every %.0fs, "
			    "request locks kept %.0fs\n",
			    lc->settings.cleanup_interval, lc->settings.delete_interval,
			    lc->settings.request_lock_cleanup_age);
	evbuffer_add_printf(
	    out,
	    "  deletion passes for node events: %llu deferred %.1fs, %llu at once "
	    "(a pool paused at quota, or a driver whose deletions free what requests reuse)\n",
	    (unsigned long long)lc->counters.delete_deferred, LC_DELETE_DEFER,
	    (unsigned long long)lc->counters.delete_at_once);
	for (i = 0; i < lc->prov.n_pools; i++) {
		struct lc_pool *pool = &lc->prov.pools[i];
		evbuffer_add_printf(out, "  pool %s (%s)%s: %d requests in hand\n", pool->name,
				    pool->launcher_id, pool->paused ? " PAUSED" : "",
				    pool->n_handlers);
		TAILQ_FOREACH(h, &pool->handlers, entry)
		{
			size_t k;
			evbuffer_add_printf(out,
					    "    request %s state %d age %.1fs nodes:", h->req_id,
					    h->state, lc_monotonic() - h->started);
			for (k = 0; k < h->n_nodes; k++)
				evbuffer_add_printf(out, " %s=%s(%d)", h->nodes[k].label,
						    h->nodes[k].node_id ? h->nodes[k].node_id : "-",
						    h->nodes[k].state);
			if (h->chosen_az != NULL)
				evbuffer_add_printf(out, " az %s%s", h->chosen_az,
						    h->az_firm ? "" : " (tentative)");
			evbuffer_add_printf(out, "\n");
		}
	}
	evbuffer_add_printf(out, "  busy nodes: %zu\n", strset_count(lc->busy));
	if (lc->prov.dp != NULL && lc->prov.drv->dump != NULL)
		lc->prov.drv->dump(lc->prov.dp, out);
}

/* ---- writes of records the caches hold ------------------------------------ */

/*
 * The launcher's writes of nodes and requests go through here, so that its
 * caches take what was written from the write's own reply instead of
 * reading it back when the watch tells of the change (issue 25: two reads
 * per request; zk_cache_write_begin).
 */
struct own_data {
	char *name; /* the child, in cache */
	char *data; /* a copy of the bytes written; NULL when obj stands for them */
	int len;
	int nodes; /* lc->nodes, else lc->requests (looked up at the reply) */
	/* a sequential create of a node in a batch (name NULL, data kept):
	 * zk_cache_create_begin was called (own_ops_begin) */
	int create;
	/* the cache's object for what was written (a struct np_node_sum, or a
	 * struct np_request), made from a copy of the record the writer
	 * encoded, so that the cache need not decode the bytes back;
	 * handed over to it at the reply (zk_cache_write_end); NULL: none */
	void *obj;
};

struct own_set {
	struct launcher *lc;
	struct own_data d;
	zk_stat_cb cb;
	void *arg;
};

/* The records of a batch of ops (a multi, or a lock's ops), one per op
 * (name NULL: not a cached record); first member of own_multi/own_lock. */
struct own_ops {
	struct launcher *lc;
	struct own_data *d;
	int n;
};

struct own_multi {
	struct own_ops ops;
	zk_multi_cb cb;
	void *arg;
};

/* The cache holding path's record (name: its child name), or NULL. */
static struct zk_cache *
own_cache(struct launcher *lc, const char *path, const char **name, int *nodes)
{
	static const char np[] = "/nodepool/nodes/", rp[] = "/nodepool/requests/";
	const char *rest;

	if (strncmp(path, np, sizeof(np) - 1) == 0) {
		rest = path + sizeof(np) - 1;
		*nodes = 1;
	} else if (strncmp(path, rp, sizeof(rp) - 1) == 0) {
		rest = path + sizeof(rp) - 1;
		*nodes = 0;
	} else {
		return NULL;
	}
	if (*rest == '\0' || strchr(rest, '/') != NULL)
		return NULL;
	*name = rest;
	return *nodes ? lc->nodes : lc->requests;
}

/*
 * The cache object for record (a struct np_node for a node's path, a
 * struct np_request for a request's): a copy named name (the id is the
 * znode's name, not in the body; a new node's record has none), as the
 * cache's codec would decode it from the record's encoding (encode then
 * decode gives back the same record: every field, unknown keys and odd
 * values kept verbatim, times to 17 digits; test_model's
 * dup_stands_for_a_decode_of_its_encoding). NULL without a record (then
 * the bytes are decoded as before).
 */
static void *
own_obj(const struct launcher *lc, int nodes, const char *name, const void *record)
{
	if (record == NULL)
		return NULL;
	if (nodes) {
		struct np_node *n = np_node_dup(record);
		free(n->id);
		n->id = xstrdup(name);
		return node_cache_obj(lc, n);
	} else {
		struct np_request *r = np_request_dup(record);
		free(r->id);
		r->id = xstrdup(name);
		return r;
	}
}

static void
own_obj_free(int nodes, void *obj)
{
	if (nodes)
		np_node_sum_free(obj);
	else
		np_request_free(obj);
}

/* record: what data encodes (own_obj), or NULL. */
static void
own_begin(struct launcher *lc, struct own_data *d, const char *path, const void *data, int len,
	  const void *record)
{
	const char *name;
	struct zk_cache *c = own_cache(lc, path, &name, &d->nodes);

	if (c == NULL || len < 0)
		return;
	d->name = xstrdup(name);
	d->obj = data != NULL ? own_obj(lc, d->nodes, name, record) : NULL;
	if (d->obj == NULL) {
		d->data = xmalloc((size_t)len + 1);
		if (len > 0)
			memcpy(d->data, data, (size_t)len);
	}
	d->len = len;
	zk_cache_write_begin(c, name);
}

/* Frees what own_begin copied (nothing told to the cache). */
static void
own_data_clear(struct own_data *d)
{
	free(d->name);
	free(d->data);
	if (d->obj != NULL)
		own_obj_free(d->nodes, d->obj);
	d->name = d->data = NULL;
	d->obj = NULL;
}

static void
own_end(struct launcher *lc, struct own_data *d, int ok, int64_t mzxid, int32_t version)
{
	struct zk_cache *c = d->nodes ? lc->nodes : lc->requests;

	if (d->name == NULL)
		return;
	if (c != NULL) {
		zk_cache_write_end(c, d->name, ok, d->data, d->len, d->obj, mzxid, version);
		d->obj = NULL; /* the cache's now */
	}
	own_data_clear(d);
}

static void
own_set_cleanup(void *ctx)
{
	struct own_set *o = ctx;

	own_data_clear(&o->d);
}

static void
own_set_done(int rc, const struct zk_stat *st, void *arg)
{
	struct own_set *o = arg;
	struct launcher *lc = o->lc;
	zk_stat_cb cb = o->cb;
	void *cbarg = o->arg;

	own_end(lc, &o->d, rc == ZOK && st != NULL, st != NULL ? st->mzxid : 0,
		st != NULL ? st->version : 0);
	lc_ctx_free(lc, o);
	if (cb != NULL)
		cb(rc, st, cbarg);
}

void
lc_set_record_under(struct launcher *lc, struct zk_lock *const *locks, int nlocks, const char *path,
		    const void *data, int len, const void *record, int version, zk_stat_cb cb,
		    void *arg)
{
	struct own_set *o = lc_ctx_new(lc, sizeof(*o), own_set_cleanup);

	o->lc = lc;
	o->cb = cb;
	o->arg = arg;
	own_begin(lc, &o->d, path, data, len, record);
	zk_set_under(lc->zk, locks, nlocks, path, data, len, version, own_set_done, o);
}

void
lc_set_under(struct launcher *lc, struct zk_lock *const *locks, int nlocks, const char *path,
	     const void *data, int len, int version, zk_stat_cb cb, void *arg)
{
	lc_set_record_under(lc, locks, nlocks, path, data, len, NULL, version, cb, arg);
}

/* Starts the records of ops[0..count) (the cached ones among the sets). */
static void
own_ops_begin(struct own_ops *b, struct launcher *lc, const struct zk_multi_op *ops, int count)
{
	int i;

	b->lc = lc;
	b->n = count > 0 ? count : 0;
	b->d = xcalloc((size_t)(b->n ? b->n : 1), sizeof(*b->d));
	for (i = 0; i < b->n; i++) {
		if (ops[i].type == ZK_MULTI_SET)
			own_begin(lc, &b->d[i], ops[i].path, ops[i].data, ops[i].len,
				  ops[i].record);
		else if (ops[i].type == ZK_MULTI_CREATE && (ops[i].flags & ZOO_SEQUENCE) &&
			 strcmp(ops[i].path, "/nodepool/nodes/") == 0 && ops[i].len >= 0) {
			/* a node made in the batch (issue 25: a launch's INIT
			 * node in the request's accept): as lc_create_node */
			b->d[i].create = 1;
			b->d[i].data = xmalloc((size_t)ops[i].len + 1);
			if (ops[i].len > 0)
				memcpy(b->d[i].data, ops[i].data, (size_t)ops[i].len);
			b->d[i].len = ops[i].len;
			zk_cache_create_begin(lc->nodes);
		}
	}
}

/*
 * The node creates of a batch end (zk_cache_create_end) with the created
 * child's name and its stat: version 0, and the mzxid the batch's sets
 * report, since a multi is one transaction, one zxid for every op in it
 * (its creates' czxid and mzxid among them). A batch without a set, or
 * whose results are unknown (not applied, an answer lost), ends them
 * without a name: the cache reads the node as any.
 */
static void
own_creates_end(struct own_ops *b, int applied, int count, const struct zk_multi_result *res)
{
	int64_t zxid = 0;
	int i;
	struct zk_stat st;
	const char *name;

	for (i = 0; applied && res != NULL && i < count && i < b->n; i++)
		if (res[i].rc == ZOK && res[i].mzxid != 0)
			zxid = res[i].mzxid;
	for (i = 0; i < b->n; i++) {
		if (!b->d[i].create)
			continue;
		name = NULL;
		if (zxid != 0 && i < count && res[i].rc == ZOK && res[i].path != NULL &&
		    (name = strrchr(res[i].path, '/')) != NULL)
			name++;
		memset(&st, 0, sizeof(st));
		st.czxid = st.mzxid = zxid;
		zk_cache_create_end(b->lc->nodes, name, b->d[i].data, b->d[i].len, NULL,
				    name != NULL ? &st : NULL);
		free(b->d[i].data);
		b->d[i].data = NULL;
		b->d[i].create = 0;
	}
}

/* Ends them with the ops' results (applied: the batch was written; res[0..count)). */
static void
own_ops_end(struct own_ops *b, int applied, int count, const struct zk_multi_result *res)
{
	int i, ok;

	own_creates_end(b, applied, count, res);
	for (i = 0; i < b->n; i++) {
		ok = applied && res != NULL && i < count && res[i].rc == ZOK && res[i].mzxid != 0;
		own_end(b->lc, &b->d[i], ok, ok ? res[i].mzxid : 0, ok ? res[i].version : 0);
	}
	free(b->d);
	b->d = NULL;
	b->n = 0;
}

/* lc_ctx cleanup of an own_multi or own_lock (both start with own_ops). */
static void
own_ops_cleanup(void *ctx)
{
	struct own_ops *b = ctx;
	int i;

	for (i = 0; i < b->n; i++)
		own_data_clear(&b->d[i]);
	free(b->d);
}

static void
own_multi_done(int rc, int count, const struct zk_multi_result *res, void *arg)
{
	struct own_multi *o = arg;
	struct launcher *lc = o->ops.lc;
	zk_multi_cb cb = o->cb;
	void *cbarg = o->arg;

	own_ops_end(&o->ops, rc == ZOK, count, res);
	lc_ctx_free(lc, o);
	if (cb != NULL)
		cb(rc, count, res, cbarg);
}

void
lc_multi_under(struct launcher *lc, struct zk_lock *const *locks, int nlocks,
	       const struct zk_multi_op *ops, int count, zk_multi_cb cb, void *arg)
{
	struct own_multi *o = lc_ctx_new(lc, sizeof(*o), own_ops_cleanup);

	o->cb = cb;
	o->arg = arg;
	own_ops_begin(&o->ops, lc, ops, count);
	zk_multi_under(lc->zk, locks, nlocks, ops, count, own_multi_done, o);
}

struct own_lock {
	struct own_ops ops;
	zk_lock_cb cb;
	void *arg;
};

static void
own_lock_done(struct zk_lock *lock, int rc, void *arg)
{
	struct own_lock *o = arg;
	struct launcher *lc = o->ops.lc;
	zk_lock_cb cb = o->cb;
	void *cbarg = o->arg;
	const struct zk_multi_result *res = NULL;
	int n = 0, applied = rc == ZOK && zk_lock_applied(lock, &res, &n);

	own_ops_end(&o->ops, applied, n, res);
	lc_ctx_free(lc, o);
	if (cb != NULL)
		cb(lock, rc, cbarg);
}

void
lc_lock_acquire_with(struct launcher *lc, struct zk_lock *lock, const struct zk_multi_op *ops,
		     int count, zk_lock_cb cb, void *arg)
{
	struct own_lock *o = lc_ctx_new(lc, sizeof(*o), own_ops_cleanup);

	o->cb = cb;
	o->arg = arg;
	own_ops_begin(&o->ops, lc, ops, count);
	zk_lock_acquire_with(lock, 0, ops, count, own_lock_done, o);
}

/* ---- node writes ---------------------------------------------------------- */

void
lc_store_node(struct launcher *lc, const struct np_node *n, struct zk_lock *lock, zk_stat_cb cb,
	      void *arg)
{
	char path[128];
	size_t len;
	char *json = np_node_encode(n, &len);

	snprintf(path, sizeof(path), "/nodepool/nodes/%s", n->id);
	lc_set_record_under(lc, &lock, lock != NULL, path, json, (int)len, n, -1, cb, arg);
	free(json);
}

/* A node being made: what the node cache takes from the create's reply
 * instead of reading the node back (zk_cache_create_begin). */
struct own_create {
	struct launcher *lc;
	int len;	     /* of the record's encoding */
	struct np_node *rec; /* a copy of the record, its id set from the reply */
	zk_string_cb cb;
	void *arg;
};

static void
own_create_cleanup(void *ctx)
{
	struct own_create *o = ctx;

	np_node_free(o->rec);
}

/* The reply: the cache announces the node from the copy (own_obj's
 * reasoning), named as the reply says, without decoding what was sent. */
static void
own_create_done(int rc, const char *path, const struct zk_stat *st, void *arg)
{
	struct own_create *o = arg;
	struct launcher *lc = o->lc;
	zk_string_cb cb = o->cb;
	void *cbarg = o->arg;
	const char *name = rc == ZOK && path != NULL ? strrchr(path, '/') : NULL;
	void *obj = NULL;

	if (name != NULL && o->rec != NULL && lc->nodes != NULL) {
		free(o->rec->id);
		o->rec->id = xstrdup(name + 1);
		obj = node_cache_obj(lc, o->rec);
		o->rec = NULL;
	}
	zk_cache_create_end(lc->nodes, name != NULL ? name + 1 : NULL, NULL, o->len, obj, st);
	np_node_free(o->rec);
	o->rec = NULL;
	lc_ctx_free(lc, o);
	if (cb != NULL)
		cb(rc, path, cbarg);
}

void
lc_create_node(struct launcher *lc, const struct np_node *n, zk_string_cb cb, void *arg)
{
	struct own_create *o = lc_ctx_new(lc, sizeof(*o), own_create_cleanup);
	size_t len = 0;
	char *data = np_node_encode(n, &len);

	o->lc = lc;
	o->cb = cb;
	o->arg = arg;
	o->len = data != NULL ? (int)len : 0;
	o->rec = data != NULL ? np_node_dup(n) : NULL; /* NULL: empty data sent */
	zk_cache_create_begin(lc->nodes);
	zk_create2(lc->zk, "/nodepool/nodes/", data, o->len, ZOO_SEQUENCE, 1, own_create_done, o);
	free(data);
}

struct del_ctx {
	struct launcher *lc;
	struct np_node *node;
	struct zk_lock *lock;
};

static void
node_record_deleted(int rc, void *arg)
{
	struct del_ctx *d = arg;
	struct launcher *lc = d->lc;

	if (rc != ZOK && rc != ZNONODE)
		lc_set_error(lc, "deleting node %s: %s", d->node->id, zk_strerror(rc));
	else {
		lc->counters.deleted++;
		log_debug("node %s deleted", d->node->id);
		lc_node_gone(lc, d->node->id);
		if (lc->prov.dp != NULL && lc->prov.drv->node_deleted != NULL &&
		    node_is_ours(lc, d->node))
			lc->prov.drv->node_deleted(lc->prov.dp, d->node);
	}
	/* The lock contender went with the record. */
	zk_lock_free(d->lock);
	lc_busy_del(lc, d->node->id);
	np_node_free(d->node);
	lc_ctx_free(lc, d);
	notify_change(lc);
}

static void
del_ctx_cleanup(void *p)
{
	struct del_ctx *d = p;

	zk_lock_free(d->lock);
	np_node_free(d->node);
}

/* As upstream's deleteNode: write state `deleted`, then remove the znode
 * recursively (its lock dir and whatever contenders are in it). */
static void
delete_node_tree(struct del_ctx *d)
{
	struct launcher *lc = d->lc;
	char path[128];

	np_node_set_state(d->node, NP_NODE_DELETED);
	lc_store_node(lc, d->node, d->lock, NULL, NULL);
	snprintf(path, sizeof(path), "/nodepool/nodes/%s", d->node->id);
	zk_delete_under(lc->zk, &d->lock, d->lock != NULL, path, -1, 1, node_record_deleted, d);
}

static void
node_multi_deleted(int rc, int count, const struct zk_multi_result *res, void *arg)
{
	struct del_ctx *d = arg;

	if (rc == ZOK) {
		zk_lock_disown(d->lock); /* our contender went with the node */
		node_record_deleted(ZOK, d);
		return;
	}
	/* Someone else's contender in the lock dir (ZNOTEMPTY), or an
	 * answer lost with the connection: upstream's way, which copes. */
	log_debug("node %s: one-multi delete: %s; recursively", d->node->id, zk_strerror(rc));
	delete_node_tree(d);
}

/*
 * Takes n and lock. Held (the usual case, a launched node whose instance
 * is gone): our contender, the lock dir and the node go in one multi
 * (issue 25: upstream's `deleted` write and recursive delete cost the
 * server seven requests a node, three of them listings). The `deleted`
 * write exists so that nobody mistakes the node for unlocked between the
 * lock dir's removal and the node's; the transaction has no such moment.
 * Refused (another contender is in the lock dir: the dir is not empty),
 * upstream's sequence runs.
 */
void
lc_delete_node_record(struct launcher *lc, struct np_node *n, struct zk_lock *lock)
{
	struct del_ctx *d = lc_ctx_new(lc, sizeof(*d), del_ctx_cleanup);
	const char *me = zk_lock_contender(lock);
	char node[128], dir[160], mine[320];
	struct zk_multi_op ops[3];

	d->lc = lc;
	d->node = n;
	d->lock = lock;
	if (me == NULL) {
		delete_node_tree(d);
		return;
	}
	snprintf(node, sizeof(node), "/nodepool/nodes/%s", n->id);
	snprintf(dir, sizeof(dir), "%s/lock", node);
	snprintf(mine, sizeof(mine), "%s/%s", dir, me);
	memset(ops, 0, sizeof(ops));
	ops[0].type = ZK_MULTI_DELETE;
	ops[0].path = mine;
	ops[0].version = -1;
	ops[1].type = ZK_MULTI_DELETE;
	ops[1].path = dir;
	ops[1].version = -1;
	ops[2].type = ZK_MULTI_DELETE;
	ops[2].path = node;
	ops[2].version = -1;
	np_node_set_state(n, NP_NODE_DELETED);
	lc_multi_under(lc, &d->lock, 1, ops, 3, node_multi_deleted, d);
}

/* ---- driver services ------------------------------------------------------ */
/*
 * The launcher's side of the driver host services (drivers/host.h): every
 * slot filled, registered by main.c at start. launch_done and store_node
 * are in handler.c, delete_done in cleanup.c.
 */

static struct event_base *
host_event_base(struct drv_host *h)
{
	struct launcher *lc = h->owner;
	return lc->base;
}

static struct zk *
host_zk(struct drv_host *h)
{
	struct launcher *lc = h->owner;
	return lc->zk;
}

static const char *
host_provider_name(struct drv_host *h)
{
	struct launcher *lc = h->owner;
	return lc->prov.name;
}

static const json_t *
host_provider_config(struct drv_host *h)
{
	struct launcher *lc = h->owner;
	return lc->prov.raw;
}

static const struct np_node **drv_nodes_buf;
static size_t drv_nodes_cap;

static size_t
host_provider_nodes(struct drv_host *h, const struct np_node ***out)
{
	struct launcher *lc = h->owner;
	const struct zk_cache_entry *const *ents;
	int i, n = zk_cache_entries(lc->nodes, &ents);
	size_t k = 0;

	if ((size_t)n > drv_nodes_cap) {
		drv_nodes_cap = (size_t)n * 2;
		drv_nodes_buf = realloc(drv_nodes_buf, drv_nodes_cap * sizeof(*drv_nodes_buf));
		if (drv_nodes_buf == NULL)
			abort();
	}
	for (i = 0; i < n; i++) {
		const struct np_node_sum *s = LC_SUM(ents[i]);
		if (sum_is_ours(lc, s) && np_node_sum_full(s) != NULL &&
		    !strset_has(lc->gone, ents[i]->name))
			drv_nodes_buf[k++] = np_node_sum_full(s);
	}
	*out = drv_nodes_buf;
	return k;
}

static const struct np_node *
host_node_get(struct drv_host *h, const char *node_id)
{
	struct launcher *lc = h->owner;

	return strset_has(lc->gone, node_id) ? NULL : lc_node(lc, node_id);
}

static size_t
host_all_nodes(struct drv_host *h, const struct np_node ***out)
{
	struct launcher *lc = h->owner;
	const struct zk_cache_entry *const *ents;
	int i, n = zk_cache_entries(lc->nodes, &ents);
	size_t k = 0;

	if ((size_t)n > drv_nodes_cap) {
		drv_nodes_cap = (size_t)n * 2;
		drv_nodes_buf = realloc(drv_nodes_buf, drv_nodes_cap * sizeof(*drv_nodes_buf));
		if (drv_nodes_buf == NULL)
			abort();
	}
	for (i = 0; i < n; i++) {
		const struct np_node_sum *s = LC_SUM(ents[i]);
		if (s != NULL && np_node_sum_full(s) != NULL &&
		    !strset_has(lc->gone, ents[i]->name))
			drv_nodes_buf[k++] = np_node_sum_full(s);
	}
	*out = drv_nodes_buf;
	return k;
}

static const struct np_request *
host_request_get(struct drv_host *h, const char *request_id)
{
	return lc_request(h->owner, request_id);
}

static int
host_in_sync(struct drv_host *h)
{
	struct launcher *lc = h->owner;
	return lc_in_sync(lc);
}

static unsigned
host_sync_epoch(struct drv_host *h)
{
	struct launcher *lc = h->owner;
	return lc->sync_epoch;
}

static int
host_node_unreadable(struct drv_host *h, const char *id)
{
	struct launcher *lc = h->owner;
	const struct zk_cache_entry *e =
	    lc->nodes != NULL && id != NULL ? zk_cache_get(lc->nodes, id) : NULL;

	return e != NULL && e->obj == NULL && e->len > 0;
}

static size_t
host_provider_peers(struct drv_host *h, char *who, size_t wholen)
{
	struct launcher *lc = h->owner;
	const struct zk_cache_entry *const *ents;
	int i, n = lc->pool_components ? zk_cache_entries(lc->pool_components, &ents) : 0;
	int64_t me = zk_session_id(lc->zk);
	size_t k = 0;

	for (i = 0; i < n; i++) {
		const struct np_component *pc = ents[i]->obj;
		int64_t owner = zk_cache_ephemeral_owner(lc->pool_components, ents[i]);

		if (pc == NULL || pc->provider_name == NULL ||
		    strcmp(pc->provider_name, lc->prov.name) != 0 || owner == me || owner == 0)
			continue;
		if (k++ == 0 && who != NULL && wholen > 0)
			snprintf(who, wholen, "%s", pc->hostname ? pc->hostname : ents[i]->name);
	}
	return k;
}

static int
host_node_locked(struct drv_host *h, const char *node_id)
{
	struct launcher *lc = h->owner;
	const struct zk_cache_entry *e = zk_cache_get(lc->nodes, node_id);

	return (e != NULL && e->locked > 0) || lc_busy(lc, node_id);
}

struct reg_ctx {
	struct launcher *lc;
	void (*done)(const char *node_id, int unknown, void *arg);
	void *arg;
	struct lc_qres *qres; /* sent in a registration round (quota.c) */
};

static void
registered(int rc, const char *path, void *arg)
{
	struct reg_ctx *r = arg;
	const char *id = NULL;
	int unknown = rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONEXPIRED;

	if (rc == ZOK && path != NULL) {
		id = strrchr(path, '/');
		id = id ? id + 1 : path;
	}
	/* the driver keeps its own registrations in flight (static's
	 * pending): an unknown outcome is its to settle */
	lc_quota_create_done(r->lc, r->qres, id, unknown);
	if (id != NULL) {
		log_debug("registered node %s", id);
	} else
		lc_set_error(r->lc, "registering node: %s", zk_strerror(rc));
	if (r->done != NULL)
		r->done(id, unknown, r->arg);
	lc_ctx_free(r->lc, r);
}

static int
host_registration_round(struct drv_host *h)
{
	struct launcher *lc = h->owner;

	if (lc_quota_open(lc))
		return 1;
	lc_quota_want(lc);
	return 0;
}

static int
host_duty_mine(struct drv_host *h, const char *key)
{
	return lc_duty_mine(h->owner, key);
}

static void
host_register_node(struct drv_host *h, struct np_node *n,
		   void (*done)(const char *node_id, int unknown, void *arg), void *arg)
{
	struct launcher *lc = h->owner;
	struct reg_ctx *r = lc_ctx_new(lc, sizeof(*r), NULL);

	r->lc = lc;
	r->done = done;
	r->arg = arg;
	r->qres = lc_quota_open(lc) ? lc_quota_create_sent(lc, LC_QRES_REGISTER, n, NULL) : NULL;
	lc_create_node(lc, n, registered, r);
	np_node_free(n);
}

struct upd_ctx {
	struct launcher *lc;
	struct np_node *node;
	struct zk_lock *lock;
	int deregister;
};

static void
upd_finish(struct upd_ctx *u)
{
	lc_busy_del(u->lc, u->node->id);
	np_node_free(u->node);
	lc_ctx_free(u->lc, u);
}

static void
upd_cleanup(void *p)
{
	struct upd_ctx *u = p;

	zk_lock_free(u->lock);
	np_node_free(u->node);
}

static void
upd_stored(int rc, const struct zk_stat *st, void *arg)
{
	struct upd_ctx *u = arg;

	zk_lock_free(u->lock); /* releases */
	upd_finish(u);
}

static void
upd_read(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct upd_ctx *u = arg;
	struct np_node *cur = NULL;
	char err[128];

	if (rc != ZOK || np_node_decode(u->node->id, data, (size_t)len, &cur, err, sizeof(err)) ||
	    cur->state != NP_NODE_READY || cur->allocated_to != NULL) {
		np_node_free(cur);
		zk_lock_free(u->lock);
		upd_finish(u);
		return;
	}
	np_node_free(cur);
	if (u->deregister) {
		/* lc_delete_node_record takes the node and the lock and clears
		 * the busy mark when done. */
		struct launcher *lc = u->lc;
		struct np_node *n = u->node;
		struct zk_lock *lock = u->lock;
		lc_ctx_free(lc, u);
		log_info("static node %s (%s) deregistered", n->id,
			 n->hostname ? n->hostname : "?");
		np_node_set_state(n, NP_NODE_DELETING);
		lc_delete_node_record(lc, n, lock);
		return;
	}
	lc_store_node(u->lc, u->node, u->lock, upd_stored, u);
}

static void
upd_locked(struct zk_lock *lock, int rc, void *arg)
{
	struct upd_ctx *u = arg;
	char path[128];

	if (rc != ZOK) {
		zk_lock_free(u->lock);
		upd_finish(u);
		return;
	}
	snprintf(path, sizeof(path), "/nodepool/nodes/%s", u->node->id);
	zk_get(u->lc->zk, path, NULL, NULL, upd_read, u);
}

static void
host_update_or_deregister(struct launcher *lc, struct np_node *n, int deregister)
{
	struct upd_ctx *u;
	char path[128];

	if (lc_busy(lc, n->id) || host_node_locked(&lc->host, n->id)) {
		np_node_free(n);
		return;
	}
	u = lc_ctx_new(lc, sizeof(*u), upd_cleanup);
	u->lc = lc;
	u->node = n;
	u->deregister = deregister;
	lc_busy_add(lc, n->id);
	snprintf(path, sizeof(path), "/nodepool/nodes/%s/lock", n->id);
	u->lock = zk_lock_new(lc->zk, path, NULL, ZK_LOCK_NO_RESURRECT);
	zk_lock_acquire(u->lock, 0, upd_locked, u);
}

static void
host_update_node(struct drv_host *h, struct np_node *n)
{
	struct launcher *lc = h->owner;
	host_update_or_deregister(lc, n, 0);
}

static void
host_deregister_node(struct drv_host *h, const char *node_id)
{
	struct launcher *lc = h->owner;
	const struct np_node *cur = lc_node(lc, node_id);

	if (cur == NULL)
		return;
	host_update_or_deregister(lc, np_node_dup(cur), 1);
}

const struct drv_host_ops lc_host_ops = {
    .event_base = host_event_base,
    .zk = host_zk,
    .provider_name = host_provider_name,
    .provider_config = host_provider_config,
    .provider_nodes = host_provider_nodes,
    .node_unreadable = host_node_unreadable,
    .provider_peers = host_provider_peers,
    .registration_round = host_registration_round,
    .duty_mine = host_duty_mine,
    .node_locked = host_node_locked,
    .node_get = host_node_get,
    .all_nodes = host_all_nodes,
    .request_get = host_request_get,
    .store_node = lc_host_store_node,
    .register_node = host_register_node,
    .in_sync = host_in_sync,
    .sync_epoch = host_sync_epoch,
    .update_node = host_update_node,
    .deregister_node = host_deregister_node,
    .launch_done = lc_host_launch_done,
    .delete_done = lc_host_delete_done,
};
