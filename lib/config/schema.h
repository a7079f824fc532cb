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

enum np_cfg_schema_type {
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

struct np_cfg_schema;
struct np_cfg_schema_key {
	const char *name;
	const struct np_cfg_schema *s;
	unsigned flags;
};

enum np_cfg_schema_group_kind {
	GR_EXCL, /* at most one of the keys */
	GR_ONE,	 /* at least one of the keys */
};
struct np_cfg_schema_group {
	enum np_cfg_schema_group_kind kind;
	const char *const *keys; /* NULL-terminated */
};

#define SCF_NULL 0x1 /* null is accepted too */

struct np_cfg_schema {
	enum np_cfg_schema_type type;
	const struct np_cfg_schema_key *keys;	  /* SC_MAP, {NULL} terminated */
	const struct np_cfg_schema *base;	  /* SC_MAP: more keys (own keys win) */
	const struct np_cfg_schema *item;	  /* SC_SEQ, SC_STRMAP values, SC_MAP extra keys */
	const char *const *choices;		  /* SC_ENUM */
	const struct np_cfg_schema *const *alts;  /* SC_ANYOF */
	const struct np_cfg_schema_group *groups; /* SC_MAP, {.keys = NULL} terminated */
	unsigned flags;
	/* after the type check passed: NULL, or a message (static storage) */
	const char *(*check)(const struct np_cfg_node *n);
};

/* ---- building blocks, defined once in config_schemas.c ---------------------- */

/* plain types */
extern const struct np_cfg_schema np_cfg_schema_str, np_cfg_schema_int, np_cfg_schema_bool,
    np_cfg_schema_float, np_cfg_schema_number, np_cfg_schema_coerce_float, np_cfg_schema_str_or_int,
    np_cfg_schema_str_or_strseq, np_cfg_schema_dict, np_cfg_schema_list;
/* checked values: > 0, >= 0, within [0, 1], a non-empty string, an int >= 0,
 * a port number (1-65535), v.Coerce(float) >= 0 */
extern const struct np_cfg_schema np_cfg_schema_positive, np_cfg_schema_nonneg,
    np_cfg_schema_rate01, np_cfg_schema_nonempty_str, np_cfg_schema_nonneg_int,
    np_cfg_schema_port_no, np_cfg_schema_coerce_nonneg;
/* The keys every provider and every pool has (upstream's driver/__init__.py
 * ProviderConfig.getCommonSchemaDict and ConfigPool.getCommonSchemaDict):
 * a provider's schema names np_cfg_schema_common_provider as its .base, a pool's
 * np_cfg_schema_common_pool. */
extern const struct np_cfg_schema np_cfg_schema_common_provider, np_cfg_schema_common_pool;

/* ---- the schema-writing macros ------------------------------------------------ */

#define STR	      (&np_cfg_schema_str)
#define INT	      (&np_cfg_schema_int)
#define BOOL	      (&np_cfg_schema_bool)
#define FLOAT	      (&np_cfg_schema_float)
#define NUMBER	      (&np_cfg_schema_number)
#define COERCE_FLOAT  (&np_cfg_schema_coerce_float)
#define STR_OR_INT    (&np_cfg_schema_str_or_int)
#define STR_OR_STRSEQ (&np_cfg_schema_str_or_strseq)
#define DICT	      (&np_cfg_schema_dict)
#define LIST	      (&np_cfg_schema_list)
#define SEQ(x)	      (&(const struct np_cfg_schema){.type = SC_SEQ, .item = (x)})
#define STRMAP(x)     (&(const struct np_cfg_schema){.type = SC_STRMAP, .item = (x)})
#define ENUM(...)                                                                                  \
	(&(const struct np_cfg_schema){.type = SC_ENUM,                                            \
				       .choices = (const char *const[]){__VA_ARGS__, NULL}})
#define ENUM_OR_NULL(...)                                                                          \
	(&(const struct np_cfg_schema){.type = SC_ENUM,                                            \
				       .flags = SCF_NULL,                                          \
				       .choices = (const char *const[]){__VA_ARGS__, NULL}})
#define KEYS(...)   ((const struct np_cfg_schema_key[]){__VA_ARGS__, {NULL, NULL, 0}})
#define MAP(...)    (&(const struct np_cfg_schema){.type = SC_MAP, .keys = KEYS(__VA_ARGS__)})
#define GROUPS(...) ((const struct np_cfg_schema_group[]){__VA_ARGS__, {GR_EXCL, NULL}})
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
#define ALTS(...) ((const struct np_cfg_schema *const[]){__VA_ARGS__, NULL})
#define REQ(k, s)                                                                                  \
	{                                                                                          \
		k, s, SK_REQ                                                                       \
	}
#define OPT(k, s)                                                                                  \
	{                                                                                          \
		k, s, 0                                                                            \
	}
#define COERCE_NONNEG (&np_cfg_schema_coerce_nonneg)
#define NONNEG_INT    (&np_cfg_schema_nonneg_int)
#define PORT	      (&np_cfg_schema_port_no)
#define POSITIVE      (&np_cfg_schema_positive)
#define NONNEG	      (&np_cfg_schema_nonneg)
#define RATE01	      (&np_cfg_schema_rate01)
#define NONEMPTY_STR  (&np_cfg_schema_nonempty_str)

#endif
