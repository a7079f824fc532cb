/*
 * The openstack driver's API plumbing (os_int.h): Keystone v3
 * authentication (a token reused until OS_TOKEN_MARGIN before it expires,
 * fetched again on a 401), the service catalog's endpoints (the cloud's
 * interface and region, *_endpoint_override, the versions this adapter
 * speaks), and one struct os_call per REST call: it waits for a token, is
 * sent through the service's HTTP client (lib/net/http.h, rate-limited per
 * API), and reports once on the loop.
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

const char *const os_svc_names[NSVC] = {"compute", "network", "image", "volume", "identity"};

/* ---- small helpers ---------------------------------------------------------------------- */

const char *
os_jstr(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* ---- authentication and calls ---------------------------------------------------------------- */

static void call_send(struct os_call *c);
static void auth_start(struct sm_adapter *a);

void
os_call_free(struct os_call *c)
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
void
os_call_cancel(struct os_call *c)
{
	if (c != NULL)
		os_call_free(c);
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
	os_call_free(c);
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
			 os_svc_names[c->svc]);
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
	a->token_exp = parse_iso(os_jstr(token, "expires_at"));
	if (a->token_exp <= 0)
		a->token_exp = (double)time(NULL) + 3600;
	free(a->project_id);
	a->project_id = xstrdup(os_jstr(json_object_get(token, "project"), "id"));
	for (i = 0; i < NSVC; i++) {
		char *u;
		const char *ov = os_jstr(a->cloud.overrides, os_svc_names[i]);
		if (i == SVC_VOLUME && ov == NULL)
			ov = os_jstr(a->cloud.overrides, "block-storage");
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
struct os_call *
os_call_prep(struct sm_adapter *a, enum os_svc svc, const char *method, const char *path,
	     json_t *body, os_call_cb cb, void *owner)
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
void
os_call_go(struct os_call *c)
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
struct os_call *
os_call_new(struct sm_adapter *a, enum os_svc svc, const char *method, const char *path,
	    json_t *body, os_call_cb cb, void *owner)
{
	struct os_call *c = os_call_prep(a, svc, method, path, body, cb, owner);

	os_call_go(c);
	return c;
}

void
os_ignore_answer(struct os_call *c, int status, const char *error, json_t *body,
		 const struct http_response *res)
{
	(void)c;
	(void)status;
	(void)error;
	(void)body;
	(void)res;
}
const char *
os_seg(const char *s, char *buf)
{
	return url_segment(s != NULL ? s : "", buf, OS_SEG_MAX) != NULL ? buf : "-";
}

/* URL-encode s into out. */
void
os_urlenc(const char *s, char *out, size_t n)
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
