/*
 * The driver traits table (lib/config/drvtraits.h, drivers/traits.c):
 * every driver built into the binaries (drivers/registry.c) has traits, the
 * table's entries are complete, and lib/config reaches each driver's
 * schema, defaults and checks through it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "lib/config/config.h"
#include "drivers/driver.h"
#include "lib/config/drvtraits.h"

static char *
errors_of(const char *yaml, struct np_config **cfg)
{
	struct np_cfg_errors *errs = NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	*cfg = NULL;
	np_cfg_load_buffer("t.yaml", yaml, strlen(yaml), NULL, NULL, 0, cfg, &errs);
	f = open_memstream(&buf, &len);
	np_cfg_errors_print(errs, f);
	fclose(f);
	np_cfg_errors_free(errs);
	return buf;
}

#define assert_has(text, needle)                                                                   \
	cr_assert(strstr((text), (needle)) != NULL, "expected \"%s\" in:\n%s", (needle), (text))

Test(drvtraits, every_registered_driver_has_traits)
{
	const struct driver *d;
	size_t i;

	for (i = 0; (d = driver_nth(i)) != NULL; i++) {
		const struct np_drv_traits *t = np_drv_traits_find(d->name);

		cr_assert(t != NULL, "driver %s is registered but has no traits", d->name);
		cr_assert_str_eq(t->name, d->name);
	}
	cr_assert_geq(i, 7, "drivers/registry.c lists %zu drivers", i);
}

Test(drvtraits, table_entries_are_complete_and_unique)
{
	const struct np_drv_traits *const *t, *const *u;

	for (t = np_drv_traits_table; *t != NULL; t++) {
		const struct np_cfg_schema *s;

		cr_assert((*t)->name != NULL && (*t)->name[0] != '\0');
		cr_assert((*t)->schema != NULL, "%s has no schema", (*t)->name);
		cr_assert_eq((*t)->schema->type, SC_MAP, "%s: a provider schema is a map",
			     (*t)->name);
		/* the common provider keys are a base of every provider schema */
		for (s = (*t)->schema; s != NULL && s != &np_cfg_schema_common_provider;
		     s = s->base)
			;
		cr_assert(s != NULL, "%s's schema does not build on np_cfg_schema_common_provider",
			  (*t)->name);
		for (u = t + 1; *u != NULL; u++)
			cr_assert_str_neq((*t)->name, (*u)->name, "two traits named %s",
					  (*t)->name);
		cr_assert_eq(np_drv_traits_find((*t)->name), *t);
	}
	cr_assert_null(np_drv_traits_find("no-such-driver"));
}

Test(drvtraits, unknown_driver_is_reported)
{
	struct np_config *cfg;
	char *t = errors_of("providers: [{name: p, driver: nosuch}]\n", &cfg);

	cr_assert_null(cfg);
	assert_has(t, "providers[0].driver: nosuch: unknown driver");
	free(t);
}

/* A driver's schema, its pool check (drivers/ibmvpc/traits.c) and its
 * typed defaults all come from its traits. */
Test(drvtraits, drivers_validate_and_type_as_upstream)
{
	struct np_config *cfg;
	char *t =
	    errors_of("labels: [{name: l}]\n"
		      "providers:\n"
		      "  - {name: ibm, driver: ibmvpc, vpc: v, region: r,\n"
		      "     pools: [{name: p, max-servers: 1, labels: [{name: l, profile: x}]}]}\n",
		      &cfg);

	cr_assert_null(cfg);
	assert_has(t, "providers[0].pools[0]: Zone is required in provider or pool config");
	assert_has(t, "providers[0].pools[0]: Subnet is required in provider or pool config");
	free(t);

	t = errors_of("labels: [{name: l}]\n"
		      "providers:\n"
		      "  - {name: g, driver: gce, project: pr, region: europe-west1, zone: z,\n"
		      "     cloud-images: [{name: c, image-id: i, username: u}],\n"
		      "     pools: [{name: p, max-servers: 1,\n"
		      "              labels: [{name: l, instance-type: t, cloud-image: c}]}]}\n"
		      "  - {name: m, driver: metastatic,\n"
		      "     pools: [{name: p, labels: [{name: l, backing-label: b}]}]}\n",
		      &cfg);
	cr_assert_not_null(cfg, "%s", t);
	free(t);
	cr_assert_str_eq(cfg->providers[0].region, "europe-west1");
	cr_assert_eq(cfg->providers[0].boot_timeout, 60);
	cr_assert_float_eq(cfg->providers[0].rate, 2.0, 1e-9);
	cr_assert_eq(cfg->providers[1].boot_timeout, 120);
	cr_assert_eq(cfg->providers[1].pools[0].host_key_checking, 0);
	np_cfg_free(cfg);
}
