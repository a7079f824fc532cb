/* The status page of nodepool-web (statuspage.h). */
#include "lib/ops/statuspage.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "lib/ops/metrics.h"
#include "protocol/model.h"
#include "protocol/nodesum.h"
#include "lib/ops/nodeview.h"
#include "lib/core/xalloc.h"
#include "lib/zk/zk.h"

/* the page's CSS and script: statuspage_css[], statuspage_js[], made by
 * make from lib/ops/statuspage/ */
#include "build-gen/statuspage_assets.inc"

/* ---- the sample ring ------------------------------------------------------------ */

struct sample {
	double t;
	json_t *counts; /* "provider\tlabel\tstate" -> n */
};

struct statuspage_history {
	double interval;
	int cap, head, n; /* head: the next slot written */
	struct sample *s;
};

struct statuspage_history *
statuspage_history_new(double interval, double window)
{
	struct statuspage_history *h = xcalloc(1, sizeof(*h));

	h->interval = interval > 0 ? interval : STATUSPAGE_SAMPLE_INTERVAL;
	h->cap = (int)ceil(window / h->interval) + 1;
	if (h->cap < 2)
		h->cap = 2;
	h->s = xcalloc((size_t)h->cap, sizeof(*h->s));
	return h;
}

void
statuspage_history_free(struct statuspage_history *h)
{
	int i;

	if (h == NULL)
		return;
	for (i = 0; i < h->cap; i++)
		json_decref(h->s[i].counts);
	free(h->s);
	free(h);
}

double
statuspage_history_interval(const struct statuspage_history *h)
{
	return h->interval;
}

/* Calls fn for every node of v's cache: its state (-1 unknown), provider,
 * labels and the view (node_views caches) or record (others; NULL for
 * sums). */
typedef void (*node_fn)(void *arg, const char *id, int state, const char *provider,
			const struct np_strv *type, const struct np_node_view *nv,
			const struct np_node *n);

static void
each_node(const struct status_view *v, node_fn fn, void *arg)
{
	const struct zk_cache_entry *const *ents;
	int i, n = v->nodes ? zk_cache_entries(v->nodes, &ents) : 0;

	for (i = 0; i < n; i++) {
		struct np_node *tmp = NULL;
		const struct np_node *nd;
		if (v->node_views) {
			const struct np_node_view *w = ents[i]->obj;
			if (w != NULL)
				fn(arg, ents[i]->name, np_node_view_state(w),
				   np_node_view_provider(w), np_node_view_type(w), w,
				   np_node_view_whole(w));
		} else if (v->node_sums) {
			const struct np_node_sum *s = ents[i]->obj;
			if (s != NULL)
				fn(arg, ents[i]->name, np_node_sum_state(s),
				   np_node_sum_provider(s), np_node_sum_type(s), NULL, NULL);
		} else if ((nd = status_node_of(v->nodes, ents[i], &tmp)) != NULL) {
			fn(arg, ents[i]->name, nd->state, nd->provider, &nd->type, NULL, nd);
		}
		np_node_free(tmp);
	}
}

static void
jinc(json_t *o, const char *key, json_int_t by)
{
	json_t *c = json_object_get(o, key);

	if (c != NULL)
		json_integer_set(c, json_integer_value(c) + by);
	else if (json_object_set_new(o, key, json_integer(by)) != 0)
		np_oom();
}

static const char *
sname(int state)
{
	const char *s = np_node_state_name(state);
	return s ? s : "unknown";
}

static void
sample_node(void *arg, const char *id, int state, const char *provider, const struct np_strv *type,
	    const struct np_node_view *nv, const struct np_node *n)
{
	json_t *counts = arg;
	char key[512];
	size_t i;

	for (i = 0; i < type->n; i++) {
		snprintf(key, sizeof(key), "%s\t%s\t%s", provider ? provider : "", type->v[i],
			 sname(state));
		jinc(counts, key, 1);
	}
	if (type->n == 0) {
		snprintf(key, sizeof(key), "%s\t\t%s", provider ? provider : "", sname(state));
		jinc(counts, key, 1);
	}
}

void
statuspage_history_sample(struct statuspage_history *h, const struct status_view *v, double now)
{
	struct sample *s;

	if (v->nodes == NULL || !zk_cache_synced(v->nodes))
		return;
	s = &h->s[h->head];
	json_decref(s->counts);
	s->t = now;
	if ((s->counts = json_object()) == NULL)
		np_oom();
	each_node(v, sample_node, s->counts);
	h->head = (h->head + 1) % h->cap;
	if (h->n < h->cap)
		h->n++;
}

/* ---- the summary ------------------------------------------------------------------ */

struct filter {
	const char *provider, *label;
};

static int
strv_has(const struct np_strv *v, const char *s)
{
	size_t i;

	for (i = 0; v != NULL && i < v->n; i++)
		if (strcmp(v->v[i], s) == 0)
			return 1;
	return 0;
}

static int
keep_node(const struct filter *f, const char *provider, const struct np_strv *type)
{
	if (f->provider && strcmp(provider ? provider : "", f->provider) != 0)
		return 0;
	if (f->label && !strv_has(type, f->label))
		return 0;
	return 1;
}

static json_t *
jstr_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

static void
oset(json_t *o, const char *k, json_t *v)
{
	if (v == NULL || json_object_set_new(o, k, v) != 0)
		np_oom();
}

static void
aadd(json_t *a, json_t *v)
{
	if (v == NULL || json_array_append_new(a, v) != 0)
		np_oom();
}

/* Get or make o[k] as an object. */
static json_t *
sub(json_t *o, const char *k)
{
	json_t *s = json_object_get(o, k);

	if (s == NULL) {
		s = json_object();
		oset(o, k, s);
	}
	return s;
}

struct nodes_acc {
	const struct filter *f;
	double now;
	json_t *by_state, *by_label, *by_provider, *held;
	json_t *used; /* provider -> {"": {servers, cores, ram}, pool: {...}} */
	json_int_t total;
};

static void
add_use(json_t *used, const char *provider, const char *pool, long long cores, long long ram)
{
	json_t *p = sub(sub(used, provider ? provider : ""), pool ? pool : "");

	jinc(p, "servers", 1);
	jinc(p, "cores", cores);
	jinc(p, "ram", ram);
}

static void
summary_node(void *arg, const char *id, int state, const char *provider, const struct np_strv *type,
	     const struct np_node_view *nv, const struct np_node *n)
{
	struct nodes_acc *a = arg;
	const char *sn = sname(state);
	size_t i;

	if (!keep_node(a->f, provider, type))
		return;
	a->total++;
	jinc(a->by_state, sn, 1);
	jinc(sub(a->by_provider, provider ? provider : ""), sn, 1);
	for (i = 0; i < type->n; i++)
		if (a->f->label == NULL || strcmp(type->v[i], a->f->label) == 0)
			jinc(sub(a->by_label, type->v[i]), sn, 1);
	if (state != NP_NODE_DELETED) {
		long long cores = 0, ram = 0;
		const char *pool = NULL;
		if (nv != NULL) {
			np_node_view_resources(nv, &cores, &ram);
			pool = np_node_view_pool(nv);
		} else if (n != NULL) {
			cores = json_integer_value(json_object_get(n->resources, "cores"));
			ram = json_integer_value(json_object_get(n->resources, "ram"));
			pool = n->pool;
		}
		add_use(a->used, provider, NULL, cores, ram);
		if (pool != NULL)
			add_use(a->used, provider, pool, cores, ram);
	}
	if (state == NP_NODE_HOLD && n != NULL) {
		json_t *h = json_object(), *labels = json_array();
		for (i = 0; i < type->n; i++)
			aadd(labels, json_string(type->v[i]));
		oset(h, "id", json_string(id));
		oset(h, "provider", jstr_or_null(provider));
		oset(h, "label", labels);
		oset(h, "hold_job", jstr_or_null(n->hold_job));
		oset(h, "comment", jstr_or_null(n->comment));
		oset(h, "age", json_integer((json_int_t)(a->now - n->state_time)));
		/* upstream: the node is deleted hold_expiration seconds after
		 * it was held (state_time of hold) */
		oset(h, "expires_in",
		     n->has_hold_expiration && n->hold_expiration > 0
			 ? json_integer(
			       (json_int_t)(n->state_time + (double)n->hold_expiration - a->now))
			 : json_null());
		aadd(a->held, h);
	}
}

/* The worker records by provider: stored, then live ones over them. */
static json_t *
records_by_provider(const json_t *records, const json_t *live)
{
	json_t *out = json_object(), *r;
	size_t i;

	json_array_foreach(records, i, r)
	{
		const char *p = json_string_value(json_object_get(r, "provider"));
		if (p != NULL)
			json_object_set(out, p, r);
	}
	json_array_foreach(live, i, r)
	{
		const char *p = json_string_value(json_object_get(r, "provider"));
		if (p != NULL)
			json_object_set(out, p, r);
	}
	return out;
}

static json_t *
launchers_of(const struct status_view *v, const char *provider, const char *pool)
{
	const struct zk_cache_entry *const *ents;
	int i, n = v->pools ? zk_cache_entries(v->pools, &ents) : 0;
	json_t *out = json_array();

	for (i = 0; i < n; i++) {
		const struct np_component *c = ents[i]->obj;
		if (c == NULL || c->provider_name == NULL ||
		    strcmp(c->provider_name, provider) != 0)
			continue;
		if (pool != NULL && (c->pool_name == NULL || strcmp(c->pool_name, pool) != 0))
			continue;
		/* nodepoold's registrations carry its version (an upstream
		 * launcher's do not: null) */
		const json_t *npd = json_object_get(c->extra, "nodepoold");
		aadd(out,
		     json_pack("{s:o, s:o, s:o, s:I, s:o}", "id", jstr_or_null(c->id), "hostname",
			       jstr_or_null(c->hostname), "state",
			       jstr_or_null(c->paused ? "paused" : c->state), "priority",
			       (json_int_t)c->priority, "nodepoold",
			       json_is_string(npd) ? json_incref((json_t *)npd) : json_null()));
	}
	return out;
}

static const char *jstrv(const json_t *o, const char *k);

/* Providers: those configured (status_config), then any other a pool
 * component or a node names. */
static json_t *
providers_of(const struct status_view *v, const struct filter *f, const json_t *recs,
	     const json_t *by_provider, double now)
{
	const json_t *cfgp = json_object_get(v->status_config, "providers"), *p;
	json_t *out = json_array(), *names = json_array(), *seen = json_object(), *nm;
	const struct zk_cache_entry *const *ents;
	const char *k;
	size_t i;
	int j, n;

	json_array_foreach(cfgp, i, p)
	{
		const char *name = json_string_value(json_object_get(p, "name"));
		if (name != NULL && json_object_get(seen, name) == NULL) {
			aadd(names, json_string(name));
			oset(seen, name, json_true());
		}
	}
	n = v->pools ? zk_cache_entries(v->pools, &ents) : 0;
	for (j = 0; j < n; j++) {
		const struct np_component *c = ents[j]->obj;
		if (c && c->provider_name && json_object_get(seen, c->provider_name) == NULL) {
			aadd(names, json_string(c->provider_name));
			oset(seen, c->provider_name, json_true());
		}
	}
	json_object_foreach((json_t *)by_provider, k, p) if (*k && json_object_get(seen, k) == NULL)
	{
		aadd(names, json_string(k));
		oset(seen, k, json_true());
	}
	json_decref(seen);
	json_array_foreach(names, i, nm)
	{
		const char *name = json_string_value(nm);
		const json_t *c = NULL, *cp, *rec = json_object_get(recs, name);
		json_t *prov = json_object(), *pools = json_array(), *nodes;
		json_t *launchers = launchers_of(v, name, NULL);
		const char *state;
		size_t pi;
		json_int_t total = 0;
		const json_t *cnt;
		const char *sk;

		if (f->provider && strcmp(f->provider, name) != 0) {
			json_decref(launchers);
			json_decref(prov);
			json_decref(pools);
			continue;
		}
		json_array_foreach(
		    cfgp, pi, cp) if (strcmp(json_string_value(json_object_get(cp, "name")) ?: "",
					     name) == 0) c = cp;
		/* a worker's pool components are ephemeral: they go with its
		 * session, and the restarted worker registers them again */
		if (json_array_size(launchers) == 0) {
			state = "down";
		} else {
			json_t *la;
			state = "paused";
			json_array_foreach(launchers, pi,
					   la) if (strcmp(jstrv(la, "state"), "paused") != 0)
			    state = "up";
		}
		oset(prov, "name", json_string(name));
		oset(prov, "driver", json_incref(json_object_get(c, "driver") ?: json_null()));
		oset(prov, "state", json_string(state));
		oset(prov, "starts", json_incref(json_object_get(rec, "starts") ?: json_null()));
		if (c != NULL) {
			json_array_foreach(json_object_get(c, "pools"), pi, cp)
			{
				const char *pn = json_string_value(json_object_get(cp, "name"));
				aadd(pools, json_pack("{s:s, s:O, s:o}", "name", pn ? pn : "",
						      "labels", json_object_get(cp, "labels"),
						      "launchers", launchers_of(v, name, pn)));
			}
		} else {
			/* no configuration: the pools the components name */
			n = v->pools ? zk_cache_entries(v->pools, &ents) : 0;
			for (j = 0; j < n; j++) {
				const struct np_component *pc = ents[j]->obj;
				json_t *labels;
				size_t li;
				if (!pc || !pc->provider_name ||
				    strcmp(pc->provider_name, name) != 0)
					continue;
				labels = json_array();
				for (li = 0; li < pc->supported_labels.n; li++)
					aadd(labels, json_string(pc->supported_labels.v[li]));
				aadd(pools,
				     json_pack("{s:s, s:o, s:o}", "name",
					       pc->pool_name ? pc->pool_name : "", "labels", labels,
					       "launchers", launchers_of(v, name, pc->pool_name)));
			}
		}
		nodes = json_deep_copy(json_object_get(by_provider, name));
		if (nodes == NULL)
			nodes = json_object();
		json_object_foreach(nodes, sk, cnt) total += json_integer_value(cnt);
		oset(prov, "pools", pools);
		oset(prov, "launchers", launchers);
		oset(prov, "nodes", nodes);
		oset(prov, "total", json_integer(total));
		aadd(out, prov);
	}
	json_decref(names);
	return out;
}

static void
add_quota(json_t *quota, const char *provider, const char *pool, const json_t *limits,
	  const json_t *used)
{
	static const char *const res[3][2] = {
	    {"servers", "max-servers"}, {"cores", "max-cores"}, {"ram", "max-ram"}};
	int i;

	for (i = 0; i < 3; i++) {
		const json_t *l = json_object_get(limits, res[i][1]);
		/* servers always; cores and ram where a limit is set */
		if (i > 0 && !json_is_integer(l))
			continue;
		aadd(quota, json_pack("{s:s, s:o, s:s, s:I, s:O}", "provider", provider, "pool",
				      jstr_or_null(pool), "resource", res[i][0], "used",
				      json_integer_value(json_object_get(used, res[i][0])), "limit",
				      json_is_integer(l) ? l : json_null()));
	}
}

static json_t *
quota_of(const struct status_view *v, const struct filter *f, const json_t *used)
{
	json_t *quota = json_array(), *p, *pl;
	size_t i, j;

	json_array_foreach(json_object_get(v->status_config, "providers"), i, p)
	{
		const char *name = json_string_value(json_object_get(p, "name"));
		const json_t *u = json_object_get(used, name ? name : "");
		if (name == NULL || (f->provider && strcmp(f->provider, name) != 0))
			continue;
		add_quota(quota, name, NULL, p, json_object_get(u, ""));
		json_array_foreach(json_object_get(p, "pools"), j, pl)
		{
			const char *pn = json_string_value(json_object_get(pl, "name"));
			if (pn != NULL)
				add_quota(quota, name, pn, pl, json_object_get(u, pn));
		}
	}
	return quota;
}

static json_t *
tenants_of(const struct status_view *v)
{
	json_t *out = json_array(), *lim, *val;
	const char *t, *k;

	json_object_foreach((json_t *)json_object_get(v->status_config, "tenant-limits"), t, lim)
	    json_object_foreach(lim, k, val)
		aadd(out, json_pack("{s:s, s:s, s:O}", "tenant", t, "resource", k, "limit", val));
	return out;
}

static json_t *
phases_of(const json_t *recs, const struct filter *f)
{
	json_t *out = json_object(), *rec, *bounds = json_array();
	const char *prov;
	int ph, i;

	for (i = 0; i < METRICS_NBUCKETS; i++)
		aadd(bounds, json_real(metrics_buckets[i]));
	for (ph = 0; ph < METRICS_PHASE_COUNT; ph++) {
		json_t *p = json_object(), *b = json_array();
		json_int_t count = 0;
		double sum = 0;
		for (i = 0; i <= METRICS_NBUCKETS; i++)
			aadd(b, json_integer(0));
		json_object_foreach((json_t *)recs, prov, rec)
		{
			const json_t *hp =
			    json_object_get(json_object_get(rec, "phases"), metrics_phase_name(ph));
			const json_t *rb = json_object_get(hp, "buckets");
			if (f->provider && strcmp(f->provider, prov) != 0)
				continue;
			for (i = 0; i <= METRICS_NBUCKETS; i++) {
				json_t *c = json_array_get(b, (size_t)i);
				json_integer_set(
				    c, json_integer_value(c) +
					   json_integer_value(json_array_get(rb, (size_t)i)));
			}
			count += json_integer_value(json_object_get(hp, "count"));
			sum += json_number_value(json_object_get(hp, "sum"));
		}
		oset(p, "bounds", json_incref(bounds));
		oset(p, "buckets", b);
		oset(p, "count", json_integer(count));
		oset(p, "sum", json_real(sum));
		oset(out, metrics_phase_name(ph), p);
	}
	json_decref(bounds);
	return out;
}

static json_t *
requests_of(const struct status_view *v, const struct filter *f, double now)
{
	static const struct {
		double le;
		const char *label;
	} ages[] = {{10, "< 10 s"},    {60, "< 1 min"}, {300, "< 5 min"},
		    {900, "< 15 min"}, {3600, "< 1 h"}, {-1, "1 h +"}};
	const struct zk_cache_entry *const *ents;
	int i, n = v->requests ? zk_cache_entries(v->requests, &ents) : 0;
	json_int_t counts[6] = {0}, waiting = 0;
	json_t *out = json_object(), *by_age = json_array(), *oldest = json_array(), *all;
	size_t k;

	all = json_array();
	for (i = 0; i < n; i++) {
		const struct np_request *r = ents[i]->obj;
		double age;
		json_t *types;
		if (r == NULL || (r->state != NP_REQ_REQUESTED && r->state != NP_REQ_PENDING))
			continue;
		if (f->label && !strv_has(&r->node_types, f->label))
			continue;
		age = now - r->state_time;
		waiting++;
		for (k = 0; k < 6; k++)
			if (ages[k].le < 0 || age < ages[k].le) {
				counts[k]++;
				break;
			}
		types = json_array();
		for (k = 0; k < r->node_types.n; k++)
			aadd(types, json_string(r->node_types.v[k]));
		aadd(all, json_pack("{s:o, s:s, s:f, s:o, s:o}", "id", jstr_or_null(r->id), "state",
				    np_request_state_name(r->state), "age", floor(age * 10) / 10,
				    "node_types", types, "requestor", jstr_or_null(r->requestor)));
	}
	for (k = 0; k < 6; k++)
		aadd(by_age, json_pack("{s:o, s:s, s:I}", "le",
				       ages[k].le < 0 ? json_null() : json_real(ages[k].le),
				       "label", ages[k].label, "n", counts[k]));
	/* the ten oldest */
	for (k = 0; k < 10 && json_array_size(all) > 0; k++) {
		size_t best = 0, m;
		json_t *r;
		json_array_foreach(all, m, r) if (json_number_value(json_object_get(r, "age")) >
						  json_number_value(json_object_get(
						      json_array_get(all, best), "age"))) best = m;
		aadd(oldest, json_incref(json_array_get(all, best)));
		json_array_remove(all, best);
	}
	json_decref(all);
	oset(out, "waiting", json_integer(waiting));
	oset(out, "by_age", by_age);
	oset(out, "oldest", oldest);
	return out;
}

/* A listing's age (epoch seconds of the state, as the JSON listings give
 * it) as seconds before now; null when unknown. */
static json_t *
age_of(const json_t *epoch, double now)
{
	return json_is_number(epoch) ? json_integer((json_int_t)(now - json_number_value(epoch)))
				     : json_null();
}

static json_t *
images_of(const struct imgtree *tree, const struct filter *f, double now)
{
	struct status_table *dib, *up;
	json_t *out = json_array(), *byname, *r;
	size_t i;

	if (tree == NULL)
		return out;
	byname = json_object();
	dib = status_table_new(STATUS_DIB_IMAGE_LIST);
	up = status_table_new(STATUS_IMAGE_LIST);
	status_dib_image_list(tree, dib);
	status_image_list(tree, up);
	json_array_foreach(dib->rows, i, r)
	{
		const char *img = json_string_value(json_object_get(r, "image"));
		json_t *e;
		if (img == NULL)
			continue;
		if ((e = json_object_get(byname, img)) == NULL) {
			e = json_pack("{s:s, s:[], s:[]}", "image", img, "builds", "uploads");
			oset(byname, img, e);
			aadd(out, json_incref(e));
		}
		aadd(json_object_get(e, "builds"),
		     json_pack("{s:O, s:O, s:o}", "id", json_object_get(r, "id") ?: json_null(),
			       "state", json_object_get(r, "state") ?: json_null(), "age",
			       age_of(json_object_get(r, "age"), now)));
	}
	json_array_foreach(up->rows, i, r)
	{
		const char *img = json_string_value(json_object_get(r, "image"));
		const char *prov = json_string_value(json_object_get(r, "provider"));
		json_t *e;
		if (img == NULL || (f->provider && (!prov || strcmp(prov, f->provider) != 0)))
			continue;
		if ((e = json_object_get(byname, img)) == NULL) {
			e = json_pack("{s:s, s:[], s:[]}", "image", img, "builds", "uploads");
			oset(byname, img, e);
			aadd(out, json_incref(e));
		}
		aadd(json_object_get(e, "uploads"),
		     json_pack("{s:O, s:O, s:O, s:O, s:o}", "provider",
			       json_object_get(r, "provider") ?: json_null(), "build",
			       json_object_get(r, "id") ?: json_null(), "id",
			       json_object_get(r, "upload_id") ?: json_null(), "state",
			       json_object_get(r, "state") ?: json_null(), "age",
			       age_of(json_object_get(r, "age"), now)));
	}
	json_decref(byname);
	status_table_free(dib);
	status_table_free(up);
	return out;
}

static json_t *
history_of(const struct statuspage_history *h, const struct filter *f)
{
	json_t *out = json_object(), *samples = json_array();
	int i;

	if (h == NULL) {
		oset(out, "interval", json_null());
		oset(out, "window", json_integer(0));
		oset(out, "samples", samples);
		return out;
	}
	for (i = 0; i < h->n; i++) {
		const struct sample *s = &h->s[(h->head - h->n + i + h->cap) % h->cap];
		json_t *by = json_object(), *c;
		const char *k;
		json_object_foreach(s->counts, k, c)
		{
			char prov[256], label[256], state[64];
			const char *t1 = strchr(k, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
			if (t2 == NULL)
				continue;
			snprintf(prov, sizeof(prov), "%.*s", (int)(t1 - k), k);
			snprintf(label, sizeof(label), "%.*s", (int)(t2 - t1 - 1), t1 + 1);
			snprintf(state, sizeof(state), "%s", t2 + 1);
			if (f->provider && strcmp(prov, f->provider) != 0)
				continue;
			if (f->label && strcmp(label, f->label) != 0)
				continue;
			/* unfiltered: a node with several labels counts once per
			 * label, as nodepool_label_nodes */
			jinc(by, state, json_integer_value(c));
		}
		aadd(samples, json_pack("{s:f, s:o}", "t", s->t, "by_state", by));
	}
	oset(out, "interval", json_real(h->interval));
	oset(out, "window", json_real(h->interval * (h->cap - 1)));
	oset(out, "samples", samples);
	return out;
}

static json_t *
labels_of(const struct status_view *v, const json_t *by_label)
{
	json_t *set = json_object(), *out = json_array(), *p, *pl, *l;
	const struct zk_cache_entry *const *ents;
	const char *k;
	size_t i, j, m;
	int e, n;

	json_array_foreach(json_object_get(v->status_config, "providers"), i, p)
	    json_array_foreach(json_object_get(p, "pools"), j, pl)
		json_array_foreach(json_object_get(pl, "labels"), m, l) if (json_is_string(l))
		    oset(set, json_string_value(l), json_true());
	n = v->pools ? zk_cache_entries(v->pools, &ents) : 0;
	for (e = 0; e < n; e++) {
		const struct np_component *c = ents[e]->obj;
		for (i = 0; c && i < c->supported_labels.n; i++)
			oset(set, c->supported_labels.v[i], json_true());
	}
	json_object_foreach((json_t *)by_label, k, l) oset(set, k, json_true());
	json_object_foreach(set, k, l) aadd(out, json_string(k));
	json_decref(set);
	/* sorted, for a stable page */
	for (i = 1; i < json_array_size(out); i++)
		for (j = i; j > 0 && strcmp(json_string_value(json_array_get(out, j - 1)),
					    json_string_value(json_array_get(out, j))) > 0;
		     j--) {
			json_t *a = json_incref(json_array_get(out, j - 1));
			json_array_set(out, j - 1, json_array_get(out, j));
			json_array_set_new(out, j, a);
		}
	return out;
}

struct held_key {
	double expires; /* HUGE_VAL: never */
	json_t *h;
};

static int
held_cmp(const void *a, const void *b)
{
	const struct held_key *x = a, *y = b;

	return x->expires < y->expires ? -1 : x->expires > y->expires ? 1 : 0;
}

/* The first STATUSPAGE_HELD_MAX held nodes of all, the soonest to expire
 * first (new reference; all is taken). */
static json_t *
held_first(json_t *all)
{
	size_t n = json_array_size(all), i;
	struct held_key *k = xcalloc(n ? n : 1, sizeof(*k));
	json_t *out = json_array();

	for (i = 0; i < n; i++) {
		const json_t *e;
		k[i].h = json_array_get(all, i);
		e = json_object_get(k[i].h, "expires_in");
		k[i].expires = json_is_integer(e) ? (double)json_integer_value(e) : HUGE_VAL;
	}
	qsort(k, n, sizeof(*k), held_cmp);
	for (i = 0; i < n && i < STATUSPAGE_HELD_MAX; i++)
		aadd(out, json_incref(k[i].h));
	free(k);
	json_decref(all);
	return out;
}

json_t *
statuspage_summary(const struct status_view *v, const struct imgtree *tree, const json_t *records,
		   const json_t *live, const char *query, double now)
{
	struct evkeyvalq params;
	struct filter f = {NULL, NULL};
	struct nodes_acc a;
	json_t *out = json_object(), *recs, *nodes;

	TAILQ_INIT(&params);
	if (query != NULL && *query)
		evhttp_parse_query_str(query, &params);
	f.provider = evhttp_find_header(&params, "provider");
	f.label = evhttp_find_header(&params, "label");
	if (f.provider && !*f.provider)
		f.provider = NULL;
	if (f.label && !*f.label)
		f.label = NULL;
	memset(&a, 0, sizeof(a));
	a.f = &f;
	a.now = now;
	a.by_state = json_object();
	a.by_label = json_object();
	a.by_provider = json_object();
	a.held = json_array();
	a.used = json_object();
	if (!a.by_state || !a.by_label || !a.by_provider || !a.held || !a.used)
		np_oom();
	each_node(v, summary_node, &a);
	recs = records_by_provider(records, live);

	oset(out, "generated", json_real(now));
	oset(out, "filter",
	     json_pack("{s:o, s:o}", "provider", jstr_or_null(f.provider), "label",
		       jstr_or_null(f.label)));
	oset(out, "labels", labels_of(v, a.by_label));
	oset(out, "providers", providers_of(v, &f, recs, a.by_provider, now));
	nodes = json_object();
	oset(nodes, "total", json_integer(a.total));
	oset(nodes, "by_state", a.by_state);
	oset(nodes, "by_label", a.by_label);
	oset(out, "nodes", nodes);
	oset(out, "quota", quota_of(v, &f, a.used));
	oset(out, "tenants", tenants_of(v));
	oset(out, "phases", phases_of(recs, &f));
	oset(out, "requests", requests_of(v, &f, now));
	oset(out, "images", images_of(tree, &f, now));
	oset(out, "held_total", json_integer((json_int_t)json_array_size(a.held)));
	oset(out, "held", held_first(a.held));
	oset(out, "history", history_of(v->history, &f));
	json_decref(a.by_provider);
	json_decref(a.used);
	json_decref(recs);
	evhttp_clear_headers(&params);
	return out;
}

/* ---- HTML ----------------------------------------------------------------------------- */

struct buf {
	char *p;
	size_t len, cap;
};

static void
put(struct buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		if ((b->p = realloc(b->p, b->cap)) == NULL)
			np_oom();
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void
puts_(struct buf *b, const char *s)
{
	put(b, s, strlen(s));
}

static void putf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void
putf(struct buf *b, const char *fmt, ...)
{
	char tmp[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		put(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* s, escaped for HTML text and attribute values */
static void
esc(struct buf *b, const char *s)
{
	for (; s != NULL && *s; s++) {
		switch (*s) {
		case '<':
			puts_(b, "&lt;");
			break;
		case '>':
			puts_(b, "&gt;");
			break;
		case '&':
			puts_(b, "&amp;");
			break;
		case '"':
			puts_(b, "&quot;");
			break;
		case '\'':
			puts_(b, "&#39;");
			break;
		default:
			put(b, s, 1);
		}
	}
}

/* s, percent-encoded for a query value, then HTML-escaped */
static void
qesc(struct buf *b, const char *s)
{
	char *e = evhttp_encode_uri(s ? s : "");

	if (e == NULL)
		np_oom();
	esc(b, e);
	free(e);
}

static json_int_t jintv(const json_t *o, const char *k);

static const char *
jstrv(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

static json_int_t
jintv(const json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

/* The tail of a launcher's id (its uuid's last 8 digits: instances on one
 * host share the host name), the whole id as its title, and "Nodepool" for
 * an upstream launcher's registration. */
static void
launcher_tag(struct buf *b, const json_t *la)
{
	const char *id = jstrv(la, "id");
	size_t n = strlen(id);

	puts_(b, "<small class=\"lcid\" title=\"");
	esc(b, id);
	puts_(b, "\">");
	esc(b, n > 8 ? id + n - 8 : id);
	puts_(b, "</small>");
	if (json_is_null(json_object_get(la, "nodepoold")))
		puts_(b, " <small>Nodepool</small>");
}

/* A link to the page filtered by provider and/or label (NULL: keep the
 * summary's filter for the other one). */
static void
flink(struct buf *b, const json_t *filter, const char *provider, const char *label,
      const char *text)
{
	const char *fp = json_string_value(json_object_get(filter, "provider"));
	const char *fl = json_string_value(json_object_get(filter, "label"));

	if (provider == NULL)
		provider = fp;
	if (label == NULL)
		label = fl;
	puts_(b, "<a class=\"flt\" href=\"?");
	if (provider && *provider) {
		puts_(b, "provider=");
		qesc(b, provider);
	}
	if (label && *label) {
		puts_(b, provider && *provider ? "&amp;label=" : "label=");
		qesc(b, label);
	}
	puts_(b, "\">");
	esc(b, text);
	puts_(b, "</a>");
}

static const char *const node_states[] = {"building", "testing",   "ready",  "in-use", "used",
					  "hold",     "deleting",  "failed", "init",   "aborted",
					  "deleted",  "uploading", "unknown"};
#define NSTATES (sizeof(node_states) / sizeof(node_states[0]))

static void
age_text(char *out, size_t size, double s)
{
	if (s < 0)
		snprintf(out, size, "-");
	else if (s < 120)
		snprintf(out, size, "%.0f s", s);
	else if (s < 7200)
		snprintf(out, size, "%.0f min", s / 60);
	else if (s < 172800)
		snprintf(out, size, "%.1f h", s / 3600);
	else
		snprintf(out, size, "%.1f d", s / 86400);
}

static void
html_providers(struct buf *b, const json_t *s)
{
	const json_t *filter = json_object_get(s, "filter"), *p, *pl, *l, *la;
	size_t i, j, k;

	puts_(b, "<section id=\"providers\"><h2>Providers and pools</h2><table><thead><tr>"
		 "<th>Provider</th><th>Driver</th><th>State</th><th>Pool</th><th>Labels</th>"
		 "<th>Launchers</th><th class=\"num\">Nodes</th></tr></thead><tbody>");
	json_array_foreach(json_object_get(s, "providers"), i, p)
	{
		const char *name = jstrv(p, "name"), *st = jstrv(p, "state");
		const json_t *pools = json_object_get(p, "pools");
		size_t np = json_array_size(pools) ? json_array_size(pools) : 1;
		char last[64] = "";
		if (json_is_integer(json_object_get(p, "starts")))
			snprintf(last, sizeof(last), "starts: %lld", (long long)jintv(p, "starts"));
		for (j = 0; j < np; j++) {
			pl = json_array_get(pools, j);
			puts_(b, "<tr>");
			if (j == 0) {
				putf(b, "<td rowspan=\"%zu\">", np);
				flink(b, filter, name, NULL, name);
				putf(b, "</td><td rowspan=\"%zu\">", np);
				esc(b, jstrv(p, "driver"));
				putf(b, "</td><td rowspan=\"%zu\"><span class=\"st st-", np);
				esc(b, st);
				puts_(b, "\" data-k=\"prov-state:");
				esc(b, name);
				puts_(b, "\">");
				esc(b, st);
				puts_(b, "</span><small>");
				esc(b, last);
				puts_(b, "</small></td>");
			}
			puts_(b, "<td>");
			esc(b, jstrv(pl, "name"));
			puts_(b, "</td><td>");
			json_array_foreach(json_object_get(pl, "labels"), k, l)
			{
				if (k)
					puts_(b, " ");
				flink(b, filter, NULL, json_string_value(l), json_string_value(l));
			}
			puts_(b, "</td><td>");
			json_array_foreach(json_object_get(pl, "launchers"), k, la)
			{
				puts_(b, "<div class=\"lc\"><span class=\"st st-");
				esc(b, jstrv(la, "state"));
				puts_(b, "\">");
				esc(b, jstrv(la, "state"));
				puts_(b, "</span> <code>");
				esc(b, jstrv(la, "hostname"));
				puts_(b, "</code> ");
				launcher_tag(b, la);
				puts_(b, "</div>");
			}
			if (json_array_size(json_object_get(pl, "launchers")) == 0)
				puts_(b, "<span class=\"muted\">none registered</span>");
			puts_(b, "</td>");
			if (j == 0) {
				putf(b,
				     "<td class=\"num\" rowspan=\"%zu\" data-k=\"prov-total:", np);
				esc(b, name);
				putf(b, "\">%lld</td>", (long long)jintv(p, "total"));
			}
			puts_(b, "</tr>");
		}
	}
	puts_(b, "</tbody></table></section>");
}

static void
html_nodes(struct buf *b, const json_t *s)
{
	const json_t *nodes = json_object_get(s, "nodes"), *filter = json_object_get(s, "filter");
	const json_t *bys = json_object_get(nodes, "by_state"),
		     *byl = json_object_get(nodes, "by_label");
	const char *label;
	const json_t *counts;
	size_t i;

	puts_(b, "<section id=\"nodes\"><h2>Nodes by state and label</h2>"
		 "<div id=\"chart\" class=\"chart\"></div>");
	putf(b, "<p class=\"big\"><span data-k=\"nodes-total\">%lld</span> nodes</p>",
	     (long long)jintv(nodes, "total"));
	puts_(b, "<table><thead><tr><th>Label</th>");
	for (i = 0; i < NSTATES; i++)
		if (json_object_get(bys, node_states[i]) != NULL)
			putf(b, "<th class=\"num\"><span class=\"sw sw-%s\"></span>%s</th>",
			     node_states[i], node_states[i]);
	puts_(b, "</tr></thead><tbody>");
	json_object_foreach((json_t *)byl, label, counts)
	{
		puts_(b, "<tr><td>");
		flink(b, filter, NULL, label, label);
		puts_(b, "</td>");
		for (i = 0; i < NSTATES; i++)
			if (json_object_get(bys, node_states[i]) != NULL) {
				puts_(b, "<td class=\"num\" data-k=\"label-state:");
				esc(b, label);
				putf(b, "|%s\">%lld</td>", node_states[i],
				     (long long)jintv(counts, node_states[i]));
			}
		puts_(b, "</tr>");
	}
	puts_(b, "<tr class=\"tot\"><td>all nodes</td>");
	for (i = 0; i < NSTATES; i++)
		if (json_object_get(bys, node_states[i]) != NULL)
			putf(b, "<td class=\"num\" data-k=\"state:%s\">%lld</td>", node_states[i],
			     (long long)jintv(bys, node_states[i]));
	puts_(b, "</tr></tbody></table></section>");
}

static void
html_quota(struct buf *b, const json_t *s)
{
	const json_t *q;
	size_t i;

	puts_(b, "<section id=\"quota\"><h2>Quota use</h2><table><thead><tr><th>Provider</th>"
		 "<th>Pool</th><th>Resource</th><th class=\"bar\">Use</th><th class=\"num\">Used"
		 "</th><th class=\"num\">Limit</th></tr></thead><tbody>");
	json_array_foreach(json_object_get(s, "quota"), i, q)
	{
		const json_t *lim = json_object_get(q, "limit");
		long long used = jintv(q, "used"), l = json_integer_value(lim);
		double pct = json_is_integer(lim) && l > 0 ? 100.0 * (double)used / (double)l : 0;
		const char *key = jstrv(q, "pool");
		if (pct > 100)
			pct = 100;
		puts_(b, "<tr><td>");
		esc(b, jstrv(q, "provider"));
		puts_(b, "</td><td>");
		esc(b, *key ? key : "(provider)");
		puts_(b, "</td><td>");
		esc(b, jstrv(q, "resource"));
		putf(b,
		     "</td><td class=\"bar\"><div class=\"bar%s\"><i style=\"width:%.1f%%\"></i>"
		     "</div></td>",
		     pct >= 90 ? " hot" : "", pct);
		puts_(b, "<td class=\"num\" data-k=\"quota:");
		esc(b, jstrv(q, "provider"));
		puts_(b, "|");
		esc(b, key);
		puts_(b, "|");
		esc(b, jstrv(q, "resource"));
		putf(b, "\">%lld</td><td class=\"num\">", used);
		if (json_is_integer(lim))
			putf(b, "%lld", l);
		else
			puts_(b, "&infin;");
		puts_(b, "</td></tr>");
	}
	json_array_foreach(json_object_get(s, "tenants"), i, q)
	{
		puts_(b, "<tr><td colspan=\"2\">tenant ");
		esc(b, jstrv(q, "tenant"));
		puts_(b, "</td><td>");
		esc(b, jstrv(q, "resource"));
		puts_(b, "</td><td class=\"bar muted\">limit (usage by tenant is Zuul's)</td>"
			 "<td class=\"num\">-</td><td class=\"num\">");
		putf(b, "%lld", (long long)jintv(q, "limit"));
		puts_(b, "</td></tr>");
	}
	puts_(b, "</tbody></table></section>");
}

static void
html_phases(struct buf *b, const json_t *s)
{
	const json_t *phases = json_object_get(s, "phases");
	int ph;

	puts_(b, "<section id=\"phases\"><h2>Launch phases <small>bucket upper bounds in seconds "
		 "(m: minutes, h: hours)</small></h2><div class=\"hists\">");
	for (ph = 0; ph < METRICS_PHASE_COUNT; ph++) {
		const char *name = metrics_phase_name(ph);
		const json_t *p = json_object_get(phases, name),
			     *bk = json_object_get(p, "buckets");
		json_int_t max = 1, count = jintv(p, "count");
		size_t i;
		if (p == NULL)
			continue;
		for (i = 0; i < json_array_size(bk); i++)
			if (json_integer_value(json_array_get(bk, i)) > max)
				max = json_integer_value(json_array_get(bk, i));
		putf(b,
		     "<div class=\"hist\"><h3>%s</h3><p><span data-k=\"phase-count:%s\">%lld"
		     "</span> launches",
		     name, name, (long long)count);
		if (count > 0)
			putf(b, ", mean %.2f s",
			     json_number_value(json_object_get(p, "sum")) / count);
		puts_(b, "</p><div class=\"cols\">");
		for (i = 0; i < json_array_size(bk); i++) {
			json_int_t n = json_integer_value(json_array_get(bk, i));
			const json_t *bd = json_array_get(json_object_get(p, "bounds"), i);
			char le[32];
			if (bd == NULL)
				snprintf(le, sizeof(le), "more");
			else if (json_number_value(bd) < 60)
				snprintf(le, sizeof(le), "%g", json_number_value(bd));
			else if (json_number_value(bd) < 3600)
				snprintf(le, sizeof(le), "%gm", json_number_value(bd) / 60);
			else
				snprintf(le, sizeof(le), "%gh", json_number_value(bd) / 3600);
			putf(
			    b,
			    "<div class=\"col\" title=\"up to %s: %lld\"><span class=\"n\" "
			    "data-k=\"phase:%s|%zu\">%lld</span><div class=\"c\"><i style=\"height:"
			    "%.1f%%\"></i></div><span class=\"le\">%s</span></div>",
			    le, (long long)n, name, i, (long long)n,
			    100.0 * (double)n / (double)max, le);
		}
		puts_(b, "</div></div>");
	}
	puts_(b, "</div></section>");
}

static void
html_requests(struct buf *b, const json_t *s)
{
	const json_t *r = json_object_get(s, "requests"), *a, *t;
	size_t i, k;

	putf(b,
	     "<section id=\"requests\"><h2>Requests waiting</h2><p class=\"big\"><span "
	     "data-k=\"req-waiting\">%lld</span> waiting</p><table><thead><tr><th>Age</th>"
	     "<th class=\"num\">Requests</th></tr></thead><tbody>",
	     (long long)jintv(r, "waiting"));
	json_array_foreach(json_object_get(r, "by_age"), i, a)
	{
		puts_(b, "<tr><td>");
		esc(b, jstrv(a, "label"));
		putf(b, "</td><td class=\"num\" data-k=\"req-age:%zu\">%lld</td></tr>", i,
		     (long long)jintv(a, "n"));
	}
	puts_(b, "</tbody></table><h3>Oldest</h3><table><thead><tr><th>Request</th><th>State</th>"
		 "<th>Labels</th><th>Requestor</th><th class=\"num\">Age</th></tr></thead><tbody>");
	json_array_foreach(json_object_get(r, "oldest"), i, a)
	{
		char age[32];
		puts_(b, "<tr><td><code>");
		esc(b, jstrv(a, "id"));
		puts_(b, "</code></td><td>");
		esc(b, jstrv(a, "state"));
		puts_(b, "</td><td>");
		json_array_foreach(json_object_get(a, "node_types"), k, t)
		{
			if (k)
				puts_(b, " ");
			esc(b, json_string_value(t));
		}
		puts_(b, "</td><td>");
		esc(b, jstrv(a, "requestor"));
		age_text(age, sizeof(age), json_number_value(json_object_get(a, "age")));
		putf(b, "</td><td class=\"num\">%s</td></tr>", age);
	}
	puts_(b, "</tbody></table></section>");
}

static void
html_images(struct buf *b, const json_t *s)
{
	const json_t *img, *x;
	size_t i, k;
	char age[32];

	puts_(b, "<section id=\"images\"><h2>Diskimages</h2><table><thead><tr><th>Image</th>"
		 "<th>Builds</th><th>Uploads</th></tr></thead><tbody>");
	json_array_foreach(json_object_get(s, "images"), i, img)
	{
		puts_(b, "<tr><td>");
		esc(b, jstrv(img, "image"));
		puts_(b, "<br><small><span data-k=\"image-builds:");
		esc(b, jstrv(img, "image"));
		putf(b, "\">%zu</span> builds, <span data-k=\"image-uploads:",
		     json_array_size(json_object_get(img, "builds")));
		esc(b, jstrv(img, "image"));
		putf(b, "\">%zu</span> uploads</small></td><td>",
		     json_array_size(json_object_get(img, "uploads")));
		json_array_foreach(json_object_get(img, "builds"), k, x)
		{
			puts_(b, "<div><code>");
			esc(b, jstrv(x, "id"));
			puts_(b, "</code> <span class=\"st st-");
			esc(b, jstrv(x, "state"));
			puts_(b, "\">");
			esc(b, jstrv(x, "state"));
			puts_(b, "</span> <small>");
			age_text(age, sizeof(age),
				 json_is_integer(json_object_get(x, "age"))
				     ? (double)jintv(x, "age")
				     : -1);
			esc(b, age);
			puts_(b, "</small></div>");
		}
		puts_(b, "</td><td>");
		json_array_foreach(json_object_get(img, "uploads"), k, x)
		{
			puts_(b, "<div>");
			esc(b, jstrv(x, "provider"));
			puts_(b, " <code>");
			esc(b, jstrv(x, "build"));
			puts_(b, "/");
			esc(b, jstrv(x, "id"));
			puts_(b, "</code> <span class=\"st st-");
			esc(b, jstrv(x, "state"));
			puts_(b, "\">");
			esc(b, jstrv(x, "state"));
			puts_(b, "</span> <small>");
			age_text(age, sizeof(age),
				 json_is_integer(json_object_get(x, "age"))
				     ? (double)jintv(x, "age")
				     : -1);
			esc(b, age);
			puts_(b, "</small></div>");
		}
		puts_(b, "</td></tr>");
	}
	if (json_array_size(json_object_get(s, "images")) == 0)
		puts_(b, "<tr><td colspan=\"3\" class=\"muted\">no diskimages</td></tr>");
	puts_(b, "</tbody></table></section>");
}

static void
html_held(struct buf *b, const json_t *s)
{
	const json_t *h, *l;
	size_t i, k;

	putf(b,
	     "<section id=\"held\"><h2>Held nodes (<span data-k=\"held-count\">%lld</span>)</h2>"
	     "<table><thead><tr><th>Node</th><th>Provider</th><th>Label</th><th>Job</th>"
	     "<th>Comment</th><th class=\"num\">Held for</th><th class=\"num\">Expires in"
	     "</th></tr></thead><tbody>",
	     (long long)jintv(s, "held_total"));
	json_array_foreach(json_object_get(s, "held"), i, h)
	{
		char age[32], exp[32];
		const json_t *e = json_object_get(h, "expires_in");
		age_text(age, sizeof(age), (double)jintv(h, "age"));
		if (json_is_integer(e))
			age_text(exp, sizeof(exp), (double)json_integer_value(e));
		else
			snprintf(exp, sizeof(exp), "never");
		puts_(b, "<tr><td><code>");
		esc(b, jstrv(h, "id"));
		puts_(b, "</code></td><td>");
		esc(b, jstrv(h, "provider"));
		puts_(b, "</td><td>");
		json_array_foreach(json_object_get(h, "label"), k, l)
		{
			if (k)
				puts_(b, " ");
			esc(b, json_string_value(l));
		}
		puts_(b, "</td><td>");
		esc(b, jstrv(h, "hold_job"));
		puts_(b, "</td><td>");
		esc(b, jstrv(h, "comment"));
		putf(b, "</td><td class=\"num\">%s</td><td class=\"num\">%s</td></tr>", age, exp);
	}
	if (json_array_size(json_object_get(s, "held")) == 0)
		puts_(b, "<tr><td colspan=\"7\" class=\"muted\">no held nodes</td></tr>");
	else if ((size_t)jintv(s, "held_total") > json_array_size(json_object_get(s, "held")))
		putf(b,
		     "<tr><td colspan=\"7\" class=\"muted\">the %zu soonest to expire shown; "
		     "<code>nodepool list</code> has them all</td></tr>",
		     json_array_size(json_object_get(s, "held")));
	puts_(b, "</tbody></table></section>");
}

char *
statuspage_html(const json_t *s)
{
	struct buf b = {NULL, 0, 0};
	const json_t *filter = json_object_get(s, "filter"), *l;
	const char *fp = json_string_value(json_object_get(filter, "provider"));
	const char *fl = json_string_value(json_object_get(filter, "label"));
	char *data;
	size_t i;

	puts_(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
		  "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
		  "<title>nodepool status</title><link rel=\"icon\" href=\"data:,\"><style>");
	puts_(&b, statuspage_css);
	puts_(&b, "</style></head><body><header><h1>nodepool</h1><nav>");
	puts_(&b, "<a class=\"flt\" href=\"?\">all</a>");
	if (fp) {
		puts_(&b, " <span class=\"chip\">provider ");
		esc(&b, fp);
		puts_(&b, "</span>");
	}
	if (fl) {
		puts_(&b, " <span class=\"chip\">label ");
		esc(&b, fl);
		puts_(&b, "</span>");
	}
	puts_(&b, " <span class=\"muted\">labels:</span>");
	json_array_foreach(json_object_get(s, "labels"), i, l)
	{
		puts_(&b, " ");
		flink(&b, filter, NULL, json_string_value(l), json_string_value(l));
	}
	puts_(&b, "</nav><span id=\"upd\" class=\"muted\">rendered by the server</span></header>"
		  "<main id=\"main\">");
	html_providers(&b, s);
	html_nodes(&b, s);
	html_quota(&b, s);
	html_requests(&b, s);
	html_phases(&b, s);
	html_images(&b, s);
	html_held(&b, s);
	puts_(&b, "</main><script id=\"history\" type=\"application/json\">");
	/* the samples, for the script's chart (the tables are drawn here;
	 * the script redraws them from /status-summary); "</" cannot close
	 * the element (escaped as JSON allows) */
	data = json_dumps(json_object_get(s, "history"), JSON_COMPACT);
	if (data == NULL)
		np_oom();
	for (i = 0; data[i]; i++) {
		if (data[i] == '<')
			puts_(&b, "\\u003c");
		else
			put(&b, data + i, 1);
	}
	free(data);
	puts_(&b, "</script><script>");
	puts_(&b, statuspage_js);
	puts_(&b, "</script></body></html>\n");
	return b.p;
}
