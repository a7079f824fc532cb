/*
 * The schemas of nodepool.yaml: the top level, secure.conf, and each
 * driver's provider section, as upstream Nodepool's voluptuous schemas
 * (nodepool/cmd/config_validator.py and nodepool/driver/<name>/config.py
 * getSchema()), with the deliberate differences listed in lib/config/config.h.
 * Plus our own `nodepoold:` section and `fake` driver.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_int.h"

/* ---- building blocks ---------------------------------------------------- */

static const struct sc_schema s_str = {.type = SC_STR};
static const struct sc_schema s_int = {.type = SC_INT};
static const struct sc_schema s_bool = {.type = SC_BOOL};
static const struct sc_schema s_float = {.type = SC_FLOAT};
static const struct sc_schema s_number = {.type = SC_NUMBER};
static const struct sc_schema s_coerce_float = {.type = SC_COERCE_FLOAT};
static const struct sc_schema s_str_or_int = {.type = SC_STR_OR_INT};
static const struct sc_schema s_str_or_strseq = {.type = SC_STR_OR_STRSEQ};
static const struct sc_schema s_dict = {.type = SC_DICT};
static const struct sc_schema s_list = {.type = SC_LIST};

#define STR	      (&s_str)
#define INT	      (&s_int)
#define BOOL	      (&s_bool)
#define FLOAT	      (&s_float)
#define NUMBER	      (&s_number)
#define COERCE_FLOAT  (&s_coerce_float)
#define STR_OR_INT    (&s_str_or_int)
#define STR_OR_STRSEQ (&s_str_or_strseq)
#define DICT	      (&s_dict)
#define LIST	      (&s_list)
#define SEQ(x)	      (&(const struct sc_schema){.type = SC_SEQ, .item = (x)})
#define STRMAP(x)     (&(const struct sc_schema){.type = SC_STRMAP, .item = (x)})
#define ENUM(...)                                                                                  \
	(&(const struct sc_schema){.type = SC_ENUM,                                                \
				   .choices = (const char *const[]){__VA_ARGS__, NULL}})
#define ENUM_OR_NULL(...)                                                                          \
	(&(const struct sc_schema){.type = SC_ENUM,                                                \
				   .flags = SCF_NULL,                                              \
				   .choices = (const char *const[]){__VA_ARGS__, NULL}})
#define KEYS(...)   ((const struct sc_key[]){__VA_ARGS__, {NULL, NULL, 0}})
#define MAP(...)    (&(const struct sc_schema){.type = SC_MAP, .keys = KEYS(__VA_ARGS__)})
#define GROUPS(...) ((const struct sc_group[]){__VA_ARGS__, {GR_EXCL, NULL}})
#define EXCL(...)                                                                                  \
	{                                                                                          \
		GR_EXCL, (const char *const[])                                                     \
		{                                                                                  \
			__VA_ARGS__, NULL                                                          \
		}                                                                                  \
	}
#define ONE(...)                                                                                   \
	{                                                                                          \
		GR_ONE, (const char *const[])                                                      \
		{                                                                                  \
			__VA_ARGS__, NULL                                                          \
		}                                                                                  \
	}
#define ALTS(...) ((const struct sc_schema *const[]){__VA_ARGS__, NULL})
#define REQ(k, s)                                                                                  \
	{                                                                                          \
		k, s, SK_REQ                                                                       \
	}
#define OPT(k, s)                                                                                  \
	{                                                                                          \
		k, s, 0                                                                            \
	}

/* ---- checks on values ------------------------------------------------------- */

static const char *
chk_positive(const struct np_cfg_node *n)
{
	return n->f > 0 ? NULL : "must be greater than 0";
}

static const char *
chk_nonneg(const struct np_cfg_node *n)
{
	return n->f >= 0 ? NULL : "must not be negative";
}

static const char *
chk_rate01(const struct np_cfg_node *n)
{
	return n->f >= 0 && n->f <= 1 ? NULL : "must be between 0 and 1";
}

static const char *
chk_chroot(const struct np_cfg_node *n)
{
	return n->text[0] == '/' ? NULL : "a chroot must start with '/'";
}

static const char *
chk_port(const struct np_cfg_node *n)
{
	return n->i > 0 && n->i < 65536 ? NULL : "must be a port number (1-65535)";
}

static const char *
chk_no_underscore(const struct np_cfg_node *n)
{
	if (strchr(n->text, '_') != NULL || n->text[0] == '\0')
		return "must be non-empty and contain no '_' (ibmvpc)";
	return NULL;
}

static const char *
chk_nonempty(const struct np_cfg_node *n)
{
	return n->text[0] ? NULL : "must not be empty";
}

/* v.Coerce(float) (a number, a bool or a numeric string) that is >= 0 */
static const char *
chk_coerce_nonneg(const struct np_cfg_node *n)
{
	double v = n->kind == NP_CFG_STR    ? strtod(n->text, NULL)
		   : n->kind == NP_CFG_BOOL ? (double)n->i
					    : n->f;

	return v >= 0 ? NULL : "must not be negative";
}

static const struct sc_schema s_positive = {.type = SC_FLOAT, .check = chk_positive};
static const struct sc_schema s_nonneg = {.type = SC_FLOAT, .check = chk_nonneg};
static const struct sc_schema s_rate01 = {.type = SC_FLOAT, .check = chk_rate01};
static const struct sc_schema s_nonempty_str = {.type = SC_STR, .check = chk_nonempty};
static const struct sc_schema s_nonneg_int = {.type = SC_INT, .check = chk_nonneg};
static const struct sc_schema s_port_no = {.type = SC_INT, .check = chk_port};
static const struct sc_schema s_coerce_nonneg = {.type = SC_COERCE_FLOAT,
						 .check = chk_coerce_nonneg};
#define COERCE_NONNEG (&s_coerce_nonneg)
#define NONNEG_INT    (&s_nonneg_int)
#define PORT	      (&s_port_no)
#define POSITIVE      (&s_positive)
#define NONNEG	      (&s_nonneg)
#define RATE01	      (&s_rate01)
#define NONEMPTY_STR  (&s_nonempty_str)

/* ---- common provider and pool keys (driver/__init__.py) --------------------- */

static const struct sc_schema common_provider = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", NONEMPTY_STR), OPT("driver", STR), OPT("max-concurrency", INT),
		 OPT("priority", INT)),
};

static const struct sc_schema common_pool = {
    .type = SC_MAP,
    .keys = KEYS(OPT("max-servers", INT), OPT("node-attributes", DICT), OPT("priority", INT)),
};

/* ---- static ----------------------------------------------------------------- */

static const struct sc_schema static_provider = {
    .type = SC_MAP,
    .base = &common_provider,
    .keys = KEYS(OPT(
	"pools",
	SEQ((&(const struct sc_schema){
	    .type = SC_MAP,
	    .base = &common_pool,
	    .keys = KEYS(
		REQ("name", STR),
		OPT("nodes", SEQ(MAP(REQ("name", NONEMPTY_STR), REQ("labels", STR_OR_STRSEQ),
				     OPT("username", STR), OPT("timeout", INT),
				     OPT("host-key-checking", BOOL), OPT("host-key", STR_OR_STRSEQ),
				     OPT("connection-port", INT), OPT("ssh-port", INT),
				     OPT("connection-type", STR), OPT("shell-type", STR),
				     OPT("max-parallel-jobs", INT), OPT("python-path", STR))))),
	})))),
};

/* ---- openstack (and the keys fake shares) ----------------------------------- */

/* An OpenStack pool label's keys; the label groups are openstack_label's. */
static const struct sc_schema openstack_label_keys = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", STR), OPT("diskimage", STR), OPT("cloud-image", STR),
		 OPT("min-ram", INT), OPT("flavor-name", STR), OPT("key-name", STR),
		 OPT("console-log", BOOL), OPT("boot-from-volume", BOOL), OPT("volume-size", INT),
		 OPT("instance-properties", DICT), OPT("dynamic-instance-properties", DICT),
		 OPT("userdata", STR), OPT("networks", SEQ(STR)), OPT("host-key-checking", BOOL)),
};

static const struct sc_schema openstack_label = {
    .type = SC_MAP,
    .base = &openstack_label_keys,
    .groups = GROUPS(EXCL("diskimage", "cloud-image"), ONE("min-ram", "flavor-name"),
		     ONE("diskimage", "cloud-image")),
};

static const struct sc_schema openstack_pool = {
    .type = SC_MAP,
    .base = &common_pool,
    .keys = KEYS(REQ("name", STR), OPT("networks", SEQ(STR)), OPT("auto-floating-ip", BOOL),
		 OPT("host-key-checking", BOOL), OPT("ignore-provider-quota", BOOL),
		 OPT("max-cores", INT), OPT("max-ram", INT), OPT("max-volumes", INT),
		 OPT("max-volume-gb", INT), OPT("labels", SEQ(&openstack_label)),
		 OPT("availability-zones", SEQ(STR)), OPT("security-groups", SEQ(STR))),
};

static const struct sc_schema openstack_provider_diskimage = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", STR), OPT("pause", BOOL), OPT("meta", DICT), OPT("config-drive", BOOL),
		 OPT("connection-type", STR), OPT("connection-port", INT)),
};

static const struct sc_schema openstack_cloud_image = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", STR), OPT("config-drive", BOOL), OPT("connection-type", STR),
		 OPT("connection-port", INT), OPT("image-id", STR), OPT("image-name", STR),
		 OPT("username", STR), OPT("python-path", STR), OPT("shell-type", STR)),
    .groups = GROUPS(EXCL("image-id", "image-name")),
};

static const struct sc_schema openstack_provider = {
    .type = SC_MAP,
    .base = &common_provider,
    .keys = KEYS(OPT("region-name", STR), REQ("cloud", STR), OPT("boot-timeout", INT),
		 OPT("image-upload-timeout", INT), OPT("launch-timeout", INT),
		 OPT("launch-retries", INT), OPT("nodepool-id", STR), OPT("rate", COERCE_FLOAT),
		 OPT("image-name-format", STR), OPT("clean-floating-ips", BOOL),
		 OPT("port-cleanup-interval", INT), OPT("pools", SEQ(&openstack_pool)),
		 OPT("diskimages", SEQ(&openstack_provider_diskimage)),
		 OPT("cloud-images", SEQ(&openstack_cloud_image)), OPT("post-upload-hook", STR)),
};

/* ---- aws ---------------------------------------------------------------------- */

static const struct sc_schema aws_cloud_image = {
    .type = SC_MAP,
    .keys = KEYS(
	REQ("name", STR), REQ("username", STR), OPT("image-id", STR),
	OPT("image-filters", SEQ((&(const struct sc_schema){
				 .type = SC_MAP,
				 .keys = KEYS(OPT("name", STR), OPT("Name", STR),
					      OPT("values", SEQ(STR)), OPT("Values", SEQ(STR))),
			     }))),
	OPT("connection-type", STR), OPT("connection-port", INT), OPT("python-path", STR),
	OPT("shell-type", STR)),
    .groups = GROUPS(EXCL("image-id", "image-filters"), ONE("image-id", "image-filters")),
};

static const struct sc_schema aws_diskimage = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", STR), OPT("username", STR), OPT("pause", BOOL),
		 OPT("connection-type", STR), OPT("connection-port", INT), OPT("python-path", STR),
		 OPT("shell-type", STR), OPT("architecture", STR), OPT("ena-support", BOOL),
		 OPT("volume-size", INT), OPT("volume-type", STR),
		 OPT("import-method", ENUM("snapshot", "ebs-direct", "image")),
		 OPT("imds-support", ENUM_OR_NULL("v2.0")), OPT("iops", INT),
		 OPT("throughput", INT), OPT("tags", DICT)),
};

static const struct sc_schema aws_label = {
    .type = SC_MAP,
    .keys = KEYS(
	REQ("name", STR), OPT("cloud-image", STR), OPT("diskimage", STR), OPT("instance-type", STR),
	OPT("fleet", MAP(REQ("instance-types", LIST),
			 REQ("allocation-strategy",
			     ENUM("prioritized", "price-capacity-optimized", "capacity-optimized",
				  "diversified", "lowest-price")))),
	REQ("key-name", STR), OPT("ebs-optimized", BOOL), OPT("volume-type", STR),
	OPT("volume-size", INT), OPT("iops", INT), OPT("throughput", INT), OPT("userdata", STR),
	OPT("iam-instance-profile", (&(const struct sc_schema){
					.type = SC_MAP,
					.keys = KEYS(OPT("name", STR), OPT("arn", STR)),
					.groups = GROUPS(EXCL("name", "arn")),
				    })),
	OPT("tags", DICT), OPT("dynamic-tags", DICT), OPT("use-spot", BOOL),
	OPT("imdsv2", ENUM_OR_NULL("required", "optional")), OPT("dedicated-host", BOOL)),
    .groups = GROUPS(EXCL("cloud-image", "diskimage"), EXCL("instance-type", "fleet")),
};

static const struct sc_schema aws_pool = {
    .type = SC_MAP,
    .base = &common_pool,
    .keys =
	KEYS(REQ("name", STR), REQ("labels", SEQ(&aws_label)), OPT("security-group-id", STR),
	     OPT("subnet-id", STR), OPT("public-ip-address", BOOL), OPT("public-ipv4", BOOL),
	     OPT("public-ipv6", BOOL), OPT("host-key-checking", BOOL), OPT("max-cores", INT),
	     OPT("max-ram", INT), OPT("max-resources", STRMAP(INT)), OPT("availability-zone", STR)),
};

static const struct sc_schema aws_provider = {
    .type = SC_MAP,
    .base = &common_provider,
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

/* ---- gce ------------------------------------------------------------------------ */

static const struct sc_schema gce_provider = {
    .type = SC_MAP,
    .base = &common_provider,
    .keys =
	KEYS(REQ("pools",
		 SEQ((&(const struct sc_schema){
		     .type = SC_MAP,
		     .base = &common_pool,
		     .keys = KEYS(
			 REQ("name", STR),
			 REQ("labels", SEQ(MAP(REQ("name", STR), REQ("cloud-image", STR),
					       REQ("instance-type", STR), OPT("volume-type", STR),
					       OPT("volume-size", INT)))),
			 OPT("use-internal-ip", BOOL)),
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

/* ---- azure ---------------------------------------------------------------------- */

static const struct sc_schema azure_gallery_image = {
    .type = SC_MAP,
    .keys = KEYS(REQ("gallery-name", STR), REQ("name", STR), OPT("version", STR)),
};

static const struct sc_schema azure_cloud_image = {
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

static const struct sc_schema azure_provider = {
    .type = SC_MAP,
    .base = &common_provider,
    .keys = KEYS(
	REQ("pools",
	    SEQ((&(const struct sc_schema){
		.type = SC_MAP,
		.base = &common_pool,
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
	OPT("network", (&(const struct sc_schema){
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

/* ---- kubernetes, openshift, openshiftpods --------------------------------------- */

static const struct sc_schema env_var = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", STR), REQ("value", STR)),
};

/* The resource keys a label made "from nodepool" shares across k8s drivers. */
#define K8S_LABEL_RESOURCE_KEYS                                                                    \
	OPT("image-pull", STR), OPT("cpu", INT), OPT("memory", INT), OPT("storage", INT),          \
	    OPT("cpu-limit", INT), OPT("memory-limit", INT), OPT("storage-limit", INT),            \
	    OPT("gpu", FLOAT), OPT("gpu-resource", STR), OPT("python-path", STR),                  \
	    OPT("shell-type", STR), OPT("env", SEQ(&env_var)), OPT("node-selector", DICT),         \
	    OPT("privileged", BOOL), OPT("scheduler-name", STR), OPT("volumes", LIST),             \
	    OPT("volume-mounts", LIST), OPT("labels", DICT), OPT("dynamic-labels", DICT),          \
	    OPT("annotations", DICT), OPT("extra-resources", STRMAP(INT))

static const struct sc_schema k8s_label_nodepool = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", STR), REQ("type", STR), OPT("image", STR), K8S_LABEL_RESOURCE_KEYS),
};

static const struct sc_schema k8s_label_user = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", STR), REQ("type", STR), REQ("spec", DICT), OPT("labels", DICT),
		 OPT("dynamic-labels", DICT), OPT("annotations", DICT)),
};

static const struct sc_schema openshift_label_nodepool = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", STR), REQ("type", STR), OPT("image", STR),
		 OPT("image-pull-secrets", LIST), K8S_LABEL_RESOURCE_KEYS),
};

static const struct sc_schema pods_label_nodepool = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", STR), REQ("image", STR), OPT("image-pull-secrets", LIST),
		 K8S_LABEL_RESOURCE_KEYS),
};

static const struct sc_schema pods_label_user = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", STR), REQ("spec", DICT), OPT("labels", DICT),
		 OPT("dynamic-labels", DICT), OPT("annotations", DICT)),
};

/* nodepoold's own (DIFFERENCES FROM NODEPOOL in nodepool.yaml(5)): how long
 * a pod may stay Pending (upstream waits a fixed 300 s) and a launch
 * attempt may take. */
#define K8S_NODEPOOLD_KEYS OPT("boot-timeout", INT), OPT("launch-timeout", INT)

#define K8S_POOL_KEYS                                                                              \
	REQ("name", STR), OPT("max-cores", INT), OPT("max-ram", INT),                              \
	    OPT("max-resources", STRMAP(INT)), OPT("default-label-cpu", INT),                      \
	    OPT("default-label-memory", INT), OPT("default-label-storage", INT),                   \
	    OPT("default-label-cpu-limit", INT), OPT("default-label-memory-limit", INT),           \
	    OPT("default-label-storage-limit", INT),                                               \
	    OPT("default-label-extra-resources", STRMAP(INT))

static const struct sc_schema kubernetes_provider = {
    .type = SC_MAP,
    .base = &common_provider,
    .keys = KEYS(
	REQ("pools",
	    SEQ((&(const struct sc_schema){
		.type = SC_MAP,
		.base = &common_pool,
		.keys = KEYS(K8S_POOL_KEYS,
			     REQ("labels", SEQ((&(const struct sc_schema){
					       .type = SC_ANYOF,
					       .alts = ALTS(&k8s_label_nodepool, &k8s_label_user),
					   })))),
	    }))),
	OPT("context", STR), OPT("launch-retries", INT), K8S_NODEPOOLD_KEYS,
	OPT("max-servers", INT), OPT("max-cores", INT), OPT("max-ram", INT),
	OPT("max-resources", STRMAP(INT))),
};

static const struct sc_schema openshift_provider = {
    .type = SC_MAP,
    .base = &common_provider,
    .keys =
	KEYS(REQ("pools", SEQ((&(const struct sc_schema){
			      .type = SC_MAP,
			      .base = &common_pool,
			      .keys = KEYS(K8S_POOL_KEYS,
					   REQ("labels", SEQ((&(const struct sc_schema){
							     .type = SC_ANYOF,
							     .alts = ALTS(&openshift_label_nodepool,
									  &k8s_label_user),
							 })))),
			  }))),
	     REQ("context", STR), OPT("launch-retries", INT), K8S_NODEPOOLD_KEYS,
	     OPT("max-projects", INT), OPT("max-cores", INT), OPT("max-ram", INT),
	     OPT("max-resources", STRMAP(INT))),
};

static const struct sc_schema openshiftpods_provider = {
    .type = SC_MAP,
    .base = &common_provider,
    .keys = KEYS(
	REQ("pools",
	    SEQ((&(const struct sc_schema){
		.type = SC_MAP,
		.base = &common_pool,
		.keys = KEYS(K8S_POOL_KEYS,
			     REQ("labels", SEQ((&(const struct sc_schema){
					       .type = SC_ANYOF,
					       .alts = ALTS(&pods_label_nodepool, &pods_label_user),
					   })))),
	    }))),
	REQ("context", STR), OPT("launch-retries", INT), K8S_NODEPOOLD_KEYS, OPT("max-pods", INT),
	OPT("max-cores", INT), OPT("max-ram", INT), OPT("max-resources", STRMAP(INT))),
};

/* ---- metastatic ------------------------------------------------------------------- */

static const struct sc_schema metastatic_provider = {
    .type = SC_MAP,
    .base = &common_provider,
    .keys =
	KEYS(OPT("boot-timeout", INT), OPT("launch-timeout", INT), OPT("launch-retries", INT),
	     REQ("pools",
		 SEQ((&(const struct sc_schema){
		     .type = SC_MAP,
		     .base = &common_pool,
		     .keys = KEYS(REQ("name", STR),
				  REQ("labels",
				      SEQ(MAP(REQ("name", STR), REQ("backing-label", STR),
					      OPT("max-parallel-jobs", INT), OPT("grace-time", INT),
					      OPT("min-retention-time", INT), OPT("max-age", INT),
					      OPT("host-key-checking", BOOL)))),
				  OPT("host-key-checking", BOOL)),
		 })))),
};

/* ---- ibmvpc ------------------------------------------------------------------------- */

static const struct sc_schema s_ibm_name = {.type = SC_STR, .check = chk_no_underscore};

static const struct sc_schema ibmvpc_cloud_image = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", STR), REQ("username", STR), OPT("keys", SEQ(STR)),
		 OPT("image-href", STR), OPT("image-id", STR), OPT("image-name", STR),
		 OPT("image-filter",
		     MAP(OPT("operating-system",
			     MAP(OPT("architecture", STR), OPT("dedicated-host-only", BOOL),
				 OPT("display-name", STR), OPT("family", STR), OPT("href", STR),
				 OPT("name", STR), OPT("vendor", STR), OPT("version", STR))),
			 OPT("owner-type", STR), OPT("status", STR))),
		 OPT("connection-type", STR), OPT("connection-port", INT), OPT("python-path", STR),
		 OPT("shell-type", STR)),
    .groups = GROUPS(EXCL("image-href", "image-id", "image-name", "image-filter"),
		     ONE("image-href", "image-id", "image-name", "image-filter")),
};

static const struct sc_schema ibmvpc_provider = {
    .type = SC_MAP,
    .base = &common_provider,
    .keys =
	KEYS(REQ("name", &s_ibm_name),
	     REQ("pools",
		 SEQ((&(const struct sc_schema){
		     .type = SC_MAP,
		     .base = &common_pool,
		     .keys = KEYS(REQ("name", &s_ibm_name), REQ("max-servers", INT),
				  REQ("labels", SEQ(MAP(REQ("name", STR), OPT("cloud-image", STR),
							OPT("diskimage", STR), REQ("profile", STR),
							OPT("user-data", STR)))),
				  OPT("zone", STR), OPT("subnet", STR), OPT("public-ipv4", BOOL),
				  OPT("use-internal-ip", BOOL), OPT("host-key-checking", BOOL)),
		 }))),
	     REQ("vpc", STR), REQ("region", STR), OPT("zone", STR), OPT("subnet", STR),
	     OPT("cloud-images", SEQ(&ibmvpc_cloud_image)),
	     OPT("diskimages",
		 SEQ(MAP(REQ("name", STR), REQ("operating-system", STR), OPT("pause", BOOL),
			 OPT("connection-type", STR), OPT("connection-port", INT),
			 OPT("python-path", STR), OPT("shell-type", STR)))),
	     OPT("quota", MAP(OPT("instances", INT), OPT("cores", INT), OPT("ram", INT))),
	     OPT("public-ipv4", BOOL), OPT("use-internal-ip", BOOL), OPT("host-key-checking", BOOL),
	     OPT("post-upload-hook", STR), OPT("rate", COERCE_FLOAT), OPT("boot-timeout", INT),
	     OPT("launch-timeout", INT), OPT("launch-retries", INT), OPT("credentials-file", STR),
	     OPT("object-storage",
		 MAP(REQ("instance-name", STR), REQ("endpoint", STR), REQ("bucket-name", STR)))),
};

/* ---- fake: our simulated cloud (see lib/config/config.h) -------------------------------
 *
 * Upstream's fake driver is its OpenStack driver against an in-process cloud
 * (nodepool/driver/fake/config.py: FakeProviderConfig is an
 * OpenStackProviderConfig), so its configs carry OpenStack's keys. Ours takes
 * the OpenStack schema above, key for key (drivers/fake/fake.c gives each its
 * meaning in the simulated cloud), plus the simulation keys. Deliberately
 * laxer than OpenStack: `cloud` is optional, and a label needs neither
 * min-ram/flavor-name nor an image (a simulated server needs no flavor).
 */

static const struct sc_schema fake_label = {
    .type = SC_MAP,
    .base = &openstack_label_keys,
    .keys = KEYS(OPT("instance-type", STR), OPT("cores", INT), OPT("ram", INT),
		 OPT("boot-delay", NONNEG), OPT("failure-rate", RATE01),
		 OPT("config-error", NONEMPTY_STR)),
    .groups = GROUPS(EXCL("diskimage", "cloud-image")),
};

static const struct sc_schema fake_pool = {
    .type = SC_MAP,
    .base = &openstack_pool,
    .keys = KEYS(OPT("labels", SEQ(&fake_label))),
};

static const struct sc_schema fake_provider_diskimage = {
    .type = SC_MAP,
    .base = &openstack_provider_diskimage,
    .keys = KEYS(OPT("username", STR)),
};

static const struct sc_schema fake_provider = {
    .type = SC_MAP,
    .base = &openstack_provider,
    .keys = KEYS(
	OPT("cloud", STR), OPT("rate", COERCE_NONNEG), OPT("pools", SEQ(&fake_pool)),
	OPT("diskimages", SEQ(&fake_provider_diskimage)), OPT("host-key-checking", BOOL),
	OPT("boot-delay", NONNEG), OPT("delete-delay", NONNEG), OPT("api-delay", NONNEG),
	OPT("failure-rate", RATE01), OPT("boot-failures", NONNEG_INT),
	OPT("never-ready-rate", RATE01), OPT("create-error-rate", RATE01),
	OPT("quota-error-rate", RATE01), OPT("quota-errors", NONNEG_INT),
	OPT("delete-failure-rate", RATE01), OPT("leak-rate", RATE01),
	OPT("volume-leak-rate", RATE01),
	OPT("quota", MAP(OPT("instances", INT), OPT("cores", INT), OPT("ram", INT),
			 OPT("volumes", INT), OPT("volume-gb", INT))),
	OPT("report-quota", BOOL), OPT("unmanaged-instances", NONNEG_INT),
	OPT("fake-ssh-port", PORT), OPT("state-file", NONEMPTY_STR), OPT("seed", INT),
	OPT("cloud-availability-zones", SEQ(NONEMPTY_STR)), OPT("persistent", BOOL),
	OPT("flavors",
	    SEQ(MAP(REQ("name", NONEMPTY_STR), REQ("cores", NONNEG_INT), REQ("ram", NONNEG_INT)))),
	OPT("cloud-networks", SEQ(NONEMPTY_STR)), OPT("image-dir", NONEMPTY_STR),
	OPT("upload-delay", NONNEG), OPT("upload-failures", NONNEG_INT), OPT("image-format", STR)),
};

/* ---- registry ---------------------------------------------------------------------- */

static const struct {
	const char *name;
	const struct sc_schema *schema;
} drivers[] = {
    {"static", &static_provider},
    {"openstack", &openstack_provider},
    {"aws", &aws_provider},
    {"gce", &gce_provider},
    {"azure", &azure_provider},
    {"kubernetes", &kubernetes_provider},
    {"openshift", &openshift_provider},
    {"openshiftpods", &openshiftpods_provider},
    {"metastatic", &metastatic_provider},
    {"ibmvpc", &ibmvpc_provider},
    {"fake", &fake_provider},
};

const char *const sc_driver_names[] = {"static",     "openstack",  "aws",	"gce",
				       "azure",	     "kubernetes", "openshift", "openshiftpods",
				       "metastatic", "ibmvpc",	   "fake",	NULL};

const struct sc_schema *
sc_driver(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(drivers) / sizeof(drivers[0]); i++)
		if (strcmp(drivers[i].name, name) == 0)
			return drivers[i].schema;
	return NULL;
}

/* ---- top level ------------------------------------------------------------------------ */

static const struct sc_schema s_chroot = {.type = SC_STR, .check = chk_chroot};
static const struct sc_schema s_port = {.type = SC_INT, .check = chk_port};
static const struct sc_schema s_pos_int = {.type = SC_INT, .check = chk_positive};

static const struct sc_schema zk_servers = {
    .type = SC_SEQ,
    .item = MAP(REQ("host", NONEMPTY_STR), OPT("port", INT), OPT("chroot", &s_chroot)),
};

static const struct sc_schema zk_tls = {
    .type = SC_MAP,
    .keys = KEYS(REQ("cert", STR), REQ("key", STR), REQ("ca", STR)),
};

static const struct sc_schema diskimage = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", NONEMPTY_STR), OPT("abstract", BOOL), OPT("dib-cmd", STR),
		 OPT("pause", BOOL), OPT("elements", SEQ(STR)), OPT("formats", SEQ(STR)),
		 OPT("keep-formats", SEQ(STR)), OPT("delete-after-upload", BOOL),
		 OPT("parent", STR), OPT("release", STR_OR_INT), OPT("rebuild-age", INT),
		 OPT("env-vars", STRMAP(STR)), OPT("username", STR), OPT("python-path", STR),
		 OPT("shell-type", STR), OPT("build-timeout", INT), OPT("metadata", DICT)),
};

const struct sc_schema sc_top = {
    .type = SC_MAP,
    .keys = KEYS(
	OPT("webapp",
	    MAP(OPT("port", &s_port), OPT("listen_address", STR),
		OPT("max_connections", &s_pos_int), OPT("max_connections_per_client", &s_pos_int),
		OPT("request_timeout", POSITIVE), OPT("max_response_size", &s_pos_int))),
	OPT("elements-dir", STR), OPT("images-dir", STR), OPT("build-log-dir", STR),
	OPT("build-log-retention", INT), OPT("zookeeper-servers", &zk_servers),
	OPT("zookeeper-tls", &zk_tls), OPT("zookeeper-timeout", POSITIVE),
	OPT("providers", SEQ((&(const struct sc_schema){.type = SC_PROVIDER}))),
	OPT("labels",
	    SEQ(MAP(REQ("name", NONEMPTY_STR), OPT("min-ready", INT), OPT("max-ready-age", INT)))),
	OPT("diskimages", SEQ(&diskimage)), OPT("max-hold-age", INT),
	OPT("tenant-resource-limits",
	    SEQ((&(const struct sc_schema){
		.type = SC_MAP,
		.keys = KEYS(REQ("tenant-name", STR), OPT("max-cores", INT), OPT("max-ram", INT),
			     OPT("max-servers", INT)),
		.item = INT,
	    }))),
	OPT("nodepoold",
	    MAP(OPT("cleanup-interval", POSITIVE), OPT("delete-interval", POSITIVE),
		OPT("stats-interval", POSITIVE), OPT("worker-status-timeout", POSITIVE),
		OPT("control-socket", NONEMPTY_STR), OPT("pid-file", NONEMPTY_STR),
		OPT("restart-backoff-max", POSITIVE), OPT("request-lock-cleanup-age", POSITIVE),
		OPT("reload-on-change", BOOL)))),
};

const struct sc_schema sc_secure = {
    .type = SC_MAP,
    .flags = SCF_NULL,
    .keys = KEYS(OPT("zookeeper-servers", &zk_servers), OPT("zookeeper-tls", &zk_tls),
		 OPT("diskimages", SEQ(MAP(REQ("name", STR), REQ("env-vars", STRMAP(STR)))))),
};
