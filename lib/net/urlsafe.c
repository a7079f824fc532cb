/*
 * URL pieces from outside data (urlsafe.h).
 */
#include "lib/net/urlsafe.h"

#include <string.h>
#include <strings.h>

static int
unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~';
}

char *
url_segment(const char *s, char *buf, size_t size)
{
	static const char hex[] = "0123456789ABCDEF";
	int dots_only = strspn(s, ".") == strlen(s);
	size_t o = 0;

	if (size == 0)
		return NULL;
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;
		if (unreserved(c) && !(dots_only && c == '.')) {
			if (o + 1 >= size)
				goto full;
			buf[o++] = (char)c;
		} else {
			if (o + 3 >= size)
				goto full;
			buf[o++] = '%';
			buf[o++] = hex[c >> 4];
			buf[o++] = hex[c & 15];
		}
	}
	buf[o] = '\0';
	return buf;
full:
	buf[0] = '\0';
	return NULL;
}

/* Length of "scheme://authority" at the start of u, or 0 when u is not
 * absolute. */
static size_t
origin_len(const char *u)
{
	const char *p = strstr(u, "://"), *end;
	size_t i;

	if (p == NULL || p == u)
		return 0;
	for (i = 0; u + i < p; i++) {
		char c = u[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (i > 0 && ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.'))))
			return 0;
	}
	p += 3;
	end = p + strcspn(p, "/?#");
	if (end == p)
		return 0;
	return (size_t)(end - u);
}

int
url_same_origin(const char *url, const char *base)
{
	size_t a, b;

	if (url == NULL || base == NULL)
		return 0;
	a = origin_len(url);
	b = origin_len(base);
	return a > 0 && a == b && strncasecmp(url, base, a) == 0;
}
