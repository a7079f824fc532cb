/*
 * The table of driver traits (lib/config/drvtraits.h) that lib/config
 * validates and types nodepool.yaml with: every driver of nodepool.yaml
 * (each also has its driver in drivers/registry.c). A driver's traits live in
 * drivers/<name>/traits.c; this file only lists them.
 *
 * It links into every program that loads a config, fuzzers included, so
 * it and the traits files name nothing but lib/config (see drvtraits.h).
 */
#include <stddef.h>

#include "lib/config/drvtraits.h"

extern const struct np_drv_traits np_traits_static;
extern const struct np_drv_traits np_traits_openstack;
extern const struct np_drv_traits np_traits_aws;
extern const struct np_drv_traits np_traits_gce;
extern const struct np_drv_traits np_traits_azure;
extern const struct np_drv_traits np_traits_kubernetes;
extern const struct np_drv_traits np_traits_openshift;
extern const struct np_drv_traits np_traits_openshiftpods;
extern const struct np_drv_traits np_traits_metastatic;
extern const struct np_drv_traits np_traits_ibmvpc;
extern const struct np_drv_traits np_traits_fake;

const struct np_drv_traits *const np_drv_traits_table[] = {
    &np_traits_static,	   &np_traits_openstack,  &np_traits_aws,	&np_traits_gce,
    &np_traits_azure,	   &np_traits_kubernetes, &np_traits_openshift, &np_traits_openshiftpods,
    &np_traits_metastatic, &np_traits_ibmvpc,	  &np_traits_fake,	NULL,
};
