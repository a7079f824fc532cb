/*
 * Fuzz what the azure driver reads from Azure (drivers/azure/azure_api.h):
 * an answer's body decoded by az_answer_parse for a success and an error
 * status, and a decoded success walked the way the adapter walks listings
 * (value[], nextLink), VMs (provisioningState, networkProfile, zones,
 * tags), NICs (ipConfigurations), public IPs, SKUs, usages and token
 * answers. Input byte 0 picks the status; the rest is the body.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* the fuzz build links lib/ and protocol/ only: compile the driver's API
 * layer in */
#include "drivers/azure/azure_api.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *
str_at(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s != NULL ? s : "";
}

static size_t
walk_one(const json_t *it)
{
	const json_t *p = json_object_get(it, "properties"), *c, *v;
	const char *k;
	size_t i, n = 0;

	n += strlen(str_at(it, "name")) + strlen(str_at(it, "id")) + strlen(str_at(it, "location"));
	n += strlen(str_at(p, "provisioningState")) + strlen(str_at(p, "ipAddress"));
	n += strlen(str_at(p, "publicIPAddressVersion"));
	json_object_foreach((json_t *)json_object_get(it, "tags"), k, v) n +=
	    strlen(k) + strlen(json_string_value(v) != NULL ? json_string_value(v) : "");
	json_array_foreach(
	    json_object_get(json_object_get(p, "networkProfile"), "networkInterfaces"), i, c) n +=
	    strlen(str_at(c, "id"));
	json_array_foreach(json_object_get(p, "ipConfigurations"), i, c)
	{
		const json_t *cp = json_object_get(c, "properties");
		n += strlen(str_at(cp, "privateIPAddress")) +
		     strlen(str_at(cp, "privateIPAddressVersion")) +
		     strlen(str_at(json_object_get(cp, "publicIPAddress"), "id"));
	}
	json_array_foreach(json_object_get(it, "zones"), i, c) n += json_is_string(c);
	json_array_foreach(json_object_get(it, "capabilities"), i, c) n +=
	    strlen(str_at(c, "name")) + strlen(str_at(c, "value"));
	json_array_foreach(json_object_get(it, "locations"), i, c) n += json_is_string(c);
	n += strlen(str_at(json_object_get(it, "name"), "value"));
	n += json_is_number(json_object_get(it, "limit"));
	return n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int statuses[] = {200, 201, 202, 204, 400, 401, 404, 409, 429, 500};
	char code[128], msg[512];
	const json_t *it;
	json_t *j;
	size_t i;
	int status;

	if (size < 1)
		return 0;
	status = statuses[data[0] % 10];
	j = az_answer_parse(status, (const char *)data + 1, size - 1, code, sizeof(code), msg,
			    sizeof(msg));
	if (status >= 300) {
		if (j != NULL || code[0] == '\0')
			abort(); /* an error answer has a code and no document */
		return 0;
	}
	if (code[0] != '\0')
		abort();
	walk_one(j);
	json_array_foreach(json_object_get(j, "value"), i, it) walk_one(it);
	(void)str_at(j, "nextLink");
	(void)str_at(j, "status");
	(void)str_at(j, "access_token");
	(void)str_at(j, "expires_on");
	json_decref(j);
	return 0;
}
