#include "slice.h"

#include <string.h>

#include "config.h"

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

json_t *
np_config_web_slice(const struct np_config *cfg)
{
	json_t *tls = json_null();

	if (cfg->zk_tls_ca != NULL || cfg->zk_tls_cert != NULL || cfg->zk_tls_key != NULL)
		tls = json_pack("{s:s?, s:s?, s:s?}", "ca", cfg->zk_tls_ca, "cert",
				cfg->zk_tls_cert, "key", cfg->zk_tls_key);
	return json_pack("{s:{s:s?, s:f, s:o}, s:o}", "zookeeper", "hosts", cfg->zk_hosts,
			 "timeout", cfg->zk_timeout, "tls", tls, "webapp", webapp_json(cfg));
}
