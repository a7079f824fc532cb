/*
 * Per-process tables of interned values, for the compact forms a process
 * keeps of records it holds by the thousand (nodesum.h in a worker, the web
 * API's node rows in nodepool-web): a fleet has few providers, pools,
 * labels, tenants, AZs, user names, launchers and resource shapes, so each
 * distinct value is held once and a record holds a 16-bit index to it.
 *
 * An index is 0 for "none" (NULL, JSON null) and 1..NP_INTERN_MAX for a
 * value. A table holds at most NP_INTERN_MAX values, of at most
 * NP_INTERN_MAX_LEN bytes each (a string, a label list's key, an object's
 * JSON) and NP_INTERN_MAX_BYTES in all, and never shrinks (its values live
 * as long as the process); past that, np_intern_* return -1 and the caller
 * keeps its own copy of the value (a record of a fleet with more distinct
 * values than that is held in its larger form, freed with it, never
 * dropped). The caps bound what records written to ZooKeeper by anyone can
 * pin in a process for its life (issue 23).
 * Not thread-safe: one event loop per process uses them.
 */
#ifndef NP_INTERN_H
#define NP_INTERN_H

#include <jansson.h>

#include "protocol/model.h"

#define NP_INTERN_MAX	    8192      /* distinct values per table */
#define NP_INTERN_MAX_LEN   1024      /* bytes of one value (its key) */
#define NP_INTERN_MAX_BYTES (1 << 20) /* bytes of the values of one table */

/* The index of the string s (copied on first sight); 0 for NULL; -1 when
 * the table is full. */
int np_intern_str(const char *s);
/* The string of an index from np_intern_str; NULL for 0. */
const char *np_intern_str_get(int idx);

/* The index of the label list (order kept; copied on first sight); -1 when
 * the table is full. An empty list has its own index (never 0). */
int np_intern_labels(const struct np_strv *labels);
/* The list of an index from np_intern_labels; NULL for 0. */
const struct np_strv *np_intern_labels_get(int idx);

/* The index of an object equal to res (its keys in any order; a copy is
 * taken on first sight); 0 when res is NULL or not an object; -1 when the
 * table is full. */
int np_intern_object(const json_t *res);
/* The object of an index from np_intern_object (borrowed, never freed);
 * NULL for 0. */
const json_t *np_intern_object_get(int idx);

#endif
