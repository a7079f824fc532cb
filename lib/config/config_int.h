/*
 * Private to lib/config*.c: helpers, the key path buffer and the schema
 * engine's entry point (the schema types are in schema.h, which drivers'
 * traits use too).
 */
#ifndef NP_CONFIG_INT_H
#define NP_CONFIG_INT_H

#include <stddef.h>

#include "lib/config/config.h"
#include "lib/config/schema.h"
#include "lib/core/xalloc.h"

/* The config modules' names for lib/core/xalloc.h's np_oom and xstrdup
 * (NULL stays NULL; aborts on no memory). */
#define np_cfg_oom    np_oom
#define np_cfg_strdup xstrdup

/* A key path such as "providers[2].pools[0].name"; push returns the
 * previous length, to pop back to. Over-long paths are cut, never overrun. */
struct np_cfg_path {
	char buf[1024];
	size_t len;
};
size_t np_cfg_path_key(struct np_cfg_path *p, const char *key);
size_t np_cfg_path_idx(struct np_cfg_path *p, size_t i);
void np_cfg_path_pop(struct np_cfg_path *p, size_t len);

/* Add an error at node n (its position) for the current path. */
void np_cfg_err(struct np_cfg_errors *errs, const struct np_cfg_node *n,
		const struct np_cfg_path *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Schemas of nodepool.yaml and secure.conf (config_schemas.c); each
 * driver's provider schema is in its traits (drvtraits.h). */
extern const struct np_cfg_schema np_cfg_schema_top;
extern const struct np_cfg_schema np_cfg_schema_secure;

/* Check n against s; every problem is added to errs. */
void np_cfg_schema_validate(const struct np_cfg_schema *s, const struct np_cfg_node *n,
			    struct np_cfg_path *path, struct np_cfg_errors *errs);

/* ---- shared by config.c, config_check.c, config_build.c, slice.c ---- */

#define DEFAULT_ZK_PORT		  2281
#define DEFAULT_IMAGE_NAME_FORMAT "{image_name}-{timestamp}"
#define NP_CONFIG_MAX_PARENTS	  32 /* levels of diskimage parents */

/*
 * A list of {name: ...} entries indexed by name: sorted by (name, position),
 * so lookups are O(log n) and a name's first definition comes first. Lists
 * can be long (a 16 MiB file), so nothing here is quadratic.
 */
struct name_ent {
	const char *name;
	size_t pos;
	const struct np_cfg_node *item;
};

struct name_index {
	struct name_ent *v;
	size_t n;
};

/* A cross-check in progress (drvtraits.h names it opaquely for the traits). */
struct np_drv_check {
	const struct np_cfg_node *root;
	struct np_cfg_errors *errs;
	struct np_cfg_path path;
	struct name_index labels;			      /* top-level labels */
	struct name_index diskimages;			      /* top-level diskimages */
	struct name_index prov_cloud_images, prov_diskimages; /* the provider being checked */
};

/* Each documented at its definition (config.c, config_check.c, config_build.c, slice.c). */
void np_cfg_zk_servers_free(struct np_config *cfg);
void np_cfg_diskimage_free(struct np_diskimage *d);
void np_cfg_provider_free(struct np_provider *p);
void np_cfg_config_build(struct np_config *cfg, const struct np_cfg_node *root);
void np_cfg_secure_merge(struct np_config *cfg, const struct np_cfg_node *sroot,
			 struct np_cfg_errors *errs);
void np_cfg_nix_build(struct name_index *ix, const struct np_cfg_node *seq);
void np_cfg_nix_free(struct name_index *ix);
const struct np_cfg_node *np_cfg_nix_find(const struct name_index *ix, const char *name);
void np_cfg_check_zk_servers(struct np_drv_check *c, const struct np_cfg_node *doc);
void np_cfg_check_references(const struct np_cfg_node *root, struct np_cfg_errors *errs);
void np_cfg_strv_push(struct np_cfg_strv *sv, const char *s);
int np_cfg_strp_cmp(const void *a, const void *b);
void np_cfg_strv_sort_unique(struct np_cfg_strv *sv);
void np_cfg_strv_from_seq(struct np_cfg_strv *sv, const struct np_cfg_node *seq);
const struct np_cfg_node *np_cfg_get_seq(const struct np_cfg_node *map, const char *key);
const struct np_cfg_node *np_cfg_get_map(const struct np_cfg_node *map, const char *key);
char *np_cfg_dup_str(const struct np_cfg_node *map, const char *key, const char *def);
json_t *np_cfg_json_obj_of(const struct np_cfg_node *map, const char *key);
double np_cfg_coerce_num(const struct np_cfg_node *map, const char *key, double def);
const char *np_cfg_provider_driver(const struct np_cfg_node *prov);
void np_cfg_fingerprint(const struct np_config *cfg, struct np_provider *p);

#endif
