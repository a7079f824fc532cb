/*
 * Private to lib/config*.c: helpers, the key path buffer and the schema
 * engine (a declarative description of nodepool.yaml, checked against a
 * parsed tree; the counterpart of upstream's voluptuous schemas).
 */
#ifndef NP_CONFIG_INT_H
#define NP_CONFIG_INT_H

#include <stddef.h>

#include "config.h"
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

enum sc_type {
	SC_ANY, /* anything (voluptuous `object`) */
	SC_STR,
	SC_INT, /* not bool */
	SC_BOOL,
	SC_FLOAT,	 /* int or float, finite */
	SC_NUMBER,	 /* int or float (v.Any(int, float)) */
	SC_COERCE_FLOAT, /* int, float or a numeric string (v.Coerce(float)) */
	SC_STR_OR_INT,
	SC_STR_OR_STRSEQ, /* v.Any(str, [str]) */
	SC_DICT,	  /* any mapping */
	SC_LIST,	  /* any list */
	SC_SEQ,		  /* a list of `item` */
	SC_STRMAP,	  /* {str: item} */
	SC_MAP,		  /* fixed keys (+ base's), extra keys checked with `item` if set */
	SC_ENUM,	  /* one of `choices` (strings) */
	SC_ANYOF,	  /* the first of `alts` that fits; else the closest one's errors */
	SC_PROVIDER,	  /* a provider: the schema of its `driver` */
};

#define SK_REQ 0x1 /* required key */

struct sc_schema;
struct sc_key {
	const char *name;
	const struct sc_schema *s;
	unsigned flags;
};

enum sc_group_kind {
	GR_EXCL, /* at most one of the keys */
	GR_ONE,	 /* at least one of the keys */
};
struct sc_group {
	enum sc_group_kind kind;
	const char *const *keys; /* NULL-terminated */
};

#define SCF_NULL 0x1 /* null is accepted too */

struct sc_schema {
	enum sc_type type;
	const struct sc_key *keys;	     /* SC_MAP, {NULL} terminated */
	const struct sc_schema *base;	     /* SC_MAP: more keys (own keys win) */
	const struct sc_schema *item;	     /* SC_SEQ, SC_STRMAP values, SC_MAP extra keys */
	const char *const *choices;	     /* SC_ENUM */
	const struct sc_schema *const *alts; /* SC_ANYOF */
	const struct sc_group *groups;	     /* SC_MAP, {.keys = NULL} terminated */
	unsigned flags;
	/* after the type check passed: NULL, or a message (static storage) */
	const char *(*check)(const struct np_cfg_node *n);
};

/* Schemas of nodepool.yaml, secure.conf, and each driver's provider. */
extern const struct sc_schema sc_top;
extern const struct sc_schema sc_secure;
/* The provider schema of a driver, NULL for an unknown driver. */
const struct sc_schema *sc_driver(const char *name);
/* The names of every known driver, NULL-terminated. */
extern const char *const sc_driver_names[];

/* Check n against s; every problem is added to errs. */
void sc_validate(const struct sc_schema *s, const struct np_cfg_node *n, struct cfg_path *path,
		 struct np_config_errors *errs);

#endif
