/*
 * What nodepool-web keeps of a node record: exactly what its endpoints
 * show (issue 13), in a compact form, instead of the record's text.
 *
 * Who reads what (upstream's status.py node_list, our status.c):
 *   /node-list      every column of status_add_node: id (the cache entry's
 *                   name, not kept here), provider, labels, server id
 *                   (external_id, a string or any JSON), public_ipv4, ipv6,
 *                   state, age (state_time), locked (the cache entry),
 *                   pool, hostname, private_ipv4, AZ, username,
 *                   connection_port (or "redacted"), launcher,
 *                   allocated_to, hold_job, comment, user_data, driver_data;
 *                   and the odd values of provider, state, pool, hostname,
 *                   hold_job and comment, shown verbatim;
 *   /metrics        state, provider, labels (and whether the record could
 *                   be read at all);
 *   /label-list, /request-list, /image-*, /ready: no node field.
 * Nothing else of a record (host keys, interface_ip, cloud, region,
 * image_id, attributes, resources, times other than state_time, unknown
 * keys...) is kept.
 *
 * The form: the state as a byte, provider, pool, AZ, username, launcher and
 * the label list as 16-bit indices into the process's intern tables
 * (intern.h), state_time and the port as numbers, and the other strings
 * and JSON values (compact JSON text, exported as status.c shows them)
 * packed one after another in the same allocation, each present one
 * flagged in a bit mask. A record with a value the intern tables cannot
 * take, or a JSON value that cannot be written back as text, is kept whole
 * (struct np_node) and shown from it: larger, never dropped or changed.
 */
#ifndef NP_NODEVIEW_H
#define NP_NODEVIEW_H

#include "protocol/model.h"
#include "lib/ops/status.h"

struct np_node_view; /* opaque */

/* The view of n (n is only read; the caller keeps it), or, when it must be
 * kept whole, one that takes n: *taken is then 1 and the caller must not
 * free n. Never NULL (memory exhaustion aborts). */
struct np_node_view *np_node_view_new(struct np_node *n, int *taken);
void np_node_view_free(struct np_node_view *v); /* NULL is a no-op */

int np_node_view_state(const struct np_node_view *v); /* -1 unknown */
const char *np_node_view_provider(const struct np_node_view *v);
const struct np_strv *np_node_view_type(const struct np_node_view *v);
const char *np_node_view_pool(const struct np_node_view *v);  /* NULL if none */
double np_node_view_state_time(const struct np_node_view *v); /* epoch seconds */
/* resources.cores and .ram (MiB) of the record, 0 when absent (as
 * upstream's Node.resources, which quota accounting reads). */
void np_node_view_resources(const struct np_node_view *v, long long *cores, long long *ram);
/* The whole record when the view keeps it (held nodes always, so that
 * their hold_expiration is at hand; odd records), else NULL. */
const struct np_node *np_node_view_whole(const struct np_node_view *v);

/* status_add_node for the node id (the cache entry's name) of view v. */
void status_add_node_view(struct status_table *t, const char *id, const struct np_node_view *v,
			  int locked, double now);

/* status_nodes_from_cache for a /nodepool/nodes cache whose objects are
 * np_node_view (nodepool-web's). */
void status_nodes_from_views(struct status_table *t, const struct zk_cache *nodes,
			     const char *node_id, double now);

#endif
