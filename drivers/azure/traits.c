/*
 * The Azure driver's traits (lib/config/drvtraits.h): its provider schema,
 * as upstream Nodepool's nodepool/driver/azure/config.py getSchema(), and
 * its defaults (AzureProviderConfig.load(); images upload as vhd).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config/drvtraits.h"

static const struct np_cfg_schema azure_gallery_image = {
    .type = SC_MAP,
    .keys = KEYS(REQ("gallery-name", STR), REQ("name", STR), OPT("version", STR)),
};

static const struct np_cfg_schema azure_cloud_image = {
    .type = SC_MAP,
    .keys =
	KEYS(REQ("name", STR), REQ("username", STR), OPT("password", STR),
	     OPT("generate-password", BOOL), OPT("key", STR),
	     OPT("image-reference", MAP(REQ("sku", STR), REQ("publisher", STR), REQ("version", STR),
					REQ("offer", STR))),
	     OPT("image-id", STR),
	     OPT("image-filter", MAP(OPT("location", STR), OPT("name", STR), OPT("tags", DICT))),
	     OPT("community-gallery-image", &azure_gallery_image),
	     OPT("shared-gallery-image", &azure_gallery_image), OPT("connection-type", STR),
	     OPT("connection-port", INT), OPT("python-path", STR), OPT("shell-type", STR)),
    .groups = GROUPS(EXCL("image-reference", "image-id", "image-filter", "community-gallery-image",
			  "shared-gallery-image"),
		     ONE("image-reference", "image-id", "image-filter", "community-gallery-image",
			 "shared-gallery-image")),
};

static const struct np_cfg_schema azure_provider = {
    .type = SC_MAP,
    .base = &np_cfg_schema_common_provider,
    .keys = KEYS(
	REQ("pools",
	    SEQ((&(const struct np_cfg_schema){
		.type = SC_MAP,
		.base = &np_cfg_schema_common_pool,
		.keys = KEYS(
		    REQ("name", STR), REQ("max-servers", INT),
		    REQ("labels",
			SEQ(MAP(REQ("name", STR), OPT("cloud-image", STR), OPT("diskimage", STR),
				REQ("hardware-profile", MAP(REQ("vm-size", STR))),
				OPT("tags", DICT), OPT("dynamic-tags", DICT), OPT("user-data", STR),
				OPT("custom-data", STR), OPT("volume-size", INT)))),
		    OPT("ipv4", BOOL), OPT("ipv6", BOOL), OPT("public-ipv4", BOOL),
		    OPT("public-ipv6", BOOL), OPT("use-internal-ip", BOOL),
		    OPT("host-key-checking", BOOL)),
	    }))),
	REQ("location", STR), REQ("resource-group", STR), REQ("resource-group-location", STR),
	OPT("subnet-id", STR),
	OPT("network", (&(const struct np_cfg_schema){
			   .type = SC_ANYOF,
			   .alts = ALTS(STR, MAP(OPT("resource-group", STR), OPT("network", STR),
						 OPT("subnet", STR))),
		       })),
	OPT("cloud-images", SEQ(&azure_cloud_image)),
	OPT("diskimages",
	    SEQ(MAP(REQ("name", STR), OPT("username", STR), OPT("key", STR), OPT("pause", BOOL),
		    OPT("connection-type", STR), OPT("connection-port", INT),
		    OPT("python-path", STR), OPT("shell-type", STR), OPT("tags", DICT)))),
	REQ("auth-path", STR), OPT("ipv4", BOOL), OPT("ipv6", BOOL), OPT("public-ipv4", BOOL),
	OPT("public-ipv6", BOOL), OPT("use-internal-ip", BOOL), OPT("host-key-checking", BOOL),
	OPT("post-upload-hook", STR), OPT("rate", COERCE_FLOAT), OPT("boot-timeout", INT),
	OPT("launch-timeout", INT), OPT("launch-retries", INT), OPT("zuul-public-key", STR)),
};

const struct np_drv_traits np_traits_azure = {
    .name = "azure",
    .schema = &azure_provider,
    .flags = NP_DRV_MANAGES_IMAGES | NP_DRV_IMAGE_FORMAT_FIXED,
    .pool_hkc = NP_DRV_POOL_HKC_PROVIDER,
    .boot_timeout = 120,
    .rate = 1,
    .region_key = "location",
    .image_format = "vhd",
};
