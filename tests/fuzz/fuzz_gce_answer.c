/*
 * Fuzz what the gce driver reads from Google (drivers/gce/gce_api.h): an
 * answer's body decoded by gce_answer_parse for a success and error
 * statuses (Compute's error bodies, the token endpoint's RFC 6749 errors).
 * Input byte 0 picks the status; the rest is the body.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* the fuzz build links lib/ and protocol/ only: compile the driver's API
 * layer in */
#include "drivers/gce/gce_api.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int statuses[] = {200, 400, 401, 403, 404, 409, 429, 500, 503};
	char reason[128], msg[512];
	json_t *j;
	int status;

	if (size < 1)
		return 0;
	status = statuses[data[0] % 9];
	j = gce_answer_parse(status, (const char *)data + 1, size - 1, reason, sizeof(reason), msg,
			     sizeof(msg));
	if (status != 200 && reason[0] == '\0')
		abort(); /* an error answer always has a reason */
	if (status == 200 && reason[0] != '\0')
		abort();
	if (strlen(reason) >= sizeof(reason) || strlen(msg) >= sizeof(msg))
		abort();
	json_decref(j);
	return 0;
}
