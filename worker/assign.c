/*
 * Request acceptance, as upstream Nodepool's PoolWorker._assignHandlers
 * (reference section 2.2): for each pool, walk the `requested` requests in
 * service order and skip, defer, decline or take each one.
 *
 * Unlike upstream, this runs when ZooKeeper reports a change (a new
 * request, a node becoming ready, a pool component appearing), coalesced
 * to one pass per loop iteration, not on a 1 s poll.
 */
#include "worker/launcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/log.h"
#include "lib/core/strset.h"

/* The pool components of every launcher (ours included). */
static int
components(struct launcher *lc, const struct np_component ***out)
{
	static const struct np_component **buf;
	static int cap;
	const struct zk_cache_entry *const *ents;
	int i, n = zk_cache_entries(lc->pool_components, &ents), k = 0;

	if (n > cap) {
		cap = n * 2;
		buf = realloc(buf, (size_t)cap * sizeof(*buf));
		if (buf == NULL)
			abort();
	}
	for (i = 0; i < n; i++) {
		const struct np_component *c = ents[i]->obj;
		if (c != NULL && c->id != NULL)
			buf[k++] = c;
	}
	*out = buf;
	return k;
}

static int
supports_all(const struct np_strv *labels, const struct np_request *r)
{
	size_t i;

	for (i = 0; i < r->node_types.n; i++)
		if (!np_strv_contains(labels, r->node_types.v[i]))
			return 0;
	return 1;
}

static int
lacks(const struct lc_pool *pool, const struct np_request *r)
{
	size_t i;
	int n = 0;

	for (i = 0; i < r->node_types.n; i++)
		if (!np_strv_contains(&pool->labels, r->node_types.v[i]))
			n++;
	return n;
}

static int
count_label(const struct np_request *r, const char *label)
{
	size_t i;
	int n = 0;

	for (i = 0; i < r->node_types.n; i++)
		if (strcmp(r->node_types.v[i], label) == 0)
			n++;
	return n;
}

/* 1 when the driver cannot tell yet whether one of r's labels is ready
 * (driver.h's label_ready -1: its view of image uploads still loading) */
static int
labels_unknown(struct launcher *lc, const struct np_request *r)
{
	const struct driver *drv = lc->prov.drv;
	size_t i;

	if (drv->label_ready == NULL || lc->prov.dp == NULL)
		return 0;
	for (i = 0; i < r->node_types.n; i++)
		if (drv->label_ready(lc->prov.dp, r->node_types.v[i]) < 0)
			return 1;
	return 0;
}

const char *
lc_assign_decline_reason(struct lc_pool *pool, const struct np_request *r)
{
	static char buf[512];
	struct launcher *lc = pool->prov->lc;
	const struct driver *drv = lc->prov.drv;
	size_t i, len = 0;
	int missing = 0;

	if (pool->max_servers == 0)
		return "pool is disabled";
	len = (size_t)snprintf(buf, sizeof(buf), "node type(s) [");
	for (i = 0; i < r->node_types.n; i++) {
		/* as NodeRequestHandler._invalidNodeTypes: not in the pool, or
		 * one of the driver's error labels (errorLabels) */
		if (np_strv_contains(&pool->labels, r->node_types.v[i]) &&
		    (drv->label_error == NULL || lc->prov.dp == NULL ||
		     !drv->label_error(lc->prov.dp, r->node_types.v[i])))
			continue;
		if (len < sizeof(buf))
			len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s",
						missing ? ", " : "", r->node_types.v[i]);
		missing++;
	}
	if (missing) {
		if (len < sizeof(buf))
			snprintf(buf + len, sizeof(buf) - len, "] not available");
		return buf;
	}
	if (drv->label_ready != NULL && lc->prov.dp != NULL) {
		for (i = 0; i < r->node_types.n; i++)
			if (drv->label_ready(lc->prov.dp, r->node_types.v[i]) == 0)
				return "images are not available";
	}
	/* could the whole nodeset ever fit? */
	if (pool->max_servers > 0 && (long)r->node_types.n > pool->max_servers)
		return "it would exceed quota";
	if (drv->label_capacity != NULL && lc->prov.dp != NULL) {
		for (i = 0; i < r->node_types.n; i++) {
			long cap = drv->label_capacity(lc->prov.dp, pool->name, r->node_types.v[i]);
			if (cap >= 0 && count_label(r, r->node_types.v[i]) > cap)
				return "it would exceed quota";
		}
	}
	return NULL;
}

int
lc_assign_tenant_fits(const struct lc_pool *pool, const struct lc_tenant_limit *tl,
		      const struct drv_quota *used, const struct np_request *r)
{
	const struct launcher *lc = pool->prov->lc;
	struct drv_quota left, need;
	size_t k;
	int ok;

	drv_quota_init(&left, tl->limits.cores, tl->limits.instances, tl->limits.ram);
	if (tl->limits.extra != NULL)
		left.extra = json_deep_copy(tl->limits.extra);
	drv_quota_sub(&left, used);
	for (k = 0; k < r->node_types.n; k++) {
		drv_quota_init(&need, 0, 1, 0);
		if (lc->prov.drv->label_quota != NULL && lc->prov.dp != NULL) {
			drv_quota_clear(&need);
			lc->prov.drv->label_quota(lc->prov.dp, pool->name, r->node_types.v[k],
						  &need);
		}
		drv_quota_sub(&left, &need);
		drv_quota_clear(&need);
	}
	ok = drv_quota_non_negative(&left);
	drv_quota_clear(&left);
	return ok;
}

const struct lc_tenant_limit *
lc_tenant_limit(const struct launcher *lc, const char *tenant)
{
	size_t k;

	for (k = 0; tenant != NULL && k < lc->n_tenant_limits; k++)
		if (strcmp(lc->tenant_limits[k].tenant, tenant) == 0)
			return &lc->tenant_limits[k];
	return NULL;
}

/* What a node uses: its `resources`; one instance for a node without
 * (static nodes), so that a reused node counts too. */
static void
add_resources(struct drv_quota *used, const json_t *res)
{
	struct drv_quota q;

	drv_quota_init(&q, 0, res == NULL ? 1 : 0, 0);
	if (res != NULL)
		drv_quota_from_json(&q, res);
	drv_quota_add(used, &q);
	drv_quota_clear(&q);
}

void
lc_tenant_usage(struct launcher *lc, const char *tenant, struct drv_quota *used)
{
	const struct zk_cache_entry *const *ents;
	int i, n = zk_cache_entries(lc->nodes, &ents);
	const struct lc_qres *r;

	for (i = 0; i < n; i++) {
		const struct np_node_sum *nd = LC_SUM(ents[i]);
		const char *t = nd != NULL ? np_node_sum_tenant_name(nd) : NULL;
		const json_t *res = nd != NULL ? np_node_sum_resources(nd) : NULL;
		if (t != NULL && strcmp(t, tenant) == 0)
			add_resources(used, res);
	}
	/* our creates and allocations not in the view yet (quota.c's
	 * reservations: each counted until the view counts it) */
	for (r = lc_quota_reservations(lc); r != NULL; r = r->next)
		if (r->kind != LC_QRES_REGISTER && r->tenant != NULL &&
		    strcmp(r->tenant, tenant) == 0)
			add_resources(used, r->resources);
}

/* Tenant resource limits (reference 2.6): usage is the sum of `resources`
 * of every node of the tenant (any provider, any state); a request that
 * would exceed a limit is deferred, not declined. This is the first look;
 * launches and reuses for a tenant with limits are decided again, exactly,
 * in a quota round (handler.c, tenant_has_room). */
static int
tenant_allows(struct launcher *lc, struct lc_pool *pool, const struct np_request *r)
{
	const struct lc_tenant_limit *tl = lc_tenant_limit(lc, r->tenant_name);
	struct drv_quota used;
	int ok;

	if (tl == NULL)
		return 1;
	drv_quota_init(&used, 0, 0, 0);
	lc_tenant_usage(lc, r->tenant_name, &used);
	ok = lc_assign_tenant_fits(pool, tl, &used, r);
	drv_quota_clear(&used);
	if (!ok)
		log_debug("request %s deferred: tenant %s at its limits", r->id, r->tenant_name);
	return ok;
}

const char *
lc_assign_defer_reason(const struct lc_pool *pool, const struct np_request *r,
		       const struct np_component *const *comps, int ncomp)
{
	int j, other_candidate = 0, preferred_exists = 0, better = 0;

	for (j = 0; j < ncomp; j++) {
		const struct np_component *c = comps[j];
		if (strcmp(c->id, pool->launcher_id) == 0)
			continue;
		if (np_strv_contains(&r->declined_by, c->id) ||
		    !supports_all(&c->supported_labels, r))
			continue;
		other_candidate = 1;
		if (r->provider != NULL && c->provider_name != NULL &&
		    strcmp(r->provider, c->provider_name) == 0)
			preferred_exists = 1;
		if (c->priority < pool->priority && !c->paused)
			better = 1;
	}
	if (r->provider != NULL && strcmp(r->provider, pool->prov->name) != 0 && preferred_exists)
		return "the requested provider can serve it";
	if (better)
		return "a higher-priority pool can serve it";
	if (lacks(pool, r) > 0 && other_candidate)
		return "a pool with every label can serve it";
	return NULL;
}

/*
 * Work sharing among launchers serving one pool (nodepoold on several
 * hosts, each with the same provider): rendezvous hashing, as Zuul's
 * launcher. Every live launcher of the pool (its pool component: same
 * provider and pool name, not paused, not among the request's declines,
 * serving all its labels) gets a score, a hash of its launcher id and the
 * request id; each launcher computes the same ranking from the same
 * components. The first takes the request at once; the one ranked n-th
 * only once the request has stayed `requested` for n times
 * peer-takeover-delay (from when this launcher first saw it so), so a
 * slow, paused or dead first one stalls nothing and the others do not all
 * race for the request lock at once (upstream: every pool tries, one
 * wins). With one launcher per pool nothing changes.
 */
static uint64_t
rv_mix(uint64_t h)
{
	h ^= h >> 30; /* splitmix64's finalizer */
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebULL;
	h ^= h >> 31;
	return h;
}

static uint64_t
rv_fnv(const char *s)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	const unsigned char *p;

	for (p = (const unsigned char *)s; *p != '\0'; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return h;
}

/* The score of launcher_id for req_id (a request id or a duty key). The
 * key is mixed before it meets the launcher id: keys that differ in one
 * low bit only (sequential ids) would otherwise rank the launchers alike. */
static uint64_t
rv_score(const char *launcher_id, const char *req_id)
{
	return rv_mix(rv_fnv(launcher_id) ^ rv_mix(rv_fnv(req_id)));
}

/* How many live peers of pool rank before us for r (0: we are first). */
static int
rv_rank(struct launcher *lc, const struct lc_pool *pool, const struct np_request *r,
	const struct np_component *const *comps, int ncomp)
{
	uint64_t mine = rv_score(pool->launcher_id, r->id), s;
	int j, rank = 0;

	for (j = 0; j < ncomp; j++) {
		const struct np_component *c = comps[j];
		if (strcmp(c->id, pool->launcher_id) == 0 || c->provider_name == NULL ||
		    c->pool_name == NULL || strcmp(c->provider_name, lc->prov.name) != 0 ||
		    strcmp(c->pool_name, pool->name) != 0 || c->paused ||
		    np_strv_contains(&r->declined_by, c->id) ||
		    !supports_all(&c->supported_labels, r))
			continue;
		s = rv_score(c->id, r->id);
		if (s > mine || (s == mine && strcmp(c->id, pool->launcher_id) < 0))
			rank++;
	}
	return rank;
}

/* 1: leave r to the peers ranked before us for now (a pass is scheduled
 * for when our turn comes). */
static int
rv_defer(struct launcher *lc, const struct lc_pool *pool, const struct np_request *r,
	 const struct np_component *const *comps, int ncomp)
{
	double now = lc_monotonic(), due;
	json_t *seen;
	int rank;

	if (lc->settings.peer_takeover_delay <= 0)
		return 0;
	rank = rv_rank(lc, pool, r, comps, ncomp);
	if (rank == 0)
		return 0;
	seen = json_object_get(lc->req_seen, r->id);
	if (seen == NULL) {
		seen = json_real(now);
		json_object_set_new(lc->req_seen, r->id, seen);
	}
	due = json_real_value(seen) + rank * lc->settings.peer_takeover_delay;
	if (now >= due)
		return 0;
	lc_schedule_assign_in(lc, due - now);
	return 1;
}

int
lc_duty_mine(struct launcher *lc, const char *key)
{
	const struct np_component **comps;
	int j, n = components(lc, &comps), mine = 0;
	uint64_t best = 0, s;
	const char *best_id = NULL;
	size_t p;

	for (j = 0; j < n; j++) {
		const struct np_component *c = comps[j];
		if (c->provider_name == NULL || strcmp(c->provider_name, lc->prov.name) != 0)
			continue;
		s = rv_score(c->id, key);
		if (best_id == NULL || s > best || (s == best && strcmp(c->id, best_id) < 0)) {
			best = s;
			best_id = c->id;
		}
	}
	if (best_id == NULL)
		return 1; /* no registration seen yet: nobody else either */
	for (p = 0; p < lc->prov.n_pools; p++)
		mine |= lc->prov.pools[p].launcher_id != NULL &&
			strcmp(lc->prov.pools[p].launcher_id, best_id) == 0;
	return mine;
}

/* Forget first sightings of requests no longer `requested`. */
static void
rv_prune(struct launcher *lc)
{
	const char *id;
	json_t *v;
	void *tmp;

	json_object_foreach_safe(lc->req_seen, tmp, id, v)
	{
		const struct np_request *r = lc_request(lc, id);
		if (r == NULL || r->state != NP_REQ_REQUESTED)
			json_object_del(lc->req_seen, id);
	}
}

struct cand {
	const struct np_request *r;
	int lacks;
};

static int
cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	if (x->lacks != y->lacks)
		return x->lacks < y->lacks ? -1 : 1;
	return np_request_cmp(x->r, y->r);
}

static int
paused_cmp(const void *a, const void *b)
{
	const struct handler *const *x = a, *const *y = b;

	return np_request_cmp((*x)->req, (*y)->req);
}

/* Per-label count of nodes a reuse-only pool can hand out right now. */
struct avail {
	const char *label;
	int n;
};

static int
avail_get(struct avail *av, size_t nav, const char *label)
{
	size_t i;

	for (i = 0; i < nav; i++)
		if (strcmp(av[i].label, label) == 0)
			return av[i].n;
	return 0;
}

static void
avail_take(struct avail *av, size_t nav, const char *label)
{
	size_t i;

	for (i = 0; i < nav; i++)
		if (strcmp(av[i].label, label) == 0 && av[i].n > 0)
			av[i].n--;
}

static int
total_handlers(struct launcher *lc)
{
	size_t i;
	int n = 0;

	for (i = 0; i < lc->prov.n_pools; i++)
		n += lc->prov.pools[i].n_handlers;
	return n;
}

static void
rerun_paused(struct lc_pool *pool)
{
	struct handler *h, **v;
	int n = 0, i;

	TAILQ_FOREACH(h, &pool->handlers, entry)
	if (h->state == H_PAUSED)
		n++;
	if (n == 0)
		return;
	v = calloc((size_t)n, sizeof(*v));
	if (v == NULL)
		abort();
	n = 0;
	TAILQ_FOREACH(h, &pool->handlers, entry)
	if (h->state == H_PAUSED)
		v[n++] = h;
	qsort(v, (size_t)n, sizeof(*v), paused_cmp);
	for (i = 0; i < n; i++)
		lc_handler_rerun(v[i]);
	free(v);
}

static void
lc_assign_pool(struct launcher *lc, struct lc_pool *pool)
{
	const struct driver *drv = lc->prov.drv;
	const struct zk_cache_entry *const *ents;
	const struct np_component **comps;
	struct cand *cands;
	struct avail *av = NULL;
	int i, n, nc, ncomp;
	size_t k, nav = 0;

	if (pool->component_path == NULL)
		return; /* not registered yet: nobody would count our declines */
	ncomp = components(lc, &comps);

	if (drv->reuse_only) {
		/* the label quota table, as the static driver's getLabelQuota */
		const struct zk_cache_entry *const *ne;
		int nn = zk_cache_entries(lc->nodes, &ne), j;
		av = calloc(pool->labels.n ? pool->labels.n : 1, sizeof(*av));
		for (k = 0; k < pool->labels.n; k++)
			av[k].label = pool->labels.v[k];
		nav = pool->labels.n;
		for (j = 0; j < nn; j++) {
			const struct np_node_sum *nd = LC_SUM(ne[j]);
			const char *npool = nd != NULL ? np_node_sum_pool(nd) : NULL;
			if (nd == NULL || np_node_sum_state(nd) != NP_NODE_READY ||
			    np_node_sum_allocated_to(nd) != NULL || ne[j]->locked > 0 ||
			    lc_busy(lc, ne[j]->name) ||
			    !np_node_sum_of_provider(nd, lc->prov.name) || npool == NULL ||
			    strcmp(npool, pool->name) != 0)
				continue;
			for (k = 0; k < nav; k++)
				if (np_strv_contains(np_node_sum_type(nd), av[k].label))
					av[k].n++;
		}
		/* a request whose lock is still being taken picks its nodes
		 * once it has it: they are spoken for (issue 25: every pass
		 * in that window gave the same free node to one more request,
		 * which then found it taken and went the full way back to
		 * requested, eight ZooKeeper requests for nothing) */
		{
			struct handler *h;
			TAILQ_FOREACH(h, &pool->handlers, entry)
			{
				const struct np_request *hr;
				if (h->state != H_LOCKING ||
				    (hr = lc_request(lc, h->req_id)) == NULL)
					continue;
				for (k = 0; k < hr->node_types.n; k++)
					avail_take(av, nav, hr->node_types.v[k]);
			}
		}
	}

	n = zk_cache_entries(lc->requests, &ents);
	cands = calloc(n ? (size_t)n : 1, sizeof(*cands));
	if (cands == NULL)
		abort();
	nc = 0;
	for (i = 0; i < n; i++) {
		const struct np_request *r = ents[i]->obj;
		if (r == NULL || r->state != NP_REQ_REQUESTED)
			continue;
		if (np_strv_contains(&r->declined_by, pool->launcher_id))
			continue;
		if (lc_find_handler(lc, r->id) != NULL)
			continue;
		cands[nc].r = r;
		cands[nc].lacks = lacks(pool, r);
		nc++;
	}
	qsort(cands, (size_t)nc, sizeof(*cands), cand_cmp);

	for (i = 0; i < nc; i++) {
		const struct np_request *r = cands[i].r;
		const char *reason;
		int short_nodes = 0;
		struct handler *h;

		if (lc_find_handler(lc, r->id) != NULL)
			continue; /* taken by another of our pools this pass */
		if (lc_assign_defer_reason(pool, r, comps, ncomp) != NULL)
			continue; /* left to another launcher's pool */
		if (rv_defer(lc, pool, r, comps, ncomp))
			continue; /* a peer ranked before us takes it first */
		if (labels_unknown(lc, r)) {
			/* the provider's images are still being read (its
			 * start): decided once they are, not declined now */
			lc_schedule_assign_in(lc, 0.2);
			continue;
		}
		reason = lc_assign_decline_reason(pool, r);
		if (reason == NULL) {
			if (drv->reuse_only) {
				for (k = 0; k < r->node_types.n; k++)
					if (avail_get(av, nav, r->node_types.v[k]) <
					    count_label(r, r->node_types.v[k]))
						short_nodes = 1;
				if (short_nodes)
					continue; /* deferred until nodes come back */
			}
			if (!tenant_allows(lc, pool, r))
				continue;
			if (pool->paused)
				continue;
			if (lc->prov.max_concurrency > 0 &&
			    total_handlers(lc) >= lc->prov.max_concurrency)
				continue;
		}
		h = lc_handler_new(pool, r->id);
		if (drv->reuse_only && reason == NULL)
			for (k = 0; k < r->node_types.n; k++)
				avail_take(av, nav, r->node_types.v[k]);
		lc_handler_start(h);
	}
	free(cands);
	free(av);
}

void
lc_assign_pass(struct launcher *lc)
{
	size_t i;
	char who[512];
	int kind;

	if (lc->prov.max_concurrency == 0 || lc->prov.dp == NULL)
		return;
	if ((kind = lc_upstream_peer(lc, who, sizeof(who))) != 0) {
		/* its launches and ours would not see each other's quota:
		 * the error once, then in the status until it goes */
		if (!lc->upstream_refused && kind == 2)
			lc_set_error(lc,
				     "provider %s is also served by an earlier nodepoold %s, "
				     "which takes no provider lock: not serving it alongside "
				     "(upgrade or stop that instance)",
				     lc->prov.name, who);
		else if (!lc->upstream_refused)
			lc_set_error(lc,
				     "provider %s is also served by an upstream Nodepool "
				     "launcher %s: not serving it alongside (stop that launcher, "
				     "or remove the provider here)",
				     lc->prov.name, who);
		lc->upstream_refused = kind;
		return;
	}
	if (lc->upstream_refused) {
		log_info("provider %s: the %s is gone; serving it", lc->prov.name,
			 lc->upstream_refused == 2 ? "earlier nodepoold" : "upstream launcher");
		lc->upstream_refused = 0;
		lc->last_error[0] = '\0';
	}
	lc_handler_resynced(lc); /* declines waiting for a pool to come back */
	rv_prune(lc);
	for (i = 0; i < lc->prov.n_pools; i++)
		rerun_paused(&lc->prov.pools[i]);
	for (i = 0; i < lc->prov.n_pools; i++)
		lc_assign_pool(lc, &lc->prov.pools[i]);
}
