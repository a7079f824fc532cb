/* Compact node summaries (nodesum.h). */
#include "protocol/nodesum.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/intern.h"

/*
 * Every shape starts with one pointer, which tells them apart: &tag_whole
 * for a record kept whole, &tag_value for a shared value, and for an
 * allocated node the address of its shared value (heap, never a tag).
 */
static const char tag_whole, tag_value;

/* A record kept whole; offered as the full record only when `offered`. */
struct whole {
	const void *head; /* &tag_whole */
	struct np_node *n;
	int offered;
};

/* What another provider's node is, less its id and allocated_to: shared by
 * every node with the same values (a fleet has few of them). */
struct value {
	const void *head; /* &tag_value */
	struct value *next;
	uint32_t refs;
	signed char state;
	/* intern.h indices, 0 = none */
	uint16_t provider, pool, az, tenant, type, resources;
};

/* An allocated node: its shared value and its allocated_to. */
struct allocated {
	const struct value *v;
	char allocated_to[];
};

/* The shared values: a chained hash table. */
static struct value **buckets;
static size_t nbuckets, nvalues;

static uint64_t
value_hash(const struct value *v)
{
	uint64_t h = 1469598103934665603ULL, w[7] = {(uint64_t)(unsigned char)v->state,
						     v->provider,
						     v->pool,
						     v->az,
						     v->tenant,
						     v->type,
						     v->resources};
	size_t i;

	for (i = 0; i < 7; i++)
		h = (h ^ w[i]) * 1099511628211ULL;
	return h ^ (h >> 29);
}

static int
value_eq(const struct value *a, const struct value *b)
{
	return a->state == b->state && a->provider == b->provider && a->pool == b->pool &&
	       a->az == b->az && a->tenant == b->tenant && a->type == b->type &&
	       a->resources == b->resources;
}

static void
values_grow(void)
{
	size_t nb = nbuckets ? nbuckets * 2 : 256, i;
	struct value **b = calloc(nb, sizeof(*b)), *v, *next;

	if (b == NULL)
		abort();
	for (i = 0; i < nbuckets; i++)
		for (v = buckets[i]; v != NULL; v = next) {
			next = v->next;
			v->next = b[value_hash(v) & (nb - 1)];
			b[value_hash(v) & (nb - 1)] = v;
		}
	free(buckets);
	buckets = b;
	nbuckets = nb;
}

/* The shared value equal to key, with one more reference. */
static struct value *
value_get(const struct value *key)
{
	struct value *v;
	size_t i;

	if (nvalues >= nbuckets)
		values_grow();
	i = value_hash(key) & (nbuckets - 1);
	for (v = buckets[i]; v != NULL; v = v->next)
		if (value_eq(v, key)) {
			v->refs++;
			return v;
		}
	if ((v = malloc(sizeof(*v))) == NULL)
		abort();
	*v = *key;
	v->head = &tag_value;
	v->refs = 1;
	v->next = buckets[i];
	buckets[i] = v;
	nvalues++;
	return v;
}

static void
value_put(const struct value *cv)
{
	struct value **p, *v = (struct value *)cv;

	if (--v->refs > 0)
		return;
	for (p = &buckets[value_hash(v) & (nbuckets - 1)]; *p != NULL; p = &(*p)->next)
		if (*p == v) {
			*p = v->next;
			break;
		}
	nvalues--;
	free(v);
}

/* An interned index into *out (0..NP_INTERN_MAX); 0 when it does not fit. */
static int
idx(int ix, uint16_t *out)
{
	if (ix < 0)
		return 0;
	*out = (uint16_t)ix;
	return 1;
}

static const void *
head_of(const struct np_node_sum *s)
{
	const void *h;

	memcpy(&h, s, sizeof(h));
	return h;
}

/* The shared value of a summary that has one, else NULL (kept whole). */
static const struct value *
value_of(const struct np_node_sum *s, const struct np_node **whole)
{
	const void *h = head_of(s);

	*whole = NULL;
	if (h == &tag_whole) {
		*whole = ((const struct whole *)(const void *)s)->n;
		return NULL;
	}
	if (h == &tag_value)
		return (const struct value *)(const void *)s;
	return ((const struct allocated *)(const void *)s)->v;
}

struct np_node_sum *
np_node_sum_new(struct np_node *n, int keep_full)
{
	struct value key;
	const struct value *v;
	struct allocated *a;
	struct whole *w;
	size_t lal;

	memset(&key, 0, sizeof(key));
	if (!keep_full && n->state >= -1 && n->state < NP_NODE_STATE_COUNT &&
	    idx(np_intern_str(n->provider), &key.provider) &&
	    idx(np_intern_str(n->pool), &key.pool) && idx(np_intern_str(n->az), &key.az) &&
	    idx(np_intern_str(n->tenant_name), &key.tenant) &&
	    idx(np_intern_labels(&n->type), &key.type) &&
	    idx(np_intern_object(n->resources), &key.resources)) {
		key.state = (signed char)n->state;
		v = value_get(&key);
		if (n->allocated_to == NULL) {
			np_node_free(n);
			return (struct np_node_sum *)(void *)v;
		}
		lal = strlen(n->allocated_to) + 1;
		if ((a = malloc(sizeof(*a) + lal)) == NULL)
			abort();
		a->v = v;
		memcpy(a->allocated_to, n->allocated_to, lal);
		np_node_free(n);
		return (struct np_node_sum *)(void *)a;
	}
	/* our own node, or a value the tables cannot take: kept whole */
	if ((w = malloc(sizeof(*w))) == NULL)
		abort();
	w->head = &tag_whole;
	w->n = n;
	w->offered = keep_full;
	return (struct np_node_sum *)(void *)w;
}

void
np_node_sum_free(struct np_node_sum *s)
{
	const struct np_node *n;
	const struct value *v;
	int shared;

	if (s == NULL)
		return;
	shared = head_of(s) == &tag_value;
	v = value_of(s, &n);
	if (n != NULL)
		np_node_free(((struct whole *)(void *)s)->n);
	else
		value_put(v); /* may free s itself (shared) */
	if (!shared)
		free(s);
}

int
np_node_sum_state(const struct np_node_sum *s)
{
	const struct np_node *n;
	const struct value *v = value_of(s, &n);

	return v != NULL ? v->state : n->state;
}

#define STR_FIELD(fn, vfield, nfield)                                                              \
	const char *fn(const struct np_node_sum *s)                                                \
	{                                                                                          \
		const struct np_node *n;                                                           \
		const struct value *v = value_of(s, &n);                                           \
		return v != NULL ? np_intern_str_get(v->vfield) : n->nfield;                       \
	}
STR_FIELD(np_node_sum_provider, provider, provider)
STR_FIELD(np_node_sum_pool, pool, pool)
STR_FIELD(np_node_sum_az, az, az)
STR_FIELD(np_node_sum_tenant_name, tenant, tenant_name)
#undef STR_FIELD

const char *
np_node_sum_allocated_to(const struct np_node_sum *s)
{
	const struct np_node *n;
	const void *h = head_of(s);

	if (h == &tag_value)
		return NULL;
	if (h != &tag_whole)
		return ((const struct allocated *)(const void *)s)->allocated_to;
	value_of(s, &n);
	return n->allocated_to;
}

const struct np_strv *
np_node_sum_type(const struct np_node_sum *s)
{
	const struct np_node *n;
	const struct value *v = value_of(s, &n);

	return v != NULL ? np_intern_labels_get(v->type) : &n->type;
}

const json_t *
np_node_sum_resources(const struct np_node_sum *s)
{
	const struct np_node *n;
	const struct value *v = value_of(s, &n);

	if (v != NULL)
		return np_intern_object_get(v->resources);
	return json_is_object(n->resources) ? n->resources : NULL;
}

const struct np_node *
np_node_sum_full(const struct np_node_sum *s)
{
	const struct np_node *n;

	value_of(s, &n);
	return n != NULL && ((const struct whole *)(const void *)s)->offered ? n : NULL;
}

int
np_node_sum_of_provider(const struct np_node_sum *s, const char *provider)
{
	const char *p = s != NULL ? np_node_sum_provider(s) : NULL;

	return p != NULL && provider != NULL && strcmp(p, provider) == 0;
}
