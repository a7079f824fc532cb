/*
 * The static driver's traits (lib/config/drvtraits.h): its provider schema,
 * as upstream Nodepool's nodepool/driver/static/config.py getSchema(), and
 * its cross-checks: node labels are top-level labels, and a node's identity
 * (name, username, connection-port) is unique in the provider.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config/drvtraits.h"
static const struct np_cfg_schema static_provider = {
    .type = SC_MAP,
    .base = &np_cfg_schema_common_provider,
    .keys = KEYS(OPT(
	"pools",
	SEQ((&(const struct np_cfg_schema){
	    .type = SC_MAP,
	    .base = &np_cfg_schema_common_pool,
	    .keys = KEYS(
		REQ("name", STR),
		OPT("nodes", SEQ(MAP(REQ("name", NONEMPTY_STR), REQ("labels", STR_OR_STRSEQ),
				     OPT("username", STR), OPT("timeout", INT),
				     OPT("host-key-checking", BOOL), OPT("host-key", STR_OR_STRSEQ),
				     OPT("connection-port", INT), OPT("ssh-port", INT),
				     OPT("connection-type", STR), OPT("shell-type", STR),
				     OPT("max-parallel-jobs", INT), OPT("python-path", STR))))),
	})))),
};

/* path at providers[i].pools[j]: every label of a static node is a
 * top-level label (upstream's ConfigValidator for static pools). */
static void
static_check_pool(struct np_drv_check *ck, const struct np_cfg_node *prov,
		  const struct np_cfg_node *pool)
{
	const struct np_cfg_node *nodes = np_cfg_get(pool, "nodes");
	size_t i, k, old;

	if (nodes == NULL || nodes->kind != NP_CFG_SEQ)
		return;
	old = np_drv_check_key(ck, "nodes");
	for (i = 0; i < nodes->n; i++) {
		const struct np_cfg_node *node = nodes->items[i];
		struct np_cfg_strv labels = {NULL, 0};

		np_cfg_static_node_labels(node, &labels);
		for (k = 0; k < labels.n; k++)
			if (!np_drv_check_top_label(ck, labels.v[k])) {
				size_t o1 = np_drv_check_idx(ck, i);

				np_drv_check_err(ck, node, "labels",
						 "label %s in provider %s not in top-level labels",
						 labels.v[k], np_cfg_str(prov, "name", "?"));
				np_drv_check_pop(ck, o1);
			}
		np_cfg_strv_free(&labels);
	}
	np_drv_check_pop(ck, old);
}

/* Order of static nodes by identity, then position. */
static int
static_identity_cmp(const void *pa, const void *pb)
{
	const struct np_drv_pool_item *a = pa, *b = pb;
	int c = strcmp(a->key, b->key);

	if (c == 0)
		c = strcmp(np_cfg_str(a->item, "username", "zuul"),
			   np_cfg_str(b->item, "username", "zuul"));
	if (c == 0)
		c = np_cfg_static_port(a->item) - np_cfg_static_port(b->item);
	if (c == 0)
		c = a->order < b->order ? -1 : a->order > b->order;
	return c;
}

/* path at providers[i]: a static node's identity (name, username, port), as
 * the static driver's nodeTuple, is unique within the provider. */
static void
static_check_provider(struct np_drv_check *ck, const struct np_cfg_node *prov)
{
	size_t n, i, first = 0;
	struct np_drv_pool_item *v = np_drv_pool_items(prov, "nodes", "name", &n);

	if (n > 1)
		qsort(v, n, sizeof(*v), static_identity_cmp);
	for (i = 1; i < n; i++) {
		struct np_drv_pool_item a = v[first], b = v[i];
		size_t old;

		a.order = b.order = 0;
		if (static_identity_cmp(&a, &b) != 0) {
			first = i;
			continue;
		}
		old = np_drv_check_pool_item(ck, &v[i], "nodes");
		np_drv_check_err(
		    ck, v[i].item, "name",
		    "static node %s (username %s, port %d) is already defined (line %d)", v[i].key,
		    np_cfg_str(v[i].item, "username", "zuul"), np_cfg_static_port(v[i].item),
		    v[first].item->line);
		np_drv_check_pop(ck, old);
	}
	free(v);
}

const struct np_drv_traits np_traits_static = {
    .name = "static",
    .schema = &static_provider,
    .flags = NP_DRV_STATIC_NODES,
    .check_provider = static_check_provider,
    .check_pool = static_check_pool,
};
