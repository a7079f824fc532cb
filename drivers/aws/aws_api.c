/*
 * AWS API plumbing: see aws_api.h.
 */
#include "drivers/aws/aws_api.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "lib/net/curl_dl.h"
#include "lib/net/http.h"
#include "lib/core/log.h"
#include "lib/core/privsep.h"
#include "lib/net/xml_dl.h"

/* ---- credentials ------------------------------------------------------------ */

static const char *
std_env(const char *name)
{
	return getenv(name);
}

static char *
trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* Read key from [section] of an INI file into a malloc'd string. 1 found,
 * 0 not (section or key), -1 file unreadable. */
static int
ini_get(const char *path, const char *section, const char *key, char **out)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	int in = 0;

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		char *l = trim(line), *eq;

		if (*l == '#' || *l == ';' || *l == '\0')
			continue;
		if (*l == '[') {
			char *end = strchr(l, ']');
			if (end != NULL)
				*end = '\0';
			in = strcmp(trim(l + 1), section) == 0;
			continue;
		}
		if (!in || (eq = strchr(l, '=')) == NULL)
			continue;
		*eq = '\0';
		if (strcmp(trim(l), key) == 0) {
			*out = strdup(trim(eq + 1));
			fclose(f);
			return 1;
		}
	}
	fclose(f);
	return 0;
}

static char *
home_file(const char *(*env)(const char *), const char *var, const char *rel)
{
	const char *v = env(var), *home = env("HOME");
	char buf[4096];

	if (v != NULL && v[0] != '\0') {
		if (v[0] == '~' && home != NULL) {
			snprintf(buf, sizeof(buf), "%s%s", home, v + 1);
			return strdup(buf);
		}
		return strdup(v);
	}
	snprintf(buf, sizeof(buf), "%s/%s", home != NULL ? home : "", rel);
	return strdup(buf);
}

/* Profile `name` from the credentials file, then the config file. */
static int
from_profile(struct aws_creds *out, const char *name, const char *(*env)(const char *))
{
	char *cf = home_file(env, "AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
	char *cfg = home_file(env, "AWS_CONFIG_FILE", ".aws/config");
	char section[512], src[4200];
	int ok = 0, pass;

	for (pass = 0; pass < 2 && !ok; pass++) {
		const char *file = pass == 0 ? cf : cfg;
		char *id = NULL, *secret = NULL, *token = NULL;

		if (pass == 0 || strcmp(name, "default") == 0)
			snprintf(section, sizeof(section), "%s", name);
		else
			snprintf(section, sizeof(section), "profile %s", name);
		if (ini_get(file, section, "aws_access_key_id", &id) == 1 &&
		    ini_get(file, section, "aws_secret_access_key", &secret) == 1) {
			ini_get(file, section, "aws_session_token", &token);
			out->access_key_id = id;
			out->secret_access_key = secret;
			out->session_token = token;
			snprintf(src, sizeof(src), "profile %s in %s", name, file);
			out->source = strdup(src);
			ok = 1;
		} else {
			free(id);
			privsep_free_secret_str(secret);
		}
	}
	free(cf);
	free(cfg);
	return ok;
}

int
aws_creds_find(struct aws_creds *out, const char *profile, const char *(*env)(const char *),
	       char *err, size_t errlen)
{
	const char *id, *secret, *token;

	memset(out, 0, sizeof(*out));
	if (env == NULL)
		env = std_env;
	if (profile != NULL && profile[0] != '\0') {
		if (from_profile(out, profile, env))
			return 0;
		snprintf(err, errlen,
			 "AWS profile %s (profile-name) has no aws_access_key_id and "
			 "aws_secret_access_key in the shared credentials or config file",
			 profile);
		return -1;
	}
	id = env("AWS_ACCESS_KEY_ID");
	secret = env("AWS_SECRET_ACCESS_KEY");
	token = env("AWS_SESSION_TOKEN");
	if (id != NULL && id[0] != '\0' && secret != NULL && secret[0] != '\0') {
		out->access_key_id = strdup(id);
		out->secret_access_key = strdup(secret);
		out->session_token = token != NULL && token[0] != '\0' ? strdup(token) : NULL;
		out->source = strdup("environment");
		return 0;
	}
	profile = env("AWS_PROFILE");
	if (profile == NULL || profile[0] == '\0')
		profile = "default";
	if (from_profile(out, profile, env))
		return 0;
	snprintf(err, errlen,
		 "no AWS credentials: set profile-name, AWS_ACCESS_KEY_ID and "
		 "AWS_SECRET_ACCESS_KEY, or a [%s] profile in ~/.aws/credentials",
		 profile);
	return -1;
}

void
aws_creds_clear(struct aws_creds *c)
{
	free(c->access_key_id);
	privsep_free_secret_str(c->secret_access_key);
	privsep_free_secret_str(c->session_token);
	free(c->source);
	memset(c, 0, sizeof(*c));
}

char *
aws_endpoint(const char *service, const char *region, const char *(*env)(const char *))
{
	const char *var = strcmp(service, "servicequotas") == 0 ? "AWS_ENDPOINT_URL_SERVICE_QUOTAS"
			  : strcmp(service, "s3") == 0		? "AWS_ENDPOINT_URL_S3"
								: "AWS_ENDPOINT_URL_EC2";
	const char *v;
	char buf[1024];
	size_t n;

	if (env == NULL)
		env = std_env;
	v = env(var);
	if (v == NULL || v[0] == '\0')
		v = env("AWS_ENDPOINT_URL");
	if (v != NULL && v[0] != '\0')
		snprintf(buf, sizeof(buf), "%s", v);
	else
		snprintf(buf, sizeof(buf), "https://%s.%s.amazonaws.com", service, region);
	n = strlen(buf);
	while (n > 0 && buf[n - 1] == '/')
		buf[--n] = '\0';
	return strdup(buf);
}

/* ---- calls -------------------------------------------------------------------- */

struct aws_api {
	struct event_base *base;
	struct http_client *mut, *ro; /* mutating calls at rate, reads at 10x */
	struct aws_creds creds;
	char *region;
	char *ep_ec2, *ep_s3, *ep_sq;
	char *sig_ec2, *sig_s3, *sig_sq;
	int max_retries;
	double backoff_max;
	json_t *counts;
	unsigned long long total;
	struct aws_call *calls; /* doubly linked, for free */
};

struct aws_call {
	struct aws_api *a;
	struct aws_call *prev, *next;
	struct http_client *client;
	struct http_req *req;
	struct event *retry_ev;
	char *kind; /* "ec2:RunInstances" */
	char *method, *url, *sig;
	char *body;
	size_t body_len;
	char **headers; /* NULL-terminated */
	int xml;
	unsigned attempts;
	aws_cb cb;
	void *arg;
};

struct aws_api *
aws_api_new(struct event_base *base, const struct aws_api_options *o, const char *profile,
	    char *err, size_t errlen)
{
	struct aws_api *a = calloc(1, sizeof(*a));
	struct http_client_options ho = {0};
	char buf[256];

	if (a == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (curl_dl_load("driver aws", err, errlen) != 0 ||
	    xml_dl_load("driver aws", err, errlen) != 0) {
		free(a);
		return NULL;
	}
	if (aws_creds_find(&a->creds, profile, o->env, err, errlen) != 0) {
		free(a);
		return NULL;
	}
	a->base = base;
	a->region = strdup(o->region);
	a->ep_ec2 = aws_endpoint("ec2", o->region, o->env);
	a->ep_s3 = aws_endpoint("s3", o->region, o->env);
	a->ep_sq = aws_endpoint("servicequotas", o->region, o->env);
	snprintf(buf, sizeof(buf), "aws:amz:%s:ec2", o->region);
	a->sig_ec2 = strdup(buf);
	snprintf(buf, sizeof(buf), "aws:amz:%s:s3", o->region);
	a->sig_s3 = strdup(buf);
	snprintf(buf, sizeof(buf), "aws:amz:%s:servicequotas", o->region);
	a->sig_sq = strdup(buf);
	a->max_retries = o->max_retries > 0 ? o->max_retries : 6;
	a->backoff_max = o->backoff_max > 0 ? o->backoff_max : 20.0;
	a->counts = json_object();
	ho.rate = o->rate;
	ho.max_retries = -1; /* AWS throttles with 503 + an error code: ours */
	ho.max_concurrency = 16;
	a->mut = http_client_new(base, &ho, err, errlen);
	ho.rate = o->rate > 0 ? o->rate * 10.0 : 0;
	a->ro = a->mut != NULL ? http_client_new(base, &ho, err, errlen) : NULL;
	if (a->ro == NULL) {
		aws_api_free(a);
		return NULL;
	}
	log_info("aws: region %s, credentials from %s (key %s), EC2 endpoint %s", a->region,
		 a->creds.source, a->creds.access_key_id, a->ep_ec2);
	return a;
}

static void
call_free(struct aws_call *c)
{
	size_t i;

	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		c->a->calls = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	if (c->retry_ev != NULL)
		event_free(c->retry_ev);
	for (i = 0; c->headers != NULL && c->headers[i] != NULL; i++)
		free(c->headers[i]);
	free(c->headers);
	free(c->kind);
	free(c->method);
	free(c->url);
	free(c->body);
	free(c);
}

void
aws_call_cancel(struct aws_call *c)
{
	if (c == NULL)
		return;
	http_cancel(c->req);
	call_free(c);
}

void
aws_api_free(struct aws_api *a)
{
	if (a == NULL)
		return;
	while (a->calls != NULL)
		aws_call_cancel(a->calls);
	http_client_free(a->mut);
	http_client_free(a->ro);
	aws_creds_clear(&a->creds);
	free(a->region);
	free(a->ep_ec2);
	free(a->ep_s3);
	free(a->ep_sq);
	free(a->sig_ec2);
	free(a->sig_s3);
	free(a->sig_sq);
	json_decref(a->counts);
	free(a);
}

const struct aws_creds *
aws_api_creds(const struct aws_api *a)
{
	return &a->creds;
}

const json_t *
aws_api_counts(const struct aws_api *a)
{
	return a->counts;
}

unsigned long long
aws_api_total(const struct aws_api *a)
{
	return a->total;
}

static void call_start(struct aws_call *c);

static void
retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	call_start(arg);
}

/* Throttling and passing server trouble, retried as the SDKs' standard
 * retry mode does. */
static int
retryable(int status, const char *code)
{
	if (code == NULL)
		return status == 0;
	return strcmp(code, "RequestLimitExceeded") == 0 || strcmp(code, "Throttling") == 0 ||
	       strcmp(code, "ThrottlingException") == 0 || strcmp(code, "SlowDown") == 0 ||
	       strcmp(code, "TooManyRequestsException") == 0 ||
	       strcmp(code, "RequestThrottled") == 0 || strcmp(code, "InternalError") == 0 ||
	       strcmp(code, "Unavailable") == 0 || strcmp(code, "ServiceUnavailable") == 0 ||
	       strcmp(code, "ConnectionError") == 0 ||
	       (status >= 502 && status <= 504 && strcmp(code, "HttpError") == 0);
}

xmlDoc *
aws_answer_parse(int status, const char *body, size_t len, int xml, char *code, size_t codelen,
		 char *msg, size_t msglen)
{
	xmlDoc *doc = NULL;
	int ok = status >= 200 && status < 300;

	code[0] = '\0';
	msg[0] = '\0';
	if (len > INT32_MAX) {
		snprintf(code, codelen, "MalformedAnswer");
		snprintf(msg, msglen, "answer too large");
		return NULL;
	}
	if (xml && len > 0 && xml_dl_load(NULL, msg, msglen) != 0) {
		snprintf(code, codelen, "MissingLibrary");
		return NULL;
	}
	if (xml && len > 0) {
		doc = xmlReadMemory(body, (int)len, "aws.xml", NULL,
				    XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
		if (doc == NULL) {
			snprintf(code, codelen, ok ? "MalformedAnswer" : "HttpError");
			snprintf(msg, msglen, ok ? "unparsable XML answer" : "HTTP %d", status);
		} else if (!ok) {
			xmlNode *root = xmlDocGetRootElement(doc);
			/* EC2: Response/Errors/Error; S3: Error */
			xmlNode *e = root != NULL && xmlStrcmp(root->name, BAD_CAST "Error") == 0
					 ? root
					 : aws_xpath(root, "Errors/Error");
			aws_xtext(e, "Code", code, codelen);
			aws_xtext(e, "Message", msg, msglen);
			if (code[0] == '\0')
				snprintf(code, codelen, "HttpError");
			xmlFreeDoc(doc);
			doc = NULL;
		}
	} else if (!ok) {
		json_t *j = json_loadb(body, len, 0, NULL);
		const char *t = json_string_value(json_object_get(j, "__type"));
		const char *m = json_string_value(json_object_get(j, "message"));
		const char *h;

		if (t == NULL)
			t = "HttpError";
		h = strchr(t, '#'); /* "com.amazonaws...#Code" */
		snprintf(code, codelen, "%s", h != NULL ? h + 1 : t);
		if (code[0] == '\0') /* "" or "ns#": still an error (found by fuzzing) */
			snprintf(code, codelen, "HttpError");
		if (m != NULL)
			snprintf(msg, msglen, "%s", m);
		else
			snprintf(msg, msglen, "HTTP %d", status);
		json_decref(j);
	}
	return doc;
}

static void
http_done(const struct http_response *res, void *arg)
{
	struct aws_call *c = arg;
	struct aws_api *a = c->a;
	struct aws_result r = {0};
	xmlDoc *doc = NULL;
	char code[128] = "", msg[512] = "";
	json_t *n;

	c->req = NULL;
	a->total++;
	n = json_object_get(a->counts, c->kind);
	json_object_set_new(a->counts, c->kind,
			    json_integer(n != NULL ? json_integer_value(n) + 1 : 1));
	r.status = res->status;
	r.body = res->body;
	r.body_len = res->body_len;
	r.attempts = c->attempts;
	r.etag = http_response_header(res, "ETag");
	if (res->error != NULL) {
		snprintf(code, sizeof(code), "ConnectionError");
		snprintf(msg, sizeof(msg), "%s", res->error);
	} else {
		doc = aws_answer_parse(res->status, res->body, res->body_len, c->xml, code,
				       sizeof(code), msg, sizeof(msg));
		if (doc != NULL)
			r.root = xmlDocGetRootElement(doc);
	}
	if (code[0] != '\0' && retryable(res->error != NULL ? 0 : res->status, code) &&
	    c->attempts <= (unsigned)a->max_retries) {
		/* full jitter backoff, as the SDKs' standard retry mode */
		double cap = fmin(a->backoff_max, 0.5 * pow(2.0, c->attempts - 1));
		double d = cap * (0.5 + 0.5 * ((double)rand() / RAND_MAX));
		struct timeval tv = {(time_t)d, (suseconds_t)((d - floor(d)) * 1e6)};

		char why[700];

		snprintf(why, sizeof(why), "%s: %s", code, msg);
		http_note_retry(c->kind, res->error != NULL ? 0 : res->status, why, c->attempts, d);
		if (doc != NULL)
			xmlFreeDoc(doc);
		if (c->retry_ev == NULL)
			c->retry_ev = evtimer_new(a->base, retry_cb, c);
		evtimer_add(c->retry_ev, &tv);
		return;
	}
	if (code[0] != '\0') {
		r.code = code;
		r.message = msg;
	}
	c->cb(&r, c->arg);
	if (doc != NULL)
		xmlFreeDoc(doc);
	call_free(c);
}

static void
call_start(struct aws_call *c)
{
	struct http_request_params p = {0};

	c->attempts++;
	p.method = c->method;
	p.url = c->url;
	p.headers = (const char *const *)c->headers;
	p.body = c->body;
	p.body_len = c->body_len;
	p.aws_sigv4 = c->sig;
	p.username = c->a->creds.access_key_id;
	p.password = c->a->creds.secret_access_key;
	p.api = c->kind; /* "ec2:RunInstances" in retry logs and counts */
	c->req = http_request(c->client, &p, http_done, c);
}

static struct aws_call *
call_new(struct aws_api *a, struct http_client *client, const char *kind, const char *method,
	 const char *url, const char *sig, const char *body, size_t len, int xml, aws_cb cb,
	 void *arg, const char *const *extra)
{
	struct aws_call *c = calloc(1, sizeof(*c));
	size_t n = 0, i;
	char tok[4096];

	if (c == NULL)
		abort();
	c->a = a;
	c->client = client;
	c->kind = strdup(kind);
	c->method = strdup(method);
	c->url = strdup(url);
	c->sig = (char *)sig;
	if (body != NULL) {
		c->body = malloc(len + 1);
		memcpy(c->body, body, len);
		c->body[len] = '\0';
		c->body_len = len;
	}
	c->xml = xml;
	c->cb = cb;
	c->arg = arg;
	for (i = 0; extra != NULL && extra[i] != NULL; i++)
		;
	c->headers = calloc(i + 2, sizeof(char *));
	for (i = 0; extra != NULL && extra[i] != NULL; i++)
		c->headers[n++] = strdup(extra[i]);
	if (a->creds.session_token != NULL) {
		snprintf(tok, sizeof(tok), "X-Amz-Security-Token: %s", a->creds.session_token);
		c->headers[n++] = strdup(tok);
	}
	c->next = a->calls;
	if (a->calls != NULL)
		a->calls->prev = c;
	a->calls = c;
	call_start(c);
	return c;
}

struct aws_call *
aws_ec2(struct aws_api *a, const char *action, const char *params, int mutating, aws_cb cb,
	void *arg)
{
	static const char *const hdrs[] = {
	    "Content-Type: application/x-www-form-urlencoded; charset=utf-8", NULL};
	char *body = NULL, kind[128], url[1100];
	struct aws_call *c;

	if (asprintf(&body, "Action=%s&Version=2016-11-15%s", action,
		     params != NULL ? params : "") < 0)
		abort();
	snprintf(kind, sizeof(kind), "ec2:%s", action);
	snprintf(url, sizeof(url), "%s/", a->ep_ec2);
	c = call_new(a, mutating ? a->mut : a->ro, kind, "POST", url, a->sig_ec2, body,
		     strlen(body), 1, cb, arg, hdrs);
	free(body);
	return c;
}

struct aws_call *
aws_quotas(struct aws_api *a, const char *target, const char *json, aws_cb cb, void *arg)
{
	char kind[128], url[1100], th[256];
	const char *hdrs[] = {"Content-Type: application/x-amz-json-1.1", th, NULL};

	snprintf(th, sizeof(th), "X-Amz-Target: ServiceQuotasV20190624.%s", target);
	snprintf(kind, sizeof(kind), "servicequotas:%s", target);
	snprintf(url, sizeof(url), "%s/", a->ep_sq);
	return call_new(a, a->ro, kind, "POST", url, a->sig_sq, json, strlen(json), 0, cb, arg,
			hdrs);
}

struct aws_call *
aws_s3(struct aws_api *a, const char *method, const char *path, const void *body, size_t len,
       const char *const *headers, aws_cb cb, void *arg)
{
	char kind[128], url[4096];

	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0, i;
	char hash[200] = "x-amz-content-sha256: ";
	const char *hdrs[16];
	size_t n = 0;

	snprintf(kind, sizeof(kind), "s3:%s", method);
	snprintf(url, sizeof(url), "%s%s", a->ep_s3, path);
	EVP_Digest(body != NULL ? body : "", body != NULL ? len : 0, md, &mdlen, EVP_sha256(),
		   NULL);
	for (i = 0; i < mdlen; i++)
		snprintf(hash + strlen(hash), sizeof(hash) - strlen(hash), "%02x", md[i]);
	hdrs[n++] = hash;
	for (i = 0; headers != NULL && headers[i] != NULL && n < 15; i++)
		hdrs[n++] = headers[i];
	hdrs[n] = NULL;
	return call_new(a, strcmp(method, "GET") == 0 ? a->ro : a->mut, kind, method, url,
			a->sig_s3, body, len, 1, cb, arg, hdrs);
}

/* ---- XML and form helpers ------------------------------------------------------- */

xmlNode *
aws_xchild(const xmlNode *n, const char *name)
{
	xmlNode *c;

	if (n == NULL)
		return NULL;
	for (c = n->children; c != NULL; c = c->next)
		if (c->type == XML_ELEMENT_NODE && xmlStrcmp(c->name, BAD_CAST name) == 0)
			return c;
	return NULL;
}

xmlNode *
aws_xpath(const xmlNode *n, const char *path)
{
	char buf[256], *save = NULL, *t;
	const xmlNode *cur = n;

	snprintf(buf, sizeof(buf), "%s", path);
	for (t = strtok_r(buf, "/", &save); t != NULL && cur != NULL;
	     t = strtok_r(NULL, "/", &save))
		cur = aws_xchild(cur, t);
	return (xmlNode *)cur;
}

const char *
aws_xtext(const xmlNode *n, const char *path, char *buf, size_t len)
{
	xmlNode *c = path != NULL ? aws_xpath(n, path) : (xmlNode *)n;
	xmlChar *s;

	if (len > 0)
		buf[0] = '\0';
	if (c == NULL)
		return buf;
	s = xmlNodeGetContent(c);
	if (s != NULL) {
		snprintf(buf, len, "%s", (const char *)s);
		xmlFree(s);
	}
	return buf;
}

xmlNode *
aws_xnext(const xmlNode *n)
{
	xmlNode *c;

	for (c = n->next; c != NULL; c = c->next)
		if (c->type == XML_ELEMENT_NODE && xmlStrcmp(c->name, n->name) == 0)
			return c;
	return NULL;
}

void
aws_form_add(char **s, const char *k, const char *v)
{
	char *ek = curl_easy_escape(NULL, k, 0), *ev = curl_easy_escape(NULL, v ? v : "", 0);
	char *out = NULL;

	if (asprintf(&out, "%s&%s=%s", *s != NULL ? *s : "", ek, ev) < 0)
		abort();
	curl_free(ek);
	curl_free(ev);
	free(*s);
	*s = out;
}

void
aws_form_addf(char **s, const char *v, const char *kfmt, ...)
{
	char k[512];
	va_list ap;

	va_start(ap, kfmt);
	vsnprintf(k, sizeof(k), kfmt, ap);
	va_end(ap);
	aws_form_add(s, k, v);
}
