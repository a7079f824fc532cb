/*
 * clouds.yaml / secure.yaml lookup and Keystone v3 request shapes, as
 * openstacksdk's config loader (openstack/config/loader.py) and keystoneauth's
 * v3 password and application-credential plugins (see os_cloud.h).
 */
#include "drivers/openstack/os_cloud.h"
#include "lib/core/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "lib/config/config.h"
#include "lib/core/privsep.h"

/* The file's YAML as JSON, or NULL (not there: *missing = 1; bad: err). */
static json_t *
read_yaml(const char *path, int *missing, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t len = 0, cap = 0, n;
	struct np_cfg_errors *errs;
	struct np_cfg_doc *doc;
	json_t *j = NULL;

	*missing = 0;
	if (f == NULL) {
		*missing = 1;
		return NULL;
	}
	for (;;) {
		if (len + 4096 > cap) {
			cap = cap ? cap * 2 : 8192;
			if ((buf = realloc(buf, cap)) == NULL)
				abort();
		}
		n = fread(buf + len, 1, cap - len, f);
		if (n == 0)
			break;
		len += n;
	}
	fclose(f);
	errs = np_cfg_errors_new();
	doc = np_cfg_parse(path, buf ? buf : "", len, errs);
	if (doc == NULL || np_cfg_errors_count(errs) > 0) {
		char *m = errs->n > 0 ? np_cfg_error_format(&errs->v[0]) : NULL;
		snprintf(err, errlen, "%s", m ? m : path);
		free(m);
	} else {
		j = np_cfg_to_json(np_cfg_doc_root(doc));
	}
	np_cfg_doc_free(doc);
	np_cfg_errors_free(errs);
	free(buf);
	return j;
}

/* dst <- src, maps merged key by key (src wins). */
static void
merge(json_t *dst, const json_t *src)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)src, k, v)
	{
		json_t *d = json_object_get(dst, k);
		if (json_is_object(d) && json_is_object(v))
			merge(d, v);
		else
			json_object_set_new(dst, k, json_deep_copy(v));
	}
}

/* Look for name in the standard places; the JSON of the first file found
 * (path copied into found), NULL with found[0] = 0 when none, NULL with
 * err set when one is bad. */
static json_t *
find_file(const char *env, const char *name, char *found, size_t flen, char *err, size_t errlen)
{
	char dirs[3][900];
	const char *e = getenv(env), *home = getenv("HOME"), *xdg = getenv("XDG_CONFIG_HOME");
	int missing, i;
	json_t *j;

	found[0] = '\0';
	if (e != NULL && e[0] != '\0') {
		j = read_yaml(e, &missing, err, errlen);
		if (j != NULL || !missing) {
			snprintf(found, flen, "%s", e);
			return j;
		}
	}
	snprintf(dirs[0], sizeof(dirs[0]), ".");
	if (xdg != NULL && xdg[0] != '\0')
		snprintf(dirs[1], sizeof(dirs[1]), "%.880s/openstack", xdg);
	else
		snprintf(dirs[1], sizeof(dirs[1]), "%.870s/.config/openstack", home ? home : "");
	snprintf(dirs[2], sizeof(dirs[2]), "/etc/openstack");
	for (i = 0; i < 3; i++) {
		char path[1100];
		snprintf(path, sizeof(path), "%.900s/%.100s", dirs[i], name);
		j = read_yaml(path, &missing, err, errlen);
		if (j != NULL || !missing) {
			snprintf(found, flen, "%s", path);
			return j;
		}
	}
	return NULL;
}

static const char *
os_jstr(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);

	if (json_is_string(v))
		return json_string_value(v);
	return NULL;
}

static char *
jdup2(const json_t *o, const char *k1, const char *k2)
{
	const char *v = os_jstr(o, k1);

	if (v == NULL && k2 != NULL)
		v = os_jstr(o, k2);
	return xstrdup(v);
}

/* The name of a regions[] entry: a string or {name: ...}. */
static const char *
region_name(const json_t *r)
{
	if (json_is_string(r))
		return json_string_value(r);
	return os_jstr(r, "name");
}

int
os_cloud_load(const char *cloud, const char *region, struct os_cloud *out, char *err, size_t errlen)
{
	char path[1100], spath[1100];
	json_t *clouds, *secure, *c, *auth, *regions, *v;
	const char *k;
	size_t i;
	int found_region;

	memset(out, 0, sizeof(*out));
	err[0] = '\0';
	clouds = find_file("OS_CLIENT_CONFIG_FILE", "clouds.yaml", path, sizeof(path), err, errlen);
	if (clouds == NULL) {
		if (err[0] == '\0')
			snprintf(err, errlen,
				 "no clouds.yaml (looked at $OS_CLIENT_CONFIG_FILE, ./, "
				 "~/.config/openstack/, /etc/openstack/)");
		return -1;
	}
	c = json_object_get(json_object_get(clouds, "clouds"), cloud);
	if (!json_is_object(c)) {
		snprintf(err, errlen, "%s: no cloud named %s", path, cloud);
		json_decref(clouds);
		return -1;
	}
	c = json_deep_copy(c);
	secure =
	    find_file("OS_CLIENT_SECURE_FILE", "secure.yaml", spath, sizeof(spath), err, errlen);
	if (secure == NULL && err[0] != '\0') {
		json_decref(c);
		json_decref(clouds);
		return -1;
	}
	v = json_object_get(json_object_get(secure, "clouds"), cloud);
	if (json_is_object(v))
		merge(c, v);
	json_decref(secure);
	json_decref(clouds);

	out->name = xstrdup(cloud);
	out->file = xstrdup(path);
	auth = json_object_get(c, "auth");
	out->auth_url = jdup2(auth, "auth_url", NULL);
	out->username = jdup2(auth, "username", NULL);
	out->user_id = jdup2(auth, "user_id", NULL);
	out->password = jdup2(auth, "password", NULL);
	out->user_domain_name = jdup2(auth, "user_domain_name", "domain_name");
	out->user_domain_id = jdup2(auth, "user_domain_id", "domain_id");
	out->project_name = jdup2(auth, "project_name", "tenant_name");
	out->project_id = jdup2(auth, "project_id", "tenant_id");
	out->project_domain_name = jdup2(auth, "project_domain_name", "domain_name");
	out->project_domain_id = jdup2(auth, "project_domain_id", "domain_id");
	out->appcred_id = jdup2(auth, "application_credential_id", NULL);
	out->appcred_name = jdup2(auth, "application_credential_name", NULL);
	out->appcred_secret = jdup2(auth, "application_credential_secret", NULL);
	k = os_jstr(c, "auth_type");
	out->appcred = (k != NULL && strstr(k, "applicationcredential") != NULL) ||
		       (k == NULL && out->appcred_secret != NULL);
	out->interface = xstrdup(os_jstr(c, "interface")       ? os_jstr(c, "interface")
				 : os_jstr(c, "endpoint_type") ? os_jstr(c, "endpoint_type")
							       : "public");
	out->cacert = jdup2(c, "cacert", NULL);
	v = json_object_get(c, "verify");
	out->verify = !(json_is_false(v) ||
			(json_is_string(v) && strcasecmp(json_string_value(v), "false") == 0));
	v = json_object_get(c, "api_timeout");
	out->api_timeout = json_is_number(v)   ? json_number_value(v)
			   : json_is_string(v) ? atof(json_string_value(v))
					       : 0;
	out->image_format =
	    xstrdup(os_jstr(c, "image_format") ? os_jstr(c, "image_format") : "qcow2");
	out->overrides = json_object();
	json_object_foreach(c, k, v)
	{
		size_t kl = strlen(k), sl = strlen("_endpoint_override");
		if (json_is_string(v) && kl > sl &&
		    strcmp(k + kl - sl, "_endpoint_override") == 0) {
			char svc[64];
			snprintf(svc, sizeof(svc), "%.*s", (int)(kl - sl), k);
			for (i = 0; svc[i]; i++)
				if (svc[i] == '_')
					svc[i] = '-';
			json_object_set(out->overrides, svc, v);
		}
	}

	/* the region: the provider's, which the cloud must list when it lists
	 * any; else the cloud's region_name; else its only region */
	regions = json_object_get(c, "regions");
	if (region != NULL && region[0] != '\0') {
		found_region = json_array_size(regions) == 0;
		for (i = 0; i < json_array_size(regions); i++) {
			const char *rn = region_name(json_array_get(regions, i));
			if (rn != NULL && strcmp(rn, region) == 0)
				found_region = 1;
		}
		if (!found_region) {
			snprintf(err, errlen, "%s: cloud %s has no region %s", path, cloud, region);
			json_decref(c);
			os_cloud_clear(out);
			return -1;
		}
		out->region = xstrdup(region);
	} else if (os_jstr(c, "region_name") != NULL) {
		out->region = xstrdup(os_jstr(c, "region_name"));
	} else if (json_array_size(regions) > 0) {
		out->region = xstrdup(region_name(json_array_get(regions, 0)));
	}
	json_decref(c);
	if (out->auth_url == NULL) {
		snprintf(err, errlen, "%s: cloud %s has no auth.auth_url", path, cloud);
		os_cloud_clear(out);
		return -1;
	}
	if (out->appcred ? out->appcred_secret == NULL : out->password == NULL) {
		snprintf(err, errlen, "%s: cloud %s: no %s (also looked in secure.yaml)", path,
			 cloud, out->appcred ? "application_credential_secret" : "password");
		os_cloud_clear(out);
		return -1;
	}
	return 0;
}

void
os_cloud_clear(struct os_cloud *c)
{
	char **s[] = {&c->name,
		      &c->file,
		      &c->region,
		      &c->auth_url,
		      &c->username,
		      &c->user_id,
		      &c->password,
		      &c->user_domain_name,
		      &c->user_domain_id,
		      &c->project_name,
		      &c->project_id,
		      &c->project_domain_name,
		      &c->project_domain_id,
		      &c->appcred_id,
		      &c->appcred_name,
		      &c->appcred_secret,
		      &c->interface,
		      &c->cacert,
		      &c->image_format};
	size_t i;

	/* secrets zeroed before they are freed (issue 23) */
	privsep_free_secret_str(c->password);
	privsep_free_secret_str(c->appcred_secret);
	c->password = c->appcred_secret = NULL;
	for (i = 0; i < sizeof(s) / sizeof(s[0]); i++)
		free(*s[i]);
	json_decref(c->overrides);
	memset(c, 0, sizeof(*c));
}

/* {"name": n, "domain": {...}} or {"id": id} */
static json_t *
named(const char *id, const char *name, const char *dom_id, const char *dom_name)
{
	json_t *o = json_object();

	if (id != NULL) {
		json_object_set_new(o, "id", json_string(id));
		return o;
	}
	json_object_set_new(o, "name", json_string(name ? name : ""));
	if (dom_id != NULL)
		json_object_set_new(o, "domain", json_pack("{s:s}", "id", dom_id));
	else
		json_object_set_new(o, "domain",
				    json_pack("{s:s}", "name", dom_name ? dom_name : "Default"));
	return o;
}

json_t *
os_auth_body(const struct os_cloud *c)
{
	json_t *ident, *auth;

	if (c->appcred) {
		json_t *ac;
		if (c->appcred_id != NULL)
			ac = json_pack("{s:s, s:s}", "id", c->appcred_id, "secret",
				       c->appcred_secret);
		else {
			ac = json_pack("{s:s, s:s}", "name", c->appcred_name ? c->appcred_name : "",
				       "secret", c->appcred_secret);
			json_object_set_new(
			    ac, "user",
			    named(c->user_id, c->username, c->user_domain_id, c->user_domain_name));
		}
		ident = json_pack("{s:[s], s:o}", "methods", "application_credential",
				  "application_credential", ac);
		return json_pack("{s:{s:o}}", "auth", "identity", ident);
	}
	{
		json_t *user =
		    named(c->user_id, c->username, c->user_domain_id, c->user_domain_name);
		json_object_set_new(user, "password", json_string(c->password));
		ident =
		    json_pack("{s:[s], s:{s:o}}", "methods", "password", "password", "user", user);
	}
	auth = json_pack("{s:o}", "identity", ident);
	if (c->project_id != NULL || c->project_name != NULL)
		json_object_set_new(auth, "scope",
				    json_pack("{s:o}", "project",
					      named(c->project_id, c->project_name,
						    c->project_domain_id, c->project_domain_name)));
	return json_pack("{s:o}", "auth", auth);
}

char *
os_token_url(const char *auth_url)
{
	size_t n = strlen(auth_url);
	char *u;

	while (n > 0 && auth_url[n - 1] == '/')
		n--;
	if ((u = malloc(n + 32)) == NULL)
		abort();
	if (n >= 3 && strncmp(auth_url + n - 3, "/v3", 3) == 0)
		snprintf(u, n + 32, "%.*s/auth/tokens", (int)n, auth_url);
	else
		snprintf(u, n + 32, "%.*s/v3/auth/tokens", (int)n, auth_url);
	return u;
}

char *
os_catalog_url(const json_t *catalog, const char *const *types, const char *interface,
	       const char *region)
{
	size_t t, i, j;

	for (t = 0; types[t] != NULL; t++) {
		for (i = 0; i < json_array_size(catalog); i++) {
			const json_t *svc = json_array_get(catalog, i), *eps;
			const char *type = os_jstr(svc, "type");
			if (type == NULL || strcmp(type, types[t]) != 0)
				continue;
			eps = json_object_get(svc, "endpoints");
			for (j = 0; j < json_array_size(eps); j++) {
				const json_t *ep = json_array_get(eps, j);
				const char *itf = os_jstr(ep, "interface"),
					   *url = os_jstr(ep, "url"),
					   *r1 = os_jstr(ep, "region_id"),
					   *r2 = os_jstr(ep, "region");
				char *u;
				size_t n;
				if (url == NULL || itf == NULL ||
				    strcmp(itf, interface ? interface : "public") != 0)
					continue;
				if (region != NULL && !(r1 && strcmp(r1, region) == 0) &&
				    !(r2 && strcmp(r2, region) == 0))
					continue;
				u = xstrdup(url);
				n = strlen(u);
				while (n > 0 && u[n - 1] == '/')
					u[--n] = '\0';
				return u;
			}
		}
	}
	return NULL;
}
