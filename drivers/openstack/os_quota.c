/*
 * What the cloud offers, for the openstack driver (os_int.h): flavors
 * (sorted by ram), external networks and availability zones read at start
 * and after a failed read; image and network names looked up and cached as
 * upstream's lru_cache; the quota (GET /limits, volume limits when a label
 * boots from volume) and a label's cost in it.
 */
#include "drivers/openstack/os_int.h"
#include "lib/core/xalloc.h"

#include <sys/queue.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "lib/net/http.h"
#include "lib/config/jsonget.h"
#include "lib/core/log.h"
#include "drivers/openstack/openstack.h"
#include "lib/config/config.h" /* lib/config: struct np_provider */
#include "drivers/openstack/os_answer.h"
#include "drivers/openstack/os_cloud.h"
#include "lib/core/privsep.h"
#include "lib/net/ratelimit.h"
#include "lib/core/clock.h"
#include "lib/net/urlsafe.h"

void
os_wake_all(struct sm_adapter *a)
{
	struct osm *m;

	TAILQ_FOREACH(m, &a->machines, entry)
	sm_machine_wake(&m->m);
}

/* ---- flavors, external networks, availability zones ------------------------------------------ */

static int
flavor_cmp(const void *x, const void *y)
{
	const json_t *const *a = x, *const *b = y;
	double ra = np_json_num(*a, "ram", 0), rb = np_json_num(*b, "ram", 0);

	return ra < rb ? -1 : ra > rb ? 1 : 0;
}

static void
flavors_done(struct os_call *c, int status, const char *error, json_t *body,
	     const struct http_response *res)
{
	struct sm_adapter *a = c->a;
	json_t *v = json_object_get(body, "flavors"), **tmp;
	size_t i, n = json_array_size(v);
	char msg[300];

	a->flavors_call = NULL;
	if (error != NULL || status != 200 || !json_is_array(v)) {
		error_text(status, error, body, res ? res->body : NULL, msg, sizeof(msg));
		log_warn("openstack %s: listing flavors failed: %s", a->env->provider_name, msg);
		a->flavors_failed_at = np_mono_s();
		os_wake_all(a);
		return;
	}
	tmp = calloc(n + 1, sizeof(*tmp));
	for (i = 0; i < n; i++)
		tmp[i] = json_array_get(v, i);
	qsort(tmp, n, sizeof(*tmp), flavor_cmp); /* upstream sorts by ram */
	json_decref(a->flavors);
	a->flavors = json_array();
	for (i = 0; i < n; i++)
		json_array_append(a->flavors, tmp[i]);
	free(tmp);
	os_wake_all(a);
}

void
os_flavors_fetch(struct sm_adapter *a)
{
	if (a->flavors_call == NULL && !a->stopped)
		a->flavors_call =
		    os_call_new(a, SVC_COMPUTE, "GET", "/flavors/detail", NULL, flavors_done, NULL);
}

static void
ext_done(struct os_call *c, int status, const char *error, json_t *body,
	 const struct http_response *res)
{
	struct sm_adapter *a = c->a;
	json_t *v = json_object_get(body, "networks");
	char msg[300];

	a->ext_call = NULL;
	if (a->token != NULL && a->ep[SVC_NETWORK] == NULL) {
		/* no Neutron in the catalog: no floating IPs to manage */
		json_decref(a->ext_nets);
		a->ext_nets = json_array();
	} else if (error != NULL || status != 200 || !json_is_array(v)) {
		error_text(status, error, body, res ? res->body : NULL, msg, sizeof(msg));
		log_warn("openstack %s: listing external networks failed: %s",
			 a->env->provider_name, msg);
		a->ext_failed_at = np_mono_s();
	} else {
		json_decref(a->ext_nets);
		a->ext_nets = json_incref(v);
	}
	os_wake_all(a);
}

void
os_ext_fetch(struct sm_adapter *a)
{
	if (a->ext_call == NULL && !a->stopped)
		a->ext_call = os_call_new(a, SVC_NETWORK, "GET", "/networks?router%3Aexternal=true",
					  NULL, ext_done, NULL);
}

void
os_azs_done(struct os_call *c, int status, const char *error, json_t *body,
	    const struct http_response *res)
{
	struct sm_adapter *a = c->a;
	json_t *v = json_object_get(body, "availabilityZoneInfo"), *z;
	size_t i;

	(void)res;
	a->azs_call = NULL;
	if (error != NULL || status != 200 || !json_is_array(v))
		return; /* upstream: no zones, let Nova choose */
	np_strv_clear(&a->azs);
	json_array_foreach(v, i, z)
	{
		const char *n = os_jstr(z, "zoneName");
		if (n != NULL &&
		    json_is_true(json_object_get(json_object_get(z, "zoneState"), "available")))
			np_strv_push(&a->azs, n);
	}
	a->azs_read = 1;
}

/* ---- name lookups (images, networks), cached as upstream's lru_cache ----------------------- */

/* cache: name -> {"id": id|null, "at": mono, "busy": bool} */
static const json_t *
cache_get(json_t *cache, const char *name)
{
	return json_object_get(cache, name);
}

static void lookup_start(struct sm_adapter *a, json_t *cache, enum os_svc svc, const char *name,
			 int by_id);

static void
lookup_done(struct os_call *c, int status, const char *error, json_t *body,
	    const struct http_response *res)
{
	struct sm_adapter *a = c->a;
	json_t *cache = json_object_get(c->extra, "cache") == json_true() ? a->images : a->nets;
	const char *name = os_jstr(c->extra, "name");
	int by_id = json_is_true(json_object_get(c->extra, "by_id"));
	const char *kind = cache == a->images ? "images" : "networks";
	const char *id = NULL;
	json_t *v;
	char msg[300];

	(void)res;
	if (error != NULL || (status != 200 && status != 404)) {
		error_text(status, error, body, NULL, msg, sizeof(msg));
		log_warn("openstack %s: looking up %s %s failed: %s", a->env->provider_name,
			 kind + 0, name, msg);
		json_object_del(cache, name); /* the next user asks again */
		os_wake_all(a);
		return;
	}
	if (by_id) {
		if (status == 200)
			id = os_jstr(body, "id") ? os_jstr(body, "id")
						 : os_jstr(json_object_get(body, "network"), "id");
	} else {
		v = json_object_get(body, kind);
		if (json_array_size(v) > 0)
			id = os_jstr(json_array_get(v, 0), "id");
		if (id == NULL) {
			/* openstacksdk's find: a name, else an id */
			char *nm = xstrdup(name);
			lookup_start(a, cache, c->svc, nm, 1);
			free(nm);
			return;
		}
	}
	json_object_set_new(
	    cache, name,
	    json_pack("{s:o, s:f}", "id", id ? json_string(id) : json_null(), "at", np_mono_s()));
	if (id == NULL)
		log_warn("openstack %s: no %s named %s in the cloud", a->env->provider_name,
			 cache == a->images ? "image" : "network", name);
	os_wake_all(a);
}

static void
lookup_start(struct sm_adapter *a, json_t *cache, enum os_svc svc, const char *name, int by_id)
{
	char path[1200], enc[900];
	struct os_call *c;

	os_urlenc(name, enc, sizeof(enc));
	if (cache == a->images)
		snprintf(path, sizeof(path), by_id ? "/images/%s" : "/images?name=%s&status=active",
			 enc);
	else
		snprintf(path, sizeof(path), by_id ? "/networks/%s" : "/networks?name=%s", enc);
	json_object_set_new(cache, name, json_pack("{s:n, s:f, s:b}", "id", "at", 0.0, "busy", 1));
	c = os_call_new(a, svc, "GET", path, NULL, lookup_done, NULL);
	c->extra =
	    json_pack("{s:b, s:s, s:b}", "cache", cache == a->images, "name", name, "by_id", by_id);
}

/*
 * The id of name in cache: 1 with *id set, 0 while being looked up (the
 * caller waits; a lookup is started if needed), -1 when the cloud has no
 * such thing (looked up again after OS_IMAGE_RECHECK seconds).
 */
int
os_lookup(struct sm_adapter *a, json_t *cache, enum os_svc svc, const char *name, const char **id)
{
	const json_t *e = cache_get(cache, name);

	if (e == NULL) {
		lookup_start(a, cache, svc, name, 0);
		return 0;
	}
	if (json_is_true(json_object_get(e, "busy")))
		return 0;
	if ((*id = os_jstr(e, "id")) != NULL)
		return 1;
	if (np_mono_s() - np_json_num(e, "at", 0) > OS_IMAGE_RECHECK) {
		lookup_start(a, cache, svc, name, 0);
		return 0;
	}
	return -1;
}

/* Forget every cached os_lookup (after a 400 from Nova, as upstream). */
void
os_caches_clear(struct sm_adapter *a)
{
	const char *k;
	json_t *v;
	void *tmp;

	json_object_foreach_safe(a->images, tmp, k,
				 v) if (!json_is_true(json_object_get(v, "busy")))
	    json_object_del(a->images, k);
	json_object_foreach_safe(a->nets, tmp, k, v) if (!json_is_true(json_object_get(v, "busy")))
	    json_object_del(a->nets, k);
	json_decref(a->flavors);
	a->flavors = NULL;
	os_flavors_fetch(a);
}

/* ---- flavors for labels
 * -------------------------------------------------------------------------- */

/*
 * The label's flavor (upstream's _findFlavor): by flavor-name (name or id)
 * when there is no min-ram, else the smallest with ram >= min-ram whose
 * name contains flavor-name. NULL with *loaded 0 while flavors are not
 * read yet; NULL with *loaded 1 when none matches.
 */
const json_t *
os_find_flavor(struct sm_adapter *a, const struct sm_label *l, int *loaded)
{
	const char *fname = np_json_str(l->raw, "flavor-name", NULL);
	double min_ram = np_json_num(l->raw, "min-ram", 0);
	const json_t *f;
	size_t i;

	*loaded = a->flavors != NULL;
	json_array_foreach(a->flavors, i, f)
	{
		const char *n = os_jstr(f, "name"), *id = os_jstr(f, "id");
		if (min_ram > 0) {
			if (np_json_num(f, "ram", 0) >= min_ram &&
			    (fname == NULL || (n && strstr(n, fname) != NULL)))
				return f;
		} else if (fname != NULL &&
			   ((n && strcmp(n, fname) == 0) || (id && strcmp(id, fname) == 0))) {
			return f;
		}
	}
	return NULL;
}

const json_t *
os_flavor_by_id(struct sm_adapter *a, const char *id)
{
	const json_t *f;
	size_t i;

	json_array_foreach(a->flavors, i, f)
	{
		const char *fid = os_jstr(f, "id");
		if (id != NULL && fid != NULL && strcmp(fid, id) == 0)
			return f;
	}
	return NULL;
}

void
os_quota_from_flavor(const json_t *f, const struct sm_label *l, struct drv_quota *q)
{
	q->instances = 1;
	if (f != NULL) {
		q->cores = np_json_num(f, "vcpus", 0);
		q->ram = np_json_num(f, "ram", 0);
	}
	if (l != NULL && np_json_bool(l->raw, "boot-from-volume", 0)) {
		if (q->extra == NULL)
			q->extra = json_object();
		json_object_set_new(q->extra, "volumes", json_real(1));
		json_object_set_new(q->extra, "volume-gb",
				    json_real(np_json_num(l->raw, "volume-size", 50)));
	}
}

/* ---- servers as instances ----------------------------------------------------------------------
 */

static int
is_ext_net(struct sm_adapter *a, const char *name)
{
	const json_t *n;
	size_t i;

	json_array_foreach(a->ext_nets, i, n)
	{
		const char *nn = os_jstr(n, "name"), *id = os_jstr(n, "id");
		if ((nn && strcmp(nn, name) == 0) || (id && strcmp(id, name) == 0))
			return 1;
	}
	return 0;
}

int
os_ext_net_cb(void *arg, const char *net)
{
	return is_ext_net(arg, net);
}

/* ---- quota
 * ------------------------------------------------------------------------------------------- */

static double
lim(const json_t *abs, const char *k)
{
	const json_t *v = json_object_get(abs, k);
	double d;

	if (!json_is_number(v))
		return INFINITY;
	d = json_number_value(v);
	return d < 0 ? INFINITY : d;
}

static void
volume_limits_done(struct os_call *c, int status, const char *error, json_t *body,
		   const struct http_response *res)
{
	sm_quota_cb cb = (sm_quota_cb)c->ucb;
	struct drv_quota q;
	const json_t *abs = json_object_get(json_object_get(body, "limits"), "absolute");

	(void)res;
	memset(&q, 0, sizeof(q));
	q.instances = np_json_num(c->extra, "instances", INFINITY);
	q.cores = np_json_num(c->extra, "cores", INFINITY);
	q.ram = np_json_num(c->extra, "ram", INFINITY);
	if (error == NULL && status == 200 && json_is_object(abs)) {
		/* unlimited (-1 or absent): the key is left out */
		double nv = lim(abs, "maxTotalVolumes"), gb = lim(abs, "maxTotalVolumeGigabytes");
		q.extra = json_object();
		if (!isinf(nv))
			json_object_set_new(q.extra, "volumes", json_real(nv));
		if (!isinf(gb))
			json_object_set_new(q.extra, "volume-gb", json_real(gb));
	}
	cb(&q, NULL, c->uarg);
	json_decref(q.extra);
}

static void
compute_limits_done(struct os_call *c, int status, const char *error, json_t *body,
		    const struct http_response *res)
{
	struct sm_adapter *a = c->a;
	sm_quota_cb cb = (sm_quota_cb)c->ucb;
	const json_t *abs = json_object_get(json_object_get(body, "limits"), "absolute");
	struct drv_quota q;
	char msg[300];

	if (error != NULL || status != 200 || !json_is_object(abs)) {
		error_text(status, error, body, res ? res->body : NULL, msg, sizeof(msg));
		cb(NULL, msg, c->uarg);
		return;
	}
	memset(&q, 0, sizeof(q));
	q.instances = lim(abs, "maxTotalInstances");
	q.cores = lim(abs, "maxTotalCores");
	q.ram = lim(abs, "maxTotalRAMSize");
	if (a->any_bfv && a->ep[SVC_VOLUME] != NULL) {
		struct os_call *v =
		    os_call_new(a, SVC_VOLUME, "GET", "/limits", NULL, volume_limits_done, NULL);
		v->ucb = c->ucb;
		v->uarg = c->uarg;
		v->extra = json_object();
		if (!isinf(q.instances))
			json_object_set_new(v->extra, "instances", json_real(q.instances));
		if (!isinf(q.cores))
			json_object_set_new(v->extra, "cores", json_real(q.cores));
		if (!isinf(q.ram))
			json_object_set_new(v->extra, "ram", json_real(q.ram));
		return;
	}
	cb(&q, NULL, c->uarg);
}

void
os_quota_limits(struct sm_adapter *a, sm_quota_cb cb, void *arg)
{
	struct os_call *c =
	    os_call_new(a, SVC_COMPUTE, "GET", "/limits", NULL, compute_limits_done, NULL);

	c->ucb = (void *)cb;
	c->uarg = arg;
}

int
os_label_quota(struct sm_adapter *a, const struct sm_label *label, struct drv_quota *out, char *err,
	       size_t errlen)
{
	int loaded;
	const json_t *f = os_find_flavor(a, label, &loaded);

	if (f == NULL && loaded) {
		const char *fname = np_json_str(label->raw, "flavor-name", NULL);
		double min_ram = np_json_num(label->raw, "min-ram", 0);
		if (min_ram > 0)
			snprintf(err, errlen, "Unable to find flavor with min ram: %.0f%s%s",
				 min_ram, fname ? " and name containing " : "", fname ? fname : "");
		else
			snprintf(err, errlen, "Unable to find flavor: %s", fname ? fname : "");
		return -1;
	}
	if (!loaded)
		os_flavors_fetch(a);
	os_quota_from_flavor(f, label, out);
	return 0;
}

int
os_label_ready(struct sm_adapter *a, const struct sm_label *label)
{
	const struct sm_image *im = label->image;
	const char *id, *nm;

	if (im == NULL || im->diskimage)
		return 1; /* diskimages: the framework's uploads */
	if (np_json_str(im->raw, "image-id", NULL) != NULL)
		return 1; /* upstream assumes an image id is there */
	nm = np_json_str(im->raw, "image-name", im->name);
	/* upstream looks the image up synchronously here; ours is looked up
	 * at start and answered from the cache: until the answer is in the
	 * label counts as ready (a create waits for the lookup and fails if
	 * the image is missing), after it only when the image exists */
	return os_lookup(a, a->images, SVC_IMAGE, nm, &id) >= 0;
}

void
os_azs(struct sm_adapter *a, struct np_strv *out)
{
	size_t i;

	for (i = 0; i < a->azs.n; i++)
		np_strv_push(out, a->azs.v[i]);
}
