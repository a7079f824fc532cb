/*
 * The launcher's view of its configuration, read from the config as JSON
 * (the slice the supervisor sends, or a whole nodepool.yaml converted by
 * lib/config). The config was validated before it got here; this only
 * picks out what the launcher uses and applies upstream's defaults.
 */
#include "lib/config/jsonget.h"
#include "worker/launcher.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "lib/core/log.h"
#include "lib/core/xalloc.h"

/* A pool's labels: `labels:` entries (strings or {name: ...}), or, for
 * static pools, the union of its nodes' labels (as upstream's static
 * ProviderConfig). */
static void
pool_labels(const json_t *pool, struct np_strv *out)
{
	const json_t *labels = json_object_get(pool, "labels");
	const json_t *nodes = json_object_get(pool, "nodes");
	const json_t *v, *nl, *lv;
	size_t i, j;

	json_array_foreach(labels, i, v)
	{
		const char *name =
		    json_is_string(v) ? json_string_value(v) : np_json_str(v, "name", NULL);
		if (name != NULL && !np_strv_contains(out, name))
			np_strv_push(out, name);
	}
	json_array_foreach(nodes, i, v)
	{
		nl = json_object_get(v, "labels");
		if (json_is_string(nl)) {
			if (!np_strv_contains(out, json_string_value(nl)))
				np_strv_push(out, json_string_value(nl));
			continue;
		}
		json_array_foreach(nl, j, lv)
		{
			if (json_is_string(lv) && !np_strv_contains(out, json_string_value(lv)))
				np_strv_push(out, json_string_value(lv));
		}
	}
}

static int
provider_supports(const json_t *prov, const char *label)
{
	const json_t *pools = json_object_get(prov, "pools"), *pool;
	struct np_strv sv = {0};
	size_t i;
	int found = 0;

	json_array_foreach(pools, i, pool)
	{
		pool_labels(pool, &sv);
		found = np_strv_contains(&sv, label);
		np_strv_clear(&sv);
		if (found)
			break;
	}
	return found;
}

static void
quota_from_limits(struct drv_quota *q, const json_t *o)
{
	const char *key;
	json_t *v;

	drv_quota_unlimited(q);
	json_object_foreach((json_t *)o, key, v)
	{
		double d = json_is_number(v) ? json_number_value(v) : INFINITY;
		if (strcmp(key, "tenant-name") == 0)
			continue;
		if (strcmp(key, "max-servers") == 0)
			q->instances = d;
		else if (strcmp(key, "max-cores") == 0)
			q->cores = d;
		else if (strcmp(key, "max-ram") == 0)
			q->ram = d;
		else {
			const char *name = key;
			if (strcmp(key, "max-volumes") == 0)
				name = "volumes";
			else if (strcmp(key, "max-volume-gb") == 0)
				name = "volume-gb";
			if (q->extra == NULL)
				q->extra = json_object();
			json_object_set_new(q->extra, name, json_real(d));
		}
	}
}

int
lc_config_load(struct launcher *lc, const json_t *config, const char *provider, char *err,
	       size_t errlen)
{
	const json_t *provs = json_object_get(config, "providers"), *p = NULL, *v, *pool;
	const json_t *labels = json_object_get(config, "labels");
	const json_t *np = json_object_get(config, "nodepoold");
	const char *first_owner;
	size_t i, j;

	json_array_foreach(provs, i, v)
	{
		if (strcmp(np_json_str(v, "name", ""), provider) == 0) {
			p = v;
			break;
		}
	}
	if (p == NULL) {
		snprintf(err, errlen, "provider %s is not in the configuration", provider);
		return -1;
	}

	lc->prov.name = xstrdup(provider);
	lc->prov.driver_name = xstrdup(np_json_str(p, "driver", "openstack"));
	lc->prov.max_concurrency = (int)np_json_num(p, "max-concurrency", -1);
	lc->prov.priority = (int)np_json_num(p, "priority", 100);
	lc->prov.launch_retries = (int)np_json_num(p, "launch-retries", 3);
	lc->prov.boot_timeout = np_json_num(p, "boot-timeout", 60);
	lc->prov.launch_timeout = np_json_num(p, "launch-timeout", 3600);
	lc->prov.raw = json_deep_copy(p);

	lc->prov.n_pools = json_array_size(json_object_get(p, "pools"));
	lc->prov.pools = calloc(lc->prov.n_pools ? lc->prov.n_pools : 1, sizeof(*lc->prov.pools));
	if (lc->prov.pools == NULL)
		abort();
	json_array_foreach(json_object_get(p, "pools"), i, pool)
	{
		struct lc_pool *lp = &lc->prov.pools[i];
		lp->prov = &lc->prov;
		lp->name = xstrdup(np_json_str(pool, "name", "main"));
		lp->max_servers = (long)np_json_num(pool, "max-servers", -1);
		lp->max_cores = np_json_num(pool, "max-cores", -1);
		lp->max_ram = np_json_num(pool, "max-ram", -1);
		lp->priority = (int)np_json_num(pool, "priority", lc->prov.priority);
		lp->host_key_checking = np_json_bool(pool, "host-key-checking", 1);
		lp->ignore_provider_quota = np_json_bool(pool, "ignore-provider-quota", 0);
		pool_labels(pool, &lp->labels);
		v = json_object_get(pool, "node-attributes");
		lp->node_attributes = json_is_object(v) ? json_deep_copy(v) : NULL;
		lp->raw = json_deep_copy(pool);
		TAILQ_INIT(&lp->handlers);
	}

	lc->n_labels = json_array_size(labels);
	lc->labels = calloc(lc->n_labels ? lc->n_labels : 1, sizeof(*lc->labels));
	if (lc->labels == NULL)
		abort();
	json_array_foreach(labels, i, v)
	{
		struct lc_label *l = &lc->labels[i];
		l->name = xstrdup(np_json_str(v, "name", ""));
		l->min_ready = (int)np_json_num(v, "min-ready", 0);
		l->max_ready_age = (long)np_json_num(v, "max-ready-age", 0);
		/* min-ready is one launcher's job per label: the first provider of
		 * this config whose pools support it (a slice from the supervisor
		 * holds only ours, with min-ready zeroed where we are not first). */
		first_owner = NULL;
		json_array_foreach(provs, j, p)
		{
			if (provider_supports(p, l->name)) {
				first_owner = np_json_str(p, "name", "");
				break;
			}
		}
		l->min_ready_owner =
		    l->min_ready > 0 && first_owner != NULL && strcmp(first_owner, provider) == 0;
	}

	lc->n_tenant_limits = json_array_size(json_object_get(config, "tenant-resource-limits"));
	lc->tenant_limits =
	    calloc(lc->n_tenant_limits ? lc->n_tenant_limits : 1, sizeof(*lc->tenant_limits));
	if (lc->tenant_limits == NULL)
		abort();
	json_array_foreach(json_object_get(config, "tenant-resource-limits"), i, v)
	{
		lc->tenant_limits[i].tenant = xstrdup(np_json_str(v, "tenant-name", ""));
		quota_from_limits(&lc->tenant_limits[i].limits, v);
	}
	lc->max_hold_age = (long)np_json_num(config, "max-hold-age", 0);
	lc->settings.cleanup_interval = np_json_num(np, "cleanup-interval", 60);
	lc->settings.delete_interval = np_json_num(np, "delete-interval", 5);
	if (!(lc->settings.cleanup_interval > 0))
		lc->settings.cleanup_interval = 60;
	if (!(lc->settings.delete_interval > 0))
		lc->settings.delete_interval = 5;
	lc->settings.request_lock_cleanup_age =
	    np_json_num(np, "request-lock-cleanup-age", 8 * 3600);
	if (!(lc->settings.request_lock_cleanup_age > 0))
		lc->settings.request_lock_cleanup_age = 8 * 3600;
	lc->settings.peer_takeover_delay = np_json_num(np, "peer-takeover-delay", 2);
	if (!(lc->settings.peer_takeover_delay >= 0))
		lc->settings.peer_takeover_delay = 2;
	return 0;
}

void
lc_config_free(struct launcher *lc)
{
	size_t i;

	for (i = 0; i < lc->prov.n_pools; i++) {
		struct lc_pool *lp = &lc->prov.pools[i];
		free(lp->name);
		np_strv_clear(&lp->labels);
		json_decref(lp->node_attributes);
		json_decref(lp->raw);
		free(lp->launcher_id);
		free(lp->component_path);
	}
	free(lc->prov.pools);
	free(lc->prov.name);
	free(lc->prov.driver_name);
	json_decref(lc->prov.raw);
	for (i = 0; i < lc->n_labels; i++)
		free(lc->labels[i].name);
	free(lc->labels);
	for (i = 0; i < lc->n_tenant_limits; i++) {
		free(lc->tenant_limits[i].tenant);
		drv_quota_clear(&lc->tenant_limits[i].limits);
	}
	free(lc->tenant_limits);
}

const struct lc_label *
lc_label_get(const struct launcher *lc, const char *name)
{
	size_t i;

	for (i = 0; i < lc->n_labels; i++)
		if (strcmp(lc->labels[i].name, name) == 0)
			return &lc->labels[i];
	return NULL;
}
