/*
 * Typed reads of a config slice's JSON (jansson) with defaults: what every
 * driver and the launcher use to pick out their keys. The slice was
 * validated before it got here, so a missing or mistyped key simply yields
 * the default. A number given as a string ("0.5", as YAML may hand it over
 * and as upstream's v.Coerce(float) accepts) is read as the number.
 */
#ifndef NP_JSONGET_H
#define NP_JSONGET_H

#include <jansson.h>

/* The string at key, or def; borrowed from o. */
const char *np_json_str(const json_t *o, const char *key, const char *def);
double np_json_num(const json_t *o, const char *key, double def);
int np_json_bool(const json_t *o, const char *key, int def);

#endif
