#include "slice.h"

#include <string.h>

#include "config.h"
#include "xalloc.h"

/* The webapp section a web API serves by (web.h's web_options_from_json). */
static json_t *
webapp_json(const struct np_config *cfg)
{
	return json_pack(
	    "{s:i, s:s, s:I, s:I, s:f, s:I}", "port", cfg->webapp_port, "listen_address",
	    cfg->webapp_listen_address ? cfg->webapp_listen_address : "0.0.0.0", "max_connections",
	    (json_int_t)cfg->webapp_max_connections, "max_connections_per_client",
	    (json_int_t)cfg->webapp_max_connections_per_client, "request_timeout",
	    cfg->webapp_request_timeout, "max_response_size",
	    (json_int_t)cfg->webapp_max_response_size);
}

const char *
np_config_min_ready_owner(const struct np_config *cfg, const char *label)
{
	size_t i, j;

	for (i = 0; i < cfg->nproviders; i++)
		for (j = 0; j < cfg->providers[i].npools; j++)
			if (np_cfg_strv_contains(&cfg->providers[i].pools[j].label_names, label))
				return cfg->providers[i].name;
	return NULL;
}

json_t *
np_config_worker_slice(const struct np_config *cfg, const char *provider)
{
	json_t *slice = np_config_slice(cfg, provider), *l;
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
		const char *owner = name ? np_config_min_ready_owner(cfg, name) : NULL;
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
np_config_web_slice(const struct np_config *cfg)
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
