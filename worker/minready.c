/*
 * min-ready, as upstream Nodepool's NodePool.createMinReady and
 * removeCompletedRequests (reference 2.7): keep `min-ready` READY
 * unallocated nodes of each label by submitting single-node requests
 * (priority prefix 900, requestor NodePool:min-ready, reuse false,
 * ephemeral) and, once fulfilled, handing their nodes back to the pool.
 *
 * A label's min-ready belongs to one provider, the first in the config
 * whose pools offer it (lcconfig.c), and among the launchers serving that
 * provider (several nodepoold instances) to one, as every duty:
 * lc_duty_mine("min-ready/<label>"), handed over when its launcher goes.
 * Unlike upstream's all-or-nothing batch, the shortfall is topped up while
 * earlier requests are still outstanding, counting those as coming.
 */
#include "worker/launcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/log.h"
#include "protocol/paths.h"

#define MIN_READY "NodePool:min-ready"

static int
our_min_ready(struct launcher *lc, const struct zk_cache_entry *e)
{
	const struct np_request *r = e->obj;

	return r != NULL && r->requestor != NULL && strcmp(r->requestor, MIN_READY) == 0 &&
	       zk_cache_ephemeral_owner(lc->requests, e) == zk_session_id(lc->zk);
}

struct mr_done {
	struct launcher *lc;
	char *req_id;
	int waiting;
};

static void
mr_done_step(struct mr_done *m)
{
	char path[160];

	if (--m->waiting > 0)
		return;
	snprintf(path, sizeof(path), "/nodepool/requests/%s", m->req_id);
	zk_delete(m->lc->zk, path, -1, 0, NULL, NULL);
	free(m->req_id);
	lc_ctx_free(m->lc, m);
}

static void
mr_done_cleanup(void *p)
{
	struct mr_done *m = p;

	free(m->req_id);
}

struct mr_node {
	struct mr_done *m;
	char *id;
	struct zk_lock *lock;
};

static void
mr_node_cleanup(void *p)
{
	struct mr_node *y = p;

	zk_lock_free(y->lock);
	free(y->id);
}

static void
mr_node_finish(struct mr_node *y)
{
	struct mr_done *m = y->m;

	lc_busy_del(m->lc, y->id);
	mr_node_cleanup(y);
	lc_ctx_free(m->lc, y);
	mr_done_step(m);
}

static void
mr_node_stored(int rc, const struct zk_stat *st, void *arg)
{
	mr_node_finish(arg);
}

static void
mr_node_read(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct mr_node *y = arg;
	struct np_node *n = NULL;
	char err[200];

	if (rc != ZOK || np_node_decode(y->id, data, (size_t)len, &n, err, sizeof(err)) != 0 ||
	    n->allocated_to == NULL || strcmp(n->allocated_to, y->m->req_id) != 0) {
		np_node_free(n);
		mr_node_finish(y);
		return;
	}
	free(n->allocated_to);
	n->allocated_to = NULL;
	lc_store_node(y->m->lc, n, y->lock, mr_node_stored, y);
	np_node_free(n);
}

static void
mr_node_locked(struct zk_lock *lock, int rc, void *arg)
{
	struct mr_node *y = arg;
	char path[128];

	if (rc != ZOK) {
		mr_node_finish(y); /* the orphan-allocation cleanup gets it later */
		return;
	}
	snprintf(path, sizeof(path), "/nodepool/nodes/%s", y->id);
	zk_get(y->m->lc->zk, path, NULL, NULL, mr_node_read, y);
}

/* A fulfilled min-ready request: unallocate its nodes, delete it. */
static void
complete_request(struct launcher *lc, const struct np_request *r)
{
	struct mr_done *m = lc_ctx_new(lc, sizeof(*m), mr_done_cleanup);
	char path[128];
	size_t i;

	m->lc = lc;
	m->req_id = strdup(r->id);
	m->waiting = 1;
	for (i = 0; r->state == NP_REQ_FULFILLED && i < r->nodes.n; i++) {
		struct mr_node *y;
		if (lc_busy(lc, r->nodes.v[i]))
			continue;
		y = lc_ctx_new(lc, sizeof(*y), mr_node_cleanup);
		y->m = m;
		y->id = strdup(r->nodes.v[i]);
		lc_busy_add(lc, y->id);
		snprintf(path, sizeof(path), "/nodepool/nodes/%s/lock", y->id);
		y->lock = zk_lock_new(lc->zk, path, NULL, ZK_LOCK_NO_RESURRECT);
		m->waiting++;
		zk_lock_acquire(y->lock, 5.0, mr_node_locked, y);
	}
	mr_done_step(m);
}

struct mr_create {
	struct launcher *lc;
	struct lc_label *label;
};

static void
mr_created(int rc, const char *path, void *arg)
{
	struct mr_create *c = arg;

	c->label->min_ready_inflight--;
	if (rc != ZOK)
		lc_set_error(c->lc, "creating min-ready request: %s", zk_strerror(rc));
	else
		log_debug("min-ready request %s for %s", path, c->label->name);
	lc_ctx_free(c->lc, c);
}

void
lc_minready_pass(struct launcher *lc)
{
	const struct zk_cache_entry *const *ents;
	int i, n;
	size_t k;

	if (lc->requests == NULL || lc->nodes == NULL)
		return;
	/* finished requests of ours first */
	n = zk_cache_entries(lc->requests, &ents);
	for (i = 0; i < n; i++) {
		const struct np_request *r = ents[i]->obj;
		if (!our_min_ready(lc, ents[i]))
			continue;
		if (r->state == NP_REQ_FULFILLED || r->state == NP_REQ_FAILED) {
			if (lc_busy(lc, r->id))
				continue;
			if (r->state == NP_REQ_FAILED && r->node_types.n == 1) {
				/* declined everywhere (at capacity): wait before
				 * asking again instead of churning requests */
				size_t li;
				for (li = 0; li < lc->n_labels; li++)
					if (strcmp(lc->labels[li].name, r->node_types.v[0]) == 0)
						lc->labels[li].min_ready_backoff =
						    lc_monotonic() + lc->settings.delete_interval;
			}
			lc_busy_add(lc, r->id); /* cleared when the znode goes */
			complete_request(lc, r);
		}
	}
	for (k = 0; k < lc->n_labels; k++) {
		struct lc_label *l = &lc->labels[k];
		const struct zk_cache_entry *const *ne;
		int ready = 0, outstanding = 0, nn, need;

		char duty[300];

		if (!l->min_ready_owner || lc_monotonic() < l->min_ready_backoff)
			continue;
		/* one launcher of the provider makes them (several nodepoold
		 * instances may serve it) */
		snprintf(duty, sizeof(duty), "min-ready/%s", l->name);
		if (!lc_duty_mine(lc, duty))
			continue;
		if (lc->prov.drv->label_ready != NULL && lc->prov.dp != NULL &&
		    lc->prov.drv->label_ready(lc->prov.dp, l->name) != 1)
			continue;
		nn = zk_cache_entries(lc->nodes, &ne);
		for (i = 0; i < nn; i++) {
			const struct np_node_sum *nd = LC_SUM(ne[i]);
			if (nd != NULL && np_node_sum_state(nd) == NP_NODE_READY &&
			    np_node_sum_allocated_to(nd) == NULL &&
			    np_strv_contains(np_node_sum_type(nd), l->name))
				ready++;
		}
		for (i = 0; i < n; i++) {
			const struct np_request *r = ents[i]->obj;
			/* fulfilled ones count too until their nodes are handed
			 * back (else an instant cloud overshoots); a peer's too,
			 * made before the duty moved to us */
			if (r != NULL && r->requestor != NULL &&
			    strcmp(r->requestor, MIN_READY) == 0 && r->state != NP_REQ_FAILED &&
			    r->node_types.n == 1 && strcmp(r->node_types.v[0], l->name) == 0)
				outstanding++;
		}
		need = l->min_ready - ready - outstanding - l->min_ready_inflight;
		for (; need > 0; need--) {
			struct np_request *r = np_request_new();
			struct mr_create *c = lc_ctx_new(lc, sizeof(*c), NULL);
			char *json, eid[33];
			size_t len;

			np_request_set_state(r, NP_REQ_REQUESTED);
			np_strv_push(&r->node_types, l->name);
			r->requestor = strdup(MIN_READY);
			r->reuse = 0;
			np_uuid4_hex(eid);
			r->event_id = strdup(eid);
			r->created_time = lc_now();
			r->has_created_time = 1;
			json = np_request_encode(r, &len);
			c->lc = lc;
			c->label = l;
			l->min_ready_inflight++;
			zk_create(lc->zk, "/nodepool/requests/900-", json, (int)len,
				  ZOO_EPHEMERAL | ZOO_SEQUENCE, 1, mr_created, c);
			free(json);
			np_request_free(r);
		}
	}
}
