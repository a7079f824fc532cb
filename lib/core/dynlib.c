/*
 * Optional shared libraries loaded on first use. See dynlib.h.
 */
#include "lib/core/dynlib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t dynlib_mu = PTHREAD_MUTEX_INITIALIZER;

static void
fail(struct dynlib *l, const char *reason)
{
	snprintf(l->err, sizeof(l->err), "%s", reason != NULL ? reason : "unknown error");
}

int
dynlib_load(struct dynlib *l, const char *who, char *err, size_t errlen)
{
	void *h, *p;
	size_t i;
	int rc = 0;

	pthread_mutex_lock(&dynlib_mu);
	if (l->loaded)
		goto out;
	h = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		fail(l, dlerror());
		rc = -1;
		goto out;
	}
	for (i = 0; i < l->nsyms; i++) {
		dlerror();
		p = dlsym(h, l->syms[i].name);
		if (p == NULL) {
			const char *e = dlerror();
			char why[256];

			snprintf(why, sizeof(why), "%s has no %s%s%s", l->soname, l->syms[i].name,
				 e != NULL ? ": " : "", e != NULL ? e : "");
			fail(l, why);
			/* keep the handle: dlclose of a library that may hold
			 * state (atexit handlers) is not worth the risk */
			rc = -1;
			goto out;
		}
		/* a function pointer has the size of void * (POSIX dlsym) */
		memcpy(l->syms[i].slot, &p, sizeof(p));
	}
	l->loaded = 1;
out:
	if (rc != 0 && err != NULL && errlen > 0)
		snprintf(err, errlen, "%s needs %s (Debian package %s): %s",
			 who != NULL ? who : "nodepoold", l->what, l->package, l->err);
	pthread_mutex_unlock(&dynlib_mu);
	return rc;
}
