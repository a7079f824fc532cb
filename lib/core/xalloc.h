/*
 * Allocation helpers that treat memory exhaustion as fatal (abort), as the
 * rest of nodepoold does: a daemon that cannot allocate a few bytes cannot
 * keep its ZooKeeper view either, and its supervisor restarts it.
 */
#ifndef NP_XALLOC_H
#define NP_XALLOC_H

#include <stdlib.h>
#include <string.h>

/* A copy of s (the caller frees it), or NULL when s is NULL. */
static inline char *
np_strdupz(const char *s)
{
	char *d;

	if (s == NULL)
		return NULL;
	if ((d = strdup(s)) == NULL)
		abort();
	return d;
}

#endif
