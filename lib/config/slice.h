/*
 * The configuration a provider's worker receives: np_cfg_slice() (the
 * settings it needs and its own provider) with min-ready given to one
 * worker per label. Upstream runs every provider in one launcher process
 * that creates min-ready requests once per label; with a process per
 * provider, the label belongs to the first provider in nodepool.yaml whose
 * pools offer it, and every other worker's slice has that label's
 * min-ready set to 0.
 *
 * A standalone nodepool-launcher (no nodepoold) serves the web API as
 * upstream's launcher does: the slice of the first provider in
 * nodepool.yaml has a `webapp` section (the configured values or the
 * defaults 8005 and 0.0.0.0), the others have none. Under nodepoold the
 * web API is a process of its own (nodepool-web, web/), which gets
 * np_cfg_web_slice(), and no worker's slice has `webapp`.
 */
#ifndef NP_SLICE_H
#define NP_SLICE_H

#include <jansson.h>

struct np_config;

/* New reference, or NULL if there is no such provider. */
json_t *np_cfg_worker_slice(const struct np_config *cfg, const char *provider);
/*
 * What nodepool-web needs (new reference):
 *   {"zookeeper": {"hosts": "h:p,...[/chroot]" or null, "timeout": seconds,
 *                  "tls": {"ca", "cert", "key"} or null},
 *    "webapp": {"port": 8005, "listen_address": "0.0.0.0", "max_connections": 64,
 *               "max_connections_per_client": 8, "request_timeout": 10.0,
 *               "max_response_size": 33554432},
 *    "status": {"providers": [{"name", "driver", "max-servers", "max-cores",
 *                              "max-ram", "pools": [{"name", "labels",
 *                              "max-servers", "max-cores", "max-ram"}]}],
 *               "tenant-limits": {tenant: {"max-servers", ...}}}}
 * (status: the status page's view of nodepool.yaml; a limit that is
 * unlimited is null)
 */
json_t *np_cfg_web_slice(const struct np_config *cfg);
/* The provider that owns min-ready for label, or NULL if none offers it. */
const char *np_cfg_min_ready_owner(const struct np_config *cfg, const char *label);

#endif
