/*
 * Driver traits: what lib/config needs to know about each driver of
 * nodepool.yaml, in one table, so that no file under lib/ names a driver.
 * A driver's traits give its provider schema, its cross-checks beyond the
 * schema (as each upstream driver's config.py load() and its
 * ConfigValidator), and the defaults the typed configuration
 * (config.h's struct np_provider, np_pool) takes from the driver (as the
 * upstream driver's ProviderConfig.load()).
 *
 * Who writes what:
 *   - each driver defines its `const struct np_drv_traits np_traits_<name>`
 *     in drivers/<name>/traits.c (schema, flags, defaults, hooks); a driver
 *     that is validated but not built (upstream's drivers we do not run)
 *     has a traits.c and nothing else;
 *   - drivers/traits.c defines np_drv_traits_table[], the one list;
 *   - lib/config looks drivers up with np_drv_traits_find().
 *
 * How lib/config reaches the table (the layering rule: nothing in lib/
 * includes from drivers/): by a link-time symbol. lib/config declares
 * np_drv_traits_table here and drivers/traits.c defines it, so every
 * program that loads a config links drivers/traits.o and the
 * drivers/<name>/traits.o it names (schemas, flags and small check
 * functions: no driver code, no libraries). Chosen over passing the table
 * into np_cfg_load() because a config is loaded in a dozen places
 * (every binary, the CLI, cfgwatch, tests, benches, fuzzers) that would
 * all have to pass the same table, and one that forgot would see every
 * driver as unknown. The Makefile links binaries with --start-group (the
 * reference goes from libnp.a back to libdrivers.a) and adds the traits
 * objects (TRAITS_SRCS) to the fuzzers' FUZZ_OBJS.
 *
 * All of it is static const data and pure functions: no allocation, no
 * state, safe from any thread.
 */
#ifndef NP_CONFIG_DRVTRAITS_H
#define NP_CONFIG_DRVTRAITS_H

#include <stddef.h>

#include "lib/config/config.h"
#include "lib/config/schema.h"

/* ---- flags (struct np_drv_traits.flags) ---------------------------------- */

/* Uploads diskimages (upstream: the driver has an image upload path):
 * provider diskimages[] must name top-level, non-abstract diskimages; the
 * typed provider gets manage_images, its diskimages[] and
 * image-name-format. (openstack, aws, azure, ibmvpc, fake) */
#define NP_DRV_MANAGES_IMAGES 0x001
/* A label's `diskimage` names a top-level diskimage (openstack), not an
 * entry of the provider's diskimages[] (every other driver). */
#define NP_DRV_LABEL_TOP_DISKIMAGE 0x002
/* A provider diskimage's username is the top-level diskimage's, whatever
 * the entry says (openstack, ibmvpc). */
#define NP_DRV_IMAGE_USER_FROM_DISKIMAGE 0x004
/* ... and its python-path and shell-type too (openstack). */
#define NP_DRV_IMAGE_INTERP_FROM_DISKIMAGE 0x008
/* A pool without max-servers takes the provider's (aws, openshift,
 * openshiftpods). */
#define NP_DRV_POOL_INHERITS_MAX_SERVERS 0x010
/* A pool without max-cores / max-ram takes the provider's (aws, openshift,
 * openshiftpods, kubernetes). */
#define NP_DRV_POOL_INHERITS_MAX_CORES_RAM 0x020
/* Pools list static nodes (pools[].nodes[]) built into np_pool.nodes
 * (static). */
#define NP_DRV_STATIC_NODES 0x040
/* The provider's `quota: {instances, cores, ram}` is read into
 * np_provider.quota_* (fake: the simulated cloud's quota). */
#define NP_DRV_PROVIDER_QUOTA 0x080
/* The provider's host-key-checking defaults to off (fake). */
#define NP_DRV_NO_HOST_KEY_CHECK 0x100
/* image_format is fixed, not read from `image-format` (azure: vhd). */
#define NP_DRV_IMAGE_FORMAT_FIXED 0x200
/* Uploads no diskimages, but its adapter lists the cloud's images (the
 * image_list slot), so `nodepool alien-image-list` asks it too (gce). */
#define NP_DRV_LISTS_IMAGES 0x400

/* Where a pool's host-key-checking and use-internal-ip default from. */
enum np_drv_pool_hkc {
	NP_DRV_POOL_HKC_ON = 0,	  /* host-key-checking on, use-internal-ip off */
	NP_DRV_POOL_HKC_PROVIDER, /* both the provider's (aws, azure, ibmvpc, fake) */
	NP_DRV_POOL_HKC_OFF,	  /* host-key-checking off (metastatic) */
};

/* ---- cross-check hooks ---------------------------------------------------------
 *
 * The cross-checker of config.c at one place of the tree, opaque. A hook
 * reports problems with np_drv_check_err() at the current key path, which
 * it may extend (push) and must restore (pop) before it returns. Hooks run
 * on the raw tree even when the schema found problems (every error at
 * once), so every access must be defensive (np_cfg_str() and friends
 * return the default for a missing or mistyped key).
 */
struct np_drv_check;

/* An error at node `at` (its line and column): with key non-NULL, at
 * `at`'s key (the path gets ".key"; the position is the key's value if
 * present, else at's). fmt is printf's. */
void np_drv_check_err(struct np_drv_check *ck, const struct np_cfg_node *at, const char *key,
		      const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Push ".key" or "[i]" onto the path; the result is what to pop back to. */
size_t np_drv_check_key(struct np_drv_check *ck, const char *key);
size_t np_drv_check_idx(struct np_drv_check *ck, size_t i);
void np_drv_check_pop(struct np_drv_check *ck, size_t old);
/* Whether the top-level labels[] define name. */
int np_drv_check_top_label(const struct np_drv_check *ck, const char *name);

/* An entry of a provider-wide list: pools[pool].<list>[idx], sorted by key. */
struct np_drv_pool_item {
	const struct np_cfg_node *item;
	const char *key; /* the entry's string value that it is sorted by */
	size_t pool, idx;
	size_t order; /* position in the provider, for a stable sort */
};
/* Every pools[].<list>[] entry of prov that has a string `key`, sorted by
 * (key, order); *n entries. Returns a malloc'ed array (free() it; NULL when
 * *n is 0); aborts on out-of-memory, as the rest of the loader. */
struct np_drv_pool_item *np_drv_pool_items(const struct np_cfg_node *prov, const char *list,
					   const char *key, size_t *n);
/* Push ".pools[pool].<list>[idx]" of it; returns what to pop back to. */
size_t np_drv_check_pool_item(struct np_drv_check *ck, const struct np_drv_pool_item *it,
			      const char *list);

/* ---- the traits ------------------------------------------------------------------- */

struct np_drv_traits {
	const char *name; /* the `driver:` value */
	const struct np_cfg_schema
	    *schema;	/* the provider section (.base = &np_cfg_schema_common_provider) */
	unsigned flags; /* NP_DRV_* above */
	enum np_drv_pool_hkc pool_hkc;

	/* Defaults of the typed provider; 0 / NULL mean the common one. */
	long long boot_timeout;	       /* boot-timeout, seconds (0: none) */
	double rate;		       /* rate (0: unlimited) */
	const char *cloud_key;	       /* np_provider.cloud from (NULL: "context") */
	const char *region_key;	       /* np_provider.region from (NULL: "region-name") */
	const char *max_servers_key;   /* np_provider.max_servers from (NULL: "max-servers") */
	const char *image_format;      /* default of `image-format` (NULL: no image format) */
	const char *image_timeout_key; /* NULL: "image-import-timeout" with default -1 */
	long long image_timeout;       /* default of image_timeout_key when set, seconds */
	const char *image_name_format; /* fixed name format (NULL: `image-name-format`) */

	/* Cross-checks beyond the schema, each optional (NULL). Paths: at
	 * providers[i]; at providers[i].pools[j]; at ....labels[k]. They run
	 * after the common checks of the same place (unique names, references
	 * to images and labels), in this order: provider, then each pool, then
	 * each label of it. */
	void (*check_provider)(struct np_drv_check *ck, const struct np_cfg_node *prov);
	void (*check_pool)(struct np_drv_check *ck, const struct np_cfg_node *prov,
			   const struct np_cfg_node *pool);
	void (*check_label)(struct np_drv_check *ck, const struct np_cfg_node *prov,
			    const struct np_cfg_node *pool, const struct np_cfg_node *label);
};

/* Every driver's traits, NULL-terminated; defined by drivers/traits.c. */
extern const struct np_drv_traits *const np_drv_traits_table[];

/* The traits of the driver called name, NULL if there is none. */
const struct np_drv_traits *np_drv_traits_find(const char *name);

/* A static node's labels: a string splits on whitespace, a list is taken
 * as is (as Nodepool's StaticPool.load); appended to out. Shared by the
 * typed config and the static driver's checks. */
void np_cfg_static_node_labels(const struct np_cfg_node *node, struct np_cfg_strv *out);
/* A static node's port: connection-port, else the legacy ssh-port, else 22. */
int np_cfg_static_port(const struct np_cfg_node *node);

#endif
