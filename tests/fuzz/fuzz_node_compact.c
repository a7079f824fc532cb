/*
 * libFuzzer target: the compact forms of a node record (protocol/nodesum.h,
 * a worker's summary of another provider's node; lib/ops/nodeview.h,
 * nodepool-web's view) answer exactly as the full record does. For any
 * input np_node_decode accepts: every summary field equals the record's,
 * and the node-list row rendered from the view is the same JSON and text
 * as the one rendered from the record. Any difference aborts.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/model.h"
#include "protocol/nodesum.h"
#include "lib/ops/nodeview.h"
#include "lib/ops/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
differ(const char *what, const char *a, const char *b)
{
	fprintf(stderr, "compact form differs: %s\nfull:    %s\ncompact: %s\n", what,
		a != NULL ? a : "(null)", b != NULL ? b : "(null)");
	abort();
}

static void
same_str(const char *what, const char *a, const char *b)
{
	if ((a == NULL) != (b == NULL) || (a != NULL && strcmp(a, b) != 0))
		differ(what, a, b);
}

static void
check_sum(const struct np_node *n)
{
	struct np_node_sum *s = np_node_sum_new(np_node_dup(n), 0);
	const struct np_strv *t = np_node_sum_type(s);
	const json_t *r = np_node_sum_resources(s);
	size_t i;

	if (np_node_sum_state(s) != n->state)
		differ("state", NULL, NULL);
	same_str("provider", n->provider, np_node_sum_provider(s));
	same_str("pool", n->pool, np_node_sum_pool(s));
	same_str("az", n->az, np_node_sum_az(s));
	same_str("tenant_name", n->tenant_name, np_node_sum_tenant_name(s));
	same_str("allocated_to", n->allocated_to, np_node_sum_allocated_to(s));
	if (t->n != n->type.n)
		differ("label count", NULL, NULL);
	for (i = 0; i < t->n; i++)
		same_str("label", n->type.v[i], t->v[i]);
	if (json_is_object(n->resources) ? r == NULL || !json_equal((json_t *)r, n->resources)
					 : r != NULL)
		differ("resources", NULL, NULL);
	if (np_node_sum_full(s) != NULL)
		differ("another provider's record offered whole", NULL, NULL);
	np_node_sum_free(s);
}

static void
check_view(struct np_node *n)
{
	struct status_table *a = status_table_new(STATUS_NODE_LIST);
	struct status_table *b = status_table_new(STATUS_NODE_LIST);
	struct np_node_view *v;
	char *x, *y;
	int taken;

	status_add_node(a, n, 1, 1800000000.0);
	v = np_node_view_new(n, &taken);
	status_add_node_view(b, n->id, v, 1, 1800000000.0);
	x = status_json(a);
	y = status_json(b);
	if (strcmp(x, y) != 0)
		differ("node-list JSON", x, y);
	free(x);
	free(y);
	x = status_text(a, NULL, 0, 1800000000.0);
	y = status_text(b, NULL, 0, 1800000000.0);
	if (strcmp(x, y) != 0)
		differ("node-list text", x, y);
	free(x);
	free(y);
	status_table_free(a);
	status_table_free(b);
	np_node_view_free(v);
	if (!taken)
		np_node_free(n);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct np_node *n = NULL;
	char err[256];

	if (np_node_decode("0000000001", (const char *)data, size, &n, err, sizeof(err)) != 0)
		return 0;
	check_sum(n);
	check_view(n);
	return 0;
}
