/*
 * The schema engine's vocabulary: a declarative description of a YAML
 * mapping (keys, types, groups of keys, value checks), the counterpart of
 * upstream Nodepool's voluptuous schemas. lib/config checks a parsed tree
 * against it (config_schema.c); the top level's schemas are in
 * config_schemas.c, each driver's provider schema beside its driver
 * (drivers/<name>/traits.c, see drvtraits.h).
 *
 * A schema is static const data: nothing here allocates, and a schema
 * lives as long as the program. The short macros at the end (STR, MAP,
 * REQ, ...) are for the files that write schemas (config_schemas.c and
 * the drivers' traits.c); lib/config's own files see them through
 * config_int.h. Nothing outside lib/config and drivers/<name>/traits.c
 * includes this header.
 */
#ifndef NP_CONFIG_SCHEMA_H
#define NP_CONFIG_SCHEMA_H

#include <stddef.h>

#include "lib/config/config.h"

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

/* ---- building blocks, defined once in config_schemas.c ---------------------- */

/* plain types */
extern const struct sc_schema sc_str, sc_int, sc_bool, sc_float, sc_number, sc_coerce_float,
    sc_str_or_int, sc_str_or_strseq, sc_dict, sc_list;
/* checked values: > 0, >= 0, within [0, 1], a non-empty string, an int >= 0,
 * a port number (1-65535), v.Coerce(float) >= 0 */
extern const struct sc_schema sc_positive, sc_nonneg, sc_rate01, sc_nonempty_str, sc_nonneg_int,
    sc_port_no, sc_coerce_nonneg;
/* The keys every provider and every pool has (upstream's driver/__init__.py
 * ProviderConfig.getCommonSchemaDict and ConfigPool.getCommonSchemaDict):
 * a provider's schema names sc_common_provider as its .base, a pool's
 * sc_common_pool. */
extern const struct sc_schema sc_common_provider, sc_common_pool;

/* ---- the schema-writing macros ------------------------------------------------ */

#define STR	      (&sc_str)
#define INT	      (&sc_int)
#define BOOL	      (&sc_bool)
#define FLOAT	      (&sc_float)
#define NUMBER	      (&sc_number)
#define COERCE_FLOAT  (&sc_coerce_float)
#define STR_OR_INT    (&sc_str_or_int)
#define STR_OR_STRSEQ (&sc_str_or_strseq)
#define DICT	      (&sc_dict)
#define LIST	      (&sc_list)
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
#define COERCE_NONNEG (&sc_coerce_nonneg)
#define NONNEG_INT    (&sc_nonneg_int)
#define PORT	      (&sc_port_no)
#define POSITIVE      (&sc_positive)
#define NONNEG	      (&sc_nonneg)
#define RATE01	      (&sc_rate01)
#define NONEMPTY_STR  (&sc_nonempty_str)

#endif
