/*
 * ARM calls and OAuth2 tokens for the azure adapter (azure_api.h), as
 * upstream's azul.py (AzureAuth, AzureCloud.request).
 */
#include "drivers/azure/azure_api.h"

#include <sys/queue.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "lib/net/http.h"
#include "lib/core/clock.h"
#include "lib/core/log.h"
#include "lib/net/ratelimit.h"

#define AZ_TOKEN_MARGIN 60.0 /* s: renew a token this long before it expires */
#define AZ_RETRIES	3    /* 5xx / connection retries per call */
#define AZ_TIMEOUT	60.0 /* s per attempt (azul.py's TIMEOUT) */

TAILQ_HEAD(az_call_list, az_call);

struct az_api {
	struct event_base *base;
	struct az_auth auth;
	struct http_client *login, *arm, *blob;
	char *token;
	double token_expires;
	struct http_req *token_req;
	struct az_call_list waiting; /* for a token */
	struct az_call_list all;
	json_t *counts;
	unsigned long long total;
};

struct az_call {
	TAILQ_ENTRY(az_call) all_entry;
	TAILQ_ENTRY(az_call) wait_entry;
	int waiting;
	struct az_api *api;
	char *method, *url, *what;
	char *body;
	az_cb cb;
	void *arg;
	struct http_req *req;
	struct event *retry_ev;
	int attempts, reauth;
	int blob; /* a page write: no token, no retries here */
	char *range;
	size_t body_len;
};

static char *
xstrdup(const char *s)
{
	char *d = strdup(s != NULL ? s : "");

	if (d == NULL)
		abort();
	return d;
}

static char *
trim_slash(const char *s)
{
	char *d = xstrdup(s);
	size_t n = strlen(d);

	while (n > 0 && d[n - 1] == '/')
		d[--n] = '\0';
	return d;
}

int
az_auth_load(struct az_auth *out, const char *path, char *err, size_t errlen)
{
	json_error_t je;
	json_t *o;
	static const char *const req[] = {"clientId", "clientSecret", "subscriptionId", "tenantId"};
	size_t i;

	memset(out, 0, sizeof(*out));
	if (path == NULL || *path == '\0') {
		snprintf(err, errlen, "no auth-path (the service principal's auth file)");
		return -1;
	}
	o = json_load_file(path, 0, &je);
	if (o == NULL) {
		snprintf(err, errlen, "auth file %s: %s", path, je.text);
		return -1;
	}
	if (!json_is_object(o)) {
		snprintf(err, errlen, "auth file %s: not a JSON object", path);
		json_decref(o);
		return -1;
	}
	for (i = 0; i < sizeof(req) / sizeof(req[0]); i++)
		if (!json_is_string(json_object_get(o, req[i]))) {
			snprintf(err, errlen, "auth file %s: no \"%s\"", path, req[i]);
			json_decref(o);
			return -1;
		}
	out->client_id = xstrdup(json_string_value(json_object_get(o, "clientId")));
	out->client_secret = xstrdup(json_string_value(json_object_get(o, "clientSecret")));
	out->subscription_id = xstrdup(json_string_value(json_object_get(o, "subscriptionId")));
	out->tenant_id = xstrdup(json_string_value(json_object_get(o, "tenantId")));
	{
		const char *ad =
		    json_string_value(json_object_get(o, "activeDirectoryEndpointUrl"));
		const char *arm =
		    json_string_value(json_object_get(o, "resourceManagerEndpointUrl"));
		out->ad_endpoint =
		    trim_slash(ad != NULL ? ad : "https://login.microsoftonline.com");
		out->arm_endpoint = trim_slash(arm != NULL ? arm : "https://management.azure.com");
	}
	json_decref(o);
	return 0;
}

void
az_auth_clear(struct az_auth *a)
{
	free(a->client_id);
	free(a->client_secret);
	free(a->subscription_id);
	free(a->tenant_id);
	free(a->ad_endpoint);
	free(a->arm_endpoint);
	memset(a, 0, sizeof(*a));
}

json_t *
az_answer_parse(int status, const char *body, size_t len, char *code, size_t codelen, char *msg,
		size_t msglen)
{
	json_t *j = len > 0 ? json_loadb(body, len, JSON_DECODE_ANY, NULL) : NULL;
	const json_t *e;

	if (status >= 200 && status < 300) {
		snprintf(code, codelen, "%s", "");
		snprintf(msg, msglen, "%s", "");
		return j;
	}
	e = json_object_get(j, "error");
	if (json_is_string(json_object_get(e, "code")) &&
	    *json_string_value(json_object_get(e, "code")) != '\0') {
		snprintf(code, codelen, "%s", json_string_value(json_object_get(e, "code")));
		snprintf(msg, msglen, "%s",
			 json_is_string(json_object_get(e, "message"))
			     ? json_string_value(json_object_get(e, "message"))
			     : "");
	} else {
		snprintf(code, codelen, "HttpError");
		snprintf(msg, msglen, "HTTP %d: %.*s", status, (int)(len > 160 ? 160 : len),
			 body != NULL ? body : "");
	}
	json_decref(j);
	return NULL;
}

char *
az_base64(const void *data, size_t len)
{
	static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *p = data;
	char *out = malloc(4 * ((len + 2) / 3) + 1), *o = out;
	size_t i;

	if (out == NULL)
		abort();
	for (i = 0; i + 2 < len; i += 3) {
		*o++ = t[p[i] >> 2];
		*o++ = t[((p[i] & 3) << 4) | (p[i + 1] >> 4)];
		*o++ = t[((p[i + 1] & 15) << 2) | (p[i + 2] >> 6)];
		*o++ = t[p[i + 2] & 63];
	}
	if (i < len) {
		*o++ = t[p[i] >> 2];
		if (i + 1 < len) {
			*o++ = t[((p[i] & 3) << 4) | (p[i + 1] >> 4)];
			*o++ = t[(p[i + 1] & 15) << 2];
		} else {
			*o++ = t[(p[i] & 3) << 4];
			*o++ = '=';
		}
		*o++ = '=';
	}
	*o = '\0';
	return out;
}

/* application/x-www-form-urlencoded escaping of s, malloc'd */
static char *
form_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = malloc(3 * strlen(s) + 1), *o = out;

	if (out == NULL)
		abort();
	for (; *s != '\0'; s++) {
		unsigned char ch = (unsigned char)*s;
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' || ch == '~') {
			*o++ = (char)ch;
		} else {
			*o++ = '%';
			*o++ = hex[ch >> 4];
			*o++ = hex[ch & 15];
		}
	}
	*o = '\0';
	return out;
}

/* ---- calls ---- */

static void call_send(struct az_call *c);
static void token_fetch(struct az_api *a);

static void
count(struct az_api *a, const char *what)
{
	json_t *v = json_object_get(a->counts, what);

	json_object_set_new(a->counts, what, json_integer(json_integer_value(v) + 1));
	a->total++;
}

static void
call_free(struct az_call *c)
{
	struct az_api *a = c->api;

	TAILQ_REMOVE(&a->all, c, all_entry);
	if (c->waiting)
		TAILQ_REMOVE(&a->waiting, c, wait_entry);
	http_cancel(c->req);
	if (c->retry_ev != NULL)
		event_free(c->retry_ev);
	free(c->method);
	free(c->url);
	free(c->what);
	free(c->body);
	free(c->range);
	free(c);
}

/* Hand the outcome to the caller and free the call. */
static void
call_finish(struct az_call *c, const struct az_result *r)
{
	az_cb cb = c->cb;
	void *arg = c->arg;

	c->req = NULL;
	call_free(c);
	cb(r, arg);
}

static void
call_fail(struct az_call *c, int status, const char *code, const char *msg)
{
	struct az_result r = {status, code, msg, NULL, NULL, -1};

	call_finish(c, &r);
}

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	call_send(arg);
}

static void
call_retry_later(struct az_call *c, double in)
{
	struct timeval tv = np_tv_of(in);

	if (c->retry_ev == NULL)
		c->retry_ev = evtimer_new(c->api->base, retry_cb, c);
	evtimer_add(c->retry_ev, &tv);
}

static void
arm_done(const struct http_response *res, void *arg)
{
	struct az_call *c = arg;
	struct az_api *a = c->api;
	char code[128], msg[512];
	struct az_result r = {0};
	const char *ra;
	json_t *j;

	c->req = NULL;
	count(a, c->what);
	if (c->blob) {
		/* the uploader retries a page as upstream's _upload_chunk */
		r.status = res->status;
		r.code = res->status == 0     ? "ConnectionError"
			 : res->status >= 300 ? "HttpError"
					      : NULL;
		r.message = res->error != NULL ? res->error : "";
		r.retry_after = -1;
		call_finish(c, &r);
		return;
	}
	/* 503 (and 429) were retried after Retry-After by the http client */
	if (res->status == 0 || (res->status >= 500 && res->status != 501 && res->status != 503)) {
		if (c->attempts <= AZ_RETRIES) {
			double in = (double)(1 << (c->attempts - 1));
			http_note_retry(c->what, res->status,
					res->error != NULL ? res->error : "server error",
					(unsigned)c->attempts, in);
			call_retry_later(c, in);
			return;
		}
	}
	if (res->status == 401 && !c->reauth) {
		/* the token was refused (expired early, revoked): once more
		 * with a new one */
		c->reauth = 1;
		free(a->token);
		a->token = NULL;
		call_send(c);
		return;
	}
	if (res->status == 0) {
		call_fail(c, 0, "ConnectionError", res->error);
		return;
	}
	j = az_answer_parse(res->status, res->body, res->body_len, code, sizeof(code), msg,
			    sizeof(msg));
	r.status = res->status;
	r.code = code[0] != '\0' ? code : NULL;
	r.message = msg;
	r.body = j;
	r.async_url = http_response_header(res, "Azure-AsyncOperation");
	if (r.async_url == NULL)
		r.async_url = http_response_header(res, "Location");
	ra = http_response_header(res, "Retry-After");
	r.retry_after = ra != NULL ? http_retry_after(ra, (long long)time(NULL)) : -1;
	call_finish(c, &r);
	json_decref(j);
}

static void
call_send(struct az_call *c)
{
	struct az_api *a = c->api;
	struct http_request_params p = {0};
	char auth[4096];
	const char *hdrs[4];

	if (a->token == NULL || a->token_expires - ratelimit_now() < AZ_TOKEN_MARGIN) {
		if (!c->waiting) {
			TAILQ_INSERT_TAIL(&a->waiting, c, wait_entry);
			c->waiting = 1;
		}
		token_fetch(a);
		return;
	}
	c->attempts++;
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", a->token);
	hdrs[0] = auth;
	hdrs[1] = "Accept: application/json";
	hdrs[2] = c->body != NULL ? "Content-Type: application/json" : NULL;
	hdrs[3] = NULL;
	p.method = c->method;
	p.url = c->url;
	p.headers = hdrs;
	p.body = c->body;
	p.body_len = c->body != NULL ? strlen(c->body) : 0;
	p.api = c->what; /* "PUT virtualMachines" in retry logs and counts */
	c->req = http_request(a->arm, &p, arm_done, c);
	if (c->req == NULL)
		call_fail(c, 0, "HttpError", "bad request parameters");
}

static void
token_done(const struct http_response *res, void *arg)
{
	struct az_api *a = arg;
	char code[128], msg[512], err[768];
	json_t *j;
	const json_t *tok, *exp;

	a->token_req = NULL;
	count(a, "POST token");
	if (res->status == 0) {
		snprintf(err, sizeof(err), "token request: %s", res->error);
	} else {
		j = az_answer_parse(res->status, res->body, res->body_len, code, sizeof(code), msg,
				    sizeof(msg));
		tok = json_object_get(j, "access_token");
		exp = json_object_get(j, "expires_on");
		if (j != NULL && json_is_string(tok)) {
			double e = json_is_string(exp)	 ? strtod(json_string_value(exp), NULL)
				   : json_is_number(exp) ? json_number_value(exp)
							 : 0;
			const json_t *in = json_object_get(j, "expires_in");
			if (e <= 0 && (json_is_string(in) || json_is_number(in)))
				e = (double)time(NULL) + (json_is_string(in)
							      ? strtod(json_string_value(in), NULL)
							      : json_number_value(in));
			free(a->token);
			a->token = xstrdup(json_string_value(tok));
			/* expires_on is wall-clock epoch; keep it on the monotonic clock */
			a->token_expires = ratelimit_now() + (e - (double)time(NULL));
			if (a->token_expires - ratelimit_now() < AZ_TOKEN_MARGIN)
				a->token_expires = ratelimit_now() + AZ_TOKEN_MARGIN + 1;
			json_decref(j);
			while (!TAILQ_EMPTY(&a->waiting)) {
				struct az_call *c = TAILQ_FIRST(&a->waiting);
				TAILQ_REMOVE(&a->waiting, c, wait_entry);
				c->waiting = 0;
				call_send(c);
			}
			return;
		}
		json_decref(j);
		if (code[0] == '\0')
			snprintf(code, sizeof(code), "no access_token");
		snprintf(err, sizeof(err), "token request: HTTP %d: %s%s%s", res->status, code,
			 msg[0] != '\0' ? ": " : "", msg);
	}
	log_warn("azure: %s", err);
	/* every waiting call fails: the callers retry as they see fit */
	while (!TAILQ_EMPTY(&a->waiting)) {
		struct az_call *c = TAILQ_FIRST(&a->waiting);
		call_fail(c, res->status, "AuthenticationFailed", err);
	}
}

static void
token_fetch(struct az_api *a)
{
	struct http_request_params p = {0};
	char url[1024];
	char *form = NULL;
	const char *hdrs[] = {"Content-Type: application/x-www-form-urlencoded",
			      "Accept: application/json", NULL};
	char *cid, *sec, *res;
	char resource[1024];
	int n;

	if (a->token_req != NULL)
		return;
	snprintf(url, sizeof(url), "%s/%s/oauth2/token", a->auth.ad_endpoint, a->auth.tenant_id);
	snprintf(resource, sizeof(resource), "%s/", a->auth.arm_endpoint);
	cid = form_escape(a->auth.client_id);
	sec = form_escape(a->auth.client_secret);
	res = form_escape(resource);
	n = asprintf(&form,
		     "grant_type=client_credentials&client_id=%s&client_secret=%s&resource=%s", cid,
		     sec, res);
	free(cid);
	free(sec);
	free(res);
	if (n < 0)
		abort();
	p.method = "POST";
	p.url = url;
	p.headers = hdrs;
	p.body = form;
	p.body_len = strlen(form);
	p.api = "POST token";
	a->token_req = http_request(a->login, &p, token_done, a);
	free(form);
}

static void
blob_send(struct az_call *c)
{
	struct http_request_params p = {0};
	const char *hdrs[] = {"x-ms-blob-type: PageBlob", "x-ms-page-write: Update",
			      "x-ms-version: 2019-12-12", c->range, NULL};

	c->attempts++;
	p.method = "PUT";
	p.url = c->url;
	p.headers = hdrs;
	p.body = c->body;
	p.body_len = c->body_len;
	p.api = c->what;
	c->req = http_request(c->api->blob, &p, arm_done, c);
	if (c->req == NULL)
		call_fail(c, 0, "HttpError", "bad request parameters");
}

struct az_call *
az_blob_put_page(struct az_api *a, const char *sas_url, long long offset, const void *data,
		 size_t len, az_cb cb, void *arg)
{
	struct az_call *c = calloc(1, sizeof(*c));

	if (c == NULL)
		abort();
	c->api = a;
	c->blob = 1;
	c->method = xstrdup("PUT");
	c->what = xstrdup("PUT page");
	c->cb = cb;
	c->arg = arg;
	if (asprintf(&c->url, "%s%s", sas_url, strstr(sas_url, "comp=page") ? "" : "&comp=page") <
		0 ||
	    asprintf(&c->range, "Range: bytes=%lld-%lld", offset, offset + (long long)len - 1) < 0)
		abort();
	c->body = malloc(len > 0 ? len : 1);
	if (c->body == NULL)
		abort();
	memcpy(c->body, data, len);
	c->body_len = len;
	TAILQ_INSERT_TAIL(&a->all, c, all_entry);
	blob_send(c);
	return c;
}

struct az_call *
az_call(struct az_api *a, const char *method, const char *where, const char *api_version,
	const json_t *body, const char *what, az_cb cb, void *arg)
{
	struct az_call *c = calloc(1, sizeof(*c));
	int full = strncmp(where, "https://", 8) == 0 || strncmp(where, "http://", 7) == 0;
	char *url = NULL;
	int n;

	if (c == NULL)
		abort();
	c->api = a;
	c->method = xstrdup(method);
	c->what = xstrdup(what);
	c->cb = cb;
	c->arg = arg;
	if (full)
		n = asprintf(&url, "%s", where);
	else if (where[0] == '/')
		n = asprintf(&url, "%s%s", a->auth.arm_endpoint, where);
	else
		n = asprintf(&url, "%s/subscriptions/%s/%s", a->auth.arm_endpoint,
			     a->auth.subscription_id, where);
	if (n < 0)
		abort();
	if (!full && api_version != NULL) {
		char *u2 = NULL;
		if (asprintf(&u2, "%s%sapi-version=%s", url, strchr(url, '?') ? "&" : "?",
			     api_version) < 0)
			abort();
		free(url);
		url = u2;
	}
	c->url = url;
	if (body != NULL) {
		c->body = json_dumps(body, JSON_COMPACT);
		if (c->body == NULL)
			abort();
	}
	TAILQ_INSERT_TAIL(&a->all, c, all_entry);
	call_send(c);
	return c;
}

void
az_call_cancel(struct az_call *c)
{
	if (c != NULL)
		call_free(c);
}

struct az_api *
az_api_new(struct event_base *base, const struct az_auth *auth, double rate, char *err,
	   size_t errlen)
{
	struct az_api *a = calloc(1, sizeof(*a));
	struct http_client_options o = {0};
	const char *ca = getenv("REQUESTS_CA_BUNDLE");

	if (a == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (http_load("driver azure", err, errlen) != 0) {
		free(a);
		return NULL;
	}
	a->base = base;
	a->auth.client_id = xstrdup(auth->client_id);
	a->auth.client_secret = xstrdup(auth->client_secret);
	a->auth.subscription_id = xstrdup(auth->subscription_id);
	a->auth.tenant_id = xstrdup(auth->tenant_id);
	a->auth.ad_endpoint = xstrdup(auth->ad_endpoint);
	a->auth.arm_endpoint = xstrdup(auth->arm_endpoint);
	TAILQ_INIT(&a->waiting);
	TAILQ_INIT(&a->all);
	a->counts = json_object();
	o.ca_file = ca != NULL && *ca != '\0' ? ca : NULL;
	o.timeout = AZ_TIMEOUT;
	o.max_concurrency = 4;
	a->login = http_client_new(base, &o, err, errlen);
	o.rate = rate;
	o.max_concurrency = 32;
	a->arm = a->login != NULL ? http_client_new(base, &o, err, errlen) : NULL;
	o.rate = 0;
	o.max_concurrency = 4;
	o.timeout = 300; /* a 4 MiB page */
	a->blob = a->arm != NULL ? http_client_new(base, &o, err, errlen) : NULL;
	if (a->blob == NULL) {
		az_api_free(a);
		return NULL;
	}
	return a;
}

void
az_api_free(struct az_api *a)
{
	if (a == NULL)
		return;
	while (!TAILQ_EMPTY(&a->all))
		call_free(TAILQ_FIRST(&a->all));
	http_client_free(a->blob);
	http_client_free(a->arm);
	http_client_free(a->login); /* the token request with it */
	az_auth_clear(&a->auth);
	json_decref(a->counts);
	free(a->token);
	free(a);
}

const struct az_auth *
az_api_auth(const struct az_api *a)
{
	return &a->auth;
}

const json_t *
az_api_counts(const struct az_api *a)
{
	return a->counts;
}

unsigned long long
az_api_total(const struct az_api *a)
{
	return a->total;
}
