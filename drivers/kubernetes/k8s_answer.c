/* Reading the Kubernetes API server's answers: see k8s_answer.h. */
#include "drivers/kubernetes/k8s_answer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/config/jsonget.h"
#include "drivers/kubernetes/kubeconfig.h"

json_t *
k8s_answer_json(const char *body, size_t len)
{
	if (body == NULL || len == 0)
		return NULL;
	return json_loadb(body, len, 0, NULL);
}

void
k8s_status_describe(const char *what, int status, const char *error, const json_t *body, char *out,
		    size_t outlen)
{
	const char *msg = json_string_value(json_object_get(body, "message"));
	const char *reason = json_string_value(json_object_get(body, "reason"));

	if (outlen == 0)
		return;
	if (error != NULL)
		snprintf(out, outlen, "%s: %s", what, error);
	else
		snprintf(out, outlen, "%s: %d %s%s%s", what, status, reason ? reason : "",
			 reason ? ": " : "", msg ? msg : "");
}

int
k8s_status_is_quota(int status, const json_t *body)
{
	const char *msg = json_string_value(json_object_get(body, "message"));

	return status == 403 && msg != NULL && strstr(msg, "exceeded quota") != NULL;
}

static int
is_image_pull_error(const char *reason)
{
	static const char *const fatal[] = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName",
					    "ErrImageNeverPull"};
	size_t i;

	for (i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		if (strcmp(reason, fatal[i]) == 0)
			return 1;
	return 0;
}

enum k8s_pod_state
k8s_pod_read(const json_t *pod, char *why, size_t whylen, const char **node_name)
{
	const json_t *st = json_object_get(pod, "status"), *c, *cond;
	const char *phase = np_json_str(st, "phase", "");
	size_t i;

	if (node_name != NULL)
		*node_name = NULL;
	if (whylen > 0)
		why[0] = '\0';
	if (strcmp(phase, "Running") == 0) {
		if (node_name != NULL)
			*node_name = np_json_str(json_object_get(pod, "spec"), "nodeName", NULL);
		snprintf(why, whylen, "pod Running");
		return K8S_POD_RUNNING;
	}
	if (strcmp(phase, "Failed") == 0 || strcmp(phase, "Succeeded") == 0) {
		snprintf(why, whylen, "pod %s: %s", phase, np_json_str(st, "message", ""));
		return K8S_POD_FAILED;
	}
	json_array_foreach(json_object_get(st, "containerStatuses"), i, c)
	{
		const json_t *w = json_object_get(json_object_get(c, "state"), "waiting");
		const char *reason = np_json_str(w, "reason", NULL);
		if (reason == NULL)
			continue;
		if (is_image_pull_error(reason)) {
			snprintf(why, whylen, "image pull failed: %s: %s", reason,
				 np_json_str(w, "message", ""));
			return K8S_POD_FAILED;
		}
		snprintf(why, whylen, "container waiting: %s: %s", reason,
			 np_json_str(w, "message", ""));
		return K8S_POD_PENDING;
	}
	json_array_foreach(json_object_get(st, "conditions"), i, cond)
	{
		if (strcmp(np_json_str(cond, "type", ""), "PodScheduled") == 0 &&
		    strcmp(np_json_str(cond, "status", ""), "False") == 0) {
			snprintf(why, whylen, "not scheduled: %s: %s",
				 np_json_str(cond, "reason", ""), np_json_str(cond, "message", ""));
			return K8S_POD_PENDING;
		}
	}
	snprintf(why, whylen, "pod %s", phase[0] ? phase : "Pending");
	return K8S_POD_PENDING;
}

int
k8s_secret_token(const json_t *secret, int need_ca, char **token, char **ca_crt)
{
	const json_t *data = json_object_get(secret, "data");
	const char *tok = json_string_value(json_object_get(data, "token"));
	const char *ca = json_string_value(json_object_get(data, "ca.crt"));

	*token = NULL;
	*ca_crt = NULL;
	if (tok == NULL || tok[0] == '\0' || (need_ca && (ca == NULL || ca[0] == '\0')))
		return 1; /* the token controller has not filled it yet */
	*token = k8s_b64decode(tok, NULL);
	if (*token == NULL)
		return -1;
	*ca_crt = ca != NULL ? k8s_b64decode(ca, NULL) : NULL;
	return 0;
}

/* An RFC 3339 time as the API server writes it, in seconds since the
 * epoch; 0 when it is not one. */
static double
k8s_rfc3339(const char *s)
{
	int y, mo, d, h, mi, sec, n = 0, oh = 0, om = 0;
	struct tm tm;
	const char *p;
	double t;

	if (s == NULL ||
	    sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 || n == 0)
		return 0;
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 ||
	    h < 0 || mi < 0 || sec < 0)
		return 0;
	p = s + n;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			;
	if (*p == '+' || *p == '-') {
		if (sscanf(p + 1, "%2d:%2d", &oh, &om) != 2 || oh < 0 || oh > 23 || om < 0 ||
		    om > 59)
			return 0;
		if (*p == '-') {
			oh = -oh;
			om = -om;
		}
	} else if (*p != 'Z' && *p != 'z')
		return 0;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = (double)timegm(&tm);
	return t - (double)(oh * 3600 + om * 60);
}

int
k8s_token_request_read(const json_t *tr, char **token, double *expires)
{
	const json_t *st = json_object_get(tr, "status");
	const char *tok = json_string_value(json_object_get(st, "token"));

	*token = NULL;
	*expires = 0;
	if (tok == NULL || tok[0] == '\0')
		return -1;
	*token = strdup(tok);
	if (*token == NULL)
		abort();
	*expires = k8s_rfc3339(json_string_value(json_object_get(st, "expirationTimestamp")));
	return 0;
}

json_t *
k8s_item_meta(int openshift, const json_t *item)
{
	const json_t *md = json_object_get(item, "metadata");
	const json_t *labels = json_object_get(md, "labels"), *v;
	static const char *const keys[] = {"nodepool_provider_name", "nodepool_pool_name"};
	json_t *meta;
	size_t i;

	if (openshift) {
		const char *d = json_string_value(json_object_get(
		    json_object_get(md, "annotations"), "openshift.io/description"));
		if (d == NULL || strncmp(d, K8S_DESC_PREFIX, strlen(K8S_DESC_PREFIX)) != 0)
			return NULL;
		meta = json_loads(d + strlen(K8S_DESC_PREFIX), 0, NULL);
		if (!json_is_object(meta)) {
			json_decref(meta);
			return NULL;
		}
		return meta;
	}
	if (!json_is_string(json_object_get(labels, "nodepool_node_id")))
		return NULL;
	meta = json_object();
	json_object_set(meta, "nodepool_node_id", json_object_get(labels, "nodepool_node_id"));
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if ((v = json_object_get(labels, keys[i])) != NULL)
			json_object_set(meta, keys[i], (json_t *)v);
	return meta;
}

json_t *
k8s_list_owned(const json_t *items, int openshift, const char *provider)
{
	const json_t *it;
	json_t *out;
	size_t i;

	if (!json_is_array(items))
		return NULL;
	out = json_array();
	json_array_foreach(items, i, it)
	{
		json_t *meta;
		const char *name =
		    json_string_value(json_object_get(json_object_get(it, "metadata"), "name"));
		const char *pn;
		if (name == NULL || name[0] == '\0')
			continue;
		meta = k8s_item_meta(openshift, it);
		if (meta == NULL)
			continue;
		pn = json_string_value(json_object_get(meta, "nodepool_provider_name"));
		if (pn == NULL || provider == NULL || strcmp(pn, provider) != 0) {
			json_decref(meta);
			continue;
		}
		json_array_append_new(out, json_pack("{s:s, s:o}", "name", name, "metadata", meta));
	}
	return out;
}
