/*
 * Optional shared libraries loaded at run time (dlopen) on first use, so a
 * process that never needs them never maps them: libcurl and libxml2 are
 * used only by the HTTP cloud drivers (openstack, aws, the kubernetes
 * family), libssh only by host-key scanning, yet together they pull ~35
 * shared libraries (gnutls, krb5, ldap, icu, libstdc++...) and ~7 MiB of
 * resident pages into every worker that links them.
 *
 * A user declares the functions it calls in a table whose fields are typed
 * by the library's own header (__typeof__(curl_easy_init) *), so a wrong
 * signature is a compile error, and lists them for dynlib_load():
 *
 *   #define MY_FUNCS(X) X(curl_easy_init) X(curl_easy_cleanup)
 *   struct my_api { MY_FUNCS(DYNLIB_FIELD) };
 *   struct my_api my;
 *   #define MY_SYM(f) DYNLIB_SYM(my, f)
 *   static const struct dynlib_sym my_syms[] = { MY_FUNCS(MY_SYM) };
 *   static struct dynlib my_lib = DYNLIB_INIT("libcurl.so.4", "libcurl",
 *                                             "libcurl4", my_syms);
 *   if (dynlib_load(&my_lib, "driver openstack", err, sizeof(err)) != 0) ...
 *
 * Callers usually add, after the table, one macro per name
 * (#define curl_easy_init (*my.curl_easy_init)) so that the code reads and
 * compiles as plain library calls; a call to a function missing from the
 * table is then a link error, as the binary does not link the library.
 *
 * The library is opened by its soname (the ABI the headers describe) with
 * RTLD_NOW | RTLD_LOCAL and never closed. Thread-safe.
 */
#ifndef NP_DYNLIB_H
#define NP_DYNLIB_H

#include <stddef.h>

struct dynlib_sym {
	const char *name; /* the symbol dlsym() looks up */
	void *slot;	  /* where its address is stored: a pointer field of the
			     same size as void * (function or data pointer) */
};

struct dynlib {
	const char *soname;  /* "libcurl.so.4" */
	const char *what;    /* what a user calls it: "libcurl" */
	const char *package; /* the Debian package that ships soname: "libcurl4" */
	const struct dynlib_sym *syms;
	size_t nsyms;
	/* state, zero-initialised: */
	int loaded;    /* every symbol resolved */
	char err[320]; /* the last failure (dlerror's text) */
};

/* One table field: a pointer typed as the library's declaration of f. */
#define DYNLIB_FIELD(f) __typeof__(f) *f;
/* One dynlib_sym: the symbol f into the field f of the table object t. */
#define DYNLIB_SYM(t, f) {#f, (void *)&(t).f},
/* A struct dynlib for soname so, named what, shipped by Debian package pkg,
 * resolving the array syms. */
#define DYNLIB_INIT(so, what, pkg, syms)                                                           \
	{                                                                                          \
		(so), (what), (pkg), (syms), sizeof(syms) / sizeof((syms)[0]), 0, ""               \
	}

/*
 * Load l (once; a failure is retried on the next call) and fill every slot.
 * Returns 0, or -1 with err set to "<who> needs <what> (Debian package
 * <package>): <the loader's reason>" (who: "driver openstack", "host-key
 * scanning"; NULL: "nodepoold"). err may be NULL.
 */
int dynlib_load(struct dynlib *l, const char *who, char *err, size_t errlen);

#endif
