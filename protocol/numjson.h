/*
 * The number-preserving JSON layer: Python writes any int (a 128-bit
 * trace_id) and NaN/Infinity, which jansson refuses. Bodies are parsed with
 * such numbers kept as their literal text inside private "stand-in" strings
 * and dumped back unchanged (see numjson.c). Used by model.c's records; the
 * two public helpers below are for anyone showing record values.
 */
#ifndef NP_NUMJSON_H
#define NP_NUMJSON_H

#include <stddef.h>
#include <jansson.h>

/*
 * The literal text of a number jansson could not hold (see model.h), when v
 * is the stand-in string for one; NULL for any other value. Borrowed from v.
 */
const char *np_json_raw_number(const json_t *v);
/* A deep copy of v for showing (web, CLI): stand-ins become the nearest
 * double (null if not finite). NULL gives NULL. */
json_t *np_json_export(const json_t *v);

/*
 * Parse a body jansson refused as it is, with its big numbers as stand-ins.
 * New reference; NULL when that does not parse either.
 */
json_t *np_json_raw_load(const char *data, size_t len);
/* json_dumps(o, flags), writing stand-ins as their literal. Malloc'd
 * string (caller frees); NULL on failure. */
char *np_json_raw_dumps(const json_t *o, size_t flags);

#endif
