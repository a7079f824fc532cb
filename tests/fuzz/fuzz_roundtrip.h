/*
 * The property every record fuzzer checks: whatever the decoder accepts, the
 * encoder writes, the decoder accepts again, and the second encoding is the
 * same bytes as the first (so the same JSON). A rejected input must leave
 * *out NULL and give a message. Any violation aborts, which libFuzzer
 * reports as a crash.
 *
 * Include after defining REC (struct tag), DECODE, ENCODE, FREE and ID.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
fuzz_fail(const char *what, const char *a, const char *b)
{
	fprintf(stderr, "round trip broken: %s\nfirst:  %s\nsecond: %s\n", what,
		a != NULL ? a : "(null)", b != NULL ? b : "(null)");
	abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256] = "", err2[256] = "";
	struct REC *r = NULL, *r2 = NULL;
	char *e1, *e2;
	size_t l1 = 0, l2 = 0;

	if (DECODE(ID, (const char *)data, size, &r, err, sizeof(err)) != 0) {
		if (r != NULL || err[0] == '\0')
			fuzz_fail("rejected without a message or with a record", err, NULL);
		return 0;
	}
	e1 = ENCODE(r, &l1);
	if (e1 == NULL || strlen(e1) != l1)
		fuzz_fail("a decoded record did not encode", err, NULL);
	if (DECODE(ID, e1, l1, &r2, err2, sizeof(err2)) != 0)
		fuzz_fail("our own encoding was rejected", e1, err2);
	e2 = ENCODE(r2, &l2);
	if (e2 == NULL || l1 != l2 || strcmp(e1, e2) != 0)
		fuzz_fail("second encoding differs", e1, e2);
	free(e1);
	free(e2);
	FREE(r);
	FREE(r2);
	return 0;
}
