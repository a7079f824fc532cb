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
 *   node id        not here: the cache entry's name (zk_cache_entry.name);
 *   lock presence  not here: the cache entry's `locked` counts contenders.
 * Everything else (addresses, host keys, user data, driver data, times,
 * unknown keys...) is read only for our own nodes, from the full record.
 *
 * Two shapes behind one opaque type, read through the functions below:
 *   - a record kept whole (our own provider's nodes, or every node when
 *     asked): the record and nothing else (16 bytes + the record);
 *   - another provider's node: its state and the 16-bit indices of its
 *     interned provider, pool, AZ, tenant, label list and resource shape
 *     (intern.h) form a value that equal nodes share (reference-counted,
 *     freed with its last node), so an unallocated node costs no
 *     allocation of its own; an allocated one holds the shared value's
 *     address and its allocated_to inline (32 bytes with malloc's overhead
 *     for Zuul's request ids, "200-0000000042").
 * A foreign record with a value the intern tables cannot take (more than
 * NP_INTERN_MAX distinct ones) is kept whole instead, though not offered as
 * a full record (np_node_sum_full NULL): larger, never dropped.
 */
#ifndef NP_NODESUM_H
#define NP_NODESUM_H

#include "protocol/model.h"

struct np_node_sum; /* opaque */

/*
 * The summary of n, taking ownership of n: kept as the full record when
 * keep_full, freed otherwise. n must not be NULL. Never fails (memory
 * exhaustion aborts).
 */
struct np_node_sum *np_node_sum_new(struct np_node *n, int keep_full);
/* Frees the summary and its full record. NULL is a no-op. */
void np_node_sum_free(struct np_node_sum *s);
/* 1 when the node belongs to provider (a NULL provider matches nothing). */
int np_node_sum_of_provider(const struct np_node_sum *s, const char *provider);

/* The fields (s not NULL). Strings are borrowed for the summary's life;
 * NULL = JSON null or missing. */
int np_node_sum_state(const struct np_node_sum *s); /* enum np_node_state, -1 unknown */
const char *np_node_sum_provider(const struct np_node_sum *s);
const char *np_node_sum_pool(const struct np_node_sum *s);
const char *np_node_sum_az(const struct np_node_sum *s);
const char *np_node_sum_tenant_name(const struct np_node_sum *s);
const char *np_node_sum_allocated_to(const struct np_node_sum *s); /* NULL = unallocated */
/* The labels; never NULL (an empty list for none). */
const struct np_strv *np_node_sum_type(const struct np_node_sum *s);
/* The resources object; NULL when the record has none or not an object. */
const json_t *np_node_sum_resources(const struct np_node_sum *s);
/* The full record when kept whole on request (keep_full), else NULL. */
const struct np_node *np_node_sum_full(const struct np_node_sum *s);

#endif
