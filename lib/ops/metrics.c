/*
 * Launch and request metrics, their publication in ZooKeeper and the
 * Prometheus text. See metrics.h.
 */
#include "lib/ops/metrics.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "lib/core/clock.h"
#include "lib/core/log.h"
#include "protocol/model.h"
#include "protocol/nodesum.h"
#include "lib/ops/nodeview.h"
#include "lib/ops/statsd.h"
#include "lib/zk/zk.h"
#include "lib/core/xalloc.h"

const double metrics_buckets[METRICS_NBUCKETS] = {0.1, 0.5, 1,	 2.5, 5,    10,	 30,
						  60,  120, 300, 600, 1800, 3600};

static const char *const phase_names[METRICS_PHASE_COUNT] = {"quota_wait", "create", "boot",
							     "keyscan", "total"};
static const char *const request_keys[4] = {"accepted", "fulfilled", "declined", "failed"};
static const char *const zk_keys[METRICS_ZK_COUNT] = {"connection_losses", "expirations",
						      "connect_errors", "resent", "lock_lost"};

const char *
metrics_phase_name(int phase)
{
	return phase >= 0 && phase < METRICS_PHASE_COUNT ? phase_names[phase] : NULL;
}

/* ---- the process's figures -------------------------------------------------- */

struct hist {
	unsigned long long b[METRICS_NBUCKETS + 1];
	double sum;
	unsigned long long count;
};

struct prov_metrics {
	char *provider;
	json_t *launches;  /* result -> count */
	json_t *rollbacks; /* image -> count */
	json_t *retries;   /* API -> calls retried (lib/net/http.h) */
	struct hist phases[METRICS_PHASE_COUNT];
	unsigned long long requests[4];
	unsigned long long zookeeper[METRICS_ZK_COUNT];
};

static struct prov_metrics *provs;
static size_t nprovs;
static struct statsd *g_statsd;
/* The record read back at the first start of publication in this process
 * (process-wide: a reconfigured launcher must not count it twice). */
static json_t *g_base;
static int g_base_loaded;

void
metrics_set_statsd(struct statsd *s)
{
	g_statsd = s;
}

void
metrics_statsd_incr(const char *name, long long n)
{
	if (g_statsd == NULL || name == NULL)
		return;
	statsd_incr(g_statsd, name, n);
	statsd_flush(g_statsd);
}

static struct prov_metrics *
prov_get(const char *provider)
{
	size_t i;

	if (provider == NULL)
		provider = "";
	for (i = 0; i < nprovs; i++)
		if (strcmp(provs[i].provider, provider) == 0)
			return &provs[i];
	if ((provs = realloc(provs, (nprovs + 1) * sizeof(*provs))) == NULL)
		np_oom();
	memset(&provs[nprovs], 0, sizeof(provs[nprovs]));
	if ((provs[nprovs].provider = strdup(provider)) == NULL ||
	    (provs[nprovs].launches = json_object()) == NULL ||
	    (provs[nprovs].rollbacks = json_object()) == NULL ||
	    (provs[nprovs].retries = json_object()) == NULL)
		np_oom();
	return &provs[nprovs++];
}

void
metrics_clear(void)
{
	size_t i;

	for (i = 0; i < nprovs; i++) {
		free(provs[i].provider);
		json_decref(provs[i].launches);
		json_decref(provs[i].rollbacks);
		json_decref(provs[i].retries);
	}
	free(provs);
	provs = NULL;
	nprovs = 0;
	json_decref(g_base);
	g_base = NULL;
	g_base_loaded = 0;
}

static void
hist_add(struct hist *h, double v)
{
	int i;

	if (!isfinite(v) || v < 0)
		v = 0;
	for (i = 0; i < METRICS_NBUCKETS && v > metrics_buckets[i]; i++)
		;
	h->b[i]++;
	h->sum += v;
	h->count++;
}

void
metrics_launch_phase(const char *provider, enum metrics_phase phase, double seconds)
{
	if ((int)phase < 0 || phase >= METRICS_PHASE_COUNT)
		return;
	hist_add(&prov_get(provider)->phases[phase], seconds);
}

static void
send_launch_stats(const char *provider, const char *az, const char *requestor, const char *result,
		  double ms)
{
	char name[768], norm[256];

	if (g_statsd == NULL)
		return;
	/* as recordLaunchStats: a timer and a counter per key */
	snprintf(name, sizeof(name), "nodepool.launch.provider.%s.%s", provider, result);
	statsd_timing(g_statsd, name, ms);
	statsd_incr(g_statsd, name, 1);
	snprintf(name, sizeof(name), "nodepool.launch.%s", result);
	statsd_timing(g_statsd, name, ms);
	statsd_incr(g_statsd, name, 1);
	if (az != NULL && *az != '\0') {
		snprintf(name, sizeof(name), "nodepool.launch.provider.%s.%s.%s", provider, az,
			 result);
		statsd_timing(g_statsd, name, ms);
		statsd_incr(g_statsd, name, 1);
	}
	if (requestor != NULL && *requestor != '\0') {
		snprintf(name, sizeof(name), "nodepool.launch.requestor.%s.%s",
			 statsd_normalize(requestor, norm, sizeof(norm)), result);
		statsd_timing(g_statsd, name, ms);
		statsd_incr(g_statsd, name, 1);
	}
	statsd_flush(g_statsd);
}

void
metrics_launch_result(const char *provider, const char *az, const char *requestor,
		      const char *result, double seconds)
{
	struct prov_metrics *p = prov_get(provider);
	json_t *v;

	if (result == NULL || *result == '\0')
		result = "error.unknown";
	v = json_object_get(p->launches, result);
	json_object_set_new(p->launches, result, json_integer((v ? json_integer_value(v) : 0) + 1));
	hist_add(&p->phases[METRICS_PHASE_TOTAL], seconds);
	/* upstream's dt is whole milliseconds */
	send_launch_stats(provider ? provider : "", az, requestor, result, floor(seconds * 1000.0));
}

void
metrics_image_rollback(const char *provider, const char *image)
{
	struct prov_metrics *p = prov_get(provider);
	char key[512];

	json_object_set_new(
	    p->rollbacks, image,
	    json_integer(json_integer_value(json_object_get(p->rollbacks, image)) + 1));
	snprintf(key, sizeof(key), "nodepool.provider.%s.image.%s.rollbacks", provider, image);
	metrics_statsd_incr(key, 1);
}

void
metrics_api_retry(const char *provider, const char *api)
{
	struct prov_metrics *p = prov_get(provider);
	char key[512], a[256];
	size_t i;

	if (api == NULL || api[0] == '\0')
		api = "unknown";
	json_object_set_new(p->retries, api,
			    json_integer(json_integer_value(json_object_get(p->retries, api)) + 1));
	/* one statsd path component: '.', ':' and '/' would split or break it */
	snprintf(a, sizeof(a), "%s", api);
	for (i = 0; a[i] != '\0'; i++)
		if (a[i] == '.' || a[i] == ':' || a[i] == '/' || a[i] == '|' || a[i] == '@' ||
		    a[i] == ' ')
			a[i] = '_';
	snprintf(key, sizeof(key), "nodepool.provider.%s.api.%s.retries", provider ? provider : "",
		 a);
	metrics_statsd_incr(key, 1);
}

void
metrics_set_requests(const char *provider, unsigned long long accepted,
		     unsigned long long fulfilled, unsigned long long declined,
		     unsigned long long failed)
{
	struct prov_metrics *p = prov_get(provider);

	p->requests[0] = accepted;
	p->requests[1] = fulfilled;
	p->requests[2] = declined;
	p->requests[3] = failed;
}

void
metrics_set_zookeeper(const char *provider, const unsigned long long counts[METRICS_ZK_COUNT])
{
	struct prov_metrics *p = prov_get(provider);

	memcpy(p->zookeeper, counts, sizeof(p->zookeeper));
}

static long long
jint(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);

	return json_is_integer(v) ? (long long)json_integer_value(v) : 0;
}

static json_t *
obj_child(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	if (!json_is_object(v)) {
		v = json_object();
		json_object_set_new(o, k, v);
	}
	return v;
}

json_t *
metrics_record(const char *provider, const json_t *base)
{
	json_t *r = json_is_object(base) ? json_deep_copy(base) : json_object();
	json_t *launches, *phases, *requests, *v;
	struct prov_metrics *p = prov_get(provider);
	const char *k;
	int ph, i;

	if (r == NULL)
		np_oom();
	json_object_set_new(r, "provider", json_string(provider ? provider : ""));
	if (!json_is_integer(json_object_get(r, "starts")))
		json_object_set_new(r, "starts", json_integer(0));
	launches = obj_child(r, "launches");
	json_object_foreach(p->launches, k, v) json_object_set_new(
	    launches, k, json_integer(jint(launches, k) + json_integer_value(v)));
	phases = obj_child(r, "phases");
	for (ph = 0; ph < METRICS_PHASE_COUNT; ph++) {
		const struct hist *h = &p->phases[ph];
		json_t *hp = obj_child(phases, phase_names[ph]);
		json_t *b = json_object_get(hp, "buckets"), *nb = json_array();
		const json_t *sum = json_object_get(hp, "sum");
		for (i = 0; i <= METRICS_NBUCKETS; i++) {
			const json_t *old = json_array_get(b, (size_t)i);
			long long prev =
			    json_is_integer(old) ? (long long)json_integer_value(old) : 0;
			json_array_append_new(nb, json_integer(prev + (long long)h->b[i]));
		}
		json_object_set_new(hp, "buckets", nb);
		json_object_set_new(
		    hp, "sum",
		    json_real((json_is_number(sum) ? json_number_value(sum) : 0) + h->sum));
		json_object_set_new(hp, "count",
				    json_integer(jint(hp, "count") + (long long)h->count));
	}
	v = obj_child(r, "image_rollbacks");
	{
		json_t *rb = v, *c;
		json_object_foreach(p->rollbacks, k, c)
		    json_object_set_new(rb, k, json_integer(jint(rb, k) + json_integer_value(c)));
	}
	v = obj_child(r, "api_retries");
	{
		json_t *ar = v, *c;
		json_object_foreach(p->retries, k, c)
		    json_object_set_new(ar, k, json_integer(jint(ar, k) + json_integer_value(c)));
	}
	requests = obj_child(r, "requests");
	for (i = 0; i < 4; i++)
		json_object_set_new(
		    requests, request_keys[i],
		    json_integer(jint(requests, request_keys[i]) + (long long)p->requests[i]));
	requests = obj_child(r, "zookeeper");
	for (i = 0; i < METRICS_ZK_COUNT; i++)
		json_object_set_new(
		    requests, zk_keys[i],
		    json_integer(jint(requests, zk_keys[i]) + (long long)p->zookeeper[i]));
	return r;
}

/* ---- publication ---------------------------------------------------------------- */

struct metrics_pub {
	struct event_base *base;
	char *provider;
	char path[512];
	double interval;
	status_view_fn view;
	void *arg;
	struct event *timer;
	struct zk *zk; /* the session our operations are on */
	int reading, writing, exists;
	char *last;	/* the text last written */
	json_t *record; /* as last written */
};

static void pub_tick(struct metrics_pub *p);

static void
pub_timer(evutil_socket_t fd, short what, void *arg)
{
	struct metrics_pub *p = arg;
	struct timeval tv;
	double next;

	pub_tick(p);
	/* until the record is read and written (the session may not be up
	 * yet, a write may have failed), look again soon rather than a whole
	 * stats-interval later */
	next = p->record == NULL || p->last == NULL ? fmin(0.2, p->interval) : p->interval;
	tv = np_tv_of(next);
	evtimer_add(p->timer, &tv);
}

struct metrics_pub *
metrics_pub_new(struct event_base *base, const char *provider, double interval, status_view_fn view,
		void *arg)
{
	struct metrics_pub *p = calloc(1, sizeof(*p));
	struct timeval tv = {0, 200000}; /* first look soon: the base is read first */

	if (p == NULL || (p->provider = strdup(provider)) == NULL)
		np_oom();
	p->base = base;
	p->interval = interval > 0 ? interval : 5.0;
	p->view = view;
	p->arg = arg;
	snprintf(p->path, sizeof(p->path), "%s/%s", NP_METRICS_ROOT, provider);
	if ((p->timer = evtimer_new(base, pub_timer, p)) == NULL)
		np_oom();
	evtimer_add(p->timer, &tv);
	return p;
}

void
metrics_pub_reset(struct metrics_pub *p)
{
	if (p == NULL)
		return;
	if (p->zk != NULL)
		zk_cancel(p->zk, p);
	p->zk = NULL;
	p->reading = p->writing = 0;
	free(p->last);
	p->last = NULL;
}

void
metrics_pub_free(struct metrics_pub *p)
{
	if (p == NULL)
		return;
	metrics_pub_reset(p);
	if (p->timer != NULL)
		event_free(p->timer);
	json_decref(p->record);
	free(p->provider);
	free(p);
}

const json_t *
metrics_pub_record(const struct metrics_pub *p)
{
	return p ? p->record : NULL;
}

json_t *
metrics_pub_live(const struct metrics_pub *p)
{
	if (p == NULL || !g_base_loaded || p->record == NULL)
		return NULL;
	return metrics_record(p->provider, g_base);
}

static void
pub_written(int rc, const struct zk_stat *st, void *arg)
{
	struct metrics_pub *p = arg;

	p->writing = 0;
	if (rc == ZNONODE) {
		p->exists = 0;
		free(p->last);
		p->last = NULL;
	} else if (rc != ZOK) {
		free(p->last);
		p->last = NULL; /* write again next time */
	}
}

static void
pub_created(int rc, const char *path, void *arg)
{
	struct metrics_pub *p = arg;

	p->writing = 0;
	if (rc == ZOK || rc == ZNODEEXISTS)
		p->exists = 1;
	if (rc != ZOK) {
		free(p->last);
		p->last = NULL;
	}
}

static void
pub_write(struct metrics_pub *p)
{
	json_t *rec = metrics_record(p->provider, g_base);
	char *text = json_dumps(rec, JSON_SORT_KEYS | JSON_COMPACT | JSON_REAL_PRECISION(17));

	json_decref(p->record);
	p->record = rec;
	if (text == NULL)
		np_oom();
	if (p->last != NULL && strcmp(p->last, text) == 0) {
		free(text);
		return;
	}
	free(p->last);
	p->last = text;
	p->writing = 1;
	if (p->exists)
		zk_set(p->zk, p->path, text, (int)strlen(text), -1, pub_written, p);
	else
		zk_create(p->zk, p->path, text, (int)strlen(text), 0, 1, pub_created, p);
}

static void
pub_read(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct metrics_pub *p = arg;
	json_t *base = NULL;

	p->reading = 0;
	if (rc != ZOK && rc != ZNONODE)
		return; /* try again next tick */
	p->exists = rc == ZOK;
	if (!g_base_loaded) {
		if (rc == ZOK && len > 0)
			base = json_loadb(data, (size_t)len, 0, NULL);
		if (!json_is_object(base)) {
			json_decref(base);
			base = json_object();
		}
		/* this process is one more start of the provider's worker */
		json_object_set_new(base, "starts", json_integer(jint(base, "starts") + 1));
		g_base = base;
		g_base_loaded = 1;
	}
	pub_write(p);
}

static void
pub_tick(struct metrics_pub *p)
{
	struct status_view v;

	memset(&v, 0, sizeof(v));
	p->view(p->arg, &v);
	if (v.zk != p->zk)
		metrics_pub_reset(p);
	p->zk = v.zk;
	if (v.provider != NULL)
		metrics_set_requests(v.provider, v.accepted, v.fulfilled, v.declined, v.failed);
	if (p->zk == NULL || !zk_is_connected(p->zk) || p->reading || p->writing)
		return;
	if (!g_base_loaded || p->record == NULL) {
		/* read the record first: whether it exists, and (once per
		 * process) the figures to continue from */
		p->reading = 1;
		zk_get(p->zk, p->path, NULL, NULL, pub_read, p);
		return;
	}
	pub_write(p);
}

/* ---- reading every record ------------------------------------------------------------ */

struct mload_op {
	struct mload_op *next, *prev;
	struct metrics_load *l;
	size_t idx; /* (size_t)-1: the listing */
};

struct metrics_load {
	struct zk *zk;
	metrics_load_cb cb;
	void *arg;
	struct mload_op *ops;
	json_t *records;
	json_t **slots;
	size_t nslots;
	int rc;
};

static struct mload_op *
mop_new(struct metrics_load *l, size_t idx)
{
	struct mload_op *o = calloc(1, sizeof(*o));

	if (o == NULL)
		np_oom();
	o->l = l;
	o->idx = idx;
	o->next = l->ops;
	if (l->ops)
		l->ops->prev = o;
	l->ops = o;
	return o;
}

static void
mload_free(struct metrics_load *l)
{
	struct mload_op *o, *n;
	size_t i;

	for (o = l->ops; o != NULL; o = n) {
		n = o->next;
		zk_cancel(l->zk, o);
		free(o);
	}
	for (i = 0; i < l->nslots; i++)
		json_decref(l->slots[i]);
	free(l->slots);
	json_decref(l->records);
	free(l);
}

static void
mop_done(struct mload_op *o, int rc)
{
	struct metrics_load *l = o->l;
	size_t i;

	if (o->prev)
		o->prev->next = o->next;
	else
		l->ops = o->next;
	if (o->next)
		o->next->prev = o->prev;
	free(o);
	if (rc != ZOK && l->rc == ZOK)
		l->rc = rc;
	if (l->ops != NULL)
		return;
	if (l->rc == ZOK) {
		json_t *out = json_array();
		for (i = 0; i < l->nslots; i++)
			if (json_is_object(l->slots[i]))
				json_array_append(out, l->slots[i]);
		l->cb(ZOK, out, l->arg);
	} else {
		l->cb(l->rc, NULL, l->arg);
	}
	mload_free(l);
}

static void
mload_data(int rc, const char *data, int len, const struct zk_stat *st, void *arg)
{
	struct mload_op *o = arg;

	if (rc == ZOK && len > 0)
		o->l->slots[o->idx] = json_loadb(data, (size_t)len, 0, NULL);
	mop_done(o, rc == ZNONODE ? ZOK : rc);
}

static void
mload_children(int rc, int count, char *const *names, void *arg)
{
	struct mload_op *o = arg;
	struct metrics_load *l = o->l;
	char path[600];
	int i;

	if (rc == ZOK && count > 0) {
		l->slots = calloc((size_t)count, sizeof(*l->slots));
		if (l->slots == NULL)
			np_oom();
		l->nslots = (size_t)count;
		for (i = 0; i < count; i++) {
			snprintf(path, sizeof(path), "%s/%s", NP_METRICS_ROOT, names[i]);
			zk_get(l->zk, path, NULL, NULL, mload_data, mop_new(l, (size_t)i));
		}
	}
	mop_done(o, rc == ZNONODE ? ZOK : rc);
}

struct metrics_load *
metrics_load_start(struct zk *zk, metrics_load_cb cb, void *arg)
{
	struct metrics_load *l = calloc(1, sizeof(*l));

	if (l == NULL)
		np_oom();
	l->zk = zk;
	l->cb = cb;
	l->arg = arg;
	l->rc = ZOK;
	zk_children(zk, NP_METRICS_ROOT, NULL, NULL, mload_children, mop_new(l, (size_t)-1));
	return l;
}

void
metrics_load_cancel(struct metrics_load *l)
{
	if (l != NULL)
		mload_free(l);
}

/* ---- Prometheus text ------------------------------------------------------------------ */

struct out {
	char *s;
	size_t len, cap;
};

static void __attribute__((format(printf, 2, 3))) outf(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	while (o->len + (size_t)n + 1 > o->cap) {
		o->cap = o->cap ? o->cap * 2 : 4096;
		if ((o->s = realloc(o->s, o->cap)) == NULL)
			np_oom();
	}
	va_start(ap, fmt);
	vsnprintf(o->s + o->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	o->len += (size_t)n;
}

/* A label value with \, " and newlines escaped (static rotating buffers). */
static const char *
esc(const char *s)
{
	static char bufs[4][512];
	static int k;
	char *b = bufs[k++ % 4];
	size_t i = 0;

	for (; s != NULL && *s != '\0' && i + 3 < sizeof(bufs[0]); s++) {
		if (*s == '\\' || *s == '"') {
			b[i++] = '\\';
			b[i++] = *s;
		} else if (*s == '\n') {
			b[i++] = '\\';
			b[i++] = 'n';
		} else {
			b[i++] = *s;
		}
	}
	b[i] = '\0';
	return b;
}

static void
count_inc(json_t *m, const char *a, const char *b, int zero)
{
	json_t *inner = json_object_get(m, a), *v;

	if (inner == NULL) {
		inner = json_object();
		json_object_set_new(m, a, inner);
	}
	if (b == NULL)
		return;
	v = json_object_get(inner, b);
	json_object_set_new(inner, b,
			    json_integer((v ? json_integer_value(v) : 0) + (zero ? 0 : 1)));
}

static void
print_counts(struct out *o, const char *metric, const char *l1, const char *l2, json_t *m)
{
	const char *a, *b;
	json_t *inner, *v;
	int st;

	json_object_foreach(m, a, inner)
	{
		/* every state, zero-filled */
		for (st = 0; st < NP_NODE_STATE_COUNT; st++)
			if (json_object_get(inner, np_node_state_name(st)) == NULL)
				json_object_set_new(inner, np_node_state_name(st), json_integer(0));
		json_object_foreach(inner, b, v)
		    outf(o, "%s{%s=\"%s\",%s=\"%s\"} %lld\n", metric, l1, esc(a), l2, esc(b),
			 (long long)json_integer_value(v));
	}
}

static void
render_record(struct out *o, const json_t *r, int what)
{
	const char *prov = json_string_value(json_object_get(r, "provider")), *k;
	const json_t *v, *phases = json_object_get(r, "phases"), *hp;
	int ph, i;

	if (prov == NULL)
		return;
	switch (what) {
	case 0:
		json_object_foreach((json_t *)json_object_get(r, "launches"), k, v)
		    outf(o, "nodepool_launches_total{provider=\"%s\",result=\"%s\"} %lld\n",
			 esc(prov), esc(k), (long long)json_integer_value(v));
		break;
	case 1:
		for (ph = 0; ph < METRICS_PHASE_COUNT; ph++) {
			const json_t *b;
			long long cum = 0;
			hp = json_object_get(phases, phase_names[ph]);
			b = json_object_get(hp, "buckets");
			if (jint(hp, "count") == 0 && ph != METRICS_PHASE_TOTAL)
				continue;
			for (i = 0; i <= METRICS_NBUCKETS; i++) {
				cum += json_integer_value(json_array_get(b, (size_t)i));
				if (i < METRICS_NBUCKETS)
					outf(o,
					     "nodepool_launch_duration_seconds_bucket{provider=\"%"
					     "s\","
					     "phase=\"%s\",le=\"%g\"} %lld\n",
					     esc(prov), phase_names[ph], metrics_buckets[i], cum);
				else
					outf(o,
					     "nodepool_launch_duration_seconds_bucket{provider=\"%"
					     "s\","
					     "phase=\"%s\",le=\"+Inf\"} %lld\n",
					     esc(prov), phase_names[ph], cum);
			}
			outf(o,
			     "nodepool_launch_duration_seconds_sum{provider=\"%s\",phase=\"%s\"} "
			     "%.6f\n",
			     esc(prov), phase_names[ph],
			     json_number_value(json_object_get(hp, "sum")));
			outf(o,
			     "nodepool_launch_duration_seconds_count{provider=\"%s\",phase=\"%s\"} "
			     "%lld\n",
			     esc(prov), phase_names[ph], jint(hp, "count"));
		}
		break;
	case 2:
		for (i = 0; i < 4; i++)
			outf(o,
			     "nodepool_requests_handled_total{provider=\"%s\",outcome=\"%s\"} "
			     "%lld\n",
			     esc(prov), request_keys[i],
			     jint(json_object_get(r, "requests"), request_keys[i]));
		break;
	case 3:
		outf(o, "nodepool_worker_starts_total{provider=\"%s\"} %lld\n", esc(prov),
		     jint(r, "starts"));
		break;
	case 6:
		json_object_foreach((json_t *)json_object_get(r, "image_rollbacks"), k, v)
		    outf(o, "nodepool_image_rollbacks_total{provider=\"%s\",image=\"%s\"} %lld\n",
			 esc(prov), esc(k), (long long)json_integer_value(v));
		break;
	case 7:
		json_object_foreach((json_t *)json_object_get(r, "api_retries"), k, v)
		    outf(o, "nodepool_api_retries_total{provider=\"%s\",api=\"%s\"} %lld\n",
			 esc(prov), esc(k), (long long)json_integer_value(v));
		break;
	case 4: {
		long long s = jint(r, "starts");
		outf(o, "nodepool_worker_restarts_total{provider=\"%s\"} %lld\n", esc(prov),
		     s > 1 ? s - 1 : 0);
		break;
	}
	case 5:
		for (i = 0; i < METRICS_ZK_COUNT; i++)
			outf(o,
			     "nodepool_zookeeper_events_total{provider=\"%s\",event=\"%s\"} %lld\n",
			     esc(prov), zk_keys[i],
			     jint(json_object_get(r, "zookeeper"), zk_keys[i]));
		break;
	}
}

/* The record of provider in an array of records, or NULL. */
static const json_t *
record_of(const json_t *records, const char *provider)
{
	const json_t *r;
	size_t i;

	json_array_foreach(records, i, r)
	{
		const char *p = json_string_value(json_object_get(r, "provider"));
		if (p != NULL && strcmp(p, provider) == 0)
			return r;
	}
	return NULL;
}

/* Entries of a decoding cache with a body that did not decode. */
static int
unreadable(const struct zk_cache *c)
{
	const struct zk_cache_entry *const *ents;
	int i, k = 0, n = c != NULL ? zk_cache_entries(c, &ents) : 0;

	for (i = 0; i < n; i++)
		if (ents[i]->obj == NULL && ents[i]->len > 0 && strcmp(ents[i]->name, "lock") != 0)
			k++;
	return k;
}

char *
metrics_render(const struct status_view *v, const json_t *records, const json_t *live)
{
	struct out o = {NULL, 0, 0};
	const struct zk_cache_entry *const *ents;
	json_t *byprov = json_object(), *bylabel = json_object(), *recs = json_array(), *r;
	json_t *lives = json_array();
	long long reqs[NP_REQ_STATE_COUNT] = {0};
	size_t j;
	int i, n, st, what, unread_nodes = 0;
	static const char *const help[8][3] = {
	    {"nodepool_launches_total", "counter", "Node launches by provider and result."},
	    {"nodepool_launch_duration_seconds", "histogram",
	     "Node launch duration by provider and phase."},
	    {"nodepool_requests_handled_total", "counter",
	     "Node requests handled by provider and outcome."},
	    {"nodepool_worker_starts_total", "counter", "Starts of each provider's worker."},
	    {"nodepool_worker_restarts_total", "counter",
	     "Restarts of each provider's worker (starts after the first)."},
	    {"nodepool_zookeeper_events_total", "counter",
	     "ZooKeeper connection events of each provider's worker: connections lost, "
	     "sessions expired, connection errors, operations sent again after a lost "
	     "connection, writes not sent because their lock went with a session."},
	    {"nodepool_image_rollbacks_total", "counter",
	     "Falls back from a provider's newest diskimage upload to the previous one "
	     "(rollback-after launch failures in a row)."},
	    {"nodepool_api_retries_total", "counter",
	     "Cloud API calls tried again by provider and API: throttled (HTTP 429/503, "
	     "after Retry-After) and, where the driver retries them, server and connection "
	     "errors."},
	};

	/* nodes */
	n = v->pools ? zk_cache_entries(v->pools, &ents) : 0;
	for (i = 0; i < n; i++) {
		const struct np_component *c = ents[i]->obj;
		if (c == NULL)
			continue;
		if (c->provider_name != NULL)
			count_inc(byprov, c->provider_name, NULL, 1);
		for (j = 0; j < c->supported_labels.n; j++)
			count_inc(bylabel, c->supported_labels.v[j], NULL, 1);
	}
	n = v->nodes ? zk_cache_entries(v->nodes, &ents) : 0;
	for (i = 0; i < n; i++) {
		struct np_node *tmp = NULL;
		const struct np_node *nd = NULL;
		const char *sn, *prov = NULL;
		const struct np_strv *type = NULL;
		int state = -1;
		if (v->node_sums) {
			const struct np_node_sum *s = ents[i]->obj;
			if (s != NULL)
				state = np_node_sum_state(s), prov = np_node_sum_provider(s),
				type = np_node_sum_type(s);
		} else if (v->node_views) {
			const struct np_node_view *w = ents[i]->obj;
			if (w != NULL)
				state = np_node_view_state(w), prov = np_node_view_provider(w),
				type = np_node_view_type(w);
		} else if ((nd = status_node_of(v->nodes, ents[i], &tmp)) != NULL) {
			state = nd->state, prov = nd->provider, type = &nd->type;
		}
		if (type == NULL && ents[i]->len > 0 && strcmp(ents[i]->name, "lock") != 0)
			unread_nodes++; /* decoded here when the cache keeps text only */
		if (type != NULL && (sn = np_node_state_name(state)) != NULL) {
			count_inc(byprov, prov ? prov : "", sn, 0);
			for (j = 0; j < type->n; j++)
				count_inc(bylabel, type->v[j], sn, 0);
		}
		np_node_free(tmp);
	}
	outf(&o, "# HELP nodepool_nodes Nodes by provider and state.\n"
		 "# TYPE nodepool_nodes gauge\n");
	print_counts(&o, "nodepool_nodes", "provider", "state", byprov);
	outf(&o, "# HELP nodepool_label_nodes Nodes by label and state (a node with several "
		 "labels counts for each).\n# TYPE nodepool_label_nodes gauge\n");
	print_counts(&o, "nodepool_label_nodes", "label", "state", bylabel);
	json_decref(byprov);
	json_decref(bylabel);

	/* requests */
	n = v->requests ? zk_cache_entries(v->requests, &ents) : 0;
	for (i = 0; i < n; i++) {
		const struct np_request *rq = ents[i]->obj;
		if (rq != NULL && rq->state >= 0 && rq->state < NP_REQ_STATE_COUNT)
			reqs[rq->state]++;
	}
	outf(&o, "# HELP nodepool_requests Node requests by state.\n"
		 "# TYPE nodepool_requests gauge\n");
	for (st = 0; st < NP_REQ_STATE_COUNT; st++)
		outf(&o, "nodepool_requests{state=\"%s\"} %lld\n", np_request_state_name(st),
		     reqs[st]);

	/* znodes that are not JSON objects: skipped, never touched */
	outf(&o, "# HELP nodepool_unreadable_records Records in ZooKeeper that are not JSON "
		 "objects (skipped by the launcher, left in place).\n"
		 "# TYPE nodepool_unreadable_records gauge\n");
	outf(&o, "nodepool_unreadable_records{kind=\"node\"} %d\n", unread_nodes);
	outf(&o, "nodepool_unreadable_records{kind=\"request\"} %d\n", unreadable(v->requests));

	outf(&o,
	     "# HELP nodepool_launcher_ready 1 once the launcher serving this API finished "
	     "its first pass.\n# TYPE nodepool_launcher_ready gauge\n"
	     "nodepool_launcher_ready %d\n",
	     v->ready ? 1 : 0);

	/* the configured limits (nodepool-web only: its view carries them) */
	if (v->status_config != NULL) {
		static const char *const res[3][2] = {
		    {"servers", "max-servers"}, {"cores", "max-cores"}, {"ram", "max-ram"}};
		const json_t *p, *pl;
		size_t pi, li;
		outf(&o, "# HELP nodepool_quota_limit Configured limits (max-servers, max-cores, "
			 "max-ram) by provider and pool (pool \"\": the provider's own); "
			 "unlimited ones are left out.\n# TYPE nodepool_quota_limit gauge\n");
		json_array_foreach(json_object_get(v->status_config, "providers"), pi, p)
		{
			const char *pn = json_string_value(json_object_get(p, "name"));
			for (i = 0; pn != NULL && i < 3; i++) {
				const json_t *l = json_object_get(p, res[i][1]);
				if (json_is_integer(l))
					outf(&o,
					     "nodepool_quota_limit{provider=\"%s\",pool=\"\","
					     "resource=\"%s\"} %lld\n",
					     esc(pn), res[i][0], (long long)json_integer_value(l));
				json_array_foreach(json_object_get(p, "pools"), li, pl)
				{
					const char *pool =
					    json_string_value(json_object_get(pl, "name"));
					char pbuf[256];
					l = json_object_get(pl, res[i][1]);
					if (pool == NULL || !json_is_integer(l))
						continue;
					snprintf(pbuf, sizeof(pbuf), "%s", esc(pn));
					outf(&o,
					     "nodepool_quota_limit{provider=\"%s\",pool=\"%s\","
					     "resource=\"%s\"} %lld\n",
					     pbuf, esc(pool), res[i][0],
					     (long long)json_integer_value(l));
				}
			}
		}
	}

	/* per-worker records; a live one replaces the stored copy */
	if (json_is_object(live))
		json_array_append(lives, (json_t *)live);
	else if (json_is_array(live))
		json_array_extend(lives, (json_t *)live);
	json_array_foreach(records, j, r)
	{
		const char *p = json_string_value(json_object_get(r, "provider"));
		if (p != NULL && record_of(lives, p) == NULL)
			json_array_append(recs, r);
	}
	json_array_foreach(lives, j, r)
	{
		if (json_string_value(json_object_get(r, "provider")) != NULL)
			json_array_append(recs, r);
	}
	json_decref(lives);
	for (what = 0; what < 8; what++) {
		outf(&o, "# HELP %s %s\n# TYPE %s %s\n", help[what][0], help[what][2],
		     help[what][0], help[what][1]);
		json_array_foreach(recs, j, r) render_record(&o, r, what);
	}
	json_decref(recs);
	if (o.s == NULL)
		outf(&o, "%s", "");
	return o.s;
}
