/* Compact node summaries (protocol/nodesum.h): what a worker keeps of
 * another provider's node. Records from tests/data/golden (as upstream and
 * Zuul write them). */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "nodesum.h"

static struct np_node *
golden(const char *name, const char *id)
{
	char path[256], err[256], *buf;
	struct np_node *n = NULL;
	FILE *f;
	long len;

	snprintf(path, sizeof(path), "tests/data/golden/%s", name);
	f = fopen(path, "rb");
	cr_assert_not_null(f, "%s", path);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	buf = malloc((size_t)len + 1);
	cr_assert_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	cr_assert_eq(np_node_decode(id, buf, (size_t)len, &n, err, sizeof(err)), 0, "%s", err);
	free(buf);
	return n;
}

Test(nodesum, keeps_what_consumers_read)
{
	struct np_node_sum *s = np_node_sum_new(golden("node-aws.json", "0000000042"), 0);

	cr_assert_str_eq(s->id, "0000000042");
	cr_assert_eq(s->state, NP_NODE_READY);
	cr_assert_str_eq(s->provider, "rax-dfw");
	cr_assert_str_eq(s->pool, "main");
	cr_assert_str_eq(s->az, "us-east-1a");
	cr_assert_str_eq(s->tenant_name, "example");
	cr_assert_null(s->allocated_to);
	cr_assert_eq(s->type->n, 1);
	cr_assert_str_eq(s->type->v[0], "ubuntu-jammy");
	cr_assert(json_is_object(s->resources));
	cr_assert_eq(json_integer_value(json_object_get(s->resources, "cores")), 2);
	cr_assert_eq(json_integer_value(json_object_get(s->resources, "ram")), 4096);
	cr_assert_eq(json_integer_value(json_object_get(s->resources, "L-1216C47A")), 2);
	cr_assert_null(s->full, "another provider's record is not kept whole");
	cr_assert(np_node_sum_of_provider(s, "rax-dfw"));
	cr_assert_not(np_node_sum_of_provider(s, "rax-ord"));
	cr_assert_not(np_node_sum_of_provider(s, NULL));
	np_node_sum_free(s);
}

Test(nodesum, allocated_and_full)
{
	struct np_node *n = golden("node-zuul-in-use.json", "0000000007");
	char *want = n->allocated_to != NULL ? strdup(n->allocated_to) : NULL;
	struct np_node_sum *s = np_node_sum_new(n, 1);

	cr_assert_not_null(want, "the in-use record is allocated");
	cr_assert_eq(s->state, NP_NODE_IN_USE);
	cr_assert_str_eq(s->allocated_to, want);
	cr_assert_eq(s->full, n, "kept whole when asked");
	cr_assert_str_eq(s->full->id, "0000000007");
	free(want);
	np_node_sum_free(s);
}

Test(nodesum, shared_values_are_held_once)
{
	struct np_node_sum *a = np_node_sum_new(golden("node-aws.json", "1"), 0);
	struct np_node_sum *b = np_node_sum_new(golden("node-aws.json", "2"), 0);

	cr_assert_eq(a->provider, b->provider, "provider interned");
	cr_assert_eq(a->pool, b->pool);
	cr_assert_eq(a->type, b->type, "label set interned");
	cr_assert_eq(a->resources, b->resources, "resource shape interned");
	cr_assert_str_eq(a->id, "1");
	cr_assert_str_eq(b->id, "2");
	np_node_sum_free(a);
	/* b's shared values outlive a */
	cr_assert_str_eq(b->provider, "rax-dfw");
	cr_assert_eq(json_integer_value(json_object_get(b->resources, "cores")), 2);
	np_node_sum_free(b);
}

Test(nodesum, minimal_record_defaults)
{
	struct np_node *n = NULL;
	struct np_node_sum *s;
	char err[256];
	const char *body = "{\"state\": \"ready\", \"type\": \"bare-label\", \"resources\": 5}";

	cr_assert_eq(np_node_decode("9", body, strlen(body), &n, err, sizeof(err)), 0);
	s = np_node_sum_new(n, 0);
	cr_assert_eq(s->state, NP_NODE_READY);
	cr_assert_null(s->provider);
	cr_assert_null(s->pool);
	cr_assert_null(s->tenant_name);
	cr_assert_null(s->resources, "resources not an object: none");
	cr_assert_eq(s->type->n, 1, "a bare string is one label");
	cr_assert_str_eq(s->type->v[0], "bare-label");
	cr_assert_not(np_node_sum_of_provider(s, "x"));
	np_node_sum_free(s);

	body = "{\"state\": \"no-such-state\"}";
	cr_assert_eq(np_node_decode("10", body, strlen(body), &n, err, sizeof(err)), 0);
	s = np_node_sum_new(n, 0);
	cr_assert_eq(s->state, -1, "an unknown state matches no state test");
	cr_assert_eq(s->type->n, 0);
	np_node_sum_free(s);
}

Test(nodesum, past_the_intern_limit_values_are_owned)
{
	int i;
	char body[200], err[256];
	struct np_node_sum *keep[3];

	/* more distinct providers than the table holds: the later ones are
	 * the summary's own copies, freed with it */
	for (i = 0; i < NP_NODE_SUM_INTERN_MAX + 3; i++) {
		struct np_node *n = NULL;
		struct np_node_sum *s;
		int k = snprintf(
		    body, sizeof(body),
		    "{\"provider\": \"p-%d\", \"pool\": \"q-%d\", \"type\": [\"l-%d\"]}", i, i, i);
		cr_assert_eq(np_node_decode("1", body, (size_t)k, &n, err, sizeof(err)), 0);
		s = np_node_sum_new(n, 0);
		if (i >= NP_NODE_SUM_INTERN_MAX)
			keep[i - NP_NODE_SUM_INTERN_MAX] = s;
		else
			np_node_sum_free(s);
	}
	for (i = 0; i < 3; i++) {
		char want[32];
		snprintf(want, sizeof(want), "p-%d", NP_NODE_SUM_INTERN_MAX + i);
		cr_assert_str_eq(keep[i]->provider, want);
		snprintf(want, sizeof(want), "l-%d", NP_NODE_SUM_INTERN_MAX + i);
		cr_assert_str_eq(keep[i]->type->v[0], want);
		np_node_sum_free(keep[i]);
	}
}
