/*
 * The AWS driver's traits (lib/config/drvtraits.h): its provider schema,
 * as upstream Nodepool's nodepool/driver/aws/config.py getSchema(), its
 * defaults (AwsProviderConfig.load()) and its label check.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config/drvtraits.h"

static const struct np_cfg_schema aws_cloud_image = {
    .type = SC_MAP,
    .keys = KEYS(
	REQ("name", STR), REQ("username", STR), OPT("image-id", STR),
	OPT("image-filters", SEQ((&(const struct np_cfg_schema){
				 .type = SC_MAP,
				 .keys = KEYS(OPT("name", STR), OPT("Name", STR),
					      OPT("values", SEQ(STR)), OPT("Values", SEQ(STR))),
			     }))),
	OPT("connection-type", STR), OPT("connection-port", INT), OPT("python-path", STR),
	OPT("shell-type", STR)),
    .groups = GROUPS(EXCL("image-id", "image-filters"), ONE("image-id", "image-filters")),
};

static const struct np_cfg_schema aws_diskimage = {
    .type = SC_MAP,
    .keys = KEYS(
	REQ("name", STR), OPT("username", STR), OPT("pause", BOOL), OPT("connection-type", STR),
	OPT("connection-port", INT), OPT("python-path", STR), OPT("shell-type", STR),
	OPT("architecture", STR), OPT("ena-support", BOOL), OPT("volume-size", INT),
	OPT("volume-type", STR), OPT("import-method", ENUM("snapshot", "ebs-direct", "image")),
	OPT("imds-support", ENUM_OR_NULL("v2.0")), OPT("iops", INT), OPT("throughput", INT),
	OPT("tags", DICT), OPT("validate", BOOL), OPT("rollback-after", INT),
	OPT("validate-command", STR), OPT("validate-key", STR), OPT("validate-timeout", INT)),
};

static const struct np_cfg_schema aws_label = {
    .type = SC_MAP,
    .keys = KEYS(
	REQ("name", STR), OPT("cloud-image", STR), OPT("diskimage", STR), OPT("instance-type", STR),
	OPT("fleet", MAP(REQ("instance-types", LIST),
			 REQ("allocation-strategy",
			     ENUM("prioritized", "price-capacity-optimized", "capacity-optimized",
				  "diversified", "lowest-price")))),
	REQ("key-name", STR), OPT("ebs-optimized", BOOL), OPT("volume-type", STR),
	OPT("volume-size", INT), OPT("iops", INT), OPT("throughput", INT), OPT("userdata", STR),
	OPT("iam-instance-profile", (&(const struct np_cfg_schema){
					.type = SC_MAP,
					.keys = KEYS(OPT("name", STR), OPT("arn", STR)),
					.groups = GROUPS(EXCL("name", "arn")),
				    })),
	OPT("tags", DICT), OPT("dynamic-tags", DICT), OPT("use-spot", BOOL),
	OPT("imdsv2", ENUM_OR_NULL("required", "optional")), OPT("dedicated-host", BOOL)),
    .groups = GROUPS(EXCL("cloud-image", "diskimage"), EXCL("instance-type", "fleet")),
};

static const struct np_cfg_schema aws_pool = {
    .type = SC_MAP,
    .base = &np_cfg_schema_common_pool,
    .keys =
	KEYS(REQ("name", STR), REQ("labels", SEQ(&aws_label)), OPT("security-group-id", STR),
	     OPT("subnet-id", STR), OPT("public-ip-address", BOOL), OPT("public-ipv4", BOOL),
	     OPT("public-ipv6", BOOL), OPT("host-key-checking", BOOL), OPT("max-cores", INT),
	     OPT("max-ram", INT), OPT("max-resources", STRMAP(INT)), OPT("availability-zone", STR)),
};

static const struct np_cfg_schema aws_provider = {
    .type = SC_MAP,
    .base = &np_cfg_schema_common_provider,
    .keys =
	KEYS(REQ("pools", SEQ(&aws_pool)), REQ("region-name", STR), OPT("rate", NUMBER),
	     OPT("profile-name", STR), OPT("cloud-images", SEQ(&aws_cloud_image)),
	     OPT("diskimages", SEQ(&aws_diskimage)), OPT("boot-timeout", INT),
	     OPT("launch-timeout", INT), OPT("launch-retries", INT),
	     OPT("object-storage", MAP(REQ("bucket-name", STR))),
	     OPT("image-format", ENUM("ova", "vhd", "vhdx", "vmdk", "raw")),
	     OPT("image-import-timeout", INT), OPT("max-servers", INT), OPT("max-cores", INT),
	     OPT("max-ram", INT), OPT("max-resources", STRMAP(INT)), OPT("post-upload-hook", STR)),
};

/* path at ...labels[k]: a dedicated host is on demand and in a known zone
 * (upstream's AwsLabel.__init__). */
static void
aws_check_label(struct np_drv_check *ck, const struct np_cfg_node *prov,
		const struct np_cfg_node *pool, const struct np_cfg_node *label)
{
	if (!np_cfg_bool(label, "dedicated-host", 0))
		return;
	if (np_cfg_bool(label, "use-spot", 0))
		np_drv_check_err(ck, label, "dedicated-host",
				 "Spot instances can not be used on dedicated hosts");
	if (np_cfg_str(pool, "availability-zone", NULL) == NULL)
		np_drv_check_err(ck, label, "dedicated-host",
				 "Availability-zone is required for dedicated hosts");
}

const struct np_drv_traits np_traits_aws = {
    .name = "aws",
    .schema = &aws_provider,
    .flags = NP_DRV_MANAGES_IMAGES | NP_DRV_POOL_INHERITS_MAX_SERVERS |
	     NP_DRV_POOL_INHERITS_MAX_CORES_RAM,
    .pool_hkc = NP_DRV_POOL_HKC_PROVIDER,
    .boot_timeout = 180,
    .rate = 2,
    .image_format = "raw",
    .check_label = aws_check_label,
};
