/*
 * Per-provider configuration slices and their fingerprints (slice.h,
 * config.h): what each worker and the web process receive.
 */
#include "lib/config/slice.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config/config.h"
#include "lib/config/config_int.h"
#include "lib/core/xalloc.h"

/* The webapp section a web API serves by (web.h's web_options_from_json). */
static json_t *
webapp_json(const struct np_config *cfg)
{
	return json_pack(
	    "{s:i, s:s, s:I, s:I, s:f, s:I, s:f}", "port", cfg->webapp_port, "listen_address",
	    cfg->webapp_listen_address ? cfg->webapp_listen_address : "0.0.0.0", "max_connections",
	    (json_int_t)cfg->webapp_max_connections, "max_connections_per_client",
	    (json_int_t)cfg->webapp_max_connections_per_client, "request_timeout",
	    cfg->webapp_request_timeout, "max_response_size",
	    (json_int_t)cfg->webapp_max_response_size, "view_idle_timeout",
	    cfg->webapp_view_idle_timeout);
}

const char *
np_cfg_min_ready_owner(const struct np_config *cfg, const char *label)
{
	size_t i, j;

	for (i = 0; i < cfg->nproviders; i++)
		for (j = 0; j < cfg->providers[i].npools; j++)
			if (np_cfg_strv_contains(&cfg->providers[i].pools[j].label_names, label))
				return cfg->providers[i].name;
	return NULL;
}

json_t *
np_cfg_worker_slice(const struct np_config *cfg, const char *provider)
{
	json_t *slice = np_cfg_slice(cfg, provider), *l;
	size_t i;

	if (slice == NULL)
		return NULL;
	/* One worker serves the web API (only one process can bind the
	 * address): the first provider in nodepool.yaml. */
	if (cfg->nproviders > 0 && strcmp(cfg->providers[0].name, provider) == 0)
		json_object_set_new(slice, "webapp", webapp_json(cfg));
	json_array_foreach(json_object_get(slice, "labels"), i, l)
	{
		const char *name = json_string_value(json_object_get(l, "name"));
		const char *owner = name ? np_cfg_min_ready_owner(cfg, name) : NULL;
		if (json_object_get(l, "min-ready") != NULL &&
		    (owner == NULL || strcmp(owner, provider) != 0))
			json_object_set_new(l, "min-ready", json_integer(0));
	}
	return slice;
}

/* A limit for JSON: -1 (unlimited) is null. */
static json_t *
limit(long long v)
{
	return v < 0 ? json_null() : json_integer(v);
}

/* The web slice's "status": what the status page shows of nodepool.yaml. */
static json_t *
status_section(const struct np_config *cfg)
{
	json_t *provs = json_array(), *tenants = json_object();
	size_t i, j;

	for (i = 0; i < cfg->nproviders; i++) {
		const struct np_provider *p = &cfg->providers[i];
		json_t *pools = json_array();
		for (j = 0; j < p->npools; j++) {
			const struct np_pool *pl = &p->pools[j];
			json_t *labels = json_array();
			size_t k;
			for (k = 0; k < pl->label_names.n; k++)
				json_array_append_new(labels, json_string(pl->label_names.v[k]));
			json_array_append_new(
			    pools,
			    json_pack("{s:s, s:o, s:o, s:o, s:o}", "name", pl->name, "labels",
				      labels, "max-servers", limit(pl->max_servers), "max-cores",
				      limit(pl->max_cores), "max-ram", limit(pl->max_ram)));
		}
		json_array_append_new(
		    provs, json_pack("{s:s, s:s, s:o, s:o, s:o, s:o}", "name", p->name, "driver",
				     p->driver ? p->driver : "openstack", "max-servers",
				     limit(p->max_servers), "max-cores", limit(p->max_cores),
				     "max-ram", limit(p->max_ram), "pools", pools));
	}
	for (i = 0; i < cfg->ntenant_limits; i++)
		json_object_set(tenants, cfg->tenant_limits[i].tenant,
				cfg->tenant_limits[i].limits ? cfg->tenant_limits[i].limits
							     : json_null());
	return json_pack("{s:o, s:o}", "providers", provs, "tenant-limits", tenants);
}

json_t *
np_cfg_web_slice(const struct np_config *cfg)
{
	json_t *tls = json_null(), *slice;

	if (cfg->zk_tls_ca != NULL || cfg->zk_tls_cert != NULL || cfg->zk_tls_key != NULL)
		tls = json_pack("{s:s?, s:s?, s:s?}", "ca", cfg->zk_tls_ca, "cert",
				cfg->zk_tls_cert, "key", cfg->zk_tls_key);
	slice = json_pack("{s:{s:s?, s:f, s:o}, s:o}", "zookeeper", "hosts", cfg->zk_hosts,
			  "timeout", cfg->zk_timeout, "tls", tls, "webapp", webapp_json(cfg));
	if (slice == NULL)
		np_oom();
	json_object_set_new(slice, "status", status_section(cfg));
	return slice;
}

/* ---- slices and fingerprints --------------------------------------------------- */

static json_t *
strv_json(const struct np_cfg_strv *sv)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; i < sv->n; i++)
		json_array_append_new(a, json_string(sv->v[i]));
	return a;
}

/* A resolved diskimage as a flat diskimages[] entry (no parent). */
static json_t *
diskimage_json(const struct np_diskimage *d)
{
	json_t *j = json_object();

	json_object_set_new(j, "name", json_string(d->name));
	json_object_set_new(j, "dib-cmd", json_string(d->dib_cmd));
	json_object_set_new(j, "elements", strv_json(&d->elements));
	json_object_set(j, "env-vars", d->env_vars);
	json_object_set_new(j, "formats", strv_json(&d->formats));
	json_object_set_new(j, "keep-formats", strv_json(&d->keep_formats));
	json_object_set_new(j, "delete-after-upload", json_boolean(d->delete_after_upload));
	json_object_set_new(j, "validate", json_boolean(d->validate));
	json_object_set_new(j, "pause", json_boolean(d->pause));
	json_object_set_new(j, "release", json_string(d->release));
	json_object_set_new(j, "rebuild-age", json_integer(d->rebuild_age));
	json_object_set_new(j, "build-timeout", json_integer(d->build_timeout));
	json_object_set_new(j, "username", json_string(d->username));
	json_object_set_new(j, "python-path", json_string(d->python_path));
	if (d->shell_type != NULL)
		json_object_set_new(j, "shell-type", json_string(d->shell_type));
	json_object_set(j, "metadata", d->metadata);
	return j;
}

static void
name_add(struct np_cfg_strv *sv, const char *s)
{
	if (s != NULL)
		np_cfg_strv_push(sv, s);
}

/* Is s in sv (sorted by np_cfg_strv_sort_unique)? */
static int
strv_sorted_has(const struct np_cfg_strv *sv, const char *s)
{
	return sv->n > 0 && bsearch(&s, sv->v, sv->n, sizeof(*sv->v), np_cfg_strp_cmp) != NULL;
}

json_t *
np_cfg_slice(const struct np_config *cfg, const char *provider_name)
{
	const struct np_provider *p = np_cfg_provider(cfg, provider_name);
	struct np_cfg_strv labels = {NULL, 0}, images = {NULL, 0};
	const struct np_cfg_node *root = np_cfg_doc_root(cfg->doc), *n;
	json_t *j, *a, *np;
	size_t i, k;

	if (p == NULL)
		return NULL;
	j = json_object();
	a = json_array();
	for (i = 0; i < cfg->nzk_servers; i++) {
		json_t *s = json_object();

		json_object_set_new(s, "host", json_string(cfg->zk_servers[i].host));
		json_object_set_new(s, "port", json_integer(cfg->zk_servers[i].port));
		if (cfg->zk_servers[i].chroot != NULL)
			json_object_set_new(s, "chroot", json_string(cfg->zk_servers[i].chroot));
		json_array_append_new(a, s);
	}
	json_object_set_new(j, "zookeeper-servers", a);
	if (cfg->zk_tls_ca != NULL)
		json_object_set_new(j, "zookeeper-tls",
				    json_pack("{s:s, s:s, s:s}", "ca", cfg->zk_tls_ca, "cert",
					      cfg->zk_tls_cert, "key", cfg->zk_tls_key));
	json_object_set_new(j, "zookeeper-timeout", json_real(cfg->zk_timeout));
	if ((n = np_cfg_get(root, "max-hold-age")) != NULL)
		json_object_set_new(j, "max-hold-age", np_cfg_to_json(n));
	if ((n = np_cfg_get(root, "tenant-resource-limits")) != NULL)
		json_object_set_new(j, "tenant-resource-limits", np_cfg_to_json(n));
	np = json_object();
	json_object_set_new(np, "cleanup-interval", json_real(cfg->nodepoold.cleanup_interval));
	json_object_set_new(np, "delete-interval", json_real(cfg->nodepoold.delete_interval));
	json_object_set_new(np, "stats-interval", json_real(cfg->nodepoold.stats_interval));
	json_object_set_new(np, "worker-status-timeout",
			    json_real(cfg->nodepoold.worker_status_timeout));
	json_object_set_new(np, "request-lock-cleanup-age",
			    json_real(cfg->nodepoold.request_lock_cleanup_age));
	json_object_set_new(np, "peer-takeover-delay",
			    json_real(cfg->nodepoold.peer_takeover_delay));
	/* control-socket, pid-file, restart-backoff-max are the supervisor's own:
	 * left out so that changing them restarts no worker */
	json_object_set_new(j, "nodepoold", np);

	/* the labels and diskimages this provider uses */
	for (i = 0; i < p->npools; i++) {
		for (k = 0; k < p->pools[i].label_names.n; k++)
			name_add(&labels, p->pools[i].label_names.v[k]);
		for (k = 0; k < p->pools[i].nlabels; k++)
			name_add(&images, p->pools[i].labels[k].diskimage);
	}
	for (i = 0; i < p->ndiskimages; i++)
		name_add(&images, p->diskimages[i].name);
	np_cfg_strv_sort_unique(&labels);
	np_cfg_strv_sort_unique(&images);
	a = json_array();
	for (i = 0; i < cfg->nlabels; i++)
		if (strv_sorted_has(&labels, cfg->labels[i].name))
			json_array_append_new(a, np_cfg_to_json(cfg->labels[i].raw));
	json_object_set_new(j, "labels", a);
	a = json_array();
	for (i = 0; i < cfg->ndiskimages; i++)
		if (strv_sorted_has(&images, cfg->diskimages[i].name))
			json_array_append_new(a, diskimage_json(&cfg->diskimages[i]));
	json_object_set_new(j, "diskimages", a);
	a = json_array();
	json_array_append_new(a, np_cfg_to_json(p->raw));
	json_object_set_new(j, "providers", a);
	np_cfg_strv_free(&labels);
	np_cfg_strv_free(&images);
	return j;
}

/* 64-bit FNV-1a of the canonical JSON of the provider's slice: a short
 * name for the slice in logs, not a decision (the supervisor compares the
 * slices themselves), so no cryptographic hash (nor OpenSSL in nodepoold). */
void
np_cfg_fingerprint(const struct np_config *cfg, struct np_provider *p)
{
	json_t *slice = np_cfg_slice(cfg, p->name);
	char *text = json_dumps(slice, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENSURE_ASCII);
	uint64_t h = 0xcbf29ce484222325ULL;
	const unsigned char *c;

	if (text == NULL)
		np_cfg_oom();
	for (c = (const unsigned char *)text; *c != '\0'; c++) {
		h ^= *c;
		h *= 0x100000001b3ULL;
	}
	snprintf(p->fingerprint, sizeof(p->fingerprint), "%016llx", (unsigned long long)h);
	free(text);
	json_decref(slice);
}
