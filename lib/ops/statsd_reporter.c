/*
 * The statsd reporter (see statsd.h): the deployment-wide gauges sent by the
 * holder of the stats election. Apart from the client (statsd.c) because
 * it needs the ZooKeeper client: nodepoold, which sends statsd lines but
 * never talks to ZooKeeper, then links neither it nor OpenSSL.
 */
#include "lib/ops/statsd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "lib/core/clock.h"
#include "lib/core/log.h"
#include "protocol/model.h"
#include "protocol/nodesum.h"
#include "lib/ops/nodeview.h"
#include "protocol/paths.h"
#include "lib/zk/zk.h"

/* ---- the reporter ------------------------------------------------------------- */

struct statsd_reporter {
	struct event_base *base;
	struct statsd *s;
	json_t *slice;
	status_view_fn view;
	void *arg;
	double interval;
	struct event *timer;
	struct zk *zk; /* the session the election lock belongs to */
	struct zk_lock *election;
	int acquiring;
	int local; /* also the launcher gauges (standalone worker) */
	char identifier[300];
};

static void reporter_timer(evutil_socket_t fd, short what, void *arg);

static void
arm(struct statsd_reporter *r)
{
	struct timeval tv = np_tv_of(r->interval);

	evtimer_add(r->timer, &tv);
}

struct statsd_reporter *
statsd_reporter_new(struct event_base *base, struct statsd *s, const json_t *slice,
		    status_view_fn view, void *arg)
{
	struct statsd_reporter *r = calloc(1, sizeof(*r));
	const json_t *iv = json_object_get(json_object_get(slice, "nodepoold"), "stats-interval");
	char host[256];

	if (r == NULL)
		abort();
	r->base = base;
	r->s = s;
	r->slice = json_deep_copy(slice);
	r->view = view;
	r->arg = arg;
	r->interval = json_is_number(iv) && json_number_value(iv) > 0 ? json_number_value(iv) : 5.0;
	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	/* as upstream's StatsWorker: "<hostname>-<pid>" */
	snprintf(r->identifier, sizeof(r->identifier), "%s-%ld", host, (long)getpid());
	r->timer = evtimer_new(base, reporter_timer, r);
	if (r->timer == NULL)
		abort();
	arm(r);
	return r;
}

void
statsd_reporter_reset(struct statsd_reporter *r)
{
	if (r == NULL)
		return;
	zk_lock_free(r->election);
	r->election = NULL;
	r->acquiring = 0;
	r->zk = NULL;
}

void
statsd_reporter_free(struct statsd_reporter *r)
{
	if (r == NULL)
		return;
	statsd_reporter_reset(r);
	if (r->timer != NULL)
		event_free(r->timer);
	json_decref(r->slice);
	free(r);
}

int
statsd_reporter_leader(const struct statsd_reporter *r)
{
	return r != NULL && r->election != NULL && zk_lock_is_held(r->election);
}

static void
election_cb(struct zk_lock *lock, int rc, void *arg)
{
	struct statsd_reporter *r = arg;

	r->acquiring = 0;
	if (rc == ZOK)
		log_info("won the stats reporter election");
	else
		log_debug("stats election: %s", zk_strerror(rc));
}

/* Join (or rejoin, after an expiry took our contender) the election. */
static void
run_election(struct statsd_reporter *r, struct zk *zk)
{
	if (zk != r->zk)
		statsd_reporter_reset(r);
	r->zk = zk;
	if (zk == NULL || !zk_is_connected(zk) || r->acquiring)
		return;
	if (r->election != NULL && zk_lock_is_held(r->election))
		return;
	if (r->election == NULL)
		r->election = zk_lock_new(zk, NP_STATS_ELECTION_PATH, r->identifier, 0);
	r->acquiring = 1;
	zk_lock_acquire(r->election, -1, election_cb, r);
}

static double
pool_limit(const json_t *pool, const char *key)
{
	const json_t *v = json_object_get(pool, key);

	return json_is_number(v) ? json_number_value(v) : -1;
}

/* Per-worker gauges: this provider's max_servers and the tenant limits. */
static void
report_limits(struct statsd_reporter *r)
{
	const json_t *prov = json_array_get(json_object_get(r->slice, "providers"), 0);
	const json_t *pool, *tl, *v;
	const char *pname = json_string_value(json_object_get(prov, "name")), *k;
	char name[600], a[256], b[256];
	double sum = 0;
	size_t i;

	if (pname != NULL) {
		json_array_foreach(json_object_get(prov, "pools"), i, pool)
		{
			double m = pool_limit(pool, "max-servers");
			if (m > 0)
				sum += m;
		}
		snprintf(name, sizeof(name), "nodepool.provider.%s.max_servers", pname);
		statsd_gauge(r->s, name, sum);
	}
	/* as Config.setTenantResourceLimits: max-cores -> cores, max-servers
	 * -> instances, max-ram -> ram, max-volumes -> volumes, max-volume-gb
	 * -> volume-gb, other keys as they are */
	json_array_foreach(json_object_get(r->slice, "tenant-resource-limits"), i, tl)
	{
		const char *tenant = json_string_value(json_object_get(tl, "tenant-name"));
		if (tenant == NULL)
			continue;
		json_object_foreach((json_t *)tl, k, v)
		{
			const char *key = k;
			if (strcmp(k, "tenant-name") == 0 || !json_is_number(v))
				continue;
			if (strcmp(k, "max-cores") == 0)
				key = "cores";
			else if (strcmp(k, "max-servers") == 0)
				key = "instances";
			else if (strcmp(k, "max-ram") == 0)
				key = "ram";
			else if (strcmp(k, "max-volumes") == 0)
				key = "volumes";
			else if (strcmp(k, "max-volume-gb") == 0)
				key = "volume-gb";
			snprintf(name, sizeof(name), "nodepool.tenant_limits.%s.%s",
				 statsd_normalize(tenant, a, sizeof(a)),
				 statsd_normalize(key, b, sizeof(b)));
			statsd_gauge(r->s, name, json_number_value(v));
		}
	}
}

/* A tiny string -> count map for the gauges (names are unique keys). */
static void
count_add(json_t *m, const char *key, int zero_fill)
{
	json_t *v = json_object_get(m, key);

	if (v == NULL)
		json_object_set_new(m, key, json_integer(zero_fill ? 0 : 1));
	else if (!zero_fill)
		json_integer_set(v, json_integer_value(v) + 1);
}

/* The global gauges, as upstream's updateNodeStats and
 * updateNodeRequestStats. */
static void
report_nodes(struct statsd_reporter *r, const struct status_view *v)
{
	const struct zk_cache_entry *const *ents;
	json_t *m = json_object(), *providers = json_object(), *labels = json_object(), *val;
	const char *k, *k2;
	char name[600];
	int i, n, st;
	size_t j;

	/* registered pools: providers and labels, zero-filled */
	n = v->pools ? zk_cache_entries(v->pools, &ents) : 0;
	for (i = 0; i < n; i++) {
		const struct np_component *c = ents[i]->obj;
		if (c == NULL)
			continue;
		if (c->provider_name != NULL)
			json_object_set_new(providers, c->provider_name, json_true());
		for (j = 0; j < c->supported_labels.n; j++)
			json_object_set_new(labels, c->supported_labels.v[j], json_true());
	}
	for (st = 0; st < NP_NODE_STATE_COUNT; st++) {
		snprintf(name, sizeof(name), "nodepool.nodes.%s", np_node_state_name(st));
		count_add(m, name, 1);
		json_object_foreach(providers, k, val)
		{
			snprintf(name, sizeof(name), "nodepool.provider.%s.nodes.%s", k,
				 np_node_state_name(st));
			count_add(m, name, 1);
		}
		json_object_foreach(labels, k, val)
		{
			snprintf(name, sizeof(name), "nodepool.label.%s.nodes.%s", k,
				 np_node_state_name(st));
			count_add(m, name, 1);
		}
	}
	n = v->nodes ? zk_cache_entries(v->nodes, &ents) : 0;
	for (i = 0; i < n; i++) {
		const char *sn, *prov;
		const struct np_strv *type;
		int state;
		if (ents[i]->obj == NULL)
			continue;
		if (v->node_sums) {
			const struct np_node_sum *s = ents[i]->obj;
			state = np_node_sum_state(s), prov = np_node_sum_provider(s);
			type = np_node_sum_type(s);
		} else if (v->node_views) {
			const struct np_node_view *w = ents[i]->obj;
			state = np_node_view_state(w), prov = np_node_view_provider(w);
			type = np_node_view_type(w);
		} else {
			const struct np_node *node = ents[i]->obj;
			state = node->state, prov = node->provider, type = &node->type;
		}
		if ((sn = np_node_state_name(state)) == NULL)
			continue;
		snprintf(name, sizeof(name), "nodepool.nodes.%s", sn);
		count_add(m, name, 0);
		for (j = 0; j < type->n; j++) {
			snprintf(name, sizeof(name), "nodepool.label.%s.nodes.%s", type->v[j], sn);
			count_add(m, name, 0);
		}
		snprintf(name, sizeof(name), "nodepool.provider.%s.nodes.%s", prov ? prov : "None",
			 sn);
		count_add(m, name, 0);
	}
	/* addressable requests: per registered pool, the requests whose every
	 * label it supports */
	n = v->pools ? zk_cache_entries(v->pools, &ents) : 0;
	for (i = 0; i < n; i++) {
		const struct np_component *c = ents[i]->obj;
		const struct zk_cache_entry *const *rents;
		int nr, q, count = 0;
		if (c == NULL || c->pool_name == NULL || c->provider_name == NULL)
			continue;
		nr = v->requests ? zk_cache_entries(v->requests, &rents) : 0;
		for (q = 0; q < nr; q++) {
			const struct np_request *req = rents[q]->obj;
			size_t t;
			int all = 1;
			if (req == NULL)
				continue;
			for (t = 0; t < req->node_types.n && all; t++)
				all = np_strv_contains(&c->supported_labels, req->node_types.v[t]);
			count += all;
		}
		snprintf(name, sizeof(name), "nodepool.provider.%s.pool.%s.addressable_requests",
			 c->provider_name, c->pool_name);
		/* two launchers of one pool: the same figure twice */
		json_object_set_new(m, name, json_integer(count));
	}
	json_object_foreach(m, k2, val) statsd_gauge(r->s, k2, (double)json_integer_value(val));
	json_decref(m);
	json_decref(providers);
	json_decref(labels);
}

void
statsd_reporter_tick(struct statsd_reporter *r)
{
	struct status_view v;

	memset(&v, 0, sizeof(v));
	r->view(r->arg, &v);
	run_election(r, v.zk);
	report_limits(r);
	if (statsd_reporter_leader(r) && v.nodes != NULL && zk_cache_synced(v.nodes))
		report_nodes(r, &v);
	statsd_flush(r->s);
	if (r->local && v.zk != NULL)
		statsd_launcher_stats(r->s, zk_pending(v.zk));
}

void
statsd_reporter_set_local(struct statsd_reporter *r, int local)
{
	if (r != NULL)
		r->local = local;
}

static void
reporter_timer(evutil_socket_t fd, short what, void *arg)
{
	struct statsd_reporter *r = arg;

	statsd_reporter_tick(r);
	arm(r);
}
