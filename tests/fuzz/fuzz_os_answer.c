/*
 * libFuzzer target: what the openstack driver reads from a cloud's answers
 * (drivers/openstack/os_answer.h) and Keystone's catalog (os_catalog_url,
 * os_cloud.h). Input byte 0 picks the HTTP status and the interface and
 * region asked for; the rest is the body. Properties: no crash; an error
 * message is always a terminated "HTTP <status>: ..." line of bounded
 * length; a server's addresses are strings of its own answer; an
 * endpoint URL has no trailing '/'.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* the fuzz build links lib/ and protocol/ only: compile the driver's pure
 * decoding in */
#include "drivers/openstack/os_answer.c"
#include "drivers/openstack/os_cloud.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
ext_public(void *arg, const char *net)
{
	(void)arg;
	return strcmp(net, "public") == 0;
}

/* Is s one of the strings in v (borrowed from it)? */
static int
borrowed_from(const json_t *v, const char *s)
{
	const char *k;
	json_t *x;
	size_t i;

	if (json_is_string(v))
		return json_string_value(v) == s;
	if (json_is_object(v)) {
		json_object_foreach((json_t *)v, k, x) if (borrowed_from(x, s)) return 1;
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, x) if (borrowed_from(x, s)) return 1;
	}
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int statuses[] = {200, 201, 202, 204, 400, 401, 403, 404, 409, 413, 500, 503};
	static const char *const compute[] = {"compute", NULL};
	static const char *const volume[] = {"volumev3", "block-storage", "volumev2", "volume",
					     NULL};
	static const char *const ifaces[] = {"public", "internal", "admin", "publicURL"};
	static const char *const regions[] = {NULL, "RegionOne", "R1", ""};
	char msg[300], *raw;
	json_t *body, *servers, *s, *token;
	const char *pub4, *priv4, *pub6;
	int status;
	size_t i;

	if (size < 1)
		return 0;
	status = statuses[data[0] % (sizeof(statuses) / sizeof(statuses[0]))];
	raw = malloc(size);
	if (raw == NULL)
		return 0;
	memcpy(raw, data + 1, size - 1);
	raw[size - 1] = '\0';
	body = json_loadb(raw, size - 1, 0, NULL);

	os_error_text(status, NULL, body, raw, msg, sizeof(msg));
	if (strncmp(msg, "HTTP ", 5) != 0 || strlen(msg) > 220)
		abort();
	(void)os_is_quota_msg(msg);
	os_error_text(0, "Couldn't connect to server", body, raw, msg, sizeof(msg));

	servers = json_object_get(body, "servers");
	if (json_is_object(json_object_get(body, "server")))
		servers = json_pack("[O]", json_object_get(body, "server"));
	else
		json_incref(servers);
	json_array_foreach(servers, i, s)
	{
		os_server_addresses(s, ext_public, NULL, &pub4, &priv4, &pub6);
		if ((pub4 && !borrowed_from(s, pub4)) || (priv4 && !borrowed_from(s, priv4)) ||
		    (pub6 && !borrowed_from(s, pub6)))
			abort();
		(void)os_parse_iso(json_string_value(json_object_get(s, "created")));
	}
	json_decref(servers);

	token = json_object_get(body, "token");
	if (json_is_object(token)) {
		const char *iface = ifaces[(data[0] >> 4) & 3];
		const char *region = regions[(data[0] >> 6) & 3];
		const json_t *catalog = json_object_get(token, "catalog");
		char *u;

		(void)os_parse_iso(json_string_value(json_object_get(token, "expires_at")));
		u = os_catalog_url(catalog, compute, iface, region);
		if (u != NULL && u[0] != '\0' && u[strlen(u) - 1] == '/')
			abort();
		free(u);
		u = os_catalog_url(catalog, volume, iface, region);
		free(u);
	}
	json_decref(body);
	free(raw);
	return 0;
}
