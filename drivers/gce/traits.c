/*
 * The GCE driver's traits (lib/config/drvtraits.h): its provider schema,
 * as upstream Nodepool's nodepool/driver/gce/config.py getSchema(), and
 * its defaults (GceProviderConfig.load()).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config/drvtraits.h"

static const struct np_cfg_schema gce_provider = {
    .type = SC_MAP,
    .base = &np_cfg_schema_common_provider,
    .keys =
	KEYS(REQ("pools",
		 SEQ((&(const struct np_cfg_schema){
		     .type = SC_MAP,
		     .base = &np_cfg_schema_common_pool,
		     .keys = KEYS(
			 REQ("name", STR),
			 REQ("labels", SEQ(MAP(REQ("name", STR), REQ("cloud-image", STR),
					       REQ("instance-type", STR), OPT("volume-type", STR),
					       OPT("volume-size", INT)))),
			 OPT("use-internal-ip", BOOL), OPT("network", STR), OPT("subnetwork", STR)),
		 }))),
	     REQ("region", STR), REQ("project", STR), REQ("zone", STR),
	     OPT("cloud-images",
		 SEQ(MAP(REQ("name", STR), OPT("connection-type", STR), OPT("connection-port", INT),
			 OPT("shell-type", STR), OPT("image-id", STR), OPT("image-project", STR),
			 OPT("image-family", STR), OPT("username", STR), OPT("key", STR),
			 OPT("python-path", STR)))),
	     OPT("boot-timeout", INT), OPT("launch-timeout", INT), OPT("launch-retries", INT),
	     OPT("rate-limit", INT)),
};

const struct np_drv_traits np_traits_gce = {
    .name = "gce",
    .schema = &gce_provider,
    .flags = NP_DRV_LISTS_IMAGES,
    .boot_timeout = 60,
    .rate = 2,
    .region_key = "region",
};
