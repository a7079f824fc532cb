/*
 * Allocation helpers that treat memory exhaustion as fatal (abort), as the
 * rest of nodepoold does: a daemon that cannot allocate a few bytes cannot
 * keep its ZooKeeper view either, and its supervisor restarts it. The one
 * set every folder uses (lib/, protocol/, drivers/, the processes): no file
 * defines its own.
 */
#ifndef NP_XALLOC_H
#define NP_XALLOC_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Out of memory: says so on stderr and aborts (never returns). */
static inline void __attribute__((noreturn)) np_oom(void)
{
	fputs("nodepoold: out of memory\n", stderr);
	abort();
}

/* malloc(n) that never returns NULL (n == 0 allocates one byte). */
static inline void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (p == NULL)
		np_oom();
	return p;
}

/* calloc(n, m), zeroed, that never returns NULL (a zero count or size
 * allocates one byte). */
static inline void *
xcalloc(size_t n, size_t m)
{
	void *p = calloc(n ? n : 1, m ? m : 1);

	if (p == NULL)
		np_oom();
	return p;
}

/* A copy of s (the caller frees it), or NULL when s is NULL. */
static inline char *
xstrdup(const char *s)
{
	char *d;

	if (s == NULL)
		return NULL;
	if ((d = strdup(s)) == NULL)
		np_oom();
	return d;
}

/* The name the drivers used before the helpers above were gathered here;
 * kept so that code written against it (branches in flight) still builds.
 * New code calls xstrdup. */
static inline char *
np_strdupz(const char *s)
{
	return xstrdup(s);
}

#endif
