/*
 * The `openstack` driver: a state-machine Adapter (drivers/statemachine/
 * adapter.h) that speaks the OpenStack REST APIs (Keystone v3, Nova v2.1,
 * Neutron v2.0, Glance v2, Cinder v3) through lib/net/http.h, so every
 * call is non-blocking on the worker's loop. It does what upstream
 * Nodepool's OpenStackAdapter (nodepool/driver/openstack/adapter.py) does
 * through openstacksdk, as HTTP calls:
 *
 *   credentials  clouds.yaml / secure.yaml as openstacksdk finds them
 *                (os_cloud.h); a Keystone v3 token (password or application
 *                credential) reused until 5 minutes before it expires, and
 *                fetched again on a 401; endpoints from the token's catalog
 *                (the cloud's interface and region; *_endpoint_override).
 *   rate         the provider's `rate` is seconds between calls (upstream:
 *                openstacksdk rate_limit = 1/rate), per API (compute,
 *                network, image, volume), each with its own HTTP client, so
 *                a 429/503 (Retry-After honoured) pauses only that API.
 *   create       flavor by flavor-name (name or id) or the smallest with
 *                >= min-ram whose name contains flavor-name; image by the
 *                upload's external id (diskimage), or the cloud-image's
 *                image-id, or image-name / name looked up in Glance; network
 *                names looked up in Neutron; POST /servers with metadata
 *                (groups "<provider>,<image>,<label>", instance-properties,
 *                dynamic-instance-properties formatted with the request,
 *                nodepool_*), key_name, security_groups, availability_zone,
 *                config_drive, user_data, block_device_mapping_v2 for
 *                boot-from-volume (volume-size, deleted with the server);
 *                then the server's status from a shared listing (below);
 *                ACTIVE without a public IPv4 in a pool with
 *                auto-floating-ip and a cloud with an external network: a
 *                floating IP created on the server's port and waited ACTIVE.
 *                A fault or refusal mentioning quota (or "number of ports
 *                exceeded") is a quota error.
 *   polling      one GET /servers/detail answers every machine waiting on a
 *                server's status (upstream's cached _listServers); a
 *                listing starts when the framework's pace says (drivers/
 *                statemachine/pace.c: the servers' expected boot), at most
 *                every `rate`, and only while somebody waits, so API calls
 *                per node stay low.
 *   delete       the server's floating IPs (via its ports), DELETE
 *                /servers/<id>, then polled until it leaves the listing.
 *   cleanup      leaked servers by metadata (list_resources); compute
 *                ports DOWN at two looks port-cleanup-interval apart
 *                (leaked.ports); unattached floating IPs when
 *                clean-floating-ips (leaked.floatingips).
 *   quota        GET /limits (compute) and, when a label boots from
 *                volume, the volume limits (extra "volumes", "volume-gb");
 *                per label: the flavor's vcpus and ram, plus 1 volume of
 *                volume-size GB for boot-from-volume.
 *   images       upload: POST /v2/images, PUT its file streamed from disk,
 *                wait active; delete: DELETE /v2/images/<id>.
 *   console      POST /servers/<id>/action os-getConsoleOutput.
 */
#include "drivers/statemachine/statemachine.h"
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

#define OS_TOKEN_MARGIN	  300.0 /* s: fetch a new token this long before expiry */
#define OS_IMAGE_RECHECK  300.0 /* s: a missing cloud image is looked up again (upstream) */
#define OS_AUTH_RETRY	  5.0	/* s: after a failed authentication */
#define OS_FIP_POLL	  1.0	/* s */
#define OS_UPLOAD_POLL	  2.0	/* s */
#define OS_STARTUP_RETRY  10.0	/* s: flavors, networks, AZs after a failed read */
#define OS_MAX_LIST_PAGES 100

enum os_svc { SVC_COMPUTE, SVC_NETWORK, SVC_IMAGE, SVC_VOLUME, SVC_IDENTITY, NSVC };
static const char *const svc_names[NSVC] = {"compute", "network", "image", "volume", "identity"};

struct os_call;
typedef void (*os_call_cb)(struct os_call *c, int status, const char *error, json_t *body,
			   const struct http_response *res);

/* One API call: waits for a token, runs, re-authenticates once on a 401. */
struct os_call {
	TAILQ_ENTRY(os_call) entry;
	struct sm_adapter *a;
	enum os_svc svc;
	char *method, *path; /* path: under the service endpoint, or a full URL */
	char *body;
	size_t body_len;
	char *body_file;
	const char *ctype;
	struct http_req *req;
	struct event *ev; /* deferred error */
	int waiting_auth, reauthed;
	os_call_cb cb;
	void *owner;   /* machine or operation */
	void *ucb;     /* the slot's callback */
	void *uarg;    /* and its argument */
	json_t *extra; /* call-specific state */
};

/* A waiter for the next server listing. */
struct os_listwait {
	TAILQ_ENTRY(os_listwait) entry;
	int kind; /* 0 instances, 1 resources */
	void *cb, *arg;
};

struct osm;
struct upload;

struct sm_adapter {
	const struct sm_env *env;
	struct event_base *base;
	struct os_cloud cloud;
	struct http_client *http[NSVC];
	char *ep[NSVC];
	char *token, *project_id;
	double token_exp; /* epoch */
	struct os_call *auth_call;
	double auth_failed_at;
	char auth_error[256];
	int auth_ok_once;
	TAILQ_HEAD(, os_call) calls;
	TAILQ_HEAD(, osm) machines;
	TAILQ_HEAD(, upload) uploads_inflight;
	/* config */
	double rate_s;
	int clean_fips;
	double port_cleanup_interval;
	int any_bfv;
	/* flavors (sorted by ram), external networks, AZs */
	json_t *flavors;
	struct os_call *flavors_call;
	double flavors_failed_at;
	json_t *ext_nets; /* array of network objects; NULL until read */
	struct os_call *ext_call;
	double ext_failed_at;
	struct np_strv azs;
	int azs_read;
	struct os_call *azs_call;
	/* name -> {"id": id or null, "at": time} */
	json_t *images, *nets;
	/* the shared server listing */
	json_t *servers; /* object id -> server */
	json_t *page;	 /* listing being assembled */
	unsigned long long list_seq, list_done_seq;
	double list_started, list_done_started; /* the last listing's, the newest in's */
	struct os_call *list_call;
	struct event *list_timer;
	int list_wanted;
	TAILQ_HEAD(, os_listwait) listwaits;
	/* cleanup */
	json_t *down_ports; /* array of ids seen DOWN at the last look, or NULL */
	double down_ports_at;
	struct os_call *ports_call, *fips_call;
	/* counters */
	unsigned long long calls_by_svc[NSVC], auths, reauths, creates, create_errors, quota_errors,
	    deletes, listings, fips_created, fips_deleted, leaked_ports, leaked_fips, uploads;
	int stopped;
};

/* ---- small helpers ---------------------------------------------------------------------- */

static const char *
jstr(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* The answer decoding lives in os_answer.c (pure, fuzzed). */
#define parse_iso    os_parse_iso
#define error_text   os_error_text
#define is_quota_msg os_is_quota_msg

/* ---- authentication and calls ---------------------------------------------------------------- */

static void call_send(struct os_call *c);
static void auth_start(struct sm_adapter *a);

static void
call_free(struct os_call *c)
{
	TAILQ_REMOVE(&c->a->calls, c, entry);
	http_cancel(c->req);
	if (c->ev != NULL)
		event_free(c->ev);
	free(c->method);
	free(c->path);
	/* the identity call's body holds the password */
	privsep_free_secret(c->body, c->body_len);
	free(c->body_file);
	json_decref(c->extra);
	free(c);
}

/* Cancel a call: no callback. NULL is a no-op. */
static void
call_cancel(struct os_call *c)
{
	if (c != NULL)
		call_free(c);
}

static void
call_finish(struct os_call *c, int status, const char *error, const struct http_response *res)
{
	json_t *body = NULL;

	if (res != NULL && res->body_len > 0)
		body = json_loadb(res->body, res->body_len, 0, NULL);
	c->req = NULL;
	c->cb(c, status, error, body, res);
	json_decref(body);
	call_free(c);
}

static void
deferred_error_cb(evutil_socket_t fd, short what, void *arg)
{
	struct os_call *c = arg;
	char msg[320];

	(void)fd;
	(void)what;
	if (c->svc != SVC_IDENTITY && c->a->ep[c->svc] == NULL && c->a->token != NULL)
		snprintf(msg, sizeof(msg), "the cloud's catalog has no %s endpoint",
			 svc_names[c->svc]);
	else
		snprintf(msg, sizeof(msg), "authentication failed: %s", c->a->auth_error);
	call_finish(c, 0, msg, NULL);
}

static void
call_fail_later(struct os_call *c)
{
	if (c->ev == NULL)
		c->ev = event_new(c->a->base, -1, 0, deferred_error_cb, c);
	event_active(c->ev, EV_TIMEOUT, 0);
}

static void
http_done(const struct http_response *res, void *arg)
{
	struct os_call *c = arg;
	struct sm_adapter *a = c->a;

	c->req = NULL;
	if (res->error == NULL && res->status == 401 && !c->reauthed) {
		/* the token was revoked or expired early: fetch one, once */
		c->reauthed = 1;
		a->reauths++;
		if (a->token != NULL) {
			privsep_free_secret_str(a->token);
			a->token = NULL;
		}
		c->waiting_auth = 1;
		auth_start(a);
		return;
	}
	call_finish(c, res->status, res->error, res);
}

static void
call_send(struct os_call *c)
{
	struct sm_adapter *a = c->a;
	struct http_request_params p;
	char url[4096], tok[8192], ct[128];
	const char *hdrs[6];
	int n = 0;

	c->waiting_auth = 0;
	if (a->ep[c->svc] == NULL && strncmp(c->path, "http", 4) != 0) {
		call_fail_later(c);
		return;
	}
	if (strncmp(c->path, "http", 4) == 0)
		snprintf(url, sizeof(url), "%s", c->path);
	else
		snprintf(url, sizeof(url), "%s%s", a->ep[c->svc], c->path);
	snprintf(tok, sizeof(tok), "X-Auth-Token: %s", a->token);
	hdrs[n++] = tok;
	hdrs[n++] = "Accept: application/json";
	if (c->body != NULL || c->body_file != NULL) {
		snprintf(ct, sizeof(ct), "Content-Type: %s",
			 c->ctype ? c->ctype : "application/json");
		hdrs[n++] = ct;
	}
	hdrs[n] = NULL;
	memset(&p, 0, sizeof(p));
	p.method = c->method;
	p.url = url;
	p.headers = hdrs;
	p.body = c->body;
	p.body_len = c->body_len;
	p.body_file = c->body_file;
	if (c->body_file != NULL)
		p.timeout = np_json_num(a->env->provider, "image-upload-timeout", 3600);
	a->calls_by_svc[c->svc]++;
	c->req = http_request(a->http[c->svc], &p, http_done, c);
	if (c->req == NULL)
		call_fail_later(c);
}

static void
auth_done(struct os_call *c, int status, const char *error, json_t *body,
	  const struct http_response *res)
{
	struct sm_adapter *a = c->a;
	static const char
	    *const compute[] = {"compute", NULL},
		   *const network[] = {"network", NULL}, *const image[] = {"image", NULL},
		   *const volume[] = {"volumev3", "block-storage", "volumev2", "volume", NULL},
		   *const identity[] = {"identity", NULL};
	static const char *const *const types[NSVC] = {compute, network, image, volume, identity};
	const char *tok = res ? http_response_header(res, "X-Subject-Token") : NULL;
	const json_t *token = json_object_get(body, "token");
	struct os_call *w, *next;
	int i;

	a->auth_call = NULL;
	if (error != NULL || status != 201 || tok == NULL || !json_is_object(token)) {
		error_text(status, error, body, res ? res->body : NULL, a->auth_error,
			   sizeof(a->auth_error));
		if (status == 201)
			snprintf(a->auth_error, sizeof(a->auth_error),
				 "Keystone answered without a token");
		a->auth_failed_at = np_mono_s();
		log_error("openstack %s: authentication at %s failed: %s", a->env->provider_name,
			  a->cloud.auth_url, a->auth_error);
		/* every call waiting for it fails (on this loop turn's callbacks) */
		for (w = TAILQ_FIRST(&a->calls); w != NULL; w = next) {
			next = TAILQ_NEXT(w, entry);
			if (w->waiting_auth)
				call_fail_later(w);
		}
		return;
	}
	privsep_free_secret_str(a->token);
	a->token = xstrdup(tok);
	a->token_exp = parse_iso(jstr(token, "expires_at"));
	if (a->token_exp <= 0)
		a->token_exp = (double)time(NULL) + 3600;
	free(a->project_id);
	a->project_id = xstrdup(jstr(json_object_get(token, "project"), "id"));
	for (i = 0; i < NSVC; i++) {
		char *u;
		const char *ov = jstr(a->cloud.overrides, svc_names[i]);
		if (i == SVC_VOLUME && ov == NULL)
			ov = jstr(a->cloud.overrides, "block-storage");
		u = ov != NULL ? xstrdup(ov)
			       : os_catalog_url(json_object_get(token, "catalog"), types[i],
						a->cloud.interface, a->cloud.region);
		if (u != NULL) {
			size_t n = strlen(u);
			while (n > 0 && u[n - 1] == '/')
				u[--n] = '\0';
			/* openstacksdk's version discovery, reduced to the
			 * versions this adapter speaks */
			if (i == SVC_NETWORK && (n < 5 || strcmp(u + n - 5, "/v2.0") != 0)) {
				u = realloc(u, n + 8);
				strcat(u, "/v2.0");
			} else if (i == SVC_IMAGE && (n < 3 || strcmp(u + n - 3, "/v2") != 0)) {
				u = realloc(u, n + 8);
				strcat(u, "/v2");
			}
		}
		free(a->ep[i]);
		a->ep[i] = u;
	}
	a->auths++;
	if (!a->auth_ok_once)
		log_info("openstack %s: authenticated to %s (cloud %s, region %s, compute %s)",
			 a->env->provider_name, a->cloud.auth_url, a->cloud.name,
			 a->cloud.region ? a->cloud.region : "-",
			 a->ep[SVC_COMPUTE] ? a->ep[SVC_COMPUTE] : "none");
	a->auth_ok_once = 1;
	for (w = TAILQ_FIRST(&a->calls); w != NULL; w = next) {
		next = TAILQ_NEXT(w, entry);
		if (w->waiting_auth)
			call_send(w);
	}
}

static struct os_call *call_new(struct sm_adapter *a, enum os_svc svc, const char *method,
				const char *path, json_t *body, os_call_cb cb, void *owner);

static void
auth_start(struct sm_adapter *a)
{
	json_t *body;
	struct os_call *c;
	char *url;

	if (a->auth_call != NULL)
		return;
	url = os_token_url(a->cloud.auth_url);
	body = os_auth_body(&a->cloud);
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		abort();
	c->a = a;
	c->svc = SVC_IDENTITY;
	c->method = xstrdup("POST");
	c->path = url;
	c->body = json_dumps(body, JSON_COMPACT);
	c->body_len = strlen(c->body);
	json_decref(body);
	c->cb = auth_done;
	TAILQ_INSERT_TAIL(&a->calls, c, entry);
	a->auth_call = c;
	{
		struct http_request_params p;
		const char *hdrs[] = {"Content-Type: application/json", "Accept: application/json",
				      NULL};
		memset(&p, 0, sizeof(p));
		p.method = "POST";
		p.url = url;
		p.headers = hdrs;
		p.body = c->body;
		p.body_len = c->body_len;
		a->calls_by_svc[SVC_IDENTITY]++;
		c->req = http_request(a->http[SVC_IDENTITY], &p, http_done, c);
		c->reauthed = 1; /* a 401 here is an answer, not a reason to retry */
	}
}

/*
 * Start a call (body: a JSON value taken, or NULL). cb runs once on the
 * loop unless the call is cancelled first.
 */
static struct os_call *
call_prep(struct sm_adapter *a, enum os_svc svc, const char *method, const char *path, json_t *body,
	  os_call_cb cb, void *owner)
{
	struct os_call *c = calloc(1, sizeof(*c));

	if (c == NULL)
		abort();
	c->a = a;
	c->svc = svc;
	c->method = xstrdup(method);
	c->path = xstrdup(path);
	if (body != NULL) {
		c->body = json_dumps(body, JSON_COMPACT);
		c->body_len = strlen(c->body);
		json_decref(body);
	}
	c->cb = cb;
	c->owner = owner;
	TAILQ_INSERT_TAIL(&a->calls, c, entry);
	return c;
}

/* Send a prepared call now, or once a token is in hand. */
static void
call_go(struct os_call *c)
{
	struct sm_adapter *a = c->a;

	if (a->token != NULL && a->token_exp - (double)time(NULL) < OS_TOKEN_MARGIN) {
		privsep_free_secret_str(a->token);
		a->token = NULL;
	}
	if (a->token != NULL) {
		call_send(c);
		return;
	}
	c->waiting_auth = 1;
	if (a->auth_call == NULL && a->auth_failed_at > 0 &&
	    np_mono_s() - a->auth_failed_at < OS_AUTH_RETRY) {
		call_fail_later(c); /* do not hammer Keystone */
		return;
	}
	auth_start(a);
}

/*
 * Start a call (body: a JSON value taken, or NULL). cb runs once on the
 * loop unless the call is cancelled first.
 */
static struct os_call *
call_new(struct sm_adapter *a, enum os_svc svc, const char *method, const char *path, json_t *body,
	 os_call_cb cb, void *owner)
{
	struct os_call *c = call_prep(a, svc, method, path, body, cb, owner);

	call_go(c);
	return c;
}

static void
ignore_answer(struct os_call *c, int status, const char *error, json_t *body,
	      const struct http_response *res)
{
	(void)c;
	(void)status;
	(void)error;
	(void)body;
	(void)res;
}

/* An id from the cloud or a node record (external_id) as one URL path
 * segment (urlsafe.h): "../images/x" names no other resource. "-" (no such
 * resource) when it is too long to be an id. */
#define OS_SEG_MAX 768
#define ID(s)	   os_seg((s), (char[OS_SEG_MAX]){0})
static const char *
os_seg(const char *s, char *buf)
{
	return url_segment(s != NULL ? s : "", buf, OS_SEG_MAX) != NULL ? buf : "-";
}

/* URL-encode s into out. */
static void
urlenc(const char *s, char *out, size_t n)
{
	size_t o = 0;

	for (; *s && o + 4 < n; s++) {
		unsigned char ch = (unsigned char)*s;
		if (isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~')
			out[o++] = (char)ch;
		else
			o += (size_t)snprintf(out + o, n - o, "%%%02X", ch);
	}
	out[o] = '\0';
}

/* ---- machines (declared early: lookups wake them) ------------------------------------------ */

enum osm_state {
	OS_START,
	OS_SUBMITTED,
	OS_BUILDING,
	OS_FIP_PORT,
	OS_FIP_CREATE,
	OS_FIP_WAIT,
	OS_DEL_PORTS,
	OS_DEL_FIPS,
	OS_DEL_SERVER,
	OS_DELETING,
	OS_DONE,
	OS_FAILED,
};

static const char *const osm_names[] = {"start",
					"submitted",
					"building",
					"floating ip: port",
					"floating ip: create",
					"floating ip: wait",
					"delete: ports",
					"delete: floating ips",
					"delete: server",
					"deleting",
					"done",
					"failed"};

struct osm {
	struct sm_machine m; /* first */
	TAILQ_ENTRY(osm) entry;
	struct sm_adapter *a;
	int create;
	enum osm_state st;
	struct os_call *call; /* in flight */
	int answered;	      /* the last call's answer is in */
	int status;	      /* of the last call */
	char errmsg[240];
	json_t *answer;		/* the last call's body */
	unsigned long long seq; /* a listing started after this is fresh */
	double next_poll;
	/* create */
	char *name, *az, *image_id, *image_name;
	const struct sm_label *label;
	json_t *meta;
	json_t *net_ids; /* array */
	json_t *server;	 /* last seen */
	char *fip_id, *fip_addr, *port_id;
	json_t *fip_ids; /* delete: floating IPs to delete */
	size_t fip_next;
	int del_acked; /* delete: the DELETE was accepted */
	json_t *flavor;
};

static void
wake_all(struct sm_adapter *a)
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
		wake_all(a);
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
	wake_all(a);
}

static void
flavors_fetch(struct sm_adapter *a)
{
	if (a->flavors_call == NULL && !a->stopped)
		a->flavors_call =
		    call_new(a, SVC_COMPUTE, "GET", "/flavors/detail", NULL, flavors_done, NULL);
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
	wake_all(a);
}

static void
ext_fetch(struct sm_adapter *a)
{
	if (a->ext_call == NULL && !a->stopped)
		a->ext_call = call_new(a, SVC_NETWORK, "GET", "/networks?router%3Aexternal=true",
				       NULL, ext_done, NULL);
}

static void
azs_done(struct os_call *c, int status, const char *error, json_t *body,
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
		const char *n = jstr(z, "zoneName");
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

struct lookup {
	json_t *cache;
	char *name;
	int by_id; /* second try: the name as an id */
	enum os_svc svc;
	const char *kind; /* "images" / "networks" */
};

static void lookup_start(struct sm_adapter *a, json_t *cache, enum os_svc svc, const char *name,
			 int by_id);

static void
lookup_done(struct os_call *c, int status, const char *error, json_t *body,
	    const struct http_response *res)
{
	struct sm_adapter *a = c->a;
	json_t *cache = json_object_get(c->extra, "cache") == json_true() ? a->images : a->nets;
	const char *name = jstr(c->extra, "name");
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
		wake_all(a);
		return;
	}
	if (by_id) {
		if (status == 200)
			id = jstr(body, "id") ? jstr(body, "id")
					      : jstr(json_object_get(body, "network"), "id");
	} else {
		v = json_object_get(body, kind);
		if (json_array_size(v) > 0)
			id = jstr(json_array_get(v, 0), "id");
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
	wake_all(a);
}

static void
lookup_start(struct sm_adapter *a, json_t *cache, enum os_svc svc, const char *name, int by_id)
{
	char path[1200], enc[900];
	struct os_call *c;

	urlenc(name, enc, sizeof(enc));
	if (cache == a->images)
		snprintf(path, sizeof(path), by_id ? "/images/%s" : "/images?name=%s&status=active",
			 enc);
	else
		snprintf(path, sizeof(path), by_id ? "/networks/%s" : "/networks?name=%s", enc);
	json_object_set_new(cache, name, json_pack("{s:n, s:f, s:b}", "id", "at", 0.0, "busy", 1));
	c = call_new(a, svc, "GET", path, NULL, lookup_done, NULL);
	c->extra =
	    json_pack("{s:b, s:s, s:b}", "cache", cache == a->images, "name", name, "by_id", by_id);
}

/*
 * The id of name in cache: 1 with *id set, 0 while being looked up (the
 * caller waits; a lookup is started if needed), -1 when the cloud has no
 * such thing (looked up again after OS_IMAGE_RECHECK seconds).
 */
static int
lookup(struct sm_adapter *a, json_t *cache, enum os_svc svc, const char *name, const char **id)
{
	const json_t *e = cache_get(cache, name);

	if (e == NULL) {
		lookup_start(a, cache, svc, name, 0);
		return 0;
	}
	if (json_is_true(json_object_get(e, "busy")))
		return 0;
	if ((*id = jstr(e, "id")) != NULL)
		return 1;
	if (np_mono_s() - np_json_num(e, "at", 0) > OS_IMAGE_RECHECK) {
		lookup_start(a, cache, svc, name, 0);
		return 0;
	}
	return -1;
}

/* Forget every cached lookup (after a 400 from Nova, as upstream). */
static void
caches_clear(struct sm_adapter *a)
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
	flavors_fetch(a);
}

/* ---- flavors for labels
 * -------------------------------------------------------------------------- */

/*
 * The label's flavor (upstream's _findFlavor): by flavor-name (name or id)
 * when there is no min-ram, else the smallest with ram >= min-ram whose
 * name contains flavor-name. NULL with *loaded 0 while flavors are not
 * read yet; NULL with *loaded 1 when none matches.
 */
static const json_t *
find_flavor(struct sm_adapter *a, const struct sm_label *l, int *loaded)
{
	const char *fname = np_json_str(l->raw, "flavor-name", NULL);
	double min_ram = np_json_num(l->raw, "min-ram", 0);
	const json_t *f;
	size_t i;

	*loaded = a->flavors != NULL;
	json_array_foreach(a->flavors, i, f)
	{
		const char *n = jstr(f, "name"), *id = jstr(f, "id");
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

static const json_t *
flavor_by_id(struct sm_adapter *a, const char *id)
{
	const json_t *f;
	size_t i;

	json_array_foreach(a->flavors, i, f)
	{
		const char *fid = jstr(f, "id");
		if (id != NULL && fid != NULL && strcmp(fid, id) == 0)
			return f;
	}
	return NULL;
}

static void
quota_from_flavor(const json_t *f, const struct sm_label *l, struct drv_quota *q)
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
		const char *nn = jstr(n, "name"), *id = jstr(n, "id");
		if ((nn && strcmp(nn, name) == 0) || (id && strcmp(id, name) == 0))
			return 1;
	}
	return 0;
}

static int
ext_net_cb(void *arg, const char *net)
{
	return is_ext_net(arg, net);
}

static void
server_addresses(struct sm_adapter *a, const json_t *server, const char **pub4, const char **priv4,
		 const char **pub6)
{
	os_server_addresses(server, ext_net_cb, a, pub4, priv4, pub6);
}

static struct sm_instance *
server_instance(struct sm_adapter *a, const json_t *s, const struct sm_label *l, const char *fip)
{
	struct sm_instance *in = sm_instance_new();
	const char *pub4, *priv4, *pub6, *st = jstr(s, "status");
	const json_t *meta = json_object_get(s, "metadata"), *fl = json_object_get(s, "flavor");

	server_addresses(a, s, &pub4, &priv4, &pub6);
	if (fip != NULL)
		pub4 = fip;
	sm_set_str(&in->external_id, jstr(s, "id"));
	in->ready = st != NULL && strcmp(st, "ACTIVE") == 0;
	in->deleted = st != NULL && (strcmp(st, "DELETED") == 0 || strcmp(st, "SOFT_DELETED") == 0);
	sm_set_str(&in->public_ipv4, pub4);
	sm_set_str(&in->private_ipv4, priv4);
	sm_set_str(&in->public_ipv6, pub6);
	sm_set_str(&in->interface_ip, pub4 ? pub4 : pub6 ? pub6 : priv4);
	sm_set_str(&in->cloud, a->cloud.name);
	sm_set_str(&in->region, a->cloud.region);
	sm_set_str(&in->az, jstr(s, "OS-EXT-AZ:availability_zone"));
	sm_set_str(&in->host_id, jstr(s, "hostId"));
	if (json_is_object(meta)) {
		json_decref(in->metadata);
		in->metadata = json_deep_copy(meta);
	}
	/* the flavor: embedded (microversion >= 2.47) or by id */
	if (json_object_get(fl, "vcpus") != NULL)
		quota_from_flavor(fl, l, &in->quota);
	else
		quota_from_flavor(flavor_by_id(a, jstr(fl, "id")), l, &in->quota);
	return in;
}

/* ---- the shared server listing ------------------------------------------------------------------
 */

static void list_start(struct sm_adapter *a);

static void
list_deliver_waiters(struct sm_adapter *a, const char *error)
{
	struct os_listwait *w;
	TAILQ_HEAD(, os_listwait) ws;

	TAILQ_INIT(&ws);
	TAILQ_CONCAT(&ws, &a->listwaits, entry);
	while ((w = TAILQ_FIRST(&ws)) != NULL) {
		TAILQ_REMOVE(&ws, w, entry);
		if (w->kind == 0) {
			sm_instances_cb cb = (sm_instances_cb)w->cb;
			struct sm_instance **v = NULL;
			size_t n = 0, i;
			const char *k;
			json_t *s;
			if (error == NULL) {
				v = calloc(json_object_size(a->servers) + 1, sizeof(*v));
				json_object_foreach(a->servers, k, s)
				{
					const char *st = jstr(s, "status");
					if (st != NULL && strcmp(st, "DELETED") == 0)
						continue;
					v[n++] = server_instance(a, s, NULL, NULL);
				}
			}
			cb(v, n, error, w->arg);
			for (i = 0; i < n; i++)
				sm_instance_free(v[i]);
			free(v);
		} else {
			sm_resources_cb cb = (sm_resources_cb)w->cb;
			struct sm_resource *v = NULL;
			size_t n = 0;
			const char *k;
			json_t *s, *empty = json_object();
			if (error == NULL) {
				v = calloc(json_object_size(a->servers) + 1, sizeof(*v));
				json_object_foreach(a->servers, k, s)
				{
					const char *st = jstr(s, "status");
					const json_t *md = json_object_get(s, "metadata");
					if (st != NULL && strcmp(st, "DELETED") == 0)
						continue;
					v[n++] = (struct sm_resource){
					    "instance", k, json_is_object(md) ? md : empty};
				}
			}
			cb(v, n, error, w->arg);
			free(v);
			json_decref(empty);
		}
		free(w);
	}
}

static void
list_done(struct os_call *c, int status, const char *error, json_t *body,
	  const struct http_response *res)
{
	struct sm_adapter *a = c->a;
	json_t *v = json_object_get(body, "servers"), *s, *links, *l;
	const char *next = NULL;
	size_t i;
	char msg[300];

	a->list_call = NULL;
	if (error != NULL || status != 200 || !json_is_array(v)) {
		error_text(status, error, body, res ? res->body : NULL, msg, sizeof(msg));
		log_warn("openstack %s: listing servers failed: %s", a->env->provider_name, msg);
		json_decref(a->page);
		a->page = NULL;
		list_deliver_waiters(a, msg);
		/* the machines waiting ask again (list_start spaces the tries) */
		wake_all(a);
		return;
	}
	if (a->page == NULL)
		a->page = json_object();
	json_array_foreach(v, i, s)
	{
		const char *id = jstr(s, "id");
		if (id != NULL)
			json_object_set(a->page, id, s);
	}
	links = json_object_get(body, "servers_links");
	json_array_foreach(links, i, l) if (jstr(l, "rel") && strcmp(jstr(l, "rel"), "next") == 0)
	    next = jstr(l, "href");
	/* the token goes with the request: only to the endpoint's own scheme,
	 * host and port (issue 23) */
	if (next != NULL && !url_same_origin(next, a->ep[SVC_COMPUTE])) {
		/* a partial listing would read as servers gone: a failed one */
		snprintf(msg, sizeof(msg), "a \"next\" link to another origin than %s",
			 a->ep[SVC_COMPUTE] ? a->ep[SVC_COMPUTE] : "the compute endpoint");
		log_warn("openstack %s: listing servers failed: %s", a->env->provider_name, msg);
		json_decref(a->page);
		a->page = NULL;
		list_deliver_waiters(a, msg);
		wake_all(a);
		return;
	}
	if (next != NULL && json_array_size(v) > 0 &&
	    json_integer_value(json_object_get(c->extra, "pages")) < OS_MAX_LIST_PAGES) {
		json_int_t pages = json_integer_value(json_object_get(c->extra, "pages"));
		a->list_call = call_new(a, SVC_COMPUTE, "GET", next, NULL, list_done, NULL);
		a->list_call->extra =
		    json_pack("{s:I, s:I}", "pages", pages + 1, "seq",
			      json_integer_value(json_object_get(c->extra, "seq")));
		return;
	}
	json_decref(a->servers);
	a->servers = a->page;
	a->page = NULL;
	a->list_done_seq = (unsigned long long)json_integer_value(json_object_get(c->extra, "seq"));
	a->list_done_started = a->list_started;
	a->listings++;
	list_deliver_waiters(a, NULL);
	wake_all(a);
	if (a->list_wanted)
		list_start(a);
}

static void
list_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	list_start(arg);
}

/* Ask for a listing that starts from now: when the framework's pace says
 * one is useful (sm_listing_wait: the servers' expected boots), at least
 * rate after the last one, and when none runs. */
static void
list_start(struct sm_adapter *a)
{
	double wait;

	if (a->stopped && TAILQ_EMPTY(&a->machines) && TAILQ_EMPTY(&a->listwaits))
		return;
	if (a->list_call != NULL) {
		a->list_wanted = 1; /* after this one */
		return;
	}
	wait = sm_listing_wait(a->env, a->list_started, a->rate_s);
	if (a->list_seq > 0 && wait > 0.001) {
		struct timeval tv = {(time_t)wait, (suseconds_t)((wait - floor(wait)) * 1e6)};
		event_add(a->list_timer, &tv); /* (re)armed: the pace may have moved */
		return;
	}
	a->list_wanted = 0;
	a->list_seq++;
	a->list_started = np_mono_s();
	json_decref(a->page);
	a->page = NULL;
	a->list_call = call_new(a, SVC_COMPUTE, "GET", "/servers/detail", NULL, list_done, NULL);
	a->list_call->extra = json_pack("{s:i, s:I}", "pages", 0, "seq", (json_int_t)a->list_seq);
}

/* A server as the newest listing that started after seq shows it: 1 with
 * *s (NULL: not listed), 0 when no such listing is in yet (one is asked
 * for). */
static int
listed_server(struct sm_adapter *a, unsigned long long seq, const char *id, const json_t **s)
{
	if (a->list_done_seq <= seq || a->servers == NULL) {
		list_start(a);
		return 0;
	}
	*s = json_object_get(a->servers, id);
	return 1;
}

/* ---- create and delete machines
 * ------------------------------------------------------------------ */

static void
osm_set(struct osm *m, enum osm_state st)
{
	m->st = st;
	m->m.state = osm_names[st];
}

static enum sm_status osm_fail(struct osm *m, enum sm_error e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum sm_status
osm_fail(struct osm *m, enum sm_error e, const char *fmt, ...)
{
	va_list ap;

	osm_set(m, OS_FAILED);
	m->m.error = e;
	va_start(ap, fmt);
	vsnprintf(m->m.error_msg, sizeof(m->m.error_msg), fmt, ap);
	va_end(ap);
	return SM_ERROR;
}

/* The machine's call answered: keep the answer, wake the machine. */
static void
osm_answer(struct os_call *c, int status, const char *error, json_t *body,
	   const struct http_response *res)
{
	struct osm *m = c->owner;

	m->call = NULL;
	m->answered = 1;
	m->status = error != NULL ? 0 : status;
	m->errmsg[0] = '\0';
	if (error != NULL || status >= 300)
		error_text(status, error, body, res ? res->body : NULL, m->errmsg,
			   sizeof(m->errmsg));
	json_decref(m->answer);
	m->answer = json_incref(body);
	sm_machine_wake(&m->m);
}

static void
osm_call(struct osm *m, enum os_svc svc, const char *method, const char *path, json_t *body)
{
	m->answered = 0;
	m->call = call_new(m->a, svc, method, path, body, osm_answer, m);
}

/* Wait for the call in flight: SM_AGAIN until answered. */
#define WAIT_CALL(m)                                                                               \
	do {                                                                                       \
		if (!(m)->answered) {                                                              \
			(m)->m.retry_in = 3600;                                                    \
			return SM_AGAIN;                                                           \
		}                                                                                  \
	} while (0)

/* {request.<attr>} in s, as Python's str.format over upstream's
 * NodeRequest.getSafeAttributes (id, labels, requestor, requestor_data,
 * relative_priority, event_id, created_time, tenant_name). NULL when s
 * names anything else (upstream logs the error and leaves the key out). */
static char *
format_request(const char *s, const struct np_request *r)
{
	struct evbuffer *b = evbuffer_new();
	char *out = NULL;
	size_t n;

	while (*s) {
		if (s[0] == '{' && s[1] == '{') {
			evbuffer_add(b, "{", 1);
			s += 2;
		} else if (s[0] == '}' && s[1] == '}') {
			evbuffer_add(b, "}", 1);
			s += 2;
		} else if (s[0] == '{') {
			const char *e = strchr(s, '}');
			char key[128];
			if (e == NULL || r == NULL || (size_t)(e - s) >= sizeof(key) ||
			    strncmp(s, "{request.", 9) != 0)
				goto bad;
			snprintf(key, sizeof(key), "%.*s", (int)(e - s - 9), s + 9);
			if (strcmp(key, "id") == 0)
				evbuffer_add_printf(b, "%s", r->id ? r->id : "");
			else if (strcmp(key, "requestor") == 0)
				evbuffer_add_printf(b, "%s", r->requestor ? r->requestor : "None");
			else if (strcmp(key, "event_id") == 0)
				evbuffer_add_printf(b, "%s", r->event_id ? r->event_id : "None");
			else if (strcmp(key, "tenant_name") == 0)
				evbuffer_add_printf(b, "%s",
						    r->tenant_name ? r->tenant_name : "None");
			else if (strcmp(key, "relative_priority") == 0)
				evbuffer_add_printf(b, "%lld", r->relative_priority);
			else if (strcmp(key, "created_time") == 0)
				evbuffer_add_printf(b, "%.17g", r->created_time);
			else if (strcmp(key, "labels") == 0) {
				size_t i;
				evbuffer_add(b, "[", 1);
				for (i = 0; i < r->node_types.n; i++)
					evbuffer_add_printf(b, "%s'%s'", i ? ", " : "",
							    r->node_types.v[i]);
				evbuffer_add(b, "]", 1);
			} else if (strcmp(key, "requestor_data") == 0) {
				char *j = r->requestor_data
					      ? json_dumps(r->requestor_data,
							   JSON_ENCODE_ANY | JSON_COMPACT)
					      : NULL;
				evbuffer_add_printf(b, "%s", j ? j : "None");
				free(j);
			} else
				goto bad;
			s = e + 1;
		} else {
			evbuffer_add(b, s, 1);
			s++;
		}
	}
	n = evbuffer_get_length(b);
	out = malloc(n + 1);
	evbuffer_remove(b, out, n);
	out[n] = '\0';
bad:
	evbuffer_free(b);
	return out;
}

/* The metadata of a new server: groups, instance properties, nodepool_*. */
static json_t *
server_metadata(struct sm_adapter *a, const struct sm_create_args *args, const char *image_name)
{
	const struct sm_label *l = args->label;
	json_t *meta = json_object(), *v;
	const char *k;
	char groups[1024];

	snprintf(groups, sizeof(groups), "%s,%s,%s", a->env->provider_name,
		 image_name ? image_name : "", l->name);
	json_object_set_new(meta, "groups", json_string(groups));
	json_object_foreach(json_object_get(l->raw, "instance-properties"), k, v)
	{
		if (json_is_string(v))
			json_object_set(meta, k, v);
		else {
			char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
			json_object_set_new(meta, k, json_string(t ? t : ""));
			free(t);
		}
	}
	json_object_foreach(json_object_get(l->raw, "dynamic-instance-properties"), k, v)
	{
		char *t =
		    json_is_string(v) ? format_request(json_string_value(v), args->request) : NULL;
		if (t == NULL)
			log_error("openstack %s: error formatting dynamic instance property %s",
				  a->env->provider_name, k);
		else
			json_object_set_new(meta, k, json_string(t));
		free(t);
	}
	json_object_foreach((json_t *)args->metadata, k, v)
	{
		if (json_is_string(v))
			json_object_set(meta, k, v);
		else {
			char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
			json_object_set_new(meta, k, json_string(t ? t : ""));
			free(t);
		}
	}
	return meta;
}

static char *
b64(const char *s)
{
	static const char tb[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t n = strlen(s), i, o = 0;
	char *out = malloc(4 * ((n + 2) / 3) + 1);

	for (i = 0; i < n; i += 3) {
		unsigned v = (unsigned char)s[i] << 16;
		if (i + 1 < n)
			v |= (unsigned char)s[i + 1] << 8;
		if (i + 2 < n)
			v |= (unsigned char)s[i + 2];
		out[o++] = tb[(v >> 18) & 63];
		out[o++] = tb[(v >> 12) & 63];
		out[o++] = i + 1 < n ? tb[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? tb[v & 63] : '=';
	}
	out[o] = '\0';
	return out;
}

/* The config-drive setting of the image entry: 1, 0, or -1 unset. */
static int
config_drive(const struct sm_label *l)
{
	const json_t *v = l->image ? json_object_get(l->image->raw, "config-drive") : NULL;

	return json_is_boolean(v) ? json_is_true(v) : -1;
}

static json_t *
create_body(struct osm *m, const json_t *flavor)
{
	const struct sm_label *l = m->label;
	const json_t *pr = l->pool->raw, *v;
	json_t *s = json_object(), *sg;
	const char *kn = np_json_str(l->raw, "key-name", NULL),
		   *ud = np_json_str(l->raw, "userdata", NULL);
	int cd = config_drive(l);
	size_t i;

	json_object_set_new(s, "name", json_string(m->name));
	json_object_set_new(s, "flavorRef", json_string(jstr(flavor, "id")));
	if (np_json_bool(l->raw, "boot-from-volume", 0)) {
		json_object_set_new(s, "block_device_mapping_v2",
				    json_pack("[{s:i, s:s, s:s, s:s, s:I, s:b}]", "boot_index", 0,
					      "uuid", m->image_id, "source_type", "image",
					      "destination_type", "volume", "volume_size",
					      (json_int_t)np_json_num(l->raw, "volume-size", 50),
					      "delete_on_termination", 1));
		json_object_set_new(s, "imageRef", json_string(""));
	} else {
		json_object_set_new(s, "imageRef", json_string(m->image_id));
	}
	if (kn != NULL)
		json_object_set_new(s, "key_name", json_string(kn));
	if (m->az != NULL)
		json_object_set_new(s, "availability_zone", json_string(m->az));
	if (cd >= 0)
		json_object_set_new(s, "config_drive", json_boolean(cd));
	if (ud != NULL) {
		char *e = b64(ud);
		json_object_set_new(s, "user_data", json_string(e));
		free(e);
	}
	if (json_array_size(m->net_ids) > 0) {
		json_t *nets = json_array();
		json_array_foreach(m->net_ids, i, v)
		    json_array_append_new(nets, json_pack("{s:O}", "uuid", v));
		json_object_set_new(s, "networks", nets);
	}
	sg = json_object_get(pr, "security-groups");
	if (json_array_size(sg) > 0) {
		json_t *g = json_array();
		json_array_foreach(sg, i, v) if (json_is_string(v))
		    json_array_append_new(g, json_pack("{s:O}", "name", v));
		json_object_set_new(s, "security_groups", g);
	}
	json_object_set(s, "metadata", m->meta);
	return json_pack("{s:o}", "server", s);
}

/* The networks of the label (else the pool): 1 all resolved into
 * m->net_ids, 0 waiting, -1 one does not exist (message in m->errmsg). */
static int
resolve_networks(struct osm *m)
{
	const json_t *nets = json_object_get(m->label->raw, "networks"), *v;
	size_t i;

	if (nets == NULL)
		nets = json_object_get(m->label->pool->raw, "networks");
	json_array_clear(m->net_ids);
	json_array_foreach(nets, i, v)
	{
		const char *id = NULL;
		int r;
		if (!json_is_string(v))
			continue;
		r = lookup(m->a, m->a->nets, SVC_NETWORK, json_string_value(v), &id);
		if (r == 0)
			return 0;
		if (r < 0) {
			snprintf(m->errmsg, sizeof(m->errmsg),
				 "Unable to find network %s in provider %s", json_string_value(v),
				 m->a->env->provider_name);
			return -1;
		}
		json_array_append_new(m->net_ids, json_string(id));
	}
	return 1;
}

static int
needs_fip(struct osm *m, const json_t *server)
{
	const char *pub4, *priv4, *pub6;

	if (!np_json_bool(m->label->pool->raw, "auto-floating-ip", 1))
		return 0;
	if (json_array_size(m->a->ext_nets) == 0)
		return 0;
	server_addresses(m->a, server, &pub4, &priv4, &pub6);
	return pub4 == NULL && priv4 != NULL;
}

static enum sm_status
create_advance(struct sm_machine *mm, struct sm_instance **out)
{
	struct osm *m = (struct osm *)mm;
	struct sm_adapter *a = m->a;
	const json_t *s, *flavor;
	const char *id, *st;
	int loaded, r;
	char path[600];

	switch (m->st) {
	case OS_START:
		if (a->stopped)
			return osm_fail(m, SM_E_FAILED, "the provider is stopping");
		flavor = find_flavor(a, m->label, &loaded);
		if (!loaded) {
			if (a->flavors_call == NULL && a->flavors_failed_at > 0 &&
			    np_mono_s() - a->flavors_failed_at < 1.0)
				return osm_fail(m, SM_E_FAILED, "cannot list the cloud's flavors");
			flavors_fetch(a);
			mm->retry_in = 3600;
			return SM_AGAIN;
		}
		if (flavor == NULL)
			return osm_fail(m, SM_E_FAILED, "Unable to find flavor for label %s",
					m->label->name);
		if (a->ext_nets == NULL &&
		    np_json_bool(m->label->pool->raw, "auto-floating-ip", 1)) {
			if (a->ext_call == NULL &&
			    (a->ext_failed_at == 0 || np_mono_s() - a->ext_failed_at > 1.0))
				ext_fetch(a);
			if (a->ext_call != NULL) {
				mm->retry_in = 3600;
				return SM_AGAIN;
			}
		}
		if (m->image_id == NULL) {
			const struct sm_image *im = m->label->image;
			const char *iid = im ? np_json_str(im->raw, "image-id", NULL) : NULL;
			if (iid != NULL) {
				m->image_id = xstrdup(iid);
			} else {
				const char *nm = im ? np_json_str(im->raw, "image-name", im->name)
						    : m->label->cloud_image;
				r = lookup(a, a->images, SVC_IMAGE, nm ? nm : "", &id);
				if (r == 0) {
					mm->retry_in = 3600;
					return SM_AGAIN;
				}
				if (r < 0)
					return osm_fail(m, SM_E_FAILED,
							"Unable to find image %s in provider %s",
							nm, a->env->provider_name);
				m->image_id = xstrdup(id);
			}
		}
		r = resolve_networks(m);
		if (r == 0) {
			mm->retry_in = 3600;
			return SM_AGAIN;
		}
		if (r < 0)
			return osm_fail(m, SM_E_FAILED, "%s", m->errmsg);
		json_decref(m->flavor);
		m->flavor = json_deep_copy(flavor);
		a->creates++;
		osm_set(m, OS_SUBMITTED);
		osm_call(m, SVC_COMPUTE, "POST", "/servers", create_body(m, flavor));
		mm->retry_in = 3600;
		return SM_AGAIN;
	case OS_SUBMITTED:
		WAIT_CALL(m);
		id = jstr(json_object_get(m->answer, "server"), "id");
		if (m->status != 202 && m->status != 200) {
			a->create_errors++;
			if (m->status == 400)
				caches_clear(a); /* stale image, flavor or network (upstream) */
			if (is_quota_msg(m->errmsg)) {
				a->quota_errors++;
				return osm_fail(m, SM_E_QUOTA, "%s", m->errmsg);
			}
			return osm_fail(m, SM_E_FAILED, "server create: %s", m->errmsg);
		}
		if (id == NULL)
			return osm_fail(m, SM_E_FAILED, "server create answered without an id");
		sm_set_str(&mm->external_id, id);
		m->seq = a->list_seq;
		osm_set(m, OS_BUILDING);
		/* fall through */
	case OS_BUILDING:
		if (!listed_server(a, m->seq, mm->external_id, &s)) {
			mm->retry_in = 5; /* woken by the listing; this is a safety net */
			return SM_AGAIN;
		}
		m->seq = a->list_done_seq;
		st = jstr(s, "status");
		if (s == NULL || st == NULL || strcmp(st, "BUILD") == 0) {
			list_start(a); /* not listed yet, or still building */
			mm->retry_in = 30;
			return SM_AGAIN;
		}
		json_decref(m->server);
		m->server = json_deep_copy(s);
		if (strcmp(st, "ERROR") == 0) {
			const char *fault = jstr(json_object_get(s, "fault"), "message");
			a->create_errors++;
			if (fault != NULL && is_quota_msg(fault)) {
				a->quota_errors++;
				return osm_fail(m, SM_E_QUOTA, "%s", fault);
			}
			return osm_fail(m, SM_E_FAILED,
					"Error in creating the server. Compute service reports "
					"fault: %s",
					fault ? fault : "(none)");
		}
		if (strcmp(st, "ACTIVE") != 0) {
			list_start(a);
			mm->retry_in = 30;
			return SM_AGAIN;
		}
		mm->seen_at = a->list_done_started; /* the boot estimate's sample */
		if (!needs_fip(m, s)) {
			*out = server_instance(a, s, m->label, NULL);
			osm_set(m, OS_DONE);
			return SM_DONE;
		}
		osm_set(m, OS_FIP_PORT);
		snprintf(path, sizeof(path), "/ports?device_id=%s", mm->external_id);
		osm_call(m, SVC_NETWORK, "GET", path, NULL);
		mm->retry_in = 3600;
		return SM_AGAIN;
	case OS_FIP_PORT: {
		const json_t *ports, *net;
		WAIT_CALL(m);
		ports = json_object_get(m->answer, "ports");
		if (m->status != 200 || json_array_size(ports) == 0)
			return osm_fail(m, SM_E_FAILED, "no port for a floating IP: %s",
					m->errmsg[0] ? m->errmsg : "the server has no port");
		free(m->port_id);
		m->port_id = xstrdup(jstr(json_array_get(ports, 0), "id"));
		net = json_array_get(a->ext_nets, 0);
		osm_set(m, OS_FIP_CREATE);
		osm_call(m, SVC_NETWORK, "POST", "/floatingips",
			 json_pack("{s:{s:s, s:s}}", "floatingip", "floating_network_id",
				   jstr(net, "id") ? jstr(net, "id") : "", "port_id",
				   m->port_id ? m->port_id : ""));
		mm->retry_in = 3600;
		return SM_AGAIN;
	}
	case OS_FIP_CREATE:
	case OS_FIP_WAIT: {
		const json_t *f;
		WAIT_CALL(m);
		f = json_object_get(m->answer, "floatingip");
		if (m->status != 201 && m->status != 200) {
			if (is_quota_msg(m->errmsg))
				return osm_fail(m, SM_E_QUOTA, "floating IP: %s", m->errmsg);
			return osm_fail(m, SM_E_FAILED, "floating IP: %s", m->errmsg);
		}
		if (m->st == OS_FIP_CREATE) {
			a->fips_created++;
			free(m->fip_id);
			m->fip_id = xstrdup(jstr(f, "id"));
			osm_set(m, OS_FIP_WAIT);
		}
		st = jstr(f, "status");
		if (st != NULL && strcmp(st, "ACTIVE") == 0 && jstr(f, "floating_ip_address")) {
			*out =
			    server_instance(a, m->server, m->label, jstr(f, "floating_ip_address"));
			osm_set(m, OS_DONE);
			return SM_DONE;
		}
		if (m->next_poll > np_mono_s()) {
			mm->retry_in = m->next_poll - np_mono_s();
			return SM_AGAIN;
		}
		m->next_poll = np_mono_s() + OS_FIP_POLL;
		snprintf(path, sizeof(path), "/floatingips/%s", ID(m->fip_id ? m->fip_id : ""));
		osm_call(m, SVC_NETWORK, "GET", path, NULL);
		m->answered = 0;
		mm->retry_in = 3600;
		return SM_AGAIN;
	}
	default:
		return osm_fail(m, SM_E_FAILED, "advanced after finishing");
	}
}

static enum sm_status
delete_advance(struct sm_machine *mm, struct sm_instance **out)
{
	struct osm *m = (struct osm *)mm;
	struct sm_adapter *a = m->a;
	const json_t *s, *v;
	char path[600];
	size_t i;

	(void)out;
	switch (m->st) {
	case OS_START:
		/* the server's floating IPs first (upstream), found through its
		 * ports; only in a cloud that has floating IPs */
		if (a->ext_nets == NULL && a->ext_call == NULL &&
		    (a->ext_failed_at == 0 || np_mono_s() - a->ext_failed_at > 1.0))
			ext_fetch(a);
		if (a->ext_nets == NULL && a->ext_call != NULL) {
			mm->retry_in = 3600;
			return SM_AGAIN;
		}
		if (json_array_size(a->ext_nets) > 0) {
			osm_set(m, OS_DEL_PORTS);
			snprintf(path, sizeof(path), "/ports?device_id=%s", mm->external_id);
			osm_call(m, SVC_NETWORK, "GET", path, NULL);
			mm->retry_in = 3600;
			return SM_AGAIN;
		}
		osm_set(m, OS_DEL_SERVER);
		goto del_server;
	case OS_DEL_PORTS:
		WAIT_CALL(m);
		json_decref(m->fip_ids);
		m->fip_ids = json_array();
		m->fip_next = 0;
		if (m->status == 200) {
			/* remember the ports; their floating IPs are asked next */
			json_array_foreach(json_object_get(m->answer, "ports"), i, v)
			    json_array_append_new(m->fip_ids,
						  json_pack("{s:s?}", "port", jstr(v, "id")));
		}
		osm_set(m, OS_DEL_FIPS);
		m->answered = 1;
		json_decref(m->answer);
		m->answer = NULL;
		/* fall through */
	case OS_DEL_FIPS:
		WAIT_CALL(m);
		if (m->answer != NULL) {
			const json_t *fips = json_object_get(m->answer, "floatingips");
			json_array_foreach(fips, i, v) if (jstr(v, "id")) json_array_append_new(
			    m->fip_ids, json_pack("{s:s}", "fip", jstr(v, "id")));
			json_decref(m->answer);
			m->answer = NULL;
		}
		while (m->fip_next < json_array_size(m->fip_ids)) {
			v = json_array_get(m->fip_ids, m->fip_next++);
			if (jstr(v, "port") != NULL) {
				snprintf(path, sizeof(path), "/floatingips?port_id=%s",
					 jstr(v, "port"));
				osm_call(m, SVC_NETWORK, "GET", path, NULL);
				mm->retry_in = 3600;
				return SM_AGAIN;
			}
			if (jstr(v, "fip") != NULL) {
				snprintf(path, sizeof(path), "/floatingips/%s", ID(jstr(v, "fip")));
				a->fips_deleted++;
				osm_call(m, SVC_NETWORK, "DELETE", path, NULL);
				mm->retry_in = 3600;
				return SM_AGAIN;
			}
		}
		osm_set(m, OS_DEL_SERVER);
		/* fall through */
	case OS_DEL_SERVER:
	del_server:
		a->deletes++;
		snprintf(path, sizeof(path), "/servers/%s", ID(mm->external_id));
		osm_set(m, OS_DELETING);
		osm_call(m, SVC_COMPUTE, "DELETE", path, NULL);
		mm->retry_in = 3600;
		return SM_AGAIN;
	case OS_DELETING:
		WAIT_CALL(m);
		if (!m->del_acked) {
			/* the DELETE's answer */
			if (m->status == 404)
				return osm_fail(m, SM_E_NOTFOUND, "no server %s", mm->external_id);
			if (m->status != 204 && m->status != 202 && m->status != 200)
				return osm_fail(m, SM_E_FAILED, "server delete: %s", m->errmsg);
			m->del_acked = 1;
			m->seq = a->list_seq;
		}
		if (!listed_server(a, m->seq, mm->external_id, &s)) {
			mm->retry_in = 5; /* woken by the listing; this is a safety net */
			return SM_AGAIN;
		}
		m->seq = a->list_done_seq;
		if (s == NULL || (jstr(s, "status") && strcmp(jstr(s, "status"), "DELETED") == 0)) {
			osm_set(m, OS_DONE);
			return SM_DONE;
		}
		list_start(a);
		mm->retry_in = 30;
		return SM_AGAIN;
	default:
		return osm_fail(m, SM_E_FAILED, "advanced after finishing");
	}
}

static void
osm_free(struct sm_machine *mm)
{
	struct osm *m = (struct osm *)mm;

	call_cancel(m->call);
	TAILQ_REMOVE(&m->a->machines, m, entry);
	free(m->m.external_id);
	free(m->name);
	free(m->az);
	free(m->image_id);
	free(m->image_name);
	free(m->fip_id);
	free(m->fip_addr);
	free(m->port_id);
	json_decref(m->meta);
	json_decref(m->net_ids);
	json_decref(m->server);
	json_decref(m->fip_ids);
	json_decref(m->answer);
	json_decref(m->flavor);
	free(m);
}

static const struct sm_machine_ops create_ops = {create_advance, osm_free};
static const struct sm_machine_ops delete_ops = {delete_advance, osm_free};

static struct osm *
osm_new(struct sm_adapter *a, const struct sm_machine_ops *ops)
{
	struct osm *m = calloc(1, sizeof(*m));

	if (m == NULL)
		abort();
	m->m.ops = ops;
	m->a = a;
	osm_set(m, OS_START);
	m->net_ids = json_array();
	TAILQ_INSERT_TAIL(&a->machines, m, entry);
	return m;
}

static struct sm_machine *
os_create_machine(struct sm_adapter *a, const struct sm_create_args *args)
{
	struct osm *m = osm_new(a, &create_ops);
	const struct sm_label *l = args->label;
	const char *image_name;

	m->create = 1;
	m->name = xstrdup(args->hostname);
	m->label = l;
	m->az = xstrdup(args->az);
	if (args->image_external_id != NULL)
		m->image_id = xstrdup(args->image_external_id); /* a diskimage upload */
	image_name = l->image != NULL ? l->image->name
		     : l->diskimage   ? l->diskimage
				      : l->cloud_image;
	m->image_name = xstrdup(image_name);
	m->meta = server_metadata(a, args, image_name);
	return &m->m;
}

/* The resume_machine slot: a server an earlier launcher created for the
 * node, followed from its listing as the create machine's building state
 * (then its floating IP, as for a new server). */
static struct sm_machine *
os_resume_machine(struct sm_adapter *a, const struct sm_create_args *args, const char *external_id)
{
	struct osm *m = (struct osm *)os_create_machine(a, args);

	m->m.external_id = np_strdupz(external_id);
	m->seq = a->list_seq;
	osm_set(m, OS_BUILDING);
	return &m->m;
}

static struct sm_machine *
os_delete_machine(struct sm_adapter *a, const char *external_id)
{
	struct osm *m = osm_new(a, &delete_ops);

	m->m.external_id = xstrdup(external_id);
	return &m->m;
}

/* ---- listings, resources, cleanup
 * ------------------------------------------------------------------ */

static void
listwait_add(struct sm_adapter *a, int kind, void *cb, void *arg)
{
	struct os_listwait *w = calloc(1, sizeof(*w));

	if (w == NULL)
		abort();
	w->kind = kind;
	w->cb = cb;
	w->arg = arg;
	TAILQ_INSERT_TAIL(&a->listwaits, w, entry);
	list_start(a);
}

static void
os_list_instances(struct sm_adapter *a, sm_instances_cb cb, void *arg)
{
	if (a->flavors == NULL)
		flavors_fetch(a); /* for the instances' quota */
	listwait_add(a, 0, (void *)cb, arg);
}

static int
compute_port(const json_t *p)
{
	const char *o = jstr(p, "device_owner");

	return o == NULL || o[0] == '\0' || strncmp(o, "compute:", 8) == 0;
}

static void
port_deleted(struct os_call *c, int status, const char *error, json_t *body,
	     const struct http_response *res)
{
	(void)body;
	(void)res;
	if (error == NULL && (status == 204 || status == 404)) {
		c->a->leaked_ports++;
		log_info("openstack %s: removed DOWN port %s", c->a->env->provider_name,
			 jstr(c->extra, "id"));
	}
}

/* upstream's _cleanupLeakedPorts: compute ports DOWN at two looks at least
 * port-cleanup-interval apart are deleted. */
static void
ports_done(struct os_call *c, int status, const char *error, json_t *body,
	   const struct http_response *res)
{
	struct sm_adapter *a = c->a;
	json_t *cur = json_array(), *p, *id;
	size_t i, j;

	(void)res;
	a->ports_call = NULL;
	if (error != NULL || status != 200) {
		json_decref(cur);
		return;
	}
	json_array_foreach(json_object_get(body, "ports"), i,
			   p) if (compute_port(p) && jstr(p, "id"))
	    json_array_append_new(cur, json_string(jstr(p, "id")));
	if (a->down_ports != NULL) {
		json_array_foreach(cur, i, id)
		    json_array_foreach(a->down_ports, j, p) if (json_equal(p, id))
		{
			char path[300];
			struct os_call *d;
			snprintf(path, sizeof(path), "/ports/%s", ID(json_string_value(id)));
			d = call_new(a, SVC_NETWORK, "DELETE", path, NULL, port_deleted, NULL);
			d->extra = json_pack("{s:O}", "id", id);
			break;
		}
	}
	json_decref(a->down_ports);
	a->down_ports = cur;
	a->down_ports_at = np_mono_s();
}

static void
fip_deleted(struct os_call *c, int status, const char *error, json_t *body,
	    const struct http_response *res)
{
	(void)body;
	(void)res;
	if (error == NULL && (status == 204 || status == 404))
		c->a->leaked_fips++;
}

/* upstream's delete_unattached_floating_ips (clean-floating-ips). */
static void
fips_done(struct os_call *c, int status, const char *error, json_t *body,
	  const struct http_response *res)
{
	struct sm_adapter *a = c->a;
	json_t *f;
	size_t i;

	(void)res;
	a->fips_call = NULL;
	if (error != NULL || status != 200)
		return;
	json_array_foreach(json_object_get(body, "floatingips"), i, f)
	{
		char path[300];
		if (!json_is_null(json_object_get(f, "port_id")) || jstr(f, "id") == NULL)
			continue;
		log_info("openstack %s: deleting unattached floating IP %s", a->env->provider_name,
			 jstr(f, "floating_ip_address"));
		snprintf(path, sizeof(path), "/floatingips/%s", ID(jstr(f, "id")));
		call_new(a, SVC_NETWORK, "DELETE", path, NULL, fip_deleted, NULL);
	}
}

static void
os_list_resources(struct sm_adapter *a, sm_resources_cb cb, void *arg)
{
	listwait_add(a, 1, (void *)cb, arg);
	if (a->stopped)
		return;
	if (a->port_cleanup_interval > 0 && a->ports_call == NULL &&
	    (a->down_ports == NULL || np_mono_s() - a->down_ports_at >= a->port_cleanup_interval))
		a->ports_call =
		    call_new(a, SVC_NETWORK, "GET", "/ports?status=DOWN", NULL, ports_done, NULL);
	if (a->clean_fips && a->fips_call == NULL)
		a->fips_call =
		    call_new(a, SVC_NETWORK, "GET", "/floatingips", NULL, fips_done, NULL);
}

static void
resource_deleted(struct os_call *c, int status, const char *error, json_t *body,
		 const struct http_response *res)
{
	sm_done_cb cb = (sm_done_cb)c->ucb;
	char msg[300];

	if (error == NULL && (status < 300 || status == 404)) {
		cb(1, NULL, c->uarg);
		return;
	}
	error_text(status, error, body, res ? res->body : NULL, msg, sizeof(msg));
	cb(0, msg, c->uarg);
}

static void
os_delete_resource(struct sm_adapter *a, const struct sm_resource *r, sm_done_cb cb, void *arg)
{
	char path[600];
	struct os_call *c;

	log_info("openstack %s: deleting leaked %s %s", a->env->provider_name, r->type, r->id);
	snprintf(path, sizeof(path), "/servers/%s", ID(r->id));
	c = call_new(a, SVC_COMPUTE, "DELETE", path, NULL, resource_deleted, NULL);
	c->ucb = (void *)cb;
	c->uarg = arg;
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
		    call_new(a, SVC_VOLUME, "GET", "/limits", NULL, volume_limits_done, NULL);
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

static void
os_quota_limits(struct sm_adapter *a, sm_quota_cb cb, void *arg)
{
	struct os_call *c =
	    call_new(a, SVC_COMPUTE, "GET", "/limits", NULL, compute_limits_done, NULL);

	c->ucb = (void *)cb;
	c->uarg = arg;
}

static int
os_label_quota(struct sm_adapter *a, const struct sm_label *label, struct drv_quota *out, char *err,
	       size_t errlen)
{
	int loaded;
	const json_t *f = find_flavor(a, label, &loaded);

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
		flavors_fetch(a);
	quota_from_flavor(f, label, out);
	return 0;
}

static int
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
	return lookup(a, a->images, SVC_IMAGE, nm, &id) >= 0;
}

static void
os_azs(struct sm_adapter *a, struct np_strv *out)
{
	size_t i;

	for (i = 0; i < a->azs.n; i++)
		np_strv_push(out, a->azs.v[i]);
}

/* ---- console log
 * ------------------------------------------------------------------------------------ */

static void
console_done(struct os_call *c, int status, const char *error, json_t *body,
	     const struct http_response *res)
{
	sm_console_cb cb = (sm_console_cb)c->ucb;
	char msg[300];

	if (error == NULL && status == 200) {
		cb(jstr(body, "output") ? jstr(body, "output") : "", NULL, c->uarg);
		return;
	}
	error_text(status, error, body, res ? res->body : NULL, msg, sizeof(msg));
	cb(NULL, msg, c->uarg);
}

static void
os_console_log(struct sm_adapter *a, const struct sm_label *label, const char *external_id,
	       sm_console_cb cb, void *arg)
{
	char path[600];
	struct os_call *c;

	(void)label;
	snprintf(path, sizeof(path), "/servers/%s/action", ID(external_id));
	c = call_new(a, SVC_COMPUTE, "POST", path,
		     json_pack("{s:{s:n}}", "os-getConsoleOutput", "length"), console_done, NULL);
	c->ucb = (void *)cb;
	c->uarg = arg;
}

/* ---- images (the builder's uploads)
 * -------------------------------------------------------------------- */

/*
 * list_images: GET /v2/images, every page (its "next"); an image's tags
 * are its properties, which Glance v2 shows as top-level keys (the
 * builder's upload sets nodepool_build_id & co. as properties).
 */
static void
images_listed(struct os_call *c, int status, const char *error, json_t *body,
	      const struct http_response *res)
{
	drv_image_list_cb cb = (drv_image_list_cb)c->ucb;
	json_t *acc = json_object_get(c->extra, "images");
	const char *next = jstr(body, "next");
	const json_t *im;
	size_t i, n;
	char msg[300];

	if (error != NULL || status >= 300) {
		error_text(status, error, body, res ? res->body : NULL, msg, sizeof(msg));
		cb(NULL, 0, msg, c->uarg);
		return;
	}
	json_array_extend(acc, json_object_get(body, "images"));
	if (next != NULL && strchr(next, '?') != NULL) {
		char path[1024];
		struct os_call *nc;
		snprintf(path, sizeof(path), "/images%s", strchr(next, '?'));
		nc = call_new(c->a, SVC_IMAGE, "GET", path, NULL, images_listed, NULL);
		nc->ucb = c->ucb;
		nc->uarg = c->uarg;
		nc->extra = json_incref(c->extra);
		return;
	}
	n = json_array_size(acc);
	{
		struct drv_cloud_image *v = calloc(n + 1, sizeof(*v));
		size_t k = 0;
		if (v == NULL)
			abort();
		json_array_foreach(acc, i, im)
		{
			if (jstr(im, "id") == NULL)
				continue;
			v[k++] = (struct drv_cloud_image){
			    jstr(im, "id"), jstr(im, "name") ? jstr(im, "name") : "", im};
		}
		cb(v, k, NULL, c->uarg);
		free(v);
	}
}

static void
os_list_images(struct sm_adapter *a, drv_image_list_cb cb, void *arg)
{
	struct os_call *c =
	    call_new(a, SVC_IMAGE, "GET", "/images?limit=1000", NULL, images_listed, NULL);

	c->ucb = (void *)cb;
	c->uarg = arg;
	c->extra = json_pack("{s:[]}", "images");
}

/* One upload: create the record, PUT the file, wait until active. */
struct upload {
	TAILQ_ENTRY(upload) entry;
	struct sm_adapter *a;
	sm_upload_cb cb;
	void *arg;
	char *id, *file;
	struct event *poll;
	double deadline;
};

static void upload_poll_cb(evutil_socket_t fd, short what, void *arg);

static void
upload_free(struct upload *u)
{
	TAILQ_REMOVE(&u->a->uploads_inflight, u, entry);
	if (u->poll != NULL)
		event_free(u->poll);
	free(u->id);
	free(u->file);
	free(u);
}

static void
upload_end(struct upload *u, const char *id, const char *error)
{
	if (error != NULL && u->id != NULL) {
		/* do not leave a half-made image behind */
		char path[300];
		snprintf(path, sizeof(path), "/images/%s", ID(u->id));
		call_new(u->a, SVC_IMAGE, "DELETE", path, NULL, ignore_answer, NULL);
	}
	u->cb(id, error, u->arg);
	upload_free(u);
}

static void
upload_status_done(struct os_call *c, int status, const char *error, json_t *body,
		   const struct http_response *res)
{
	struct upload *u = c->owner;
	const char *st = jstr(body, "status");
	char msg[300];
	struct timeval tv = {(time_t)OS_UPLOAD_POLL, 0};

	if (error != NULL || status != 200) {
		error_text(status, error, body, res ? res->body : NULL, msg, sizeof(msg));
		upload_end(u, NULL, msg);
		return;
	}
	if (st != NULL && strcmp(st, "active") == 0) {
		char *id = xstrdup(u->id);
		c->a->uploads++;
		upload_end(u, id, NULL);
		free(id);
		return;
	}
	if (st != NULL && (strcmp(st, "killed") == 0 || strcmp(st, "deleted") == 0)) {
		snprintf(msg, sizeof(msg), "image %s ended %s", u->id, st);
		upload_end(u, NULL, msg);
		return;
	}
	if (np_mono_s() > u->deadline) {
		upload_end(u, NULL, "image-upload-timeout passed");
		return;
	}
	event_add(u->poll, &tv);
}

static void
upload_poll_cb(evutil_socket_t fd, short what, void *arg)
{
	struct upload *u = arg;
	char path[300];

	(void)fd;
	(void)what;
	snprintf(path, sizeof(path), "/images/%s", ID(u->id));
	call_new(u->a, SVC_IMAGE, "GET", path, NULL, upload_status_done, u);
}

static void
upload_put_done(struct os_call *c, int status, const char *error, json_t *body,
		const struct http_response *res)
{
	struct upload *u = c->owner;
	char msg[300];

	if (error != NULL || (status != 204 && status != 200 && status != 201)) {
		error_text(status, error, body, res ? res->body : NULL, msg, sizeof(msg));
		upload_end(u, NULL, msg);
		return;
	}
	upload_poll_cb(-1, 0, u);
}

static void
upload_create_done(struct os_call *c, int status, const char *error, json_t *body,
		   const struct http_response *res)
{
	struct upload *u = c->owner;
	struct os_call *put;
	char msg[300], path[300];

	if (error != NULL || status != 201 || jstr(body, "id") == NULL) {
		error_text(status, error, body, res ? res->body : NULL, msg, sizeof(msg));
		upload_end(u, NULL, msg);
		return;
	}
	u->id = xstrdup(jstr(body, "id"));
	snprintf(path, sizeof(path), "/images/%s/file", ID(u->id));
	put = call_prep(u->a, SVC_IMAGE, "PUT", path, NULL, upload_put_done, u);
	put->body_file = xstrdup(u->file);
	put->ctype = "application/octet-stream";
	call_go(put);
}

/* upstream's uploadImage: openstacksdk create_image(name, filename,
 * disk_format, container_format bare, visibility private, md5, sha256,
 * **metadata) with Glance v2's create + upload + wait. */
static void
os_upload_image(struct sm_adapter *a, const struct sm_upload_args *ua, sm_upload_cb cb, void *arg)
{
	struct upload *u = calloc(1, sizeof(*u));
	json_t *body = json_object(), *v;
	const char *k;
	struct os_call *c;

	if (u == NULL)
		abort();
	u->a = a;
	u->cb = cb;
	u->arg = arg;
	u->file = xstrdup(ua->filename);
	u->poll = event_new(a->base, -1, 0, upload_poll_cb, u);
	TAILQ_INSERT_TAIL(&a->uploads_inflight, u, entry);
	u->deadline = np_mono_s() + np_json_num(a->env->provider, "image-upload-timeout", 3600);
	/* properties: the provider diskimage's meta, then the tags; Glance
	 * takes extra properties as strings */
	if (ua->image != NULL)
		json_object_foreach(json_object_get(ua->image->raw, "meta"), k, v)
		{
			if (json_is_string(v))
				json_object_set(body, k, v);
			else {
				char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
				json_object_set_new(body, k, json_string(t ? t : ""));
				free(t);
			}
		}
	json_object_foreach((json_t *)ua->metadata, k, v)
	{
		if (json_is_string(v))
			json_object_set(body, k, v);
		else {
			char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
			json_object_set_new(body, k, json_string(t ? t : ""));
			free(t);
		}
	}
	if (ua->md5 != NULL)
		json_object_set_new(body, "owner_specified.openstack.md5", json_string(ua->md5));
	if (ua->sha256 != NULL)
		json_object_set_new(body, "owner_specified.openstack.sha256",
				    json_string(ua->sha256));
	json_object_set_new(body, "name", json_string(ua->image_name));
	json_object_set_new(body, "disk_format",
			    json_string(ua->format ? ua->format : a->cloud.image_format));
	json_object_set_new(body, "container_format", json_string("bare"));
	json_object_set_new(body, "visibility", json_string("private"));
	c = call_new(a, SVC_IMAGE, "POST", "/images", body, upload_create_done, u);
	(void)c;
}

static void
os_delete_image(struct sm_adapter *a, const char *external_id, sm_done_cb cb, void *arg)
{
	char path[300];
	struct os_call *c;

	snprintf(path, sizeof(path), "/images/%s", ID(external_id));
	c = call_new(a, SVC_IMAGE, "DELETE", path, NULL, resource_deleted, NULL);
	c->ucb = (void *)cb;
	c->uarg = arg;
}

/* ---- the adapter
 * ---------------------------------------------------------------------------------- */

static void
startup_fetch(struct sm_adapter *a)
{
	const struct sm_config *cfg = a->env->cfg;
	const char *id;
	size_t i;

	flavors_fetch(a);
	for (i = 0; cfg != NULL && i < cfg->ncloud_images; i++) {
		const struct sm_image *im = &cfg->cloud_images[i];
		if (np_json_str(im->raw, "image-id", NULL) == NULL)
			(void)lookup(a, a->images, SVC_IMAGE,
				     np_json_str(im->raw, "image-name", im->name), &id);
	}
	ext_fetch(a);
	if (a->azs_call == NULL && !a->azs_read)
		a->azs_call =
		    call_new(a, SVC_COMPUTE, "GET", "/os-availability-zone", NULL, azs_done, NULL);
}

static struct sm_adapter *
os_adapter_new(const struct sm_env *env, char *err, size_t errlen)
{
	struct sm_adapter *a = calloc(1, sizeof(*a));
	const json_t *p = env->provider, *pool, *lab;
	struct http_client_options ho;
	const char *cloud = np_json_str(p, "cloud", NULL);
	size_t i, j;
	int s;

	if (a == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	/* first: without libcurl nothing below matters */
	if (http_load("driver openstack", err, errlen) != 0) {
		free(a);
		return NULL;
	}
	a->env = env;
	a->base = env->base;
	TAILQ_INIT(&a->calls);
	TAILQ_INIT(&a->machines);
	TAILQ_INIT(&a->listwaits);
	TAILQ_INIT(&a->uploads_inflight);
	if (cloud == NULL) {
		snprintf(err, errlen, "provider %s: no cloud", env->provider_name);
		free(a);
		return NULL;
	}
	if (os_cloud_load(cloud, np_json_str(p, "region-name", NULL), &a->cloud, err, errlen) !=
	    0) {
		free(a);
		return NULL;
	}
	/* rate: seconds between calls (upstream), per API; the framework
	 * coerced it as upstream's v.Coerce(float) */
	a->rate_s = env->cfg != NULL ? env->cfg->rate : np_json_num(p, "rate", 1.0);
	a->clean_fips = np_json_bool(p, "clean-floating-ips", 0);
	a->port_cleanup_interval = np_json_num(p, "port-cleanup-interval", 600);
	json_array_foreach(json_object_get(p, "pools"), i, pool)
	    json_array_foreach(json_object_get(pool, "labels"), j,
			       lab) if (np_json_bool(lab, "boot-from-volume", 0)) a->any_bfv = 1;
	memset(&ho, 0, sizeof(ho));
	ho.rate = a->rate_s > 0 ? 1.0 / a->rate_s : 0;
	ho.timeout = a->cloud.api_timeout;
	ho.ca_file = a->cloud.cacert;
	ho.insecure = !a->cloud.verify;
	ho.user_agent = "nodepoold (openstack)";
	for (s = 0; s < NSVC; s++) {
		struct http_client_options o = ho;
		if (s == SVC_IDENTITY)
			o.rate = 0; /* tokens are not rate limited by upstream */
		a->http[s] = http_client_new(a->base, &o, err, errlen);
		if (a->http[s] == NULL) {
			while (--s >= 0)
				http_client_free(a->http[s]);
			os_cloud_clear(&a->cloud);
			free(a);
			return NULL;
		}
	}
	a->images = json_object();
	a->nets = json_object();
	a->list_timer = event_new(a->base, -1, 0, list_timer_cb, a);
	log_info("openstack %s: cloud %s from %s, region %s, rate %gs between calls per API",
		 env->provider_name, a->cloud.name, a->cloud.file,
		 a->cloud.region ? a->cloud.region : "(any)", a->rate_s);
	if (!a->cloud.verify)
		log_warn("openstack %s: cloud %s has verify: false: no service's TLS certificate "
			 "or host name is checked, Keystone's password exchange included",
			 env->provider_name, a->cloud.name);
	startup_fetch(a);
	return a;
}

static void
os_adapter_stop(struct sm_adapter *a)
{
	a->stopped = 1;
}

static void
os_adapter_free(struct sm_adapter *a)
{
	struct os_call *c;
	struct os_listwait *w;
	struct upload *u;
	int s;

	if (a == NULL)
		return;
	while ((c = TAILQ_FIRST(&a->calls)) != NULL)
		call_free(c);
	while ((w = TAILQ_FIRST(&a->listwaits)) != NULL) {
		TAILQ_REMOVE(&a->listwaits, w, entry);
		free(w);
	}
	while ((u = TAILQ_FIRST(&a->uploads_inflight)) != NULL)
		upload_free(u);
	for (s = 0; s < NSVC; s++) {
		http_client_free(a->http[s]);
		free(a->ep[s]);
	}
	if (a->list_timer != NULL)
		event_free(a->list_timer);
	privsep_free_secret_str(a->token);
	free(a->project_id);
	json_decref(a->flavors);
	json_decref(a->ext_nets);
	json_decref(a->images);
	json_decref(a->nets);
	json_decref(a->servers);
	json_decref(a->page);
	json_decref(a->down_ports);
	np_strv_clear(&a->azs);
	os_cloud_clear(&a->cloud);
	free(a);
}

static void
os_dump(struct sm_adapter *a, struct evbuffer *out)
{
	int s;
	struct osm *m;

	evbuffer_add_printf(out,
			    "openstack: cloud %s region %s token %s; flavors %zu, external "
			    "networks %zu, AZs %zu\n",
			    a->cloud.name, a->cloud.region ? a->cloud.region : "-",
			    a->token ? "held" : "none", json_array_size(a->flavors),
			    json_array_size(a->ext_nets), a->azs.n);
	evbuffer_add_printf(out,
			    "openstack: creates %llu (errors %llu, quota %llu), deletes %llu, "
			    "listings %llu, auths %llu (re-auth on 401: %llu), floating ips "
			    "%llu created %llu deleted, leaked ports %llu, leaked floating ips "
			    "%llu, uploads %llu\n",
			    a->creates, a->create_errors, a->quota_errors, a->deletes, a->listings,
			    a->auths, a->reauths, a->fips_created, a->fips_deleted, a->leaked_ports,
			    a->leaked_fips, a->uploads);
	for (s = 0; s < NSVC; s++) {
		struct http_stats st;
		http_get_stats(a->http[s], &st);
		evbuffer_add_printf(out,
				    "openstack: api %s %s: calls %llu, in flight %u, queued %u, "
				    "throttled %llu, errors %llu\n",
				    svc_names[s], a->ep[s] ? a->ep[s] : "-", a->calls_by_svc[s],
				    st.inflight, st.queued, (unsigned long long)st.throttled,
				    (unsigned long long)st.errors);
	}
	TAILQ_FOREACH(m, &a->machines, entry)
	evbuffer_add_printf(out, "openstack: %s machine %s: %s\n", m->create ? "create" : "delete",
			    m->m.external_id ? m->m.external_id : "-", m->m.state);
}

static const struct sm_adapter_ops os_adapter = {
    .name = "openstack",
    .adapter_new = os_adapter_new,
    .adapter_stop = os_adapter_stop,
    .adapter_free = os_adapter_free,
    .create_machine = os_create_machine,
    .resume_machine = os_resume_machine,
    .delete_machine = os_delete_machine,
    .list_instances = os_list_instances,
    .list_resources = os_list_resources,
    .delete_resource = os_delete_resource,
    .quota_limits = os_quota_limits,
    .label_quota = os_label_quota,
    .label_ready = os_label_ready,
    .azs = os_azs,
    .upload_image = os_upload_image,
    .delete_image = os_delete_image,
    .list_images = os_list_images,
    .console_log = os_console_log,
    .dump = os_dump,
};

/* Upstream's OpenStack defaults: boot-timeout 60, rate 1 second between
 * calls. */
static const struct sm_defaults os_defaults = {
    .boot_timeout = 60,
    .rate = 1,
    .host_key_checking = 1,
};

static struct drv_provider *
os_provider_new(struct drv_host *lc, char *err, size_t errlen)
{
	return sm_provider_new(&os_adapter, &os_defaults, lc, err, errlen);
}

/* The openstack driver (upstream's OpenStackDriver: a state-machine
 * driver, PAUSE_AT_QUOTA as every state-machine driver). */
/*
 * The image_format slot: the provider's image-format when set, else the
 * cloud's image_format in clouds.yaml (qcow2 when unset there), read on
 * every call so an edited clouds.yaml counts without a restart.
 */
static int
os_image_format(const struct np_provider *p, char *out, size_t outlen, char *err, size_t errlen)
{
	struct os_cloud c;
	int n;

	if (p->image_format != NULL && p->image_format[0])
		return sm_drv_config_image_format(p, out, outlen, err, errlen);
	if (p->cloud == NULL) {
		snprintf(err, errlen, "provider %s names no cloud", p->name);
		return -1;
	}
	if (os_cloud_load(p->cloud, p->region, &c, err, errlen) != 0)
		return -1;
	n = snprintf(out, outlen, "%s", c.image_format ? c.image_format : "qcow2");
	os_cloud_clear(&c);
	if (n < 0 || (size_t)n >= outlen) {
		snprintf(err, errlen, "cloud %s: image_format too long", p->cloud);
		return -1;
	}
	return 0;
}

const struct driver drv_openstack = {
    .name = "openstack",
    .pause_at_quota = 1,
    .reuse_only = 0,
    .provider_new = os_provider_new,
    SM_DRIVER_SLOTS,
    .image_format = os_image_format,
};

const struct sm_adapter_ops *
os_adapter_ops(void)
{
	return &os_adapter;
}
