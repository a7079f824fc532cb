/*
 * lib/core/dynlib: run-time loading of an optional library, as the HTTP
 * drivers load libcurl and libxml2. zlib stands in for them: every build
 * has it, and its header types the table.
 */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <zlib.h>

#include "lib/core/dynlib.h"

#define Z_FUNCS(X) X(zlibVersion) X(crc32)
struct z_api {
	Z_FUNCS(DYNLIB_FIELD)
};

Test(dynlib, loads_and_resolves_typed_functions)
{
	struct z_api z = {0};
#define Z_SYM(f) DYNLIB_SYM(z, f)
	const struct dynlib_sym syms[] = {Z_FUNCS(Z_SYM)};
	struct dynlib l = DYNLIB_INIT("libz.so.1", "zlib", "zlib1g", syms);
	char err[512] = "";

	cr_assert_eq(dynlib_load(&l, "test", err, sizeof(err)), 0, "%s", err);
	cr_assert_not_null(z.zlibVersion);
	/* the loaded library answers as the one the header describes */
	cr_assert_eq(z.zlibVersion()[0], ZLIB_VERSION[0]);
	cr_assert_eq(z.crc32(0, (const Bytef *)"abc", 3), 0x352441c2UL);
	/* loaded once: a second call succeeds at once */
	cr_assert_eq(dynlib_load(&l, "test", err, sizeof(err)), 0);
}

Test(dynlib, missing_library_says_who_needs_which_package)
{
	struct z_api z = {0};
	const struct dynlib_sym syms[] = {Z_FUNCS(Z_SYM)};
	struct dynlib l = DYNLIB_INIT("libnodepoold-absent.so.7", "libabsent", "libabsent7", syms);
	char err[512] = "";

	cr_assert_eq(dynlib_load(&l, "driver openstack", err, sizeof(err)), -1);
	cr_assert(
	    strncmp(err, "driver openstack needs libabsent (Debian package libabsent7): ", 62) == 0,
	    "%s", err);
	cr_assert_not_null(strstr(err, "libnodepoold-absent.so.7"), "%s", err);
	cr_assert_null(z.zlibVersion);
	/* no who: the daemon's name */
	cr_assert_eq(dynlib_load(&l, NULL, err, sizeof(err)), -1);
	cr_assert(strncmp(err, "nodepoold needs libabsent", 25) == 0, "%s", err);
}

Test(dynlib, missing_function_is_named)
{
	struct {
		__typeof__(zlibVersion) *zlibVersion;
		__typeof__(zlibVersion) *np_no_such_function;
	} z = {0};
	const struct dynlib_sym syms[] = {DYNLIB_SYM(z, zlibVersion)
					      DYNLIB_SYM(z, np_no_such_function)};
	struct dynlib l = DYNLIB_INIT("libz.so.1", "zlib", "zlib1g", syms);
	char err[512] = "";

	cr_assert_eq(dynlib_load(&l, "driver x", err, sizeof(err)), -1);
	cr_assert_not_null(strstr(err, "driver x needs zlib (Debian package zlib1g): libz.so.1 has "
				       "no np_no_such_function"),
			   "%s", err);
}
