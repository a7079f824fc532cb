/*
 * One node request in hand, as upstream Nodepool's NodeRequestHandler
 * (driver/__init__.py: run, _waitForNodeSet, poll, decline) — reference
 * sections 2.3 and 2.4 — as an event-driven state machine.
 *
 * Life of a handler: take the request lock (non-blocking) -> re-read the
 * request under it -> decline, or set it `pending` -> collect the nodeset
 * (reuse READY nodes of this pool: lock, re-read, driver reuse check,
 * allocate; or launch new ones) -> fulfil (nodes in node_types order,
 * unlock nodes keeping allocated_to, unlock the request) or decline.
 * Cancellation (the request znode deleted) is handled at every step: nodes
 * we allocated are deallocated and unlocked, launches run to completion and
 * their nodes become reusable. For cloud drivers the nodeset is kept in
 * one availability zone, as upstream's StateMachineHandler (see "AZ
 * grouping" below).
 *
 * Every ZooKeeper operation holds a reference (h->ops); a handler that is
 * finished while operations are in flight is detached and freed by the
 * last completion.
 */
#include "worker/launcher.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "lib/core/log.h"
#include "lib/ops/metrics.h"
#include "lib/core/strset.h"

struct hop {
	struct handler *h;
	size_t idx; /* hnode index, or (size_t)-1 */
};

static void run(struct handler *h);
static void poll_handler(struct handler *h);
static void reuse_failed(struct handler *h, size_t i);
static int tenant_has_room(struct handler *h, size_t i);
static void label_need(struct launcher *lc, const struct lc_pool *pool, const char *label,
		       struct drv_quota *q);
static void vanish_step(struct handler *h);
static void find_own_create(struct handler *h, size_t i);
static void lc_handler_finish(struct handler *h);

static struct hop *
hop_new(struct handler *h, size_t idx)
{
	struct hop *o = lc_ctx_new(h->lc, sizeof(*o), NULL);

	o->h = h;
	o->idx = idx;
	h->ops++;
	return o;
}

static void
lc_handler_destroy(struct handler *h)
{
	size_t i;

	for (i = 0; i < h->n_nodes; i++) {
		struct hnode *hn = &h->nodes[i];
		if (hn->node_id != NULL && hn->state != HN_WANTED)
			lc_busy_del(h->lc, hn->node_id);
		/* a create whose outcome never came (a lost connection): its
		 * node may exist; the next round waits for the view */
		lc_quota_create_done(h->lc, hn->qres, NULL, 1);
		zk_lock_free(hn->lock);
		np_node_free(hn->node);
		free(hn->node_id);
		free(hn->label);
		free(hn->early_error);
	}
	free(h->nodes);
	zk_lock_free(h->req_lock);
	np_request_free(h->req);
	free(h->req_id);
	free(h->decline_reason);
	free(h->chosen_az);
	free(h);
}

/* Drop the op reference; returns 1 if the handler is gone or finished
 * (callers then return at once). */
static int
hop_done(struct hop *o, struct handler **hp, size_t *idxp)
{
	struct handler *h = o->h;

	if (idxp != NULL)
		*idxp = o->idx;
	lc_ctx_free(h->lc, o);
	h->ops--;
	*hp = h;
	if (h->state == H_DONE) {
		if (h->ops == 0) {
			if (h->detached)
				TAILQ_REMOVE(&h->lc->zombies, h, entry);
			lc_handler_destroy(h);
		}
		return 1;
	}
	return 0;
}

struct handler *
lc_find_handler(struct launcher *lc, const char *req_id)
{
	size_t i;
	struct handler *h;

	for (i = 0; i < lc->prov.n_pools; i++)
		TAILQ_FOREACH(h, &lc->prov.pools[i].handlers, entry)
	if (strcmp(h->req_id, req_id) == 0)
		return h;
	return NULL;
}

static void
update_pool_paused(struct lc_pool *pool)
{
	struct handler *h;
	int paused = 0, was = pool->paused;

	TAILQ_FOREACH(h, &pool->handlers, entry)
	if (h->state == H_PAUSED)
		paused = 1;
	pool->paused = paused;
	if (paused && !was)
		/* the used nodes' deletions, deferred, free its room: now */
		lc_delete_deferred_now(pool->prov->lc);
	if (pool->paused != pool->reported_paused)
		lc_pool_update_component(pool);
}

struct handler *
lc_handler_new(struct lc_pool *pool, const char *req_id)
{
	struct handler *h = calloc(1, sizeof(*h));

	if (h == NULL)
		abort();
	h->pool = pool;
	h->lc = pool->prov->lc;
	h->req_id = strdup(req_id);
	h->started = lc_monotonic();
	TAILQ_INSERT_TAIL(&pool->handlers, h, entry);
	pool->n_handlers++;
	return h;
}

/* Detach from the pool; free now or when the last operation completes. */
static void
lc_handler_finish(struct handler *h)
{
	struct lc_pool *pool = h->pool;
	struct launcher *lc = h->lc;
	size_t i;

	if (h->state == H_DONE)
		return;
	h->state = H_DONE;
	TAILQ_REMOVE(&pool->handlers, h, entry);
	pool->n_handlers--;
	for (i = 0; i < h->n_nodes; i++) {
		struct hnode *hn = &h->nodes[i];
		if (hn->launching && lc->prov.drv->launch_cancel != NULL && lc->prov.dp != NULL) {
			/* our session ended: the node is another launcher's to
			 * adopt, the instance with it (launches survive); not
			 * an early launch, whose instance its record may not
			 * name yet (early_store) */
			if (lc->abandon_launches && lc->prov.drv->launch_abandon != NULL &&
			    !hn->early)
				lc->prov.drv->launch_abandon(lc->prov.dp, &hn->launch);
			else
				lc->prov.drv->launch_cancel(lc->prov.dp, &hn->launch);
			hn->launching = 0;
			/* no completion will come: drop its reference */
			lc_ctx_free(lc, hn->launch.owner);
			hn->launch.owner = NULL;
			h->ops--;
		} else if (hn->early && hn->early_done && lc->prov.dp != NULL) {
			/* an early launch that ended before its lock's answer:
			 * nobody will take its instance over */
			hn->early_done = 0;
			lc_cleanup_delete_instance(lc, np_node_dup(hn->node));
		}
	}
	if (h->ops > 0) {
		h->detached = 1;
		TAILQ_INSERT_TAIL(&lc->zombies, h, entry);
	} else
		lc_handler_destroy(h);
	update_pool_paused(pool);
	lc_schedule_assign(lc);
	if (lc->on_change != NULL)
		lc->on_change(lc);
}

void
lc_handler_reap_zombies(struct launcher *lc)
{
	struct handler *h;

	while ((h = TAILQ_FIRST(&lc->zombies)) != NULL) {
		TAILQ_REMOVE(&lc->zombies, h, entry);
		lc_handler_destroy(h);
	}
}

/* External teardown (session expiry, stop): no further writes. */
void
lc_handler_free(struct handler *h)
{
	lc_handler_finish(h);
}

int
lc_handler_active_launches(const struct handler *h)
{
	size_t i;
	int n = 0;

	for (i = 0; i < h->n_nodes; i++)
		if (h->nodes[i].state == HN_CREATING || h->nodes[i].state == HN_BUILDING)
			n++;
	return n;
}

static int
hn_in_flight(const struct hnode *hn)
{
	return hn->state == HN_LOCKING || hn->state == HN_CHECKING || hn->state == HN_CREATING ||
	       hn->state == HN_BUILDING || hn->state == HN_ALLOC_WAIT;
}

static void
req_path(const struct handler *h, char *buf, size_t len)
{
	snprintf(buf, len, "/nodepool/requests/%s", h->req_id);
}

static void
node_lock_path(const char *id, char *buf, size_t len)
{
	snprintf(buf, len, "/nodepool/nodes/%s/lock", id);
}

/* ---- releasing ------------------------------------------------------------ */

static void
req_lock_released(int rc, void *arg)
{
	struct hop *o = arg;
	struct handler *h;

	if (hop_done(o, &h, NULL))
		return;
	lc_handler_finish(h);
}

/* Release the request lock, then finish. */
static void
release_request_lock(struct handler *h)
{
	if (h->req_lock != NULL && zk_lock_is_held(h->req_lock))
		zk_lock_release(h->req_lock, req_lock_released, hop_new(h, (size_t)-1));
	else
		lc_handler_finish(h);
}

/* Unlock a node of the nodeset (and forget it), optionally clearing its
 * allocation first. The node stays in ZooKeeper. */
static void
hn_release(struct handler *h, size_t i, int clear_allocation)
{
	struct hnode *hn = &h->nodes[i];

	if (hn->node != NULL && clear_allocation && hn->node->allocated_to != NULL &&
	    (hn->state == HN_READY || hn->state == HN_BUILDING)) {
		free(hn->node->allocated_to);
		hn->node->allocated_to = NULL;
		lc_store_node(h->lc, hn->node, hn->lock, NULL, NULL);
	}
	/* Fire-and-forget release: one session orders the store before the
	 * contender's deletion, so nobody sees the node unlocked first. */
	zk_lock_free(hn->lock);
	hn->lock = NULL;
	if (hn->node_id != NULL)
		lc_busy_del(h->lc, hn->node_id);
	hn->state = HN_WANTED;
	np_node_free(hn->node);
	hn->node = NULL;
	free(hn->node_id);
	hn->node_id = NULL;
}

/* ---- decline (reference 2.4) ----------------------------------------------- */

static void
declined_stored(int rc, const struct zk_stat *st, void *arg)
{
	struct hop *o = arg;
	struct handler *h;

	if (hop_done(o, &h, NULL))
		return;
	if (rc != ZOK && rc != ZNONODE)
		lc_set_error(h->lc, "declining request %s: %s", h->req_id, zk_strerror(rc));
	release_request_lock(h);
}

/* 1 when every registered pool id is in declined_by (or is also, the pool
 * about to decline: NULL for none), as upstream. */
static int
all_pools_declined(struct launcher *lc, const struct np_request *r, const char *also)
{
	const struct zk_cache_entry *const *ents;
	int i, n = zk_cache_entries(lc->pool_components, &ents);

	for (i = 0; i < n; i++) {
		const struct np_component *c = ents[i]->obj;
		if (c == NULL || c->id == NULL)
			continue;
		if (!np_strv_contains(&r->declined_by, c->id) &&
		    (also == NULL || strcmp(also, c->id) != 0))
			return 0;
	}
	return 1;
}

/*
 * Decline: our pool id joins declined_by; the request fails once every
 * registered pool declined, else goes back to `requested` for the others.
 * clear_allocation: 1 for an ordinary decline; 0 after launch failures,
 * where READY siblings stay reserved to the request (as upstream).
 */
static void
decline(struct handler *h, const char *reason, int clear_allocation)
{
	struct launcher *lc = h->lc;
	char path[160];
	char *json;
	size_t i, len;

	double wait = 0;

	/* A pool registration went away lately (its session ended: a
	 * partition or a restart) and may be back in a moment: failing the
	 * request as declined by every pool waits for it. */
	if (lc->pools_removed_at > 0 && all_pools_declined(lc, h->req, h->pool->launcher_id))
		wait = lc->pools_removed_at + lc->zk_timeout - lc_monotonic();
	if (!lc_in_sync(lc) || wait > 0) {
		/* Whether every pool declined is read from the component
		 * cache: not before it is current again (lc_handler_resynced). */
		if (wait > 0)
			lc_schedule_assign_in(lc, wait + 0.05);
		if (h->decline_reason != reason) {
			free(h->decline_reason);
			if ((h->decline_reason = strdup(reason)) == NULL)
				abort();
		}
		h->decline_clear = clear_allocation;
		if (h->state != H_DECLINE_WAIT)
			log_info("request %s: declining (%s) once %s", h->req_id, reason,
				 wait > 0 ? "the pools that went away had time to register again"
					  : "the ZooKeeper view is re-synced");
		h->state = H_DECLINE_WAIT;
		return;
	}
	h->state = H_DECLINING;
	for (i = 0; i < h->n_nodes; i++) {
		struct hnode *hn = &h->nodes[i];
		if (hn->state == HN_READY || hn->state == HN_FAILED)
			hn_release(h, i, clear_allocation && hn->state == HN_READY);
	}
	if (!np_strv_contains(&h->req->declined_by, h->pool->launcher_id))
		np_strv_push(&h->req->declined_by, h->pool->launcher_id);
	if (all_pools_declined(lc, h->req, NULL)) {
		np_request_set_state(h->req, NP_REQ_FAILED);
		lc->counters.failed++;
		log_info("request %s failed: declined by every pool (last: %s: %s)", h->req_id,
			 h->pool->name, reason);
	} else {
		np_request_set_state(h->req, NP_REQ_REQUESTED);
		log_info("request %s declined by pool %s: %s", h->req_id, h->pool->name, reason);
	}
	lc->counters.declined++;
	req_path(h, path, sizeof(path));
	json = np_request_encode(h->req, &len);
	lc_set_under(lc, &h->req_lock, 1, path, json, (int)len, -1, declined_stored,
		     hop_new(h, (size_t)-1));
	free(json);
}

/* The caches re-synced, or an assignment pass runs (a pool registered, or
 * the wait for one is over): declines held back are tried again. */
void
lc_handler_resynced(struct launcher *lc)
{
	struct handler *h, *next;
	size_t i, k;
	char *reason;

	for (i = 0; i < lc->prov.n_pools; i++) {
		for (h = TAILQ_FIRST(&lc->prov.pools[i].handlers); h != NULL; h = next) {
			next = TAILQ_NEXT(h, entry);
			/* creates that had no reply (new_node_created): a
			 * reference held meanwhile, since run() may finish h */
			h->ops++;
			for (k = 0; lc_in_sync(lc) && k < h->n_nodes && h->state != H_DONE; k++) {
				if (h->nodes[k].state == HN_CREATING &&
				    h->nodes[k].create_unknown &&
				    h->nodes[k].create_epoch != lc->sync_epoch)
					find_own_create(h, k);
			}
			h->ops--;
			if (h->state == H_DONE) {
				if (h->ops == 0) {
					if (h->detached)
						TAILQ_REMOVE(&lc->zombies, h, entry);
					lc_handler_destroy(h);
				}
				continue;
			}
			if (h->state != H_DECLINE_WAIT)
				continue;
			reason = h->decline_reason;
			h->decline_reason = NULL;
			decline(h, reason != NULL ? reason : "declined", h->decline_clear);
			free(reason);
		}
	}
}

/* Static at capacity (PAUSE_AT_QUOTA false): upstream leaves the request
 * `pending` and unlocked for the 60 s lost-request cleanup to reset. We put
 * it back to `requested` at once and let it wait for a node. */
static void
release_to_requested(struct handler *h)
{
	char path[160];
	char *json;
	size_t i, len;

	h->state = H_DECLINING;
	for (i = 0; i < h->n_nodes; i++)
		if (h->nodes[i].state == HN_READY)
			hn_release(h, i, 1);
	np_request_set_state(h->req, NP_REQ_REQUESTED);
	np_strv_clear(&h->req->nodes);
	req_path(h, path, sizeof(path));
	json = np_request_encode(h->req, &len);
	lc_set_under(h->lc, &h->req_lock, 1, path, json, (int)len, -1, declined_stored,
		     hop_new(h, (size_t)-1));
	free(json);
	log_debug("request %s returned to requested: nodes busy", h->req_id);
}

/* ---- fulfil --------------------------------------------------------------- */

typedef void (*landed_fn)(struct handler *h, size_t idx, int landed, int rc);
static void disown_locks(struct handler *h);
static void probe_landed(struct handler *h, size_t idx, int rc, landed_fn cb);

static void
fulfilled_landed(struct handler *h, size_t idx, int landed, int rc)
{
	size_t i;

	if (landed) {
		disown_locks(h); /* released by the multi */
		rc = ZOK;
	}
	if (rc == ZNONODE) {
		h->vanished = 1;
		h->state = H_RUNNING;
		vanish_step(h);
		return;
	}
	if (rc != ZOK) {
		lc_set_error(h->lc, "fulfilling request %s: %s", h->req_id, zk_strerror(rc));
		/* leave it pending and locked by nobody: lost-request cleanup
		 * returns it */
	} else {
		h->lc->counters.fulfilled++;
		log_info("request %s fulfilled by pool %s: %zu node(s)", h->req_id, h->pool->name,
			 h->n_nodes);
	}
	for (i = 0; i < h->n_nodes; i++)
		hn_release(h, i, 0); /* keep allocated_to */
	release_request_lock(h);
}

static void
fulfilled_stored(int rc, int count, const struct zk_multi_result *res, void *arg)
{
	struct hop *o = arg;
	struct handler *h;

	if (hop_done(o, &h, NULL))
		return;
	if (rc != ZOK && rc != ZK_LOCK_LOST) {
		probe_landed(h, (size_t)-1, rc, fulfilled_landed);
		return;
	}
	fulfilled_landed(h, (size_t)-1, rc == ZOK, rc);
}

/* The request's lock and every node's (malloc'd; *n set): what a
 * fulfilment is made under. A lock lost meanwhile fails it, as upstream's
 * write after a lost session raises. */
static struct zk_lock **
lc_handler_locks(const struct handler *h, int *n)
{
	struct zk_lock **v = calloc(h->n_nodes + 1, sizeof(*v));
	size_t i;

	if (v == NULL)
		abort();
	*n = 0;
	v[(*n)++] = h->req_lock;
	for (i = 0; i < h->n_nodes; i++)
		v[(*n)++] = h->nodes[i].lock;
	return v;
}

/*
 * The locks' releases ride in the fulfilment's multi (issue 25): the
 * deletion of our contender of the request lock and of every node lock
 * is appended to ops[k..] (paths in bufs, one per lock), and the count
 * of ops added returned. Upstream writes the fulfilment, then unlocks the
 * nodes, then the request, at once and unconditionally: in one
 * transaction Zuul finds the nodes unlocked when it sees the request
 * fulfilled (its lock of each node needs no wait for our release), and
 * the server is spared a request per lock.
 */
static int
unlock_ops(const struct handler *h, struct zk_multi_op *ops, int k, char (*bufs)[320])
{
	int n = 0;
	size_t i;
	const struct zk_lock *l;
	const char *me;

	for (i = 0; i <= h->n_nodes; i++) {
		l = i == 0 ? h->req_lock : h->nodes[i - 1].lock;
		me = zk_lock_contender(l);
		if (me == NULL)
			continue;
		snprintf(bufs[n], sizeof(bufs[n]), "%s/%s", zk_lock_path(l), me);
		memset(&ops[k + n], 0, sizeof(ops[k + n]));
		ops[k + n].type = ZK_MULTI_DELETE;
		ops[k + n].path = bufs[n];
		ops[k + n].version = -1;
		n++;
	}
	return n;
}

/* The multi with unlock_ops was applied: our contenders are gone. */
static void
disown_locks(struct handler *h)
{
	size_t i;

	zk_lock_disown(h->req_lock);
	for (i = 0; i < h->n_nodes; i++)
		zk_lock_disown(h->nodes[i].lock);
}

/*
 * A multi with unlock_ops failed: refused (nothing of it made), or its
 * answer was lost with the connection and the multi, sent again, refused
 * because the first had landed. Our request contender tells which: gone
 * while the lock is still held in this session, only the multi removed
 * it. cb(h, idx, landed, rc) follows (rc: the multi's), under the hop of
 * the probe.
 */
struct landed_probe {
	struct hop *o;
	landed_fn cb;
	int rc; /* the multi's */
};

static void
landed_probed(int rc, const struct zk_stat *st, void *arg)
{
	struct landed_probe *p = arg;
	struct handler *h;
	size_t idx;
	landed_fn cb = p->cb;
	struct hop *o = p->o;
	int mrc = p->rc;

	free(p);
	if (hop_done(o, &h, &idx))
		return;
	cb(h, idx, rc == ZNONODE && zk_lock_is_held(h->req_lock), mrc);
}

static void
probe_landed(struct handler *h, size_t idx, int rc, landed_fn cb)
{
	struct landed_probe *p;
	char path[320];
	const char *me = zk_lock_contender(h->req_lock);

	if (rc == ZK_LOCK_LOST || me == NULL) { /* not sent, or nothing to tell by */
		cb(h, idx, 0, rc);
		return;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		abort();
	p->o = hop_new(h, idx);
	p->cb = cb;
	p->rc = rc;
	snprintf(path, sizeof(path), "%s/%s", zk_lock_path(h->req_lock), me);
	zk_exists(h->lc->zk, path, NULL, NULL, landed_probed, p);
}

/* Upstream's fulfilment: the request written `fulfilled` (its nodes
 * written before), then every lock released; the releases ride in the
 * write's multi (unlock_ops). */
static void
fulfil(struct handler *h)
{
	char path[160];
	char(*unlocks)[320];
	struct zk_multi_op *ops;
	char *json;
	size_t i, len;
	struct zk_lock **locks;
	int nlocks, nops;

	h->state = H_FULFILLING;
	np_strv_clear(&h->req->nodes);
	for (i = 0; i < h->n_nodes; i++)
		np_strv_push(&h->req->nodes, h->nodes[i].node_id);
	np_request_set_state(h->req, NP_REQ_FULFILLED);
	req_path(h, path, sizeof(path));
	json = np_request_encode(h->req, &len);
	ops = calloc(h->n_nodes + 2, sizeof(*ops));
	unlocks = calloc(h->n_nodes + 1, sizeof(*unlocks));
	if (ops == NULL || unlocks == NULL)
		abort();
	ops[0].type = ZK_MULTI_SET;
	ops[0].path = path;
	ops[0].data = json;
	ops[0].len = (int)len;
	ops[0].version = -1;
	ops[0].record = h->req; /* the cache copies it (lc_set_record_under) */
	nops = 1 + unlock_ops(h, ops, 1, unlocks);
	locks = lc_handler_locks(h, &nlocks);
	lc_multi_under(h->lc, locks, nlocks, ops, nops, fulfilled_stored, hop_new(h, (size_t)-1));
	free(locks);
	free(unlocks);
	free(ops);
	free(json);
}

/* ---- cancellation ------------------------------------------------------------ */

/*
 * The request znode is gone (requestor cancelled, or deleted it early):
 * deallocate and unlock every node we hold, let launches finish (their
 * nodes then become reusable), release the request lock.
 */
static void
vanish_step(struct handler *h)
{
	size_t i;
	int busy = 0;

	for (i = 0; i < h->n_nodes; i++) {
		struct hnode *hn = &h->nodes[i];
		if (hn->state == HN_ALLOC_WAIT)
			reuse_failed(h, i); /* nothing in flight: unlock it */
		if (hn_in_flight(hn)) {
			busy = 1;
			continue;
		}
		if (hn->state == HN_READY || hn->state == HN_FAILED || hn->state == HN_ABORTED)
			hn_release(h, i, hn->state == HN_READY);
	}
	if (busy || h->releasing)
		return;
	h->releasing = 1;
	log_info("request %s cancelled by its requestor; nodes released", h->req_id);
	release_request_lock(h);
}

void
lc_handler_request_removed(struct handler *h)
{
	if (h->state == H_DONE)
		return;
	h->vanished = 1;
	switch (h->state) {
	case H_LOCKING:
	case H_READING:
	case H_ACCEPTING:
	case H_FULFILLING:
	case H_DECLINING:
	case H_FAST:
		return; /* the pending callback sees it */
	default:
		h->state = H_RUNNING;
		update_pool_paused(h->pool);
		vanish_step(h);
	}
}

/* ---- AZ grouping (as StateMachineHandler) ------------------------------------ *
 *
 * For drivers with a pool_azs slot: a request's nodeset is kept in one
 * availability zone (struct handler's chosen_az). Upstream's rules:
 * checkReusableNode (a chosen AZ admits only ready nodes of that az; a
 * null az does not match), nodeReusedNotification (a reused node with an
 * az fixes it when none is), setNodeMetadata (a launch with none fixed
 * picks one at random from the pool's availability-zones, else the
 * cloud's list; none there: the cloud's choice, asked again next launch).
 */

static int
az_grouping(const struct handler *h)
{
	return h->lc->prov.drv->pool_azs != NULL && h->lc->prov.dp != NULL;
}

/* As checkReusableNode. */
static int
az_admits(const struct handler *h, const struct np_node *nd)
{
	if (!az_grouping(h) || h->chosen_az == NULL)
		return 1;
	return nd->az != NULL && strcmp(nd->az, h->chosen_az) == 0;
}

static void
az_reset(struct handler *h)
{
	free(h->chosen_az);
	h->chosen_az = NULL;
	h->az_firm = 0;
}

/* Node i is being reused and its az is az (from the cache): as
 * nodeReusedNotification, taken tentatively at once (see struct handler). */
static void
az_claim(struct handler *h, size_t i, const char *az)
{
	struct hnode *hn = &h->nodes[i];

	hn->claims_az = 0;
	if (!az_grouping(h) || az == NULL || *az == '\0')
		return;
	if (h->chosen_az == NULL) {
		h->chosen_az = strdup(az);
		h->az_firm = 0;
	}
	hn->claims_az = strcmp(h->chosen_az, az) == 0;
}

/* Node i's reuse succeeded: its claim, if any, is now firm. */
static void
az_confirm(struct handler *h, size_t i)
{
	if (h->nodes[i].claims_az && h->chosen_az != NULL)
		h->az_firm = 1;
	h->nodes[i].claims_az = 0;
}

/* Node i's reuse failed: a tentative AZ no other reuse in flight claims
 * is dropped (upstream would not have fixed it). */
static void
az_unclaim(struct handler *h, size_t i)
{
	size_t k;

	h->nodes[i].claims_az = 0;
	if (h->chosen_az == NULL || h->az_firm)
		return;
	for (k = 0; k < h->n_nodes; k++)
		if (h->nodes[k].claims_az)
			return;
	az_reset(h);
}

/* A launch starts: as setNodeMetadata. Returns the AZ for it (borrowed
 * from the handler, stable from here on) or NULL (the cloud's choice). */
static const char *
az_for_launch(struct handler *h)
{
	struct launcher *lc = h->lc;
	struct np_strv azs = {0};

	if (!az_grouping(h))
		return NULL;
	if (h->chosen_az == NULL) {
		lc->prov.drv->pool_azs(lc->prov.dp, h->pool->name, &azs);
		if (azs.n > 0) {
			const char *az = azs.v[arc4random_uniform((uint32_t)azs.n)];
			if (*az != '\0')
				h->chosen_az = strdup(az);
		}
		np_strv_clear(&azs);
		if (h->chosen_az != NULL)
			log_debug("request %s: nodeset grouped in availability zone %s", h->req_id,
				  h->chosen_az);
	}
	if (h->chosen_az != NULL)
		h->az_firm = 1;
	return h->chosen_az;
}

/* ---- reuse of READY nodes --------------------------------------------------- */

static void node_allocated(int rc, const struct zk_stat *st, void *arg);

static void
reuse_failed(struct handler *h, size_t i)
{
	struct hnode *hn = &h->nodes[i];

	zk_lock_free(hn->lock);
	hn->lock = NULL;
	if (hn->node_id != NULL)
		lc_busy_del(h->lc, hn->node_id);
	free(hn->node_id);
	hn->node_id = NULL;
	np_node_free(hn->node);
	hn->node = NULL;
	hn->state = HN_WANTED;
	az_unclaim(h, i);
}

static void
after_node_step(struct handler *h)
{
	if (h->vanished)
		vanish_step(h);
	else if (h->state == H_RUNNING)
		run(h);
}

/* Reserve n for the request: allocated_to, and tenant and requestor copied
 * from it (Zuul reads them for tenant accounting). */
static void
lc_assign_to_request(const struct handler *h, struct np_node *n)
{
	free(n->allocated_to);
	n->allocated_to = strdup(h->req_id);
	free(n->tenant_name);
	n->tenant_name = h->req->tenant_name ? strdup(h->req->tenant_name) : NULL;
	free(n->requestor);
	n->requestor = h->req->requestor ? strdup(h->req->requestor) : NULL;
}

static void
allocate_node(struct handler *h, size_t i)
{
	lc_assign_to_request(h, h->nodes[i].node);
	lc_store_node(h->lc, h->nodes[i].node, h->nodes[i].lock, node_allocated, hop_new(h, i));
}

/*
 * A reused node, locked and checked, is allocated to the request. For a
 * tenant with limits the allocation makes the node the tenant's (its
 * tenant_name), so it is decided in a quota round, as a launch is: the
 * node waits locked (HN_ALLOC_WAIT) until run() sees the round open.
 */
static void
reuse_allocate(struct handler *h, size_t i)
{
	if (lc_tenant_limit(h->lc, h->req->tenant_name) == NULL) {
		allocate_node(h, i);
		return;
	}
	h->nodes[i].state = HN_ALLOC_WAIT;
	lc_quota_want(h->lc);
}

static void
reuse_checked(const char *node_id, int ok, void *arg)
{
	struct hop *o = arg;
	struct handler *h;
	size_t i;
	struct hnode *hn;

	if (hop_done(o, &h, &i))
		return;
	hn = &h->nodes[i];
	if (h->vanished) {
		reuse_failed(h, i);
		vanish_step(h);
		return;
	}
	if (!ok) {
		/* The driver found the node dead (static: not reachable):
		 * take it out of service; the driver re-registers it once the
		 * host answers again. */
		struct np_node *n = hn->node;
		struct zk_lock *lock = hn->lock;
		log_warn("node %s failed its reuse check; removing it", hn->node_id);
		hn->node = NULL;
		hn->lock = NULL;
		free(hn->node_id);
		hn->node_id = NULL; /* busy mark stays until the record is gone */
		hn->state = HN_WANTED;
		az_unclaim(h, i);
		np_node_set_state(n, NP_NODE_DELETING);
		lc_delete_node_record(h->lc, n, lock);
		run(h);
		return;
	}
	reuse_allocate(h, i);
}

static void
node_read_for_reuse(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct hop *o = arg;
	struct handler *h;
	size_t i;
	struct hnode *hn;
	struct np_node *n = NULL;
	char err[200];
	struct launcher *lc;

	if (hop_done(o, &h, &i))
		return;
	hn = &h->nodes[i];
	lc = h->lc;
	if (rc != ZOK ||
	    np_node_decode(hn->node_id, data, (size_t)len, &n, err, sizeof(err)) != 0 ||
	    n->state != NP_NODE_READY || n->allocated_to != NULL || h->vanished) {
		np_node_free(n);
		reuse_failed(h, i);
		after_node_step(h);
		return;
	}
	hn->node = n;
	if (lc->prov.drv->check_reusable != NULL && lc->prov.dp != NULL) {
		hn->state = HN_CHECKING;
		lc->prov.drv->check_reusable(lc->prov.dp, n, reuse_checked, hop_new(h, i));
		return;
	}
	reuse_allocate(h, i);
}

static void
node_locked_for_reuse(struct zk_lock *lock, int rc, void *arg)
{
	struct hop *o = arg;
	struct handler *h;
	size_t i;
	char path[128];

	if (hop_done(o, &h, &i))
		return;
	if (rc != ZOK) {
		reuse_failed(h, i);
		after_node_step(h);
		return;
	}
	if (h->vanished) {
		reuse_failed(h, i);
		vanish_step(h);
		return;
	}
	snprintf(path, sizeof(path), "/nodepool/nodes/%s", h->nodes[i].node_id);
	zk_get(h->lc->zk, path, NULL, NULL, node_read_for_reuse, hop_new(h, i));
}

static void
node_allocated(int rc, const struct zk_stat *st, void *arg)
{
	struct hop *o = arg;
	struct handler *h;
	size_t i;

	{
		/* answered: the reservation counts until the view shows the
		 * allocation, or stops now if it failed (quota.c) */
		struct hnode *hn = &o->h->nodes[o->idx];
		lc_quota_create_done(o->h->lc, hn->qres, rc == ZOK ? hn->node_id : NULL,
				     rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT);
		hn->qres = NULL;
	}
	if (hop_done(o, &h, &i))
		return;
	if (rc != ZOK) {
		reuse_failed(h, i);
		after_node_step(h);
		return;
	}
	h->nodes[i].state = HN_READY;
	az_confirm(h, i);
	log_debug("request %s: reusing node %s for %s", h->req_id, h->nodes[i].node_id,
		  h->nodes[i].label);
	after_node_step(h);
}

/* ---- adopting a launch an earlier launcher left (launches survive) ---------- */

static void node_building_stored(int rc, const struct zk_stat *st, void *arg);

/* An unlocked BUILDING node of this pool with the label, allocated to this
 * request, whose launch the driver can resume (lc_node_adoptable). */
static const char *
find_adoptable(struct handler *h, const char *label)
{
	struct launcher *lc = h->lc;
	const struct zk_cache_entry *const *ents;
	int i, n = zk_cache_entries(lc->nodes, &ents);

	for (i = 0; i < n; i++) {
		const struct np_node *nd =
		    LC_SUM(ents[i]) ? np_node_sum_full(LC_SUM(ents[i])) : NULL;
		if (nd == NULL || ents[i]->locked > 0 || nd->allocated_to == NULL ||
		    strcmp(nd->allocated_to, h->req_id) != 0 || nd->pool == NULL ||
		    strcmp(nd->pool, h->pool->name) != 0 || !np_strv_contains(&nd->type, label) ||
		    lc_busy(lc, ents[i]->name) || !lc_node_adoptable(lc, nd))
			continue;
		return ents[i]->name;
	}
	return NULL;
}

static void
adopt_failed(struct handler *h, size_t i)
{
	struct hnode *hn = &h->nodes[i];

	reuse_failed(h, i);
	hn->resume = 0;
	hn->no_adopt = 1; /* launched anew; the cleanup deletes that one */
}

static void
adopt_read(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct hop *o = arg;
	struct handler *h;
	size_t i;
	struct hnode *hn;
	struct np_node *n = NULL;
	char err[200];

	if (hop_done(o, &h, &i))
		return;
	hn = &h->nodes[i];
	if (rc != ZOK ||
	    np_node_decode(hn->node_id, data, (size_t)len, &n, err, sizeof(err)) != 0 ||
	    !lc_node_adoptable(h->lc, n) || h->vanished) {
		np_node_free(n);
		adopt_failed(h, i);
		after_node_step(h);
		return;
	}
	log_info("request %s: adopting node %s (%s, instance %s) from launcher %s", h->req_id,
		 hn->node_id, hn->label, n->external_id, n->launcher ? n->launcher : "-");
	lc_assign_to_request(h, n);
	free(n->launcher);
	n->launcher = strdup(h->pool->launcher_id);
	hn->node = n;
	hn->az = n->az; /* where the instance is (or NULL) */
	hn->stores++;
	lc_store_node(h->lc, n, hn->lock, node_building_stored, hop_new(h, i));
}

static void
adopt_locked(struct zk_lock *lock, int rc, void *arg)
{
	struct hop *o = arg;
	struct handler *h;
	size_t i;
	char path[128];

	if (hop_done(o, &h, &i))
		return;
	if (rc != ZOK || h->vanished) {
		adopt_failed(h, i);
		after_node_step(h);
		return;
	}
	snprintf(path, sizeof(path), "/nodepool/nodes/%s", h->nodes[i].node_id);
	zk_get(h->lc->zk, path, NULL, NULL, adopt_read, hop_new(h, i));
}

static void
start_adopt(struct handler *h, size_t i, const char *node_id)
{
	struct hnode *hn = &h->nodes[i];
	char path[128];

	hn->node_id = strdup(node_id);
	hn->state = HN_LOCKING;
	hn->resume = 1;
	lc_busy_add(h->lc, node_id);
	node_lock_path(node_id, path, sizeof(path));
	hn->lock = zk_lock_new(h->lc->zk, path, NULL, ZK_LOCK_NO_RESURRECT);
	zk_lock_acquire(hn->lock, 0, adopt_locked, hop_new(h, i));
}

/* A READY, unallocated, unlocked node of this pool with the label (and,
 * grouping by AZ, in the nodeset's AZ). */
static const char *
find_reusable(struct handler *h, const char *label)
{
	struct launcher *lc = h->lc;
	const struct zk_cache_entry *const *ents;
	int i, n = zk_cache_entries(lc->nodes, &ents);

	for (i = 0; i < n; i++) {
		const struct np_node_sum *nd = LC_SUM(ents[i]);
		const char *npool = nd != NULL ? np_node_sum_pool(nd) : NULL;
		if (nd == NULL || np_node_sum_state(nd) != NP_NODE_READY ||
		    np_node_sum_allocated_to(nd) != NULL || ents[i]->locked > 0 || npool == NULL)
			continue;
		if (!np_node_sum_of_provider(nd, lc->prov.name) ||
		    strcmp(npool, h->pool->name) != 0)
			continue;
		if (!np_strv_contains(np_node_sum_type(nd), label) || lc_busy(lc, ents[i]->name))
			continue;
		if (np_node_sum_full(nd) == NULL || !az_admits(h, np_node_sum_full(nd)))
			continue;
		return ents[i]->name;
	}
	return NULL;
}

static void
start_reuse(struct handler *h, size_t i, const char *node_id)
{
	struct hnode *hn = &h->nodes[i];
	const struct np_node *nd = lc_node(h->lc, node_id);
	char path[128];

	az_claim(h, i, nd != NULL ? nd->az : NULL);
	hn->node_id = strdup(node_id);
	hn->state = HN_LOCKING;
	lc_busy_add(h->lc, node_id);
	node_lock_path(node_id, path, sizeof(path));
	/* a ready node is locked first by the launcher that allocates it
	 * (Zuul locks it once it is fulfilled): its lock dir is new */
	hn->lock = zk_lock_new(h->lc->zk, path, NULL, ZK_LOCK_NO_RESURRECT | ZK_LOCK_NEW_DIR);
	zk_lock_acquire(hn->lock, 0, node_locked_for_reuse, hop_new(h, i));
}

/* ---- launching new nodes (cloud drivers) ----------------------------------- */

static void
launch_stored(int rc, const struct zk_stat *st, void *arg)
{
	struct hop *o = arg;
	struct handler *h;
	size_t i;

	if (hop_done(o, &h, &i))
		return;
	h->nodes[i].stores--;
	h->nodes[i].version = rc == ZOK && st != NULL ? st->version : -1;
	if (rc != ZOK) {
		/* Not known to be stored (or stored by a session whose lock is
		 * gone): the launch failed. The request is never fulfilled with
		 * it: its requester would get a node still `building` to us,
		 * or one it cannot lock (issue 27). */
		lc_set_error(h->lc, "storing node %s: %s; its launch failed", h->nodes[i].node_id,
			     zk_strerror(rc));
		if (h->nodes[i].state == HN_READY) {
			h->nodes[i].state = HN_FAILED;
			h->failed = 1;
		}
	}
	after_node_step(h);
	if (h->state == H_RUNNING && !h->vanished)
		poll_handler(h);
}

/* ---- the last node ready and the request fulfilled in one multi ----------- *
 *
 * Upstream writes the node `ready`, then (poll) the request `fulfilled`:
 * two dependent round trips after the server is seen ready. When the
 * node that became ready is the last one the request waits for, both go
 * in one multi, each guarded by the version our own last write of it
 * gave: Zuul reads the request, then its nodes (zuul/nodepool.py), and a
 * transaction makes the nodes ready no later than the request fulfilled,
 * as the two writes in order did. Refused (a version moved, the request
 * is gone) or unanswered, nothing of it is known to be made: the node is
 * written as before and the usual poll fulfils (the same data again if
 * it did land; the locks are still ours).
 */
static void launch_stored(int rc, const struct zk_stat *st, void *arg);

static void
ready_fulfilled_landed(struct handler *h, size_t i, int landed, int rc)
{
	struct hnode *hn = &h->nodes[i];
	size_t k;

	if (!landed) {
		h->state = H_RUNNING;
		update_pool_paused(h->pool);
		hn->stores++;
		lc_store_node(h->lc, hn->node, hn->lock, launch_stored, hop_new(h, i));
		return;
	}
	disown_locks(h); /* released by the multi */
	h->lc->counters.fulfilled++;
	log_info("request %s fulfilled by pool %s: %zu node(s)", h->req_id, h->pool->name,
		 h->n_nodes);
	for (k = 0; k < h->n_nodes; k++)
		hn_release(h, k, 0); /* keep allocated_to */
	release_request_lock(h);
}

static void
ready_fulfilled(int rc, int count, const struct zk_multi_result *res, void *arg)
{
	struct hop *o = arg;
	struct handler *h;
	size_t i;
	struct hnode *hn;

	if (hop_done(o, &h, &i))
		return;
	hn = &h->nodes[i];
	if (rc != ZOK) {
		log_debug("request %s: node %s ready and fulfilled in one: %s; in turn", h->req_id,
			  hn->node_id, zk_strerror(rc));
		probe_landed(h, i, rc, ready_fulfilled_landed);
		return;
	}
	hn->version = count > 0 ? res[0].version : -1;
	h->req_version = count > 1 ? res[1].version : -1;
	ready_fulfilled_landed(h, i, 1, ZOK);
}

/* Node i became ready: if it is the last, write it and the fulfilment in
 * one multi (1), else 0 (nothing done). */
static int
fulfil_with_ready(struct handler *h, size_t i)
{
	struct hnode *hn = &h->nodes[i];
	struct zk_multi_op *ops;
	char npath[128], rpath[160];
	char(*unlocks)[320];
	char *njson, *rjson;
	size_t k, nlen, rlen;
	struct zk_lock **locks;
	int nlocks, nops;

	if (h->state != H_RUNNING || h->vanished || h->failed || hn->stores != 0 ||
	    hn->version < 0 || h->req_version < 0)
		return 0;
	for (k = 0; k < h->n_nodes; k++)
		if (k != i && (h->nodes[k].state != HN_READY || hn_in_flight(&h->nodes[k])))
			return 0;
	h->state = H_FULFILLING;
	update_pool_paused(h->pool);
	np_strv_clear(&h->req->nodes);
	for (k = 0; k < h->n_nodes; k++)
		np_strv_push(&h->req->nodes, h->nodes[k].node_id);
	np_request_set_state(h->req, NP_REQ_FULFILLED);
	njson = np_node_encode(hn->node, &nlen);
	rjson = np_request_encode(h->req, &rlen);
	snprintf(npath, sizeof(npath), "/nodepool/nodes/%s", hn->node_id);
	req_path(h, rpath, sizeof(rpath));
	ops = calloc(h->n_nodes + 3, sizeof(*ops));
	unlocks = calloc(h->n_nodes + 1, sizeof(*unlocks));
	if (ops == NULL || unlocks == NULL)
		abort();
	ops[0].type = ZK_MULTI_SET;
	ops[0].path = npath;
	ops[0].data = njson;
	ops[0].len = (int)nlen;
	ops[0].version = hn->version;
	ops[0].record = hn->node; /* the caches copy them (lc_set_record_under) */
	ops[1].type = ZK_MULTI_SET;
	ops[1].path = rpath;
	ops[1].data = rjson;
	ops[1].len = (int)rlen;
	ops[1].version = h->req_version;
	ops[1].record = h->req;
	nops = 2 + unlock_ops(h, ops, 2, unlocks);
	locks = lc_handler_locks(h, &nlocks);
	lc_multi_under(h->lc, locks, nlocks, ops, nops, ready_fulfilled, hop_new(h, i));
	free(locks);
	free(unlocks);
	free(ops);
	free(njson);
	free(rjson);
	return 1;
}

static void launch_result(struct handler *h, size_t i, enum drv_launch_result result,
			  const char *error);

/* The host's launch_done service (drivers/host.h): drv_launch_done. */
void
lc_host_launch_done(struct drv_launch *l, enum drv_launch_result result, const char *error)
{
	struct hop *o = l->owner;
	struct handler *h = o->h;
	size_t i = o->idx;
	struct hnode *hn = &h->nodes[i];
	struct launcher *lc = h->lc;

	lc_ctx_free(lc, o);
	h->ops--;
	hn->launching = 0;
	hn->launch.owner = NULL;
	if (h->state == H_DONE) {
		if (h->ops == 0) {
			if (h->detached)
				TAILQ_REMOVE(&lc->zombies, h, entry);
			lc_handler_destroy(h);
		}
		return;
	}
	if (hn->early) {
		/* its lock and `building` not answered yet: kept until then
		 * (early_confirmed, early_abort) */
		hn->early_done = 1;
		hn->early_result = (int)result;
		hn->early_error = error != NULL ? strdup(error) : NULL;
		return;
	}
	launch_result(h, i, result, error);
}

/* Node i's launch ended (drv_launch_done, under its lock): the node is
 * written READY, ABORTED or FAILED. */
static void
launch_result(struct handler *h, size_t i, enum drv_launch_result result, const char *error)
{
	struct hnode *hn = &h->nodes[i];
	struct launcher *lc = h->lc;

	switch (result) {
	case DRV_LAUNCH_READY:
		lc->counters.launches_ready++;
		np_node_set_state(hn->node, NP_NODE_READY);
		hn->state = HN_READY;
		log_info("node %s (%s) ready", hn->node_id, hn->label);
		break;
	case DRV_LAUNCH_ABORTED:
		lc->counters.launches_aborted++;
		np_node_set_state(hn->node, NP_NODE_ABORTED);
		hn->state = HN_ABORTED;
		log_warn("node %s aborted (quota): %s", hn->node_id, error ? error : "");
		break;
	case DRV_LAUNCH_FAILED:
	default:
		lc->counters.launches_failed++;
		np_node_set_state(hn->node, NP_NODE_FAILED);
		hn->state = HN_FAILED;
		h->failed = 1;
		lc_set_error(lc, "node %s (%s) launch failed: %s", hn->node_id, hn->label,
			     error ? error : "unknown error");
		break;
	}
	metrics_launch_result(lc->prov.name, hn->node->az, h->req ? h->req->requestor : NULL,
			      lc_launch_result_key(result), lc_now() - hn->node->created_time);
	if (h->vanished && hn->node->allocated_to != NULL) {
		free(hn->node->allocated_to);
		hn->node->allocated_to = NULL;
	}
	if (result == DRV_LAUNCH_READY && fulfil_with_ready(h, i))
		return;
	hn->stores++;
	lc_store_node(lc, hn->node, hn->lock, launch_stored, hop_new(h, i));
}

/* The building node's own write finished (drv_store_node). */
static void
launch_node_stored(int rc, const struct zk_stat *st, void *arg)
{
	struct hop *o = arg;
	struct handler *h;
	size_t i;

	if (hop_done(o, &h, &i))
		return;
	h->nodes[i].stores--;
	h->nodes[i].version = rc == ZOK && st != NULL ? st->version : -1;
	if (rc != ZOK)
		lc_set_error(h->lc, "storing building node %s: %s", h->nodes[i].node_id,
			     zk_strerror(rc));
}

/* The host's store_node service (drivers/host.h): drv_store_node. */
int
lc_host_store_node(struct drv_host *host, const struct drv_launch *l)
{
	struct launcher *lc = host->owner;
	const struct hop *o = l->owner;
	struct handler *h = o != NULL ? o->h : NULL;
	struct hnode *hn = h != NULL && o->idx < h->n_nodes ? &h->nodes[o->idx] : NULL;

	if (hn == NULL || &hn->launch != l || !hn->launching || hn->node == NULL ||
	    hn->node->id == NULL) {
		errno = EINVAL;
		return -1;
	}
	if (hn->early) {
		/* written once its lock and `building` are answered
		 * (early_confirmed), in order after them */
		hn->early_store = 1;
		return 0;
	}
	if (hn->lock == NULL || !zk_lock_is_held(hn->lock)) {
		errno = ESTALE;
		return -1;
	}
	if (!zk_is_connected(lc->zk)) {
		errno = ENOTCONN;
		return -1;
	}
	log_debug("node %s: stored while building (external id %s)", hn->node->id,
		  hn->node->external_id ? hn->node->external_id : "-");
	hn->stores++;
	lc_store_node(lc, hn->node, hn->lock, launch_node_stored, hop_new(h, o->idx));
	return 0;
}

/* Node i is `building` under our lock (version: its data version now,
 * -1 if unknown): hand it to the driver. */
static void
building_go(struct handler *h, size_t i, int version)
{
	struct hnode *hn = &h->nodes[i];
	struct launcher *lc = h->lc;

	hn->version = version;
	hn->state = HN_BUILDING;
	memset(&hn->launch, 0, sizeof(hn->launch));
	hn->launch.node = hn->node;
	hn->launch.label = hn->label;
	hn->launch.request = h->req;
	hn->launch.az = hn->az;
	hn->launch.resume = hn->resume;
	hn->launch.owner = hop_new(h, i);
	hn->launching = 1;
	log_debug("request %s: node %s building; launching", h->req_id, hn->node_id);
	lc->prov.drv->launch(lc->prov.dp, &hn->launch);
}

/* ---- the launch begun before the node's lock is answered (issue 25) ------- *
 *
 * A node we just made is INIT and unlocked until its lock and `building`
 * (one multi) are answered, and nothing cleans up an INIT node of a live
 * request while it is unlocked (upstream's rule: a node is written
 * BUILDING only under its lock, since unlocked BUILDING nodes are
 * deleted). So the driver's launch (the cloud's create call) starts at
 * the create's reply, in parallel with that multi, one ZooKeeper round
 * trip sooner (early launch). Until the answer, what the driver asks of
 * the node's record waits: a store (drv_store_node: the instance named)
 * is made after it, under the lock, and a completion is held, then
 * handled as usual. If the lock is refused (someone else locked the node,
 * or it is gone) or `building` not written, the launch is cancelled (the
 * driver deletes what it made: launch_cancel), or, if it already ended,
 * its instance is deleted (lc_cleanup_delete_instance); the node failed,
 * as a node whose lock is refused without an early launch.
 */

static int
early_launch_ok(const struct handler *h, const struct hnode *hn)
{
	const struct driver *drv = h->lc->prov.drv;

	return drv->launch_cancel != NULL && drv->node_delete != NULL && h->lc->prov.dp != NULL &&
	       !hn->resume;
}

/* Node i's lock and `building` are in (version: its data version now, -1
 * if unknown): what the launch asked meanwhile is done now. */
static void
early_confirmed(struct handler *h, size_t i, int version)
{
	struct hnode *hn = &h->nodes[i];
	char *err;

	hn->early = 0;
	hn->version = version;
	if (hn->early_done) {
		hn->early_done = 0;
		hn->early_store = 0;
		err = hn->early_error;
		hn->early_error = NULL;
		launch_result(h, i, (enum drv_launch_result)hn->early_result, err);
		free(err);
		return;
	}
	if (hn->early_store) {
		hn->early_store = 0;
		hn->stores++;
		lc_store_node(h->lc, hn->node, hn->lock, launch_node_stored, hop_new(h, i));
	}
}

/* Node i's lock or `building` was refused: its launch is undone. */
static void
early_abort(struct handler *h, size_t i)
{
	struct hnode *hn = &h->nodes[i];
	struct launcher *lc = h->lc;

	hn->early = 0;
	hn->early_store = 0;
	if (hn->launching) {
		log_warn("node %s: its lock was refused; cancelling its launch", hn->node_id);
		lc->prov.drv->launch_cancel(lc->prov.dp, &hn->launch);
		hn->launching = 0;
		/* no completion will come: drop its reference */
		lc_ctx_free(lc, hn->launch.owner);
		hn->launch.owner = NULL;
		h->ops--;
	} else if (hn->early_done) {
		hn->early_done = 0;
		free(hn->early_error);
		hn->early_error = NULL;
		lc_cleanup_delete_instance(lc, np_node_dup(hn->node));
	}
}

static void
node_building_stored(int rc, const struct zk_stat *st, void *arg)
{
	struct hop *o = arg;
	struct handler *h;
	size_t i;
	struct hnode *hn;

	if (hop_done(o, &h, &i))
		return;
	hn = &h->nodes[i];
	hn->stores--;
	if (rc != ZOK) {
		if (hn->early)
			early_abort(h, i);
		hn->state = HN_FAILED;
		h->failed = 1;
		after_node_step(h);
		return;
	}
	if (hn->early) {
		early_confirmed(h, i, st != NULL ? st->version : -1);
		return;
	}
	building_go(h, i, st != NULL ? st->version : -1);
}

static void
new_node_locked(struct zk_lock *lock, int rc, void *arg)
{
	struct hop *o = arg;
	struct handler *h;
	size_t i;
	struct hnode *hn;
	const struct zk_multi_result *res;
	int n;

	if (hop_done(o, &h, &i))
		return;
	hn = &h->nodes[i];
	if (rc != ZOK) {
		if (hn->early)
			early_abort(h, i);
		np_node_set_state(hn->node, NP_NODE_INIT); /* as stored */
		lc_set_error(h->lc, "locking new node %s: %s", hn->node_id, zk_strerror(rc));
		hn->state = HN_FAILED;
		h->failed = 1;
		after_node_step(h);
		return;
	}
	if (zk_lock_applied(lock, &res, &n)) {
		/* locked and BUILDING in one transaction */
		if (hn->early)
			early_confirmed(h, i, res[0].version);
		else
			building_go(h, i, res[0].version);
		return;
	}
	/* lock first, then BUILDING: an unlocked BUILDING node is an orphan */
	np_node_set_state(hn->node, NP_NODE_BUILDING);
	hn->stores++;
	lc_store_node(h->lc, hn->node, hn->lock, node_building_stored, hop_new(h, i));
}

/* Node i's INIT record exists as id: lock it, then BUILDING. */
static void
new_node_take(struct handler *h, size_t i, const char *id)
{
	struct hnode *hn = &h->nodes[i];
	char lpath[128], npath[128];
	struct zk_multi_op op;
	char *json;
	size_t jlen;

	hn->create_unknown = 0;
	/* its reservation counts until the view shows it (quota.c) */
	lc_quota_create_done(h->lc, hn->qres, id, 0);
	hn->qres = NULL;
	hn->node_id = strdup(id);
	free(hn->node->id);
	hn->node->id = strdup(id);
	lc_busy_add(h->lc, id);
	node_lock_path(id, lpath, sizeof(lpath));
	/* a node we just made: no lock dir yet; its lock and `building`
	 * (guarded by version 0: nothing but our create wrote it) in one
	 * multi (issue 25). Refused (it changed, or someone made its lock
	 * dir), it is locked as usual and written after. */
	hn->lock = zk_lock_new(h->lc->zk, lpath, NULL, ZK_LOCK_NO_RESURRECT | ZK_LOCK_NEW_DIR);
	np_node_set_state(hn->node, NP_NODE_BUILDING);
	json = np_node_encode(hn->node, &jlen);
	snprintf(npath, sizeof(npath), "/nodepool/nodes/%s", id);
	memset(&op, 0, sizeof(op));
	op.type = ZK_MULTI_SET;
	op.path = npath;
	op.data = json;
	op.len = (int)jlen;
	op.version = 0;
	op.record = hn->node; /* the cache copies it (lc_set_record_under) */
	lc_lock_acquire_with(h->lc, hn->lock, &op, 1, new_node_locked, hop_new(h, i));
	free(json);
	if (early_launch_ok(h, hn)) {
		/* the cloud's create now, the lock's answer on its way */
		hn->early = 1;
		building_go(h, i, -1);
	}
}

static void
new_node_created(int rc, const char *path, void *arg)
{
	struct hop *o = arg;
	struct handler *h;
	size_t i;
	struct hnode *hn;

	hn = &o->h->nodes[o->idx];
	if (rc == ZOK) {
		/* created: its reservation counts until the view shows it;
		 * failed: it stops counting now (quota.c). Unknown (no
		 * reply): kept until find_own_create tells. */
		lc_quota_create_done(o->h->lc, hn->qres, strrchr(path, '/') + 1, 0);
		hn->qres = NULL;
	} else if (rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT) {
		lc_quota_create_done(o->h->lc, hn->qres, NULL, 0);
		hn->qres = NULL;
	}
	if (hop_done(o, &h, &i))
		return;
	if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT) {
		/* The create may have happened, its reply lost: find out once
		 * the view is current again (lc_handler_resynced), then go on
		 * with the node or launch anew. */
		log_warn("request %s: creating a node for %s: %s; looking for it once "
			 "reconnected",
			 h->req_id, hn->label, zk_strerror(rc));
		hn->create_unknown = 1;
		hn->create_epoch = h->lc->sync_epoch;
		return;
	}
	if (rc != ZOK) {
		lc_set_error(h->lc, "creating node: %s", zk_strerror(rc));
		hn->state = HN_FAILED;
		h->failed = 1;
		after_node_step(h);
		return;
	}
	new_node_take(h, i, strrchr(path, '/') + 1);
}

/*
 * Node i's create had no reply and the view has been re-synced since: the
 * record it wrote, if it landed, is in the node cache, found by what no
 * other create shares (this pool's launcher id, the request, and a
 * created_time unique in this process: start_launch). Found: the launch
 * goes on with it. Not found: it did not land, and node i is launched
 * again.
 */
static void
find_own_create(struct handler *h, size_t i)
{
	struct launcher *lc = h->lc;
	struct hnode *hn = &h->nodes[i];
	const struct zk_cache_entry *const *ents;
	int k, n = zk_cache_entries(lc->nodes, &ents);

	for (k = 0; k < n; k++) {
		const struct np_node *nd =
		    LC_SUM(ents[k]) ? np_node_sum_full(LC_SUM(ents[k])) : NULL;
		if (nd == NULL || nd->state != NP_NODE_INIT || nd->launcher == NULL ||
		    nd->allocated_to == NULL || nd->created_time != hn->node->created_time ||
		    strcmp(nd->launcher, h->pool->launcher_id) != 0 ||
		    strcmp(nd->allocated_to, h->req_id) != 0 || lc_busy(lc, ents[k]->name))
			continue;
		log_info("request %s: node %s was created before the connection was lost; "
			 "going on with it",
			 h->req_id, ents[k]->name);
		new_node_take(h, i, ents[k]->name);
		return;
	}
	log_info("request %s: the node for %s was not created; launching again", h->req_id,
		 hn->label);
	lc_quota_create_done(lc, hn->qres, NULL, 0);
	hn->qres = NULL;
	hn->create_unknown = 0;
	hn->state = HN_WANTED;
	np_node_free(hn->node);
	hn->node = NULL;
	run(h);
}

/* The creation time of a new node: now, and later than any other this
 * process gave (so that it tells one create from every other). */
static double
unique_created_time(double now)
{
	static double last;

	if (now <= last)
		now = nextafter(last, INFINITY);
	last = now;
	return now;
}

/*
 * Node i is to be launched (decided in a quota round: choose): its INIT
 * record made (hn->node, HN_CREATING) and its reservation taken
 * (hn->qres), as the create that follows will send it.
 */
static void
launch_prepare(struct handler *h, size_t i)
{
	struct hnode *hn = &h->nodes[i];
	struct np_node *n = np_node_new();
	struct lc_pool *pool = h->pool;

	np_node_set_state(n, NP_NODE_INIT);
	n->created_time = n->state_time = unique_created_time(n->state_time);
	n->provider = strdup(pool->prov->name);
	n->pool = strdup(pool->name);
	n->launcher = strdup(pool->launcher_id);
	np_strv_push(&n->type, hn->label);
	lc_assign_to_request(h, n);
	if (pool->node_attributes != NULL)
		n->attributes = json_deep_copy(pool->node_attributes);
	{
		/* resources on every node: Zuul and tenant limits read them */
		struct drv_quota q;
		label_need(h->lc, pool, hn->label, &q);
		n->resources = drv_quota_to_json(&q);
		drv_quota_clear(&q);
	}
	hn->node = n;
	hn->state = HN_CREATING;
	hn->az = az_for_launch(h);
	/* an earlier create's reservation still held (its outcome unknown) */
	lc_quota_create_done(h->lc, hn->qres, NULL, 1);
	hn->qres = lc_quota_create_sent(h->lc, LC_QRES_LAUNCH, n, h->req->tenant_name);
}

static void
start_launch(struct handler *h, size_t i)
{
	launch_prepare(h, i);
	metrics_launch_phase(h->pool->prov->name, METRICS_PHASE_QUOTA_WAIT,
			     lc_monotonic() - h->started);
	lc_create_node(h->lc, h->nodes[i].node, new_node_created, hop_new(h, i));
}

/* The quota one node of label needs (driver's label_quota; default one
 * instance), as QuotaSupport.quotaNeededByLabel. */
static void
label_need(struct launcher *lc, const struct lc_pool *pool, const char *label, struct drv_quota *q)
{
	drv_quota_init(q, 0, 1, 0);
	if (lc->prov.drv->label_quota != NULL && lc->prov.dp != NULL)
		lc->prov.drv->label_quota(lc->prov.dp, pool->name, label, q);
}

/*
 * Tenant limits exact (quota.c's design): 1 when node i of h may be
 * launched (or, HN_ALLOC_WAIT, its reused node allocated) without the
 * request's tenant exceeding its tenant-resource-limits: what the tenant
 * uses (lc_tenant_usage: every provider's nodes, as upstream) plus what
 * this node needs (a reused node's `resources`, else the label's quota).
 * Called in a quota round only, when the view holds every node created or
 * allocated before it by any launcher of any provider. 1 for a tenant
 * without limits.
 */
static int
tenant_has_room(struct handler *h, size_t i)
{
	const struct lc_tenant_limit *tl = lc_tenant_limit(h->lc, h->req->tenant_name);
	struct hnode *hn = &h->nodes[i];
	struct drv_quota left, q;
	int ok;

	if (tl == NULL)
		return 1;
	drv_quota_init(&left, tl->limits.cores, tl->limits.instances, tl->limits.ram);
	if (tl->limits.extra != NULL)
		left.extra = json_deep_copy(tl->limits.extra);
	drv_quota_init(&q, 0, 0, 0);
	lc_tenant_usage(h->lc, h->req->tenant_name, &q);
	drv_quota_sub(&left, &q);
	drv_quota_clear(&q);
	if (hn->state == HN_ALLOC_WAIT && hn->node != NULL && hn->node->resources != NULL) {
		drv_quota_init(&q, 0, 0, 0);
		drv_quota_from_json(&q, hn->node->resources);
	} else {
		label_need(h->lc, h->pool, hn->label, &q);
	}
	drv_quota_sub(&left, &q);
	drv_quota_clear(&q);
	ok = drv_quota_non_negative(&left);
	drv_quota_clear(&left);
	return ok;
}

/* What a node uses: its `resources`, else its label's quota. */
static void
node_usage(struct launcher *lc, const struct lc_pool *pool, const struct np_node *nd,
	   struct drv_quota *q)
{
	if (nd->resources != NULL) {
		drv_quota_from_json(q, nd->resources);
		if (q->instances == 0)
			q->instances = 1;
	} else
		label_need(lc, pool, nd->type.n ? nd->type.v[0] : "", q);
}

/*
 * The pool's limits beyond max-servers, max-cores and max-ram, as upstream's
 * hasRemainingQuota adds them: max-volumes as "volumes" and max-volume-gb as
 * "volume-gb" (OpenStack, fake; 0 or less: unlimited, as upstream skips a
 * falsy one), then max-resources (the provider's, updated by the pool's: AWS,
 * Kubernetes...). A new object, or NULL when there are none.
 */
static json_t *
pool_extra_limits(const struct launcher *lc, const struct lc_pool *pool)
{
	json_t *o = json_object();
	const json_t *v;
	const char *k;

	v = json_object_get(pool->raw, "max-volumes");
	if (json_is_number(v) && json_number_value(v) > 0)
		json_object_set_new(o, "volumes", json_real(json_number_value(v)));
	v = json_object_get(pool->raw, "max-volume-gb");
	if (json_is_number(v) && json_number_value(v) > 0)
		json_object_set_new(o, "volume-gb", json_real(json_number_value(v)));
	json_object_foreach((json_t *)json_object_get(lc->prov.raw, "max-resources"), k, v)
	{
		if (json_is_number(v))
			json_object_set_new(o, k, json_real(json_number_value(v)));
	}
	json_object_foreach((json_t *)json_object_get(pool->raw, "max-resources"), k, v)
	{
		if (json_is_number(v))
			json_object_set_new(o, k, json_real(json_number_value(v)));
	}
	if (json_object_size(o) == 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/*
 * As upstream's hasRemainingQuota (reference 2.6): per node, pool limits
 * (max-servers, max-cores, max-ram, and those of pool_extra_limits) minus
 * this pool's nodes in any state minus what is being created minus what
 * this node needs; and the provider's limits (cloud limits minus unmanaged
 * usage, from the driver) minus all of this provider's nodes, unless the
 * pool ignores provider quota.
 */
static int
has_remaining_quota(struct handler *h, const char *label)
{
	struct launcher *lc = h->lc;
	struct lc_pool *pool = h->pool;
	const struct zk_cache_entry *const *ents;
	int i, n = zk_cache_entries(lc->nodes, &ents), ok;
	struct drv_quota pool_left, prov_left, q;
	const struct lc_qres *r;

	drv_quota_init(&pool_left, pool->max_cores < 0 ? INFINITY : pool->max_cores,
		       pool->max_servers < 0 ? INFINITY : (double)pool->max_servers,
		       pool->max_ram < 0 ? INFINITY : pool->max_ram);
	pool_left.extra = pool_extra_limits(lc, pool);
	drv_quota_unlimited(&prov_left);
	if (!pool->ignore_provider_quota && lc->prov.drv->provider_limits != NULL &&
	    lc->prov.dp != NULL)
		lc->prov.drv->provider_limits(lc->prov.dp, &prov_left);
	for (i = 0; i < n; i++) {
		const struct np_node *nd =
		    LC_SUM(ents[i]) ? np_node_sum_full(LC_SUM(ents[i])) : NULL;
		if (nd == NULL || nd->provider == NULL || strcmp(nd->provider, lc->prov.name) != 0)
			continue;
		node_usage(lc, pool, nd, &q);
		drv_quota_sub(&prov_left, &q);
		if (nd->pool != NULL && strcmp(nd->pool, pool->name) == 0)
			drv_quota_sub(&pool_left, &q);
		drv_quota_clear(&q);
	}
	/* our creates not in the view yet (quota.c's reservations: each
	 * counted here until the view counts its node), in every pool */
	for (r = lc_quota_reservations(lc); r != NULL; r = r->next) {
		if (r->kind != LC_QRES_LAUNCH)
			continue;
		drv_quota_init(&q, 0, 1, 0);
		if (r->resources != NULL) {
			drv_quota_from_json(&q, r->resources);
			if (q.instances == 0)
				q.instances = 1; /* as node_usage */
		}
		drv_quota_sub(&prov_left, &q);
		if (r->pool != NULL && strcmp(r->pool, pool->name) == 0)
			drv_quota_sub(&pool_left, &q);
		drv_quota_clear(&q);
	}
	label_need(lc, pool, label, &q);
	drv_quota_sub(&pool_left, &q);
	drv_quota_sub(&prov_left, &q);
	drv_quota_clear(&q);
	ok = drv_quota_non_negative(&pool_left) && drv_quota_non_negative(&prov_left);
	drv_quota_clear(&pool_left);
	drv_quota_clear(&prov_left);
	return ok;
}

/* As upstream's deleteOldestUnusedNode: free room by deleting the oldest
 * READY unallocated unlocked node of this pool. */
static void
delete_oldest_unused(struct handler *h)
{
	struct launcher *lc = h->lc;
	const struct zk_cache_entry *const *ents;
	int i, n = zk_cache_entries(lc->nodes, &ents);
	const struct np_node *oldest = NULL;

	for (i = 0; i < n; i++) {
		const struct np_node *nd =
		    LC_SUM(ents[i]) ? np_node_sum_full(LC_SUM(ents[i])) : NULL;
		if (nd == NULL || nd->state != NP_NODE_READY || nd->allocated_to != NULL ||
		    ents[i]->locked > 0 || lc_busy(lc, nd->id) || nd->provider == NULL ||
		    nd->pool == NULL || strcmp(nd->provider, lc->prov.name) != 0 ||
		    strcmp(nd->pool, h->pool->name) != 0)
			continue;
		if (oldest == NULL || nd->state_time < oldest->state_time)
			oldest = nd;
	}
	if (oldest != NULL) {
		log_info("pool %s at capacity: deleting oldest unused node %s", h->pool->name,
			 oldest->id);
		lc_cleanup_delete_node(lc, oldest->id);
	}
}

/* ---- the run loop (re-entrant, as NodeRequestHandler.run) -------------------- */

/* What a node still wanted (HN_WANTED) gets now: run()'s decision, as
 * upstream's NodeRequestHandler.run per node (reuse, else launch within
 * quota), and the launch decided at the accept (plan_launches) asks the
 * same. */
enum hn_choice {
	CHOOSE_ADOPT,	     /* *id: a launch an earlier launcher began */
	CHOOSE_REUSE,	     /* *id: a ready node of the pool */
	CHOOSE_SHORT,	     /* nothing to be had: reuse-only, or at quota */
	CHOOSE_QUOTA_WAIT,   /* decided in the next quota round */
	CHOOSE_TENANT_SHORT, /* the request's tenant is at its limits */
	CHOOSE_LAUNCH,	     /* launch it now (a quota round is open) */
};

static enum hn_choice
choose(struct handler *h, size_t i, const char **id)
{
	struct launcher *lc = h->lc;
	const struct driver *drv = lc->prov.drv;
	struct hnode *hn = &h->nodes[i];

	/* a launch an earlier launcher began for this request: go on with it
	 * (no quota check: its node is counted already) */
	if (!drv->reuse_only && !hn->no_adopt && (*id = find_adoptable(h, hn->label)) != NULL)
		return CHOOSE_ADOPT;
	/* a reuse-only driver (static) has no other way to serve, so reuse:
	 * false (min-ready) still takes ready nodes, as upstream's static
	 * handler */
	if ((h->req->reuse || drv->reuse_only) && (*id = find_reusable(h, hn->label)) != NULL)
		return CHOOSE_REUSE;
	if (drv->reuse_only)
		return CHOOSE_SHORT;
	if (!lc_quota_open(lc))
		return CHOOSE_QUOTA_WAIT;
	if (!has_remaining_quota(h, hn->label))
		return CHOOSE_SHORT;
	if (!tenant_has_room(h, i))
		return CHOOSE_TENANT_SHORT;
	return CHOOSE_LAUNCH;
}

static void
run(struct handler *h)
{
	struct launcher *lc = h->lc;
	const struct driver *drv = lc->prov.drv;
	size_t i;
	int short_of_nodes = 0, quota_wait = 0, tenant_short = 0;

	if (h->state != H_RUNNING && h->state != H_PAUSED)
		return;
	if (h->vanished) {
		vanish_step(h);
		return;
	}
	/* A quota abort drops the node (it is deleted) and pauses the handler
	 * before relaunching, as upstream; a cloud that does not report its
	 * limits would otherwise be asked again at ZooKeeper speed. */
	for (i = 0; i < h->n_nodes; i++) {
		if (h->nodes[i].state == HN_ABORTED) {
			hn_release(h, i, 0);
			if (drv->pause_at_quota) {
				h->resume_after = lc_monotonic() + 1.0;
				short_of_nodes = 2;
			}
		}
	}
	if (short_of_nodes == 2) {
		if (h->state != H_PAUSED) {
			h->state = H_PAUSED;
			update_pool_paused(h->pool);
		}
		lc_schedule_assign_in(lc, 1.0);
		return;
	}
	for (i = 0; i < h->n_nodes; i++) {
		struct hnode *hn = &h->nodes[i];
		const char *id;

		if (hn->state == HN_ALLOC_WAIT) {
			/* a reuse for a tenant with limits (reuse_allocate) */
			if (!lc_quota_open(lc)) {
				quota_wait = 1;
				continue;
			}
			if (!tenant_has_room(h, i)) {
				reuse_failed(h, i);
				tenant_short = 1;
				continue;
			}
			hn->state = HN_CHECKING; /* the allocation write in flight */
			hn->qres =
			    lc_quota_create_sent(lc, LC_QRES_ALLOC, hn->node, h->req->tenant_name);
			allocate_node(h, i);
			continue;
		}
		if (hn->state != HN_WANTED)
			continue;
		switch (choose(h, i, &id)) {
		case CHOOSE_ADOPT:
			start_adopt(h, i, id);
			break;
		case CHOOSE_REUSE:
			start_reuse(h, i, id);
			break;
		case CHOOSE_SHORT:
			short_of_nodes = 1;
			break;
		case CHOOSE_QUOTA_WAIT:
			quota_wait = 1; /* decided in the next round (quota.c) */
			break;
		case CHOOSE_TENANT_SHORT:
			tenant_short = 1;
			break;
		case CHOOSE_LAUNCH:
			start_launch(h, i);
			break;
		}
	}
	if (quota_wait) {
		lc_quota_want(lc);
		return; /* paused or not, decided in the round */
	}
	if (tenant_short) {
		/* the tenant is at its limits: as upstream's assignment,
		 * which defers such a request, it goes back to `requested`
		 * (its ready nodes released) and is taken again once the
		 * tenant has room (assign.c's tenant_allows) */
		for (i = 0; i < h->n_nodes; i++)
			if (hn_in_flight(&h->nodes[i]))
				return; /* decide once the others settle */
		log_info("request %s: tenant %s at its limits; back to requested", h->req_id,
			 h->req->tenant_name);
		release_to_requested(h);
		return;
	}
	if (short_of_nodes) {
		int in_flight = 0;
		for (i = 0; i < h->n_nodes; i++)
			in_flight |= hn_in_flight(&h->nodes[i]);
		if (in_flight)
			return; /* decide once the others settle */
		if (!drv->pause_at_quota) {
			release_to_requested(h);
			return;
		}
		if (h->min_ready) {
			decline(h, "it would exceed quota", 1);
			return;
		}
		if (h->state != H_PAUSED) {
			h->state = H_PAUSED;
			delete_oldest_unused(h);
			update_pool_paused(h->pool);
			log_info("request %s: pool %s paused at capacity", h->req_id,
				 h->pool->name);
		}
		return;
	}
	if (h->state == H_PAUSED) {
		h->state = H_RUNNING;
		update_pool_paused(h->pool);
	}
	poll_handler(h);
}

void
lc_handler_quota_round(struct launcher *lc)
{
	struct handler *h, *next;
	size_t p, i;

	for (p = 0; p < lc->prov.n_pools; p++) {
		for (h = TAILQ_FIRST(&lc->prov.pools[p].handlers); h != NULL; h = next) {
			int wanted = 0;
			next = TAILQ_NEXT(h, entry);
			for (i = 0; i < h->n_nodes; i++)
				wanted |= h->nodes[i].state == HN_WANTED ||
					  h->nodes[i].state == HN_ABORTED ||
					  h->nodes[i].state == HN_ALLOC_WAIT;
			if (!wanted || h->vanished)
				continue;
			if (h->state == H_PAUSED)
				lc_handler_rerun(h);
			else if (h->state == H_RUNNING)
				run(h);
		}
	}
}

void
lc_handler_rerun(struct handler *h)
{
	if (h->state != H_PAUSED)
		return;
	if (lc_monotonic() < h->resume_after) {
		lc_schedule_assign_in(h->lc, h->resume_after - lc_monotonic() + 0.01);
		return;
	}
	run(h);
}

/* As NodeRequestHandler.poll: once no launch is in flight, fulfil when
 * every node is READY, decline when one failed. */
static void
poll_handler(struct handler *h)
{
	size_t i;
	int all_ready = 1;

	if (h->state != H_RUNNING || h->vanished)
		return;
	for (i = 0; i < h->n_nodes; i++) {
		if (hn_in_flight(&h->nodes[i]))
			return;
		if (h->nodes[i].state != HN_READY)
			all_ready = 0;
	}
	if (all_ready) {
		fulfil(h);
		return;
	}
	if (h->failed) {
		decline(h, "launch failed", 0);
		return;
	}
	/* ABORTED or WANTED nodes left: run again (relaunch, or pause) */
	run(h);
}

/* ---- accept --------------------------------------------------------------- */

/* The request is `pending` under our lock (version: its data version
 * now, -1 if unknown): collect its nodeset. */
/* The nodeset's slots, one per node_types entry (once). */
static void
nodes_init(struct handler *h)
{
	size_t i;

	if (h->nodes != NULL)
		return;
	h->n_nodes = h->req->node_types.n;
	h->nodes = calloc(h->n_nodes ? h->n_nodes : 1, sizeof(*h->nodes));
	if (h->nodes == NULL)
		abort();
	for (i = 0; i < h->n_nodes; i++)
		h->nodes[i].label = strdup(h->req->node_types.v[i]);
}

static void
accept_go(struct handler *h, int version)
{
	h->req_version = version;
	h->lc->counters.accepted++;
	h->state = H_RUNNING;
	nodes_init(h);
	log_debug("request %s accepted by pool %s", h->req_id, h->pool->name);
	if (h->n_nodes == 0) {
		fulfil(h); /* an empty nodeset is fulfilled at once */
		return;
	}
	run(h);
}

static void
accepted(int rc, const struct zk_stat *st, void *arg)
{
	struct hop *o = arg;
	struct handler *h;

	if (hop_done(o, &h, NULL))
		return;
	if (rc != ZOK || h->vanished) {
		if (rc != ZOK && rc != ZNONODE)
			lc_set_error(h->lc, "accepting request %s: %s", h->req_id, zk_strerror(rc));
		release_request_lock(h);
		return;
	}
	accept_go(h, st != NULL ? st->version : -1);
}

/* Recheck decline reasons against the fresh request (set by assign.c). */
const char *lc_assign_decline_reason(struct lc_pool *pool, const struct np_request *r);

static void
request_read(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct hop *o = arg;
	struct handler *h;
	struct np_request *r = NULL;
	char err[200], path[160];
	const char *reason;
	char *json;
	size_t jlen;

	if (hop_done(o, &h, NULL))
		return;
	if (rc != ZOK || h->vanished) {
		release_request_lock(h);
		return;
	}
	if (np_request_decode(h->req_id, data, (size_t)len, &r, err, sizeof(err)) != 0) {
		log_warn("request %s: malformed record skipped: %s", h->req_id, err);
		release_request_lock(h);
		return;
	}
	if (r->state != NP_REQ_REQUESTED ||
	    np_strv_contains(&r->declined_by, h->pool->launcher_id)) {
		np_request_free(r);
		release_request_lock(h);
		return;
	}
	log_debug("request %s: locked and read (created %.0f ms before)", h->req_id,
		  lc_now() * 1000 - (double)st->ctime_ms);
	h->req = r;
	h->min_ready = r->requestor != NULL && strcmp(r->requestor, "NodePool:min-ready") == 0;
	reason = lc_assign_decline_reason(h->pool, r);
	if (reason != NULL) {
		h->state = H_RUNNING;
		decline(h, reason, 1);
		return;
	}
	h->state = H_ACCEPTING;
	np_request_set_state(r, NP_REQ_PENDING);
	req_path(h, path, sizeof(path));
	json = np_request_encode(r, &jlen);
	lc_set_record_under(h->lc, &h->req_lock, 1, path, json, (int)jlen, r, -1, accepted,
			    hop_new(h, (size_t)-1));
	free(json);
}

/* ---- the one-round-trip fulfilment (reuse-only drivers) -------------------- *
 *
 * Upstream re-reads the request under its lock, writes `pending`, then for
 * each node locks it, re-reads it, writes its allocation, and finally
 * writes `fulfilled`: about ten dependent round trips. When the request and
 * its nodes are already in the caches and every node can be handed out,
 * the same outcome takes: lock the nodes (in parallel), then one multi that
 * writes every node's allocation and the fulfilled request, each guarded by
 * the version the cache showed. If anything differs (a version, a lock, the
 * reuse check), it falls back to the full sequence; nothing half-done is
 * left, since the multi is atomic. Zuul sees requested -> fulfilled.
 */

static void slow_read(struct handler *h);

static void
fast_fallback(struct handler *h)
{
	size_t i;

	for (i = 0; i < h->n_nodes; i++) {
		struct hnode *hn = &h->nodes[i];
		zk_lock_free(hn->lock);
		hn->lock = NULL;
		if (hn->node_id != NULL)
			lc_busy_del(h->lc, hn->node_id);
		np_node_free(hn->node);
		free(hn->node_id);
		free(hn->label);
	}
	free(h->nodes);
	h->nodes = NULL;
	h->n_nodes = 0;
	np_request_free(h->req);
	h->req = NULL;
	h->fast_failed = 0;
	az_reset(h); /* the full sequence picks again */
	if (h->vanished) {
		release_request_lock(h);
		return;
	}
	slow_read(h);
}

static void
fast_landed(struct handler *h, size_t idx, int landed, int rc)
{
	size_t i;

	if (!landed) {
		fast_fallback(h);
		return;
	}
	disown_locks(h); /* released by the multi */
	h->lc->counters.accepted++;
	h->lc->counters.fulfilled++;
	log_info("request %s fulfilled by pool %s: %zu node(s)", h->req_id, h->pool->name,
		 h->n_nodes);
	h->state = H_FULFILLING;
	for (i = 0; i < h->n_nodes; i++)
		hn_release(h, i, 0); /* keep allocated_to */
	release_request_lock(h);
}

static void
fast_done(int rc, int count, const struct zk_multi_result *res, void *arg)
{
	struct hop *o = arg;
	struct handler *h;

	if (hop_done(o, &h, NULL))
		return;
	if (rc != ZOK) {
		log_debug("request %s: fast fulfilment refused (%s); full sequence", h->req_id,
			  zk_strerror(rc));
		probe_landed(h, (size_t)-1, rc, fast_landed);
		return;
	}
	fast_landed(h, (size_t)-1, 1, ZOK);
}

static void
fast_commit(struct handler *h)
{
	struct zk_multi_op *ops;
	char(*paths)[128];
	char(*unlocks)[320];
	char **jsons;
	size_t i, n = h->n_nodes, len;
	struct zk_lock **locks;
	int nlocks, nops;

	ops = calloc(2 * n + 2, sizeof(*ops));
	unlocks = calloc(n + 1, sizeof(*unlocks));
	if (unlocks == NULL)
		abort();
	paths = calloc(n + 1, sizeof(*paths));
	jsons = calloc(n + 1, sizeof(*jsons));
	if (ops == NULL || paths == NULL || jsons == NULL)
		abort();
	np_strv_clear(&h->req->nodes);
	for (i = 0; i < n; i++) {
		struct hnode *hn = &h->nodes[i];
		lc_assign_to_request(h, hn->node);
		jsons[i] = np_node_encode(hn->node, &len);
		snprintf(paths[i], sizeof(paths[i]), "/nodepool/nodes/%s", hn->node_id);
		ops[i].type = ZK_MULTI_SET;
		ops[i].path = paths[i];
		ops[i].data = jsons[i];
		ops[i].len = (int)len;
		ops[i].version = hn->version;
		ops[i].record = hn->node; /* the caches copy them (lc_set_record_under) */
		np_strv_push(&h->req->nodes, hn->node_id);
		hn->state = HN_READY;
	}
	np_request_set_state(h->req, NP_REQ_FULFILLED);
	jsons[n] = np_request_encode(h->req, &len);
	req_path(h, paths[n], sizeof(paths[n]));
	ops[n].type = ZK_MULTI_SET;
	ops[n].path = paths[n];
	ops[n].data = jsons[n];
	ops[n].len = (int)len;
	ops[n].version = h->req_version;
	ops[n].record = h->req;
	nops = (int)n + 1 + unlock_ops(h, ops, (int)n + 1, unlocks);
	locks = lc_handler_locks(h, &nlocks);
	lc_multi_under(h->lc, locks, nlocks, ops, nops, fast_done, hop_new(h, (size_t)-1));
	free(locks);
	free(unlocks);
	for (i = 0; i <= n; i++)
		free(jsons[i]);
	free(jsons);
	free(paths);
	free(ops);
}

/* Once every node's lock (and reuse check) is settled: commit or fall back. */
static void
fast_settle(struct handler *h)
{
	size_t i;

	for (i = 0; i < h->n_nodes; i++)
		if (hn_in_flight(&h->nodes[i]))
			return;
	if (h->vanished || h->fast_failed) {
		fast_fallback(h);
		return;
	}
	fast_commit(h);
}

static void
fast_checked(const char *node_id, int ok, void *arg)
{
	struct hop *o = arg;
	struct handler *h;
	size_t i;

	if (hop_done(o, &h, &i))
		return;
	h->nodes[i].state = HN_SETTLED;
	if (!ok)
		h->fast_failed = 1; /* the full sequence removes a dead node */
	fast_settle(h);
}

static void
fast_locked(struct zk_lock *lock, int rc, void *arg)
{
	struct hop *o = arg;
	struct handler *h;
	size_t i;
	struct launcher *lc;

	if (hop_done(o, &h, &i))
		return;
	lc = h->lc;
	if (rc != ZOK || h->vanished || h->fast_failed) {
		h->nodes[i].state = HN_SETTLED;
		h->fast_failed = 1;
		fast_settle(h);
		return;
	}
	if (lc->prov.drv->check_reusable != NULL && lc->prov.dp != NULL) {
		h->nodes[i].state = HN_CHECKING;
		lc->prov.drv->check_reusable(lc->prov.dp, h->nodes[i].node, fast_checked,
					     hop_new(h, i));
		return;
	}
	h->nodes[i].state = HN_SETTLED;
	fast_settle(h);
}

/* Try the fast path; 0 if it does not apply (nothing has been changed). */
static int
fast_start(struct handler *h)
{
	struct launcher *lc = h->lc;
	const struct zk_cache_entry *e = zk_cache_get(lc->requests, h->req_id), *ne;
	const struct np_request *r = e != NULL ? e->obj : NULL;
	const char **picked;
	size_t i, j, n;
	char path[128];

	if (!lc->prov.drv->reuse_only || r == NULL || r->state != NP_REQ_REQUESTED ||
	    r->node_types.n == 0 || np_strv_contains(&r->declined_by, h->pool->launcher_id) ||
	    lc_assign_decline_reason(h->pool, r) != NULL)
		return 0;
	/* a tenant with limits: allocations decided in quota rounds */
	if (lc_tenant_limit(lc, r->tenant_name) != NULL)
		return 0;
	n = r->node_types.n;
	picked = calloc(n, sizeof(*picked));
	if (picked == NULL)
		abort();
	/* pick distinct nodes for every label, or give up; grouping by AZ,
	 * the first picked node with an az fixes it for the others (the
	 * picks all succeed or the full sequence starts over) */
	for (i = 0; i < n; i++) {
		picked[i] = find_reusable(h, r->node_types.v[i]);
		for (j = 0; picked[i] != NULL && j < i; j++)
			if (strcmp(picked[j], picked[i]) == 0)
				picked[i] = NULL;
		if (picked[i] == NULL)
			break;
		lc_busy_add(lc, picked[i]); /* so the next label picks another */
		ne = zk_cache_get(lc->nodes, picked[i]);
		if (az_grouping(h) && h->chosen_az == NULL && ne != NULL && ne->obj != NULL) {
			const char *az = np_node_sum_az(LC_SUM(ne));
			if (az != NULL && *az != '\0')
				h->chosen_az = strdup(az);
		}
	}
	if (i < n) {
		for (j = 0; j < i; j++)
			lc_busy_del(lc, picked[j]);
		free(picked);
		az_reset(h);
		return 0;
	}
	if (h->chosen_az != NULL)
		h->az_firm = 1; /* all of them are taken together or none */
	h->req = np_request_dup(r);
	h->req_version = e->stat.version;
	h->min_ready = r->requestor != NULL && strcmp(r->requestor, "NodePool:min-ready") == 0;
	h->n_nodes = n;
	h->nodes = calloc(n, sizeof(*h->nodes));
	if (h->nodes == NULL)
		abort();
	h->state = H_FAST;
	for (i = 0; i < n; i++) {
		struct hnode *hn = &h->nodes[i];
		ne = zk_cache_get(lc->nodes, picked[i]);
		hn->label = strdup(r->node_types.v[i]);
		hn->node_id = strdup(picked[i]);
		hn->node = np_node_dup(np_node_sum_full(LC_SUM(ne)));
		hn->version = ne->stat.version;
		hn->state = HN_LOCKING;
	}
	free(picked);
	for (i = 0; i < n; i++) {
		node_lock_path(h->nodes[i].node_id, path, sizeof(path));
		h->nodes[i].lock =
		    zk_lock_new(lc->zk, path, NULL, ZK_LOCK_NO_RESURRECT | ZK_LOCK_NEW_DIR);
		zk_lock_acquire(h->nodes[i].lock, 0, fast_locked, hop_new(h, i));
	}
	return 1;
}

static void
slow_read(struct handler *h)
{
	char path[160];

	h->state = H_READING;
	req_path(h, path, sizeof(path));
	zk_get(h->lc->zk, path, NULL, NULL, request_read, hop_new(h, (size_t)-1));
}

static void
request_locked(struct zk_lock *lock, int rc, void *arg)
{
	struct hop *o = arg;
	struct handler *h;

	if (hop_done(o, &h, NULL))
		return;
	if (rc != ZOK) {
		h->lc->counters.req_lock_lost++;
		lc_handler_finish(h); /* another launcher has it */
		return;
	}
	if (h->vanished) {
		release_request_lock(h);
		return;
	}
	if (fast_start(h))
		return;
	slow_read(h);
}

/* ---- lock and accept in one round trip (launching drivers) ---------------- *
 *
 * Today's sequence is three dependent round trips: the request lock (its
 * dir and our contender in one multi), a re-read of the request under it,
 * and `pending` written. When the request is in the cache as `requested`
 * and this pool would accept it as the cache shows it, `pending` rides in
 * the lock's multi, guarded by the version the cache showed: the decision
 * is made on exactly the record the write replaces (upstream decides on
 * the record read under the lock, the same one unless it changed, and a
 * change fails the version). If the multi is refused (another launcher
 * made the lock dir, the request changed or is gone) nothing of it is
 * made and the lock is taken as usual: the full sequence follows.
 * Reuse-only drivers keep their own one-round-trip fulfilment (fast_start:
 * requested -> fulfilled, no `pending` write).
 */

/* ---- launches decided at the accept (issue 25) ---------------------------- *
 *
 * After the accept, a launch costs two more dependent round trips before
 * the cloud is asked: the INIT node's create, then its lock with
 * `building`. When the accept's multi is sent (accept_with_lock) and
 * run() would launch every node of the nodeset at once right then (a
 * quota round can be opened on the spot, lc_quota_enter, and choose()
 * says launch for each node, each counting the reservations of those
 * before it, as run() does), the INIT creates ride in that multi: the
 * request is locked, `pending` and its nodes made in one transaction,
 * and each node is taken (locked and written `building`) from its reply.
 * Refused (another launcher made the lock dir, the request changed),
 * nothing of it was made: the reservations are dropped, the nodes
 * forgotten, and the usual sequence follows. The nodes are INIT and
 * unlocked until taken, as after an ordinary create: nothing cleans up
 * an INIT node of a live request, and a node is written `building` only
 * under its lock (upstream's rule, driver/__init__.py).
 */

/* Forget the nodes planned for the accept's multi: it made nothing (or,
 * unknown, the next round waits for a re-synced view: quota.c). */
static void
plan_drop(struct handler *h, int unknown)
{
	size_t i;

	for (i = 0; i < h->n_nodes; i++) {
		struct hnode *hn = &h->nodes[i];
		lc_quota_create_done(h->lc, hn->qres, NULL, unknown);
		hn->qres = NULL;
		np_node_free(hn->node);
		free(hn->label);
	}
	free(h->nodes);
	h->nodes = NULL;
	h->n_nodes = 0;
	h->accept_launches = 0;
	az_reset(h);
}

/* Inside an open quota round: plan a launch of every node (1), or none
 * (0, nothing kept). */
static int
plan_launches(struct handler *h)
{
	const char *id;
	size_t i;

	nodes_init(h);
	for (i = 0; i < h->n_nodes; i++) {
		if (choose(h, i, &id) != CHOOSE_LAUNCH) {
			plan_drop(h, 0);
			return 0;
		}
		launch_prepare(h, i);
	}
	h->accept_launches = h->n_nodes > 0;
	return h->accept_launches;
}

/* The accept's multi made the nodes too: take each (created: lock and
 * `building`; its name lost with the answer: looked for once the view is
 * re-synced, as a create whose reply was lost). */
static void
accept_launched(struct handler *h, const struct zk_multi_result *res, int n)
{
	size_t i;
	const char *name;

	h->accept_launches = 0;
	for (i = 0; i < h->n_nodes && h->state != H_DONE; i++) {
		struct hnode *hn = &h->nodes[i];
		name = (int)i + 1 < n && res[i + 1].path != NULL ? strrchr(res[i + 1].path, '/')
								 : NULL;
		if (name != NULL) {
			new_node_take(h, i, name + 1);
			continue;
		}
		log_warn("request %s: the node for %s was created with the accept, its name lost "
			 "with the connection; looking for it",
			 h->req_id, hn->label);
		hn->create_unknown = 1;
		hn->create_epoch = h->lc->sync_epoch;
	}
	/* already re-synced since (the lock's own look came after): now */
	h->ops++;
	for (i = 0; lc_in_sync(h->lc) && i < h->n_nodes && h->state != H_DONE; i++)
		if (h->nodes[i].state == HN_CREATING && h->nodes[i].create_unknown)
			find_own_create(h, i);
	h->ops--;
	if (h->state == H_DONE && h->ops == 0) {
		if (h->detached)
			TAILQ_REMOVE(&h->lc->zombies, h, entry);
		lc_handler_destroy(h);
	}
}

static void
request_locked_accepting(struct zk_lock *lock, int rc, void *arg)
{
	struct hop *o = arg;
	struct handler *h;
	const struct zk_multi_result *res;
	int n;

	if (hop_done(o, &h, NULL))
		return;
	if (rc != ZOK) {
		/* not held: the multi did not land, unless its answer was lost
		 * and the session with it (unknown: quota.c waits for a view) */
		if (h->accept_launches) {
			log_info("request %s: accept with %zu launch(es) not applied (%s); "
				 "another launcher has it",
				 h->req_id, h->n_nodes, zk_strerror(rc));
			plan_drop(h, 1);
		}
		np_request_free(h->req);
		h->req = NULL;
		h->lc->counters.req_lock_lost++;
		lc_handler_finish(h); /* another launcher has it */
		return;
	}
	if (!zk_lock_applied(lock, &res, &n)) {
		/* not accepted: as if locked the usual way */
		if (h->accept_launches) {
			log_info("request %s: accept with %zu launch(es) not applied; in turn",
				 h->req_id, h->n_nodes);
			plan_drop(h, 1);
		}
		np_request_free(h->req);
		h->req = NULL;
		if (h->vanished) {
			release_request_lock(h);
			return;
		}
		slow_read(h);
		return;
	}
	if (res[0].ctime_ms > 0)
		log_debug("request %s: locked and read (created %.0f ms before; accepted with "
			  "the lock%s)",
			  h->req_id, lc_now() * 1000 - (double)res[0].ctime_ms,
			  h->accept_launches ? " and its nodes made" : "");
	if (h->accept_launches) {
		h->lc->counters.accept_launched++;
		/* the nodes exist: taken and launched even if the request
		 * went meanwhile (vanish_step lets launches finish, their
		 * nodes then reusable), as a create answered after it went */
		h->req_version = res[0].version;
		h->lc->counters.accepted++;
		h->state = H_RUNNING;
		log_debug("request %s accepted by pool %s", h->req_id, h->pool->name);
		accept_launched(h, res, n);
		return;
	}
	if (h->vanished) {
		release_request_lock(h); /* pending, unlocked: as a cancelled accept */
		return;
	}
	accept_go(h, res[0].version);
}

/* Lock and accept at once; 0 if that does not apply (nothing changed). */
static int
accept_with_lock(struct handler *h)
{
	struct launcher *lc = h->lc;
	const struct zk_cache_entry *e = zk_cache_get(lc->requests, h->req_id);
	const struct np_request *r = e != NULL ? e->obj : NULL;
	struct zk_multi_op *ops;
	char path[160];
	char **jsons;
	size_t i, jlen;
	int nops, round;

	if (lc->prov.drv->reuse_only || r == NULL || r->state != NP_REQ_REQUESTED ||
	    np_strv_contains(&r->declined_by, h->pool->launcher_id) ||
	    lc_assign_decline_reason(h->pool, r) != NULL)
		return 0;
	h->req = np_request_dup(r);
	h->min_ready = r->requestor != NULL && strcmp(r->requestor, "NodePool:min-ready") == 0;
	np_request_set_state(h->req, NP_REQ_PENDING);
	/* the launches too, if they can be decided now (a round open on the
	 * spot, and sent before it closes) */
	round = h->req->node_types.n > 0 && lc_quota_enter(lc);
	if (round && !plan_launches(h)) {
		lc_quota_leave(lc);
		round = 0;
	}
	nops = 1 + (int)(h->accept_launches ? h->n_nodes : 0);
	ops = calloc((size_t)nops, sizeof(*ops));
	jsons = calloc((size_t)nops, sizeof(*jsons));
	if (ops == NULL || jsons == NULL)
		abort();
	jsons[0] = np_request_encode(h->req, &jlen);
	req_path(h, path, sizeof(path));
	ops[0].type = ZK_MULTI_SET;
	ops[0].path = path;
	ops[0].data = jsons[0];
	ops[0].len = (int)jlen;
	ops[0].version = e->stat.version;
	ops[0].record = h->req; /* the cache copies it (lc_set_record_under) */
	for (i = 1; i < (size_t)nops; i++) {
		jsons[i] = np_node_encode(h->nodes[i - 1].node, &jlen);
		ops[i].type = ZK_MULTI_CREATE;
		ops[i].path = "/nodepool/nodes/";
		ops[i].data = jsons[i];
		ops[i].len = (int)jlen;
		ops[i].flags = ZOO_SEQUENCE;
	}
	for (i = 1; i < (size_t)nops; i++)
		metrics_launch_phase(h->pool->prov->name, METRICS_PHASE_QUOTA_WAIT,
				     lc_monotonic() - h->started);
	if (h->accept_launches)
		log_debug("request %s: %zu launch(es) decided with its accept", h->req_id,
			  h->n_nodes);
	lc_lock_acquire_with(lc, h->req_lock, ops, nops, request_locked_accepting,
			     hop_new(h, (size_t)-1));
	if (round)
		lc_quota_leave(lc);
	for (i = 0; i < (size_t)nops; i++)
		free(jsons[i]);
	free(jsons);
	free(ops);
	return 1;
}

void
lc_handler_start(struct handler *h)
{
	char path[160];

	h->state = H_LOCKING;
	log_debug("request %s: seen by pool %s; locking", h->req_id, h->pool->name);
	snprintf(path, sizeof(path), "/nodepool/requests-lock/%s", h->req_id);
	/* Zuul never locks a request: unless another launcher tried it
	 * first, its lock dir is new */
	h->req_lock = zk_lock_new(h->lc->zk, path, NULL, ZK_LOCK_NEW_DIR);
	h->lc->counters.req_lock_attempts++;
	if (accept_with_lock(h))
		return;
	zk_lock_acquire(h->req_lock, 0, request_locked, hop_new(h, (size_t)-1));
}
