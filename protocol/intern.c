/* Interned values (intern.h). */
#include "protocol/intern.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/core/xalloc.h"

/* An open-addressing set of byte-string keys (NUL-terminated), each with
 * its index; vals[i - 1] is the value of index i. */
struct itab {
	char **keys;
	int *idx;
	size_t cap, n;
	size_t bytes; /* of the keys held */
	void **vals;
};

static struct itab strings, labelsets, objects;

static uint64_t
fnv(const char *p)
{
	uint64_t h = 1469598103934665603ULL;

	while (*p)
		h = (h ^ (unsigned char)*p++) * 1099511628211ULL;
	return h;
}

/* Can t take one more key of len bytes? (intern.h's caps) */
static int
iroom(const struct itab *t, size_t len)
{
	return t->n < NP_INTERN_MAX && len <= NP_INTERN_MAX_LEN &&
	       t->bytes + len <= NP_INTERN_MAX_BYTES;
}

/* The index of key, or 0. */
static int
ifind(const struct itab *t, const char *key)
{
	size_t i;

	if (t->cap == 0)
		return 0;
	for (i = fnv(key) & (t->cap - 1); t->keys[i] != NULL; i = (i + 1) & (t->cap - 1))
		if (strcmp(t->keys[i], key) == 0)
			return t->idx[i];
	return 0;
}

static void
islot_put(char **keys, int *idx, size_t cap, char *key, int ix)
{
	size_t i;

	for (i = fnv(key) & (cap - 1); keys[i] != NULL; i = (i + 1) & (cap - 1))
		;
	keys[i] = key;
	idx[i] = ix;
}

/* Adds key (owned by the table) with val; returns its index. The caller
 * checked iroom. */
static int
iput(struct itab *t, char *key, void *val)
{
	size_t j;

	if ((t->n + 1) * 2 > t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		char **keys = calloc(cap, sizeof(*keys));
		int *idx = calloc(cap, sizeof(*idx));
		if (keys == NULL || idx == NULL)
			abort();
		for (j = 0; j < t->cap; j++)
			if (t->keys[j] != NULL)
				islot_put(keys, idx, cap, t->keys[j], t->idx[j]);
		free(t->keys);
		free(t->idx);
		t->keys = keys;
		t->idx = idx;
		t->cap = cap;
		t->vals = realloc(t->vals, cap / 2 * sizeof(*t->vals));
		if (t->vals == NULL)
			abort();
	}
	t->vals[t->n++] = val;
	t->bytes += strlen(key);
	islot_put(t->keys, t->idx, t->cap, key, (int)t->n);
	return (int)t->n;
}

int
np_intern_str(const char *s)
{
	size_t n;
	char *k;
	int i;

	if (s == NULL)
		return 0;
	if ((i = ifind(&strings, s)) != 0)
		return i;
	n = strlen(s) + 1;
	if (!iroom(&strings, n - 1))
		return -1;
	k = memcpy(xmalloc(n), s, n);
	return iput(&strings, k, k);
}

const char *
np_intern_str_get(int idx)
{
	return idx > 0 && (size_t)idx <= strings.n ? strings.vals[idx - 1] : NULL;
}

int
np_intern_labels(const struct np_strv *labels)
{
	size_t i, len = 2;
	char *key, *p;
	struct np_strv *sv;
	int ix;

	/* key: "L" then each label as its length in hex, ':', the label
	 * (labels may hold any character but NUL) */
	for (i = 0; i < labels->n; i++)
		len += strlen(labels->v[i]) + 20;
	p = key = xmalloc(len);
	*p++ = 'L';
	for (i = 0; i < labels->n; i++) {
		size_t n = strlen(labels->v[i]);
		p += sprintf(p, "%zx:", n);
		memcpy(p, labels->v[i], n);
		p += n;
	}
	*p = '\0';
	if ((ix = ifind(&labelsets, key)) != 0 || !iroom(&labelsets, strlen(key))) {
		free(key);
		return ix != 0 ? ix : -1;
	}
	sv = calloc(1, sizeof(*sv));
	if (sv == NULL)
		abort();
	np_strv_copy(sv, labels);
	return iput(&labelsets, key, sv);
}

const struct np_strv *
np_intern_labels_get(int idx)
{
	return idx > 0 && (size_t)idx <= labelsets.n ? labelsets.vals[idx - 1] : NULL;
}

int
np_intern_object(const json_t *res)
{
	char *key;
	json_t *copy;
	int ix;

	if (!json_is_object(res))
		return 0;
	key = json_dumps(res, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	if (key == NULL)
		return -1; /* not representable as a key: the caller keeps it */
	if ((ix = ifind(&objects, key)) != 0 || !iroom(&objects, strlen(key))) {
		free(key);
		return ix != 0 ? ix : -1;
	}
	/* the table's own copy (a record's object may be changed by its
	 * owner): never freed */
	if ((copy = json_deep_copy(res)) == NULL)
		abort();
	return iput(&objects, key, copy);
}

const json_t *
np_intern_object_get(int idx)
{
	return idx > 0 && (size_t)idx <= objects.n ? objects.vals[idx - 1] : NULL;
}
