/*
 * Private to lib/config*.c: helpers, the key path buffer and the schema
 * engine's entry point (the schema types are in schema.h, which drivers'
 * traits use too).
 */
#ifndef NP_CONFIG_INT_H
#define NP_CONFIG_INT_H

#include <stddef.h>

#include "config.h"
#include "schema.h"
#include "xalloc.h"

/* The config modules' names for lib/core/xalloc.h's np_oom and xstrdup
 * (NULL stays NULL; aborts on no memory). */
#define cfg_oom	   np_oom
#define cfg_strdup xstrdup

/* A key path such as "providers[2].pools[0].name"; push returns the
 * previous length, to pop back to. Over-long paths are cut, never overrun. */
struct cfg_path {
	char buf[1024];
	size_t len;
};
size_t cfg_path_key(struct cfg_path *p, const char *key);
size_t cfg_path_idx(struct cfg_path *p, size_t i);
void cfg_path_pop(struct cfg_path *p, size_t len);

/* Add an error at node n (its position) for the current path. */
void cfg_err(struct np_config_errors *errs, const struct np_cfg_node *n,
	     const struct cfg_path *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Schemas of nodepool.yaml and secure.conf (config_schemas.c); each
 * driver's provider schema is in its traits (drvtraits.h). */
extern const struct sc_schema sc_top;
extern const struct sc_schema sc_secure;

/* Check n against s; every problem is added to errs. */
void sc_validate(const struct sc_schema *s, const struct np_cfg_node *n, struct cfg_path *path,
		 struct np_config_errors *errs);

#endif
