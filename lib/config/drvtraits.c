/*
 * The lookup of driver traits (drvtraits.h) in the table drivers/traits.c
 * defines.
 */
#include <string.h>

#include "lib/config/drvtraits.h"

const struct np_drv_traits *
np_drv_traits_find(const char *name)
{
	const struct np_drv_traits *const *t;

	if (name == NULL)
		return NULL;
	for (t = np_drv_traits_table; *t != NULL; t++)
		if (strcmp((*t)->name, name) == 0)
			return *t;
	return NULL;
}
