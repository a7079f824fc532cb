/*
 * ZooKeeper cache codecs for node requests and components (cachecodec.h):
 * protocol/model.c's pure decoders, with the logging a cache's decode
 * callback has no other way to report (protocol/ itself does no I/O).
 */
#include "lib/zk/cachecodec.h"
#include "lib/core/log.h"
#include "protocol/model.h"

#include <stddef.h>

void *
np_request_cache_decode(const char *name, const char *data, int len)
{
	struct np_request *r = NULL;
	char err[256];

	if (data == NULL || len == 0)
		return NULL;
	if (np_request_decode(name, data, (size_t)len, &r, err, sizeof(err)) != 0) {
		log_warn("request %s: malformed record skipped: %s", name, err);
		return NULL;
	}
	if (err[0] != '\0')
		log_info("%s", err); /* a value of an odd type, kept as it is */
	return r;
}

void
np_request_cache_free(void *request)
{
	np_request_free(request);
}

void *
np_component_cache_decode(const char *name, const char *data, int len)
{
	struct np_component *c = NULL;
	char err[256];

	if (data == NULL || len == 0)
		return NULL;
	if (np_component_decode(name, data, (size_t)len, &c, err, sizeof(err)) != 0) {
		log_warn("component %s: malformed record skipped: %s", name, err);
		return NULL;
	}
	if (err[0] != '\0')
		log_info("%s", err); /* a value of an odd type, kept as it is */
	return c;
}

void
np_component_cache_free(void *component)
{
	np_component_free(component);
}
