#include "lib/core/strset.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct strset_ent {
	struct strset_ent *next;
	uint32_t hash;
	char key[];
};

struct strset {
	struct strset_ent **buckets;
	size_t nbuckets;
	size_t count;
};

static uint32_t
strset_hash(const char *s)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	while (*s != '\0') {
		h ^= (unsigned char)*s++;
		h *= 16777619u;
	}
	return h;
}

struct strset *
strset_new(void)
{
	struct strset *s = calloc(1, sizeof(*s));

	if (s == NULL)
		abort();
	s->nbuckets = 16;
	s->buckets = calloc(s->nbuckets, sizeof(*s->buckets));
	if (s->buckets == NULL)
		abort();
	return s;
}

void
strset_free(struct strset *s)
{
	size_t i;
	struct strset_ent *e, *n;

	if (s == NULL)
		return;
	for (i = 0; i < s->nbuckets; i++) {
		for (e = s->buckets[i]; e != NULL; e = n) {
			n = e->next;
			free(e);
		}
	}
	free(s->buckets);
	free(s);
}

static void
strset_grow(struct strset *s)
{
	size_t i, nb = s->nbuckets * 2;
	struct strset_ent **b = calloc(nb, sizeof(*b)), *e, *n;

	if (b == NULL)
		abort();
	for (i = 0; i < s->nbuckets; i++) {
		for (e = s->buckets[i]; e != NULL; e = n) {
			n = e->next;
			e->next = b[e->hash & (nb - 1)];
			b[e->hash & (nb - 1)] = e;
		}
	}
	free(s->buckets);
	s->buckets = b;
	s->nbuckets = nb;
}

int
strset_add(struct strset *s, const char *key)
{
	uint32_t h = strset_hash(key);
	struct strset_ent *e;
	size_t len = strlen(key);

	for (e = s->buckets[h & (s->nbuckets - 1)]; e != NULL; e = e->next)
		if (e->hash == h && strcmp(e->key, key) == 0)
			return 0;
	if (s->count + 1 > s->nbuckets)
		strset_grow(s);
	e = malloc(sizeof(*e) + len + 1);
	if (e == NULL)
		abort();
	e->hash = h;
	memcpy(e->key, key, len + 1);
	e->next = s->buckets[h & (s->nbuckets - 1)];
	s->buckets[h & (s->nbuckets - 1)] = e;
	s->count++;
	return 1;
}

int
strset_has(const struct strset *s, const char *key)
{
	uint32_t h = strset_hash(key);
	const struct strset_ent *e;

	for (e = s->buckets[h & (s->nbuckets - 1)]; e != NULL; e = e->next)
		if (e->hash == h && strcmp(e->key, key) == 0)
			return 1;
	return 0;
}

int
strset_del(struct strset *s, const char *key)
{
	uint32_t h = strset_hash(key);
	struct strset_ent **pp, *e;

	for (pp = &s->buckets[h & (s->nbuckets - 1)]; (e = *pp) != NULL; pp = &e->next) {
		if (e->hash == h && strcmp(e->key, key) == 0) {
			*pp = e->next;
			free(e);
			s->count--;
			return 1;
		}
	}
	return 0;
}

size_t
strset_count(const struct strset *s)
{
	return s->count;
}

void
strset_foreach(const struct strset *s, void (*fn)(const char *key, void *arg), void *arg)
{
	size_t i;
	const struct strset_ent *e;

	for (i = 0; i < s->nbuckets; i++)
		for (e = s->buckets[i]; e != NULL; e = e->next)
			fn(e->key, arg);
}
