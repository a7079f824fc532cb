/*
 * Periodic and event-driven cleanup, as upstream Nodepool's CleanupWorker
 * (every 60 s: request-lock GC, lost requests, max-ready-age,
 * max-hold-age, empty node znodes) and DeletedNodeWorker (every 5 s:
 * orphan allocations, deletion of unlocked nodes in cleanup states) —
 * reference section 2.7. The deletion pass also runs as soon as the node
 * cache reports a node released, so a used node is recycled at once.
 *
 * Nodes of other providers are left alone, as upstream.
 */
#include "worker/launcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/log.h"
#include "lib/core/strset.h"

static int
ours(struct launcher *lc, const struct np_node *n)
{
	return n != NULL && n->provider != NULL && strcmp(n->provider, lc->prov.name) == 0;
}

static int
lc_cleanup_state(int st)
{
	switch (st) {
	case NP_NODE_USED:
	case NP_NODE_IN_USE:
	case NP_NODE_BUILDING:
	case NP_NODE_FAILED:
	case NP_NODE_DELETING:
	case NP_NODE_DELETED:
	case NP_NODE_ABORTED:
		return 1;
	default:
		return 0;
	}
}

/* ---- deleting one node ------------------------------------------------------ */

struct ndel {
	struct launcher *lc;
	char *id;
	struct zk_lock *lock;
	struct np_node *node;
	struct drv_delete d;
	/* 0 cleanup state; 1 READY node (age, capacity); 2 HOLD expired;
	 * 3 INIT node whose request is gone or failed (orphan_inits) */
	int why;
	int instance_only; /* lc_cleanup_delete_instance: no record to touch */
};

static void
ndel_cleanup(void *p)
{
	struct ndel *x = p;

	zk_lock_free(x->lock);
	np_node_free(x->node);
	free(x->id);
}

/*
 * The node is gone from ZooKeeper (by either delete path): count it, tell
 * the launcher and the driver, and free the deletion's context `x`.
 */
static void
ndel_done(struct ndel *x)
{
	struct launcher *lc = x->lc;

	lc->counters.deleted++;
	log_debug("node %s deleted", x->id);
	lc_node_deleted(lc, x->id, 1);
	if (lc->prov.dp != NULL && lc->prov.drv->node_deleted != NULL)
		lc->prov.drv->node_deleted(lc->prov.dp, x->node);
	lc_busy_del(lc, x->id);
	ndel_cleanup(x);
	lc_ctx_free(lc, x);
	if (lc->on_change != NULL)
		lc->on_change(lc);
}

static void
ndel_abort(struct ndel *x)
{
	lc_busy_del(x->lc, x->id);
	ndel_cleanup(x);
	lc_ctx_free(x->lc, x);
}

/* The host's delete_done service (drivers/host.h): drv_delete_done. */
void
lc_host_delete_done(struct drv_delete *d, int ok, const char *error)
{
	struct ndel *x = (struct ndel *)((char *)d - offsetof(struct ndel, d));
	struct launcher *lc = x->lc;

	if (x->instance_only) {
		if (!ok)
			lc_set_error(lc,
				     "deleting instance %s of node %s: %s (leak cleanup takes it)",
				     x->node->external_id, x->id, error ? error : "unknown error");
		ndel_cleanup(x);
		lc_ctx_free(lc, x);
		return;
	}
	if (!ok) {
		lc_set_error(lc, "deleting node %s: %s (retrying later)", x->id,
			     error ? error : "unknown error");
		ndel_abort(x); /* left `deleting` and unlocked: retried */
		return;
	}
	lc_delete_node_record(lc, x->node, x->lock); /* takes both, clears busy */
	free(x->id);
	lc_ctx_free(lc, x);
}

static void
ndel_stored(int rc, const struct zk_stat *st, void *arg)
{
	struct ndel *x = arg;
	struct launcher *lc = x->lc;

	if (rc != ZOK) {
		ndel_abort(x);
		return;
	}
	if (lc->prov.drv->node_delete == NULL || lc->prov.dp == NULL) {
		lc_host_delete_done(&x->d, 1, NULL);
		return;
	}
	x->d.node = x->node;
	lc->prov.drv->node_delete(lc->prov.dp, &x->d);
}

void
lc_cleanup_delete_instance(struct launcher *lc, struct np_node *n)
{
	struct ndel *x;

	if (lc->prov.drv->node_delete == NULL || lc->prov.dp == NULL || n->external_id == NULL) {
		np_node_free(n);
		return;
	}
	x = lc_ctx_new(lc, sizeof(*x), ndel_cleanup);
	x->lc = lc;
	x->id = strdup(n->id != NULL ? n->id : "?");
	x->node = n;
	x->instance_only = 1;
	x->d.node = x->node;
	log_info("node %s: deleting instance %s, made by a launch whose node lock was refused",
		 x->id, n->external_id);
	lc->prov.drv->node_delete(lc->prov.dp, &x->d);
}

/* x->node, read under the lock, is still what the deletion was for. */
static int
ndel_wanted(const struct ndel *x)
{
	int ns = x->node->state;

	if (x->why == 0)
		return lc_cleanup_state(ns);
	if (x->why == 1)
		return ns == NP_NODE_READY && x->node->allocated_to == NULL;
	if (x->why == 3)
		return ns == NP_NODE_INIT;
	return ns == NP_NODE_HOLD;
}

static void
ndel_read(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct ndel *x = arg;
	struct launcher *lc = x->lc;
	char err[200];

	if (rc != ZOK || len == 0 ||
	    np_node_decode(x->id, data, (size_t)len, &x->node, err, sizeof(err)) != 0) {
		if (rc == ZOK && len == 0) {
			/* an empty record (upstream's _cleanupEmptyNodes); one
			 * that is not a JSON object is someone else's and is
			 * left alone */
			log_warn("node %s: removing empty record", x->id);
			x->node = np_node_new();
			x->node->id = strdup(x->id);
			lc_delete_node_record(lc, x->node, x->lock);
			free(x->id);
			lc_ctx_free(lc, x);
			return;
		}
		ndel_abort(x);
		return;
	}
	if (!ndel_wanted(x)) {
		ndel_abort(x); /* changed under us */
		return;
	}
	if (x->node->state == NP_NODE_DELETED || x->node->provider == NULL) {
		lc_delete_node_record(lc, x->node, x->lock);
		free(x->id);
		lc_ctx_free(lc, x);
		return;
	}
	log_info("deleting node %s (%s, was %s)", x->id, x->node->type.n ? x->node->type.v[0] : "?",
		 np_node_state_name(x->node->state));
	np_node_set_state(x->node, NP_NODE_DELETING);
	lc_store_node(lc, x->node, x->lock, ndel_stored, x);
}

static void
ndel_slow(struct ndel *x)
{
	char path[128];

	snprintf(path, sizeof(path), "/nodepool/nodes/%s", x->id);
	zk_get(x->lc->zk, path, NULL, NULL, ndel_read, x);
}

static void
ndel_fast_done(int rc, int count, const struct zk_multi_result *res, void *arg)
{
	struct ndel *x = arg;
	struct launcher *lc = x->lc;

	if (rc != ZOK) {
		/* changed under us, or someone else contends: the full path */
		lc_node_deleted(lc, x->id, 0);
		np_node_free(x->node);
		x->node = NULL;
		ndel_slow(x);
		return;
	}
	zk_lock_disown(x->lock); /* our contender went with the node */
	ndel_done(x);
}

/*
 * Send the one-round-trip delete of node x->id: a multi that checks the
 * node is still the version `e` (the cache's entry) showed, then deletes
 * our lock contender `me` (NULL: we hold none), the lock dir and the node.
 * `n` is the node's summary (copied into x->node). `done` gets the multi's
 * results; with a contender, the multi runs under x->lock.
 */
static void
ndel_multi(struct ndel *x, const struct zk_cache_entry *e, const struct np_node *n, const char *me,
	   zk_multi_cb done)
{
	struct launcher *lc = x->lc;
	char node[128], dir[160], mine[320];
	struct zk_multi_op ops[4];
	int k = 0;

	snprintf(node, sizeof(node), "/nodepool/nodes/%s", x->id);
	snprintf(dir, sizeof(dir), "%s/lock", node);
	memset(ops, 0, sizeof(ops));
	ops[k].type = ZK_MULTI_CHECK;
	ops[k].path = node;
	ops[k++].version = e->stat.version;
	if (me != NULL) {
		snprintf(mine, sizeof(mine), "%s/%s", dir, me);
		ops[k].type = ZK_MULTI_DELETE;
		ops[k].path = mine;
		ops[k++].version = -1;
	}
	ops[k].type = ZK_MULTI_DELETE;
	ops[k].path = dir;
	ops[k++].version = -1;
	ops[k].type = ZK_MULTI_DELETE;
	ops[k].path = node;
	ops[k++].version = -1;
	x->node = np_node_dup(n);
	log_info("deleting node %s (%s, was %s)", x->id, n->type.n ? n->type.v[0] : "?",
		 np_node_state_name(n->state));
	lc_node_deleting(lc, x->id);
	if (me != NULL)
		lc_multi_under(lc, &x->lock, 1, ops, k, done, x);
	else
		lc_multi_under(lc, NULL, 0, ops, k, done, x);
}

/*
 * A node in a cleanup state whose driver has nothing to delete (static):
 * remove it in one round trip — a multi that checks the node is the version
 * the cache showed and deletes our lock contender, the lock dir and the
 * node together. Upstream writes `deleting`, then `deleted`, then deletes
 * the tree piece by piece; the node vanishes atomically here instead.
 */
static int
ndel_fast(struct ndel *x)
{
	struct launcher *lc = x->lc;
	const struct zk_cache_entry *e = zk_cache_get(lc->nodes, x->id);
	const struct np_node *n = e != NULL && e->obj != NULL ? np_node_sum_full(LC_SUM(e)) : NULL;
	const char *me = zk_lock_contender(x->lock);

	if (x->why != 0 || lc->prov.drv->node_delete != NULL || n == NULL || me == NULL ||
	    !lc_cleanup_state(n->state) || n->state == NP_NODE_BUILDING)
		return 0;
	ndel_multi(x, e, n, me, ndel_fast_done);
	return 1;
}

static void ndel_locked(struct zk_lock *lock, int rc, void *arg);

/*
 * Before taking the lock: a node whose cached lock has no contender,
 * deleted with its lock dir in one multi that checks the node is the
 * version the cache showed; the dir's delete fails (ZNOTEMPTY) if anyone
 * holds the lock or is taking it, so nobody can have the lock when the
 * node goes, as if we had held it (issue 25: the lock's create and
 * listing, two requests per node). Any failure: the locked way.
 */
static void
ndel_bare_done(int rc, int count, const struct zk_multi_result *res, void *arg)
{
	struct ndel *x = arg;
	struct launcher *lc = x->lc;

	if (rc != ZOK) {
		lc_node_deleted(lc, x->id, 0);
		np_node_free(x->node);
		x->node = NULL;
		zk_lock_acquire(x->lock, 0, ndel_locked, x);
		return;
	}
	ndel_done(x);
}

static int
ndel_bare(struct ndel *x)
{
	struct launcher *lc = x->lc;
	const struct zk_cache_entry *e = zk_cache_get(lc->nodes, x->id);
	const struct np_node *n = e != NULL && e->obj != NULL ? np_node_sum_full(LC_SUM(e)) : NULL;

	if (x->why != 0 || lc->prov.drv->node_delete != NULL || n == NULL || e->locked != 0 ||
	    !lc_cleanup_state(n->state) || n->state == NP_NODE_BUILDING ||
	    !zk_cache_synced(lc->nodes))
		return 0;
	ndel_multi(x, e, n, NULL, ndel_bare_done);
	return 1;
}

/*
 * Under the lock upstream re-reads the node, then writes `deleting`. When
 * the cache holds our node's full record, the write goes at once, guarded
 * by the version the cache showed (issue 25: the re-read costs the server
 * a request a node, and the deletion a round trip): the decision is made
 * on exactly the record the write replaces, and a record changed since
 * fails the version; the re-read follows then.
 */
static void
ndel_cached_stored(int rc, const struct zk_stat *st, void *arg)
{
	struct ndel *x = arg;

	if (rc == ZBADVERSION) {
		log_debug("node %s: changed since cached; reading it", x->id);
		np_node_free(x->node);
		x->node = NULL;
		ndel_slow(x);
		return;
	}
	ndel_stored(rc, st, arg);
}

static int
ndel_cached(struct ndel *x)
{
	struct launcher *lc = x->lc;
	const struct zk_cache_entry *e = zk_cache_get(lc->nodes, x->id);
	const struct np_node *n = e != NULL && e->obj != NULL ? np_node_sum_full(LC_SUM(e)) : NULL;
	char path[128];
	char *json;
	size_t len;

	if (n == NULL || e->stat.version < 0 || n->state == NP_NODE_DELETED ||
	    n->provider == NULL || !zk_cache_synced(lc->nodes))
		return 0;
	x->node = np_node_dup(n);
	if (!ndel_wanted(x)) {
		np_node_free(x->node); /* the re-read decides */
		x->node = NULL;
		return 0;
	}
	log_info("deleting node %s (%s, was %s)", x->id, x->node->type.n ? x->node->type.v[0] : "?",
		 np_node_state_name(x->node->state));
	np_node_set_state(x->node, NP_NODE_DELETING);
	json = np_node_encode(x->node, &len);
	snprintf(path, sizeof(path), "/nodepool/nodes/%s", x->id);
	lc_set_record_under(lc, &x->lock, 1, path, json, (int)len, x->node, e->stat.version,
			    ndel_cached_stored, x);
	free(json);
	return 1;
}

static void
ndel_locked(struct zk_lock *lock, int rc, void *arg)
{
	struct ndel *x = arg;

	if (rc != ZOK) {
		ndel_abort(x);
		return;
	}
	if (!ndel_fast(x) && !ndel_cached(x))
		ndel_slow(x);
}

static void
delete_node(struct launcher *lc, const char *node_id, int why)
{
	struct ndel *x;
	char path[128];

	if (lc_busy(lc, node_id))
		return;
	x = lc_ctx_new(lc, sizeof(*x), ndel_cleanup);
	x->lc = lc;
	x->id = strdup(node_id);
	x->why = why;
	lc_busy_add(lc, node_id);
	snprintf(path, sizeof(path), "/nodepool/nodes/%s/lock", node_id);
	x->lock = zk_lock_new(lc->zk, path, NULL, ZK_LOCK_NO_RESURRECT);
	if (!ndel_bare(x))
		zk_lock_acquire(x->lock, 0, ndel_locked, x);
}

void
lc_cleanup_delete_node(struct launcher *lc, const char *node_id)
{
	delete_node(lc, node_id, 1);
}

/* ---- orphan allocations --------------------------------------------------- */

struct dealloc {
	struct launcher *lc;
	char *id;
	struct zk_lock *lock;
};

static void
dealloc_cleanup(void *p)
{
	struct dealloc *x = p;

	zk_lock_free(x->lock);
	free(x->id);
}

static void
dealloc_finish(struct dealloc *x)
{
	lc_busy_del(x->lc, x->id);
	dealloc_cleanup(x);
	lc_ctx_free(x->lc, x);
}

static void
dealloc_stored(int rc, const struct zk_stat *st, void *arg)
{
	dealloc_finish(arg);
}

static void
dealloc_read(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct dealloc *x = arg;
	struct np_node *n = NULL;
	char err[200];

	if (rc != ZOK || np_node_decode(x->id, data, (size_t)len, &n, err, sizeof(err)) != 0 ||
	    n->allocated_to == NULL || lc_request(x->lc, n->allocated_to) != NULL) {
		np_node_free(n);
		dealloc_finish(x);
		return;
	}
	log_info("node %s: clearing allocation to vanished request %s", x->id, n->allocated_to);
	free(n->allocated_to);
	n->allocated_to = NULL;
	lc_store_node(x->lc, n, x->lock, dealloc_stored, x);
	np_node_free(n);
}

static void
dealloc_locked(struct zk_lock *lock, int rc, void *arg)
{
	struct dealloc *x = arg;
	char path[128];

	if (rc != ZOK) {
		dealloc_finish(x);
		return;
	}
	snprintf(path, sizeof(path), "/nodepool/nodes/%s", x->id);
	zk_get(x->lc->zk, path, NULL, NULL, dealloc_read, x);
}

static void
deallocate_orphan(struct launcher *lc, const char *node_id)
{
	struct dealloc *x;
	char path[128];

	if (lc_busy(lc, node_id))
		return;
	x = lc_ctx_new(lc, sizeof(*x), dealloc_cleanup);
	x->lc = lc;
	x->id = strdup(node_id);
	lc_busy_add(lc, node_id);
	snprintf(path, sizeof(path), "/nodepool/nodes/%s/lock", node_id);
	x->lock = zk_lock_new(lc->zk, path, NULL, ZK_LOCK_NO_RESURRECT);
	zk_lock_acquire(x->lock, 0, dealloc_locked, x);
}

/* As DeletedNodeWorker: orphan allocations, then unlocked nodes in cleanup
 * states. */
void
lc_delete_pass(struct launcher *lc)
{
	const struct zk_cache_entry *const *ents;
	int i, n = zk_cache_entries(lc->nodes, &ents);

	for (i = 0; i < n; i++) {
		const struct np_node *nd =
		    LC_SUM(ents[i]) ? np_node_sum_full(LC_SUM(ents[i])) : NULL;
		if (!ours(lc, nd) || ents[i]->locked > 0 || lc_busy(lc, nd->id))
			continue;
		if (nd->state == NP_NODE_READY && nd->allocated_to != NULL &&
		    lc_request(lc, nd->allocated_to) == NULL && zk_cache_synced(lc->requests))
			deallocate_orphan(lc, nd->id);
		else if (lc_cleanup_state(nd->state) && !lc_node_awaits_adoption(lc, nd))
			delete_node(lc, nd->id, 0);
	}
}

/* ---- lost requests (reference 2.7) ------------------------------------------ */

struct lost {
	struct launcher *lc;
	char *id;
	struct zk_lock *lock;
	struct np_request *req;
	int waiting; /* node resets in flight */
};

static void
lost_cleanup(void *p)
{
	struct lost *x = p;

	zk_lock_free(x->lock);
	np_request_free(x->req);
	free(x->id);
}

static void
lost_finish(struct lost *x)
{
	lost_cleanup(x);
	lc_ctx_free(x->lc, x);
}

static void
lost_stored(int rc, const struct zk_stat *st, void *arg)
{
	struct lost *x = arg;

	if (rc == ZOK)
		log_info("request %s: reset lost request to requested", x->id);
	lost_finish(x);
}

static void
lost_store(struct lost *x)
{
	char path[160];
	char *json;
	size_t len;

	np_request_set_state(x->req, NP_REQ_REQUESTED);
	np_strv_clear(&x->req->nodes);
	snprintf(path, sizeof(path), "/nodepool/requests/%s", x->id);
	json = np_request_encode(x->req, &len);
	lc_set_record_under(x->lc, &x->lock, 1, path, json, (int)len, x->req, -1, lost_stored, x);
	free(json);
}

struct lost_node {
	struct lost *x;
	char *id;
	struct zk_lock *lock;
};

static void
lost_node_cleanup(void *p)
{
	struct lost_node *y = p;

	zk_lock_free(y->lock);
	free(y->id);
}

static void
lost_node_done(struct lost_node *y)
{
	struct lost *x = y->x;

	lc_busy_del(x->lc, y->id);
	lost_node_cleanup(y);
	lc_ctx_free(x->lc, y);
	if (--x->waiting == 0)
		lost_store(x);
}

static void
lost_node_stored(int rc, const struct zk_stat *st, void *arg)
{
	lost_node_done(arg);
}

static void
lost_node_read(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct lost_node *y = arg;
	struct np_node *n = NULL;
	char err[200];

	if (rc != ZOK || np_node_decode(y->id, data, (size_t)len, &n, err, sizeof(err)) != 0 ||
	    n->allocated_to == NULL || strcmp(n->allocated_to, y->x->id) != 0) {
		np_node_free(n);
		lost_node_done(y);
		return;
	}
	if (n->state == NP_NODE_BUILDING &&
	    (lc_node_adoptable(y->x->lc, n) || n->provider == NULL ||
	     strcmp(n->provider, y->x->lc->prov.name) != 0)) {
		/* the lost launcher's launch goes on: the request keeps the
		 * node, and whoever takes the request again adopts it
		 * (upstream clears the allocation; the node is then deleted).
		 * Another provider's building node is its own workers' to
		 * judge (only its driver knows whether it can resume it; when
		 * not, their delete pass removes it, unlocked): a lost request
		 * wanting two providers' labels is reset by whichever worker
		 * sees it first. */
		np_node_free(n);
		lost_node_done(y);
		return;
	}
	if (n->state == NP_NODE_INIT)
		np_node_set_state(n, NP_NODE_DELETING);
	free(n->allocated_to);
	n->allocated_to = NULL;
	lc_store_node(y->x->lc, n, y->lock, lost_node_stored, y);
	np_node_free(n);
}

static void
lost_node_locked(struct zk_lock *lock, int rc, void *arg)
{
	struct lost_node *y = arg;
	char path[128];

	if (rc != ZOK) {
		lost_node_done(y);
		return;
	}
	snprintf(path, sizeof(path), "/nodepool/nodes/%s", y->id);
	zk_get(y->x->lc->zk, path, NULL, NULL, lost_node_read, y);
}

static void
lost_read(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct lost *x = arg;
	struct launcher *lc = x->lc;
	const struct zk_cache_entry *const *ents;
	char err[200], path[128];
	int i, n;

	if (rc != ZOK ||
	    np_request_decode(x->id, data, (size_t)len, &x->req, err, sizeof(err)) != 0 ||
	    x->req->state != NP_REQ_PENDING) {
		lost_finish(x);
		return;
	}
	/* Every node allocated to it: locked (5 s: Zuul may hold one
	 * briefly), INIT ones set deleting, allocation cleared. */
	x->waiting = 1;
	n = zk_cache_entries(lc->nodes, &ents);
	for (i = 0; i < n; i++) {
		const struct np_node_sum *nd = LC_SUM(ents[i]);
		struct lost_node *y;
		const char *alloc = nd != NULL ? np_node_sum_allocated_to(nd) : NULL;
		if (alloc == NULL || strcmp(alloc, x->id) != 0 || lc_busy(lc, ents[i]->name))
			continue;
		y = lc_ctx_new(lc, sizeof(*y), lost_node_cleanup);
		y->x = x;
		y->id = strdup(ents[i]->name);
		lc_busy_add(lc, y->id);
		snprintf(path, sizeof(path), "/nodepool/nodes/%s/lock", ents[i]->name);
		y->lock = zk_lock_new(lc->zk, path, NULL, ZK_LOCK_NO_RESURRECT);
		x->waiting++;
		zk_lock_acquire(y->lock, 5.0, lost_node_locked, y);
	}
	if (--x->waiting == 0)
		lost_store(x);
}

static void
lost_locked(struct zk_lock *lock, int rc, void *arg)
{
	struct lost *x = arg;
	char path[160];

	if (rc != ZOK) {
		lost_finish(x); /* its owner is alive */
		return;
	}
	snprintf(path, sizeof(path), "/nodepool/requests/%s", x->id);
	zk_get(x->lc->zk, path, NULL, NULL, lost_read, x);
}

static void
lc_cleanup_lost_requests(struct launcher *lc)
{
	const struct zk_cache_entry *const *ents;
	int i, n = zk_cache_entries(lc->requests, &ents);
	char path[160];

	for (i = 0; i < n; i++) {
		const struct np_request *r = ents[i]->obj;
		struct lost *x;
		if (r == NULL || r->state != NP_REQ_PENDING || lc_find_handler(lc, r->id) != NULL)
			continue;
		x = lc_ctx_new(lc, sizeof(*x), lost_cleanup);
		x->lc = lc;
		x->id = strdup(r->id);
		snprintf(path, sizeof(path), "/nodepool/requests-lock/%s", r->id);
		x->lock = zk_lock_new(lc->zk, path, NULL, 0);
		zk_lock_acquire(x->lock, 0, lost_locked, x);
	}
}

/* ---- request-lock GC (reference 2.7) ------------------------------------- */

/*
 * As CleanupWorker._cleanupNodeRequestLocks: a dir under
 * /nodepool/requests-lock whose request is gone and whose mtime is older
 * than request-lock-cleanup-age is deleted with whatever is in it (kazoo's
 * delete(recursive=True): a contender left in it goes too). mtime, as
 * upstream: a lock dir is never written, so it is its creation time, and
 * contenders coming and going do not change it. The request is looked up
 * in the cache, then once more in ZooKeeper just before the delete
 * (upstream lists the requests uncached), so a request the cache has not
 * shown yet keeps its lock.
 */
struct lockgc {
	struct launcher *lc;
	char *id;
	double age; /* s since the lock dir's mtime */
};

static void
lockgc_cleanup(void *p)
{
	struct lockgc *g = p;

	free(g->id);
}

static void
lockgc_free(struct lockgc *g)
{
	free(g->id);
	lc_ctx_free(g->lc, g);
}

static void
lockgc_request_stat(int rc, const struct zk_stat *st, void *arg)
{
	struct lockgc *g = arg;
	char path[160];

	if (rc == ZNONODE && lc_request(g->lc, g->id) == NULL) {
		log_info("removing request lock %s: its request is gone, unmodified for %.0fs",
			 g->id, g->age);
		snprintf(path, sizeof(path), "/nodepool/requests-lock/%s", g->id);
		zk_delete(g->lc->zk, path, -1, 1, NULL, NULL);
	}
	lockgc_free(g);
}

static void
lockgc_stat(int rc, const struct zk_stat *st, void *arg)
{
	struct lockgc *g = arg;
	struct launcher *lc = g->lc;
	char path[160];

	if (rc != ZOK || lc_request(lc, g->id) != NULL) {
		lockgc_free(g);
		return;
	}
	g->age = lc_now() - (double)st->mtime_ms / 1000.0;
	if (!(g->age > lc->settings.request_lock_cleanup_age)) {
		lockgc_free(g);
		return;
	}
	snprintf(path, sizeof(path), "/nodepool/requests/%s", g->id);
	zk_exists(lc->zk, path, NULL, NULL, lockgc_request_stat, g);
}

static void
lockgc_children(int rc, int count, char *const *names, void *arg)
{
	struct launcher *lc = arg;
	char path[160];
	int i;

	if (rc != ZOK)
		return;
	for (i = 0; i < count; i++) {
		struct lockgc *g;
		if (lc_request(lc, names[i]) != NULL || strlen(names[i]) > 100)
			continue;
		g = lc_ctx_new(lc, sizeof(*g), lockgc_cleanup);
		g->lc = lc;
		if ((g->id = strdup(names[i])) == NULL)
			abort();
		snprintf(path, sizeof(path), "/nodepool/requests-lock/%s", names[i]);
		zk_exists(lc->zk, path, NULL, NULL, lockgc_stat, g);
	}
}

/* ---- ages and holds ---------------------------------------------------------- */

/*
 * max-ready-age and hold expiry have one actor per node (issue 22): of the
 * launchers serving the provider, the one lc_duty_mine names for
 * "node/<id>" deletes it; the others leave it, so an expired node is
 * deleted once, by its owner, not raced for by every launcher (each would
 * lose on the node lock but one). A lost owner's nodes are its peers' once
 * its registration goes: launcher.c runs this pass again then.
 */
static int
node_duty_mine(struct launcher *lc, const char *id)
{
	char duty[128];

	snprintf(duty, sizeof(duty), "node/%s", id);
	return lc_duty_mine(lc, duty);
}

static void
lc_cleanup_ages(struct launcher *lc)
{
	const struct zk_cache_entry *const *ents;
	int i, n = zk_cache_entries(lc->nodes, &ents);
	double now = lc_now();

	for (i = 0; i < n; i++) {
		const struct np_node *nd =
		    LC_SUM(ents[i]) ? np_node_sum_full(LC_SUM(ents[i])) : NULL;
		size_t k;
		if (!ours(lc, nd) || ents[i]->locked > 0 || lc_busy(lc, nd->id))
			continue;
		if (!((nd->state == NP_NODE_READY && nd->allocated_to == NULL) ||
		      nd->state == NP_NODE_HOLD) ||
		    !node_duty_mine(lc, nd->id))
			continue;
		if (nd->state == NP_NODE_READY && nd->allocated_to == NULL) {
			for (k = 0; k < nd->type.n; k++) {
				const struct lc_label *l = lc_label_get(lc, nd->type.v[k]);
				if (l != NULL && l->max_ready_age > 0 &&
				    now - nd->state_time > (double)l->max_ready_age) {
					log_info("node %s exceeded max-ready-age %lds", nd->id,
						 l->max_ready_age);
					delete_node(lc, nd->id, 1);
					break;
				}
			}
		} else if (nd->state == NP_NODE_HOLD) {
			double limit = 0;
			if (nd->has_hold_expiration && nd->hold_expiration > 0)
				limit = (double)nd->hold_expiration;
			if (lc->max_hold_age > 0 && (limit == 0 || lc->max_hold_age < limit))
				limit = (double)lc->max_hold_age;
			if (limit > 0 && now - nd->state_time > limit) {
				log_info("held node %s exceeded its hold age (%.0fs)", nd->id,
					 limit);
				delete_node(lc, nd->id, 2);
			}
		}
	}
}

/* Is a create for request req_id in flight in one of our handlers (its
 * node may be INIT and unlocked for a moment, or its reply lost)? */
static int
creating_for(struct launcher *lc, const char *req_id)
{
	struct handler *h = lc_find_handler(lc, req_id);
	size_t i;

	for (i = 0; h != NULL && i < h->n_nodes; i++)
		if (h->nodes[i].state == HN_CREATING)
			return 1;
	return 0;
}

/*
 * Unlocked INIT nodes of ours whose request is gone or failed: a launch
 * that never got past its create (the create's reply lost, the handler
 * finished or its session ended before it locked the node) left a record
 * nobody will take. Upstream's lost-request cleanup deletes such a node
 * only while its request is still PENDING and unlocked (_resetLostRequest);
 * once the request was declined, failed or deleted, upstream leaves it for
 * ever (issue 27). A create of ours still in flight for the request is
 * left alone: the node is INIT and unlocked until it is locked.
 */
static void
orphan_inits(struct launcher *lc)
{
	const struct zk_cache_entry *const *ents;
	int i, n = zk_cache_entries(lc->nodes, &ents);

	if (!zk_cache_synced(lc->requests))
		return;
	for (i = 0; i < n; i++) {
		const struct np_node *nd =
		    LC_SUM(ents[i]) ? np_node_sum_full(LC_SUM(ents[i])) : NULL;
		const struct np_request *r;
		if (!ours(lc, nd) || nd->state != NP_NODE_INIT || ents[i]->locked > 0 ||
		    lc_busy(lc, nd->id))
			continue;
		r = nd->allocated_to != NULL ? lc_request(lc, nd->allocated_to) : NULL;
		if (r != NULL && r->state != NP_REQ_FAILED)
			continue;
		if (nd->allocated_to != NULL && creating_for(lc, nd->allocated_to))
			continue;
		log_info("node %s: removing INIT node of %s request %s", nd->id,
			 r != NULL ? "failed" : "vanished",
			 nd->allocated_to != NULL ? nd->allocated_to : "(none)");
		delete_node(lc, nd->id, 3);
	}
}

static void
lc_cleanup_empty_nodes(struct launcher *lc)
{
	const struct zk_cache_entry *const *ents;
	int i, n = zk_cache_entries(lc->nodes, &ents);
	char path[128];

	for (i = 0; i < n; i++) {
		if (ents[i]->len != 0 || ents[i]->data != NULL || lc_busy(lc, ents[i]->name))
			continue;
		if (strcmp(ents[i]->name, "lock") == 0)
			continue;
		log_info("removing empty node znode %s", ents[i]->name);
		snprintf(path, sizeof(path), "/nodepool/nodes/%s", ents[i]->name);
		zk_delete(lc->zk, path, -1, 1, NULL, NULL);
	}
}

void
lc_cleanup_pass(struct launcher *lc)
{
	zk_children(lc->zk, "/nodepool/requests-lock", NULL, NULL, lockgc_children, lc);
	lc_cleanup_lost_requests(lc);
	orphan_inits(lc);
	lc_cleanup_ages(lc);
	lc_cleanup_empty_nodes(lc);
}
