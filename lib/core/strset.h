/*
 * A set of strings (copies owned by the set): node ids a launcher is busy
 * with, request ids seen, and the like. Chained hash table, grows by
 * doubling; O(1) expected add/has/del.
 */
#ifndef NP_STRSET_H
#define NP_STRSET_H

#include <stddef.h>

struct strset;

struct strset *strset_new(void);
void strset_free(struct strset *s);		   /* NULL is a no-op */
int strset_add(struct strset *s, const char *key); /* 1 added, 0 already there */
int strset_has(const struct strset *s, const char *key);
int strset_del(struct strset *s, const char *key); /* 1 removed, 0 absent */
size_t strset_count(const struct strset *s);
/* Call fn for each key (order unspecified); fn must not modify the set. */
void strset_foreach(const struct strset *s, void (*fn)(const char *key, void *arg), void *arg);

#endif
