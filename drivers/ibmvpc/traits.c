/*
 * The IBM Cloud VPC driver's traits (lib/config/drvtraits.h): its provider
 * schema, as upstream Nodepool's nodepool/driver/ibmvpc/config.py
 * getSchema(), its defaults (IBMVPCProviderConfig.load(): images named
 * npimage{upload_id}) and its pool check (a zone and a subnet).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config/drvtraits.h"

static const char *
chk_no_underscore(const struct np_cfg_node *n)
{
	if (strchr(n->text, '_') != NULL || n->text[0] == '\0')
		return "must be non-empty and contain no '_' (ibmvpc)";
	return NULL;
}

static const struct np_cfg_schema s_ibm_name = {.type = SC_STR, .check = chk_no_underscore};

static const struct np_cfg_schema ibmvpc_cloud_image = {
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

static const struct np_cfg_schema ibmvpc_provider = {
    .type = SC_MAP,
    .base = &np_cfg_schema_common_provider,
    .keys =
	KEYS(REQ("name", &s_ibm_name),
	     REQ("pools",
		 SEQ((&(const struct np_cfg_schema){
		     .type = SC_MAP,
		     .base = &np_cfg_schema_common_pool,
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

/* path at providers[i].pools[j]: a zone and a subnet, the pool's or the
 * provider's (upstream's IBMVPCPool.load()). */
static void
ibmvpc_check_pool(struct np_drv_check *ck, const struct np_cfg_node *prov,
		  const struct np_cfg_node *pool)
{
	if (np_cfg_str(pool, "zone", np_cfg_str(prov, "zone", NULL)) == NULL)
		np_drv_check_err(ck, pool, NULL, "Zone is required in provider or pool config");
	if (np_cfg_str(pool, "subnet", np_cfg_str(prov, "subnet", NULL)) == NULL)
		np_drv_check_err(ck, pool, NULL, "Subnet is required in provider or pool config");
}

const struct np_drv_traits np_traits_ibmvpc = {
    .name = "ibmvpc",
    .schema = &ibmvpc_provider,
    .flags = NP_DRV_MANAGES_IMAGES | NP_DRV_IMAGE_USER_FROM_DISKIMAGE,
    .pool_hkc = NP_DRV_POOL_HKC_PROVIDER,
    .boot_timeout = 120,
    .rate = 1,
    .region_key = "region",
    .image_format = "qcow2",
    .image_name_format = "npimage{upload_id}",
    .check_pool = ibmvpc_check_pool,
};
