/* kubeconfig reading: see kubeconfig.h. */
#include "drivers/kubernetes/kubeconfig.h"
#include "lib/core/xalloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "lib/config/config.h"
#include "lib/core/privsep.h"

#define SA_DIR	     "/var/run/secrets/kubernetes.io/serviceaccount"
#define MAX_FILE     (4u << 20) /* a kubeconfig or credential file */
#define MAX_KC_FILES 16

/* The whole file, NUL-terminated; NULL with errno. */
static char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	size_t n;

	if (f == NULL)
		return NULL;
	buf = malloc(MAX_FILE + 1);
	if (buf == NULL) {
		fclose(f);
		errno = ENOMEM;
		return NULL;
	}
	n = fread(buf, 1, MAX_FILE + 1, f);
	fclose(f);
	if (n > MAX_FILE) {
		free(buf);
		errno = EFBIG;
		return NULL;
	}
	buf[n] = '\0';
	if (len != NULL)
		*len = n;
	return buf;
}

char *
k8s_b64decode(const char *s, size_t *len)
{
	size_t n = strlen(s), i, j = 0, pad = 0;
	char *clean = malloc(n + 4), *out;
	int r;

	if (clean == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		if (s[i] != ' ' && s[i] != '\n' && s[i] != '\r' && s[i] != '\t')
			clean[j++] = s[i];
	clean[j] = '\0';
	if (j % 4 != 0) {
		free(clean);
		return NULL;
	}
	if (j >= 1 && clean[j - 1] == '=')
		pad++;
	if (j >= 2 && clean[j - 2] == '=')
		pad++;
	out = malloc(j / 4 * 3 + 1);
	if (out == NULL) {
		free(clean);
		return NULL;
	}
	r = j > 0 ? EVP_DecodeBlock((unsigned char *)out, (unsigned char *)clean, (int)j) : 0;
	free(clean);
	if (r < 0 || (size_t)r < pad) {
		free(out);
		return NULL;
	}
	r -= (int)pad;
	out[r] = '\0';
	if (len != NULL)
		*len = (size_t)r;
	return out;
}

void
k8s_conn_clear(struct k8s_conn *c)
{
	free(c->context);
	free(c->server);
	free(c->ca_pem);
	free(c->cert_pem);
	privsep_free_secret_str(c->key_pem);
	privsep_free_secret_str(c->token);
	privsep_free_secret_str(c->basic);
	free(c->namespace);
	memset(c, 0, sizeof(*c));
}

/* One parsed kubeconfig file. */
struct kc_file {
	char *path;
	char *dir; /* for relative file names */
	json_t *doc;
};

static json_t *
load_yaml(const char *path, char *err, size_t errlen)
{
	size_t len;
	char *buf = slurp(path, &len);
	struct np_cfg_errors *errs;
	struct np_cfg_doc *doc;
	json_t *j = NULL;

	if (buf == NULL) {
		snprintf(err, errlen, "%.300s: %s", path, strerror(errno));
		return NULL;
	}
	errs = np_cfg_errors_new();
	doc = np_cfg_parse(path, buf, len, errs);
	free(buf);
	if (doc == NULL) {
		char *m = errs->n > 0 ? np_cfg_error_format(&errs->v[0]) : NULL;
		snprintf(err, errlen, "%s", m != NULL ? m : "kubeconfig: YAML error");
		free(m);
	} else {
		j = np_cfg_to_json(np_cfg_doc_root(doc));
		if (j != NULL && !json_is_object(j)) {
			json_decref(j);
			j = json_object(); /* empty file: no contexts */
		}
	}
	np_cfg_doc_free(doc);
	np_cfg_errors_free(errs);
	return j;
}

/* The named entry of a list (contexts, clusters, users) across files:
 * the first file that has it wins; *from gets that file. */
static const json_t *
find_named(struct kc_file *files, size_t n, const char *list, const char *name,
	   const struct kc_file **from)
{
	size_t i, k;
	const json_t *e;

	for (i = 0; i < n; i++) {
		json_array_foreach(json_object_get(files[i].doc, list), k, e)
		{
			const char *nm = json_string_value(json_object_get(e, "name"));
			if (nm != NULL && strcmp(nm, name) == 0) {
				*from = &files[i];
				return e;
			}
		}
	}
	return NULL;
}

/* A file's content (PEM or token), relative to dir; NULL with err. */
static char *
read_rel(const char *dir, const char *name, char *err, size_t errlen)
{
	char path[4096];
	char *s;

	if (name[0] == '/' || dir == NULL)
		snprintf(path, sizeof(path), "%s", name);
	else
		snprintf(path, sizeof(path), "%s/%s", dir, name);
	s = slurp(path, NULL);
	if (s == NULL)
		snprintf(err, errlen, "%.300s: %s", path, strerror(errno));
	return s;
}

/* base64 *-data, or the file the plain key names; *out stays NULL when
 * neither is set. -1 with err on a bad value. */
static int
data_or_file(const json_t *o, const char *key, const char *dir, char **out, char *err,
	     size_t errlen)
{
	char dkey[64];
	const char *v;

	snprintf(dkey, sizeof(dkey), "%s-data", key);
	if ((v = json_string_value(json_object_get(o, dkey))) != NULL && v[0] != '\0') {
		*out = k8s_b64decode(v, NULL);
		if (*out == NULL) {
			snprintf(err, errlen, "%s is not valid base64", dkey);
			return -1;
		}
		return 0;
	}
	if ((v = json_string_value(json_object_get(o, key))) != NULL && v[0] != '\0') {
		*out = read_rel(dir, v, err, errlen);
		return *out != NULL ? 0 : -1;
	}
	return 0;
}

static void
chomp(char *s)
{
	size_t n;

	if (s == NULL)
		return;
	n = strlen(s);
	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
		s[--n] = '\0';
}

static int
in_cluster(struct k8s_conn *c, char *err, size_t errlen)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	const char *dir = getenv("NODEPOOLD_K8S_SA_DIR");
	char url[512], e2[256];

	if (dir == NULL || dir[0] == '\0')
		dir = SA_DIR;
	if (host == NULL || host[0] == '\0' || port == NULL || port[0] == '\0') {
		snprintf(err, errlen,
			 "no kubeconfig context and not in a cluster (KUBERNETES_SERVICE_HOST "
			 "and KUBERNETES_SERVICE_PORT unset)");
		return -1;
	}
	if (strchr(host, ':') != NULL)
		snprintf(url, sizeof(url), "https://[%s]:%s", host, port);
	else
		snprintf(url, sizeof(url), "https://%s:%s", host, port);
	c->token = read_rel(dir, "token", e2, sizeof(e2));
	if (c->token == NULL) {
		snprintf(err, errlen, "in-cluster service account: %s", e2);
		return -1;
	}
	chomp(c->token);
	c->ca_pem = read_rel(dir, "ca.crt", e2, sizeof(e2));
	if (c->ca_pem == NULL) {
		snprintf(err, errlen, "in-cluster service account: %s", e2);
		return -1;
	}
	c->namespace = read_rel(dir, "namespace", e2, sizeof(e2));
	chomp(c->namespace);
	c->server = strdup(url);
	c->context = strdup("in-cluster");
	return 0;
}

int
k8s_conn_load(const char *context, struct k8s_conn *out, char *err, size_t errlen)
{
	struct kc_file files[MAX_KC_FILES];
	size_t nfiles = 0, i;
	const char *env = getenv("KUBECONFIG"), *home = getenv("HOME"), *cur = NULL;
	const struct kc_file *cf = NULL, *clf = NULL, *uf = NULL;
	const json_t *ctx, *ctxv, *cl = NULL, *clv, *us = NULL, *usv = NULL;
	const char *clname, *usname, *v;
	char path[4096], e2[512];
	int rc = -1;

	memset(out, 0, sizeof(*out));
	memset(files, 0, sizeof(files));
	if (env != NULL && env[0] != '\0') {
		char *list = strdup(env), *save = NULL, *p;
		for (p = strtok_r(list, ":", &save); p != NULL && nfiles < MAX_KC_FILES;
		     p = strtok_r(NULL, ":", &save)) {
			struct stat st;
			if (stat(p, &st) != 0)
				continue; /* kubectl skips missing files in the list */
			files[nfiles].path = strdup(p);
			nfiles++;
		}
		free(list);
	} else if (home != NULL) {
		struct stat st;
		snprintf(path, sizeof(path), "%s/.kube/config", home);
		if (stat(path, &st) == 0)
			files[nfiles++].path = strdup(path);
	}
	for (i = 0; i < nfiles; i++) {
		char *slash;
		files[i].doc = load_yaml(files[i].path, e2, sizeof(e2));
		if (files[i].doc == NULL) {
			snprintf(err, errlen, "kubeconfig %s", e2);
			goto out;
		}
		files[i].dir = strdup(files[i].path);
		slash = strrchr(files[i].dir, '/');
		if (slash != NULL)
			*slash = '\0';
		else
			strcpy(files[i].dir, ".");
		if (cur == NULL)
			cur = json_string_value(json_object_get(files[i].doc, "current-context"));
	}
	if (context == NULL && (cur == NULL || cur[0] == '\0')) {
		/* as upstream: no context given and none current: in-cluster */
		rc = in_cluster(out, err, errlen);
		goto out;
	}
	if (context == NULL)
		context = cur;
	ctx = find_named(files, nfiles, "contexts", context, &cf);
	if (ctx == NULL) {
		snprintf(err, errlen, "context %s not found in %s", context,
			 nfiles == 0 ? "any kubeconfig (no KUBECONFIG, no ~/.kube/config)"
				     : (nfiles == 1 ? files[0].path : "the KUBECONFIG files"));
		goto out;
	}
	ctxv = json_object_get(ctx, "context");
	clname = json_string_value(json_object_get(ctxv, "cluster"));
	usname = json_string_value(json_object_get(ctxv, "user"));
	if (clname != NULL)
		cl = find_named(files, nfiles, "clusters", clname, &clf);
	if (cl == NULL) {
		snprintf(err, errlen, "context %s: cluster %s not found", context,
			 clname ? clname : "(none)");
		goto out;
	}
	clv = json_object_get(cl, "cluster");
	v = json_string_value(json_object_get(clv, "server"));
	if (v == NULL || v[0] == '\0') {
		snprintf(err, errlen, "cluster %s has no server", clname);
		goto out;
	}
	out->server = strdup(v);
	while (strlen(out->server) > 0 && out->server[strlen(out->server) - 1] == '/')
		out->server[strlen(out->server) - 1] = '\0';
	out->insecure = json_is_true(json_object_get(clv, "insecure-skip-tls-verify"));
	if (data_or_file(clv, "certificate-authority", clf->dir, &out->ca_pem, e2, sizeof(e2)) !=
	    0) {
		snprintf(err, errlen, "cluster %s: %s", clname, e2);
		goto out;
	}
	if (usname != NULL && usname[0] != '\0') {
		us = find_named(files, nfiles, "users", usname, &uf);
		if (us == NULL) {
			snprintf(err, errlen, "context %s: user %s not found", context, usname);
			goto out;
		}
		usv = json_object_get(us, "user");
	}
	if (usv != NULL) {
		if (json_object_get(usv, "exec") != NULL ||
		    json_object_get(usv, "auth-provider") != NULL) {
			snprintf(err, errlen,
				 "user %s uses an %s plugin: nodepoold supports tokens, token "
				 "files and client certificates only",
				 usname, json_object_get(usv, "exec") ? "exec" : "auth-provider");
			goto out;
		}
		if ((v = json_string_value(json_object_get(usv, "token"))) != NULL && v[0])
			out->token = strdup(v);
		else if ((v = json_string_value(json_object_get(usv, "tokenFile"))) != NULL &&
			 v[0]) {
			out->token = read_rel(uf->dir, v, e2, sizeof(e2));
			if (out->token == NULL) {
				snprintf(err, errlen, "user %s: %s", usname, e2);
				goto out;
			}
			chomp(out->token);
		}
		if (data_or_file(usv, "client-certificate", uf->dir, &out->cert_pem, e2,
				 sizeof(e2)) != 0 ||
		    data_or_file(usv, "client-key", uf->dir, &out->key_pem, e2, sizeof(e2)) != 0) {
			snprintf(err, errlen, "user %s: %s", usname, e2);
			goto out;
		}
		if ((out->cert_pem == NULL) != (out->key_pem == NULL)) {
			snprintf(err, errlen, "user %s: a client certificate needs its key",
				 usname);
			goto out;
		}
		if ((v = json_string_value(json_object_get(usv, "username"))) != NULL && v[0]) {
			const char *pw = json_string_value(json_object_get(usv, "password"));
			size_t n = strlen(v) + (pw ? strlen(pw) : 0) + 2;
			out->basic = malloc(n);
			if (out->basic != NULL)
				snprintf(out->basic, n, "%s:%s", v, pw ? pw : "");
		}
	}
	out->namespace = xstrdup(json_string_value(json_object_get(ctxv, "namespace")));
	out->context = strdup(context);
	rc = 0;
out:
	for (i = 0; i < nfiles; i++) {
		free(files[i].path);
		free(files[i].dir);
		json_decref(files[i].doc);
	}
	if (rc != 0)
		k8s_conn_clear(out);
	return rc;
}
