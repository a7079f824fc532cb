/*
 * A compact summary of a Node record (/nodepool/nodes/<id>): what a worker
 * reads of the nodes of every provider, so that it keeps the full record
 * (struct np_node, model.h) only for its own provider's nodes (issue 13:
 * a worker keeps only what it needs).
 *
 * Who reads which field of another provider's node:
 *   state          min-ready (ready nodes of a label, any provider, as
 *                  upstream's launcher counts them), the node cache's
 *                  events, metrics and statsd gauges;
 *   provider       "is it ours" (cleanup, reuse, static slots, events),
 *                  metrics and statsd per provider;
 *   pool           reuse of a ready node and the static driver's slots (own
 *                  provider's nodes, but read before knowing that);
 *   type (labels)  min-ready, reuse, metrics and statsd per label;
 *   allocated_to   min-ready (unallocated ready nodes), lost-request
 *                  cleanup (the nodes of a request no one holds), reuse;
 *   tenant_name,
 *   resources      tenant resource limits (usage of a tenant over every
 *                  provider, reference 2.6);
 *   az             AZ grouping of a nodeset (own pool's nodes only);
 *   lock presence  not here: the cache entry's `locked` counts contenders.
 * Everything else (addresses, host keys, user data, driver data, times,
 * unknown keys...) is read only for our own nodes, from the full record.
 *
 * Strings and label sets of the summary are interned: a fleet has few
 * providers, pools, labels, tenants, AZs and resource shapes, so each
 * distinct value is held once per process (tables never shrink; past
 * NP_NODE_SUM_INTERN_MAX distinct values a summary holds its own copy).
 * The node id and allocated_to are stored inline, in the summary's one
 * allocation. A summary is about 100 bytes where a decoded record is 3-4 kB.
 */
#ifndef NP_NODESUM_H
#define NP_NODESUM_H

#include "model.h"

#define NP_NODE_SUM_INTERN_MAX 8192 /* distinct values per table */

struct np_node_sum {
	/* the full record (owned), for nodes we keep whole; NULL otherwise */
	struct np_node *full;
	/* interned (or owned, see `owned`); NULL = JSON null */
	const char *provider, *pool, *az, *tenant_name;
	const struct np_strv *type; /* labels; interned or owned; never NULL */
	json_t *resources;	    /* a reference of ours (shared); NULL if not an object */
	const char *allocated_to;   /* inline; NULL = unallocated */
	int state;		    /* enum np_node_state, -1 unknown */
	unsigned owned;		    /* private: fields not interned */
	char id[];		    /* the node id (znode name), NUL-terminated, inline */
};

/*
 * The summary of n, taking ownership of n: kept as ->full when keep_full,
 * freed otherwise. n must not be NULL. Never fails (memory exhaustion
 * aborts).
 */
struct np_node_sum *np_node_sum_new(struct np_node *n, int keep_full);
/* Frees the summary and its full record. NULL is a no-op. */
void np_node_sum_free(struct np_node_sum *s);
/* 1 when the node belongs to provider (a NULL provider matches nothing). */
int np_node_sum_of_provider(const struct np_node_sum *s, const char *provider);

#endif
