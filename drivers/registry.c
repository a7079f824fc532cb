/*
 * The drivers built into this binary, registered at compile time in one
 * array (house style rule 10). Duplicate names are a programming error
 * caught by driver_registry_check() at start-up. Every driver here also
 * has traits (drivers/traits.c; tests/unit/test_drvtraits.c checks it).
 */
#include "drivers/driver.h"

#include <string.h>

extern const struct driver drv_static;
extern const struct driver drv_fake;
extern const struct driver drv_kubernetes;
extern const struct driver drv_openshift;
extern const struct driver drv_openshiftpods;
extern const struct driver drv_aws;
extern const struct driver drv_openstack;
extern const struct driver drv_azure;
extern const struct driver drv_ibmvpc;
extern const struct driver drv_metastatic;
extern const struct driver drv_gce;

static const struct driver *const drivers[] = {
    &drv_static,    &drv_fake, &drv_kubernetes, &drv_openshift, &drv_openshiftpods, &drv_aws,
    &drv_openstack, &drv_gce,  &drv_azure,	&drv_ibmvpc,	&drv_metastatic,
};

const struct driver *
driver_lookup(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(drivers) / sizeof(drivers[0]); i++)
		if (strcmp(drivers[i]->name, name) == 0)
			return drivers[i];
	return NULL;
}

const struct driver *
driver_nth(size_t i)
{
	return i < sizeof(drivers) / sizeof(drivers[0]) ? drivers[i] : NULL;
}

int
driver_registry_check(void)
{
	size_t i, j;

	for (i = 0; i < sizeof(drivers) / sizeof(drivers[0]); i++)
		for (j = i + 1; j < sizeof(drivers) / sizeof(drivers[0]); j++)
			if (strcmp(drivers[i]->name, drivers[j]->name) == 0)
				return -1;
	return 0;
}
