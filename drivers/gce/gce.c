/*
 * The `gce` driver: Google Compute Engine behind a state-machine Adapter
 * (drivers/statemachine/adapter.h), as upstream Nodepool's
 * nodepool/driver/gce (adapter.py, config.py), non-blocking on the
 * worker's loop.
 *
 * Calls go through gce_api.h (OAuth2 tokens from the application default
 * credentials, Compute Engine v1 JSON through lib/net/http.h at the
 * provider's `rate-limit`, calls per second, 1 unless set, as upstream's
 * task manager).
 *
 * What it does per provider (keys of nodepool.yaml(5), driver gce; the
 * provider's project and zone hold every instance):
 *   - create: instances.insert named after the node's hostname
 *     ("np<id>", upstream's external id), with upstream's body: the
 *     machine type's selfLink, one boot disk (autoDelete) from the label's
 *     cloud image (volume-type, pd-standard; volume-size, 10 GB), one
 *     network interface (the pool's network, else global/networks/default;
 *     subnetwork) with a ONE_TO_ONE_NAT access config, no service account,
 *     and the nodepool_* metadata as metadata items, which is what leak
 *     cleanup and unmanaged quota read back. A retried insert whose first
 *     answer was lost finds alreadyExists: the name is the idempotency key.
 *     An insert whose operation ends in an error (QUOTA_EXCEEDED aborts
 *     the launch as a quota error, upstream's QuotaException; any other
 *     fails the attempt) leaves no instance: the operation
 *     (zoneOperations.get) is asked only while a listing does not show the
 *     instance, so a launch that goes well costs no operation call.
 *   - images: a cloud image's image-id as given (upstream), else its
 *     image-family through images.getFromFamily in image-project (else
 *     the provider's project), else (beyond upstream, which has no image
 *     then) the image named like the cloud image, images.get; answers
 *     cached 5 minutes (upstream asks at every launch).
 *   - state: one instances.list of the zone per poll for every instance
 *     being created or deleted (upstream's shared listInstances), when the framework's pace says
 *     (drivers/statemachine/pace.c: the instances' expected boot); RUNNING
 *     is ready; STOPPING, TERMINATED, SUSPENDED while creating fail the
 *     attempt. A delete is instances.delete, then the shared listing until
 *     the instance is gone.
 *   - quota: regions.get of the provider's region, the CPUS and INSTANCES
 *     quotas (upstream's getQuotaLimits); cores and memory per machine
 *     type from machineTypes.get, fetched for every label at start and
 *     cached (a machine type the zone does not have makes its label an
 *     error label).
 *   - leaks: instances carrying nodepool_provider_name for this provider
 *     in their metadata.
 *   - console log: instances.getSerialPortOutput (port 1) when a nodescan
 *     fails on a label with console-log (beyond upstream's gce driver,
 *     which has none).
 */
#include "drivers/statemachine/statemachine.h"

#include <sys/queue.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "drivers/gce/gce_api.h"
#include "lib/config/jsonget.h"
#include "lib/core/log.h"
#include "lib/core/clock.h"
#include "lib/core/xalloc.h"

#define GCE_POLL	  1.0	/* s: a failed shared listing is retried after this */
#define GCE_PACE	  -1.0	/* poll_schedule: when the framework's pace says */
#define GCE_OP_POLL	  1.0	/* s between zone operation checks */
#define GCE_IMAGE_TTL	  300.0 /* s an image answer is reused */
#define GCE_MISSING_GRACE 60.0	/* s a new instance may be absent from listings */
#define GCE_PAGE	  "500" /* maxResults of a listing page (the API's cap) */

struct gmachine;
TAILQ_HEAD(gmachine_list, gmachine);

/* A context of a call in flight that is not a machine's: freed with the
 * adapter when its call is cancelled unanswered. */
struct pend {
	LIST_ENTRY(pend) entry;
	void (*dtor)(struct pend *p); /* NULL: free(p) */
};
LIST_HEAD(pend_list, pend);

struct sm_adapter {
	struct pend_list pend;
	const struct sm_env *env;
	struct event_base *base;
	struct gce_api *api;
	char *provider, *project, *zone, *region;
	char *zpath; /* "projects/P/zones/Z" */
	int stopped;
	/* the shared poll */
	struct gmachine_list waiting;
	struct event *poll_ev;
	int polling;
	double last_poll;
	/* caches */
	json_t *images;			/* cloud image name -> {src, t} */
	json_t *mtypes;			/* machine type -> {cpus, ram, link} or {missing: msg} */
	json_t *fetching;		/* "image:<name>", "mtype:<name>" -> true while asked */
	struct gmachine_list cachewait; /* machines waiting for a cache entry */
	unsigned long long launched, polls;
};

enum gm_state {
	GM_START,
	GM_IMAGE,  /* images.get / getFromFamily in flight */
	GM_MTYPE,  /* machineTypes.get in flight */
	GM_SUBMIT, /* instances.insert in flight */
	GM_WAIT,   /* in the shared poll */
	GM_DELETE, /* instances.delete in flight */
	GM_DONE,
	GM_FAILED,
};
static const char *const gm_names[] = {"start",	  "image",    "machine type", "submitted",
				       "waiting", "deleting", "done",	      "failed"};

struct gmachine {
	struct sm_machine m;
	struct sm_adapter *a;
	int create;
	enum gm_state st;
	TAILQ_ENTRY(gmachine) entry;
	int listed; /* 1: on waiting (the poll), 2: on cachewait */
	struct gce_call *call;
	double since, op_at;
	/* create */
	const struct sm_label *label;
	char *image_src; /* a diskimage upload's id, or NULL */
	json_t *metadata;
	char *op;	 /* the insert's operation name */
	int op_finished; /* it is DONE (without error) or gone */
	/* latest listing: 0 not asked, 1 asked, 2 listed, 3 asked and absent */
	int seen;
	char status[32];
	struct sm_instance *inst;
};

static double
now_s(void)
{
	return np_mono_s();
}

static const char *
lstr(const struct sm_label *l, const char *k)
{
	return json_string_value(json_object_get(l->raw, k));
}

static const char *
pstr(const struct sm_label *l, const char *k)
{
	return json_string_value(json_object_get(l->pool->raw, k));
}

/* The last '/' segment of a URL ("…/zones/us-central1-a" -> "us-central1-a"). */
static const char *
last_seg(const char *s)
{
	const char *p;

	if (s == NULL)
		return "";
	p = strrchr(s, '/');
	return p != NULL ? p + 1 : s;
}

static void
machine_wake(struct gmachine *gm)
{
	sm_machine_wake(&gm->m);
}

static void
set_state(struct gmachine *gm, enum gm_state st)
{
	gm->st = st;
	gm->m.state = gm_names[st];
}

static void fail(struct gmachine *gm, enum sm_error e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void
fail(struct gmachine *gm, enum sm_error e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(gm->m.error_msg, sizeof(gm->m.error_msg), fmt, ap);
	va_end(ap);
	gm->m.error = e;
	set_state(gm, GM_FAILED);
}

static void poll_schedule(struct sm_adapter *a, double in);
static double poll_pace(struct sm_adapter *a);

static void
unlist(struct gmachine *gm)
{
	if (gm->listed == 1)
		TAILQ_REMOVE(&gm->a->waiting, gm, entry);
	else if (gm->listed == 2)
		TAILQ_REMOVE(&gm->a->cachewait, gm, entry);
	gm->listed = 0;
}

/* Wake every machine waiting for a cache entry (one came, or failed). */
static void
cachewait_wake(struct sm_adapter *a)
{
	struct gmachine *gm;

	TAILQ_FOREACH(gm, &a->cachewait, entry)
	machine_wake(gm);
}

static void
cachewait_add(struct gmachine *gm)
{
	if (gm->listed == 2)
		return;
	unlist(gm);
	TAILQ_INSERT_TAIL(&gm->a->cachewait, gm, entry);
	gm->listed = 2;
}

/* ---- machine types (cores and memory for quota) ---- */

struct fetch_ctx {
	struct pend p;
	struct sm_adapter *a;
	char key[300];
	const struct sm_image *image; /* image fetches */
};

static void
fetch_forget(struct fetch_ctx *fc)
{
	LIST_REMOVE(&fc->p, entry);
	json_object_del(fc->a->fetching, fc->key);
	cachewait_wake(fc->a);
	free(fc);
}

static void
mtype_done(const struct gce_result *r, void *arg)
{
	struct fetch_ctx *fc = arg;
	struct sm_adapter *a = fc->a;
	const char *name = fc->key + strlen("mtype:");

	if (r->reason == NULL) {
		json_object_set_new(
		    a->mtypes, name,
		    json_pack("{s:f, s:f, s:s}", "cpus",
			      json_number_value(json_object_get(r->body, "guestCpus")), "ram",
			      json_number_value(json_object_get(r->body, "memoryMb")), "link",
			      np_json_str(r->body, "selfLink", "")));
	} else if (r->status == 404) {
		char msg[300];
		snprintf(msg, sizeof(msg), "machine type %s does not exist in zone %s: %s", name,
			 a->zone, r->message);
		json_object_set_new(a->mtypes, name, json_pack("{s:s}", "missing", msg));
		log_warn("gce %s: %s", a->provider, msg);
	} else {
		log_warn("gce %s: machineTypes.get %s: %s: %s", a->provider, name, r->reason,
			 r->message);
	}
	fetch_forget(fc);
}

static struct fetch_ctx *
fetch_new(struct sm_adapter *a, const char *key)
{
	struct fetch_ctx *fc;

	if (json_object_get(a->fetching, key) != NULL)
		return NULL;
	fc = xcalloc(1, sizeof(*fc));
	fc->a = a;
	snprintf(fc->key, sizeof(fc->key), "%s", key);
	json_object_set_new(a->fetching, key, json_true());
	LIST_INSERT_HEAD(&a->pend, &fc->p, entry);
	return fc;
}

static void
mtype_fetch(struct sm_adapter *a, const char *name)
{
	char key[300], path[512];
	struct fetch_ctx *fc;

	snprintf(key, sizeof(key), "mtype:%s", name);
	if ((fc = fetch_new(a, key)) == NULL)
		return;
	snprintf(path, sizeof(path), "%s/machineTypes/%s", a->zpath, name);
	gce_compute(a->api, "machineTypes.get", "GET", path, NULL, mtype_done, fc);
}

/* A machine type's quota (cores, instances 1, ram) into q; 1 when known. */
static int
mtype_quota(struct sm_adapter *a, const char *name, struct drv_quota *q)
{
	const json_t *mt = json_object_get(a->mtypes, name);

	if (mt == NULL || json_object_get(mt, "missing") != NULL) {
		if (mt == NULL && name != NULL && name[0] != '\0')
			mtype_fetch(a, name);
		return 0;
	}
	q->cores = np_json_num(mt, "cpus", 0);
	q->ram = np_json_num(mt, "ram", 0);
	q->instances = 1;
	return 1;
}

/* ---- instances ---- */

static struct sm_instance *
instance_of(struct sm_adapter *a, const json_t *it)
{
	struct sm_instance *i = sm_instance_new();
	const char *st = np_json_str(it, "status", "");
	const json_t *nic = json_array_get(json_object_get(it, "networkInterfaces"), 0);
	const json_t *ac = json_array_get(json_object_get(nic, "accessConfigs"), 0);
	const json_t *item;
	size_t k;

	sm_set_str(&i->external_id, np_json_str(it, "name", NULL));
	i->ready = strcmp(st, "RUNNING") == 0;
	i->deleted = strcmp(st, "TERMINATED") == 0 || strcmp(st, "STOPPING") == 0;
	sm_set_str(&i->private_ipv4, np_json_str(nic, "networkIP", NULL));
	sm_set_str(&i->public_ipv4, np_json_str(ac, "natIP", NULL));
	sm_set_str(&i->public_ipv6, np_json_str(nic, "ipv6Address", NULL));
	sm_set_str(&i->interface_ip, i->public_ipv4 != NULL ? i->public_ipv4 : i->private_ipv4);
	sm_set_str(&i->az, last_seg(np_json_str(it, "zone", a->zone)));
	sm_set_str(&i->region, a->region);
	json_array_foreach(json_object_get(json_object_get(it, "metadata"), "items"), k, item)
	{
		const char *key = np_json_str(item, "key", NULL);
		const char *v = np_json_str(item, "value", NULL);
		if (key != NULL && v != NULL)
			json_object_set_new(i->metadata, key, json_string(v));
	}
	mtype_quota(a, last_seg(np_json_str(it, "machineType", "")), &i->quota);
	i->driver_data = json_pack("{s:s, s:s}", "machine_type",
				   last_seg(np_json_str(it, "machineType", "")), "status", st);
	return i;
}

/* ---- paged instance listings ---- */

struct lister;
typedef void (*lister_end)(struct lister *ls, const json_t *items, const char *error);

struct lister {
	struct pend p;
	struct sm_adapter *a;
	struct gce_call *call;
	json_t *items;
	lister_end end;
	void *cb, *arg; /* the slot's callback, for ends that have one */
};

static void lister_page(struct lister *ls, const char *token);

static void
lister_free(struct pend *p)
{
	struct lister *ls = (struct lister *)p;

	json_decref(ls->items);
	free(ls);
}

static void
lister_done(const struct gce_result *r, void *arg)
{
	struct lister *ls = arg;
	char err[512];
	const char *tok;

	ls->call = NULL;
	if (r->reason != NULL) {
		snprintf(err, sizeof(err), "instances.list: %s: %s", r->reason, r->message);
		LIST_REMOVE(&ls->p, entry);
		ls->end(ls, NULL, err);
		lister_free(&ls->p);
		return;
	}
	json_array_extend(ls->items, json_object_get(r->body, "items"));
	tok = json_string_value(json_object_get(r->body, "nextPageToken"));
	if (tok != NULL && tok[0] != '\0') {
		lister_page(ls, tok);
		return;
	}
	LIST_REMOVE(&ls->p, entry);
	ls->end(ls, ls->items, NULL);
	lister_free(&ls->p);
}

static void
lister_page(struct lister *ls, const char *token)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/instances?maxResults=" GCE_PAGE "%s%s", ls->a->zpath,
		 token != NULL ? "&pageToken=" : "", token != NULL ? token : "");
	ls->call = gce_compute(ls->a->api, "instances.list", "GET", path, NULL, lister_done, ls);
}

static struct lister *
lister_start(struct sm_adapter *a, lister_end end, void *cb, void *arg)
{
	struct lister *ls = xcalloc(1, sizeof(*ls));
	ls->a = a;
	ls->items = json_array();
	ls->end = end;
	ls->cb = cb;
	ls->arg = arg;
	ls->p.dtor = lister_free;
	LIST_INSERT_HEAD(&a->pend, &ls->p, entry);
	lister_page(ls, NULL);
	return ls;
}

/* ---- the shared poll ---- */

static void
poll_end(struct lister *ls, const json_t *items, const char *error)
{
	struct sm_adapter *a = ls->a;
	struct gmachine *gm;
	const json_t *it;
	size_t i;

	a->polling = 0;
	if (error != NULL) {
		log_warn("gce %s: %s", a->provider, error);
		poll_schedule(a, GCE_POLL);
		return;
	}
	json_array_foreach(items, i, it)
	{
		const char *name = np_json_str(it, "name", "");
		TAILQ_FOREACH(gm, &a->waiting, entry)
		{
			if (gm->m.external_id == NULL || strcmp(gm->m.external_id, name) != 0)
				continue;
			gm->seen = 2;
			snprintf(gm->status, sizeof(gm->status), "%s",
				 np_json_str(it, "status", ""));
			if (gm->m.seen_at == 0 && strcmp(gm->status, "RUNNING") == 0)
				gm->m.seen_at = a->last_poll; /* the boot estimate's sample */
			sm_instance_free(gm->inst);
			gm->inst = instance_of(a, it);
		}
	}
	TAILQ_FOREACH(gm, &a->waiting, entry)
	{
		if (gm->seen == 1) /* asked about, not listed */
			gm->seen = 3;
		machine_wake(gm);
	}
	if (!TAILQ_EMPTY(&a->waiting))
		poll_schedule(a, GCE_PACE);
}

static void
poll_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sm_adapter *a = arg;
	struct gmachine *gm;

	(void)fd;
	(void)what;
	if (a->polling || TAILQ_EMPTY(&a->waiting))
		return;
	if (poll_pace(a) > 0.001) { /* the pace moved later meanwhile */
		poll_schedule(a, GCE_PACE);
		return;
	}
	a->polls++;
	a->polling = 1;
	a->last_poll = now_s();
	TAILQ_FOREACH(gm, &a->waiting, entry)
	gm->seen = 1; /* asked: the listing says listed (2) or absent (3) */
	lister_start(a, poll_end, NULL, NULL);
}

/* Seconds until the next shared listing is useful (sm_listing_wait: the
 * instances' expected boots), at most rate-limit listings a second. */
static double
poll_pace(struct sm_adapter *a)
{
	const json_t *rl = json_object_get(a->env->provider, "rate-limit");
	double rate = json_is_number(rl) ? json_number_value(rl) : 1.0;

	return sm_listing_wait(a->env, a->last_poll, rate > 0 ? 1 / rate : 0);
}

/* The next shared listing: in seconds after the last one started, or
 * GCE_PACE: when the pace says (re-armed at every ask). */
static void
poll_schedule(struct sm_adapter *a, double in)
{
	if (a->polling)
		return;
	sm_listing_arm(a->poll_ev, in, now_s() - a->last_poll, in == GCE_PACE ? poll_pace(a) : 0);
}

static void
wait_on_poll(struct gmachine *gm)
{
	unlist(gm);
	set_state(gm, GM_WAIT);
	gm->since = now_s();
	gm->seen = 0;
	TAILQ_INSERT_TAIL(&gm->a->waiting, gm, entry);
	gm->listed = 1;
	poll_schedule(gm->a, GCE_PACE);
}

/* ---- images ---- */

static void
image_done(const struct gce_result *r, void *arg)
{
	struct fetch_ctx *fc = arg;
	struct sm_adapter *a = fc->a;
	const char *name = fc->key + strlen("image:");

	if (r->reason == NULL)
		json_object_set_new(a->images, name,
				    json_pack("{s:s, s:f}", "src",
					      np_json_str(r->body, "selfLink", ""), "t", now_s()));
	else
		json_object_set_new(a->images, name,
				    json_pack("{s:s, s:f, s:i}", "error", r->message, "t", now_s(),
					      "status", r->status));
	fetch_forget(fc);
}

static void
image_fetch(struct sm_adapter *a, const struct sm_image *im)
{
	const char *family = np_json_str(im->raw, "image-family", NULL);
	const char *proj = np_json_str(im->raw, "image-project", a->project);
	char key[300], path[1024];
	struct fetch_ctx *fc;

	snprintf(key, sizeof(key), "image:%s", im->name);
	if ((fc = fetch_new(a, key)) == NULL)
		return;
	fc->image = im;
	if (family != NULL) {
		snprintf(path, sizeof(path), "projects/%s/global/images/family/%s", proj, family);
		gce_compute(a->api, "images.getFromFamily", "GET", path, NULL, image_done, fc);
	} else {
		snprintf(path, sizeof(path), "projects/%s/global/images/%s", proj, im->name);
		gce_compute(a->api, "images.get", "GET", path, NULL, image_done, fc);
	}
}

/*
 * The sourceImage for a create: 1 with *src set (borrowed), 0 while it is
 * being looked up (the machine waits on cachewait), -1 when the lookup
 * failed (err set).
 */
static int
image_source(struct gmachine *gm, const char **src, char *err, size_t errlen)
{
	struct sm_adapter *a = gm->a;
	const struct sm_image *im = gm->label->image;
	const json_t *c;

	if (gm->image_src != NULL) {
		*src = gm->image_src;
		return 1;
	}
	if (im == NULL) {
		snprintf(err, errlen, "label %s has no cloud image", gm->label->name);
		return -1;
	}
	if (im->image_id != NULL) {
		*src = im->image_id;
		return 1;
	}
	c = json_object_get(a->images, im->name);
	if (c != NULL && now_s() - np_json_num(c, "t", 0) <= GCE_IMAGE_TTL) {
		if (json_object_get(c, "error") != NULL) {
			snprintf(err, errlen, "cloud image %s: %s", im->name,
				 np_json_str(c, "error", ""));
			json_object_del(a->images, im->name); /* the next launch asks again */
			return -1;
		}
		*src = np_json_str(c, "src", "");
		return 1;
	}
	image_fetch(a, im);
	return 0;
}

/* ---- create ---- */

static int
quota_reason(const char *reason)
{
	return reason != NULL &&
	       (strcmp(reason, "quotaExceeded") == 0 || strcmp(reason, "QUOTA_EXCEEDED") == 0);
}

/*
 * The insert's zone operation, asked only when a listing does not show the
 * instance: an operation that ended in an error (QUOTA_EXCEEDED,
 * ZONE_RESOURCE_POOL_EXHAUSTED...) is why; one still running or done
 * without error means the listing was early (the grace decides).
 */
static int
op_failed(struct gmachine *gm, const json_t *op)
{
	const json_t *e;
	const char *code;

	if (strcmp(np_json_str(op, "status", ""), "DONE") != 0)
		return 0;
	gm->op_finished = 1;
	e = json_array_get(json_object_get(json_object_get(op, "error"), "errors"), 0);
	if (e == NULL)
		return 0;
	code = np_json_str(e, "code", "");
	unlist(gm);
	fail(gm, quota_reason(code) ? SM_E_QUOTA : SM_E_FAILED, "%s: %s: %s", gm->m.external_id,
	     code, np_json_str(e, "message", ""));
	return 1;
}

static void
op_done(const struct gce_result *r, void *arg)
{
	struct gmachine *gm = arg;

	gm->call = NULL;
	gm->op_at = now_s() + GCE_OP_POLL;
	if (r->reason != NULL) {
		if (r->status == 404) /* operations are kept a while; gone: the grace decides */
			gm->op_finished = 1;
		else
			log_debug("gce %s: zoneOperations.get %s: %s: %s", gm->a->provider, gm->op,
				  r->reason, r->message);
	} else {
		op_failed(gm, r->body);
	}
	machine_wake(gm);
}

static void
op_get(struct gmachine *gm)
{
	char path[600];

	snprintf(path, sizeof(path), "%s/operations/%s", gm->a->zpath, gm->op);
	gm->call = gce_compute(gm->a->api, "zoneOperations.get", "GET", path, NULL, op_done, gm);
}

static void
insert_done(const struct gce_result *r, void *arg)
{
	struct gmachine *gm = arg;

	gm->call = NULL;
	if (r->reason == NULL) {
		gm->a->launched++;
		free(gm->op);
		gm->op = xstrdup(np_json_str(r->body, "name", ""));
		/* the instance is listed from now on; its operation is asked
		 * only if it is not (op_failed) */
		if (!op_failed(gm, r->body))
			wait_on_poll(gm);
	} else if (r->status == 409 && strcmp(r->reason, "alreadyExists") == 0) {
		/* an earlier attempt of this call made it (its answer was lost) */
		wait_on_poll(gm);
	} else if (quota_reason(r->reason)) {
		fail(gm, SM_E_QUOTA, "instances.insert %s: %s: %s", gm->m.external_id, r->reason,
		     r->message);
	} else {
		fail(gm, SM_E_FAILED, "instances.insert %s: %s: %s", gm->m.external_id, r->reason,
		     r->message);
	}
	machine_wake(gm);
}

static json_t *
insert_body(struct gmachine *gm, const char *src, const char *mtype_link)
{
	struct sm_adapter *a = gm->a;
	const struct sm_label *l = gm->label;
	const json_t *vs = json_object_get(l->raw, "volume-size");
	const char *net = pstr(l, "network"), *subnet = pstr(l, "subnetwork");
	json_t *items = json_array(), *nic, *v;
	const char *k;
	char dtype[300], size[32];

	snprintf(dtype, sizeof(dtype), "zones/%s/diskTypes/%s", a->zone,
		 lstr(l, "volume-type") != NULL ? lstr(l, "volume-type") : "pd-standard");
	if (json_is_integer(vs))
		snprintf(size, sizeof(size), "%lld", (long long)json_integer_value(vs));
	else
		snprintf(size, sizeof(size), "%s",
			 json_is_string(vs) ? json_string_value(vs) : "10");
	json_object_foreach(gm->metadata, k, v)
	    json_array_append_new(items, json_pack("{s:s, s:O}", "key", k, "value", v));
	nic = json_pack("{s:s, s:[{s:s, s:s}]}", "network",
			net != NULL ? net : "global/networks/default", "accessConfigs", "type",
			"ONE_TO_ONE_NAT", "name", "External NAT");
	if (subnet != NULL)
		json_object_set_new(nic, "subnetwork", json_string(subnet));
	return json_pack("{s:s, s:s, s:[{s:b, s:b, s:{s:s, s:s, s:s}}], s:[o], s:[], s:{s:o}}",
			 "name", gm->m.external_id, "machineType", mtype_link, "disks", "boot", 1,
			 "autoDelete", 1, "initializeParams", "sourceImage", src, "diskType", dtype,
			 "diskSizeGb", size, "networkInterfaces", nic, "serviceAccounts",
			 "metadata", "items", items);
}

static void
submit(struct gmachine *gm)
{
	struct sm_adapter *a = gm->a;
	const char *src = NULL, *itype = lstr(gm->label, "instance-type");
	const json_t *mt;
	char err[400], path[400], link[400];
	json_t *body;
	int rc;

	rc = image_source(gm, &src, err, sizeof(err));
	if (rc < 0) {
		fail(gm, SM_E_FAILED, "%s", err);
		return;
	}
	if (rc == 0) {
		set_state(gm, GM_IMAGE);
		cachewait_add(gm);
		return;
	}
	mt = json_object_get(a->mtypes, itype != NULL ? itype : "");
	if (mt == NULL) {
		set_state(gm, GM_MTYPE);
		cachewait_add(gm);
		if (itype != NULL)
			mtype_fetch(a, itype);
		return;
	}
	if (json_object_get(mt, "missing") != NULL) {
		fail(gm, SM_E_FAILED, "%s", np_json_str(mt, "missing", ""));
		return;
	}
	unlist(gm);
	snprintf(link, sizeof(link), "%s", np_json_str(mt, "link", ""));
	if (link[0] == '\0')
		snprintf(link, sizeof(link), "zones/%s/machineTypes/%s", a->zone, itype);
	body = insert_body(gm, src, link);
	snprintf(path, sizeof(path), "%s/instances", a->zpath);
	set_state(gm, GM_SUBMIT);
	gm->call = gce_compute(a->api, "instances.insert", "POST", path, body, insert_done, gm);
	json_decref(body);
}

static enum sm_status
create_advance(struct sm_machine *m, struct sm_instance **out)
{
	struct gmachine *gm = (struct gmachine *)m;

	m->retry_in = 30; /* we wake the machine when an answer comes */
	switch (gm->st) {
	case GM_START:
	case GM_IMAGE:
	case GM_MTYPE:
		if (gm->a->stopped)
			return SM_AGAIN;
		submit(gm);
		return gm->st == GM_FAILED ? SM_ERROR : SM_AGAIN;
	case GM_WAIT:
		if (gm->call != NULL)
			return SM_AGAIN;
		if (gm->seen == 3 && gm->op != NULL && !gm->op_finished) {
			if (now_s() < gm->op_at) {
				m->retry_in = gm->op_at - now_s();
				return SM_AGAIN;
			}
			op_get(gm);
			return SM_AGAIN;
		}
		if (gm->seen == 3 && now_s() - gm->since > GCE_MISSING_GRACE) {
			fail(gm, SM_E_FAILED, "instance %s disappeared", m->external_id);
			return SM_ERROR;
		}
		if (gm->inst == NULL || gm->seen != 2)
			return SM_AGAIN;
		if (strcmp(gm->status, "RUNNING") == 0) {
			unlist(gm);
			set_state(gm, GM_DONE);
			*out = gm->inst;
			gm->inst = NULL;
			return SM_DONE;
		}
		if (strcmp(gm->status, "PROVISIONING") != 0 && strcmp(gm->status, "STAGING") != 0) {
			fail(gm, SM_E_FAILED, "instance %s is %s", m->external_id, gm->status);
			return SM_ERROR;
		}
		return SM_AGAIN;
	case GM_FAILED:
		return SM_ERROR;
	default:
		return SM_AGAIN;
	}
}

/* ---- delete ---- */

static void
delete_done(const struct gce_result *r, void *arg)
{
	struct gmachine *gm = arg;

	gm->call = NULL;
	if (r->reason == NULL)
		wait_on_poll(gm);
	else if (r->status == 404)
		fail(gm, SM_E_NOTFOUND, "instance %s not found", gm->m.external_id);
	else
		fail(gm, SM_E_FAILED, "instances.delete %s: %s: %s", gm->m.external_id, r->reason,
		     r->message);
	machine_wake(gm);
}

static enum sm_status
delete_advance(struct sm_machine *m, struct sm_instance **out)
{
	struct gmachine *gm = (struct gmachine *)m;
	char path[600];

	(void)out;
	m->retry_in = 30;
	switch (gm->st) {
	case GM_START:
		snprintf(path, sizeof(path), "%s/instances/%s", gm->a->zpath, m->external_id);
		set_state(gm, GM_DELETE);
		gm->call = gce_compute(gm->a->api, "instances.delete", "DELETE", path, NULL,
				       delete_done, gm);
		return SM_AGAIN;
	case GM_WAIT:
		if (gm->seen == 3) {
			unlist(gm);
			set_state(gm, GM_DONE);
			return SM_DONE;
		}
		return SM_AGAIN;
	case GM_FAILED:
		return SM_ERROR;
	default:
		return SM_AGAIN;
	}
}

static void
gm_free(struct sm_machine *m)
{
	struct gmachine *gm = (struct gmachine *)m;

	gce_call_cancel(gm->call);
	unlist(gm);
	sm_instance_free(gm->inst);
	json_decref(gm->metadata);
	free(gm->image_src);
	free(gm->op);
	free(m->external_id);
	free(gm);
}

static const struct sm_machine_ops create_ops = {create_advance, gm_free};
static const struct sm_machine_ops delete_ops = {delete_advance, gm_free};

static struct sm_machine *
gce_create_machine(struct sm_adapter *a, const struct sm_create_args *args)
{
	struct gmachine *gm = xcalloc(1, sizeof(*gm));
	const struct sm_image *im;
	const char *k, *key;
	const json_t *v;

	gm->m.ops = &create_ops;
	gm->a = a;
	gm->create = 1;
	set_state(gm, GM_START);
	gm->label = args->label;
	gm->image_src = args->image_external_id != NULL ? xstrdup(args->image_external_id) : NULL;
	/* upstream's simple driver writes the three nodepool_* keys (not the
	 * framework's Ansible "groups"), and ssh-keys "<username>:<key>" when
	 * the cloud image has a key */
	gm->metadata = json_object();
	json_object_foreach((json_t *)args->metadata, k, v)
	{
		if (strncmp(k, "nodepool_", 9) == 0)
			json_object_set(gm->metadata, k, (json_t *)v);
	}
	im = args->label->image;
	key = im != NULL ? np_json_str(im->raw, "key", NULL) : NULL;
	if (key != NULL) {
		char *sk = NULL;
		if (asprintf(&sk, "%s:%s", im->username != NULL ? im->username : "zuul", key) < 0)
			np_oom();
		json_object_set_new(gm->metadata, "ssh-keys", json_string(sk));
		free(sk);
	}
	/* upstream's instance name and external id: "nodepool-<node id>"
	 * (args->hostname is "np<node id>"), known before the insert, so an
	 * attempt cut short can always be deleted */
	if (asprintf(&gm->m.external_id, "nodepool-%s",
		     strncmp(args->hostname, "np", 2) == 0 ? args->hostname + 2 : args->hostname) <
	    0)
		np_oom();
	gm->since = now_s();
	return &gm->m;
}

static struct sm_machine *
gce_delete_machine(struct sm_adapter *a, const char *external_id)
{
	struct gmachine *gm = xcalloc(1, sizeof(*gm));
	gm->m.ops = &delete_ops;
	gm->a = a;
	set_state(gm, GM_START);
	gm->m.external_id = xstrdup(external_id);
	gm->since = now_s();
	return &gm->m;
}

/* ---- listings for the framework ---- */

static void
li_end(struct lister *ls, const json_t *items, const char *error)
{
	sm_instances_cb cb = (sm_instances_cb)ls->cb;
	struct sm_instance **v = NULL;
	const json_t *it;
	size_t i, n = 0;

	if (error != NULL) {
		cb(NULL, 0, error, ls->arg);
		return;
	}
	v = xcalloc(json_array_size(items) + 1, sizeof(*v));
	json_array_foreach(items, i, it) v[n++] = instance_of(ls->a, it);
	cb(v, n, NULL, ls->arg);
	for (i = 0; i < n; i++)
		sm_instance_free(v[i]);
	free(v);
}

static void
gce_list_instances(struct sm_adapter *a, sm_instances_cb cb, void *arg)
{
	lister_start(a, li_end, (void *)cb, arg);
}

static void
lr_end(struct lister *ls, const json_t *items, const char *error)
{
	sm_resources_cb cb = (sm_resources_cb)ls->cb;
	struct sm_resource *v;
	json_t *metas;
	const json_t *it, *item;
	size_t i, k, n = 0;

	if (error != NULL) {
		cb(NULL, 0, error, ls->arg);
		return;
	}
	v = xcalloc(json_array_size(items) + 1, sizeof(*v));
	metas = json_array();
	json_array_foreach(items, i, it)
	{
		json_t *meta = json_object();
		json_array_foreach(json_object_get(json_object_get(it, "metadata"), "items"), k,
				   item)
		{
			const char *key = np_json_str(item, "key", NULL);
			const char *val = np_json_str(item, "value", NULL);
			if (key != NULL && val != NULL)
				json_object_set_new(meta, key, json_string(val));
		}
		json_array_append_new(metas, meta);
		v[n].type = "instance";
		v[n].id = np_json_str(it, "name", "");
		v[n].metadata = meta;
		n++;
	}
	cb(v, n, NULL, ls->arg);
	json_decref(metas);
	free(v);
}

static void
gce_list_resources(struct sm_adapter *a, sm_resources_cb cb, void *arg)
{
	lister_start(a, lr_end, (void *)cb, arg);
}

/*
 * list_images: the project's own images (images.list, GET
 * projects/<project>/global/images, every page), each named by its name
 * with its labels as tags. Nodepool uploads no images to GCE (no
 * upload_image, as upstream's GCE adapter); the listing lets
 * `nodepool alien-image-list` see images labelled by Nodepool there.
 */
struct ilist {
	struct pend p;
	struct sm_adapter *a;
	json_t *items;
	drv_image_list_cb cb;
	void *arg;
};

static void ilist_page(struct ilist *il, const char *token);

static void
ilist_free(struct pend *p)
{
	struct ilist *il = (struct ilist *)p;

	json_decref(il->items);
	free(il);
}

static void
ilist_done(const struct gce_result *r, void *arg)
{
	struct ilist *il = arg;
	struct drv_cloud_image *v;
	const json_t *it, *labels;
	json_t *none;
	const char *tok;
	size_t i, n = 0;
	char err[512];

	if (r->reason != NULL) {
		snprintf(err, sizeof(err), "images.list: %s: %s", r->reason, r->message);
		LIST_REMOVE(&il->p, entry);
		il->cb(NULL, 0, err, il->arg);
		ilist_free(&il->p);
		return;
	}
	json_array_extend(il->items, json_object_get(r->body, "items"));
	tok = json_string_value(json_object_get(r->body, "nextPageToken"));
	if (tok != NULL && tok[0] != '\0') {
		ilist_page(il, tok);
		return;
	}
	LIST_REMOVE(&il->p, entry);
	v = xcalloc(json_array_size(il->items) + 1, sizeof(*v));
	none = json_object(); /* an image without labels */
	json_array_foreach(il->items, i, it)
	{
		if (np_json_str(it, "name", NULL) == NULL)
			continue;
		labels = json_object_get(it, "labels");
		v[n++] = (struct drv_cloud_image){np_json_str(it, "name", NULL),
						  np_json_str(it, "name", NULL),
						  json_is_object(labels) ? labels : none};
	}
	il->cb(v, n, NULL, il->arg);
	free(v);
	json_decref(none);
	ilist_free(&il->p);
}

static void
ilist_page(struct ilist *il, const char *token)
{
	char path[1024];

	snprintf(path, sizeof(path), "projects/%s/global/images?maxResults=" GCE_PAGE "%s%s",
		 il->a->project, token != NULL ? "&pageToken=" : "", token != NULL ? token : "");
	gce_compute(il->a->api, "images.list", "GET", path, NULL, ilist_done, il);
}

static void
gce_list_images(struct sm_adapter *a, drv_image_list_cb cb, void *arg)
{
	struct ilist *il = xcalloc(1, sizeof(*il));

	il->a = a;
	il->items = json_array();
	il->cb = cb;
	il->arg = arg;
	il->p.dtor = ilist_free;
	LIST_INSERT_HEAD(&a->pend, &il->p, entry);
	ilist_page(il, NULL);
}

struct done_ctx {
	struct pend p;
	sm_done_cb cb;
	sm_quota_cb qcb;
	sm_console_cb ccb;
	void *arg;
	struct sm_adapter *a;
};

static struct done_ctx *
done_new(struct sm_adapter *a, void *arg)
{
	struct done_ctx *d = xcalloc(1, sizeof(*d));
	d->a = a;
	d->arg = arg;
	LIST_INSERT_HEAD(&a->pend, &d->p, entry);
	return d;
}

static void
del_done(const struct gce_result *r, void *arg)
{
	struct done_ctx *d = arg;
	int ok = r->reason == NULL || r->status == 404;
	char err[512];

	LIST_REMOVE(&d->p, entry);
	if (!ok)
		snprintf(err, sizeof(err), "%s: %s", r->reason, r->message);
	d->cb(ok, ok ? NULL : err, d->arg);
	free(d);
}

static void
gce_delete_resource(struct sm_adapter *a, const struct sm_resource *r, sm_done_cb cb, void *arg)
{
	struct done_ctx *d = done_new(a, arg);
	char path[600];

	d->cb = cb;
	log_info("gce %s: deleting leaked %s %s", a->provider, r->type, r->id);
	snprintf(path, sizeof(path), "%s/instances/%s", a->zpath, r->id);
	gce_compute(a->api, "instances.delete", "DELETE", path, NULL, del_done, d);
}

/* ---- quota ---- */

static void
quota_done(const struct gce_result *r, void *arg)
{
	struct done_ctx *d = arg;
	struct drv_quota q;
	const json_t *it;
	size_t i;
	char err[512];

	LIST_REMOVE(&d->p, entry);
	if (r->reason != NULL) {
		snprintf(err, sizeof(err), "regions.get: %s: %s", r->reason, r->message);
		d->qcb(NULL, err, d->arg);
		free(d);
		return;
	}
	drv_quota_init(&q, INFINITY, INFINITY, INFINITY);
	json_array_foreach(json_object_get(r->body, "quotas"), i, it)
	{
		const char *metric = np_json_str(it, "metric", "");
		if (strcmp(metric, "CPUS") == 0)
			q.cores = np_json_num(it, "limit", INFINITY);
		else if (strcmp(metric, "INSTANCES") == 0)
			q.instances = np_json_num(it, "limit", INFINITY);
	}
	d->qcb(&q, NULL, d->arg);
	drv_quota_clear(&q);
	free(d);
}

static void
gce_quota_limits(struct sm_adapter *a, sm_quota_cb cb, void *arg)
{
	struct done_ctx *d = done_new(a, arg);
	char path[400];

	d->qcb = cb;
	snprintf(path, sizeof(path), "projects/%s/regions/%s", a->project, a->region);
	gce_compute(a->api, "regions.get", "GET", path, NULL, quota_done, d);
}

static int
gce_label_quota(struct sm_adapter *a, const struct sm_label *label, struct drv_quota *out,
		char *err, size_t errlen)
{
	const char *itype = lstr(label, "instance-type");
	const json_t *mt = json_object_get(a->mtypes, itype != NULL ? itype : "");

	if (json_object_get(mt, "missing") != NULL) {
		snprintf(err, errlen, "%s", np_json_str(mt, "missing", ""));
		return -1;
	}
	mtype_quota(a, itype, out); /* unknown yet: 1 instance, fetched meanwhile */
	return 0;
}

/* ---- console log ---- */

static void
console_done(const struct gce_result *r, void *arg)
{
	struct done_ctx *d = arg;
	char err[512];

	LIST_REMOVE(&d->p, entry);
	if (r->reason != NULL) {
		snprintf(err, sizeof(err), "getSerialPortOutput: %s: %s", r->reason, r->message);
		d->ccb(NULL, err, d->arg);
	} else {
		d->ccb(np_json_str(r->body, "contents", ""), NULL, d->arg);
	}
	free(d);
}

static void
gce_console_log(struct sm_adapter *a, const struct sm_label *label, const char *external_id,
		sm_console_cb cb, void *arg)
{
	struct done_ctx *d = done_new(a, arg);
	char path[600];

	(void)label;
	d->ccb = cb;
	snprintf(path, sizeof(path), "%s/instances/%s/serialPort?port=1", a->zpath, external_id);
	gce_compute(a->api, "instances.getSerialPortOutput", "GET", path, NULL, console_done, d);
}

/*
 * A keyscan failed: the instance's serial console goes to the log (what an
 * operator needs to see why it did not come up). upstream's gce schema has
 * no console-log key, so this does not wait for one; a label that has it
 * gets the framework's console_log instead (not twice).
 */
struct scan_log {
	struct pend p;
	char name[128];
};

static void
scan_log_done(const struct gce_result *r, void *arg)
{
	struct scan_log *sl = arg;
	char *copy, *line, *save = NULL;

	LIST_REMOVE(&sl->p, entry);
	if (r->reason != NULL) {
		log_warn("instance %s: no console log: getSerialPortOutput: %s: %s", sl->name,
			 r->reason, r->message);
	} else {
		log_info("instance %s: keyscan failed; its serial console:", sl->name);
		copy = xstrdup(np_json_str(r->body, "contents", ""));
		for (line = strtok_r(copy, "\r\n", &save); line != NULL;
		     line = strtok_r(NULL, "\r\n", &save))
			log_info("instance %s: console: %s", sl->name, line);
		free(copy);
	}
	free(sl);
}

static void
gce_nodescan_failed(struct sm_adapter *a, const struct sm_label *label, const char *external_id)
{
	struct scan_log *sl;
	char path[600];

	if (label->console_log || a->stopped)
		return;
	sl = xcalloc(1, sizeof(*sl));
	snprintf(sl->name, sizeof(sl->name), "%s", external_id);
	LIST_INSERT_HEAD(&a->pend, &sl->p, entry);
	snprintf(path, sizeof(path), "%s/instances/%s/serialPort?port=1", a->zpath, external_id);
	gce_compute(a->api, "instances.getSerialPortOutput", "GET", path, NULL, scan_log_done, sl);
}

/* ---- the adapter ---- */

static void
prefetch_mtypes(struct sm_adapter *a)
{
	const struct sm_config *cfg = a->env->cfg;
	size_t p, l;

	for (p = 0; p < cfg->npools; p++)
		for (l = 0; l < cfg->pools[p].nlabels; l++) {
			const char *t = lstr(&cfg->pools[p].labels[l], "instance-type");
			if (t != NULL && json_object_get(a->mtypes, t) == NULL)
				mtype_fetch(a, t);
		}
}

static struct sm_adapter *
gce_adapter_new(const struct sm_env *env, char *err, size_t errlen)
{
	struct sm_adapter *a = xcalloc(1, sizeof(*a));
	struct gce_api_options o = {0};
	const json_t *rl = json_object_get(env->provider, "rate-limit");

	LIST_INIT(&a->pend);
	TAILQ_INIT(&a->waiting);
	TAILQ_INIT(&a->cachewait);
	a->env = env;
	a->base = env->base;
	/* upstream's rate-limit: calls per second, 1 unless set */
	o.rate = json_is_number(rl) ? json_number_value(rl) : 1.0;
	a->api = gce_api_new(env->base, &o, err, errlen);
	if (a->api == NULL) {
		free(a);
		return NULL;
	}
	a->provider = xstrdup(env->provider_name);
	a->project = xstrdup(np_json_str(env->provider, "project", ""));
	a->zone = xstrdup(np_json_str(env->provider, "zone", ""));
	a->region = xstrdup(np_json_str(env->provider, "region", ""));
	if (asprintf(&a->zpath, "projects/%s/zones/%s", a->project, a->zone) < 0)
		np_oom();
	a->poll_ev = evtimer_new(env->base, poll_cb, a);
	a->images = json_object();
	a->mtypes = json_object();
	a->fetching = json_object();
	prefetch_mtypes(a);
	return a;
}

static void
gce_adapter_stop(struct sm_adapter *a)
{
	a->stopped = 1;
}

static void
gce_adapter_free(struct sm_adapter *a)
{
	gce_api_free(a->api); /* cancels every call without callbacks */
	while (!LIST_EMPTY(&a->pend)) {
		struct pend *p = LIST_FIRST(&a->pend);
		LIST_REMOVE(p, entry);
		if (p->dtor != NULL)
			p->dtor(p);
		else
			free(p); /* the first member of its malloc'd context */
	}
	event_free(a->poll_ev);
	json_decref(a->images);
	json_decref(a->mtypes);
	json_decref(a->fetching);
	free(a->provider);
	free(a->project);
	free(a->zone);
	free(a->region);
	free(a->zpath);
	free(a);
}

static void
gce_dump(struct sm_adapter *a, struct evbuffer *out)
{
	struct gmachine *gm;
	char *counts = json_dumps(gce_api_counts(a->api), JSON_SORT_KEYS | JSON_COMPACT);

	evbuffer_add_printf(out,
			    "gce %s: %llu API calls %s; %llu tokens; %llu launched, %llu shared "
			    "listings\n",
			    a->provider, gce_api_total(a->api), counts != NULL ? counts : "{}",
			    gce_api_tokens(a->api), a->launched, a->polls);
	free(counts);
	TAILQ_FOREACH(gm, &a->waiting, entry)
	evbuffer_add_printf(out, "  %s %s %s %s\n", gm->create ? "create" : "delete",
			    gm->m.external_id != NULL ? gm->m.external_id : "-", gm->m.state,
			    gm->status);
}

static const struct sm_adapter_ops gce_adapter = {
    .name = "gce",
    .adapter_new = gce_adapter_new,
    .adapter_stop = gce_adapter_stop,
    .adapter_free = gce_adapter_free,
    .create_machine = gce_create_machine,
    .delete_machine = gce_delete_machine,
    .list_instances = gce_list_instances,
    .list_resources = gce_list_resources,
    .delete_resource = gce_delete_resource,
    .quota_limits = gce_quota_limits,
    .label_quota = gce_label_quota,
    .list_images = gce_list_images,
    .console_log = gce_console_log,
    .nodescan_failed = gce_nodescan_failed,
    .dump = gce_dump,
};

/* upstream's GCE defaults: boot-timeout 60 s; the rate is rate-limit's */
static const struct sm_defaults gce_defaults = {
    .boot_timeout = 60,
    .rate = 0,
    .host_key_checking = 1,
};

static struct drv_provider *
gce_provider_new(struct drv_host *lc, char *err, size_t errlen)
{
	return sm_provider_new(&gce_adapter, &gce_defaults, lc, err, errlen);
}

const struct driver drv_gce = {
    .name = "gce",
    .pause_at_quota = 1,
    .reuse_only = 0,
    .provider_new = gce_provider_new,
    SM_DRIVER_SLOTS,
};
