/* Compact node summaries (nodesum.h). */
#include "nodesum.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { OWN_PROVIDER = 1, OWN_POOL = 2, OWN_AZ = 4, OWN_TENANT = 8, OWN_TYPE = 16 };

/* An open-addressing set of interned values, keyed by a byte string. */
struct itab {
	char **keys;
	void **vals;
	size_t cap, n;
};

static struct itab strings, labelsets, shapes;

static uint64_t
fnv(const char *p, size_t n)
{
	uint64_t h = 1469598103934665603ULL;

	while (n--)
		h = (h ^ (unsigned char)*p++) * 1099511628211ULL;
	return h;
}

static void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (p == NULL)
		abort();
	return p;
}

static char *
xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;

	return memcpy(xmalloc(n), s, n);
}

/* Keys are NUL-terminated (label-set keys are made so). */
static void **
islot(struct itab *t, const char *key)
{
	size_t i;

	if (t->cap == 0)
		return NULL;
	for (i = fnv(key, strlen(key)) & (t->cap - 1); t->keys[i] != NULL;
	     i = (i + 1) & (t->cap - 1))
		if (strcmp(t->keys[i], key) == 0)
			return &t->vals[i];
	return NULL;
}

static void
iput(struct itab *t, char *key, void *val)
{
	size_t i, j, cap;

	if ((t->n + 1) * 2 > t->cap) {
		struct itab o = *t;
		cap = t->cap ? t->cap * 2 : 64;
		t->keys = calloc(cap, sizeof(*t->keys));
		t->vals = calloc(cap, sizeof(*t->vals));
		if (t->keys == NULL || t->vals == NULL)
			abort();
		t->cap = cap;
		for (j = 0; j < o.cap; j++) {
			if (o.keys[j] == NULL)
				continue;
			for (i = fnv(o.keys[j], strlen(o.keys[j])) & (cap - 1); t->keys[i] != NULL;
			     i = (i + 1) & (cap - 1))
				;
			t->keys[i] = o.keys[j];
			t->vals[i] = o.vals[j];
		}
		free(o.keys);
		free(o.vals);
	}
	for (i = fnv(key, strlen(key)) & (t->cap - 1); t->keys[i] != NULL;
	     i = (i + 1) & (t->cap - 1))
		;
	t->keys[i] = key;
	t->vals[i] = val;
	t->n++;
}

/* The interned copy of s, or NULL when the table is full. */
static const char *
intern_str(const char *s)
{
	void **v = islot(&strings, s);
	char *k;

	if (v != NULL)
		return *v;
	if (strings.n >= NP_NODE_SUM_INTERN_MAX)
		return NULL;
	k = xstrdup(s);
	iput(&strings, k, k);
	return k;
}

/* s interned, or an own copy (bit set in *owned). */
static const char *
str_field(const char *s, unsigned bit, unsigned *owned)
{
	const char *i;

	if (s == NULL)
		return NULL;
	if ((i = intern_str(s)) != NULL)
		return i;
	*owned |= bit;
	return xstrdup(s);
}

static const struct np_strv empty_labels;

static const struct np_strv *
labels_field(const struct np_strv *type, unsigned *owned)
{
	size_t i, len = 1;
	char *key, *p;
	void **v;
	struct np_strv *sv;

	if (type->n == 0)
		return &empty_labels;
	/* key: each label as its length in hex, ':', the label (labels may
	 * hold any character but NUL) */
	for (i = 0; i < type->n; i++)
		len += strlen(type->v[i]) + 20;
	p = key = xmalloc(len);
	for (i = 0; i < type->n; i++) {
		size_t n = strlen(type->v[i]);
		p += sprintf(p, "%zx:", n);
		memcpy(p, type->v[i], n);
		p += n;
	}
	*p = '\0';
	if ((v = islot(&labelsets, key)) != NULL) {
		free(key);
		return *v;
	}
	sv = calloc(1, sizeof(*sv));
	if (sv == NULL)
		abort();
	np_strv_copy(sv, type);
	if (labelsets.n >= NP_NODE_SUM_INTERN_MAX) {
		free(key);
		*owned |= OWN_TYPE;
		return sv;
	}
	iput(&labelsets, key, sv);
	return sv;
}

/* A reference to an object equal to res: the interned one if any. */
static json_t *
resources_field(json_t *res)
{
	char *key;
	void **v;

	if (!json_is_object(res))
		return NULL;
	key = json_dumps(res, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	if (key == NULL)
		return json_incref(res);
	if ((v = islot(&shapes, key)) != NULL) {
		free(key);
		return json_incref(*v);
	}
	if (shapes.n >= NP_NODE_SUM_INTERN_MAX) {
		free(key);
		return json_incref(res);
	}
	/* the table's own copy (a record's object may be changed by its
	 * owner): never freed */
	res = json_deep_copy(res);
	if (res == NULL)
		abort();
	iput(&shapes, key, res);
	return json_incref(res);
}

struct np_node_sum *
np_node_sum_new(struct np_node *n, int keep_full)
{
	size_t lid = n->id != NULL ? strlen(n->id) : 0;
	size_t lal = n->allocated_to != NULL ? strlen(n->allocated_to) + 1 : 0;
	struct np_node_sum *s = xmalloc(sizeof(*s) + lid + 1 + lal);

	memset(s, 0, sizeof(*s));
	memcpy(s->id, n->id != NULL ? n->id : "", lid + 1);
	if (lal > 0) {
		char *a = s->id + lid + 1;
		memcpy(a, n->allocated_to, lal);
		s->allocated_to = a;
	}
	s->state = n->state;
	s->provider = str_field(n->provider, OWN_PROVIDER, &s->owned);
	s->pool = str_field(n->pool, OWN_POOL, &s->owned);
	s->az = str_field(n->az, OWN_AZ, &s->owned);
	s->tenant_name = str_field(n->tenant_name, OWN_TENANT, &s->owned);
	s->type = labels_field(&n->type, &s->owned);
	s->resources = resources_field(n->resources);
	if (keep_full)
		s->full = n;
	else
		np_node_free(n);
	return s;
}

void
np_node_sum_free(struct np_node_sum *s)
{
	if (s == NULL)
		return;
	if (s->owned & OWN_PROVIDER)
		free((char *)s->provider);
	if (s->owned & OWN_POOL)
		free((char *)s->pool);
	if (s->owned & OWN_AZ)
		free((char *)s->az);
	if (s->owned & OWN_TENANT)
		free((char *)s->tenant_name);
	if (s->owned & OWN_TYPE) {
		np_strv_clear((struct np_strv *)s->type);
		free((struct np_strv *)s->type);
	}
	json_decref(s->resources);
	np_node_free(s->full);
	free(s);
}

int
np_node_sum_of_provider(const struct np_node_sum *s, const char *provider)
{
	return s != NULL && s->provider != NULL && provider != NULL &&
	       strcmp(s->provider, provider) == 0;
}
