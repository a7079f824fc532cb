/*
 * The `ibmvpc` driver: a state-machine Adapter (drivers/statemachine/
 * adapter.h) for IBM Cloud VPC, doing what upstream Nodepool's
 * IBMVPCAdapter (nodepool/driver/ibmvpc/adapter.py) does through IBM's
 * Python SDKs, as REST calls through lib/net/http.h:
 *
 *   credentials  an IAM API key found as the SDK finds it (ibmvpc.h:
 *                ibm_creds_find), exchanged at IAM's token endpoint
 *                (POST /identity/token, grant type apikey); the token is
 *                reused until 80% of its lifetime has passed (the SDK's
 *                refresh point), fetched again then or on a 401.
 *   APIs         VPC API v1 (https://<region>.iaas.cloud.ibm.com/v1, every
 *                call with ?version=<date>&generation=2), Resource Manager
 *                v2 (resource groups), Resource Controller v2 (the object
 *                storage instance), Cloud Object Storage (uploads), IAM:
 *                one HTTP client each, the provider's `rate` (calls per
 *                second, upstream's RateLimiter) on all but IAM's, so a 429/503
 *                (Retry-After honoured) pauses only that API.
 *   start        as upstream's __init__: the VPC by name, the resource
 *                groups (np_<provider>_<pool> created when missing),
 *                instance profiles, subnets (the pool's subnet must be in
 *                the pool's zone), SSH keys; retried every 10 s after a
 *                failure (upstream's adapter would not start at all).
 *   metadata     as upstream: no tags (IBM's tagging API is separate from
 *                the object APIs, so a crash between create and tag would
 *                leave an unmarked object); an instance and its floating IP
 *                are named np<node id> and created in the resource group
 *                np_<provider>_<pool>; that name and group say whose it is.
 *                external_id is the instance name, as upstream.
 *   create       image by the upload's id, or the cloud image's image-id,
 *                image-href, image-name or image-filter (matched against
 *                the image listing as upstream); with public-ipv4, a
 *                floating IP first (POST /floating_ips) waited available;
 *                POST /instances (profile, keys, subnet, zone, resource
 *                group, boot volume deleted with the instance, user-data);
 *                running, then the floating IP attached to the primary
 *                interface and waited bound.
 *   polling      one listing of /instances (and of /floating_ips) answers
 *                every machine waiting on one (upstream's ttl-cached
 *                _listInstances), started at most once a second and only
 *                while somebody waits.
 *   delete       the floating IP named like the instance, then the
 *                instance by name, each waited gone from the listing.
 *   cleanup      instances, floating IPs and user-owned images, with the
 *                metadata their names and resource groups give
 *                (listResources); deleted by id.
 *   quota        the provider's `quota` (upstream: IBM Cloud has no quota
 *                API); per label the profile's vcpu_count and memory. A
 *                create refused with an error that names a quota aborts the
 *                launch (beyond upstream, which fails it).
 *   console      none: the VPC API serves the console only as an
 *                interactive websocket, and upstream has no getConsoleLog.
 *   images       upload as upstream's uploadImage: the file to the
 *                object-storage bucket (Cloud Object Storage's S3 API with
 *                the IAM bearer token and the storage instance's CRN, found
 *                at start by instance-name), the resource group
 *                npimages_<provider>, POST /images from
 *                cos://<location>/<bucket>/<name>.<format>, polled every 2 s
 *                (upstream: 30) until available, the object deleted (on a
 *                failure, the object and the half-made image are deleted:
 *                beyond upstream); delete as upstream's deleteImage: the
 *                bucket's objects named like the image, then the image.
 *                Leak cleanup does not list the bucket (upstream does; its
 *                objects carry no build id, so none would be deleted).
 */
#include "drivers/statemachine/statemachine.h"
#include "lib/core/xalloc.h"

#include <sys/queue.h>
#include <ctype.h>
#include <errno.h>
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
#include "drivers/ibmvpc/ibmvpc.h"
#include "lib/config/jsonget.h"
#include "lib/core/clock.h"
#include "lib/core/log.h"
#include "lib/net/ratelimit.h"

/* The VPC API version date sent with every call (the API requires one; the
 * behaviour used here is stable across the 2022-2024 versions). */
#define IBM_API_VERSION	   "2023-01-31"
#define IBM_LIST_MIN	   1.0	/* s: at least this between two listings of one kind */
#define IBM_IMAGES_TTL	   60.0 /* s: an image listing is reused this long */
#define IBM_BOOT_RETRY	   10.0 /* s: start-up reads after a failure */
#define IBM_AUTH_RETRY	   5.0	/* s: after a failed token request */
#define IBM_MAX_PAGES	   200
#define IBM_DEFAULT_IAM	   "https://iam.cloud.ibm.com"
#define IBM_DEFAULT_RESMGR "https://resource-controller.cloud.ibm.com"

enum ib_api { API_IAM, API_VPC, API_RM, API_RC, API_COS, NAPI };
static const char *const api_names[NAPI] = {"iam", "vpc", "resource-manager", "resource-controller",
					    "cloud-object-storage"};

/* ---- the adapter's state --------------------------------------------------------------------- */

struct ib_call;
typedef void (*ib_call_cb)(struct ib_call *c, int status, const char *error, json_t *body,
			   const char *raw);

/* One API call: waits for a token, runs, fetches a new token once on a 401. */
struct ib_call {
	TAILQ_ENTRY(ib_call) entry;
	struct sm_adapter *a;
	enum ib_api api;
	char *method, *path; /* path: under the API's base (query allowed) */
	char *body;
	size_t body_len;
	char *body_file; /* or: a file streamed as the body (COS uploads) */
	char *hdr;	 /* one more "Name: value" header line, or NULL */
	const char *ctype;
	struct http_req *req;
	struct event *ev; /* deferred error */
	int waiting_auth, reauthed;
	ib_call_cb cb;
	void *owner;
	void *ucb, *uarg;
	json_t *extra;
};

struct ib_pager;
typedef void (*ib_pager_cb)(struct ib_pager *p, const char *error);

/* A listing across pages (upstream's _handlePagination): items of `key`
 * gathered, the `next` link's start token followed. */
struct ib_pager {
	struct sm_adapter *a;
	enum ib_api api;
	char *path;
	char *key;
	json_t *items; /* array */
	int pages;
	struct ib_call *call;
	ib_pager_cb done;
	void *arg;
};

/* A shared listing of one collection (instances, floating IPs, images). */
struct ib_list {
	const char *path, *key;
	json_t *items; /* array, the last complete listing */
	unsigned long long seq, done_seq;
	double started, done_at, done_started; /* done_started: the newest in's start */
	struct ib_pager *pager;
	struct event *timer;
	int wanted;
	struct sm_adapter *a;
};

enum { L_INSTANCES, L_FIPS, L_IMAGES, NLIST };

struct ibm_m;
struct ib_op;
struct upload;
struct imgdel;
struct quota_ctx;

struct sm_adapter {
	const struct sm_env *env;
	struct event_base *base;
	struct ibm_creds creds;
	struct http_client *http[NAPI];
	char *base_url[NAPI];
	const char *region, *vpc_name;
	double rate;
	/* token */
	char *token;
	double token_refresh_at; /* epoch: fetch a new one from here */
	struct ib_call *auth_call;
	double auth_failed_at;
	int auth_refused; /* IAM refused the key (4xx): launches fail at once */
	char auth_error[256];
	TAILQ_HEAD(, ib_call) calls;
	TAILQ_HEAD(, ibm_m) machines;
	TAILQ_HEAD(, ib_op) ops;
	TAILQ_HEAD(, upload) uploads;
	TAILQ_HEAD(, imgdel) imgdels;
	TAILQ_HEAD(, ilist) ilists;	/* list_images in flight */
	TAILQ_HEAD(, quota_ctx) quotas; /* answers due on the next loop turn */
	/* start-up reads */
	int boot_step; /* 0 idle/to do, >0 running, BOOT_READY done */
	int boot_permanent;
	char boot_error[300];
	struct ib_pager *boot_pager;
	struct ib_call *boot_call;
	struct event *boot_timer;
	json_t *vpc;			   /* the provider's VPC object */
	json_t *rgs;			   /* name -> resource group */
	json_t *profiles, *subnets, *keys; /* name -> object */
	char *cos_crn;			   /* the object storage instance's CRN */
	const char *bucket;		   /* object-storage's bucket-name, or NULL */
	struct ib_list lists[NLIST];
	/* counters */
	unsigned long long calls_by_api[NAPI], auths, reauths, creates, create_errors, quota_errors,
	    deletes, fips_created, fips_deleted, listings, rgs_created;
	int stopped;
};

#define BOOT_READY 100

static double
now_mono(void)
{
	return ratelimit_now();
}

static double
now_wall(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* s, or "" for NULL. */
static const char *
nz(const char *s)
{
	return s != NULL ? s : "";
}

static const char *
jstr(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

static int
mentions_quota(const char *m)
{
	for (; m != NULL && *m; m++)
		if (strncasecmp(m, "quota", 5) == 0)
			return 1;
	return 0;
}

/* ---- calls and the IAM token ---------------------------------------------------------------- */

static void auth_start(struct sm_adapter *a);

static void
call_free(struct ib_call *c)
{
	TAILQ_REMOVE(&c->a->calls, c, entry);
	http_cancel(c->req);
	if (c->ev != NULL)
		event_free(c->ev);
	free(c->method);
	free(c->path);
	free(c->body);
	free(c->body_file);
	free(c->hdr);
	json_decref(c->extra);
	free(c);
}

static void
call_cancel(struct ib_call *c)
{
	if (c != NULL)
		call_free(c);
}

static void
call_finish(struct ib_call *c, int status, const char *error, const char *raw, size_t len)
{
	json_t *body = NULL;

	if (raw != NULL && len > 0)
		body = json_loadb(raw, len, 0, NULL);
	c->req = NULL;
	c->cb(c, status, error, body, raw);
	json_decref(body);
	call_free(c);
}

static void
deferred_error_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ib_call *c = arg;
	char msg[320];

	(void)fd;
	(void)what;
	snprintf(msg, sizeof(msg), "IAM authentication failed: %s", c->a->auth_error);
	call_finish(c, 0, msg, NULL, 0);
}

static void
call_fail_later(struct ib_call *c)
{
	if (c->ev == NULL)
		c->ev = event_new(c->a->base, -1, 0, deferred_error_cb, c);
	event_active(c->ev, EV_TIMEOUT, 0);
}

static void
http_done(const struct http_response *res, void *arg)
{
	struct ib_call *c = arg;
	struct sm_adapter *a = c->a;

	c->req = NULL;
	if (res->error == NULL && res->status == 401 && !c->reauthed &&
	    strcasecmp(a->creds.auth_type, "iam") == 0) {
		/* the token expired or was revoked early: a new one, once */
		c->reauthed = 1;
		a->reauths++;
		free(a->token);
		a->token = NULL;
		c->waiting_auth = 1;
		auth_start(a);
		return;
	}
	call_finish(c, res->status, res->error, res->body, res->body_len);
}

static void
call_send(struct ib_call *c)
{
	struct sm_adapter *a = c->a;
	struct http_request_params p;
	char *url;
	size_t n;
	const char *hdrs[6];
	char auth[8192], ct[128];
	int h = 0;

	c->waiting_auth = 0;
	n = strlen(a->base_url[c->api]) + strlen(c->path) + 64;
	url = malloc(n);
	if (url == NULL)
		abort();
	if (c->api == API_VPC)
		snprintf(url, n, "%s%s%cversion=%s&generation=2", a->base_url[c->api], c->path,
			 strchr(c->path, '?') ? '&' : '?', IBM_API_VERSION);
	else
		snprintf(url, n, "%s%s", a->base_url[c->api], c->path);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", a->token ? a->token : "");
	hdrs[h++] = auth;
	hdrs[h++] = "Accept: application/json";
	if (c->body != NULL || c->body_file != NULL) {
		snprintf(ct, sizeof(ct), "Content-Type: %s",
			 c->ctype ? c->ctype : "application/json");
		hdrs[h++] = ct;
	}
	if (c->hdr != NULL)
		hdrs[h++] = c->hdr;
	hdrs[h] = NULL;
	memset(&p, 0, sizeof(p));
	p.method = c->method;
	p.url = url;
	p.headers = hdrs;
	p.body = c->body;
	p.body_len = c->body_len;
	p.body_file = c->body_file;
	if (c->body_file != NULL)
		p.timeout = 3600; /* an image: as long as it takes */
	a->calls_by_api[c->api]++;
	c->req = http_request(a->http[c->api], &p, http_done, c);
	free(url);
	if (c->req == NULL) {
		snprintf(a->auth_error, sizeof(a->auth_error), "bad request URL");
		call_fail_later(c);
	}
}

static void
auth_done(struct ib_call *c, int status, const char *error, json_t *body, const char *raw)
{
	struct sm_adapter *a = c->a;
	const char *tok = jstr(body, "access_token");
	double ttl = np_json_num(body, "expires_in", 3600),
	       exp = np_json_num(body, "expiration", 0);
	struct ib_call *w, *next;

	a->auth_call = NULL;
	if (error != NULL || status != 200 || tok == NULL) {
		ibm_error_text(status, error, body, raw, a->auth_error, sizeof(a->auth_error));
		a->auth_failed_at = now_mono();
		a->auth_refused = error == NULL && status >= 400 && status < 500;
		log_error("ibmvpc %s: IAM token from %s failed: %s", a->env->provider_name,
			  a->base_url[API_IAM], a->auth_error);
		for (w = TAILQ_FIRST(&a->calls); w != NULL; w = next) {
			next = TAILQ_NEXT(w, entry);
			if (w->waiting_auth)
				call_fail_later(w);
		}
		return;
	}
	free(a->token);
	a->token = np_strdupz(tok);
	a->auth_refused = 0;
	if (exp <= 0)
		exp = now_wall() + ttl;
	/* the SDK's IAM token manager: refresh once 80% of the lifetime is gone */
	a->token_refresh_at = exp - 0.2 * ttl;
	if (a->auths++ == 0)
		log_info("ibmvpc %s: IAM token from %s (credentials from %s), valid %.0f s",
			 a->env->provider_name, a->base_url[API_IAM], a->creds.source, ttl);
	for (w = TAILQ_FIRST(&a->calls); w != NULL; w = next) {
		next = TAILQ_NEXT(w, entry);
		if (w->waiting_auth)
			call_send(w);
	}
}

static void
auth_start(struct sm_adapter *a)
{
	struct ib_call *c;
	struct http_request_params p;
	const char *hdrs[] = {"Content-Type: application/x-www-form-urlencoded",
			      "Accept: application/json", NULL};
	char *enc, *url;
	size_t n;

	if (a->auth_call != NULL)
		return;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		abort();
	c->a = a;
	c->api = API_IAM;
	c->method = np_strdupz("POST");
	c->path = np_strdupz("/identity/token");
	n = strlen(a->creds.apikey) * 3 + 1;
	enc = malloc(n);
	ibm_urlenc(a->creds.apikey, enc, n);
	n = strlen(enc) + 80;
	c->body = malloc(n);
	snprintf(c->body, n,
		 "grant_type=urn%%3Aibm%%3Aparams%%3Aoauth%%3Agrant-type%%3Aapikey&"
		 "apikey=%s",
		 enc);
	free(enc);
	c->body_len = strlen(c->body);
	c->cb = auth_done;
	c->reauthed = 1; /* a 401 here is an answer */
	TAILQ_INSERT_TAIL(&a->calls, c, entry);
	a->auth_call = c;
	n = strlen(a->base_url[API_IAM]) + 32;
	url = malloc(n);
	snprintf(url, n, "%s/identity/token", a->base_url[API_IAM]);
	memset(&p, 0, sizeof(p));
	p.method = "POST";
	p.url = url;
	p.headers = hdrs;
	p.body = c->body;
	p.body_len = c->body_len;
	a->calls_by_api[API_IAM]++;
	c->req = http_request(a->http[API_IAM], &p, http_done, c);
	free(url);
}

/* Send now, or once a token is in hand. */
static void
call_go(struct ib_call *c)
{
	struct sm_adapter *a = c->a;

	if (strcasecmp(a->creds.auth_type, "bearertoken") == 0) {
		if (a->token == NULL)
			a->token = np_strdupz(a->creds.bearer_token);
		call_send(c);
		return;
	}
	if (a->token != NULL && now_wall() >= a->token_refresh_at) {
		free(a->token);
		a->token = NULL;
	}
	if (a->token != NULL) {
		call_send(c);
		return;
	}
	c->waiting_auth = 1;
	if (a->auth_call == NULL && a->auth_failed_at > 0 &&
	    now_mono() - a->auth_failed_at < IBM_AUTH_RETRY) {
		call_fail_later(c); /* do not hammer IAM */
		return;
	}
	auth_start(a);
}

/* Start a call (body: a JSON value taken, or NULL); cb runs once on the
 * loop unless the call is cancelled first. */
static struct ib_call *
call_new(struct sm_adapter *a, enum ib_api api, const char *method, const char *path, json_t *body,
	 ib_call_cb cb, void *owner)
{
	struct ib_call *c = calloc(1, sizeof(*c));

	if (c == NULL)
		abort();
	c->a = a;
	c->api = api;
	c->method = np_strdupz(method);
	c->path = np_strdupz(path);
	if (body != NULL) {
		c->body = json_dumps(body, JSON_COMPACT);
		c->body_len = strlen(c->body);
		json_decref(body);
	}
	c->cb = cb;
	c->owner = owner;
	TAILQ_INSERT_TAIL(&a->calls, c, entry);
	call_go(c);
	return c;
}

/* ---- pages ------------------------------------------------------------------------------------
 */

static void pager_get(struct ib_pager *p, const char *start);

static void
pager_answer(struct ib_call *c, int status, const char *error, json_t *body, const char *raw)
{
	struct ib_pager *p = c->owner;
	json_t *v = json_object_get(body, p->key), *it;
	const char *next = jstr(json_object_get(body, "next"), "href");
	char msg[300];
	size_t i;

	p->call = NULL;
	if (error != NULL || status != 200 || !json_is_array(v)) {
		ibm_error_text(status, error, body, raw, msg, sizeof(msg));
		p->done(p, msg);
		return;
	}
	json_array_foreach(v, i, it) json_array_append(p->items, it);
	if (next != NULL && json_array_size(v) > 0 && ++p->pages < IBM_MAX_PAGES) {
		char tok[512];
		if (ibm_next_start(next, tok, sizeof(tok))) {
			pager_get(p, tok);
			return;
		}
	}
	p->done(p, NULL);
}

/* start: the raw (still encoded) token from the next link, or NULL. */
static void
pager_get(struct ib_pager *p, const char *start)
{
	char path[1200];

	if (start != NULL)
		snprintf(path, sizeof(path), "%s%cstart=%s", p->path,
			 strchr(p->path, '?') ? '&' : '?', start);
	else
		snprintf(path, sizeof(path), "%s", p->path);
	p->call = call_new(p->a, p->api, "GET", path, NULL, pager_answer, p);
}

static struct ib_pager *
pager_start(struct sm_adapter *a, enum ib_api api, const char *path, const char *key,
	    ib_pager_cb done, void *arg)
{
	struct ib_pager *p = calloc(1, sizeof(*p));

	if (p == NULL)
		abort();
	p->a = a;
	p->api = api;
	p->path = np_strdupz(path);
	p->key = np_strdupz(key);
	p->items = json_array();
	p->done = done;
	p->arg = arg;
	pager_get(p, NULL);
	return p;
}

static void
pager_free(struct ib_pager *p)
{
	if (p == NULL)
		return;
	call_cancel(p->call);
	free(p->path);
	free(p->key);
	json_decref(p->items);
	free(p);
}

/* ---- machines (declared early: answers wake them) ----------------------------------------------
 */

enum m_state {
	M_START,
	M_FIP_CREATE,
	M_FIP_WAIT,
	M_SUBMIT,
	M_BUILDING,
	M_FIP_ATTACH,
	M_FIP_BOUND,
	M_DEL_FIP_FIND,
	M_DEL_FIP,
	M_DEL_FIP_GONE,
	M_DEL_VM_FIND,
	M_DEL_VM,
	M_DEL_VM_GONE,
	M_DONE,
	M_FAILED,
};

static const char *const m_names[] = {"start",
				      "creating fip",
				      "fip pending",
				      "creating vm",
				      "vm pending",
				      "attaching fip",
				      "fip binding",
				      "delete: finding fip",
				      "deleting fip",
				      "delete: fip going",
				      "delete: finding vm",
				      "deleting vm",
				      "delete: vm going",
				      "complete",
				      "failed"};

struct ibm_m {
	struct sm_machine m; /* first */
	TAILQ_ENTRY(ibm_m) entry;
	struct sm_adapter *a;
	int create;
	enum m_state st;
	struct ib_call *call;
	int answered, status;
	char errmsg[240];
	json_t *answer;
	unsigned long long seq[NLIST]; /* a listing started after this is fresh */
	/* create */
	char *name, *rg_id, *rg_name;
	const struct sm_label *label;
	json_t *image; /* {"id": ...} or {"href": ...} */
	int public_ipv4;
	char *zone, *subnet;
	char *fip_id, *vm_id;
	json_t *fip, *vm;
	json_t *body; /* the instance create body, made at start */
	/* delete */
	int found_any;
};

static void
wake_all(struct sm_adapter *a)
{
	struct ibm_m *m;

	TAILQ_FOREACH(m, &a->machines, entry)
	sm_machine_wake(&m->m);
}

/* ---- shared listings
 * ------------------------------------------------------------------------------ */

static void list_start(struct sm_adapter *a, int k);

static void
list_done(struct ib_pager *p, const char *error)
{
	struct sm_adapter *a = p->a;
	int k = (int)(intptr_t)p->arg;
	struct ib_list *L = &a->lists[k];

	L->pager = NULL;
	if (error != NULL) {
		log_warn("ibmvpc %s: listing %s failed: %s", a->env->provider_name, L->path + 1,
			 error);
	} else {
		json_decref(L->items);
		L->items = json_incref(p->items);
		L->done_seq = L->seq;
		L->done_at = now_mono();
		L->done_started = L->started;
		a->listings++;
	}
	pager_free(p);
	wake_all(a);
	if (L->wanted)
		list_start(a, k);
}

static void
list_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ib_list *L = arg;

	(void)fd;
	(void)what;
	list_start(L->a, (int)(L - L->a->lists));
}

/* A listing that starts from now, when none runs: the instances' when the
 * framework's pace says one is useful (sm_listing_wait: their expected
 * boots, at `rate`), the others at once when the last one started
 * IBM_LIST_MIN ago, else as soon as allowed. */
static void
list_start(struct sm_adapter *a, int k)
{
	struct ib_list *L = &a->lists[k];
	double wait;

	if (L->pager != NULL) {
		L->wanted = 1;
		return;
	}
	if (k == L_INSTANCES)
		wait = sm_listing_wait(a->env, L->started, a->rate > 0 ? 1 / a->rate : 0);
	else
		wait = L->started + IBM_LIST_MIN - now_mono();
	if (L->seq > 0 && wait > 0.001) {
		struct timeval tv = np_tv_of(wait);
		if (k == L_INSTANCES) /* (re)armed: the pace may have moved */
			event_add(L->timer, &tv);
		else if (!event_pending(L->timer, EV_TIMEOUT, NULL))
			event_add(L->timer, &tv);
		return;
	}
	L->wanted = 0;
	L->seq++;
	L->started = now_mono();
	L->pager = pager_start(a, API_VPC, L->path, L->key, list_done, (void *)(intptr_t)k);
}

/* 1 with *items when a listing that started after seq is in (then seq is
 * moved to it), else 0 (one is asked for). */
static int
listed(struct sm_adapter *a, int k, unsigned long long *seq, const json_t **items)
{
	struct ib_list *L = &a->lists[k];

	if (L->done_seq <= *seq || L->items == NULL) {
		list_start(a, k);
		return 0;
	}
	*seq = L->done_seq;
	*items = L->items;
	return 1;
}

static const json_t *
find_by(const json_t *items, const char *key, const char *val)
{
	const json_t *it;
	size_t i;

	json_array_foreach(items, i, it)
	{
		const char *v = jstr(it, key);
		if (v != NULL && val != NULL && strcmp(v, val) == 0)
			return it;
	}
	return NULL;
}

/* ---- resource groups, instances as the framework sees them ------------------------------------
 */

/* upstream's _getResourceGroupByReference: by name when the reference has
 * one, else by id. NULL when unknown. */
static const json_t *
rg_by_ref(struct sm_adapter *a, const json_t *ref)
{
	const char *name = jstr(ref, "name"), *id = jstr(ref, "id"), *k;
	json_t *rg;

	if (name != NULL)
		return json_object_get(a->rgs, name);
	json_object_foreach(a->rgs, k, rg) if (id != NULL && jstr(rg, "id") &&
					       strcmp(jstr(rg, "id"), id) == 0) return rg;
	return NULL;
}

static json_t *
obj_metadata(struct sm_adapter *a, const json_t *obj)
{
	const json_t *rg = rg_by_ref(a, json_object_get(obj, "resource_group"));

	return ibm_name_metadata(jstr(obj, "name"), rg ? jstr(rg, "name") : NULL);
}

static void
quota_of_profile(struct sm_adapter *a, const char *name, struct drv_quota *q)
{
	const json_t *profile = json_object_get(a->profiles, name ? name : "");
	const char *x;
	unsigned v, m;
	char tail;

	q->instances = 1;
	if (profile != NULL) {
		q->cores = np_json_num(json_object_get(profile, "vcpu_count"), "value", 0);
		/* GB, as upstream (quota_info_from_profile) */
		q->ram = np_json_num(json_object_get(profile, "memory"), "value", 0);
		return;
	}
	/* Not read yet (a request right after start) or unknown: IBM's
	 * profile names say it, <family>-<vCPUs>x<GB> ("cx2-2x4"); better than
	 * upstream's nothing, which let the first requests overrun the quota. */
	if (name != NULL && (x = strrchr(name, '-')) != NULL &&
	    sscanf(x + 1, "%ux%u%c", &v, &m, &tail) == 2) {
		q->cores = v;
		q->ram = m;
	}
}

/* upstream's IBMVPCInstance. */
static struct sm_instance *
vm_instance(struct sm_adapter *a, const json_t *vm, const json_t *fip)
{
	struct sm_instance *in = sm_instance_new();
	const char *st = jstr(vm, "status");
	const char *priv =
	    jstr(json_object_get(vm, "primary_network_interface"), "primary_ipv4_address");
	const char *pub = fip ? jstr(fip, "address") : NULL;

	sm_set_str(&in->external_id, jstr(vm, "name"));
	in->ready = st != NULL && strcmp(st, "running") == 0;
	in->deleted = st != NULL && strcmp(st, "deleting") == 0;
	sm_set_str(&in->private_ipv4, priv);
	sm_set_str(&in->public_ipv4, pub);
	sm_set_str(&in->interface_ip, pub ? pub : priv);
	sm_set_str(&in->cloud, "IBM");
	sm_set_str(&in->region, a->region);
	sm_set_str(&in->az, jstr(json_object_get(vm, "zone"), "name"));
	json_decref(in->metadata);
	in->metadata = obj_metadata(a, vm);
	quota_of_profile(a, jstr(json_object_get(vm, "profile"), "name"), &in->quota);
	return in;
}

/* ---- start-up: VPC, resource groups, profiles, subnets, keys --------------------------------- */

static void boot_next(struct sm_adapter *a);

static void boot_fail(struct sm_adapter *a, int permanent, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
boot_fail(struct sm_adapter *a, int permanent, const char *fmt, ...)
{
	va_list ap;
	struct timeval tv = {(time_t)(permanent ? 6 * IBM_BOOT_RETRY : IBM_BOOT_RETRY), 0};

	va_start(ap, fmt);
	vsnprintf(a->boot_error, sizeof(a->boot_error), fmt, ap);
	va_end(ap);
	a->boot_permanent = permanent;
	a->boot_step = 0;
	log_error("ibmvpc %s: %s (trying again in %ld s)", a->env->provider_name, a->boot_error,
		  (long)tv.tv_sec);
	if (!a->stopped)
		event_add(a->boot_timer, &tv);
	wake_all(a); /* creates waiting on start-up see the error */
}

static void
by_name_into(json_t *dst, const json_t *items)
{
	const json_t *it;
	size_t i;

	json_object_clear(dst);
	json_array_foreach(items, i, it) if (jstr(it, "name") != NULL)
	    json_object_set(dst, jstr(it, "name"), (json_t *)it);
}

static void
boot_listed(struct ib_pager *p, const char *error)
{
	struct sm_adapter *a = p->a;
	int step = a->boot_step;
	const json_t *it;
	size_t i;

	a->boot_pager = NULL;
	if (error != NULL) {
		/* IAM refusing the API key will not change by waiting */
		boot_fail(a, a->auth_refused, "reading %s: %s", p->path, error);
		pager_free(p);
		return;
	}
	switch (step) {
	case 1: /* VPCs */
		json_decref(a->vpc);
		a->vpc = NULL;
		json_array_foreach(p->items, i, it) if (jstr(it, "name") &&
							strcmp(jstr(it, "name"), a->vpc_name) == 0)
		    a->vpc = json_incref((json_t *)it);
		pager_free(p);
		if (a->vpc == NULL) {
			boot_fail(a, 1, "Unable to find vpc %s", a->vpc_name);
			return;
		}
		break;
	case 2:
		by_name_into(a->rgs, p->items);
		pager_free(p);
		break;
	case 4:
		by_name_into(a->profiles, p->items);
		pager_free(p);
		break;
	case 5:
		by_name_into(a->subnets, p->items);
		pager_free(p);
		break;
	case 6:
		by_name_into(a->keys, p->items);
		pager_free(p);
		break;
	case 7: /* resource instances: the one whose CRN's service is COS */
		free(a->cos_crn);
		a->cos_crn = NULL;
		json_array_foreach(p->items, i, it)
		{
			const char *crn = jstr(it, "crn"), *c = crn;
			int colons = 0;
			while (c != NULL && *c && colons < 4)
				if (*c++ == ':')
					colons++;
			if (c != NULL && strncmp(c, "cloud-object-storage:", 21) == 0)
				a->cos_crn = np_strdupz(crn);
		}
		if (a->cos_crn == NULL)
			log_warn(
			    "ibmvpc %s: no Cloud Object Storage instance named %s: image uploads "
			    "will fail",
			    a->env->provider_name,
			    np_json_str(json_object_get(a->env->provider, "object-storage"),
					"instance-name", ""));
		pager_free(p);
		break;
	default:
		pager_free(p);
		break;
	}
	a->boot_step++;
	boot_next(a);
}

static void
rg_created(struct ib_call *c, int status, const char *error, json_t *body, const char *raw)
{
	struct sm_adapter *a = c->a;
	const char *name = jstr(c->extra, "name");
	char msg[300];

	a->boot_call = NULL;
	if (error != NULL || (status != 201 && status != 200) || jstr(body, "id") == NULL) {
		ibm_error_text(status, error, body, raw, msg, sizeof(msg));
		boot_fail(a, 0, "creating resource group %s: %s", name, msg);
		return;
	}
	/* the answer has id and crn; keep the name for look-ups by name */
	json_object_set_new(body, "name", json_string(name));
	json_object_set(a->rgs, name, body);
	a->rgs_created++;
	log_info("ibmvpc %s: created resource group %s (%s)", a->env->provider_name, name,
		 jstr(body, "id"));
	boot_next(a);
}

static const char *
pool_str(const struct sm_pool *p, const char *k, const json_t *prov)
{
	return np_json_str(p->raw, k, np_json_str(prov, k, NULL));
}

static void
boot_next(struct sm_adapter *a)
{
	const struct sm_config *cfg = a->env->cfg;
	size_t i;
	char rg[300];

	if (a->stopped)
		return;
	switch (a->boot_step) {
	case 1:
		a->boot_pager = pager_start(a, API_VPC, "/vpcs", "vpcs", boot_listed, NULL);
		return;
	case 2:
		a->boot_pager =
		    pager_start(a, API_RM, "/v2/resource_groups", "resources", boot_listed, NULL);
		return;
	case 3: /* upstream's _createResourceGroups: one per pool */
		for (i = 0; cfg != NULL && i < cfg->npools; i++) {
			snprintf(rg, sizeof(rg), "np_%s_%s", a->env->provider_name,
				 cfg->pools[i].name);
			if (json_object_get(a->rgs, rg) == NULL) {
				struct ib_call *c =
				    call_new(a, API_RM, "POST", "/v2/resource_groups",
					     json_pack("{s:s}", "name", rg), rg_created, NULL);
				c->extra = json_pack("{s:s}", "name", rg);
				a->boot_call = c;
				return;
			}
		}
		a->boot_step = 4;
		/* fall through */
	case 4:
		a->boot_pager =
		    pager_start(a, API_VPC, "/instance/profiles", "profiles", boot_listed, NULL);
		return;
	case 5:
		a->boot_pager = pager_start(a, API_VPC, "/subnets", "subnets", boot_listed, NULL);
		return;
	case 6:
		a->boot_pager = pager_start(a, API_VPC, "/keys", "keys", boot_listed, NULL);
		return;
	case 7: {
		/* upstream: the Cloud Object Storage instance named by
		 * object-storage's instance-name, for uploads */
		const char *inst = np_json_str(json_object_get(a->env->provider, "object-storage"),
					       "instance-name", NULL);
		if (inst != NULL) {
			char path[700], enc[500];
			ibm_urlenc(inst, enc, sizeof(enc));
			snprintf(path, sizeof(path),
				 "/v2/resource_instances?name=%s&type=service_instance", enc);
			a->boot_pager =
			    pager_start(a, API_RC, path, "resources", boot_listed, NULL);
			return;
		}
		a->boot_step = 8;
	}
		/* fall through */
	case 8:
		/* upstream's sanity check: the pool's subnet is in its zone */
		for (i = 0; cfg != NULL && i < cfg->npools; i++) {
			const struct sm_pool *p = &cfg->pools[i];
			const char *sn = pool_str(p, "subnet", a->env->provider),
				   *zone = pool_str(p, "zone", a->env->provider);
			const json_t *s = json_object_get(a->subnets, sn ? sn : "");
			const char *sz = jstr(json_object_get(s, "zone"), "name");
			if (s == NULL) {
				boot_fail(a, 1, "Unable to find subnet %s (pool %s)", sn ? sn : "",
					  p->name);
				return;
			}
			if (sz == NULL || zone == NULL || strcmp(sz, zone) != 0) {
				boot_fail(a, 1, "Subnet %s zone %s does not match pool zone %s", sn,
					  sz ? sz : "?", zone ? zone : "?");
				return;
			}
		}
		a->boot_step = BOOT_READY;
		a->boot_error[0] = '\0';
		a->boot_permanent = 0;
		log_info("ibmvpc %s: vpc %s (%s), %zu resource groups, %zu profiles, %zu subnets, "
			 "%zu keys",
			 a->env->provider_name, a->vpc_name, jstr(a->vpc, "id"),
			 json_object_size(a->rgs), json_object_size(a->profiles),
			 json_object_size(a->subnets), json_object_size(a->keys));
		wake_all(a);
		return;
	default:
		return;
	}
}

static void
boot_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sm_adapter *a = arg;

	(void)fd;
	(void)what;
	if (a->boot_step == 0 && !a->stopped) {
		a->boot_step = 1;
		boot_next(a);
	}
}

/* ---- create and delete machines ------------------------------------------------------------- */

static void
m_set(struct ibm_m *m, enum m_state st)
{
	m->st = st;
	m->m.state = m_names[st];
}

static enum sm_status m_fail(struct ibm_m *m, enum sm_error e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum sm_status
m_fail(struct ibm_m *m, enum sm_error e, const char *fmt, ...)
{
	va_list ap;

	m_set(m, M_FAILED);
	m->m.error = e;
	va_start(ap, fmt);
	vsnprintf(m->m.error_msg, sizeof(m->m.error_msg), fmt, ap);
	va_end(ap);
	return SM_ERROR;
}

static void
m_answer(struct ib_call *c, int status, const char *error, json_t *body, const char *raw)
{
	struct ibm_m *m = c->owner;

	m->call = NULL;
	m->answered = 1;
	m->status = error != NULL ? 0 : status;
	m->errmsg[0] = '\0';
	if (error != NULL || status >= 300)
		ibm_error_text(status, error, body, raw, m->errmsg, sizeof(m->errmsg));
	json_decref(m->answer);
	m->answer = json_incref(body);
	sm_machine_wake(&m->m);
}

static void
m_call(struct ibm_m *m, const char *method, const char *path, json_t *body)
{
	m->answered = 0;
	m->call = call_new(m->a, API_VPC, method, path, body, m_answer, m);
}

/* Wait: the machine is woken by the answer or a listing. */
#define WAIT(m)                                                                                    \
	do {                                                                                       \
		(m)->m.retry_in = 5;                                                               \
		return SM_AGAIN;                                                                   \
	} while (0)
#define WAIT_CALL(m)                                                                               \
	do {                                                                                       \
		if (!(m)->answered)                                                                \
			WAIT(m);                                                                   \
	} while (0)

/* The operating-system fields of an image-filter, as upstream compares
 * them: every key given (dashes as underscores) equal in the image's
 * operating_system. */
static int
image_matches(const json_t *img, const json_t *filter)
{
	const json_t *os = json_object_get(filter, "operating-system"), *v;
	const json_t *ios = json_object_get(img, "operating_system");
	const char *k, *want;

	json_object_foreach((json_t *)os, k, v)
	{
		char key[64];
		size_t i;
		snprintf(key, sizeof(key), "%s", k);
		for (i = 0; key[i]; i++)
			if (key[i] == '-')
				key[i] = '_';
		if (!json_equal(json_object_get(ios, key), v))
			return 0;
	}
	if ((want = jstr(filter, "owner-type")) != NULL &&
	    (jstr(img, "owner_type") == NULL || strcmp(jstr(img, "owner_type"), want) != 0))
		return 0;
	if ((want = jstr(filter, "status")) != NULL &&
	    (jstr(img, "status") == NULL || strcmp(jstr(img, "status"), want) != 0))
		return 0;
	return 1;
}

/* upstream's _findImage: 1 resolved into m->image, 0 waiting for the image
 * listing, -1 no such image (m->errmsg). */
static int
find_image(struct ibm_m *m)
{
	const struct sm_image *im = m->label->image;
	struct sm_adapter *a = m->a;
	struct ib_list *L = &a->lists[L_IMAGES];
	const char *name, *v;
	const json_t *filter, *it, *items = NULL;
	size_t i;

	if (m->image != NULL)
		return 1;
	if (im == NULL)
		goto none;
	if ((v = np_json_str(im->raw, "image-id", NULL)) != NULL) {
		m->image = json_pack("{s:s}", "id", v);
		return 1;
	}
	if ((v = np_json_str(im->raw, "image-href", NULL)) != NULL) {
		m->image = json_pack("{s:s}", "href", v);
		return 1;
	}
	name = np_json_str(im->raw, "image-name", NULL);
	filter = json_object_get(im->raw, "image-filter");
	if (name == NULL && filter == NULL)
		goto none;
	/* the images listing, reused IBM_IMAGES_TTL s (upstream caches 10 s);
	 * a miss in an old listing asks for a fresh one */
	if (L->items != NULL && now_mono() - L->done_at < IBM_IMAGES_TTL && m->seq[L_IMAGES] == 0) {
		items = L->items;
	} else if (!listed(a, L_IMAGES, &m->seq[L_IMAGES], &items)) {
		return 0;
	}
	json_array_foreach(items, i, it)
	{
		if (name != NULL ? (jstr(it, "name") && strcmp(jstr(it, "name"), name) == 0)
				 : image_matches(it, filter)) {
			m->image = json_pack("{s:s}", "id", jstr(it, "id") ? jstr(it, "id") : "");
			return 1;
		}
	}
	if (m->seq[L_IMAGES] == 0) {
		/* not in the cached listing: look again in a fresh one */
		m->seq[L_IMAGES] = L->seq;
		list_start(a, L_IMAGES);
		return 0;
	}
	snprintf(m->errmsg, sizeof(m->errmsg), "Unable to find image matching %s: %s",
		 name ? "name" : "filter", name ? name : "(image-filter)");
	return -1;
none:
	snprintf(m->errmsg, sizeof(m->errmsg), "label %s has no image", m->label->name);
	return -1;
}

/* upstream's _createInstance body. */
static json_t *
instance_body(struct ibm_m *m, const json_t *subnet, json_t *keys)
{
	const char *ud = np_json_str(m->label->raw, "user-data", NULL);
	json_t *b =
	    json_pack("{s:o, s:s, s:{s:s}, s:{s:s}, s:{s:s}, s:O, s:{s:s, s:{s:s}}, s:{s:s}, "
		      "s:{s:{s:s, s:{s:s}}, s:b}}",
		      "keys", keys, "name", m->name, "profile", "name",
		      np_json_str(m->label->raw, "profile", ""), "resource_group", "id", m->rg_id,
		      "vpc", "id", jstr(m->a->vpc, "id") ? jstr(m->a->vpc, "id") : "", "image",
		      m->image, "primary_network_interface", "name", "eth0", "subnet", "id",
		      jstr(subnet, "id") ? jstr(subnet, "id") : "", "zone", "name", m->zone,
		      "boot_volume_attachment", "volume", "name", m->name, "profile", "name",
		      "general-purpose", "delete_volume_on_instance_delete", 1);

	if (ud != NULL)
		json_object_set_new(b, "user_data", json_string(ud));
	return b;
}

static enum sm_status
create_advance(struct sm_machine *mm, struct sm_instance **out)
{
	struct ibm_m *m = (struct ibm_m *)mm;
	struct sm_adapter *a = m->a;
	const json_t *items, *it;
	const char *st;
	char path[600];
	int r;
	size_t i;

	switch (m->st) {
	case M_START: {
		const json_t *subnet, *keys;
		json_t *kids;
		if (a->stopped)
			return m_fail(m, SM_E_FAILED, "the provider is stopping");
		if (a->boot_step != BOOT_READY) {
			if (a->boot_permanent)
				return m_fail(m, SM_E_FAILED, "%s", a->boot_error);
			WAIT(m);
		}
		r = find_image(m);
		if (r == 0)
			WAIT(m);
		if (r < 0)
			return m_fail(m, SM_E_FAILED, "%s", m->errmsg);
		m->rg_id = np_strdupz(jstr(json_object_get(a->rgs, m->rg_name), "id"));
		if (m->rg_id == NULL)
			return m_fail(m, SM_E_FAILED, "no resource group %s", m->rg_name);
		subnet = json_object_get(a->subnets, m->subnet ? m->subnet : "");
		if (subnet == NULL)
			return m_fail(m, SM_E_FAILED, "Unable to find subnet %s",
				      m->subnet ? m->subnet : "");
		kids = json_array();
		keys = m->label->image ? json_object_get(m->label->image->raw, "keys") : NULL;
		json_array_foreach(keys, i, it)
		{
			const json_t *k = json_object_get(a->keys, nz(json_string_value(it)));
			if (k == NULL) {
				json_decref(kids);
				return m_fail(m, SM_E_FAILED, "Unable to find key %s",
					      nz(json_string_value(it)));
			}
			json_array_append_new(kids, json_pack("{s:s}", "id", nz(jstr(k, "id"))));
		}
		json_decref(m->body);
		m->body = instance_body(m, subnet, kids);
		/* upstream: the instance name is the external id; named here, as
		 * the first object is asked for, so an attempt that failed
		 * before has nothing to delete */
		sm_set_str(&mm->external_id, m->name);
		if (m->public_ipv4) {
			a->fips_created++;
			m_set(m, M_FIP_CREATE);
			m_call(m, "POST", "/floating_ips",
			       json_pack("{s:s, s:{s:s}, s:{s:s}}", "name", m->name,
					 "resource_group", "id", m->rg_id, "zone", "name",
					 m->zone));
			WAIT(m);
		}
		goto submit;
	}
	case M_FIP_CREATE:
		WAIT_CALL(m);
		if (m->status != 201 && m->status != 200) {
			if (mentions_quota(m->errmsg))
				return m_fail(m, SM_E_QUOTA, "floating IP: %s", m->errmsg);
			return m_fail(m, SM_E_FAILED, "floating IP: %s", m->errmsg);
		}
		free(m->fip_id);
		m->fip_id = np_strdupz(jstr(m->answer, "id"));
		json_decref(m->fip);
		m->fip = json_incref(m->answer);
		m->seq[L_FIPS] = a->lists[L_FIPS].seq;
		m_set(m, M_FIP_WAIT);
		/* fall through */
	case M_FIP_WAIT:
		st = jstr(m->fip, "status");
		if (st == NULL || strcmp(st, "available") != 0) {
			if (st != NULL && strcmp(st, "failed") == 0)
				return m_fail(m, SM_E_FAILED, "Floating IP Error");
			if (!listed(a, L_FIPS, &m->seq[L_FIPS], &items))
				WAIT(m);
			it = find_by(items, "id", m->fip_id);
			if (it != NULL) {
				json_decref(m->fip);
				m->fip = json_deep_copy(it);
			}
			st = jstr(m->fip, "status");
			if (st != NULL && strcmp(st, "failed") == 0)
				return m_fail(m, SM_E_FAILED, "Floating IP Error");
			if (st == NULL || strcmp(st, "available") != 0) {
				list_start(a, L_FIPS);
				WAIT(m);
			}
		}
	submit:
		a->creates++;
		m_set(m, M_SUBMIT);
		{
			m_call(m, "POST", "/instances", json_incref(m->body));
		}
		WAIT(m);
	case M_SUBMIT:
		WAIT_CALL(m);
		if (m->status != 201 && m->status != 200) {
			a->create_errors++;
			if (mentions_quota(m->errmsg)) {
				a->quota_errors++;
				return m_fail(m, SM_E_QUOTA, "%s", m->errmsg);
			}
			return m_fail(m, SM_E_FAILED, "instance create: %s", m->errmsg);
		}
		if (jstr(m->answer, "id") == NULL)
			return m_fail(m, SM_E_FAILED, "instance create answered without an id");
		m->vm_id = np_strdupz(jstr(m->answer, "id"));
		json_decref(m->vm);
		m->vm = json_incref(m->answer);
		m->seq[L_INSTANCES] = a->lists[L_INSTANCES].seq;
		m_set(m, M_BUILDING);
		/* fall through */
	case M_BUILDING:
		if (!listed(a, L_INSTANCES, &m->seq[L_INSTANCES], &items))
			WAIT(m);
		it = find_by(items, "id", m->vm_id);
		if (it != NULL) {
			json_decref(m->vm);
			m->vm = json_deep_copy(it);
		}
		st = jstr(m->vm, "status");
		if (st != NULL && strcmp(st, "failed") == 0) {
			const json_t *why =
			    json_array_get(json_object_get(m->vm, "status_reasons"), 0);
			a->create_errors++;
			if (why != NULL && mentions_quota(jstr(why, "message"))) {
				a->quota_errors++;
				return m_fail(m, SM_E_QUOTA, "%s", jstr(why, "message"));
			}
			return m_fail(m, SM_E_FAILED, "Server in failed state%s%s", why ? ": " : "",
				      why ? (nz(jstr(why, "message"))) : "");
		}
		if (st == NULL || strcmp(st, "running") != 0) {
			list_start(a, L_INSTANCES);
			WAIT(m);
		}
		m->m.seen_at = a->lists[L_INSTANCES].done_started; /* the boot estimate's sample */
		if (m->fip_id == NULL) {
			*out = vm_instance(a, m->vm, NULL);
			m_set(m, M_DONE);
			return SM_DONE;
		}
		m_set(m, M_FIP_ATTACH);
		snprintf(path, sizeof(path), "/instances/%s/network_interfaces/%s/floating_ips/%s",
			 m->vm_id,
			 nz(jstr(json_object_get(m->vm, "primary_network_interface"), "id")),
			 m->fip_id);
		m_call(m, "PUT", path, NULL);
		WAIT(m);
	case M_FIP_ATTACH:
		WAIT_CALL(m);
		if (m->status != 201 && m->status != 200)
			return m_fail(m, SM_E_FAILED, "attaching the floating IP: %s", m->errmsg);
		json_decref(m->fip);
		m->fip = json_incref(m->answer);
		m->seq[L_FIPS] = a->lists[L_FIPS].seq;
		m_set(m, M_FIP_BOUND);
		/* fall through */
	case M_FIP_BOUND:
		if (json_object_get(m->fip, "target") == NULL) {
			if (!listed(a, L_FIPS, &m->seq[L_FIPS], &items))
				WAIT(m);
			it = find_by(items, "id", m->fip_id);
			if (it != NULL) {
				json_decref(m->fip);
				m->fip = json_deep_copy(it);
			}
			st = jstr(m->fip, "status");
			if (st != NULL && strcmp(st, "failed") == 0)
				return m_fail(m, SM_E_FAILED, "Floating IP Error");
			if (json_object_get(m->fip, "target") == NULL) {
				list_start(a, L_FIPS);
				WAIT(m);
			}
		}
		*out = vm_instance(a, m->vm, m->fip);
		m_set(m, M_DONE);
		return SM_DONE;
	default:
		return m_fail(m, SM_E_FAILED, "advanced after finishing");
	}
}

/* upstream's IBMVPCDeleteStateMachine: the floating IP named like the
 * instance, then the instance, each until the listing no longer shows it. */
static enum sm_status
delete_advance(struct sm_machine *mm, struct sm_instance **out)
{
	struct ibm_m *m = (struct ibm_m *)mm;
	struct sm_adapter *a = m->a;
	const json_t *items, *it;
	char path[600];

	(void)out;
	switch (m->st) {
	case M_START:
		m->seq[L_FIPS] = a->lists[L_FIPS].seq;
		m->seq[L_INSTANCES] = a->lists[L_INSTANCES].seq;
		m_set(m, M_DEL_FIP_FIND);
		/* fall through */
	case M_DEL_FIP_FIND:
		if (!listed(a, L_FIPS, &m->seq[L_FIPS], &items))
			WAIT(m);
		it = find_by(items, "name", mm->external_id);
		if (it == NULL)
			goto find_vm;
		free(m->fip_id);
		m->fip_id = np_strdupz(jstr(it, "id"));
		m->found_any = 1;
		a->fips_deleted++;
		m_set(m, M_DEL_FIP);
		snprintf(path, sizeof(path), "/floating_ips/%s", nz(m->fip_id));
		m_call(m, "DELETE", path, NULL);
		WAIT(m);
	case M_DEL_FIP:
		WAIT_CALL(m);
		if (m->status != 204 && m->status != 202 && m->status != 200 && m->status != 404)
			return m_fail(m, SM_E_FAILED, "floating IP delete: %s", m->errmsg);
		m->seq[L_FIPS] = a->lists[L_FIPS].seq;
		m_set(m, M_DEL_FIP_GONE);
		/* fall through */
	case M_DEL_FIP_GONE:
		if (!listed(a, L_FIPS, &m->seq[L_FIPS], &items))
			WAIT(m);
		if (find_by(items, "id", m->fip_id) != NULL) {
			list_start(a, L_FIPS);
			WAIT(m);
		}
	find_vm:
		m_set(m, M_DEL_VM_FIND);
		/* fall through */
	case M_DEL_VM_FIND:
		if (!listed(a, L_INSTANCES, &m->seq[L_INSTANCES], &items))
			WAIT(m);
		it = find_by(items, "name", mm->external_id);
		if (it == NULL) {
			if (!m->found_any)
				return m_fail(m, SM_E_NOTFOUND, "VM not found when deleting %s",
					      mm->external_id);
			m_set(m, M_DONE);
			return SM_DONE;
		}
		free(m->vm_id);
		m->vm_id = np_strdupz(jstr(it, "id"));
		a->deletes++;
		m_set(m, M_DEL_VM);
		snprintf(path, sizeof(path), "/instances/%s", nz(m->vm_id));
		m_call(m, "DELETE", path, NULL);
		WAIT(m);
	case M_DEL_VM:
		WAIT_CALL(m);
		if (m->status != 204 && m->status != 202 && m->status != 200 && m->status != 404)
			return m_fail(m, SM_E_FAILED, "instance delete: %s", m->errmsg);
		m->seq[L_INSTANCES] = a->lists[L_INSTANCES].seq;
		m_set(m, M_DEL_VM_GONE);
		/* fall through */
	case M_DEL_VM_GONE:
		if (!listed(a, L_INSTANCES, &m->seq[L_INSTANCES], &items))
			WAIT(m);
		if (find_by(items, "id", m->vm_id) != NULL) {
			list_start(a, L_INSTANCES);
			WAIT(m);
		}
		m_set(m, M_DONE);
		return SM_DONE;
	default:
		return m_fail(m, SM_E_FAILED, "advanced after finishing");
	}
}

static void
m_free(struct sm_machine *mm)
{
	struct ibm_m *m = (struct ibm_m *)mm;

	call_cancel(m->call);
	TAILQ_REMOVE(&m->a->machines, m, entry);
	free(m->m.external_id);
	free(m->name);
	free(m->rg_id);
	free(m->rg_name);
	free(m->zone);
	free(m->subnet);
	free(m->fip_id);
	free(m->vm_id);
	json_decref(m->image);
	json_decref(m->answer);
	json_decref(m->fip);
	json_decref(m->vm);
	json_decref(m->body);
	free(m);
}

static const struct sm_machine_ops create_ops = {create_advance, m_free};
static const struct sm_machine_ops delete_ops = {delete_advance, m_free};

static struct ibm_m *
m_new(struct sm_adapter *a, const struct sm_machine_ops *ops)
{
	struct ibm_m *m = calloc(1, sizeof(*m));

	if (m == NULL)
		abort();
	m->m.ops = ops;
	m->a = a;
	m_set(m, M_START);
	TAILQ_INSERT_TAIL(&a->machines, m, entry);
	return m;
}

static struct sm_machine *
ibm_create_machine(struct sm_adapter *a, const struct sm_create_args *args)
{
	struct ibm_m *m = m_new(a, &create_ops);
	const struct sm_pool *p = args->label->pool;
	const json_t *prov = a->env->provider;
	char rg[300];

	m->create = 1;
	m->name = np_strdupz(args->hostname);
	m->label = args->label;
	if (args->image_external_id != NULL)
		m->image = json_pack("{s:s}", "id", args->image_external_id);
	snprintf(rg, sizeof(rg), "np_%s_%s", a->env->provider_name, p->name);
	m->rg_name = np_strdupz(rg);
	m->zone = np_strdupz(pool_str(p, "zone", prov));
	m->subnet = np_strdupz(pool_str(p, "subnet", prov));
	m->public_ipv4 = np_json_bool(p->raw, "public-ipv4", np_json_bool(prov, "public-ipv4", 0));
	return &m->m;
}

static struct sm_machine *
ibm_delete_machine(struct sm_adapter *a, const char *external_id)
{
	struct ibm_m *m = m_new(a, &delete_ops);

	m->m.external_id = np_strdupz(external_id);
	return &m->m;
}

/* ---- list_images ----------------------------------------------------------------------------
 *
 * The account's own images (GET /images, every page; owner_type "user"),
 * once the adapter is up: the image list names an image's resource group
 * by id only, the boot's resource groups listing names it. Each image
 * carries the metadata its name and resource group give (ibm_api.h:
 * nodepool_provider_name for npimages_<provider>, where uploads go;
 * nodepool_upload_id for a name npimage<id>); IBM VPC images have no tags.
 */
struct ilist {
	TAILQ_ENTRY(ilist) entry;
	struct sm_adapter *a;
	drv_image_list_cb cb;
	void *arg;
	struct ib_pager *p;
	struct event *timer;
};

static void
ilist_free(struct ilist *il)
{
	TAILQ_REMOVE(&il->a->ilists, il, entry);
	pager_free(il->p);
	event_free(il->timer);
	free(il);
}

static void
ilist_listed(struct ib_pager *p, const char *error)
{
	struct ilist *il = p->arg;
	struct drv_cloud_image *v;
	json_t *metas = json_array();
	const json_t *it;
	size_t i, n = 0;
	char err[400];

	il->p = NULL;
	if (error != NULL) {
		snprintf(err, sizeof(err), "listing /images: %s", error);
		il->cb(NULL, 0, err, il->arg);
		pager_free(p);
		json_decref(metas);
		ilist_free(il);
		return;
	}
	v = calloc(json_array_size(p->items) + 1, sizeof(*v));
	if (v == NULL)
		abort();
	json_array_foreach(p->items, i, it)
	{
		json_t *md;
		if (jstr(it, "id") == NULL || jstr(it, "owner_type") == NULL ||
		    strcmp(jstr(it, "owner_type"), "user") != 0)
			continue;
		md = obj_metadata(il->a, it);
		json_array_append_new(metas, md);
		v[n++] = (struct drv_cloud_image){jstr(it, "id"), nz(jstr(it, "name")), md};
	}
	il->cb(v, n, NULL, il->arg);
	free(v);
	json_decref(metas);
	pager_free(p);
	ilist_free(il);
}

static void
ilist_try(evutil_socket_t fd, short what, void *arg)
{
	struct ilist *il = arg;
	struct sm_adapter *a = il->a;
	struct timeval tv = {1, 0};

	if (a->boot_step == BOOT_READY) {
		il->p = pager_start(a, API_VPC, "/images", "images", ilist_listed, il);
		return;
	}
	if (a->stopped || a->boot_permanent) {
		il->cb(NULL, 0, a->stopped ? "the provider is stopping" : a->boot_error, il->arg);
		ilist_free(il);
		return;
	}
	evtimer_add(il->timer, &tv); /* the adapter is still starting */
}

static void
ibm_list_images(struct sm_adapter *a, drv_image_list_cb cb, void *arg)
{
	struct ilist *il = calloc(1, sizeof(*il));
	struct timeval now = {0, 0};

	if (il == NULL)
		abort();
	il->a = a;
	il->cb = cb;
	il->arg = arg;
	il->timer = evtimer_new(a->base, ilist_try, il);
	TAILQ_INSERT_TAIL(&a->ilists, il, entry);
	evtimer_add(il->timer, &now); /* on the loop, never inside the slot */
}

/* ---- listings for the framework: instances, resources ------------------------------------------
 */

/* One list_instances / list_resources: its own pagers (floating IPs,
 * instances, images), the callback once all are in. */
struct ib_op {
	TAILQ_ENTRY(ib_op) entry;
	struct sm_adapter *a;
	int resources;
	struct ib_pager *p[NLIST];
	json_t *items[NLIST];
	int pending;
	char error[300];
	void *cb, *arg;
};

static void
op_free(struct ib_op *o)
{
	int k;

	TAILQ_REMOVE(&o->a->ops, o, entry);
	for (k = 0; k < NLIST; k++) {
		pager_free(o->p[k]);
		json_decref(o->items[k]);
	}
	free(o);
}

static void
op_deliver(struct ib_op *o)
{
	struct sm_adapter *a = o->a;
	const char *err = o->error[0] ? o->error : NULL;
	const json_t *it;
	size_t i, n = 0;

	if (!o->resources) {
		sm_instances_cb cb = (sm_instances_cb)o->cb;
		struct sm_instance **v = NULL;
		if (err == NULL) {
			v = calloc(json_array_size(o->items[L_INSTANCES]) + 1, sizeof(*v));
			json_array_foreach(o->items[L_INSTANCES], i, it)
			{
				/* upstream's listInstances: the floating IP of the same name
				 * when it targets the instance's primary interface */
				const json_t *fip =
				    find_by(o->items[L_FIPS], "name", jstr(it, "name"));
				const char *nic =
				    jstr(json_object_get(it, "primary_network_interface"), "id");
				const char *tgt = jstr(json_object_get(fip, "target"), "id");
				if (tgt == NULL || nic == NULL || strcmp(tgt, nic) != 0)
					fip = NULL;
				v[n++] = vm_instance(a, it, fip);
			}
		}
		cb(v, n, err, o->arg);
		for (i = 0; i < n; i++)
			sm_instance_free(v[i]);
		free(v);
	} else {
		sm_resources_cb cb = (sm_resources_cb)o->cb;
		static const char *const types[NLIST] = {"instance", "floatingip", "image"};
		struct sm_resource *v = NULL;
		json_t *metas = json_array();
		int k;
		if (err == NULL) {
			size_t total = 0;
			for (k = 0; k < NLIST; k++)
				total += json_array_size(o->items[k]);
			v = calloc(total + 1, sizeof(*v));
			for (k = 0; k < NLIST; k++)
				json_array_foreach(o->items[k], i, it)
				{
					json_t *md;
					if (k == L_IMAGES &&
					    (jstr(it, "owner_type") == NULL ||
					     strcmp(jstr(it, "owner_type"), "user") != 0))
						continue;
					if (jstr(it, "id") == NULL)
						continue;
					md = obj_metadata(a, it);
					json_array_append_new(metas, md);
					v[n++] = (struct sm_resource){types[k], jstr(it, "id"), md};
				}
		}
		cb(v, n, err, o->arg);
		free(v);
		json_decref(metas);
	}
	op_free(o);
}

static void
op_listed(struct ib_pager *p, const char *error)
{
	struct ib_op *o = p->arg;
	int k;

	for (k = 0; k < NLIST; k++)
		if (o->p[k] == p)
			break;
	if (k == NLIST)
		return;
	o->p[k] = NULL;
	if (error != NULL && o->error[0] == '\0')
		snprintf(o->error, sizeof(o->error), "listing %s: %s", p->path, error);
	o->items[k] = json_incref(p->items);
	pager_free(p);
	if (--o->pending == 0)
		op_deliver(o);
}

static void
op_start(struct sm_adapter *a, int resources, void *cb, void *arg)
{
	struct ib_op *o = calloc(1, sizeof(*o));
	static const char *const paths[NLIST] = {"/instances", "/floating_ips", "/images"};
	static const char *const keys[NLIST] = {"instances", "floating_ips", "images"};
	int k, n = resources ? NLIST : 2;

	if (o == NULL)
		abort();
	o->a = a;
	o->resources = resources;
	o->cb = cb;
	o->arg = arg;
	TAILQ_INSERT_TAIL(&a->ops, o, entry);
	o->pending = n;
	for (k = 0; k < n; k++)
		o->p[k] = pager_start(a, API_VPC, paths[k], keys[k], op_listed, o);
}

static void
ibm_list_instances(struct sm_adapter *a, sm_instances_cb cb, void *arg)
{
	op_start(a, 0, (void *)cb, arg);
}

static void
ibm_list_resources(struct sm_adapter *a, sm_resources_cb cb, void *arg)
{
	op_start(a, 1, (void *)cb, arg);
}

static void
resource_deleted(struct ib_call *c, int status, const char *error, json_t *body, const char *raw)
{
	sm_done_cb cb = (sm_done_cb)c->ucb;
	char msg[300];

	if (error == NULL && (status < 300 || status == 404)) {
		cb(1, NULL, c->uarg);
		return;
	}
	ibm_error_text(status, error, body, raw, msg, sizeof(msg));
	cb(0, msg, c->uarg);
}

static void
ibm_delete_resource(struct sm_adapter *a, const struct sm_resource *r, sm_done_cb cb, void *arg)
{
	char path[600];
	struct ib_call *c;

	log_info("ibmvpc %s: deleting leaked %s %s", a->env->provider_name, r->type, r->id);
	if (strcmp(r->type, "floatingip") == 0)
		snprintf(path, sizeof(path), "/floating_ips/%s", r->id);
	else if (strcmp(r->type, "image") == 0)
		snprintf(path, sizeof(path), "/images/%s", r->id);
	else
		snprintf(path, sizeof(path), "/instances/%s", r->id);
	c = call_new(a, API_VPC, "DELETE", path, NULL, resource_deleted, NULL);
	c->ucb = (void *)cb;
	c->uarg = arg;
}

/* ---- quota
 * ---------------------------------------------------------------------------------------- */

struct quota_ctx {
	TAILQ_ENTRY(quota_ctx) entry;
	struct sm_adapter *a;
	sm_quota_cb cb;
	void *arg;
	struct event *ev;
};

static void
quota_cb(evutil_socket_t fd, short what, void *arg)
{
	struct quota_ctx *q = arg;
	const json_t *quota = json_object_get(q->a->env->provider, "quota");
	struct drv_quota l;

	(void)fd;
	(void)what;
	memset(&l, 0, sizeof(l));
	l.instances = np_json_num(quota, "instances", INFINITY);
	l.cores = np_json_num(quota, "cores", INFINITY);
	l.ram = np_json_num(quota, "ram", INFINITY);
	TAILQ_REMOVE(&q->a->quotas, q, entry);
	event_free(q->ev);
	q->cb(&l, NULL, q->arg);
	free(q);
}

/* upstream's getQuotaLimits: the provider's `quota` (IBM Cloud serves no
 * quota through its API). Answered on the next loop turn. */
static void
ibm_quota_limits(struct sm_adapter *a, sm_quota_cb cb, void *arg)
{
	struct quota_ctx *q = calloc(1, sizeof(*q));

	if (q == NULL)
		abort();
	q->a = a;
	q->cb = cb;
	q->arg = arg;
	q->ev = event_new(a->base, -1, 0, quota_cb, q);
	TAILQ_INSERT_TAIL(&a->quotas, q, entry);
	event_active(q->ev, EV_TIMEOUT, 0);
}

static int
ibm_label_quota(struct sm_adapter *a, const struct sm_label *label, struct drv_quota *out,
		char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	quota_of_profile(a, np_json_str(label->raw, "profile", ""), out);
	return 0;
}

/* ---- image uploads through Cloud Object Storage (the builder's) ----------------------------- */

#define IBM_UPLOAD_POLL 2.0 /* s between image status reads (upstream: 30) */

/* "/<bucket>/<key>" with the key URL-encoded, malloc'd. */
static char *
cos_path(const char *bucket, const char *key)
{
	size_t n = strlen(bucket) + (key ? strlen(key) * 3 : 0) + 4;
	char *p = malloc(n), *enc;

	if (p == NULL)
		abort();
	if (key == NULL) {
		snprintf(p, n, "/%s", bucket);
		return p;
	}
	enc = malloc(strlen(key) * 3 + 1);
	ibm_urlenc(key, enc, strlen(key) * 3 + 1);
	snprintf(p, n, "/%s/%s", bucket, enc);
	free(enc);
	return p;
}

/* A call to COS: the bearer token and, as the SDK sends it, the storage
 * instance's CRN. */
static struct ib_call *
cos_call(struct sm_adapter *a, const char *method, const char *path, ib_call_cb cb, void *owner,
	 const char *file)
{
	struct ib_call *c = calloc(1, sizeof(*c));
	char h[600];

	if (c == NULL)
		abort();
	c->a = a;
	c->api = API_COS;
	c->method = np_strdupz(method);
	c->path = np_strdupz(path);
	c->cb = cb;
	c->owner = owner;
	if (file != NULL) {
		c->body_file = np_strdupz(file);
		c->ctype = "application/octet-stream";
	}
	snprintf(h, sizeof(h), "ibm-service-instance-id: %s", a->cos_crn ? a->cos_crn : "");
	c->hdr = np_strdupz(h);
	TAILQ_INSERT_TAIL(&a->calls, c, entry);
	call_go(c);
	return c;
}

enum up_state { UP_BOOT, UP_LOCATION, UP_PUT, UP_RG, UP_CREATE, UP_POLL, UP_DELOBJ };

/* One upload, as upstream's uploadImage: the file to the bucket as
 * <image name>.<format>, the resource group npimages_<provider> (made
 * once), POST /images from cos://<location>/<bucket>/<object>, waited
 * available, then the object deleted. */
struct upload {
	TAILQ_ENTRY(upload) entry;
	struct sm_adapter *a;
	enum up_state st;
	sm_upload_cb cb;
	void *arg;
	char *file, *object, *name, *os, *location, *image_id;
	struct ib_call *call;
	struct event *timer;
	double deadline;
};

static void up_step(struct upload *u);

static void
up_free(struct upload *u)
{
	TAILQ_REMOVE(&u->a->uploads, u, entry);
	call_cancel(u->call);
	if (u->timer != NULL)
		event_free(u->timer);
	free(u->file);
	free(u->object);
	free(u->name);
	free(u->os);
	free(u->location);
	free(u->image_id);
	free(u);
}

static void
ignore_answer(struct ib_call *c, int status, const char *error, json_t *body, const char *raw)
{
	(void)c;
	(void)status;
	(void)error;
	(void)body;
	(void)raw;
}

static void
up_end(struct upload *u, const char *error)
{
	struct sm_adapter *a = u->a;

	if (error != NULL) {
		char *p;
		log_warn("ibmvpc %s: uploading image %s failed: %s", a->env->provider_name, u->name,
			 error);
		/* leave nothing of a failed upload behind (upstream leaves it) */
		if (u->st >= UP_RG && u->st < UP_DELOBJ) {
			p = cos_path(a->bucket, u->object);
			cos_call(a, "DELETE", p, ignore_answer, NULL, NULL);
			free(p);
		}
		if (u->image_id != NULL) {
			char path[300];
			snprintf(path, sizeof(path), "/images/%s", u->image_id);
			call_new(a, API_VPC, "DELETE", path, NULL, ignore_answer, NULL);
		}
		u->cb(NULL, error, u->arg);
	} else {
		log_info("ibmvpc %s: uploaded image %s as %s", a->env->provider_name, u->name,
			 u->image_id);
		u->cb(u->image_id, NULL, u->arg);
	}
	up_free(u);
}

static void
up_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	up_step(arg);
}

static void
up_later(struct upload *u, double s)
{
	struct timeval tv = np_tv_of(s);

	event_add(u->timer, &tv);
}

static void
up_answer(struct ib_call *c, int status, const char *error, json_t *body, const char *raw)
{
	struct upload *u = c->owner;
	struct sm_adapter *a = u->a;
	char msg[300];
	const char *from = raw;

	u->call = NULL;
	if (error != NULL || status >= 300) {
		if (u->st == UP_DELOBJ) { /* the image is there: a left object is no failure */
			up_end(u, NULL);
			return;
		}
		if (c->api == API_COS && raw != NULL) {
			char code[100] = "", m[200] = "";
			const char *f2 = raw;
			ibm_xml_text(&f2, "Code", code, sizeof(code));
			f2 = raw;
			ibm_xml_text(&f2, "Message", m, sizeof(m));
			snprintf(msg, sizeof(msg), "object storage: HTTP %d %s %s", status, code,
				 m);
			if (error != NULL)
				snprintf(msg, sizeof(msg), "object storage: %s", error);
		} else {
			ibm_error_text(status, error, body, raw, msg, sizeof(msg));
		}
		up_end(u, msg);
		return;
	}
	switch (u->st) {
	case UP_LOCATION: {
		char loc[100];
		char *dash;
		if (!ibm_xml_text(&from, "LocationConstraint", loc, sizeof(loc))) {
			up_end(u, "object storage: no LocationConstraint for the bucket");
			return;
		}
		/* upstream: "us-south-smart" -> "us-south" */
		if ((dash = strrchr(loc, '-')) != NULL)
			*dash = '\0';
		u->location = np_strdupz(loc);
		u->st = UP_PUT;
		break;
	}
	case UP_PUT:
		u->st = UP_RG;
		break;
	case UP_RG:
		json_object_set_new(body, "name", json_string(jstr(c->extra, "name")));
		json_object_set(a->rgs, jstr(c->extra, "name"), body);
		u->st = UP_CREATE;
		break;
	case UP_CREATE:
		u->image_id = np_strdupz(jstr(body, "id"));
		if (u->image_id == NULL) {
			up_end(u, "image create answered without an id");
			return;
		}
		u->st = UP_POLL;
		up_later(u, IBM_UPLOAD_POLL);
		return;
	case UP_POLL: {
		const char *st = jstr(body, "status");
		if (st != NULL && strcmp(st, "available") == 0) {
			u->st = UP_DELOBJ;
			break;
		}
		if (st == NULL || strcmp(st, "pending") != 0) {
			snprintf(msg, sizeof(msg), "Image status of %s is %s", u->name,
				 st ? st : "(none)");
			up_end(u, msg);
			return;
		}
		if (now_mono() > u->deadline) {
			up_end(u, "the image stayed pending");
			return;
		}
		up_later(u, IBM_UPLOAD_POLL);
		return;
	}
	case UP_DELOBJ:
		up_end(u, NULL);
		return;
	default:
		break;
	}
	up_step(u);
}

static void
up_step(struct upload *u)
{
	struct sm_adapter *a = u->a;
	char rg[300], path[400], href[1200];
	char *p;

	switch (u->st) {
	case UP_BOOT:
		if (a->stopped) {
			up_end(u, "the provider is stopping");
			return;
		}
		if (a->boot_step != BOOT_READY) {
			if (a->boot_permanent) {
				up_end(u, a->boot_error);
				return;
			}
			up_later(u, 1.0);
			return;
		}
		if (a->bucket == NULL || a->base_url[API_COS] == NULL) {
			up_end(u,
			       "no object-storage in the provider: uploads go through Cloud Object "
			       "Storage");
			return;
		}
		if (a->cos_crn == NULL) {
			up_end(u, "no Cloud Object Storage instance found");
			return;
		}
		u->st = UP_LOCATION;
		p = cos_path(a->bucket, NULL);
		snprintf(path, sizeof(path), "%s?location", p);
		free(p);
		u->call = cos_call(a, "GET", path, up_answer, u, NULL);
		return;
	case UP_PUT:
		p = cos_path(a->bucket, u->object);
		u->call = cos_call(a, "PUT", p, up_answer, u, u->file);
		free(p);
		return;
	case UP_RG:
		snprintf(rg, sizeof(rg), "npimages_%s", a->env->provider_name);
		if (json_object_get(a->rgs, rg) == NULL) {
			u->call = call_new(a, API_RM, "POST", "/v2/resource_groups",
					   json_pack("{s:s}", "name", rg), up_answer, u);
			u->call->extra = json_pack("{s:s}", "name", rg);
			return;
		}
		u->st = UP_CREATE;
		/* fall through */
	case UP_CREATE:
		snprintf(rg, sizeof(rg), "npimages_%s", a->env->provider_name);
		snprintf(href, sizeof(href), "cos://%s/%s/%s", u->location, a->bucket, u->object);
		u->call = call_new(a, API_VPC, "POST", "/images",
				   json_pack("{s:s, s:{s:s}, s:{s:s}, s:{s:s}}", "name", u->name,
					     "resource_group", "id",
					     nz(jstr(json_object_get(a->rgs, rg), "id")), "file",
					     "href", href, "operating_system", "name", u->os),
				   up_answer, u);
		return;
	case UP_POLL:
		snprintf(path, sizeof(path), "/images/%s", u->image_id);
		u->call = call_new(a, API_VPC, "GET", path, NULL, up_answer, u);
		return;
	case UP_DELOBJ:
		p = cos_path(a->bucket, u->object);
		u->call = cos_call(a, "DELETE", p, up_answer, u, NULL);
		free(p);
		return;
	default:
		return;
	}
}

static void
ibm_upload_image(struct sm_adapter *a, const struct sm_upload_args *ua, sm_upload_cb cb, void *arg)
{
	struct upload *u = calloc(1, sizeof(*u));
	char obj[600];

	if (u == NULL)
		abort();
	u->a = a;
	u->cb = cb;
	u->arg = arg;
	u->file = np_strdupz(ua->filename);
	u->name = np_strdupz(ua->image_name);
	snprintf(obj, sizeof(obj), "%s.%s", ua->image_name, ua->format ? ua->format : "qcow2");
	u->object = np_strdupz(obj);
	u->os = np_strdupz(ua->image ? np_json_str(ua->image->raw, "operating-system", "") : "");
	u->timer = event_new(a->base, -1, 0, up_timer_cb, u);
	u->deadline = now_mono() + 3600;
	u->st = UP_BOOT;
	TAILQ_INSERT_TAIL(&a->uploads, u, entry);
	up_later(u, 0); /* the first step on the loop, never inside the slot */
}

/* upstream's deleteImage: the image (a missing one is done), the bucket's
 * objects named like it, then the image. */
struct imgdel {
	TAILQ_ENTRY(imgdel) entry;
	struct sm_adapter *a;
	char *id, *name;
	int step; /* 0 get image, 1 list objects, 2 delete objects, 3 delete image */
	json_t *keys;
	size_t next;
	struct ib_call *call;
	sm_done_cb cb;
	void *arg;
};

static void del_step(struct imgdel *d);

static void
del_free(struct imgdel *d)
{
	TAILQ_REMOVE(&d->a->imgdels, d, entry);
	call_cancel(d->call);
	free(d->id);
	free(d->name);
	json_decref(d->keys);
	free(d);
}

static void
del_answer(struct ib_call *c, int status, const char *error, json_t *body, const char *raw)
{
	struct imgdel *d = c->owner;
	char msg[300], key[1024];
	const char *from = raw;

	d->call = NULL;
	switch (d->step) {
	case 0:
		if (error == NULL && status == 404) {
			d->cb(1, NULL, d->arg);
			del_free(d);
			return;
		}
		if (error != NULL || status != 200) {
			ibm_error_text(status, error, body, raw, msg, sizeof(msg));
			d->cb(0, msg, d->arg);
			del_free(d);
			return;
		}
		d->name = np_strdupz(jstr(body, "name"));
		d->step = d->a->cos_crn && d->a->bucket && d->name ? 1 : 3;
		break;
	case 1:
		d->keys = json_array();
		if (error == NULL && status == 200)
			while (ibm_xml_text(&from, "Key", key, sizeof(key)))
				if (strncmp(key, d->name, strlen(d->name)) == 0)
					json_array_append_new(d->keys, json_string(key));
		d->step = 2;
		break;
	case 2:
		break;
	case 3:
		if (error == NULL && (status < 300 || status == 404)) {
			log_info("ibmvpc %s: deleted image %s", d->a->env->provider_name, d->id);
			d->cb(1, NULL, d->arg);
		} else {
			ibm_error_text(status, error, body, raw, msg, sizeof(msg));
			d->cb(0, msg, d->arg);
		}
		del_free(d);
		return;
	default:
		break;
	}
	del_step(d);
}

static void
del_step(struct imgdel *d)
{
	struct sm_adapter *a = d->a;
	char path[300];
	char *p;

	switch (d->step) {
	case 0:
	case 3:
		snprintf(path, sizeof(path), "/images/%s", d->id);
		d->call = call_new(a, API_VPC, d->step == 0 ? "GET" : "DELETE", path, NULL,
				   del_answer, d);
		return;
	case 1:
		p = cos_path(a->bucket, NULL);
		d->call = cos_call(a, "GET", p, del_answer, d, NULL);
		free(p);
		return;
	case 2:
		if (d->next < json_array_size(d->keys)) {
			p = cos_path(a->bucket,
				     json_string_value(json_array_get(d->keys, d->next++)));
			d->call = cos_call(a, "DELETE", p, del_answer, d, NULL);
			free(p);
			return;
		}
		d->step = 3;
		del_step(d);
		return;
	default:
		return;
	}
}

static void
ibm_delete_image(struct sm_adapter *a, const char *external_id, sm_done_cb cb, void *arg)
{
	struct imgdel *d = calloc(1, sizeof(*d));

	if (d == NULL)
		abort();
	d->a = a;
	d->id = np_strdupz(external_id);
	d->cb = cb;
	d->arg = arg;
	TAILQ_INSERT_TAIL(&a->imgdels, d, entry);
	del_step(d);
}

/* ---- the adapter -------------------------------------------------------------------------------
 */

static char *
trimmed_url(const char *u)
{
	char *s = np_strdupz(u);
	size_t n = strlen(s);

	while (n > 0 && s[n - 1] == '/')
		s[--n] = '\0';
	return s;
}

static struct sm_adapter *
ibm_adapter_new(const struct sm_env *env, char *err, size_t errlen)
{
	struct sm_adapter *a = calloc(1, sizeof(*a));
	const json_t *p = env->provider;
	struct http_client_options ho;
	const char *ca = getenv("REQUESTS_CA_BUNDLE");
	char def[300];
	int s, k;

	if (a == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (http_load("driver ibmvpc", err, errlen) != 0) {
		free(a);
		return NULL;
	}
	a->env = env;
	a->base = env->base;
	TAILQ_INIT(&a->calls);
	TAILQ_INIT(&a->machines);
	TAILQ_INIT(&a->ops);
	TAILQ_INIT(&a->uploads);
	TAILQ_INIT(&a->imgdels);
	TAILQ_INIT(&a->ilists);
	TAILQ_INIT(&a->quotas);
	if (ibm_creds_find(&a->creds, np_json_str(p, "credentials-file", NULL), NULL, err,
			   errlen) != 0) {
		free(a);
		return NULL;
	}
	a->region = np_json_str(p, "region", "us-south");
	a->vpc_name = np_json_str(p, "vpc", "");
	a->rate = env->cfg != NULL ? env->cfg->rate : np_json_num(p, "rate", 1);
	snprintf(def, sizeof(def), "https://%s.iaas.cloud.ibm.com/v1", a->region);
	a->base_url[API_VPC] = trimmed_url(a->creds.vpc_url ? a->creds.vpc_url : def);
	{
		/* the SDK appends /identity/token to the auth URL unless given */
		char *u = trimmed_url(a->creds.auth_url ? a->creds.auth_url : IBM_DEFAULT_IAM);
		size_t n = strlen(u);
		if (n >= 15 && strcmp(u + n - 15, "/identity/token") == 0)
			u[n - 15] = '\0';
		a->base_url[API_IAM] = u;
	}
	a->base_url[API_RM] = trimmed_url(a->creds.rm_url ? a->creds.rm_url : IBM_DEFAULT_RESMGR);
	a->base_url[API_RC] = trimmed_url(a->creds.rc_url ? a->creds.rc_url : IBM_DEFAULT_RESMGR);
	{
		const json_t *os = json_object_get(p, "object-storage");
		a->bucket = np_json_str(os, "bucket-name", NULL);
		/* object-storage's endpoint; none: no uploads (the client is
		 * made all the same, pointed nowhere useful) */
		a->base_url[API_COS] = trimmed_url(np_json_str(
		    os, "endpoint", "https://s3.us-south.cloud-object-storage.appdomain.cloud"));
	}
	if (ca == NULL)
		ca = getenv("CURL_CA_BUNDLE");
	for (s = 0; s < NAPI; s++) {
		memset(&ho, 0, sizeof(ho));
		/* upstream's RateLimiter: `rate` calls per second; IAM is not
		 * rate limited */
		ho.rate = s == API_IAM ? 0 : a->rate;
		ho.ca_file = ca;
		ho.insecure = s == API_IAM ? a->creds.auth_disable_ssl : a->creds.disable_ssl;
		ho.user_agent = "nodepoold (ibmvpc)";
		ho.api = api_names[s]; /* retry logs and counts (lib/net/http.h) */
		a->http[s] = http_client_new(a->base, &ho, err, errlen);
		if (a->http[s] == NULL) {
			while (--s >= 0)
				http_client_free(a->http[s]);
			for (s = 0; s < NAPI; s++)
				free(a->base_url[s]);
			ibm_creds_clear(&a->creds);
			free(a);
			return NULL;
		}
	}
	a->rgs = json_object();
	a->profiles = json_object();
	a->subnets = json_object();
	a->keys = json_object();
	{
		static const char *const paths[NLIST] = {"/instances", "/floating_ips", "/images"};
		static const char *const keys[NLIST] = {"instances", "floating_ips", "images"};
		for (k = 0; k < NLIST; k++) {
			a->lists[k].a = a;
			a->lists[k].path = paths[k];
			a->lists[k].key = keys[k];
			a->lists[k].timer = event_new(a->base, -1, 0, list_timer_cb, &a->lists[k]);
		}
	}
	a->boot_timer = event_new(a->base, -1, 0, boot_timer_cb, a);
	log_info("ibmvpc %s: vpc %s in region %s at %s (IAM %s, resources %s), rate %g/s",
		 env->provider_name, a->vpc_name, a->region, a->base_url[API_VPC],
		 a->base_url[API_IAM], a->base_url[API_RM], a->rate);
	a->boot_step = 1;
	boot_next(a);
	return a;
}

static void
ibm_adapter_stop(struct sm_adapter *a)
{
	a->stopped = 1;
}

static void
ibm_adapter_free(struct sm_adapter *a)
{
	struct ib_op *o;
	struct ib_call *c;
	int s, k;

	if (a == NULL)
		return;
	while ((o = TAILQ_FIRST(&a->ops)) != NULL)
		op_free(o);
	while (!TAILQ_EMPTY(&a->uploads))
		up_free(TAILQ_FIRST(&a->uploads));
	while (!TAILQ_EMPTY(&a->imgdels))
		del_free(TAILQ_FIRST(&a->imgdels));
	while (!TAILQ_EMPTY(&a->ilists))
		ilist_free(TAILQ_FIRST(&a->ilists));
	while (!TAILQ_EMPTY(&a->quotas)) {
		struct quota_ctx *q = TAILQ_FIRST(&a->quotas);
		TAILQ_REMOVE(&a->quotas, q, entry);
		event_free(q->ev);
		free(q);
	}
	pager_free(a->boot_pager);
	for (k = 0; k < NLIST; k++) {
		pager_free(a->lists[k].pager);
		json_decref(a->lists[k].items);
		if (a->lists[k].timer != NULL)
			event_free(a->lists[k].timer);
	}
	while ((c = TAILQ_FIRST(&a->calls)) != NULL)
		call_free(c);
	for (s = 0; s < NAPI; s++) {
		http_client_free(a->http[s]);
		free(a->base_url[s]);
	}
	if (a->boot_timer != NULL)
		event_free(a->boot_timer);
	free(a->token);
	json_decref(a->vpc);
	json_decref(a->rgs);
	json_decref(a->profiles);
	json_decref(a->subnets);
	json_decref(a->keys);
	free(a->cos_crn);
	ibm_creds_clear(&a->creds);
	free(a);
}

static void
ibm_dump(struct sm_adapter *a, struct evbuffer *out)
{
	struct ibm_m *m;
	int s;

	evbuffer_add_printf(out,
			    "ibmvpc: vpc %s (%s) region %s, start-up %s%s; token %s; %zu resource "
			    "groups, %zu profiles, %zu subnets, %zu keys\n",
			    a->vpc_name, jstr(a->vpc, "id") ? jstr(a->vpc, "id") : "-", a->region,
			    a->boot_step == BOOT_READY ? "done" : "pending", a->boot_error,
			    a->token ? "held" : "none", json_object_size(a->rgs),
			    json_object_size(a->profiles), json_object_size(a->subnets),
			    json_object_size(a->keys));
	evbuffer_add_printf(
	    out,
	    "ibmvpc: creates %llu (errors %llu, quota %llu), deletes %llu, listings "
	    "%llu, tokens %llu (after a 401: %llu), floating ips %llu created %llu "
	    "deleted, resource groups created %llu\n",
	    a->creates, a->create_errors, a->quota_errors, a->deletes, a->listings, a->auths,
	    a->reauths, a->fips_created, a->fips_deleted, a->rgs_created);
	for (s = 0; s < NAPI; s++) {
		struct http_stats st;
		http_get_stats(a->http[s], &st);
		evbuffer_add_printf(out,
				    "ibmvpc: api %s %s: calls %llu, in flight %u, queued %u, "
				    "throttled %llu, errors %llu\n",
				    api_names[s], a->base_url[s], a->calls_by_api[s], st.inflight,
				    st.queued, (unsigned long long)st.throttled,
				    (unsigned long long)st.errors);
	}
	TAILQ_FOREACH(m, &a->machines, entry)
	evbuffer_add_printf(out, "ibmvpc: %s machine %s: %s\n", m->create ? "create" : "delete",
			    m->m.external_id ? m->m.external_id : "-", m->m.state);
}

static const struct sm_adapter_ops ibm_adapter = {
    .name = "ibmvpc",
    .adapter_new = ibm_adapter_new,
    .adapter_stop = ibm_adapter_stop,
    .adapter_free = ibm_adapter_free,
    .create_machine = ibm_create_machine,
    .delete_machine = ibm_delete_machine,
    .list_instances = ibm_list_instances,
    .list_resources = ibm_list_resources,
    .delete_resource = ibm_delete_resource,
    .quota_limits = ibm_quota_limits,
    .label_quota = ibm_label_quota,
    .upload_image = ibm_upload_image,
    .delete_image = ibm_delete_image,
    .list_images = ibm_list_images,
    .images_in_resources = 1, /* list_resources lists the images */
    .dump = ibm_dump,
};

/* Upstream's IBMVPCProviderConfig defaults: boot-timeout 120, rate 1 call
 * per second, host-key-checking on. */
static const struct sm_defaults ibm_defaults = {
    .boot_timeout = 120,
    .rate = 1,
    .host_key_checking = 1,
};

static struct drv_provider *
ibm_provider_new(struct drv_host *lc, char *err, size_t errlen)
{
	return sm_provider_new(&ibm_adapter, &ibm_defaults, lc, err, errlen);
}

/* The ibmvpc driver (upstream's IBMVPCDriver: a state-machine driver). */
const struct driver drv_ibmvpc = {
    .name = "ibmvpc",
    .pause_at_quota = 1,
    .reuse_only = 0,
    .provider_new = ibm_provider_new,
    .image_format = sm_drv_config_image_format,
    SM_DRIVER_SLOTS,
};

const struct sm_adapter_ops *
ibm_adapter_ops(void)
{
	return &ibm_adapter;
}
