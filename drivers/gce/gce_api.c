/*
 * Google credentials, OAuth2 tokens and Compute Engine calls (gce_api.h).
 */
#include "drivers/gce/gce_api.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "lib/net/http.h"
#include "lib/core/log.h"
#include "lib/core/clock.h"
#include "lib/core/xalloc.h"

#define GCE_DEFAULT_ENDPOINT  "https://compute.googleapis.com/compute/v1"
#define GCE_DEFAULT_TOKEN_URI "https://oauth2.googleapis.com/token"
#define GCE_SCOPE	      "https://www.googleapis.com/auth/compute"
/* A token is renewed this long before it expires (google-auth refreshes
 * within its clock-skew window of the expiry). */
#define GCE_TOKEN_EARLY 300.0
/* ...and not used in its last seconds (calls wait for the new one). */
#define GCE_TOKEN_LAST 10.0
#define GCE_JWT_LIFE   3600

/* ---- credentials ---------------------------------------------------------------- */

static const char *
env_get(const char *(*env)(const char *), const char *name)
{
	return env != NULL ? env(name) : getenv(name);
}

static char *
jdup(const json_t *o, const char *k)
{
	const char *v = json_string_value(json_object_get(o, k));

	return v != NULL && v[0] != '\0' ? xstrdup(v) : NULL;
}

void
gce_creds_clear(struct gce_creds *c)
{
	if (c == NULL)
		return;
	free(c->client_email);
	free(c->private_key_id);
	free(c->private_key);
	free(c->client_id);
	free(c->client_secret);
	free(c->refresh_token);
	free(c->token_uri);
	free(c->project_id);
	free(c->source);
	memset(c, 0, sizeof(*c));
}

int
gce_creds_find(struct gce_creds *out, const char *(*env)(const char *name), char *err,
	       size_t errlen)
{
	const char *p = env_get(env, "GOOGLE_APPLICATION_CREDENTIALS");
	const char *type;
	char path[4096];
	json_t *j;
	json_error_t je;

	memset(out, 0, sizeof(*out));
	if (p != NULL && p[0] != '\0') {
		snprintf(path, sizeof(path), "%s", p);
	} else {
		const char *cfg = env_get(env, "CLOUDSDK_CONFIG");
		const char *home = env_get(env, "HOME");

		if (cfg != NULL && cfg[0] != '\0')
			snprintf(path, sizeof(path), "%s/application_default_credentials.json",
				 cfg);
		else
			snprintf(path, sizeof(path),
				 "%s/.config/gcloud/application_default_credentials.json",
				 home != NULL ? home : "");
		if (access(path, R_OK) != 0) {
			snprintf(err, errlen,
				 "no Google credentials: GOOGLE_APPLICATION_CREDENTIALS is not set "
				 "and %s does not exist",
				 path);
			return -1;
		}
	}
	j = json_load_file(path, 0, &je);
	if (j == NULL) {
		snprintf(err, errlen, "Google credentials %s: %s", path, je.text);
		return -1;
	}
	type = json_string_value(json_object_get(j, "type"));
	out->source = xstrdup(path);
	out->token_uri = jdup(j, "token_uri");
	if (out->token_uri == NULL)
		out->token_uri = xstrdup(GCE_DEFAULT_TOKEN_URI);
	out->project_id = jdup(j, "project_id");
	if (type != NULL && strcmp(type, "service_account") == 0) {
		out->service_account = 1;
		out->client_email = jdup(j, "client_email");
		out->private_key_id = jdup(j, "private_key_id");
		out->private_key = jdup(j, "private_key");
		if (out->client_email == NULL || out->private_key == NULL) {
			snprintf(err, errlen,
				 "Google credentials %s: a service account key needs "
				 "client_email and private_key",
				 path);
			goto fail;
		}
	} else if (type != NULL && strcmp(type, "authorized_user") == 0) {
		out->client_id = jdup(j, "client_id");
		out->client_secret = jdup(j, "client_secret");
		out->refresh_token = jdup(j, "refresh_token");
		if (out->client_id == NULL || out->client_secret == NULL ||
		    out->refresh_token == NULL) {
			snprintf(err, errlen,
				 "Google credentials %s: an authorized user needs "
				 "client_id, client_secret and refresh_token",
				 path);
			goto fail;
		}
	} else {
		snprintf(err, errlen,
			 "Google credentials %s: type %s is not supported (service_account, "
			 "authorized_user)",
			 path, type != NULL ? type : "(none)");
		goto fail;
	}
	json_decref(j);
	return 0;
fail:
	json_decref(j);
	gce_creds_clear(out);
	return -1;
}

/* RFC 4648 base64url without padding, malloc'd. */
static char *
b64url(const unsigned char *in, size_t n)
{
	char *out = xmalloc(4 * ((n + 2) / 3) + 1);
	size_t i, len;

	len = (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)n);
	while (len > 0 && out[len - 1] == '=')
		len--;
	out[len] = '\0';
	for (i = 0; i < len; i++)
		if (out[i] == '+')
			out[i] = '-';
		else if (out[i] == '/')
			out[i] = '_';
	return out;
}

static char *
b64url_json(json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	char *out = b64url((const unsigned char *)s, strlen(s));

	free(s);
	return out;
}

char *
gce_jwt(const struct gce_creds *c, const char *scope, long long now, char *err, size_t errlen)
{
	BIO *bio = NULL;
	EVP_PKEY *key = NULL;
	EVP_MD_CTX *md = NULL;
	json_t *hdr, *claims;
	char *h, *cl, *input = NULL, *sig64 = NULL, *out = NULL;
	unsigned char *sig = NULL;
	size_t siglen = 0;

	if (c->private_key == NULL) {
		snprintf(err, errlen, "no private key");
		return NULL;
	}
	hdr = json_pack("{s:s, s:s}", "alg", "RS256", "typ", "JWT");
	if (c->private_key_id != NULL)
		json_object_set_new(hdr, "kid", json_string(c->private_key_id));
	claims = json_pack("{s:s, s:s, s:s, s:I, s:I}", "iss", c->client_email, "scope", scope,
			   "aud", c->token_uri, "iat", (json_int_t)now, "exp",
			   (json_int_t)(now + GCE_JWT_LIFE));
	h = b64url_json(hdr);
	cl = b64url_json(claims);
	json_decref(hdr);
	json_decref(claims);
	if (asprintf(&input, "%s.%s", h, cl) < 0)
		np_oom();
	free(h);
	free(cl);
	bio = BIO_new_mem_buf(c->private_key, -1);
	if (bio != NULL)
		key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
	if (key == NULL) {
		snprintf(err, errlen, "private_key of %s does not load: %s", c->client_email,
			 ERR_reason_error_string(ERR_get_error()));
		goto done;
	}
	md = EVP_MD_CTX_new();
	if (md == NULL || EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) != 1 ||
	    EVP_DigestSign(md, NULL, &siglen, (const unsigned char *)input, strlen(input)) != 1 ||
	    (sig = xmalloc(siglen)) == NULL ||
	    EVP_DigestSign(md, sig, &siglen, (const unsigned char *)input, strlen(input)) != 1) {
		snprintf(err, errlen, "RS256 signing failed: %s",
			 ERR_reason_error_string(ERR_get_error()));
		goto done;
	}
	sig64 = b64url(sig, siglen);
	if (asprintf(&out, "%s.%s", input, sig64) < 0)
		np_oom();
done:
	ERR_clear_error();
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(key);
	BIO_free(bio);
	free(sig);
	free(sig64);
	free(input);
	return out;
}

/* ---- answers -------------------------------------------------------------------- */

json_t *
gce_answer_parse(int status, const char *body, size_t len, char *reason, size_t reasonlen,
		 char *msg, size_t msglen)
{
	json_t *j = len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
	const json_t *e, *errs, *first;
	const char *r = NULL, *m = NULL;

	reason[0] = '\0';
	msg[0] = '\0';
	if (status >= 200 && status < 300)
		return j;
	/* Google's error body: {"error": {"code", "message", "status",
	 * "errors": [{"domain", "reason", "message"}]}}; the token endpoint
	 * answers RFC 6749's {"error": "invalid_grant", "error_description"} */
	e = json_object_get(j, "error");
	if (json_is_object(e)) {
		errs = json_object_get(e, "errors");
		first = json_array_get(errs, 0);
		r = json_string_value(json_object_get(first, "reason"));
		if (r == NULL)
			r = json_string_value(json_object_get(e, "status"));
		m = json_string_value(json_object_get(e, "message"));
	} else if (json_is_string(e)) {
		r = json_string_value(e);
		m = json_string_value(json_object_get(j, "error_description"));
	}
	snprintf(reason, reasonlen, "%s", r != NULL && r[0] != '\0' ? r : "httpError");
	if (m != NULL)
		snprintf(msg, msglen, "%s", m);
	else
		snprintf(msg, msglen, "HTTP %d", status);
	return j;
}

/* ---- calls ---------------------------------------------------------------------- */

struct gce_api {
	struct event_base *base;
	struct http_client *compute, *oauth;
	struct gce_creds creds;
	char *endpoint;
	int max_retries;
	double backoff_max;
	/* the access token */
	char *token;	    /* "Authorization: Bearer ..." */
	double token_exp;   /* monotonic s */
	unsigned token_gen; /* tokens fetched: which one a call was sent with */
	struct http_req *token_req;
	struct event *token_retry_ev;
	struct event *token_fail_ev; /* fails the parked calls on the loop */
	unsigned token_attempts;
	char token_error[1024];
	/* calls */
	struct gce_call *calls; /* every call, doubly linked */
	json_t *counts;
	unsigned long long total, tokens;
};

struct gce_call {
	struct gce_api *a;
	struct gce_call *prev, *next;
	struct http_req *req;
	struct event *retry_ev;
	char *kind, *method, *url, *body;
	int waiting_token; /* parked until a token comes */
	int reauthed;	   /* retried once after a 401 */
	unsigned gen;	   /* the token it was sent with (token_gen) */
	int unsendable;	   /* http_request refused it: fail on the loop */
	unsigned attempts;
	gce_cb cb;
	void *arg;
};

static void call_start(struct gce_call *c);
static void token_fetch(struct gce_api *a);

static void
call_free(struct gce_call *c)
{
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		c->a->calls = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	if (c->retry_ev != NULL)
		event_free(c->retry_ev);
	free(c->kind);
	free(c->method);
	free(c->url);
	free(c->body);
	free(c);
}

void
gce_call_cancel(struct gce_call *c)
{
	if (c == NULL)
		return;
	http_cancel(c->req);
	call_free(c);
}

static void
count(struct gce_api *a, const char *kind)
{
	json_t *n = json_object_get(a->counts, kind);

	json_object_set_new(a->counts, kind,
			    json_integer(n != NULL ? json_integer_value(n) + 1 : 1));
}

static void
call_finish(struct gce_call *c, int status, const char *reason, const char *msg, json_t *body)
{
	struct gce_result r = {0};

	r.status = status;
	r.reason = reason != NULL && reason[0] != '\0' ? reason : NULL;
	r.message = r.reason != NULL ? msg : NULL;
	r.body = body;
	r.attempts = c->attempts;
	c->cb(&r, c->arg);
	call_free(c);
}

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gce_call *c = arg;

	(void)fd;
	(void)what;
	if (c->unsendable)
		call_finish(c, 0, "connectionError", "the request could not be made", NULL);
	else
		call_start(c);
}

/* Passing trouble, retried with back-off as googleapiclient's
 * num_retries does (5xx, 429, 403 rate limits, connection errors). */
static int
retryable(int status, const char *reason)
{
	if (status == 0)
		return 1;
	if (status >= 500)
		return 1;
	if (status == 429)
		return 1;
	return status == 403 && reason != NULL &&
	       (strcmp(reason, "rateLimitExceeded") == 0 ||
		strcmp(reason, "userRateLimitExceeded") == 0);
}

static void
call_retry_later(struct gce_call *c, int status, const char *why)
{
	struct gce_api *a = c->a;
	double cap = fmin(a->backoff_max, 0.5 * pow(2.0, c->attempts - 1));
	double d = cap * (0.5 + 0.5 * ((double)rand() / RAND_MAX));
	struct timeval tv = np_tv_of(d);

	http_note_retry(c->kind, status, why, c->attempts, d);
	if (c->retry_ev == NULL)
		c->retry_ev = evtimer_new(a->base, retry_cb, c);
	evtimer_add(c->retry_ev, &tv);
}

static void
http_done(const struct http_response *res, void *arg)
{
	struct gce_call *c = arg;
	struct gce_api *a = c->a;
	char reason[128], msg[512];
	json_t *body = NULL;

	c->req = NULL;
	a->total++;
	count(a, c->kind);
	if (res->error != NULL) {
		snprintf(reason, sizeof(reason), "connectionError");
		snprintf(msg, sizeof(msg), "%s", res->error);
	} else {
		body = gce_answer_parse(res->status, res->body, res->body_len, reason,
					sizeof(reason), msg, sizeof(msg));
	}
	if (res->error == NULL && res->status == 401 && !c->reauthed) {
		/* the token expired or was revoked early: one more try with a
		 * fresh one */
		c->reauthed = 1;
		if (c->gen == a->token_gen) { /* not already replaced */
			free(a->token);
			a->token = NULL;
		}
		json_decref(body);
		call_start(c);
		return;
	}
	if (reason[0] != '\0' && retryable(res->error != NULL ? 0 : res->status, reason) &&
	    c->attempts <= (unsigned)a->max_retries) {
		json_decref(body);
		call_retry_later(c, res->error != NULL ? 0 : res->status, msg);
		return;
	}
	call_finish(c, res->status, reason, msg, body);
	json_decref(body);
}

static void
call_send(struct gce_call *c)
{
	struct http_request_params p = {0};
	const char *hdrs[4];
	int n = 0;

	hdrs[n++] = c->a->token;
	c->gen = c->a->token_gen;
	if (c->body != NULL)
		hdrs[n++] = "Content-Type: application/json";
	hdrs[n++] = "Accept: application/json";
	hdrs[n] = NULL;
	p.method = c->method;
	p.url = c->url;
	p.headers = hdrs;
	p.body = c->body;
	p.body_len = c->body != NULL ? strlen(c->body) : 0;
	p.api = c->kind; /* "compute.instances.insert" in retry logs and counts */
	c->req = http_request(c->a->compute, &p, http_done, c);
	if (c->req == NULL) { /* a bad URL: answered as a connection error, later */
		c->unsendable = 1;
		call_retry_later(c, 0, "bad request");
	}
}

static void
call_start(struct gce_call *c)
{
	struct gce_api *a = c->a;

	c->attempts++;
	if (a->token != NULL && np_mono_s() > a->token_exp - GCE_TOKEN_EARLY)
		token_fetch(a); /* renew early, in the background */
	if (a->token == NULL || np_mono_s() > a->token_exp - GCE_TOKEN_LAST) {
		c->waiting_token = 1;
		token_fetch(a);
		return;
	}
	call_send(c);
}

/* ---- the token ---- */

static char *
form_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *o = xmalloc(3 * strlen(s) + 1), *p = o;

	for (; *s != '\0'; s++) {
		unsigned char ch = (unsigned char)*s;
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
			*p++ = (char)ch;
		} else {
			*p++ = '%';
			*p++ = hex[ch >> 4];
			*p++ = hex[ch & 15];
		}
	}
	*p = '\0';
	return o;
}

/* Every call parked for a token: sent (token) or failed (no token). */
static void
token_release(struct gce_api *a, int ok)
{
	struct gce_call *c, *next;

	for (c = a->calls; c != NULL; c = next) {
		next = c->next;
		if (!c->waiting_token)
			continue;
		c->waiting_token = 0;
		if (ok)
			call_send(c);
		else
			call_finish(c, 0, "authError", a->token_error, NULL);
	}
}

static void
token_fail_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	token_release(arg, 0);
}

static void
token_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	token_fetch(arg);
}

static void
token_done(const struct http_response *res, void *arg)
{
	struct gce_api *a = arg;
	char reason[128], msg[512];
	json_t *j;
	const char *tok;
	double ttl;

	a->token_req = NULL;
	count(a, "oauth2.token");
	if (res->error != NULL) {
		snprintf(reason, sizeof(reason), "connectionError");
		snprintf(msg, sizeof(msg), "%s", res->error);
		j = NULL;
	} else {
		j = gce_answer_parse(res->status, res->body, res->body_len, reason, sizeof(reason),
				     msg, sizeof(msg));
	}
	tok = json_string_value(json_object_get(j, "access_token"));
	if (reason[0] == '\0' && tok != NULL) {
		ttl = json_number_value(json_object_get(j, "expires_in"));
		if (ttl <= 0)
			ttl = 3600;
		free(a->token);
		if (asprintf(&a->token, "Authorization: Bearer %s", tok) < 0)
			np_oom();
		a->token_exp = np_mono_s() + ttl;
		a->token_gen++;
		a->token_attempts = 0;
		a->tokens++;
		json_decref(j);
		log_debug("gce: access token from %s, valid %.0f s", a->creds.token_uri, ttl);
		token_release(a, 1);
		return;
	}
	json_decref(j);
	if (reason[0] == '\0')
		snprintf(msg, sizeof(msg), "no access_token in the answer");
	snprintf(a->token_error, sizeof(a->token_error), "token from %s: %s%s%s",
		 a->creds.token_uri, reason[0] != '\0' ? reason : "", reason[0] != '\0' ? ": " : "",
		 msg);
	if (retryable(res->error != NULL ? 0 : res->status, reason) &&
	    a->token_attempts <= (unsigned)a->max_retries) {
		double d = fmin(a->backoff_max, 0.5 * pow(2.0, a->token_attempts - 1));
		struct timeval tv = np_tv_of(d);

		http_note_retry("oauth2.token", res->error != NULL ? 0 : res->status,
				a->token_error, a->token_attempts, d);
		evtimer_add(a->token_retry_ev, &tv);
		return;
	}
	log_warn("gce: %s", a->token_error);
	a->token_attempts = 0;
	token_release(a, 0);
}

static void
token_fetch(struct gce_api *a)
{
	struct http_request_params p = {0};
	const char *hdrs[] = {"Content-Type: application/x-www-form-urlencoded",
			      "Accept: application/json", NULL};
	char err[256];
	char *body = NULL;

	if (a->token_req != NULL || evtimer_pending(a->token_retry_ev, NULL))
		return;
	a->token_attempts++;
	if (a->creds.service_account) {
		char *jwt = gce_jwt(&a->creds, GCE_SCOPE, (long long)time(NULL), err, sizeof(err));
		if (jwt == NULL) {
			snprintf(a->token_error, sizeof(a->token_error), "%s", err);
			log_warn("gce: %s", err);
			event_active(a->token_fail_ev, 0, 0);
			return;
		}
		if (asprintf(&body,
			     "grant_type=urn%%3Aietf%%3Aparams%%3Aoauth%%3Agrant-type%%3Ajwt-bearer"
			     "&assertion=%s",
			     jwt) < 0)
			np_oom();
		free(jwt);
	} else {
		char *id = form_escape(a->creds.client_id);
		char *sec = form_escape(a->creds.client_secret);
		char *rt = form_escape(a->creds.refresh_token);

		if (asprintf(&body,
			     "grant_type=refresh_token&client_id=%s&client_secret=%s"
			     "&refresh_token=%s",
			     id, sec, rt) < 0)
			np_oom();
		free(id);
		free(sec);
		free(rt);
	}
	p.method = "POST";
	p.url = a->creds.token_uri;
	p.headers = hdrs;
	p.body = body;
	p.body_len = strlen(body);
	p.api = "oauth2.token";
	a->token_req = http_request(a->oauth, &p, token_done, a);
	free(body);
	if (a->token_req == NULL) {
		snprintf(a->token_error, sizeof(a->token_error), "token_uri %s is not a URL",
			 a->creds.token_uri);
		event_active(a->token_fail_ev, 0, 0);
	}
}

/* ---- the API ---- */

struct gce_api *
gce_api_new(struct event_base *base, const struct gce_api_options *o, char *err, size_t errlen)
{
	struct gce_api *a = xcalloc(1, sizeof(*a));
	struct http_client_options ho = {0};
	const char *ep = env_get(o->env, "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE");
	const char *ca = env_get(o->env, "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE");
	size_t n;

	if (http_load("driver gce", err, errlen) != 0) {
		free(a);
		return NULL;
	}
	if (gce_creds_find(&a->creds, o->env, err, errlen) != 0) {
		free(a);
		return NULL;
	}
	a->base = base;
	a->endpoint = xstrdup(ep != NULL && ep[0] != '\0' ? ep : GCE_DEFAULT_ENDPOINT);
	n = strlen(a->endpoint);
	while (n > 0 && a->endpoint[n - 1] == '/')
		a->endpoint[--n] = '\0';
	a->max_retries = o->max_retries > 0 ? o->max_retries : 5;
	a->backoff_max = o->backoff_max > 0 ? o->backoff_max : 20.0;
	a->counts = json_object();
	a->token_retry_ev = evtimer_new(base, token_retry_cb, a);
	a->token_fail_ev = event_new(base, -1, 0, token_fail_cb, a);
	ho.rate = o->rate;
	ho.timeout = o->timeout;
	ho.ca_file = ca != NULL && ca[0] != '\0' ? ca : NULL;
	ho.max_concurrency = 16;
	a->compute = http_client_new(base, &ho, err, errlen);
	ho.rate = 0;
	ho.max_concurrency = 2;
	a->oauth = a->compute != NULL ? http_client_new(base, &ho, err, errlen) : NULL;
	if (a->oauth == NULL) {
		gce_api_free(a);
		return NULL;
	}
	log_info("gce: credentials from %s (%s), token endpoint %s, Compute API %s",
		 a->creds.source,
		 a->creds.service_account ? a->creds.client_email : "authorized user",
		 a->creds.token_uri, a->endpoint);
	return a;
}

void
gce_api_free(struct gce_api *a)
{
	if (a == NULL)
		return;
	while (a->calls != NULL)
		gce_call_cancel(a->calls);
	http_cancel(a->token_req);
	http_client_free(a->compute);
	http_client_free(a->oauth);
	if (a->token_retry_ev != NULL)
		event_free(a->token_retry_ev);
	if (a->token_fail_ev != NULL)
		event_free(a->token_fail_ev);
	gce_creds_clear(&a->creds);
	free(a->endpoint);
	free(a->token);
	json_decref(a->counts);
	free(a);
}

const struct gce_creds *
gce_api_creds(const struct gce_api *a)
{
	return &a->creds;
}

const char *
gce_api_endpoint(const struct gce_api *a)
{
	return a->endpoint;
}

const json_t *
gce_api_counts(const struct gce_api *a)
{
	return a->counts;
}

unsigned long long
gce_api_total(const struct gce_api *a)
{
	return a->total;
}

unsigned long long
gce_api_tokens(const struct gce_api *a)
{
	return a->tokens;
}

struct gce_call *
gce_compute(struct gce_api *a, const char *kind, const char *method, const char *path,
	    const json_t *body, gce_cb cb, void *arg)
{
	struct gce_call *c = xcalloc(1, sizeof(*c));

	c->a = a;
	c->kind = xstrdup(kind);
	c->method = xstrdup(method);
	if (strncmp(path, "https://", 8) == 0 || strncmp(path, "http://", 7) == 0)
		c->url = xstrdup(path);
	else if (asprintf(&c->url, "%s/%s", a->endpoint, path) < 0)
		np_oom();
	if (body != NULL)
		c->body = json_dumps(body, JSON_COMPACT);
	c->cb = cb;
	c->arg = arg;
	c->next = a->calls;
	if (a->calls != NULL)
		a->calls->prev = c;
	a->calls = c;
	call_start(c);
	return c;
}
