/*
 * The OpenStack driver's traits (lib/config/drvtraits.h): its provider
 * schema, as upstream Nodepool's nodepool/driver/openstack/config.py
 * getSchema(), and its defaults (ProviderConfig.load()). The fake driver
 * builds on these schemas (os_traits.h).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config/drvtraits.h"
#include "drivers/openstack/os_traits.h"
/* An OpenStack pool label's keys; the label groups are openstack_label's. */
const struct np_cfg_schema openstack_label_keys = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", STR), OPT("diskimage", STR), OPT("cloud-image", STR),
		 OPT("min-ram", INT), OPT("flavor-name", STR), OPT("key-name", STR),
		 OPT("console-log", BOOL), OPT("boot-from-volume", BOOL), OPT("volume-size", INT),
		 OPT("instance-properties", DICT), OPT("dynamic-instance-properties", DICT),
		 OPT("userdata", STR), OPT("networks", SEQ(STR)), OPT("host-key-checking", BOOL)),
};

static const struct np_cfg_schema openstack_label = {
    .type = SC_MAP,
    .base = &openstack_label_keys,
    .groups = GROUPS(EXCL("diskimage", "cloud-image"), ONE("min-ram", "flavor-name"),
		     ONE("diskimage", "cloud-image")),
};

const struct np_cfg_schema openstack_pool = {
    .type = SC_MAP,
    .base = &np_cfg_schema_common_pool,
    .keys = KEYS(REQ("name", STR), OPT("networks", SEQ(STR)), OPT("auto-floating-ip", BOOL),
		 OPT("host-key-checking", BOOL), OPT("ignore-provider-quota", BOOL),
		 OPT("max-cores", INT), OPT("max-ram", INT), OPT("max-volumes", INT),
		 OPT("max-volume-gb", INT), OPT("labels", SEQ(&openstack_label)),
		 OPT("availability-zones", SEQ(STR)), OPT("security-groups", SEQ(STR))),
};

const struct np_cfg_schema openstack_provider_diskimage = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", STR), OPT("pause", BOOL), OPT("meta", DICT), OPT("config-drive", BOOL),
		 OPT("connection-type", STR), OPT("connection-port", INT), OPT("validate", BOOL),
		 OPT("rollback-after", INT), OPT("validate-command", STR), OPT("validate-key", STR),
		 OPT("validate-timeout", INT)),
};

static const struct np_cfg_schema openstack_cloud_image = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", STR), OPT("config-drive", BOOL), OPT("connection-type", STR),
		 OPT("connection-port", INT), OPT("image-id", STR), OPT("image-name", STR),
		 OPT("username", STR), OPT("python-path", STR), OPT("shell-type", STR)),
    .groups = GROUPS(EXCL("image-id", "image-name")),
};

const struct np_cfg_schema openstack_provider = {
    .type = SC_MAP,
    .base = &np_cfg_schema_common_provider,
    .keys = KEYS(OPT("region-name", STR), REQ("cloud", STR), OPT("boot-timeout", INT),
		 OPT("image-upload-timeout", INT), OPT("launch-timeout", INT),
		 OPT("launch-retries", INT), OPT("nodepool-id", STR), OPT("rate", COERCE_FLOAT),
		 OPT("image-name-format", STR), OPT("clean-floating-ips", BOOL),
		 OPT("port-cleanup-interval", INT), OPT("pools", SEQ(&openstack_pool)),
		 OPT("diskimages", SEQ(&openstack_provider_diskimage)),
		 OPT("cloud-images", SEQ(&openstack_cloud_image)), OPT("post-upload-hook", STR)),
};

const struct np_drv_traits np_traits_openstack = {
    .name = "openstack",
    .schema = &openstack_provider,
    .flags = NP_DRV_MANAGES_IMAGES | NP_DRV_LABEL_TOP_DISKIMAGE | NP_DRV_IMAGE_USER_FROM_DISKIMAGE |
	     NP_DRV_IMAGE_INTERP_FROM_DISKIMAGE,
    .boot_timeout = 60,
    .rate = 1,
    .cloud_key = "cloud",
    .image_timeout_key = "image-upload-timeout",
    .image_timeout = 3600,
};
