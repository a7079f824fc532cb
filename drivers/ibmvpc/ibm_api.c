/*
 * The ibmvpc driver's wire layer (ibmvpc.h), apart from the adapter so
 * that unit tests and the fuzzer link it alone: IBM Cloud credentials as
 * the IBM SDKs find them, the nodepool metadata upstream encodes in names
 * and resource groups, and the parsers of what the cloud answers (error
 * bodies, pagination links, Cloud Object Storage XML).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "drivers/ibmvpc/ibmvpc.h"
#include "lib/config/jsonget.h"
#include "lib/core/xalloc.h"

static const char *
jstr(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* ---- credentials (exposed in ibmvpc.h) ---------------------------------------------------- */

static const char *
real_env(const char *name)
{
	return getenv(name);
}

/* Parse a credentials file into an object of its KEY=VALUE lines (values
 * unquoted as the SDK does). NULL when it cannot be read. */
static json_t *
read_env_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	json_t *o;

	if (f == NULL)
		return NULL;
	o = json_object();
	while (fgets(line, sizeof(line), f) != NULL) {
		char *k = line, *eq, *v, *e;
		while (isspace((unsigned char)*k))
			k++;
		if (*k == '#' || *k == '\0' || (eq = strchr(k, '=')) == NULL)
			continue;
		*eq = '\0';
		v = eq + 1;
		for (e = eq; e > k && isspace((unsigned char)e[-1]); e--)
			e[-1] = '\0';
		while (isspace((unsigned char)*v))
			v++;
		e = v + strlen(v);
		while (e > v && isspace((unsigned char)e[-1]))
			*--e = '\0';
		if (e - v >= 2 && (*v == '"' || *v == '\'') && e[-1] == *v) {
			e[-1] = '\0';
			v++;
		}
		json_object_set_new(o, k, json_string(v));
	}
	fclose(f);
	return o;
}

static int
has_prefix_key(const json_t *o, const char *pfx)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)o, k, v)
	{
		(void)v;
		if (strncmp(k, pfx, strlen(pfx)) == 0)
			return 1;
	}
	return 0;
}

static int
truthy(const char *s)
{
	return s != NULL && strcasecmp(s, "true") == 0;
}

int
ibm_creds_find(struct ibm_creds *out, const char *file, const char *(*env)(const char *name),
	       char *err, size_t errlen)
{
	json_t *kv = NULL;
	const char *path = NULL, *home;
	char buf[4096];
	const char *(*get)(const char *) = env ? env : real_env;
	int from_file = 0;

#define CRED(k) (from_file ? np_json_str(kv, (k), NULL) : get(k))
#define ANY(k)	(np_json_str(kv, (k), NULL) ? np_json_str(kv, (k), NULL) : get(k))
	memset(out, 0, sizeof(*out));
	if (file != NULL) {
		path = file;
		kv = read_env_file(file);
		if (kv == NULL) {
			snprintf(err, errlen, "cannot read credentials-file %s: %s", file,
				 strerror(errno));
			return -1;
		}
	} else if (get("IBM_CREDENTIALS_FILE") != NULL) {
		path = get("IBM_CREDENTIALS_FILE");
		kv = read_env_file(path);
	} else {
		if ((home = get("HOME")) != NULL) {
			snprintf(buf, sizeof(buf), "%s/ibm-credentials.env", home);
			if ((kv = read_env_file(buf)) != NULL)
				path = buf;
		}
		if (kv == NULL && (kv = read_env_file("ibm-credentials.env")) != NULL)
			path = "ibm-credentials.env";
	}
	if (kv == NULL)
		kv = json_object();
	from_file = has_prefix_key(kv, "VPC_");
	if (!from_file && get("VPC_APIKEY") == NULL && get("VPC_AUTH_TYPE") == NULL) {
		snprintf(err, errlen,
			 "no IBM Cloud credentials: no VPC_* entries in %s and no VPC_APIKEY in "
			 "the environment",
			 path ? path
			      : "a credentials file (credentials-file, IBM_CREDENTIALS_FILE, "
				"~/ibm-credentials.env)");
		json_decref(kv);
		return -1;
	}
	out->source = np_strdupz(from_file ? path : "environment");
	out->apikey = np_strdupz(CRED("VPC_APIKEY"));
	out->bearer_token = np_strdupz(CRED("VPC_BEARER_TOKEN"));
	out->auth_type = np_strdupz(CRED("VPC_AUTH_TYPE") ? CRED("VPC_AUTH_TYPE")
				    : out->apikey	  ? "iam"
				    : out->bearer_token	  ? "bearertoken"
							  : "iam");
	out->auth_url = np_strdupz(CRED("VPC_AUTH_URL"));
	out->vpc_url = np_strdupz(CRED("VPC_URL"));
	out->disable_ssl = truthy(CRED("VPC_DISABLE_SSL"));
	out->auth_disable_ssl = truthy(CRED("VPC_AUTH_DISABLE_SSL"));
	out->rm_url = np_strdupz(ANY("RESOURCE_MANAGER_URL"));
	out->rc_url = np_strdupz(ANY("RESOURCE_CONTROLLER_URL"));
	json_decref(kv);
#undef CRED
#undef ANY
	if (strcasecmp(out->auth_type, "iam") == 0) {
		if (out->apikey == NULL || out->apikey[0] == '\0') {
			snprintf(err, errlen,
				 "IBM Cloud credentials from %s: auth type iam without "
				 "VPC_APIKEY",
				 out->source);
			ibm_creds_clear(out);
			return -1;
		}
	} else if (strcasecmp(out->auth_type, "bearertoken") == 0) {
		if (out->bearer_token == NULL) {
			snprintf(err, errlen,
				 "IBM Cloud credentials from %s: auth type bearertoken "
				 "without VPC_BEARER_TOKEN",
				 out->source);
			ibm_creds_clear(out);
			return -1;
		}
	} else {
		snprintf(err, errlen,
			 "IBM Cloud credentials from %s: auth type %s is not supported "
			 "(iam, bearertoken)",
			 out->source, out->auth_type);
		ibm_creds_clear(out);
		return -1;
	}
	return 0;
}

void
ibm_creds_clear(struct ibm_creds *c)
{
	if (c == NULL)
		return;
	free(c->auth_type);
	free(c->apikey);
	free(c->bearer_token);
	free(c->auth_url);
	free(c->vpc_url);
	free(c->rm_url);
	free(c->rc_url);
	free(c->source);
	memset(c, 0, sizeof(*c));
}

/* ---- names as metadata (exposed in ibmvpc.h) ------------------------------------------------ */

/* s is "<pfx><digits>" (all of it when whole): the digits, copied to out. */
static int
digits_after(const char *s, const char *pfx, int whole, char *out, size_t n)
{
	size_t pl = strlen(pfx), i = 0;

	if (s == NULL || strncmp(s, pfx, pl) != 0)
		return 0;
	s += pl;
	while (isdigit((unsigned char)s[i]))
		i++;
	if (i == 0 || i >= n || (whole && s[i] != '\0'))
		return 0;
	memcpy(out, s, i);
	out[i] = '\0';
	return 1;
}

/* [A-Za-z0-9-]+ */
static int
rg_part(const char *s, size_t n)
{
	size_t i;

	if (n == 0)
		return 0;
	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '-')
			return 0;
	return 1;
}

json_t *
ibm_name_metadata(const char *obj_name, const char *rg_name)
{
	json_t *m = json_object();
	char id[64];

	if (digits_after(obj_name, "np", 1, id, sizeof(id)))
		json_object_set_new(m, "nodepool_node_id", json_string(id));
	else if (digits_after(obj_name, "npimage", 0, id, sizeof(id)))
		json_object_set_new(m, "nodepool_upload_id", json_string(id));
	if (rg_name != NULL && strncmp(rg_name, "np_", 3) == 0) {
		const char *p = rg_name + 3, *us = strchr(p, '_');
		if (us != NULL && rg_part(p, (size_t)(us - p)) && rg_part(us + 1, strlen(us + 1))) {
			json_object_set_new(m, "nodepool_provider_name",
					    json_stringn(p, (size_t)(us - p)));
			json_object_set_new(m, "nodepool_pool_name", json_string(us + 1));
		}
	} else if (rg_name != NULL && strncmp(rg_name, "npimages_", 9) == 0 &&
		   rg_part(rg_name + 9, strlen(rg_name + 9))) {
		json_object_set_new(m, "nodepool_provider_name", json_string(rg_name + 9));
	}
	return m;
}

/* ---- answers ------------------------------------------------------------------------------ */

/* The message of an error answer: the VPC API's {"errors": [{"code",
 * "message"}]}, IAM's {"errorCode", "errorMessage"}, the resource APIs'
 * {"message"}; else the body's start. */
void
ibm_error_text(int status, const char *error, const json_t *body, const char *raw, char *out,
	       size_t n)
{
	const json_t *e = json_array_get(json_object_get(body, "errors"), 0);

	if (error != NULL)
		snprintf(out, n, "%s", error);
	else if (e != NULL)
		snprintf(out, n, "HTTP %d %s: %.200s", status,
			 jstr(e, "code") ? jstr(e, "code") : "",
			 jstr(e, "message") ? jstr(e, "message") : "");
	else if (jstr(body, "errorMessage") != NULL)
		snprintf(out, n, "HTTP %d %s: %.200s", status,
			 jstr(body, "errorCode") ? jstr(body, "errorCode") : "",
			 jstr(body, "errorMessage"));
	else if (jstr(body, "message") != NULL)
		snprintf(out, n, "HTTP %d: %.200s", status, jstr(body, "message"));
	else
		snprintf(out, n, "HTTP %d: %.200s", status, raw ? raw : "");
}

void
ibm_urlenc(const char *s, char *out, size_t n)
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

int
ibm_next_start(const char *href, char *out, size_t n)
{
	/* the SDK's get_query_param(next.href, "start") */
	const char *s = href;

	while (s != NULL && (s = strstr(s, "start=")) != NULL) {
		if (s != href && (s[-1] == '?' || s[-1] == '&')) {
			size_t len = strcspn(s + 6, "&#");
			if (len == 0 || len >= n)
				return 0;
			memcpy(out, s + 6, len);
			out[len] = '\0';
			return 1;
		}
		s += 6;
	}
	return 0;
}

/* The text of the first <tag>...</tag> in an S3 XML answer from *from on
 * (basic entities decoded) into out; *from moves past it. 0 when none. */
int
ibm_xml_text(const char **from, const char *tag, char *out, size_t n)
{
	char open[80], close[80];
	const char *b, *e;
	size_t o = 0;

	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	if (*from == NULL || (b = strstr(*from, open)) == NULL)
		return 0;
	b += strlen(open);
	if ((e = strstr(b, close)) == NULL)
		return 0;
	*from = e + strlen(close);
	while (b < e && o + 1 < n) {
		static const struct {
			const char *ent;
			char ch;
		} ents[] = {{"&amp;", '&'},
			    {"&lt;", '<'},
			    {"&gt;", '>'},
			    {"&quot;", '"'},
			    {"&apos;", '\''}};
		size_t k;
		int done = 0;
		for (k = 0; k < sizeof(ents) / sizeof(ents[0]) && *b == '&'; k++)
			if (strncmp(b, ents[k].ent, strlen(ents[k].ent)) == 0) {
				out[o++] = ents[k].ch;
				b += strlen(ents[k].ent);
				done = 1;
				break;
			}
		if (!done)
			out[o++] = *b++;
	}
	out[o] = '\0';
	return 1;
}
