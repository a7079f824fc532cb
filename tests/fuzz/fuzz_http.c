/*
 * Fuzz what lib/http reads from a server: header lines
 * (http_header_split) and Retry-After values (http_retry_after). Input:
 * lines; each is split as a header line, and its value (or the whole line)
 * parsed as a Retry-After.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/net/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size, *nl, *v;
	size_t nlen, vlen;
	char buf[512];
	double d;

	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		nl = nl != NULL ? nl + 1 : end;
		if (http_header_split(p, (size_t)(nl - p), &nlen, &v, &vlen) == 0) {
			/* the parts lie inside the line */
			if (nlen > (size_t)(nl - p) || v < p || v + vlen > nl || p[nlen] != ':')
				abort();
			if (vlen < sizeof(buf)) {
				memcpy(buf, v, vlen);
				buf[vlen] = '\0';
				d = http_retry_after(buf, 1700000000);
				if (!(d == -1 || d >= 0))
					abort();
			}
		}
		if ((size_t)(nl - p) < sizeof(buf)) {
			memcpy(buf, p, (size_t)(nl - p));
			buf[nl - p] = '\0';
			d = http_retry_after(buf, 1700000000);
			if (!(d == -1 || d >= 0))
				abort();
		}
		p = nl;
	}
	return 0;
}
