/*
 * The metastatic driver's traits (lib/config/drvtraits.h): its provider
 * schema, as upstream Nodepool's nodepool/driver/metastatic/config.py
 * getSchema(), its defaults (pools do not check host keys) and its checks
 * (labels sharing a backing label agree; max-age >= min-retention-time).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config/drvtraits.h"

static const struct np_cfg_schema metastatic_provider = {
    .type = SC_MAP,
    .base = &np_cfg_schema_common_provider,
    .keys =
	KEYS(OPT("boot-timeout", INT), OPT("launch-timeout", INT), OPT("launch-retries", INT),
	     REQ("pools",
		 SEQ((&(const struct np_cfg_schema){
		     .type = SC_MAP,
		     .base = &np_cfg_schema_common_pool,
		     .keys = KEYS(REQ("name", STR),
				  REQ("labels",
				      SEQ(MAP(REQ("name", STR), REQ("backing-label", STR),
					      OPT("max-parallel-jobs", INT), OPT("grace-time", INT),
					      OPT("min-retention-time", INT), OPT("max-age", INT),
					      OPT("host-key-checking", BOOL)))),
				  OPT("host-key-checking", BOOL)),
		 })))),
};

/* Labels sharing a backing-label must share its settings. */
static int
backing_equal(const struct np_cfg_node *a, const struct np_cfg_node *b)
{
	static const char *const keys[] = {"max-parallel-jobs", "grace-time", "min-retention-time",
					   "max-age", NULL};
	static const long long defs[] = {1, 60, 0, 0};
	size_t i;

	for (i = 0; keys[i]; i++)
		if (np_cfg_int(a, keys[i], defs[i]) != np_cfg_int(b, keys[i], defs[i]))
			return 0;
	return 1;
}

/* path at providers[i] (upstream's MetastaticProviderConfig.load()). */
static void
metastatic_check_provider(struct np_drv_check *ck, const struct np_cfg_node *prov)
{
	size_t n, i, j;
	struct np_drv_pool_item *v = np_drv_pool_items(prov, "labels", "backing-label", &n);

	for (i = 0; i < n; i = j)
		for (j = i + 1; j < n && strcmp(v[i].key, v[j].key) == 0; j++)
			if (!backing_equal(v[i].item, v[j].item)) {
				size_t old = np_drv_check_pool_item(ck, &v[j], "labels");

				np_drv_check_err(
				    ck, v[j].item, "backing-label",
				    "Multiple label definitions for the same backing label must be "
				    "identical (%s, see line %d)",
				    v[j].key, v[i].item->line);
				np_drv_check_pop(ck, old);
			}
	free(v);
}

/* path at ...labels[k] (upstream's MetastaticLabel.__init__). */
static void
metastatic_check_label(struct np_drv_check *ck, const struct np_cfg_node *prov,
		       const struct np_cfg_node *pool, const struct np_cfg_node *label)
{
	long long max_age = np_cfg_int(label, "max-age", 0);

	if (max_age && max_age < np_cfg_int(label, "min-retention-time", 0))
		np_drv_check_err(ck, label, "max-age",
				 "The max-age must be greater than or equal to the "
				 "min-retention-time");
}

const struct np_drv_traits np_traits_metastatic = {
    .name = "metastatic",
    .schema = &metastatic_provider,
    .pool_hkc = NP_DRV_POOL_HKC_OFF,
    .boot_timeout = 120,
    .rate = 1,
    .check_provider = metastatic_check_provider,
    .check_label = metastatic_check_label,
};
