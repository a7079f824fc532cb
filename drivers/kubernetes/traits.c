/*
 * The traits (lib/config/drvtraits.h) of the three drivers built from
 * drivers/kubernetes/: kubernetes, openshift and openshiftpods. Their
 * provider schemas, as upstream Nodepool's nodepool/driver/{kubernetes,
 * openshift,openshiftpods}/config.py getSchema(), and their defaults (a
 * pool inherits the provider's limits; openshift's max-projects and
 * openshiftpods' max-pods are the provider's max-servers).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config/drvtraits.h"

static const struct np_cfg_schema env_var = {
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

/* nodepoold's own: pod nodes of the label share namespaces kept warm, at
 * least warm-namespaces of them made ahead (drivers/kubernetes/
 * kubernetes.c "warm namespaces"); kubernetes pod labels only (the driver
 * refuses them elsewhere) */
#define K8S_REUSE_KEY OPT("namespace-reuse", BOOL), OPT("warm-namespaces", INT)

static const struct np_cfg_schema k8s_label_nodepool = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", STR), REQ("type", STR), OPT("image", STR), K8S_LABEL_RESOURCE_KEYS,
		 K8S_REUSE_KEY),
};

static const struct np_cfg_schema k8s_label_user = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", STR), REQ("type", STR), REQ("spec", DICT), OPT("labels", DICT),
		 OPT("dynamic-labels", DICT), OPT("annotations", DICT), K8S_REUSE_KEY),
};

static const struct np_cfg_schema openshift_label_nodepool = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", STR), REQ("type", STR), OPT("image", STR),
		 OPT("image-pull-secrets", LIST), K8S_LABEL_RESOURCE_KEYS),
};

static const struct np_cfg_schema pods_label_nodepool = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", STR), REQ("image", STR), OPT("image-pull-secrets", LIST),
		 K8S_LABEL_RESOURCE_KEYS),
};

static const struct np_cfg_schema pods_label_user = {
    .type = SC_MAP,
    .keys = KEYS(REQ("name", STR), REQ("spec", DICT), OPT("labels", DICT),
		 OPT("dynamic-labels", DICT), OPT("annotations", DICT)),
};

/* nodepoold's own (DIFFERENCES FROM NODEPOOL in nodepool.yaml(5)): how long
 * a pod may stay Pending (upstream waits a fixed 300 s) and a launch
 * attempt may take. */
#define K8S_NODEPOOLD_KEYS OPT("boot-timeout", INT), OPT("launch-timeout", INT)
/* and, where nodepoold makes a service account per node, how long the
 * node's token is asked for (TokenRequest); 0: upstream's token secret */
#define K8S_TOKEN_KEYS OPT("token-lifetime", INT)

#define K8S_POOL_KEYS                                                                              \
	REQ("name", STR), OPT("max-cores", INT), OPT("max-ram", INT),                              \
	    OPT("max-resources", STRMAP(INT)), OPT("default-label-cpu", INT),                      \
	    OPT("default-label-memory", INT), OPT("default-label-storage", INT),                   \
	    OPT("default-label-cpu-limit", INT), OPT("default-label-memory-limit", INT),           \
	    OPT("default-label-storage-limit", INT),                                               \
	    OPT("default-label-extra-resources", STRMAP(INT))

static const struct np_cfg_schema kubernetes_provider = {
    .type = SC_MAP,
    .base = &np_cfg_schema_common_provider,
    .keys = KEYS(
	REQ("pools",
	    SEQ((&(const struct np_cfg_schema){
		.type = SC_MAP,
		.base = &np_cfg_schema_common_pool,
		.keys = KEYS(K8S_POOL_KEYS,
			     REQ("labels", SEQ((&(const struct np_cfg_schema){
					       .type = SC_ANYOF,
					       .alts = ALTS(&k8s_label_nodepool, &k8s_label_user),
					   })))),
	    }))),
	OPT("context", STR), OPT("launch-retries", INT), K8S_NODEPOOLD_KEYS, K8S_TOKEN_KEYS,
	OPT("max-servers", INT), OPT("max-cores", INT), OPT("max-ram", INT),
	OPT("max-resources", STRMAP(INT))),
};

static const struct np_cfg_schema openshift_provider = {
    .type = SC_MAP,
    .base = &np_cfg_schema_common_provider,
    .keys =
	KEYS(REQ("pools", SEQ((&(const struct np_cfg_schema){
			      .type = SC_MAP,
			      .base = &np_cfg_schema_common_pool,
			      .keys = KEYS(K8S_POOL_KEYS,
					   REQ("labels", SEQ((&(const struct np_cfg_schema){
							     .type = SC_ANYOF,
							     .alts = ALTS(&openshift_label_nodepool,
									  &k8s_label_user),
							 })))),
			  }))),
	     REQ("context", STR), OPT("launch-retries", INT), K8S_NODEPOOLD_KEYS, K8S_TOKEN_KEYS,
	     OPT("max-projects", INT), OPT("max-cores", INT), OPT("max-ram", INT),
	     OPT("max-resources", STRMAP(INT))),
};

static const struct np_cfg_schema openshiftpods_provider = {
    .type = SC_MAP,
    .base = &np_cfg_schema_common_provider,
    .keys = KEYS(
	REQ("pools",
	    SEQ((&(const struct np_cfg_schema){
		.type = SC_MAP,
		.base = &np_cfg_schema_common_pool,
		.keys = KEYS(K8S_POOL_KEYS,
			     REQ("labels", SEQ((&(const struct np_cfg_schema){
					       .type = SC_ANYOF,
					       .alts = ALTS(&pods_label_nodepool, &pods_label_user),
					   })))),
	    }))),
	REQ("context", STR), OPT("launch-retries", INT), K8S_NODEPOOLD_KEYS, OPT("max-pods", INT),
	OPT("max-cores", INT), OPT("max-ram", INT), OPT("max-resources", STRMAP(INT))),
};

/* path at ...labels[k]: namespace-reuse on kubernetes pod labels only,
 * warm-namespaces with it (nodepoold's own keys; the kubernetes driver
 * checks them again when it starts). */
static void
k8s_check_label(struct np_drv_check *ck, const struct np_cfg_node *prov,
		const struct np_cfg_node *pool, const struct np_cfg_node *label)
{
	int kube = strcmp(np_cfg_str(prov, "driver", ""), "kubernetes") == 0;
	int reuse = np_cfg_bool(label, "namespace-reuse", 0);

	(void)pool;
	if (reuse && (!kube || strcmp(np_cfg_str(label, "type", "pod"), "pod") != 0))
		np_drv_check_err(ck, label, "namespace-reuse",
				 "namespace-reuse is for kubernetes labels of type pod");
	if (np_cfg_get(label, "warm-namespaces") != NULL && !reuse)
		np_drv_check_err(ck, label, "warm-namespaces",
				 "warm-namespaces needs namespace-reuse: true");
	if (np_cfg_int(label, "warm-namespaces", 0) < 0)
		np_drv_check_err(ck, label, "warm-namespaces", "warm-namespaces: 0 or more");
}

const struct np_drv_traits np_traits_kubernetes = {
    .name = "kubernetes",
    .schema = &kubernetes_provider,
    .flags = NP_DRV_POOL_INHERITS_MAX_CORES_RAM,
    .check_label = k8s_check_label,
};

const struct np_drv_traits np_traits_openshift = {
    .name = "openshift",
    .check_label = k8s_check_label,
    .schema = &openshift_provider,
    .flags = NP_DRV_POOL_INHERITS_MAX_SERVERS | NP_DRV_POOL_INHERITS_MAX_CORES_RAM,
    .max_servers_key = "max-projects",
};

const struct np_drv_traits np_traits_openshiftpods = {
    .name = "openshiftpods",
    .schema = &openshiftpods_provider,
    .flags = NP_DRV_POOL_INHERITS_MAX_SERVERS | NP_DRV_POOL_INHERITS_MAX_CORES_RAM,
    .max_servers_key = "max-pods",
};
