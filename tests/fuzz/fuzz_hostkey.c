/*
 * Fuzz the host-key helpers that read configuration text (a static node's
 * host-key) and scanned keys: nodescan_key_normalize() and
 * nodescan_keys_match(). Input: lines; those before the first empty line
 * are the configured keys, the rest the scanned ones.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/net/nodescan.h"

#define MAXK 16

static char big[16384]; /* as nodescan_keys_match()'s bound */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf, *p, *nl, out[256];
	const char *want[MAXK], *have[MAXK];
	size_t nwant = 0, nhave = 0, i;
	int second = 0;

	if ((buf = malloc(size + 1)) == NULL)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	for (p = buf; p != NULL; p = nl) {
		if ((nl = strchr(p, '\n')) != NULL)
			*nl++ = '\0';
		if (*p == '\0' && !second) {
			second = 1;
			continue;
		}
		if (!second && nwant < MAXK)
			want[nwant++] = p;
		else if (second && nhave < MAXK)
			have[nhave++] = p;
	}
	for (i = 0; i < nwant; i++)
		if (nodescan_key_normalize(want[i], out, sizeof(out)) == 0 &&
		    strlen(out) >= sizeof(out))
			abort();
	(void)nodescan_keys_match(want, nwant, have, nhave);
	/* A list of well-formed keys is a subset of itself; one with a
	 * malformed key never is. */
	for (i = 0; i < nhave; i++)
		if (nodescan_key_normalize(have[i], big, sizeof(big)) < 0)
			break;
	if (nhave > 0 && i == nhave && !nodescan_keys_match(have, nhave, have, nhave))
		abort();
	if (nhave > 0 && i < nhave && nodescan_keys_match(have, nhave, have, nhave))
		abort();
	free(buf);
	return 0;
}
