/*
 * Fuzz what the ibmvpc driver reads from IBM Cloud (drivers/ibmvpc/
 * ibmvpc.h): an answer's body turned into an error line (VPC, IAM and
 * resource API error shapes), a collection's next.href cut for its start
 * token, Cloud Object Storage XML walked for its keys and location, and
 * object and resource group names read as upstream's metadata. Input byte
 * 0 picks the status; the rest is the body (and, split at its first NUL,
 * a name pair).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* the fuzz build links lib/ and protocol/ only: compile the driver's wire
 * layer in */
#include "drivers/ibmvpc/ibm_api.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int statuses[] = {400, 401, 404, 409, 429, 500, 503, 200};
	char *body, out[300], tok[64], key[128];
	const char *from, *nul;
	json_t *j, *m;
	int status;

	if (size == 0)
		return 0;
	status = statuses[data[0] % (sizeof(statuses) / sizeof(statuses[0]))];
	body = malloc(size);
	memcpy(body, data + 1, size - 1);
	body[size - 1] = '\0';
	j = json_loadb(body, size - 1, 0, NULL);
	ibm_error_text(status, NULL, j, body, out, sizeof(out));
	if (strlen(out) >= sizeof(out))
		abort();
	if (json_is_object(j)) {
		const char *next = jstr(json_object_get(j, "next"), "href");
		if (next != NULL && ibm_next_start(next, tok, sizeof(tok)) &&
		    strlen(tok) >= sizeof(tok))
			abort();
	}
	json_decref(j);
	if (ibm_next_start(body, tok, sizeof(tok)) &&
	    (tok[0] == '\0' || strlen(tok) >= sizeof(tok)))
		abort();
	from = body;
	while (ibm_xml_text(&from, "Key", key, sizeof(key)))
		if (strlen(key) >= sizeof(key))
			abort();
	from = body;
	ibm_xml_text(&from, "LocationConstraint", key, sizeof(key));
	/* body is data[1..] NUL-terminated: its part after the first NUL is
	 * the resource group name */
	nul = memchr(body, '\0', size - 1);
	m = ibm_name_metadata(body, nul != NULL && nul < body + size - 1 ? nul + 1 : NULL);
	if (!json_is_object(m))
		abort();
	json_decref(m);
	free(body);
	return 0;
}
